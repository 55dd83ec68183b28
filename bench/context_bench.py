"""Benchmark `crustacean context` on a large generated workspace.

Run: `.venv/bin/python bench/context_bench.py [--files N] [--rounds R]`. It builds a workspace of
N memory files (default 10,000) plus 3 years of daily logs, then times context assembly (the core
call, in-process, recall ledger included) for `--for main` without and with a topic, after a
first call that builds the indexes, reported on a row of its own (once per workspace). The baseline,
measured in the same run, is reading the raw bytes of every memory file once (what any loader has
to do at least), so the ratio shows the cost of parsing, tiers and caps on top of I/O.

With the semantic extra installed, one more row: a fresh process loading the model and embedding
one query (what `crustacean search` adds for it), against a fresh process importing numpy (which
the cosines cannot do without).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import count, data_size, isolate, row
from bench.generate import generate_workspace
from crustacean.config import load_config
from crustacean.recall import semantic
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.memories import memory_paths
from crustacean.workspace import Workspace


def _times(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        generate_workspace(root, args.files)
        ws = Workspace(root, load_config(root))
        now = datetime.now(UTC)
        paths = memory_paths(root)

        def read_all() -> None:
            for rel in paths:
                (root / rel).read_bytes()

        base = _times(read_all, args.rounds)
        rows = []
        firsts = []
        for label, topic in (
            ("context --for main", None),
            ("context --for main --topic", "garden budget meeting"),
        ):
            req = ContextRequest("main", topic)
            # the first call builds the memory index (and, with a topic, the search index
            # and its vectors): once per workspace, shown apart from the calls after it
            firsts.append((label, _times(lambda req=req: build_context(ws, req, now), 1)[0]))
            t = _times(lambda req=req: build_context(ws, req, now), args.rounds)
            rows.append((label, t))
        print(
            f"{len(paths)} memory files; Python {platform.python_version()}; "
            f"{args.rounds} rounds each\n"
        )
        print("| figure | median ms | p95 ms | baseline (read every memory file) ms | ratio |")
        print("|---|---:|---:|---:|---:|")
        b = statistics.median(base)
        files, rounds = count(len(paths), "memory file"), count(args.rounds, "round")
        data_size(f"{files} + 3 years of daily logs, {rounds}")
        for label, t in rows:
            m = statistics.median(t)
            row(label, m * 1000, _p95(t) * 1000, b * 1000, "reading every memory file once")
            print(
                f"| {label} | {m * 1000:.0f} | {_p95(t) * 1000:.0f} | {b * 1000:.0f} | "
                f"{m / b:.1f}x |"
            )
        for label, first in firsts:
            name = f"{label}, first call (builds the indexes; once per workspace)"
            row(name, first * 1000, None, b * 1000, "reading every memory file once")
            print(f"| {name} | {first * 1000:.0f} | | {b * 1000:.0f} | {first / b:.1f}x |")
        if semantic.load() is not None:
            _one_query(ws.state_dir, args.rounds)


def _one_query(state_dir: Path, rounds: int) -> None:
    """A fresh process that loads the model and embeds one query (the BPE table cached by the
    calls above), against one that imports numpy; interleaved, so load swings hit both."""
    query = (
        "from pathlib import Path; from crustacean.recall import semantic; "
        f"semantic.load().query('garden budget meeting', Path({str(state_dir)!r}))"
    )
    base, took = [], []
    for _ in range(rounds):
        for code, out in (("import numpy", base), (query, took)):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            out.append(time.perf_counter() - start)
    m, b = statistics.median(took), statistics.median(base)
    print("\n| figure | median ms | p95 ms | baseline (python -c 'import numpy') ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    name = "semantic extra: load and embed one query, fresh process"
    row(name, m * 1000, _p95(took) * 1000, b * 1000, "python -c 'import numpy'")
    print(f"| {name} | {m * 1000:.0f} | {_p95(took) * 1000:.0f} | {b * 1000:.0f} | {m / b:.2f}x |")


if __name__ == "__main__":
    main()
