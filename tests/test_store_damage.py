"""A broken repository is diagnosed, and recovered by one command (issue 32, item 5): HEAD names
a version whose tree object is gone (what `git gc --prune=now` next to a write leaves)."""

from __future__ import annotations

import pytest
from store_helpers import git
from typer.testing import CliRunner

from conftest import run_cli, snapshot
from crustacean.cli.app import app
from crustacean.errors import VersionError
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOTE = "memory/notes/kept.md"


def cli(ws: Workspace, *args: str) -> str:
    """The CLI's output whatever its exit code (doctor fails on the missing API key here)."""
    return CliRunner().invoke(app, ["--workspace", str(ws.root), *args]).output


def damaged(ws: Workspace) -> tuple[Workspace, str]:
    """A workspace with two versions whose HEAD tree object file was deleted; the disk holds
    every acknowledged write. Returns it and HEAD's parent (the last intact version)."""
    store = Store(ws)
    store.write_context(
        [{"path": NOTE, "mode": "create", "content": "- one\n"}], actor="user", message="a"
    )
    intact = git(ws.root, "rev-parse", "HEAD").strip()
    store.write_context(
        [{"path": NOTE, "mode": "append", "content": "- two\n"}], actor="user", message="b"
    )
    tree = git(ws.root, "rev-parse", "HEAD^{tree}").strip()
    (ws.root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    return ws, intact


def test_every_write_says_the_repository_is_damaged_and_changes_nothing(
    copied_ws: Workspace,
) -> None:
    ws, _ = damaged(copied_ws)
    before = snapshot(ws.root)
    with pytest.raises(VersionError) as err:
        Store(ws).write_context(
            [{"path": NOTE, "mode": "append", "content": "- three\n"}], actor="user", message="c"
        )
    assert "repository is damaged" in str(err.value)
    assert "crustacean doctor --fix" in str(err.value)
    assert snapshot(ws.root) == before


def test_history_says_damaged_not_no_versions(copied_ws: Workspace) -> None:
    ws, _ = damaged(copied_ws)
    out = run_cli("--workspace", str(ws.root), "history", code=2).output
    assert "No versions yet" not in out
    assert "repository is damaged" in out and "doctor --fix" in out


def test_doctor_names_the_damage_and_fix_records_the_disk_on_the_last_intact_version(
    copied_ws: Workspace,
) -> None:
    ws, intact = damaged(copied_ws)
    out = run_cli("--workspace", str(ws.root), "doctor", code=1).output
    assert "fail  repository: the workspace's git repository is damaged" in out
    assert "fix: run `crustacean doctor --fix`" in out
    disk = (ws.root / NOTE).read_bytes()
    fixed = cli(ws, "doctor", "--fix")
    assert f"on version {intact[:12]}" in fixed
    assert "ok  repository: HEAD and its tree are intact" in fixed
    assert git(ws.root, "rev-parse", "HEAD^").strip() == intact
    assert git(ws.root, "show", f"HEAD:{NOTE}") == disk.decode()
    assert (ws.root / NOTE).read_bytes() == disk
    assert git(ws.root, "status", "--porcelain") == ""
    Store(ws).write_context(
        [{"path": NOTE, "mode": "append", "content": "- three\n"}], actor="user", message="c"
    )
    assert "- three" in git(ws.root, "show", f"HEAD:{NOTE}")


def test_doctor_fix_on_an_intact_repository_changes_nothing(copied_ws: Workspace) -> None:
    ws = copied_ws
    before = snapshot(ws.root)
    out = cli(ws, "doctor", "--fix")
    assert "ok  repository: HEAD and its tree are intact" in out
    assert " fix  repository" not in out
    after = snapshot(ws.root)
    after.pop(".crustacean/state.db", None)  # doctor's own last-run check opens it
    assert after == before
