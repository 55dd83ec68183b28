"""Benchmark of the write layer: what one version costs next to a bare `git commit`.

Run it with `python bench/store_bench.py [-n REPS]` (the project's venv). It builds a fresh
workspace in a temp folder and an identical plain git repository (a byte copy of it), then times,
interleaved so drift hits both alike:

- a one-file append through `Store.write_context` (one version), against writing the same bytes
  to the same file in the copy and running `git add <file>` and `git commit -q -m x`;
- a 20-file version (20 appends in one call), against the same 20 appends then
  `git add <20 files>` and `git commit -q -m x`.

Both are rows of bench/BUDGETS.md (the stage that writes waits for them): median ≤ 2x the
baseline's median.

`write_context` does more than the baseline by design: it validates the whole call (path jail,
policy, sha256, limits, secret scan), writes each file through a temp file with fsync and rename
under a journal (the fsyncs of one call run together), and lets git make the version so the
user's staged work is never swept in, all under git's `index.lock`: one `cat-file --batch-check`
(HEAD and the files' ids, for the snapshot of the user's own edits), then a copy of the user's
index stages the files (`git add --renormalize`, or `update-index` for new and deleted files) and
replaces it, then one `git commit --only` of the files on a scratch copy, then
`git maintenance run --auto` (the settings' `git config` read beside the fsyncs): four git
processes one after another, where the baseline runs two (and `git commit` starts the
maintenance itself). The ratio says what those guarantees cost. A third side, the durable
floor, writes the same appends the way any durable writer must (a temp file each, the fsyncs
together on threads, the renames, the folder's fsync), then runs the same `git add` + `commit`:
what is left above it is crustacean's own work (checks, journal, the user's index left alone).
Git runs with no system or global config in both cases. `--cpu` adds the CPU time per version
(this process and its git children, from getrusage) for both sides.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import budget, budget_table, count, data_size, isolate, open_store, row

N_FILES = 20
ONE = "memory/notes/bench.md"
MANY = [f"memory/notes/bench-{i:02d}.md" for i in range(N_FILES)]
LINE = "- 2024-05-01 10:00 a line the benchmark appends, like a short memory entry ✓\n"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


CPU: dict[str, list[tuple[float, float]]] = {}  # figure -> (this process, git children) ms
FLOORS: dict[str, list[float]] = {}  # figure -> the durable floor's times, ms


def _cpu_now() -> tuple[float, float]:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _ms(fn: Callable[[], object], cpu: list[tuple[float, float]] | None = None) -> float:
    before = _cpu_now()
    start = time.perf_counter()
    fn()
    wall = (time.perf_counter() - start) * 1000
    if cpu is not None:
        after = _cpu_now()
        cpu.append(((after[0] - before[0]) * 1000, (after[1] - before[1]) * 1000))
    return wall


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[94]


def _fresh_store(tmp: Path) -> Any:
    """A new workspace in `tmp` (git isolated from the user's config), and its store."""
    from crustacean.config import load_config
    from crustacean.ops.init import init_workspace
    from crustacean.workspace import Workspace

    isolate(tmp)
    root = tmp / "ws"
    init_workspace(root)
    return open_store(Workspace(root, load_config(root)))


def run(reps: int, warmup: int = 3) -> list[tuple[str, list[float], list[float]]]:
    tmp = Path(tempfile.mkdtemp(prefix="crustacean-bench-"))
    try:
        store = _fresh_store(tmp)
        root = store.root
        store.write_context(
            [{"path": p, "mode": "create", "content": "# bench\n"} for p in [ONE, *MANY]],
            actor="user",
            message="bench: setup",
            max_files=N_FILES + 1,
        )
        plain = tmp / "plain"
        shutil.copytree(root, plain, symlinks=True)  # the identical repository, used bare

        def crustacean(paths: list[str]) -> Callable[[], object]:
            changes = [{"path": p, "mode": "append", "content": LINE} for p in paths]
            return lambda: store.write_context(changes, actor="curate", message="bench: append")

        def bare(paths: list[str]) -> Callable[[], object]:
            def go() -> None:
                for p in paths:
                    with (plain / p).open("a", encoding="utf-8") as fh:
                        fh.write(LINE)
                _git(plain, "add", "--", *paths)
                _git(plain, "commit", "-q", "-m", "x")

            return go

        pool = ThreadPoolExecutor(max_workers=N_FILES)

        def durable(paths: list[str]) -> Callable[[], object]:
            def put(path: str) -> None:
                target = plain / path
                temp = target.with_name(target.name + ".tmp")
                with temp.open("wb") as fh:
                    fh.write(target.read_bytes() + LINE.encode())
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(temp, target)

            def go() -> None:
                list(pool.map(put, paths))
                folder = os.open(plain / "memory" / "notes", os.O_RDONLY)
                try:
                    os.fsync(folder)
                finally:
                    os.close(folder)
                _git(plain, "add", "--", *paths)
                _git(plain, "commit", "-q", "-m", "x")

            return go

        results = []
        for name, paths in (("one-file append", [ONE]), (f"{N_FILES}-file version", MANY)):
            ours, base, floor = crustacean(paths), bare(paths), durable(paths)
            for _ in range(warmup):
                ours()
                base()
                floor()
            a, b, c = [], [], []
            cpu_a, cpu_b = CPU.setdefault(name, []), CPU.setdefault(f"{name} baseline", [])
            for _ in range(reps):  # interleaved: the same load and caches for all three
                a.append(_ms(ours, cpu_a))
                b.append(_ms(base, cpu_b))
                c.append(_ms(floor))
            results.append((name, a, b))
            FLOORS[name] = c
        pool.shutdown()
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def table(results: list[tuple[str, list[float], list[float]]]) -> str:
    rows = [
        "| figure | median ms | p95 ms | baseline median ms | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, ours, base in results:
        med, bmed = statistics.median(ours), statistics.median(base)
        rows.append(f"| {name} | {med:.1f} | {_p95(ours):.1f} | {bmed:.1f} | {med / bmed:.2f}x |")
        row(f"write_context, {name}", med, _p95(ours), bmed, "same appends, `git add` + `commit`")
    rows += [
        "",
        "| durable floor (fsync'd writes, then `git add` + `commit`) | median ms | "
        "p95 ms | baseline median ms | ratio | write_context / floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, ours, base in results:
        floor, med, bmed = FLOORS[name], statistics.median(ours), statistics.median(base)
        fmed = statistics.median(floor)
        rows.append(
            f"| {name} | {fmed:.1f} | {_p95(floor):.1f} | {bmed:.1f} | {fmed / bmed:.2f}x "
            f"| {med / fmed:.2f}x |"
        )
        row(f"durable floor, {name}", fmed, _p95(floor), bmed, "same appends, `git add` + `commit`")
    return "\n".join(rows)


def budgets(results: list[tuple[str, list[float], list[float]]]) -> list[dict[str, Any]]:
    """The stage that writes waits for each version: median ≤ 2x `git add` + `commit`."""
    return [
        budget(
            "the stage that writes",
            f"a {name} through `write_context`",
            statistics.median(ours),
            statistics.median(base),
            "`git add` + `commit` of the same files",
            2,
        )
        for name, ours, base in results
    ]


def cpu_table() -> str:
    """CPU per version, medians: this process (Python; ~0 for the baseline, which only
    starts git) and the git processes it ran."""
    rows = [
        "| CPU per version | this process ms | git ms | total ms |",
        "|---|---:|---:|---:|",
    ]
    for name, samples in CPU.items():
        me = statistics.median(s[0] for s in samples)
        kids = statistics.median(s[1] for s in samples)
        total = statistics.median(s[0] + s[1] for s in samples)
        rows.append(f"| {name} | {me:.1f} | {kids:.1f} | {total:.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--reps", type=int, default=30, help="timed repetitions per figure")
    parser.add_argument("--cpu", action="store_true", help="also print CPU time per version")
    args = parser.parse_args(argv)
    if args.reps < 2:
        parser.error("--reps must be at least 2")
    if shutil.which("git") is None:
        print("git is not installed; the benchmark compares against git.", file=sys.stderr)
        return 1
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    results = run(args.reps)
    data_size(f"a fresh workspace, {count(args.reps, 'timed version')} of each kind")
    print(
        f"crustacean write layer, {args.reps} runs each (after 3 warm-up runs); "
        f"{git_version}; Python {platform.python_version()}; {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPU(s).\n"
        "Baseline: the same appends, then `git add <files>` and `git commit -q -m x` "
        "on an identical plain repository.\n"
    )
    print(table(results))
    print("\n" + budget_table(budgets(results)))
    if args.cpu:
        print("\n" + cpu_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
