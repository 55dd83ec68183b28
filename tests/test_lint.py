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


def test_no_merge_conflict_markers_are_committed() -> None:
    """A merge once left git's markers in ARCHITECTURE.md, where no linter looks."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    markers = (b"<<<<<<< ", b">>>>>>> ")
    found = []
    for name in filter(None, files):
        path = REPO / name.decode()
        if not path.is_file() or path.suffix not in {".md", ".py", ".toml", ".txt", ".json"}:
            continue
        for n, line in enumerate(path.read_bytes().splitlines(), 1):
            if line.startswith(markers) or line == b"=======":
                found.append(f"{name.decode()}:{n}")
    assert not found, f"merge conflict markers left in: {', '.join(found)}"
