"""Benchmark the model runtime's own cost: the agent loop's overhead per turn, and CLI start-up.

Run: `.venv/bin/python bench/runtime_bench.py [--turns N] [--rounds R]`.
- Loop overhead per turn: a scripted N-turn stage (each turn one tool call) through `run_stage`
  against the local fake Messages API, minus the same N `messages.create` calls made with the bare
  SDK against the same server in the same run, divided by N. That leaves what crustacean adds per
  turn (request building, tool execution, run record, log), without the server's or SDK's time.
- CLI start-up: `crustacean paths` (a command that reads config and answers) against
  `python -c pass`, both as fresh processes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the fake Messages API lives with the tests

from fakeapi import FakeAnthropic, text, tool_use

from bench.common import count, data_size, isolate, p95, row
from crustacean.config import load_config
from crustacean.init import init_workspace
from crustacean.llm.loop import StageRequest, build_params
from crustacean.llm.runner import run_stage
from crustacean.workspace import Workspace

KEY = "bench-key"


def loop_overhead(turns: int, rounds: int, root: Path) -> tuple[float, float, float]:
    """(median ms per turn through run_stage, median ms per bare SDK call, overhead ms/turn)."""
    import anthropic

    env = {"ANTHROPIC_API_KEY": KEY}
    req = StageRequest("curate", "# Curate\nbench", "go")
    staged, bare = [], []
    with FakeAnthropic() as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url
        ws = Workspace(root, load_config(root, env=env, overrides=["llm.max_retries=0"]))
        client = anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0)
        params = build_params(req, "claude-sonnet-5-5", [{"role": "user", "content": "go"}])
        for _ in range(rounds):
            fake.enqueue(
                *[tool_use(("list_context_files", {"prefix": "memory/"}))] * (turns - 1),
                text("done"),
            )
            start = time.perf_counter()
            run_stage(ws, req, env=env)
            staged.append((time.perf_counter() - start) / turns)
            fake.enqueue(*[tool_use(("list_context_files", {"prefix": "memory/"}))] * turns)
            start = time.perf_counter()
            for _ in range(turns):
                client.messages.create(**params)
            bare.append((time.perf_counter() - start) / turns)
        client.close()
    s, b = statistics.median(staged) * 1000, statistics.median(bare) * 1000
    return s, b, s - b


def startup(rounds: int, cwd: Path) -> tuple[list[float], list[float]]:
    """ms per fresh process: `crustacean paths`, and `python -c pass`."""
    exe = Path(sys.executable).parent / "crustacean"

    def timed(cmd: list[str]) -> list[float]:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=os.environ.copy())
            times.append((time.perf_counter() - start) * 1000)
        return times

    return timed([str(exe), "paths"]), timed([sys.executable, "-c", "pass"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        init_workspace(root)
        staged, bare, over = loop_overhead(args.turns, args.rounds, root)
        cli_times, py_times = startup(max(args.rounds * 2, 10), root)
    cli, py = statistics.median(cli_times), statistics.median(py_times)
    data_size(f"a fresh workspace; {count(args.turns, 'turn')} x {count(args.rounds, 'round')}")
    row("run_stage, per turn", staged, None, bare, "bare SDK call, same fake server")
    row("agent loop overhead per turn", over, note="run_stage minus the bare SDK call")
    row("CLI start-up (`crustacean paths`)", cli, p95(cli_times), py, "`python -c pass`")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.turns} turns x "
        f"{args.rounds} rounds\n"
    )
    print("| figure | median ms | baseline | baseline ms | ratio |")
    print("|---|---:|---|---:|---:|")
    print(
        f"| run_stage, per turn | {staged:.1f} | bare SDK call, same server | {bare:.1f} | "
        f"{staged / bare:.2f}x |"
    )
    print(f"| loop overhead per turn | {over:.1f} | | | |")
    print(
        f"| CLI start-up (`crustacean paths`) | {cli:.0f} | `python -c pass` | {py:.0f} | "
        f"{cli / py:.1f}x |"
    )


if __name__ == "__main__":
    main()
