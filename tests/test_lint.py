"""ruff check and ruff format stay clean (CI runs this through pytest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_check_and_format_are_clean() -> None:
    ruff = [sys.executable, "-m", "ruff"]
    check = subprocess.run([*ruff, "check", "."], cwd=REPO, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    fmt = subprocess.run(
        [*ruff, "format", "--check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout
