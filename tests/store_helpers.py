"""Shared by the test_store_* files: a fast copy of a freshly initialized workspace.

`init_workspace` costs ~150 ms (scaffold, git init, first version); a byte copy of one made per
module costs a few. The copy is the same repository: same files, same commits, same index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.workspace import Workspace


def make_template(
    factory: pytest.TempPathFactory, seed: Callable[[Workspace], object] | None = None
) -> Path:
    """Initialize a workspace once, isolated like the autouse fixture (which is per test)."""
    base = factory.mktemp("template")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(base))
        mp.setenv("CRUSTACEAN_CONFIG_DIR", str(base / "userconfig"))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        root = base / "ws"
        init_workspace(root)
        if seed is not None:
            seed(Workspace(root, load_config(root)))
    return root


def copy_workspace(template: Path, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    shutil.copytree(template, root, symlinks=True)
    return Workspace(root, load_config(root))


def git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return proc.stdout


# The user's own git identity (HOME is a bare tmp folder, so git has none of its own).
USER_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
}


def user_git(root: Path, *args: str, check: bool = True) -> str:
    """The user's own git, as they run it by hand; its output."""
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env={**os.environ, **USER_ENV}
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# A CLI run killed (SIGKILL) inside the store's write, at its fault point for one path ("first":
# the first path it applies; the steps between, named ":…", are points of their own): the crash
# tests and the git tests start it with `python -c`.
KILL_AT = """
import os, signal, sys
from crustacean.store import apply as files
point = {point!r}
def hook(path):
    if (point == "first" and not path.startswith(":")) or path == point:
        os.kill(os.getpid(), signal.SIGKILL)
files._FAULT_HOOK = hook
from crustacean.cli.app import app
sys.argv = {argv!r}
app()
"""


def commit_all(root: Path, message: str) -> None:
    """A version made by hand (`git add -A`, `git commit`), as the user's own git makes it."""
    git(root, "add", "-A")
    git(root, "-c", "user.name=me", "-c", "user.email=me@x", "commit", "-qm", message)
