"""The write layer's modes and versions (DESIGN.md §4, issue 3): what each mode leaves on disk,
one call = one commit by `crustacean <actor>`, the user's own edits never swept in, and the read
side (list_context_files, read_context_file)."""

from __future__ import annotations

import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_helpers import git

from crustacean.config import load_config
from crustacean.store.changes import sha256_hex
from crustacean.store.versions import TRAILER_CALL, TRAILER_RUN
from crustacean.store.write import Store
from crustacean.workspace import Workspace

DAY = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
NOTE = "memory/notes/a.md"


def commits(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


def files_of(root: Path, rev: str = "HEAD") -> list[str]:
    out = git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "--root", rev)
    return sorted(out.split())


@pytest.fixture
def store(copied_ws: Workspace) -> Store:
    return Store(copied_ws, clock=lambda: DAY)


def put(store: Store, changes: list[dict], actor: str = "user", message: str = "test"):
    return store.write_context(changes, actor=actor, message=message)


# ------------------------------------------------------------------ each mode


def test_create_writes_the_exact_bytes_and_one_version(store: Store) -> None:
    before = commits(store.root)
    text = "# Note\n\nünïcode ✓, CRLF kept\r\nno final newline"
    result = put(store, [{"path": NOTE, "mode": "create", "content": text}])
    assert (store.root / NOTE).read_bytes() == text.encode("utf-8")
    assert result.files == (NOTE,)
    assert result.version == git(store.root, "rev-parse", "HEAD").strip()
    assert result.snapshot is None and result.proposal is None
    assert commits(store.root) == before + 1
    assert files_of(store.root) == [NOTE]


def test_create_makes_missing_folders(store: Store) -> None:
    put(store, [{"path": "projects/new/deep/plan.md", "mode": "create", "content": "x\n"}])
    assert (store.root / "projects/new/deep/plan.md").read_text() == "x\n"


@pytest.mark.parametrize(
    ("existing", "content", "expected"),
    [
        (None, "first line\n", b"first line\n"),  # append to a missing file creates it
        (b"one\n", "two\n", b"one\ntwo\n"),
        (b"one", "two\n", b"one\ntwo\n"),  # no final newline: one is added between
        (b"one\n", "two", b"one\ntwo"),  # the appended text is kept as given
        (b"", "two\n", b"two\n"),  # an empty file needs no separator
    ],
    ids=["missing", "plain", "no-final-newline", "content-without-newline", "empty-file"],
)
def test_append(store: Store, existing: bytes | None, content: str, expected: bytes) -> None:
    if existing is not None:
        put(store, [{"path": NOTE, "mode": "create", "content": existing.decode()}])
    before = commits(store.root)
    result = put(store, [{"path": NOTE, "mode": "append", "content": content}])
    assert (store.root / NOTE).read_bytes() == expected
    assert result.files == (NOTE,)
    assert commits(store.root) == before + 1


def test_edit_replaces_the_one_exact_snippet(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "alpha\nbeta\ngamma\n"}])
    put(store, [{"path": NOTE, "mode": "edit", "old": "beta\n", "new": "BETA ✓\n"}])
    assert (store.root / NOTE).read_bytes() == "alpha\nBETA ✓\ngamma\n".encode()


def test_edit_can_delete_a_snippet(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "keep\ndrop me\nkeep too\n"}])
    put(store, [{"path": NOTE, "mode": "edit", "old": "drop me\n", "new": ""}])
    assert (store.root / NOTE).read_bytes() == b"keep\nkeep too\n"


def test_overwrite_replaces_everything(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "old\n" * 10}])
    put(store, [{"path": NOTE, "mode": "overwrite", "content": "new"}])
    assert (store.root / NOTE).read_bytes() == b"new"


def test_expected_sha256_that_matches_is_accepted(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "v1\n"}])
    sha = store.read_context_file(NOTE).sha256
    put(store, [{"path": NOTE, "mode": "append", "content": "v2\n", "expected_sha256": sha}])
    assert (store.root / NOTE).read_bytes() == b"v1\nv2\n"


