"""The newcomer's path: `crustacean init --sample`, and `quickstart.sh` with no key (a plan) and
with the fake Messages API standing in for the real one (each stage runs once)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakeapi import prompt_of, tool_use

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.documents import read_document
from crustacean.ops.init import SAMPLE_SOURCES, init_sample, render_sample
from crustacean.runs import list_runs
from crustacean.sources import read_new
from crustacean.sources.discovery import discover
from crustacean.store.versions import Git
from crustacean.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_render_sample_dates_are_relative_to_now() -> None:
    today = NOW.date()
    text = "log {{DAY-0}} {{DAY-35}} at {{AGO 30h05m}} and {{AGO 3h00m}}"
    assert render_sample(text, today, NOW) == (
        "log 2026-11-30 2026-10-26 at 2026-11-29T05:55:00.000Z and 2026-11-30T09:00:00.000Z"
    )


@pytest.fixture
def sample(tmp_path: Path) -> Workspace:
    root = tmp_path / "sample"
    init_sample(root)
    return Workspace(root, load_config(root))


def test_the_sample_is_a_filled_in_workspace_with_history(sample: Workspace) -> None:
    root = sample.root
    memory = (root / "MEMORY.md").read_text()
    template = (REPO / "templates/workspace/MEMORY.md").read_text()
    assert memory != template and "Memory Structure Map" in memory
    assert len(memory.splitlines()) < 500 and len(memory) < 12_000
    assert len(list((root / "memory/contacts").glob("*.md"))) >= 3
    assert len(list((root / "memory/lessons").glob("*.md"))) >= 2
    today = sample.today(datetime.now(UTC))
    logs = [p.name for p in (root / "memory").glob("20*.md")]
    assert f"{today - timedelta(days=2)}.md" in logs and len(logs) >= 5
    for path in root.rglob("*.md"):
        if ".git" not in path.parts:
            assert "{{" not in path.read_text(), path
            read_document(root, path.relative_to(root).as_posix())
    assert "{{" not in "".join(p.as_posix() for p in root.rglob("*"))
    git = Git(root)
    assert git.out("status", "--porcelain") == ""
    assert len(git.out("log", "--format=%s").splitlines()) >= 5


def test_the_sample_transcripts_are_recent_and_readable(sample: Workspace) -> None:
    config = tomllib.loads((sample.root / "crustacean.toml").read_text())
    assert [s["path"] for s in config["sources"]] == [s.path for s in SAMPLE_SOURCES]
    kinds = set()
    since = datetime.now(UTC) - timedelta(days=2)
    for source in sample.settings.sources:
        found = discover(source, base=sample.root)
        assert found, source.path
        for path, kind in found:
            result = read_new(path, kind, None, since=since)
            assert result.bad_lines == 0, path
            kinds.add(kind)
            if "subagents" not in path.parts:
                assert result.messages, path
    assert kinds == {"openclaw", "claude_code"}


def test_sample_refuses_a_folder_that_is_not_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "MEMORY.md").write_text("# my own memory\n")
    before = snapshot(target)
    monkeypatch.chdir(tmp_path)
    result = run_cli("init", "--sample", "mine", code=2)
    assert "is not an empty folder; --sample makes a new demo workspace" in result.output
    assert snapshot(target) == before


def _quickstart(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(REPO / "quickstart.sh", tmp_path)
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
    }
    return subprocess.run(
        ["sh", "quickstart.sh"],
        cwd=tmp_path,
        env={**clean, "PATH": f"{BIN}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_quickstart_without_a_key_plans_calls_nothing_and_its_next_commands_work(
    tmp_path: Path, fake_api: Any
) -> None:
    """The README's first command (tests/test_readme.py checks it is this script). The user's
    shell does not have the PATH the script ran with: every suggested command runs with a bare
    PATH, from the folder the user is in."""
    done = _quickstart(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    steps = re.findall(r"^==> (\S+)", done.stdout, flags=re.M)
    assert steps == ["init", "tick", "status:", "search:", "context", "Done."]
    assert "==> tick --plan" in done.stdout and "Nothing was run or written." in done.stdout
    for stage in ("collect", "curate", "compile", "calibrate"):
        assert re.search(rf"^{stage}: .*~\$\d", done.stdout, flags=re.M), stage
    assert re.search(r"^collect: \d+ new message\(s\) in \d+ transcript", done.stdout, re.M)
    assert re.search(r"^curate: \d+ uncurated daily entries", done.stdout, re.M)
    assert re.search(r"^compile: archive 2 daily log\(s\), sweep 1 hook file", done.stdout, re.M)
    assert "memory/lessons/garden-api-test-database.md" in done.stdout  # the search hit
    assert "# Memory context (main)" in done.stdout
    more = r"^\[\.\.\. \d+ more lines: crustacean context --for main\]$"
    assert re.search(more, done.stdout, re.M)
    assert len(done.stdout.splitlines()) < 120  # an excerpt of the context, not all of it
    assert fake_api.requests == []
    ws = Workspace(tmp_path / "crustacean-sample", load_config(tmp_path / "crustacean-sample"))
    assert list_runs(ws) == [] and (ws.root / "MEMORY.md").is_file()
    tail = done.stdout.split("==> Done.", 1)[1].splitlines()
    cd = next(line.strip() for line in tail if line.strip().startswith("cd "))
    commands = [line.strip() for line in tail[1:] if line.startswith("  '")]
    assert [c.split("' ", 1)[1] for c in commands] == [
        "history",
        "search waitlist demo",
        "context --for main",
        "help",
    ]
    for command in commands:
        ran = subprocess.run(
            ["/bin/sh", "-c", f"{cd} && {command}"],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], **_config_env()},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
        assert ran.stdout.strip(), command
        assert "No good match" not in ran.stdout, command  # the words are in the sample


def _config_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("CRUSTACEAN_CONFIG_DIR")}


def test_quickstart_refuses_an_existing_folder(tmp_path: Path) -> None:
    (tmp_path / "crustacean-sample").mkdir()
    done = _quickstart(tmp_path)
    assert done.returncode == 2
    assert "crustacean-sample already exists" in done.stderr
    assert list((tmp_path / "crustacean-sample").iterdir()) == []


def test_quickstart_with_a_base_url_runs_every_stage_once(tmp_path: Path, fake_api: Any) -> None:
    """The real path, with the fake Messages API set through ANTHROPIC_BASE_URL."""

    def receipts(body: dict[str, Any]) -> dict[str, Any]:
        """The model cites the message about the receipts by its reference, no session label."""
        prompt = prompt_of(body)
        ref = re.search(r"^\[?(m\d+) [^\n]*receipts", prompt, re.M | re.I)
        assert ref, prompt[:2000]
        item = {
            "category": "reminder",
            "text": "Send Priya the November receipts as one PDF.",
            "refs": [ref.group(1)],
            "topic": "receipts for Priya",
        }
        return tool_use(("record_notes", {"items": [item]}))

    fake_api.enqueue(
        receipts,
        tool_use(("finish", {"summary": "nothing to route today"})),
        tool_use(
            ("record_digest", {"patterns": ["garden-api came up every day"]}),
            ("finish", {"summary": "digest recorded"}),
        ),
        tool_use(
            ("record_audit", {"meta": ["the sample looks healthy"]}),
            ("finish", {"summary": "audited"}),
        ),
    )
    done = _quickstart(tmp_path, ANTHROPIC_BASE_URL=fake_api.url)
    assert done.returncode == 0, done.stdout + done.stderr
    steps = re.findall(r"^==> (\S+)", done.stdout, flags=re.M)
    assert steps[:6] == ["init", "collect", "curate", "compile", "calibrate", "review:"]
    assert "==> tick" not in done.stdout
    root = tmp_path / "crustacean-sample"
    ws = Workspace(root, load_config(root))
    runs = {r.stage: r.status for r in list_runs(ws)}
    assert runs == {"collect": "ok", "curate": "ok", "compile": "ok", "calibrate": "ok"}
    assert fake_api.remaining == 0 and len(fake_api.messages()) == 4
    logs = "".join(p.read_text() for p in (root / "memory").glob("20*.md"))
    assert "Send Priya the November receipts as one PDF." in logs
