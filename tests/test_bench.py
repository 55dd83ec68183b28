"""Every benchmark the README lists still runs: each once, on tiny data, and emits its rows."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL = {
    "store_bench.py": ["--reps", "2"],
    "search_bench.py": ["--files", "60"],
    "recall_bench.py": ["--sessions", "8"],
    "context_bench.py": ["--files", "60", "--rounds", "1"],
    "runtime_bench.py": ["--turns", "2", "--rounds", "1"],
    "collect_bench.py": ["--mb", "1", "--files", "2"],
    "collect_tokens_bench.py": ["--sessions", "3", "--messages", "20"],
    "compile_bench.py": ["--files", "60"],
    "secrets_bench.py": ["--lines", "500", "--rounds", "1"],
    "tick_bench.py": ["--rounds", "1", "--runs", "2", "--messages", "8"],
    "ui_bench.py": ["--files", "60", "--rounds", "1"],
    "curate_bench.py": ["--people", "2", "--entries", "1"],
    "fleet_bench.py": ["--sizes", "3", "--sample", "2"],
}


def test_the_readme_lists_every_benchmark() -> None:
    readme = (REPO / "README.md").read_text()
    on_disk = {p.name for p in (REPO / "bench").glob("*_bench.py")}
    assert on_disk == set(SMALL) and all(f"bench/{name}" in readme for name in on_disk)


def test_python_m_bench_runs_each_bench_at_its_quick_size() -> None:
    spec = importlib.util.spec_from_file_location("bench_main", REPO / "bench" / "__main__.py")
    assert spec is not None and spec.loader is not None
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    assert {name: quick for name, (_, quick, _) in main.RUNS.items()} == SMALL


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
    figures = [r for r in records if "size" not in r]
    assert len(sizes) == 1 and figures, records
    for r in figures:
        assert r["figure"] and isinstance(r["median"], int | float) and r["unit"], r
        assert r["baseline"] is None or r["ratio"] is not None, r
