"""Every benchmark the README lists still runs: each once, on tiny data (figures not checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL = {
    "store_bench.py": ["--reps", "2"],
    "search_bench.py": ["--files", "60"],
    "context_bench.py": ["--files", "60", "--rounds", "1"],
    "runtime_bench.py": ["--turns", "2", "--rounds", "1"],
    "collect_bench.py": ["--mb", "1", "--files", "2"],
    "compile_bench.py": ["--files", "60"],
}


def test_the_readme_lists_every_benchmark() -> None:
    readme = (REPO / "README.md").read_text()
    on_disk = {p.name for p in (REPO / "bench").glob("*_bench.py")}
    assert on_disk == set(SMALL) and all(f"bench/{name}" in readme for name in on_disk)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_benchmark_runs_on_tiny_data(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
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