def test_delete_moves_to_dated_trash_and_never_unlinks(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "first\n"}])
    result = put(store, [{"path": NOTE, "mode": "delete"}])
    trash = "archive/trash/2024-05-01/memory/notes/a.md"
    assert not (store.root / NOTE).exists()
    assert (store.root / trash).read_bytes() == b"first\n"
    assert set(result.files) == {NOTE, trash}
    assert files_of(store.root) == sorted([NOTE, trash])  # one commit: removal + trash copy

    # the same path deleted again the same day gets a ~2 name; the first copy is untouched
    put(store, [{"path": NOTE, "mode": "create", "content": "second\n"}])
    put(store, [{"path": NOTE, "mode": "delete"}])
    put(store, [{"path": NOTE, "mode": "create", "content": "third\n"}])
    put(store, [{"path": NOTE, "mode": "delete"}])
    day = store.root / "archive/trash/2024-05-01/memory/notes"
    assert (day / "a.md").read_bytes() == b"first\n"
    assert (day / "a~2.md").read_bytes() == b"second\n"
    assert (day / "a~3.md").read_bytes() == b"third\n"


def test_delete_uses_the_day_of_the_clock(ws: Workspace) -> None:
    store = Store(ws, clock=lambda: datetime(2023, 12, 31, 15, 0, tzinfo=UTC))
    put(store, [{"path": "knowledge/t.md", "mode": "create", "content": "t\n"}])
    put(store, [{"path": "knowledge/t.md", "mode": "delete"}])
    assert (store.root / "archive/trash/2023-12-31/knowledge/t.md").read_bytes() == b"t\n"


def test_two_deletes_of_one_name_in_one_call_get_distinct_trash_names(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "one\n"}])
    put(
        store,
        [
            {"path": NOTE, "mode": "delete"},
            {"path": NOTE, "mode": "create", "content": "two\n"},
            {"path": NOTE, "mode": "delete"},
        ],
    )
    day = store.root / "archive/trash/2024-05-01/memory/notes"
    assert (day / "a.md").read_bytes() == b"one\n"
    assert (day / "a~2.md").read_bytes() == b"two\n"
    assert not (store.root / NOTE).exists()


def test_move_renames_in_one_version(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "moving\n"}])
    before = commits(store.root)
    target = "archive/lessons/2024/a.md"
    result = put(store, [{"path": NOTE, "mode": "move", "to": target}])
    assert not (store.root / NOTE).exists()
    assert (store.root / target).read_bytes() == b"moving\n"
    assert set(result.files) == {NOTE, target}
    assert commits(store.root) == before + 1
    assert files_of(store.root) == sorted([NOTE, target])


def test_a_change_that_changes_nothing_makes_no_version(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "same\n"}])
    before = commits(store.root)
    result = put(store, [{"path": NOTE, "mode": "overwrite", "content": "same\n"}])
    assert result.files == () and result.version is None
    assert commits(store.root) == before


# ------------------------------------------------------------------ one call, one version


def test_several_changes_are_one_commit_by_the_actor_with_trailers(store: Store) -> None:
    put(
        store,
        [
            {"path": "memory/notes/b.md", "mode": "create", "content": "b\n"},
            {"path": "memory/notes/c.md", "mode": "create", "content": "c\n"},
        ],
    )
    before = commits(store.root)
    result = store.write_context(
        [
            {"path": "memory/notes/a.md", "mode": "create", "content": "a\n"},
            {"path": "memory/notes/b.md", "mode": "append", "content": "b2\n"},
            {"path": "memory/notes/c.md", "mode": "edit", "old": "c", "new": "C"},
            {"path": "knowledge/k.md", "mode": "create", "content": "k\n"},
            {"path": "MEMORY.md", "mode": "append", "content": "- pointer\n"},
        ],
        actor="curate",
        message="curate: tidy notes",
        run_id="run-42",
    )
    assert commits(store.root) == before + 1
    touched = ["MEMORY.md", "knowledge/k.md", *(f"memory/notes/{n}.md" for n in "abc")]
    assert sorted(result.files) == touched
    assert files_of(store.root) == touched
    assert git(store.root, "log", "-1", "--format=%an <%ae>").strip() == (
        "crustacean curate <crustacean@localhost>"
    )
    assert git(store.root, "log", "-1", "--format=%cn").strip() == "crustacean curate"
    assert git(store.root, "log", "-1", "--format=%s").strip() == "curate: tidy notes"
    trailers = git(store.root, "log", "-1", "--format=%(trailers:only,unfold)")
    assert f"{TRAILER_RUN}: run-42" in trailers
    assert f"{TRAILER_CALL}: {result.call_id}" in trailers
    assert result.call_id


def test_run_trailer_defaults_to_the_call_id(store: Store) -> None:
    result = put(store, [{"path": NOTE, "mode": "create", "content": "x\n"}])
    trailers = git(store.root, "log", "-1", "--format=%(trailers:only,unfold)")
    assert f"{TRAILER_RUN}: {result.call_id}" in trailers


