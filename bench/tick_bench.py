"""Benchmark `crustacean tick` as cron runs it: a whole tick through the fake API, and a no-op tick.

Run: `.venv/bin/python bench/tick_bench.py [--rounds 5] [--runs 15] [--messages 40]`. Every tick is
`crustacean -w WS tick` as a fresh process, with ANTHROPIC_BASE_URL at the local fake Messages API
(tests/fakeapi.py), the workspace's zone UTC and no retries.

- Whole tick: a fresh workspace each round (`init`, detect off) with an OpenClaw transcript source
  holding MESSAGES messages of the last hour, and a 40-day-old ok run record for every stage, so
  collect, curate, compile and calibrate are all due. The fake is scripted for each: collect
  records one note per 4 messages, curate writes one file and routes every note to it, compile and
  calibrate finish (5 model calls). Reported: the wall time, the fake server's own time answering
  (`FakeAnthropic.busy_seconds`), and wall minus server, which is crustacean's own cost. Baseline:
  a fresh `python` that imports the anthropic SDK and makes the same 5 `messages.create` calls to
  the same server with the same replies, minus its server time likewise: the least any program
  making those calls from cron pays.
- No-op tick: the last round's workspace right after its tick, where every stage has just run, so
  nothing is due (the tick a cron line runs most of the time). RUNS ticks, interleaved with RUNS
  `python -c pass` and RUNS `python -c 'import typer'` (the baseline: the least a typer CLI
  pays). Cron waits for it every 15 minutes: the budget (bench/BUDGETS.md) is a median ≤ 3x the
  typer import's and zero requests to the fake server: a tick with nothing to do costs no
  tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the fake Messages API lives with the tests

from fakeapi import FakeAnthropic, tool_use

from bench.common import budget, budget_table, count, data_size, isolate, p95, row
from crustacean.config import STAGES as STAGE_ORDER
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.runs import RunRecorder, list_runs
from crustacean.stages.curate import entry_id
from crustacean.workspace import Workspace

KEY = "bench-key"
SESSION = "sess-bench"
DESTINATION = "memory/notes/bench-tick.md"
TOPICS = ("the garden", "the budget", "the trip", "the parser", "Ana's visit", "the lease")
BARE = """
import sys
import anthropic
client = anthropic.Anthropic(api_key="bench-key", base_url=sys.argv[1], max_retries=0)
for _ in range(int(sys.argv[2])):
    client.messages.create(
        model="claude-haiku-5-5", max_tokens=1024, messages=[{"role": "user", "content": "go"}]
    )
