"""A write while the user's `git commit` waits in its editor (issue 32).

git holds no lock while the editor is open, and fails the commit ("cannot lock ref 'HEAD'")
if HEAD moved meanwhile. A careful user expects their commit to land: the write waits for it,
then makes its version on top; if the editor stays open too long the write fails naming it,
and nothing is written. Real git, with an editor that waits on a file the test controls.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import USER_ENV
from store_helpers import user_git as git

from conftest import run_cli, snapshot
from crustacean.store import versions
from crustacean.workspace import Workspace

EXE = str(Path(sys.executable).parent / "crustacean")
# The user's editor: says it is open, waits until the test lets it go, writes the message.
EDITOR = """#!/bin/sh
touch "{started}"
while [ ! -f "{release}" ]; do sleep 0.02; done
echo "my own edit" > "$1"
"""


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until `path` exists; the only bound is the outer safety net (the child dying)."""
    event = threading.Event()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        event.wait(0.02)


@pytest.fixture
def editing(ws: Workspace, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """The user's `git commit` of a staged USER.md edit, its editor open until released."""
    started, release = tmp_path / "editor-open", tmp_path / "release"
    editor = tmp_path / "editor.sh"
    editor.write_text(EDITOR.format(started=started, release=release))
    editor.chmod(0o755)
    with (ws.root / "USER.md").open("a") as fh:
        fh.write("- Prefers tea.\n")
    git(ws.root, "add", "USER.md")
    commit = subprocess.Popen(
        ["git", "commit", "-q"],
        cwd=ws.root,
        env={**os.environ, **USER_ENV, "GIT_EDITOR": str(editor)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(started, commit)
        yield commit, release
    finally:
        release.touch()
        commit.wait(timeout=120)


def test_a_write_waits_for_the_users_open_commit_and_both_land(
    ws: Workspace, editing: tuple[subprocess.Popen[str], Path]
) -> None:
    commit, release = editing
    before = git(ws.root, "rev-parse", "HEAD").strip()
    write = subprocess.Popen(
        [EXE, "-w", str(ws.root), "remember", "tea", "Alice drinks green tea."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, write.kill)  # a safety net only
    watchdog.start()
    try:
        assert write.stderr is not None
        said = write.stderr.readline()  # the write says it waits, before any version
        assert "waiting for your `git commit` (pid " in said and "editor is open" in said
        assert git(ws.root, "rev-parse", "HEAD").strip() == before
        release.touch()
        _, err = write.communicate()
    finally:
        watchdog.cancel()
    _, commit_err = commit.communicate(timeout=120)
    assert commit.returncode == 0, commit_err  # the user's commit landed
    assert write.returncode == 0, err
    subjects = git(ws.root, "log", "-n3", "--format=%an|%s").splitlines()
    assert subjects[1] == "Ada|my own edit"  # the version went on top of the user's commit
    assert subjects[0].startswith("crustacean ")
    assert "- Prefers tea." in git(ws.root, "show", "HEAD:USER.md")
    assert "green tea" in git(ws.root, "show", "HEAD:memory/lessons/tea.md")
    assert git(ws.root, "status", "--porcelain") == ""


def test_an_editor_left_open_fails_the_write_naming_it_and_nothing_is_written(
    ws: Workspace,
    editing: tuple[subprocess.Popen[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commit, release = editing
    monkeypatch.setattr(versions, "USER_COMMIT_WAIT", 0.0)
    before = snapshot(ws.root)
    out = run_cli("-w", str(ws.root), "remember", "tea", "Green tea.", code=75)
    assert f"your `git commit` (pid {commit.pid})" in out.stderr
    assert "Save or close the editor, then try again; nothing was written." in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2 and "Traceback" not in out.output
    assert snapshot(ws.root) == before
    release.touch()
    commit.wait(timeout=120)
    assert commit.returncode == 0  # the user's commit was never disturbed
    run_cli("-w", str(ws.root), "remember", "tea", "Green tea.")  # and the write now lands
    assert "Green tea" in git(ws.root, "show", "HEAD:memory/lessons/tea.md")
