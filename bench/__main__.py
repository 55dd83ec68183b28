"""Run every benchmark, print one table of all their figures, and write it to `bench/RESULTS.md`.

`python -m bench` runs each `bench/*_bench.py` at its stated size (`--quick` uses tiny data, to
check they all run). Each bench records its figures as JSON lines (bench/common.py `row`) in the
file named by CRUSTACEAN_BENCH_ROWS; this gathers them into ONE markdown table (figure, median,
p95, the baseline measured in the same run, the ratio, the bench), printed and written at the top
of the results with the date, CPU count, Python version, machine and each bench's data size.
Below it come each bench's own output, as detail. A bench that fails gets a FAILED row, and the
exit code is 1 once all have run.

The run ends with the budgets (bench/BUDGETS.md): every row a bench checked (`common.budget`), in
one table with ok or MISS. `--budgets` runs only the benches that check one, at full size (about
2 minutes on 2 quiet CPUs, 9 at load 11). A MISS is a finding, not a failure: the exit code stays
0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # runnable as a script too

from bench.common import BUDGET_HEADER, ROWS_ENV, budget_line, num

RUNS = {  # name: (full-size arguments, quick arguments, what is measured)
    "store_bench.py": ([], ["--reps", "2"], "write_context versions against git commit"),
    "search_bench.py": (
        [],
        ["--files", "60", "--queries", "6", "--mcp-calls", "2"],
        "search, re-index and ranking",
    ),
    "recall_bench.py": (
        [],
        ["--sessions", "3", "--questions", "3"],
        "what search and context find within a budget",
    ),
    "context_bench.py": ([], ["--files", "60", "--rounds", "1"], "context on many memories"),
    "runtime_bench.py": (
        [],
        ["--turns", "2", "--rounds", "1", "--startup-rounds", "1"],
        "agent loop and CLI start-up",
    ),
    "collect_bench.py": ([], ["--mb", "1", "--files", "2"], "collect over a big transcript set"),
    "collect_tokens_bench.py": (
        [],
        ["--sessions", "3", "--messages", "20", "--agent-days", "1"],
        "collect's tokens on a folder with copies; batch against direct cost",
    ),
    "compile_bench.py": (
        [],
        ["--files", "60", "--days", "60"],
        "compile's deterministic pass, 3 years",
    ),
    "secrets_bench.py": (
        [],
        ["--lines", "500", "--rounds", "1", "--samples", "20"],
        "the credential scan",
    ),
    "ui_bench.py": ([], ["--files", "60", "--rounds", "1"], "ui pages against their core calls"),
    "curate_bench.py": (
        [],
        ["--people", "2", "--entries", "1"],
        "curate's input tokens per routed entry",
    ),
    "tick_bench.py": (
        [],
        ["--rounds", "1", "--runs", "1", "--messages", "8"],
        "tick: a whole one through the fake API, and a no-op one",
    ),
    "fleet_bench.py": ([], ["--sizes", "3", "--sample", "2"], "a fleet's no-op ticks and state"),
    "qa_bench.py": ([], [], "the QA bench's recorded runs (a model in the loop), rescored"),
}
BUDGETED = (
    "store_bench.py",
    "search_bench.py",
    "runtime_bench.py",
    "tick_bench.py",
    "compile_bench.py",
)


class Outcome:
    """One bench's run: its rows, stated data size, own output, time, and failure if any."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: list[dict[str, Any]] = []
        self.budgets: list[dict[str, Any]] = []
        self.size = ""
        self.output = ""
        self.seconds = 0.0
        self.failure = ""


def run_one(name: str, args: list[str]) -> Outcome:
    """Run one bench as its own process, with a fresh rows file."""
    out = Outcome(name)
    with tempfile.TemporaryDirectory(prefix="crustacean-bench-rows-") as tmp:
        rows_file = Path(tmp) / "rows.jsonl"
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(HERE / name), *args],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, ROWS_ENV: str(rows_file)},
        )
        out.seconds = time.perf_counter() - start
        lines = rows_file.read_text("utf-8").splitlines() if rows_file.exists() else []
    for line in lines:
        record = json.loads(line)
        if "size" in record:
            out.size = record["size"]
        elif "budget" in record:
            out.budgets.append(record["budget"])
        else:
            out.rows.append(record)
    out.output = done.stdout.strip()
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no error output"])[-1]
        out.failure = f"FAILED (exit {done.returncode}): {last}"
        out.output += f"\n\n{out.failure}\n\n```\n{done.stderr.strip()[-3000:]}\n```"
    return out


