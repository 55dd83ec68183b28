"""Benchmark compile's deterministic pass on a 3-year, 10,000-file workspace.

Run: `.venv/bin/python bench/compile_bench.py [--files N] [--days D]`. It generates N memory files
plus D daily logs (three years unless told) and an over-cap MEMORY.md, then times `compile
--no-model` four times: the first run archives ~1,060 old logs (of three years), trashes duplicates,
applies tiers and moves MEMORY.md sections (each kind one version); the second finds nothing to do,
planning the whole tree from compile's file cache (stages/compile_inputs.py: only files whose stat
changed are read; a pass that changed things vouches for nothing); the third has the same inputs as
the second, whose fingerprint in state.db says so (stages/compile_skip.py), and skips the pass; the
fourth follows an edit by hand of one memory, and plans the whole tree again, reading that one file.
The third and fourth are repeated (another memory edited each time) and their medians shown, as is
the baseline, measured in the same run between them: reading every file of the workspace once. Last,
the floors: what the first run's changed files cost at the least, on copies of the workspace as it
found them (written durably one by one; `git add` + `git commit`; written with no sync at all; that
plus one `git fast-import` commit of them, the least any versioned, undoable way can pay).

A first run on a big workspace waits for the first run: its budget (bench/BUDGETS.md) is ≤ 2x
that last floor, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import budget, budget_table, data_size, isolate, row
from bench.generate import generate_workspace
from crustacean.config import load_config
from crustacean.stages.compile import DETERMINISTIC_STEPS, CompileResult, compile_workspace
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
T = TypeVar("T")


REPEATS = 3


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds one call took, and what it returned."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=3 * 365, help="daily logs, one a day")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        generate_workspace(root, args.files, days=args.days)
        sections = "".join(f"## Topic {i}\n" + "- a detail line\n" * 30 for i in range(40))
        (root / "MEMORY.md").write_text("# MEMORY.md\n\n" + sections)
        ws = Workspace(root, load_config(root, env={}))

        def listed() -> list[Path]:
            return [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]

        files = listed()

        def read_all() -> float:
            """Seconds to read every file of the workspace as it is now (listed untimed)."""
            now_there = listed()
            start = time.perf_counter()
            for p in now_there:
                p.read_bytes()
            return time.perf_counter() - start

        def run() -> CompileResult:
            return compile_workspace(ws, env={}, no_model=True, clock=lambda: NOW)

        twin = Path(tmp) / "twin"  # the workspace as the first run finds it, for the floors
        shutil.copytree(root, twin, symlinks=True)
        steps: list[int] = []
        reads = [read_all()]
        first_s, first = timed(
            lambda: compile_workspace(
                ws, env={}, no_model=True, clock=lambda: NOW, progress=lambda d, t: steps.append(d)
            )
        )
        if steps != list(range(1, DETERMINISTIC_STEPS + 1)):
            raise SystemExit(f"the first run showed progress {steps}, not every step")
        after = {
            p: (root / p).read_bytes() if (root / p).is_file() else None for p in first.ops.files
        }
        reads.append(read_all())
        second_s, second = timed(run)
        notes = sorted((root / "memory" / "notes").glob("*.md"))
        thirds, fourths = [], []
        for i in range(REPEATS):  # the cheap figures, repeated: the machine may be loaded
            reads.append(read_all())
            took, third = timed(run)
            thirds.append(took)
            notes[i].write_text(notes[i].read_text() + "\nOne more line, added by hand.\n")
            took, fourth = timed(run)
            fourths.append(took)
            for again in (third, fourth):
                if again.ops.changed_anything or again.record is None:
                    raise SystemExit("a rerun found something to do: the bench's data is off")
        if second.ops.changed_anything or second.record is None:
            raise SystemExit("a rerun found something to do: the bench's data is off")
        read_s = statistics.median(reads)
        floor = floors(twin, after)  # last: they leave the disk busy
        third_s, fourth_s = statistics.median(thirds), statistics.median(fourths)
    ops = first.ops
    n = f"{len(ops.files):,}"
    floor_names = (
        (
            f"floor: the first run's {n} files written one by one (temp, fsync, rename)",
            floor.durable,
        ),
        (f"floor: `git add` + `git commit` of those {n} files", floor.git_add),
        (f"floor: those {n} files written and renamed with no sync at all", floor.unsynced),
        (
            "floor: that, plus one `git fast-import` commit of them (one pack): any versioned, "
            "undoable way",
            floor.unsynced + floor.pack_commit,
        ),
    )
    first_name = (
        f"first run: {len(ops.archived)} archived, {len(ops.trashed)} trashed, "
        f"{len(ops.tiers)} tier changes, {len(ops.promoted)} sections moved"
    )
    rerun_name = f"rerun ({second.record.status}: nothing to do, whole tree planned from the cache)"
    third_name = f"rerun of that ({third.record.status}: same inputs, pass skipped)"
    fourth_name = f"rerun after one memory edited by hand ({fourth.record.status}: tree planned)"
    median = f"median of {REPEATS}"
    runs = (
        (first_name, first_s, "one run"),
        (rerun_name, second_s, "one run"),
        (third_name, third_s, median),
        (fourth_name, fourth_s, median),
    )
    data_size(f"{len(files):,} files: {args.files:,} memory files + {args.days:,} daily logs")
    for name, took, note in runs:
        row(
            f"compile --no-model, {name}",
            took,
            None,
            read_s,
            f"reading every file once (median of {len(reads)})",
            "s",
            note=note,
        )
    for name, took in floor_names:
        row(name, took, None, read_s, "reading every file once", "s", note="one run")
    print(f"{len(files)} files; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print("| figure | seconds | baseline (read every file once) s | ratio |")
    print("|---|---:|---:|---:|")
    for name, took, note in runs:
        print(f"| {name} ({note}) | {took:.2f} | {read_s:.2f} | {took / read_s:.1f}x |")
    for name, took in floor_names:
        print(f"| {name} (one run) | {took:.2f} | {read_s:.2f} | {took / read_s:.1f}x |")
    span = "3 years" if args.days == 3 * 365 else f"{args.days:,} days"
    first_budget = budget(
        "a first run on a big workspace",
        f"compile --no-model, first run over {span}, {n} files changed",
        first_s,
        floor.unsynced + floor.pack_commit,
        "the changed files written + one `git fast-import` commit",
        2,
        stat="one run",
        unit="s",
    )
    print("\n" + budget_table([first_budget]))


@dataclass(frozen=True)
class Floors:
    """Seconds the first run's writes cost at the least (see `floors`)."""

    durable: float  # one by one, each temp file fsynced before its rename
    git_add: float  # `git add` + `git commit` of them
    unsynced: float  # temp file and rename each, no sync at all
    pack_commit: float  # one `git fast-import` commit of them: every blob in one pack


