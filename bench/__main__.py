"""Run every benchmark and write `bench/RESULTS.md`.

`python -m bench` runs each `bench/*_bench.py` at its stated size (`--quick` uses tiny data, to
check they all run) and gathers their tables, with the machine's CPU count and Python version,
into one markdown file. Each table carries its own baseline, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = {  # name: (full-size arguments, quick arguments, what is measured)
    "store_bench.py": ([], ["--reps", "2"], "write_context versions against git commit"),
    "search_bench.py": ([], ["--files", "60"], "search, re-index and ranking on 10,000 files"),
    "context_bench.py": ([], ["--files", "60", "--rounds", "1"], "context on 10,000 memories"),
    "runtime_bench.py": ([], ["--turns", "2", "--rounds", "1"], "agent loop and CLI start-up"),
    "collect_bench.py": ([], ["--mb", "1", "--files", "2"], "collect over a 1 GB transcript set"),
    "compile_bench.py": ([], ["--files", "60"], "compile's deterministic pass, 3 years"),
}


def run_one(name: str, args: list[str]) -> tuple[str, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(HERE / name), *args], capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        return f"FAILED (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}", took
    return done.stdout.strip(), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny data: check they run")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    parts = [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `python -m bench"
        f"{' --quick' if args.quick else ''}` on {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.machine()}. Every figure's baseline was measured "
        "in the same run; ratios are figure / baseline.",
    ]
    for name, (full, quick, what) in RUNS.items():
        output, took = run_one(name, quick if args.quick else full)
        print(f"{name}: {took:.0f} s", file=sys.stderr)
        parts += ["", f"## {what} (`bench/{name}`, {took:.0f} s)", "", output]
    args.out.write_text("\n".join(parts) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