def test_user_edits_to_other_files_are_never_swept_in(store: Store) -> None:
    root = store.root
    (root / "USER.md").write_bytes(b"my own unstaged edit\n")
    (root / "TOOLS.md").write_bytes(b"my own staged edit\n")
    git(root, "add", "TOOLS.md")
    (root / "scratch.md").write_bytes(b"untracked, mine\n")
    status_before = git(root, "status", "--porcelain")

    put(store, [{"path": "MEMORY.md", "mode": "append", "content": "- model line\n"}], "curate")

    assert files_of(root) == ["MEMORY.md"]
    assert (root / "USER.md").read_bytes() == b"my own unstaged edit\n"
    assert (root / "TOOLS.md").read_bytes() == b"my own staged edit\n"
    assert (root / "scratch.md").read_bytes() == b"untracked, mine\n"
    # the user's index is as it was: TOOLS.md still staged, USER.md still unstaged, MEMORY.md clean
    assert git(root, "diff", "--cached", "--name-only").split() == ["TOOLS.md"]
    assert git(root, "diff", "--name-only").split() == ["USER.md"]
    assert git(root, "status", "--porcelain") == status_before
    assert git(root, "show", "HEAD:USER.md") != "my own unstaged edit\n"


def test_uncommitted_edit_to_the_same_file_is_snapshotted_first(store: Store) -> None:
    root = store.root
    put(store, [{"path": NOTE, "mode": "create", "content": "committed\n"}])
    (root / NOTE).write_bytes(b"committed\nuser typed this\n")
    before = commits(root)

    result = put(store, [{"path": NOTE, "mode": "append", "content": "model\n"}], "curate")

    assert result.snapshot is not None
    assert commits(root) == before + 2
    assert git(root, "rev-parse", "HEAD^").strip() == result.snapshot
    assert git(root, "show", f"{result.snapshot}:{NOTE}") == "committed\nuser typed this\n"
    assert git(root, "log", "-1", "--format=%an", result.snapshot).strip() == "crustacean user"
    assert files_of(root, result.snapshot) == [NOTE]
    assert (root / NOTE).read_bytes() == b"committed\nuser typed this\nmodel\n"
    assert git(root, "status", "--porcelain", NOTE) == ""


def test_untracked_user_file_is_snapshotted_before_a_model_changes_it(store: Store) -> None:
    root = store.root
    (root / NOTE).write_bytes(b"written by hand, never committed\n")
    result = put(store, [{"path": NOTE, "mode": "append", "content": "model\n"}], "curate")
    assert result.snapshot is not None
    assert git(root, "show", f"{result.snapshot}:{NOTE}") == "written by hand, never committed\n"


def test_clean_file_needs_no_snapshot(store: Store) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "x\n"}])
    result = put(store, [{"path": NOTE, "mode": "append", "content": "y\n"}])
    assert result.snapshot is None


# ------------------------------------------------------------------ read side


def test_list_context_files_skips_state_git_and_trash(store: Store) -> None:
    root = store.root
    put(store, [{"path": NOTE, "mode": "create", "content": "x\n"}])
    put(store, [{"path": NOTE, "mode": "delete"}])  # now only in archive/trash
    put(store, [{"path": "archive/daily/2024-01-01.md", "mode": "create", "content": "d\n"}])
    (root / ".crustacean" / "state.md").write_text("state\n")
    paths = [f.path for f in store.list_context_files()]
    assert paths == sorted(paths)
    assert "archive/daily/2024-01-01.md" in paths  # the archive itself is listed
    assert "MEMORY.md" in paths and "memory/.system/CURATE.md" in paths
    assert not [p for p in paths if p.startswith((".git/", ".crustacean/", "archive/trash/"))]
    assert NOTE not in paths


