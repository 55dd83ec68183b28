"""A version in four git commands (issue 23), and the same version whatever the repository holds.

The store reads HEAD and a few tree entries from git's own files, and builds the version on a
copy of the user's index when that copy proves to be HEAD's tree plus exactly this call. These
tests show that every other repository state (staged work, assume-unchanged, skip-worktree, a
mode change, packed objects, no index) still gets the version git itself would make.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crustacean.store import gitread
from crustacean.store.versions import Git
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOTE = "memory/notes/fast.md"
USER_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
}


def git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env={**os.environ, **USER_ENV}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def append(store: Store, text: str, path: str = NOTE) -> str | None:
    change = {"path": path, "mode": "append", "content": text}
    return store.write_context([change], actor="curate", message="fast: append").version


@pytest.fixture
def store(ws: Workspace) -> Store:
    s = Store(ws)
    s.write_context(
        [{"path": NOTE, "mode": "create", "content": "# fast\n"}], actor="user", message="setup"
    )
    return s


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git subcommands the store runs from now on."""
    seen: list[str] = []
    real = Git.run

    def run(self: Git, *args: str, **kw: object):  # type: ignore[no-untyped-def]  # a spy with git's own signature
        seen.append(args[0])
        return real(self, *args, **kw)  # type: ignore[arg-type]  # passes git's keyword arguments through

    monkeypatch.setattr(Git, "run", run)
    return seen


def assert_index_follows_head(root: Path, path: str) -> None:
    assert (
        git(root, "ls-files", "-s", "--", path).split()[:2]
        == git(root, "ls-tree", "HEAD", "--", path).split()[0:3:2]
    )


