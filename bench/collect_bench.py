"""Benchmark collect's cursors: a run over a big transcript set, then a run after 10 new lines.

Run: `.venv/bin/python bench/collect_bench.py [--mb 1024] [--files 40]`. It writes an OpenClaw-style
transcript set of about MB megabytes (old messages, outside collect's 2-day window), runs collect
once (which reads every byte to build the cursors; no model call since nothing is recent), then
appends 10 recent lines spread over the files and runs collect again through the local fake
Messages API. The second run should cost in proportion to the 10 lines, not to the set: compare it
with the first run, and with reading just the appended bytes (seek + read, measured the same way).
The first run is also a throughput, MB/s of transcript files, against `cat` of the same files to
/dev/null: the median of three cats run right after it, so both read a warm page cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakeapi import FakeAnthropic, tool_use

from bench.common import count, data_size, isolate, row
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.stages.collect import collect
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def line(i: int, stamp: str, words: str) -> bytes:
    return (
        json.dumps(
            {
                "type": "message",
                "id": f"e{i:08x}",
                "timestamp": stamp,
                "message": {
                    "role": "user" if i % 2 else "assistant",
                    "content": [{"type": "text", "text": words}],
                },
            }
        )
        + "\n"
    ).encode()


def write_set(folder: Path, total_mb: int, files: int) -> list[Path]:
    """Old transcripts (2025), written fast by repeating one block."""
    folder.mkdir(parents=True)
    per_file = total_mb * 1024 * 1024 // files
    filler = "we talked about the garden, the budget, and the trip in some detail " * 12
    paths = []
    for f in range(files):
        block = b"".join(
            line(f * 100_000 + i, "2025-06-01T10:00:00.000Z", filler) for i in range(500)
        )
        path = folder / f"s{f:03d}.jsonl"
        with path.open("wb") as fh:
            fh.write(
                json.dumps(
                    {
                        "type": "session",
                        "version": 3,
                        "id": f"s{f:03d}",
                        "timestamp": "2025-06-01T10:00:00.000Z",
                    }
                ).encode()
                + b"\n"
            )
            written = 0
            while written < per_file:
                fh.write(block)
                written += len(block)
        paths.append(path)
    return paths


def cat_seconds(paths: list[Path], rounds: int = 3) -> float:
    """Median wall time of `cat <files> > /dev/null`: the floor for reading the same bytes.

    Run right after collect's first run, so both read a page cache the set was just written to."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(["cat", *map(str, paths)], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--files", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        init_workspace(root, detect=False)
        sessions = Path(tmp) / "agents/main/sessions"
        paths = write_set(sessions, args.mb, args.files)
        total = sum(p.stat().st_size for p in paths)
        toml = root / "crustacean.toml"
        toml.write_text(
            toml.read_text()
            + f'\n[[sources]]\nkind = "openclaw"\npath = "{sessions.parent.parent}"\n'
        )
        env = {"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": fake.url}
        ws = Workspace(root, load_config(root, env=env))

        start = time.perf_counter()
        first = collect(ws, env=env, clock=lambda: NOW)
        first_s = time.perf_counter() - start
        cat_s = cat_seconds(paths)

        start = time.perf_counter()
        import anthropic  # noqa: F401  (a fixed per-process cost of any run that calls a model)

        import_s = time.perf_counter() - start
        offsets = {p: p.stat().st_size for p in paths}
        for i in range(10):
            with paths[i % len(paths)].open("ab") as fh:
                fh.write(
                    line(
                        900_000_000 + i,
                        "2026-11-30T11:00:00.000Z",
                        f"new line {i}: remind me to water the plants",
                    )
                )
        fake.enqueue(tool_use(("record_notes", {"items": []})))
        start = time.perf_counter()
        second = collect(ws, env=env, clock=lambda: NOW)
        second_s = time.perf_counter() - start

        start = time.perf_counter()
        new_bytes = 0
        for p, off in offsets.items():
            with p.open("rb") as fh:
                fh.seek(off)
                new_bytes += len(fh.read())
        read_s = time.perf_counter() - start

    mb = total / 1e6
    amount = f"{total / 1e9:.2f} GB" if total >= 1e9 else f"{mb:.1f} MB"
    data_size(f"{amount} in {count(len(paths), 'transcript file')} (+ 10 new lines)")
    row(
        f"collect, first run over the whole set (reads every byte; {first.record.status})",
        mb / first_s,
        baseline=mb / cat_s,
        baseline_name="`cat` of the same files > /dev/null, median of 3, after the run",
        unit="MB/s",
        ratio=first_s / cat_s,
        ratio_label="x slower than cat",
        note=f"one run: {first_s:.1f} s",
    )
    row(
        f"collect, second run: 10 new lines ({second.record.status}; 1 model call)",
        second_s * 1000,
        baseline=first_s * 1000,
        baseline_name="the first run",
        note="one run",
    )
    row(
        "collect, second run vs reading the new bytes",
        second_s * 1000,
        baseline=read_s * 1000,
        baseline_name=f"seek + read of the {new_bytes} new bytes",
        note="one run",
    )
    row("importing the anthropic SDK (not in the above)", import_s * 1000, note="once a process")
    print(
        f"{len(paths)} transcript files, {total / 1e9:.2f} GB; Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| figure | seconds | baseline | baseline s | ratio |")
    print("|---|---:|---|---:|---:|")
    print(
        f"| first run (build cursors, {first.record.status}), {mb / first_s:.0f} MB/s | "
        f"{first_s:.2f} | `cat` > /dev/null, {mb / cat_s:.0f} MB/s | {cat_s:.2f} | "
        f"{first_s / cat_s:.1f}x slower than cat |"
    )
    print(
        f"| second run, 10 new lines ({second.record.status}, {second.new_messages} msgs) | "
        f"{second_s:.3f} | first run | {first_s:.2f} | {second_s / first_s:.4f}x |"
    )
    print(
        f"| second run vs reading the {new_bytes} new bytes alone | {second_s:.3f} | "
        f"seek + read | {read_s:.4f} | {second_s / read_s:.0f}x |"
    )
    print(f"| not in the above: importing the anthropic SDK, once per process | {import_s:.2f} |")
    print(
        "\nThe second run includes one model call to the local fake API, its version commit "
        "and the run record: the fixed cost of any run that has something new."
    )


if __name__ == "__main__":
    main()
