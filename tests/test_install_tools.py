"""`pipx install .` and `uv tool install .`, as the README tells users, work from a checkout.

Tests have no network, so the dependencies (and, for the isolated build, hatchling) can't be
downloaded. Each installer is therefore given two tiny local wheels that hold only a `.pth` file
pointing at this test venv's site-packages: `test-deps-shim` stands in for the runtime
dependencies, and a `hatchling` shim makes the real hatchling importable in uv's isolated build
environment. Everything else is the installers' own work: building from the source tree, making
the isolated tool environment and linking the `crustacean` executable, which then runs.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
PURELIB = sysconfig.get_path("purelib")


def _shim(folder: Path, name: str, version: str) -> Path:
    """A wheel whose only content is a .pth adding this venv's site-packages to sys.path."""
    files = {
        f"_{name.replace('-', '_')}_shim.pth": PURELIB + "\n",
        f"{name.replace('-', '_')}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ),
        f"{name.replace('-', '_')}-{version}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: crustacean-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
    }
    record_name = f"{name.replace('-', '_')}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        lines.append(f"{path},sha256={encoded},{len(text.encode())}")
    lines.append(f"{record_name},,")
    wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(record_name, "\n".join(lines) + "\n")
    return wheel


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree without its venv or caches, as a fresh clone has it."""
    dst = tmp_path_factory.mktemp("checkout") / "crustacean"
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist")
    shutil.copytree(REPO, dst, ignore=ignore)
    return dst


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shims")
    _shim(folder, "test-deps-shim", "0")
    from importlib.metadata import version

    _shim(folder, "hatchling", version("hatchling"))
    return folder


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no user pip/uv config, a home of its own, nothing from this venv."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "SYSTEMROOT") if k in os.environ}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {**keep, "HOME": str(home), "PIP_CONFIG_FILE": os.devnull, **extra}


def _version(exe: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(exe), "--version"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_names_both_installers() -> None:
    assert re.search(r"^pipx install \.$", README, flags=re.M)
    assert re.search(r"^uv tool install \.$", README, flags=re.M)


@pytest.mark.slow
def test_pipx_install_from_the_checkout(tmp_path: Path, checkout: Path, shims: Path) -> None:
    env = _env(
        tmp_path,
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"),
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pipx", "install", "."),
            *("--preinstall", str(shims / "test_deps_shim-0-py3-none-any.whl")),
            "--pip-args=--no-deps --no-index --no-build-isolation",
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crustacean" in done.stdout
    assert "(pipeline docs " in _version(tmp_path / "bin/crustacean", env)


@pytest.mark.slow
def test_uv_tool_install_from_the_checkout(tmp_path: Path, checkout: Path, shims: Path) -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    excludes = tmp_path / "excludes.txt"
    excludes.write_text("".join(re.split(r"[<>=!~ \[;]", d)[0] + "\n" for d in deps))
    env = _env(
        tmp_path,
        UV_TOOL_DIR=str(tmp_path / "uv-tools"),
        UV_TOOL_BIN_DIR=str(tmp_path / "bin"),
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_NO_CONFIG="1",
    )
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run(
        [
            *(str(uv), "tool", "install", "."),
            *("--offline", "--no-index", "--find-links", str(shims)),
            *("--excludes", str(excludes), "--with", "test-deps-shim", "--python", sys.executable),
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(pipeline docs " in _version(tmp_path / "bin/crustacean", env)