def floors(twin: Path, after: dict[str, bytes | None]) -> Floors:
    """What the first run's writes cost at the least, on copies of `twin` (the workspace before
    it): the same files given their new bytes (`after`, None: gone), each durable (temp file,
    fsync, rename, as one-file writes do), then versioned by plain `git add` + `git commit`; and
    on a second copy, written with no sync at all, then versioned as one commit whose blobs go
    into one pack (`git fast-import`): the least any versioned, undoable way pays for them."""
    bare = twin.with_name(twin.name + "-unsynced")
    shutil.copytree(twin, bare, symlinks=True)
    unsynced_s = place(bare, after, sync=False)
    pack_s = pack_commit(bare, after)
    durable_s = place(twin, after, sync=True)
    there = "".join(f"{p}\0" for p, data in after.items() if data is not None)
    gone = [p for p, data in after.items() if data is None]
    start = time.perf_counter()
    git = ["git", "-C", str(twin)]
    subprocess.run(
        [*git, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"],
        input=there,
        text=True,
        check=True,
    )
    if gone:  # untracked before, so not named to `git add`: dropped from the index if there
        subprocess.run(
            [
                *git,
                "rm",
                "-q",
                "--cached",
                "--ignore-unmatch",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            input="".join(f"{p}\0" for p in gone),
            text=True,
            check=True,
        )
    subprocess.run([*git, "commit", "-q", "--no-verify", "-m", "floor"], check=True)
    git_s = time.perf_counter() - start
    return Floors(durable_s, git_s, unsynced_s, pack_s)


def place(root: Path, after: dict[str, bytes | None], *, sync: bool) -> float:
    """Seconds to give each file its new bytes through a temp file and a rename (fsynced first
    with `sync`), or to remove it."""
    start = time.perf_counter()
    for rel, data in after.items():
        full = root / rel
        if data is None:
            full.unlink(missing_ok=True)
            continue
        full.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=full.parent, prefix=f".{full.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, full)
    return time.perf_counter() - start


def pack_commit(root: Path, after: dict[str, bytes | None]) -> float:
    """Seconds for one commit on HEAD holding `after` (each blob inline, all in one pack, the
    branch moved), as `git fast-import` writes it: no index, no loose object, one process."""
    branch = subprocess.run(
        ["git", "-C", str(root), "symbolic-ref", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    parts = [
        f"commit {branch}\ncommitter floor <floor@localhost> 1764504000 +0000\n"
        f"data 5\nfloor\nfrom {head}\n".encode()
    ]
    for rel, data in after.items():
        if data is None:
            parts.append(f"D {rel}\n".encode())
        else:
            parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (rel.encode(), len(data), data))
    stream = b"".join(parts) + b"\ndone\n"
    start = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(root), "fast-import", "--quiet", "--done", "--depth=0"],
        input=stream,
        check=True,
    )
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
