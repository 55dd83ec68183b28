"""A non-editable install carries the pipeline docs and the scaffold: build the wheel, install it
into a fresh venv (offline: dependencies come from the test venv through a .pth file), and run
`crustacean init` from it."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_carries_data_and_init_works_from_it(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("crustacean-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for doc in ("HOW-IT-WORKS", "COLLECT", "CURATE", "COMPILE", "CALIBRATE"):
        assert f"crustacean/_data/pipeline/{doc}.md" in names
    assert "crustacean/_data/templates/workspace/MEMORY.md" in names
    assert "crustacean/_data/templates/workspace/memory/README.md" in names
    assert "crustacean/_data/templates/sample/workspace/MEMORY.md" in names
    for ui in ("templates/base.html", "templates/overview.html", "static/ui.css"):
        assert f"crustacean/ui/{ui}" in names  # `crustacean ui` works from a wheel
    assert any(
        n.startswith("crustacean/_data/templates/sample/transcripts/openclaw/") for n in names
    )

    venv = tmp_path / "venv"
    # No pip inside (ensurepip was half this test's time): the test venv's pip installs into it.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True
    )
    py, pip = venv / "bin" / "python", [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")

    work = tmp_path / "elsewhere"
    work.mkdir()
    exe = venv / "bin" / "crustacean"
    done = subprocess.run(
        [str(exe), "init", str(work / "ws")], cwd=work, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (work / "ws/memory/.system/COMPILE.md").is_file()
    assert (work / "ws/MEMORY.md").is_file()
    where = subprocess.run(
        [str(py), "-m", "crustacean", "-w", str(work / "ws"), "paths"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where and "_data/pipeline" in where
    sample = subprocess.run(
        [str(exe), "init", "--sample", str(work / "sample")],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert sample.returncode == 0, sample.stderr
    assert len(list((work / "sample/transcripts").rglob("*.jsonl"))) >= 4