"""


def workspace(folder: Path, messages: int, now: datetime) -> tuple[Path, list[dict[str, Any]]]:
    """A fresh workspace where every stage is due, with `messages` new transcript lines;
    returns it and the model replies that take every stage through (collect first)."""
    root, sessions = folder / "ws", folder / "openclaw/agents/main/sessions"
    init_workspace(root, detect=False)
    toml = root / "crustacean.toml"
    toml.write_text(
        toml.read_text() + f'\n[[sources]]\nkind = "openclaw"\npath = "{sessions.parents[1]}"\n'
    )
    sessions.mkdir(parents=True)
    start = now - timedelta(hours=1)
    lines = [{"type": "session", "version": 3, "id": SESSION, "timestamp": start.isoformat()}]
    for i in range(messages):
        words = f"about {TOPICS[i % len(TOPICS)]}: message {i}, with a detail worth keeping"
        lines.append(
            {
                "type": "message",
                "id": f"m{i:05d}",
                "timestamp": (start + timedelta(seconds=30 * i)).isoformat(),
                "message": {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": [{"type": "text", "text": words}],
                },
            }
        )
    (sessions / f"{SESSION}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ws = Workspace(root, load_config(root))
    old = now - timedelta(days=40)  # past every stage's slot, monthly calibrate's too
    for stage in STAGE_ORDER:
        with RunRecorder(ws, stage, clock=lambda: old) as rec:
            rec.finish("ok", summary="bench: an old run, so the stage is due")
    return root, script(start, messages)


def script(start: datetime, messages: int) -> list[dict[str, Any]]:
    """collect: one note per 4 messages; curate: write them to one file and route them there;
    compile and calibrate: finish. Curate's entry ids are known ahead: day + bullet text."""
    notes = []
    for i in range(0, messages, 4):
        notes.append(
            {
                "category": "todo",
                "text": f"Follow up on {TOPICS[i % len(TOPICS)]} (message {i}).",
                "refs": [f"m{i + 1}"],  # the one session's messages, in order
                "topic": "bench chat",
            }
        )
    ids = [
        entry_id(f"{start + timedelta(seconds=30 * i):%Y-%m-%d}", f"[todo] {n['text']}")
        for i, n in zip(range(0, messages, 4), notes, strict=True)
    ]
    body = "# Follow-ups\n\n" + "".join(f"- {n['text']}\n" for n in notes)
    write = {
        "message": "curate: follow-ups",
        "changes": [{"path": DESTINATION, "mode": "create", "content": body}],
    }
    routes = {"entries": [{"id": i, "destination": DESTINATION, "reason": "bench"} for i in ids]}
    return [
        tool_use(("record_notes", {"items": notes})),
        tool_use(("write_context", write), ("record_routing", routes)),
        tool_use(("finish", {"summary": "curated"})),
        tool_use(("finish", {"summary": "compiled"})),
        tool_use(("finish", {"summary": "calibrated"})),
    ]


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """(seconds, stdout) of one fresh process, which must exit 0."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd[:4])} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return took, done.stdout


Served = tuple[float, float, int]


def served(fake: FakeAnthropic, cmd: list[str], env: dict[str, str], cwd: Path) -> Served:
    """(wall, server) seconds of one process against the fake, and the requests it made."""
    busy, asked = fake.busy_seconds, len(fake.requests)
    wall, _ = timed(cmd, env, cwd)
    if fake.remaining:
        raise SystemExit(f"{fake.remaining} scripted replies left unused: the script is off")
    return wall, fake.busy_seconds - busy, len(fake.requests) - asked


def whole_ticks(
    fake: FakeAnthropic, tmp: Path, rounds: int, messages: int, env: dict[str, str]
) -> tuple[list[Served], list[Served], Path]:
    """Per round: (wall, server, requests) of a whole tick, then of the bare-SDK baseline."""
    ticks, bares = [], []
    for r in range(rounds):
        now = datetime.now(UTC)
        root, replies = workspace(tmp / f"round-{r}", messages, now)
        fake.enqueue(*replies)
        ticks.append(
            served(
                fake,
                [crustacean(), "-w", str(root), "-c", "collect.max_wait_hours=0", "tick"],
                env,
                root,
            )
        )
        ran = {
            rec.stage: rec.status
            for rec in list_runs(Workspace(root, load_config(root)))
            if rec.started > now - timedelta(hours=1)  # not the 40-day-old records
        }
        if ran != dict.fromkeys(STAGE_ORDER, "ok"):
            raise SystemExit(f"the whole tick did not run every stage ok: {ran}")
        fake.enqueue(*replies)
        bare = [sys.executable, "-c", BARE, fake.url, str(len(replies))]
        bares.append(served(fake, bare, env, root))
    return ticks, bares, root


def noop_ticks(
    fake: FakeAnthropic, root: Path, runs: int, env: dict[str, str]
) -> tuple[list[float], list[float], list[float], int, int, list[float], list[float]]:
    """Interleaved no-op ticks, `python -c pass` and `python -c 'import typer'` (seconds each),
    the requests the ticks made, the stage runs they started (0 unless a slot came round
    during the bench), and the CPU seconds of each tick and each typer import (steadier than
    wall time on a loaded machine)."""
    ws = Workspace(root, load_config(root))
    before, asked = len(list_runs(ws, limit=1000)), len(fake.requests)
    tick, bare = [crustacean(), "-w", str(root), "tick"], [sys.executable, "-c", "pass"]
    typer = [sys.executable, "-c", "import typer"]
    for cmd in (tick, bare, typer):  # warm-up: imports into the page cache
        timed(cmd, env, root)
    ticks, passes, typers, tick_cpu, typer_cpu = [], [], [], [], []
    for _ in range(runs):  # interleaved, so drift hits all alike
        used = children_cpu()
        ticks.append(timed(tick, env, root)[0])
        tick_cpu.append(children_cpu() - used)
        passes.append(timed(bare, env, root)[0])
        used = children_cpu()
        typers.append(timed(typer, env, root)[0])
        typer_cpu.append(children_cpu() - used)
    started = len(list_runs(ws, limit=1000)) - before
    return ticks, passes, typers, len(fake.requests) - asked, started, tick_cpu, typer_cpu


def crustacean() -> str:
    """The venv's console script, as cron would run it."""
    return str(Path(sys.executable).parent / "crustacean")


