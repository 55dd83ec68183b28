"""The write path's shortcuts keep their answers: HEAD and the blob ids from one git process are
what `rev-parse` and `ls-tree` say, and the loss guard's skip of a move's source never lets an
edit's dropped lines through."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.errors import LimitError
from crustacean.store.changes import sha256_hex
from crustacean.store.versions import Git
from crustacean.store.write import Store
from crustacean.workspace import Workspace

FACTS = [f"- 2026-11-{d:02d} — Fact number {d} about the garden project." for d in range(1, 29)]
NOTE = "memory/notes/garden.md"


def git(root: Path, *args: str) -> str:
    ident = ["-c", "user.name=test", "-c", "user.email=test@localhost"]
    proc = subprocess.run(["git", *ident, *args], cwd=root, capture_output=True, check=True)
    return proc.stdout.decode()


def listed(root: Path, paths: list[str]) -> dict[str, str]:
    """Each path's id in HEAD as `git ls-tree` lists it."""
    out = git(root, "ls-tree", "-z", "--full-tree", "HEAD", "--", *paths)
    return {e.split("\t", 1)[1]: e.split()[2] for e in out.split("\0") if e}


def test_head_and_ids_match_rev_parse_and_ls_tree(ws: Workspace) -> None:
    store = Store(ws)
    store.write_context(
        [{"path": NOTE, "mode": "create", "content": "- one\n"}], actor="user", message="a"
    )
    (ws.root / "memory/notes/untracked.md").write_text("- never versioned\n")
    asked = [NOTE, "MEMORY.md", "memory/notes/untracked.md"]
    head, ids = store.git.head_blobs(asked)
    assert head == git(ws.root, "rev-parse", "HEAD").strip()
    assert ids == listed(ws.root, asked)
    assert "memory/notes/untracked.md" not in ids and NOTE in ids


def test_a_name_with_a_line_break_is_asked_the_longer_way(ws: Workspace) -> None:
    odd = "memory/notes/two\nlines.md"
    (ws.root / odd).write_text("- a name the batch cannot carry\n")
    git(ws.root, "add", "--", odd)
    git(ws.root, "commit", "-q", "-m", "odd name")
    head, ids = Git(ws.root).head_blobs([odd, "MEMORY.md"])
    assert head == git(ws.root, "rev-parse", "HEAD").strip()
    assert ids == listed(ws.root, [odd, "MEMORY.md"])


def test_no_version_yet_has_no_head(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.md").write_text("- a\n")
    assert Git(root).head_blobs(["a.md"]) == (None, {})


def test_files_at_reads_what_one_file_at_a_time_reads(ws: Workspace) -> None:
    """The batch read a rollback uses agrees with `file_at` on every kind of entry."""
    odd = {
        "memory/notes/with space.md": b"- a name with a space\n",
        "memory/notes/empty.md": b"",
        "memory/notes/no-newline.md": b"- no newline at the end",
        "memory/notes/bytes.md": b"\x00\xff\n\nmissing\n",
        "memory/notes/two\nlines.md": b"- a name the batch cannot carry\n",
    }
    for rel, data in odd.items():
        (ws.root / rel).write_bytes(data)
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-q", "-m", "odd files")
    rev = git(ws.root, "rev-parse", "HEAD").strip()
    asked = [*odd, "MEMORY.md", "memory/notes", "memory/notes/never.md", "memory/notes/empty.md"]
    one_by_one = {p: Git(ws.root).file_at(rev, p) for p in asked}
    assert Git(ws.root).files_at(rev, asked) == one_by_one
    plain = [p for p in asked if "\n" not in p]  # the batch itself, not the longer way
    assert Git(ws.root).files_at(rev, plain) == {p: one_by_one[p] for p in plain}
    assert one_by_one["memory/notes"] is None and one_by_one["memory/notes/never.md"] is None


def put(ws: Workspace, lines: list[str]) -> bytes:
    data = ("\n".join(lines) + "\n").encode()
    Store(ws).write_context(
        [{"path": NOTE, "mode": "create", "content": data.decode()}], actor="user", message="seed"
    )
    return data


def test_an_edit_that_drops_lines_and_then_moves_the_file_is_refused(ws: Workspace) -> None:
    """The move's target holds the edited bytes, not the file's old ones: its old lines are
    still checked, and the call is refused whole."""
    old = put(ws, ["# Garden", *FACTS * 3])
    store = Store(ws)
    before = snapshot(ws.root)
    junk = "# Garden\n" + "".join(f"- lorem ipsum dolor {i}\n" for i in range(84))
    changes = [
        {"path": NOTE, "mode": "edit", "old": old.decode(), "new": junk,
         "expected_sha256": sha256_hex(old)},
        {"path": NOTE, "mode": "move", "to": "memory/notes/moved.md"},
    ]  # fmt: skip
    with pytest.raises(LimitError, match="would lose 84 line"):
        store.write_context(changes, actor="compile", message="x", run_id="run-1")
    assert snapshot(ws.root) == before


def test_a_plain_move_loses_nothing(ws: Workspace) -> None:
    old = put(ws, ["# Garden", *FACTS * 3])
    store = Store(ws)
    plan = store.plan(
        [{"path": NOTE, "mode": "move", "to": "archive/pruned/garden.md"}],
        actor="compile",
        run_id="run-1",
    )
    assert plan.loss == {}
    done = store.write_context(
        [{"path": NOTE, "mode": "move", "to": "archive/pruned/garden.md"}],
        actor="compile",
        message="archive",
        run_id="run-1",
    )
    assert done.version is not None
    assert (ws.root / "archive/pruned/garden.md").read_bytes() == old
    assert not (ws.root / NOTE).exists()