def cell(value: float | None, unit: str) -> str:
    return "" if value is None else f"{num(value)} {unit}"


def table(outcomes: list[Outcome]) -> str:
    """ONE markdown table of every bench's figures; a failed bench gets a FAILED row."""
    lines = ["| figure | median | p95 | baseline | ratio | bench |", "|---|--:|--:|---|--:|---|"]
    for o in outcomes:
        for r in o.rows:
            figure = r["figure"] + (f" — {r['note']}" if r.get("note") else "")
            base = cell(r.get("baseline"), r["unit"])
            if base and r.get("baseline_name"):
                base = f"{r['baseline_name']}: {base}"
            ratio = r.get("ratio")
            cells = [
                figure,
                cell(r["median"], r["unit"]),
                cell(r.get("p95"), r["unit"]),
                base,
                "" if ratio is None else f"{num(ratio)}{r.get('ratio_label', 'x')}",
                f"`{o.name}`",
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        if o.failure:
            lines.append(f"| {o.failure.replace('|', '/')} | | | | | `{o.name}` |")
    return "\n".join(lines)


def budgets(outcomes: list[Outcome]) -> str:
    """Every budget row of the run, with its bench, and the count of misses."""
    lines = [BUDGET_HEADER.replace(" ok |", " ok | bench |", 1) + "---|"]
    for o in outcomes:
        lines += [f"{budget_line(b)} `{o.name}` |" for b in o.budgets]
        if o.failure and o.name in BUDGETED:
            lines.append(f"| | {o.failure.replace('|', '/')} | | | | | MISS | `{o.name}` |")
    rows = [b for o in outcomes for b in o.budgets]
    missed = sum(not b["ok"] for b in rows)
    return "\n".join([*lines, "", f"{len(rows)} budget rows, {missed} missed."])


def header(outcomes: list[Outcome], quick: bool, subset: str) -> list[str]:
    """Date, CPUs, Python, machine, and the data each bench ran on."""
    sizes = [f"- `{o.name}` ({o.seconds:.0f} s): {o.size or RUNS[o.name][2]}" for o in outcomes]
    return [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `python -m bench"
        f"{' --quick' if quick else ''}{subset}` on {os.cpu_count()} CPUs "
        f"(load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}), Python "
        f"{platform.python_version()}, {platform.system()} {platform.machine()}. Every baseline "
        "was measured in the same run; a ratio is median / baseline unless it says otherwise.",
        "",
        "Data:",
        "",
        *sizes,
        "",
    ]


WRITTEN = ("## Budgets", "## Every figure")  # the sections every run writes anew


def _kept_sections(out: Path, ran: set[str]) -> str:
    """The sections of `out` a rerun keeps, in their order: every one it does not write anew,
    that is all but the budget table, the figure table and the own sections of the benches it
    ran (hand-written before/after sections, the crash suite's figures, and the benches that
    `--budgets` does not run stay as they were)."""
    try:
        text = out.read_text()
    except OSError:
        return ""
    sections = [f"## {s.rstrip()}" for s in ("\n" + text).split("\n## ")[1:]]
    mine = tuple(f"(`bench/{name}`" for name in ran)
    kept = [
        s
        for s in sections
        if not s.startswith(WRITTEN) and not any(m in s.split("\n", 1)[0] for m in mine)
    ]
    return "".join(f"\n{s}\n" for s in kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny data: check they run")
    parser.add_argument("--budgets", action="store_true", help="only the benches with budgets")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    outcomes = []
    for name, (full, quick, _what) in RUNS.items():
        if args.budgets and name not in BUDGETED:
            continue
        outcome = run_one(name, quick if args.quick else full)
        status = outcome.failure or f"{len(outcome.rows)} figures"
        print(f"{name}: {outcome.seconds:.0f} s, {status}", file=sys.stderr)
        outcomes.append(outcome)
    combined, summary = table(outcomes), budgets(outcomes)
    print(combined)
    print("\nBudgets (bench/BUDGETS.md):\n\n" + summary)
    subset = " --budgets" if args.budgets else ""
    parts = [
        *header(outcomes, args.quick, subset),
        "## Budgets",
        "",
        summary,
        "",
        "## Every figure",
    ]
    parts += ["", combined]
    for o in outcomes:
        parts += ["", f"## {RUNS[o.name][2]} (`bench/{o.name}`, {o.seconds:.0f} s)", "", o.output]
    kept = _kept_sections(args.out, {o.name for o in outcomes})
    args.out.write_text("\n".join(parts) + "\n" + kept)
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if any(o.failure for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
