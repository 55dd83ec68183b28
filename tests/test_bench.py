"""Every benchmark the README lists still runs: each once, on tiny data, and emits its rows; the
benches that check a row of bench/BUDGETS.md emit it, and `python -m bench` sums them up."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL = {
    "store_bench.py": ["--reps", "2"],
    "search_bench.py": ["--files", "60", "--queries", "6", "--mcp-calls", "2"],
    "recall_bench.py": ["--sessions", "3", "--questions", "3"],
    "context_bench.py": ["--files", "60", "--rounds", "1"],
    "runtime_bench.py": ["--turns", "2", "--rounds", "1", "--startup-rounds", "1"],
    "collect_bench.py": ["--mb", "1", "--files", "2"],
    "collect_tokens_bench.py": ["--sessions", "3", "--messages", "20", "--agent-days", "1"],
    "compile_bench.py": ["--files", "60", "--days", "60"],
    "secrets_bench.py": ["--lines", "500", "--rounds", "1", "--samples", "20"],
    "tick_bench.py": ["--rounds", "1", "--runs", "1", "--messages", "8"],
    "ui_bench.py": ["--files", "60", "--rounds", "1"],
    "curate_bench.py": ["--people", "2", "--entries", "1"],
    "fleet_bench.py": ["--sizes", "3", "--sample", "2"],
    "qa_bench.py": [],
}


def test_the_readme_lists_every_benchmark() -> None:
    readme = (REPO / "README.md").read_text()
    on_disk = {p.name for p in (REPO / "bench").glob("*_bench.py")}
    assert on_disk == set(SMALL) and all(f"bench/{name}" in readme for name in on_disk)


def _bench_main() -> Any:
    spec = importlib.util.spec_from_file_location("bench_main", REPO / "bench" / "__main__.py")
    assert spec is not None and spec.loader is not None
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    return main


def _common() -> Any:
    """bench/common.py, imported as the benches import it (`_bench_main` puts the checkout on
    sys.path, as running bench/__main__.py does)."""
    _bench_main()
    return importlib.import_module("bench.common")


def test_python_m_bench_runs_each_bench_at_its_quick_size() -> None:
    main = _bench_main()
    assert {name: quick for name, (_, quick, _) in main.RUNS.items()} == SMALL


def test_budgets_md_names_every_bench_that_checks_a_row() -> None:
    table = (REPO / "bench" / "BUDGETS.md").read_text().split("## How")[0]
    checked = {
        line.rsplit("`bench/", 1)[1].split("`")[0]
        for line in table.splitlines()[2:]
        if line.startswith("| ") and "`bench/" in line
    }
    assert checked == set(_bench_main().BUDGETED) and checked <= set(SMALL)


def test_the_summary_lists_every_budget_row_with_ok_or_miss(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two benches' rows, one met and one missed, and a budgeted bench that crashed."""
    main, common = _bench_main(), _common()
    monkeypatch.setenv(common.ROWS_ENV, str(tmp_path / "rows.jsonl"))
    met = common.budget(
        "cron, every 15 minutes",
        "a no-op tick",
        90.0,
        60.0,
        "`import typer`",
        3,
        also="0 model requests",
    )
    missed = common.budget(
        "an agent's MCP tool call", "MCP get_context", 40.0, 80.0, "`grep -ril`", 0.2, stat="p95"
    )
    emitted = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["budget"] for r in emitted] == [met, missed]
    assert (met["ok"], met["ratio"], missed["ok"], missed["ratio"]) == (True, 1.5, False, 0.5)
    tick, store, search = (
        main.Outcome(n) for n in ("tick_bench.py", "store_bench.py", "search_bench.py")
    )
    tick.budgets, search.budgets = [met], [missed]
    store.failure = "FAILED (exit 1): boom"
    lines = main.budgets([tick, store, search]).splitlines()
    assert lines[0].startswith("| who waits | figure | value | baseline | ratio | budget | ok |")
    assert lines[2] == (
        "| cron, every 15 minutes | a no-op tick (median) | 90.0 ms | `import typer`: 60.0 ms "
        "| 1.50x | ≤ 3x, 0 model requests | ok | `tick_bench.py` |"
    )
    assert "FAILED (exit 1): boom" in lines[3] and "`store_bench.py`" in lines[3]
    assert lines[4].endswith("| 0.50x | ≤ 0.2x | MISS | `search_bench.py` |")
    assert lines[-1] == "2 budget rows, 1 missed."


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_benchmark_runs_on_tiny_data(name: str, tmp_path: Path) -> None:
    """It prints its own table and, for `python -m bench`, one JSON row per figure."""
    rows = tmp_path / "rows.jsonl"
    env = {**os.environ, "TMPDIR": str(tmp_path), "CRUSTACEAN_BENCH_ROWS": str(rows)}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / name), *SMALL[name]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| figure |" in done.stdout or "|---|" in done.stdout
    records = [json.loads(line) for line in rows.read_text().splitlines()]
    sizes = [r["size"] for r in records if "size" in r]
    figures = [r for r in records if "size" not in r and "budget" not in r]
    assert sizes and figures, records  # a bench may measure more than one size
    for r in figures:
        assert r["figure"] and isinstance(r["median"], int | float) and r["unit"], r
        assert r["baseline"] is None or r["ratio"] is not None, r
    budgets = [r["budget"] for r in records if "budget" in r]
    assert bool(budgets) == (name in _bench_main().BUDGETED)
    for b in budgets:  # the bench printed each in the common format too
        assert b["who"] and b["baseline"] > 0 and isinstance(b["ok"], bool), b
        assert _common().budget_line(b) in done.stdout, b


def test_a_rerun_keeps_the_hand_written_sections_and_the_benches_it_did_not_run(
    tmp_path: Path,
) -> None:
    """Before/After/Reliability and a branch's notes are written by hand; `--budgets` reruns
    only a few benches, so the others' own sections stay as their last full run wrote them."""
    out = tmp_path / "RESULTS.md"
    out.write_text(
        "# Benchmark results\n\n## Budgets\n\nnew\n\n## Before (main at abc1234)\n\n| old |\n\n"
        "## store (`bench/store_bench.py`, 3 s)\n\nx\n\n"
        "## recall (`bench/recall_bench.py`, 9 s)\n\nr\n\n"
        "## After issue 31 (main at def5678)\n\n| mid |\n\n"
        "## Reliability: kill -9\n\n### trials\n\ny\n\n"
        "## Read paths (a branch's notes)\n\nz\n"
    )
    assert _bench_main()._kept_sections(out, {"store_bench.py"}) == (
        "\n## Before (main at abc1234)\n\n| old |\n\n"
        "## recall (`bench/recall_bench.py`, 9 s)\n\nr\n\n"
        "## After issue 31 (main at def5678)\n\n| mid |\n\n"
        "## Reliability: kill -9\n\n### trials\n\ny\n\n"
        "## Read paths (a branch's notes)\n\nz\n"
    )