def ms(values: list[float]) -> list[float]:
    """Seconds to milliseconds, the unit of every figure here."""
    return [v * 1000 for v in values]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="whole ticks, fresh workspace each")
    parser.add_argument("--runs", type=int, default=15, help="no-op ticks (and python -c pass)")
    parser.add_argument("--messages", type=int, default=40, help="new transcript messages")
    args = parser.parse_args()
    if min(args.rounds, args.runs, args.messages) < 1:
        parser.error("--rounds, --runs and --messages must be at least 1")
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        isolate(Path(tmp))
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": fake.url,
            "CRUSTACEAN_WORKSPACE__TIMEZONE": "UTC",
            "CRUSTACEAN_LLM__MAX_RETRIES": "0",
        }
        ticks, bares, root = whole_ticks(fake, Path(tmp), args.rounds, args.messages, env)
        noop, passes, typers, requests, started, noop_cpu, typer_cpu = noop_ticks(
            fake, root, args.runs, env
        )
    calls = int(ticks[0][2])
    wall, server = ms([t[0] for t in ticks]), ms([t[1] for t in ticks])
    net = ms([t[0] - t[1] for t in ticks])
    bare_net = ms([b[0] - b[1] for b in bares])
    noop_ms, pass_ms, typer_ms = ms(noop), ms(passes), ms(typers)
    data_size(
        f"a fresh workspace a round, {count(args.messages, 'new transcript message')}; "
        f"{count(args.rounds, 'whole tick')}, {count(args.runs, 'no-op tick')}"
    )
    name = f"whole tick, 4 stages, {calls} model calls"
    bare_name = f"`python` + anthropic SDK, {calls} calls, same server, minus its server time"
    figures = [
        (f"{name}: wall", wall, None, ""),
        (f"{name}: fake server's time", server, None, ""),
        (f"{name}: wall − server", net, bare_net, bare_name),
        ("`python -c 'import typer'`", typer_ms, pass_ms, "`python -c pass`"),
        (
            f"no-op tick (nothing due; {requests} model requests)",
            noop_ms,
            typer_ms,
            "`python -c 'import typer'`",
        ),
        (
            "no-op tick, CPU (user + system)",
            ms(noop_cpu),
            ms(typer_cpu),
            "`python -c 'import typer'`, CPU",
        ),
    ]
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs; {args.rounds} whole ticks "
        f"({args.messages} new messages, fresh workspace each), {args.runs} no-op ticks; "
        f"{started} stage runs started during the no-op ticks\n"
    )
    print("| figure | median ms | p95 ms | baseline | baseline ms | ratio |")
    print("|---|---:|---:|---|---:|---:|")
    for figure, values, base, base_name in figures:
        med = statistics.median(values)
        high = p95(values) if len(values) >= 10 else None  # of fewer, it is about the maximum
        b = statistics.median(base) if base else None
        row(figure, med, high, b, base_name, note=count(len(values), "run"))
        cells = [
            figure,
            f"{med:.0f}",
            f"{high:.0f}" if high is not None else "",
            base_name,
            f"{b:.0f}" if b is not None else "",
            f"{med / b:.1f}x" if b else "",
        ]
        print("| " + " | ".join(cells) + " |")
    noop_budget = budget(
        "cron, every 15 minutes",
        f"a no-op tick ({count(requests, 'model request')})",
        statistics.median(noop_ms),
        statistics.median(typer_ms),
        "`python -c 'import typer'`",
        3,
        also="0 model requests",
        also_ok=requests == 0,
    )
    print("\n" + budget_table([noop_budget]))
    if requests:
        raise SystemExit(f"the no-op ticks made {requests} model request(s); expected none")


if __name__ == "__main__":
    main()
