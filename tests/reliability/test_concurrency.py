"""Concurrency (issue 12, item 2): two ticks at once, and MCP writers racing a curate run.

(a) Two `crustacean tick` processes start together while collect's model call is held for 2 s
by the fake API: one runs, the other is refused at once and exits 75.
(b) Four `crustacean mcp` server processes, each driven over stdio by its own client, append 10
lines each to one file (read, then write with expected_sha256, retry when stale) while a
`crustacean curate` process writes its own file between delayed model turns. Afterwards every
applied write is exactly one version, the stale writes were refused, and no line is lost.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from fakeapi import FakeAnthropic, delay, tool_use
from mcp import Client, StdioServerParameters
from store_helpers import git

from crustacean.runs import list_runs
from crustacean.stages.curate import entry_id
from crustacean.state import open_state, to_db_time
from crustacean.store.write import Store
from crustacean.workspace import Workspace

EXE = str(Path(sys.executable).parent / "crustacean")
FLAGS = ("-c", "llm.max_retries=0", "-c", "workspace.timezone=UTC")
WRITERS, LINES = 4, 10
SHARED = "memory/notes/shared.md"
TARGET = "knowledge/topics/curated.md"


def cli_env(fake: FakeAnthropic) -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.url}


def versions(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


def authored(root: Path, actor: str) -> int:
    out = subprocess.run(
        ["git", "log", "--format=%an"], cwd=root, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines().count(f"crustacean {actor}")


# ------------------------------------------------------------------ (a) two ticks


def test_two_ticks_one_runs_one_exits_75(ws: Workspace, tmp_path: Path, fake_api: Any) -> None:
    with open_state(ws) as db, db.transaction() as conn:  # stages count as due since 40 days
        conn.execute(
            "UPDATE _migrations SET applied = ?",
            (to_db_time(datetime.now(UTC) - timedelta(days=40)),),
        )
    sessions = tmp_path / "openclaw/agents/main/sessions"
    sessions.mkdir(parents=True)
    stamp = (datetime.now(UTC) - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    msg = {"role": "user", "content": [{"type": "text", "text": "remember the tick test"}]}
    line = {"type": "message", "id": "m1", "parentId": None, "timestamp": stamp, "message": msg}
    (sessions / "s.jsonl").write_text(json.dumps(line) + "\n")
    toml = ws.root / "crustacean.toml"
    extra = f'\n[[sources]]\nkind = "openclaw"\npath = "{tmp_path / "openclaw/agents"}"\n'
    toml.write_text(toml.read_text() + extra)
    item = {"category": "fact", "text": "The tick test ran.", "when": "", "session": "s"}
    fake_api.enqueue(
        delay(2, tool_use(("record_notes", {"items": [item]}))),
        tool_use(("finish", {"summary": "curated the one entry"})),  # curate, after collect
    )
    args = [EXE, "-w", str(ws.root), *FLAGS, "-c", "stages.compile.enabled=false"]
    args += ["-c", "stages.calibrate.enabled=false", "-c", "collect.max_wait_hours=0", "tick"]
    ticks = [
        subprocess.Popen(
            args, env=cli_env(fake_api), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outs = [t.communicate(timeout=60)[0] for t in ticks]
    codes = [t.returncode for t in ticks]
    assert sorted(codes) == [0, 75], (codes, outs)
    ran, refused = outs[codes.index(0)], outs[codes.index(75)]
    assert "collect: ran (ok)" in ran, ran
    assert "another crustacean run holds the workspace" in refused, refused
    runs = sorted((r.stage, r.status) for r in list_runs(ws))
    assert runs == [("collect", "ok"), ("curate", "ok")], runs  # one tick's runs, no others
    assert len(fake_api.messages()) == 2
    print(f"\ntwo ticks: exit codes {codes}; the refused one said: {refused.strip()[:120]}")


# ------------------------------------------------------------------ (b) MCP writers vs curate


def curate_script(day: str, words: list[str], overlap: threading.Event) -> list[Any]:
    """One delayed turn per entry: append its line and report it; then finish, answered only
    once an MCP write has landed while the run is going (so the race happens on any machine)."""
    turns: list[Any] = []
    for word in words:
        change = {"path": TARGET, "mode": "append", "content": f"- Routed {word}.\n"}
        route = {"id": entry_id(day, f"Curate {word}."), "destination": TARGET, "reason": "x"}
        turns.append(
            delay(
                0.8,
                tool_use(
                    ("write_context", {"message": f"route {word}", "changes": [change]}),
                    ("record_routing", {"entries": [route]}),
                ),
            )
        )
    finish = tool_use(("finish", {"summary": "routed"}))

    def after_an_mcp_write(_body: Any) -> Any:
        overlap.wait(600)  # a safety net only: the event comes as soon as one write lands
        return finish

    turns.append(after_an_mcp_write)
    return turns


async def mcp_writers(root: Path, busy: Any, overlap: threading.Event) -> tuple[int, int, int]:
    """WRITERS stdio clients, each with its own `crustacean mcp` process, LINES appends each."""
    applied = refused = 0
    during = 0  # writes applied while the curate process was still running
    params = StdioServerParameters(command=EXE, args=["-w", str(root), "mcp"], env={**os.environ})

    async def writer(w: int) -> None:
        nonlocal applied, refused, during
        async with Client(params) as client:
            for n in range(LINES):
                while True:
                    got = await client.call_tool("read_context_file", {"path": SHARED})
                    sha = json.loads(got.content[0].text)["sha256"]
                    change = {
                        "path": SHARED,
                        "mode": "append",
                        "content": f"- writer {w} line {n}\n",
                        "expected_sha256": sha,
                    }
                    r = await client.call_tool(
                        "write_context", {"message": f"w{w} n{n}", "changes": [change]}
                    )
                    if not r.is_error:
                        applied += 1
                        if busy():
                            during += 1
                            overlap.set()
                        break
                    assert "changed since it was read" in r.content[0].text, r.content[0].text
                    refused += 1

    async with anyio.create_task_group() as tg:
        for w in range(WRITERS):
            tg.start_soon(writer, w)
    return applied, refused, during


def test_mcp_writers_race_a_curate_run(ws: Workspace, fake_api: Any) -> None:
    store = Store(ws)
    store.write_context(
        [
            {"path": SHARED, "mode": "create", "content": "# Shared\n"},
            {"path": TARGET, "mode": "create", "content": "# Curated\n"},
        ],
        actor="user",
        message="start",
    )
    day = datetime.now(UTC).date().isoformat()
    words = [f"entry-{i}" for i in range(3)]
    store.write_context(
        [
            {
                "path": f"memory/{day}.md",
                "mode": "create",
                "content": f"# {day}\n\n" + "".join(f"- Curate {w}.\n" for w in words),
            }
        ],
        actor="user",
        message="daily",
    )
    start = versions(ws.root)
    overlap = threading.Event()
    fake_api.enqueue(*curate_script(day, words, overlap))
    curate = subprocess.Popen(
        [EXE, "-w", str(ws.root), *FLAGS, "curate", "--json"],
        env=cli_env(fake_api),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600  # a safety net: curate's first request is the event
    while not fake_api.messages() and time.monotonic() < deadline:  # curate is mid-run
        time.sleep(0.02)
    busy = lambda: curate.poll() is None  # noqa: E731
    applied, refused, during = anyio.run(mcp_writers, ws.root, busy, overlap)
    out, err = curate.communicate(timeout=60)
    assert curate.returncode == 0, (out, err)
    record = json.loads(out)["run"]
    assert record["status"] == "ok", record

    lines = (ws.root / SHARED).read_text().splitlines()[1:]
    expected = [f"- writer {w} line {n}" for w in range(WRITERS) for n in range(LINES)]
    assert sorted(lines) == sorted(expected)  # no update lost, none applied twice
    for w in range(WRITERS):  # each writer's lines in its own order
        mine = [x for x in lines if x.startswith(f"- writer {w} ")]
        assert mine == [f"- writer {w} line {n}" for n in range(LINES)]
    routed = (ws.root / TARGET).read_text().splitlines()[1:]
    assert routed == [f"- Routed {w}." for w in words]
    curate_versions = len(record["versions"])
    grew = versions(ws.root) - start
    assert applied == WRITERS * LINES
    assert grew == applied + curate_versions, (grew, applied, curate_versions)
    assert authored(ws.root, "mcp") == applied
    assert authored(ws.root, "curate") == curate_versions == len(words)
    with sqlite3.connect(f"file:{ws.root / '.crustacean/state.db'}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT id) FROM curated_entries").fetchone()
    assert rows == (len(words), len(words))
    fsck = subprocess.run(
        ["git", "fsck", "--no-progress"], cwd=ws.root, capture_output=True, text=True
    )
    assert fsck.returncode == 0 and "error" not in fsck.stdout + fsck.stderr
    assert during > 0, "no MCP write overlapped the curate run"
    print(
        f"\nMCP vs curate: {applied} MCP writes applied ({WRITERS} processes x {LINES}), "
        f"{refused} stale writes refused and retried, curate {curate_versions} version(s); "
        f"git grew by {grew} = {applied} + {curate_versions}; {during} MCP writes applied "
        f"while curate was running"
    )
