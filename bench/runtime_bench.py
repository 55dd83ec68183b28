"""Benchmark the model runtime's own cost: the agent loop's overhead per turn, and CLI start-up.

Run: `.venv/bin/python bench/runtime_bench.py [--turns N] [--rounds R]`.
- Loop overhead per turn: a scripted N-turn stage (each turn one tool call) through `run_stage`
  against the local fake Messages API, minus the same N `messages.create` calls made with the bare
  SDK against the same server in the same run, divided by N. That leaves what crustacean adds per
  turn (request building, tool execution, run record, log), without the server's or SDK's time.
- CLI start-up: `crustacean paths` (reads config and answers), `crustacean search` (one word,
  index already fresh), `crustacean context --for main` (what a SessionStart hook runs) and
  `crustacean --help` (the root listing), each a fresh process, interleaved with `python -c pass`
  and `python -c 'import typer'`. A person or an agent at a shell waits for each: the budget
  (bench/BUDGETS.md) is a median ≤ 3x the typer import's, measured in the same run. Wall time is
  the figure; CPU time (getrusage of the children) is printed beside it, as it swings less on a
  loaded machine.

  crustacean's modules are compiled to bytecode first (`compileall`), as pip does when it
  installs a wheel: an editable install under PYTHONDONTWRITEBYTECODE=1 would otherwise
  recompile every crustacean module from source on every start (~20 ms of `context`), a cost no
  installed copy pays and the typer baseline (compiled by pip) never does.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
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
from stagekit import run_stage

import crustacean
from bench.common import budget, budget_table, count, data_size, isolate, p95, row
from crustacean.config import load_config
from crustacean.llm.loop import StageRequest, build_params
from crustacean.ops.init import init_workspace
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


LEXICAL = {"CRUSTACEAN_SEMANTIC": "0"}  # the default install: no semantic extra
FLOOR = "floor: a bare typer app with the hook's options (bench/typer_floor.py)"
HOOK_ARGS = ["context", "--format", "claude-hook"]
STARTUP = {  # figure name: the fresh process it times (`crustacean` is the venv's script)
    "`python -c pass`": [sys.executable, "-c", "pass"],
    "`python -c 'import typer'`": [sys.executable, "-c", "import typer"],
    FLOOR: [sys.executable, str(Path(__file__).with_name("typer_floor.py")), *HOOK_ARGS],
    "CLI start-up (`crustacean paths`)": ["crustacean", "paths"],
    "CLI start-up (`crustacean search garden`)": ["crustacean", "search", "garden"],
    "CLI start-up (`crustacean search garden`, CRUSTACEAN_SEMANTIC=0)": [
        "crustacean",
        "search",
        "garden",
    ],
    "CLI start-up (`crustacean context --for main`)": ["crustacean", "context", "--for", "main"],
    "CLI start-up (the SessionStart hook: `context --format claude-hook`)": [
        "crustacean",
        *HOOK_ARGS,
    ],
    "CLI start-up (`crustacean --help`, the root listing)": ["crustacean", "--help"],
}


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def startup(rounds: int, cwd: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(wall ms, CPU ms) per fresh process for each of STARTUP, interleaved so drift hits all
    alike; one warm-up round first (imports into the page cache, the search index built). A
    figure naming CRUSTACEAN_SEMANTIC=0 runs with the semantic extra switched off."""
    compileall.compile_dir(Path(crustacean.__file__).parent, quiet=1)  # what pip install does
    exe = str(Path(sys.executable).parent / "crustacean")
    cmds = {name: [exe if c == "crustacean" else c for c in cmd] for name, cmd in STARTUP.items()}
    times: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    for r in range(rounds + 1):
        for name, cmd in cmds.items():
            env = {**os.environ, **(LEXICAL if "SEMANTIC=0" in name else {})}
            used, start = _children_cpu(), time.perf_counter()
            subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=env)
            if r:
                times[name].append((time.perf_counter() - start) * 1000)
                cpu[name].append((_children_cpu() - used) * 1000)
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--startup-rounds", type=int, help="timed rounds of the start-up figures (2 x --rounds)"
    )
    args = parser.parse_args()
    startup_rounds = args.startup_rounds or args.rounds * 2  # 10 at the default 5 rounds
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        init_workspace(root)
        staged, bare, over = loop_overhead(args.turns, args.rounds, root)
        starts, cpu = startup(startup_rounds, root)
    medians = {name: statistics.median(t) for name, t in starts.items()}
    cpus = {name: statistics.median(t) for name, t in cpu.items()}
    py, typer_ms = medians["`python -c pass`"], medians["`python -c 'import typer'`"]
    data_size(
        f"a fresh workspace; {count(args.turns, 'turn')} x {count(args.rounds, 'round')}; "
        "start-up with crustacean compiled to bytecode, as installed"
    )
    row("run_stage, per turn", staged, None, bare, "bare SDK call, same fake server")
    row("agent loop overhead per turn", over, note="run_stage minus the bare SDK call")
    row(
        "`python -c 'import typer'`",
        typer_ms,
        p95(starts["`python -c 'import typer'`"]),
        py,
        "`python -c pass`",
    )
    commands = [name for name in STARTUP if name.startswith("CLI")]
    shown = [FLOOR, *commands]  # the floor: a figure, not a budget row
    typer_cpu = cpus["`python -c 'import typer'`"]
    for name in shown:
        cpu_note = f"CPU {cpus[name]:.0f} ms, {cpus[name] / typer_cpu:.2f}x the import's"
        row(
            name,
            medians[name],
            p95(starts[name]),
            typer_ms,
            "`python -c 'import typer'`",
            note=cpu_note,
        )
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.turns} turns x "
        f"{args.rounds} rounds\n"
    )
    print("| figure | median ms | baseline | baseline ms | ratio | CPU ms | CPU ratio |")
    print("|---|---:|---|---:|---:|---:|---:|")
    print(
        f"| run_stage, per turn | {staged:.1f} | bare SDK call, same server | {bare:.1f} | "
        f"{staged / bare:.2f}x | | |"
    )
    print(f"| loop overhead per turn | {over:.1f} | | | | | |")
    print(
        f"| `python -c 'import typer'` | {typer_ms:.0f} | `python -c pass` | {py:.0f} | "
        f"{typer_ms / py:.1f}x | {typer_cpu:.0f} | {typer_cpu / cpus['`python -c pass`']:.1f}x |"
    )
    for name in shown:
        print(
            f"| {name} | {medians[name]:.0f} | `python -c 'import typer'` | {typer_ms:.0f} | "
            f"{medians[name] / typer_ms:.2f}x | {cpus[name]:.0f} | {cpus[name] / typer_cpu:.2f}x |"
        )
    budgets = [
        budget(
            "a person or an agent at a shell",
            name.removeprefix("CLI start-up (").removesuffix(")") + ", start-up",
            medians[name],
            typer_ms,
            "`python -c 'import typer'`",
            3,
        )
        for name in commands
    ]
    print("\n" + budget_table(budgets))


if __name__ == "__main__":
    main()