def test_list_context_files_reports_size_modified_and_tier(store: Store) -> None:
    hot = "---\ntitle: t\ntier: hot\n---\n# body\n"
    put(
        store,
        [
            {"path": "memory/notes/hot.md", "mode": "create", "content": hot},
            {
                "path": "memory/notes/cold.md",
                "mode": "create",
                "content": "---\ntier: 'cold'\n---\n",
            },
            {"path": "memory/notes/none.md", "mode": "create", "content": "no front matter\n"},
            # a tier line outside the front matter is not a tier
            {"path": "memory/notes/body.md", "mode": "create", "content": "---\n---\ntier: hot\n"},
        ],
    )
    infos = {f.path: f for f in store.list_context_files("memory/notes/")}
    assert set(infos) == {f"memory/notes/{n}.md" for n in ("hot", "cold", "none", "body")}
    assert infos["memory/notes/hot.md"].tier == "hot"
    assert infos["memory/notes/cold.md"].tier == "cold"
    assert infos["memory/notes/none.md"].tier is None
    assert infos["memory/notes/body.md"].tier is None
    assert infos["memory/notes/hot.md"].size == len(hot.encode())
    assert infos["memory/notes/hot.md"].to_json()["tier"] == "hot"
    assert "tier" not in infos["memory/notes/none.md"].to_json()
    datetime.fromisoformat(infos["memory/notes/hot.md"].modified)  # ISO 8601


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("memory/notes", ["memory/notes/a.md"]),
        ("./memory/notes", ["memory/notes/a.md"]),
        (".gitignore", [".gitignore"]),
        (".git", [".gitignore"]),  # never the repository itself
        ("nothing-here/", []),
    ],
)
def test_list_context_files_prefix(store: Store, prefix: str, expected: list[str]) -> None:
    put(store, [{"path": NOTE, "mode": "create", "content": "x\n"}])
    assert [f.path for f in store.list_context_files(prefix)] == expected


def test_read_context_file_hashes_the_exact_bytes(store: Store) -> None:
    raw = "line one\r\nzwei ü\n\ttab, no final newline".encode()
    (store.root / NOTE).parent.mkdir(parents=True, exist_ok=True)
    (store.root / NOTE).write_bytes(raw)
    got = store.read_context_file(NOTE)
    assert got.path == NOTE
    assert got.content == raw.decode("utf-8")
    assert got.sha256 == hashlib.sha256(raw).hexdigest() == sha256_hex(raw)
    assert store.read_context_file("./memory//notes/a.md").path == NOTE  # normalized


# ------------------------------------------------------------------ no git


def test_a_workspace_without_git_still_writes(tmp_path: Path) -> None:
    from crustacean.ops.init import init_workspace

    root = tmp_path / "plain"
    init_workspace(root)
    shutil.rmtree(root / ".git")
    store = Store(Workspace(root, load_config(root)), clock=lambda: DAY)
    assert not store.versioned
    result = put(store, [{"path": NOTE, "mode": "create", "content": "x\n"}])
    assert result.version is None and result.files == (NOTE,)
    put(store, [{"path": NOTE, "mode": "append", "content": "y\n"}])
    put(store, [{"path": NOTE, "mode": "delete"}])
    assert (root / "archive/trash/2024-05-01/memory/notes/a.md").read_bytes() == b"x\ny\n"
    assert not (root / ".git").exists()
    assert not (root / ".crustacean" / "journal.json").exists()


def test_an_oversize_file_can_still_be_moved_and_trashed(ws: Workspace) -> None:
    big = b"x" * (ws.settings.store.max_file_bytes + 10)
    (ws.root / "memory/notes/big.md").write_bytes(big)
    store = Store(ws)
    store.write_context(
        [{"path": "memory/notes/big.md", "mode": "move", "to": "knowledge/notes/big.md"}],
        actor="user",
        message="move a big file",
    )
    assert (ws.root / "knowledge/notes/big.md").read_bytes() == big
    store.write_context(
        [{"path": "knowledge/notes/big.md", "mode": "delete"}], actor="user", message="trash it"
    )
    assert not (ws.root / "knowledge/notes/big.md").exists()
    assert next((ws.root / "archive/trash").rglob("big.md")).read_bytes() == big


@pytest.mark.parametrize("ref", ["HEAD", "branch"])
def test_a_killed_runs_stale_ref_lock_does_not_block_the_next_write(store: Store, ref: str) -> None:
    """A kill -9 during `git update-ref` leaves .git/HEAD.lock (or the branch's); git would
    refuse every commit until someone deletes it. The store (holding its own lock) clears it
    after a short wait."""
    if ref == "branch":
        ref = (store.root / ".git/HEAD").read_text().removeprefix("ref: ").strip()
    lock = store.root / ".git" / f"{ref}.lock"
    lock.write_text("0" * 40 + "\n")
    from crustacean.store.changes import Change

    result = store.write_context(
        [Change("memory/notes/after-kill.md", "create", content=b"still works\n")],
        actor="user",
        message="after a kill",
    )
    assert result.version and not lock.exists()
    assert git(store.root, "log", "-1", "--format=%s").strip() == "after a kill"