def test_a_one_file_version_is_four_git_commands_and_the_index_is_heads(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store.root
    append(store, "- warm up\n")
    seen = recorded(monkeypatch)
    version = append(store, "- one line\n")
    assert seen == ["update-index", "write-tree", "commit-tree", "update-ref"]
    assert version == git(root, "rev-parse", "HEAD").strip()
    assert git(root, "show", f"HEAD:{NOTE}") == "# fast\n- warm up\n- one line\n"
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == [NOTE]
    assert git(root, "diff", "--cached", "--name-only") == ""  # the user's index is HEAD's
    assert git(root, "status", "--porcelain") == ""
    assert_index_follows_head(root, NOTE)


def _staged_other(root: Path) -> str:
    (root / "USER.md").write_text("staged by the user\n")
    git(root, "add", "USER.md")
    return "USER.md"


def _assume_unchanged(root: Path) -> None:
    git(root, "update-index", "--assume-unchanged", NOTE)


def _skip_worktree(root: Path) -> None:
    git(root, "update-index", "--skip-worktree", NOTE)


def _chmod(root: Path) -> None:
    (root / NOTE).chmod(0o755)


def _gc(root: Path) -> None:
    git(root, "gc", "-q")


def _no_index(root: Path) -> None:
    (root / ".git/index").unlink()


def _intent_to_add(root: Path) -> str:
    (root / "later.md").write_text("not yet\n")
    git(root, "add", "-N", "later.md")
    return "later.md"


STATES = {
    "staged-other-file": _staged_other,
    "assume-unchanged": _assume_unchanged,
    "skip-worktree": _skip_worktree,
    "mode-change": _chmod,
    "packed-objects": _gc,
    "no-index": _no_index,
    "intent-to-add": _intent_to_add,
}


@pytest.mark.parametrize("state", list(STATES))
def test_the_version_is_gits_whatever_the_users_index_holds(store: Store, state: str) -> None:
    root = store.root
    append(store, "- before\n")
    staged_before = git(root, "diff", "--cached", "--name-only").split()
    STATES[state](root)
    staged = git(root, "diff", "--cached", "--name-only").split()
    before = git(root, "rev-parse", "HEAD").strip()
    append(store, "- after\n")
    assert git(root, "rev-parse", "HEAD~1").strip() == before
    assert git(root, "show", f"HEAD:{NOTE}") == (root / NOTE).read_text()
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == [NOTE]  # nothing else
    mode = git(root, "ls-tree", "HEAD", "--", NOTE).split()[0]
    assert mode == ("100755" if state == "mode-change" else "100644")
    assert_index_follows_head(root, NOTE)
    # what the user staged stays staged, and only that
    if state != "no-index":
        assert git(root, "diff", "--cached", "--name-only").split() == staged
    assert staged_before == []


def test_the_next_version_after_a_fallback_is_fast_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store.root
    _gc(root)  # HEAD's trees are packed: the first version cannot be checked from files
    append(store, "- one\n")
    seen = recorded(monkeypatch)
    append(store, "- two\n")
    assert seen == ["update-index", "write-tree", "commit-tree", "update-ref"]
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    "setup",
    ["loose", "packed-refs", "packed-objects", "detached", "unborn"],
)
def test_head_and_tree_entries_read_from_files_are_what_git_says(
    tmp_path: Path, setup: str
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    if setup != "unborn":
        (root / "a").mkdir()
        (root / "a/b.md").write_text("b\n")
        (root / "a/x.sh").write_text("x\n")
        (root / "a/x.sh").chmod(0o755)
        (root / "top.md").write_text("t\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "one")
    if setup == "packed-refs":
        git(root, "pack-refs", "--all")
    if setup == "packed-objects":
        git(root, "gc", "-q")
    if setup == "detached":
        git(root, "checkout", "-q", "--detach")
    g = Git(root)
    proc = subprocess.run(
        ["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=root, capture_output=True, text=True
    )
    assert g.head() == (proc.stdout.strip() or None)
    fast = gitread.read_head(root / ".git")
    assert fast == (None if setup in ("detached", "unborn") else g.head())
    if setup == "unborn":
        return
    head = g.head()
    assert head is not None
    paths = ["a/b.md", "a/x.sh", "top.md", "a/missing.md", "nope/c.md", "a"]
    listed = {}
    for line in git(root, "ls-tree", "--full-tree", head, "--", *paths[:5]).splitlines():
        meta, name = line.split("\t")
        mode, _, sha = meta.split()
        listed[name] = (mode.encode(), sha)
    assert g.tree_entries(head, paths[:5]) == listed
    from_files = gitread.tree_entries(root / ".git", head, paths[:5])
    assert from_files == (None if setup == "packed-objects" else listed)
    assert gitread.tree_entries(root / ".git", head, paths) is None  # a folder: git answers


def test_files_are_not_read_where_git_would_look_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    assert gitread.plain_git_dir(root) == root / ".git"
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(tmp_path / "elsewhere"))
    assert gitread.plain_git_dir(root) is None
    monkeypatch.delenv("GIT_OBJECT_DIRECTORY")
    (root / ".git/refs/replace").mkdir()
    assert gitread.plain_git_dir(root) is None
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {root / '.git'}\n")
    assert gitread.plain_git_dir(linked) is None


def test_tree_is_accepts_exactly_the_call(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "d").mkdir()
    for name in ("d/a.md", "d/b.md", "c.md"):
        (root / name).write_text(name + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    parent = git(root, "rev-parse", "HEAD").strip()
    gd = root / ".git"

    def tree_after(edit: dict[str, str | None]) -> str:
        for name, text in edit.items():
            if text is None:
                git(root, "rm", "-q", "--cached", name)
            else:
                (root / name).parent.mkdir(exist_ok=True)
                (root / name).write_text(text)
                git(root, "add", name)
        tree = git(root, "write-tree").strip()
        git(root, "read-tree", "HEAD")
        return tree

    new_a = gitread.blob_id(b"new\n", parent)
    new_e = gitread.blob_id(b"e\n", parent)
    assert gitread.tree_is(gd, parent, tree_after({"d/a.md": "new\n"}), {"d/a.md": new_a})
    assert gitread.tree_is(gd, parent, tree_after({"d/b.md": None}), {"d/b.md": None})
    assert gitread.tree_is(gd, parent, tree_after({"e/e.md": "e\n"}), {"e/e.md": new_e})
    # anything more, less or else is refused
    both = tree_after({"d/a.md": "new\n", "c.md": "staged\n"})
    assert not gitread.tree_is(gd, parent, both, {"d/a.md": new_a})
    assert not gitread.tree_is(gd, parent, tree_after({}), {"d/a.md": new_a})
    assert not gitread.tree_is(gd, parent, tree_after({"d/a.md": "new\n"}), {"d/a.md": None})
    assert not gitread.tree_is(gd, parent, tree_after({"d/a.md": "new\n"}), {"d/a.md": new_e})


def test_the_files_folders_are_synced_before_head_moves(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folders' fsyncs run while git works, but HEAD moves only after they are done."""
    from crustacean.store import write

    events: list[str] = []
    real_sync, real_run = write.fsync_dir, Git.run

    def sync(folder: Path) -> None:
        real_sync(folder)
        events.append(f"synced {folder.relative_to(store.root).as_posix()}")

    def run(self: Git, *args: str, **kw: object):  # type: ignore[no-untyped-def]  # a spy with git's own signature
        events.append(args[0])
        return real_run(self, *args, **kw)  # type: ignore[arg-type]  # passes git's keyword arguments through

    monkeypatch.setattr(write, "fsync_dir", sync)
    monkeypatch.setattr(Git, "run", run)
    append(store, "- durable\n")
    assert "synced .crustacean" in events[: events.index("update-index")]  # the journal's
    assert events.index("synced memory/notes") < events.index("update-ref")


def test_a_file_that_cannot_be_written_leaves_nothing_behind(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One temp file of a call fails while the others are written at once: the error is
    raised, no file changed, no temp file and no journal is left, and no version is made."""
    from conftest import snapshot
    from crustacean.store import write

    root = store.root
    names = [f"memory/notes/n{i}.md" for i in range(4)]
    store.write_context(
        [{"path": p, "mode": "create", "content": "x\n"} for p in names],
        actor="user",
        message="setup",
    )
    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    real = write.synced_temp

    def flaky(path: Path, data: bytes, mode: int | None) -> str:
        if path.name == "n2.md":
            raise OSError(28, "No space left on device")
        return real(path, data, mode)

    monkeypatch.setattr(write, "synced_temp", flaky)
    with pytest.raises(OSError, match="No space left"):
        store.write_context(
            [{"path": p, "mode": "append", "content": "y\n"} for p in names],
            actor="curate",
            message="doomed",
        )
    assert snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == head


def test_disk_waits_run_together_and_report_every_failure() -> None:
    from crustacean.store.parallel import all_at_once, start

    assert all_at_once([lambda i=i: i * i for i in range(20)]) == [i * i for i in range(20)]
    boom = OSError("disk")

    def fail() -> int:
        raise boom

    out = all_at_once([lambda: 1, fail, lambda: 3], keep_going=True)
    assert out == [1, boom, 3]
    ran: list[int] = []
    with pytest.raises(OSError, match="disk"):
        all_at_once([lambda: ran.append(1), fail, lambda: ran.append(3)])
    assert sorted(ran) == [1, 3]  # every job ran before the error was raised
    wait = start(fail)
    with pytest.raises(OSError, match="disk"):
        wait()
    wait()  # a second wait returns at once


def test_an_index_copy_on_another_filesystem_goes_through_gits_lock(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the copy cannot be renamed over `.git/index` (EXDEV), its bytes are written into
    git's lock file and that is renamed, as git does; nothing is left in the state folder."""
    root = store.root
    real = os.replace

    def replace(src: object, dst: object) -> None:
        if Path(str(src)).name.startswith("index-") and Path(str(dst)) == root / ".git/index":
            raise OSError(18, "Invalid cross-device link")
        real(src, dst)  # type: ignore[arg-type]  # os.replace's own argument types

    monkeypatch.setattr(os, "replace", replace)
    append(store, "- across\n")
    assert git(root, "status", "--porcelain") == ""
    assert_index_follows_head(root, NOTE)
    assert not (root / ".git/index.lock").exists()
    assert not [p for p in (root / ".crustacean").iterdir() if p.name.startswith("index-")]
