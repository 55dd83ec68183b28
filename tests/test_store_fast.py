"""A version in one git command (issue 23), and the same version whatever the repository holds.

The store reads HEAD and a few tree entries from git's own files, stages the call on a copy of
the user's index, and writes the tree, the commit and the ref itself (gitwrite) when the copy
proves to hold exactly this call. These tests show that the bytes are git's (commit, trees,
reflog lines), that every other repository state (staged work, assume-unchanged, skip-worktree,
a mode change, packed objects, no index, signing, extensions, hooks...) still gets the version
git itself would make, and that a kill at any step leaves the workspace as before or after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crustacean.errors import VersionError
from crustacean.store import gitread, gitwrite
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


def assert_sound(root: Path) -> None:
    """What git itself says of the repository: no error, no warning, a readable reflog that
    names HEAD first, and every ref and reflog line in its format."""
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=root, capture_output=True, text=True)
    said = (fsck.stdout + fsck.stderr).splitlines()
    # a commit no ref names (a kill before HEAD moved leaves one, as a killed git does) is
    # not a fault: gc prunes it
    assert fsck.returncode == 0 and all(s.startswith("dangling commit ") for s in said), said
    head = git(root, "rev-parse", "HEAD").strip()
    assert git(root, "reflog", "-n1", "--format=%H").strip() == head
    branch = git(root, "symbolic-ref", "HEAD").strip()
    assert git(root, "reflog", "show", "-n1", "--format=%H", branch).strip() == head
    assert not (root / ".git/HEAD.lock").exists() and not (root / f".git/{branch}.lock").exists()


def assert_index_follows_head(root: Path, path: str) -> None:
    assert (
        git(root, "ls-files", "-s", "--", path).split()[:2]
        == git(root, "ls-tree", "HEAD", "--", path).split()[0:3:2]
    )


def test_a_one_file_version_is_two_git_commands_and_the_index_is_heads(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store.root
    append(store, "- warm up\n")
    seen = recorded(monkeypatch)
    version = append(store, "- one line\n")
    assert seen == ["update-index"]  # the tree, the commit and HEAD's move: gitwrite
    assert_sound(root)
    assert git(root, "reflog", "-n1", "--format=%H %gs") == f"{version} crustacean curate\n"
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
    assert seen == ["update-index"]
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
    from crustacean.store import apply as write

    events: list[str] = []
    real_sync, real_run, real_move = write.fsync_dir, Git.run, gitwrite.update_head

    def sync(folder: Path) -> None:
        real_sync(folder)
        events.append(f"synced {folder.relative_to(store.root).as_posix()}")

    def run(self: Git, *args: str, **kw: object):  # type: ignore[no-untyped-def]  # a spy with git's own signature
        events.append(args[0])
        return real_run(self, *args, **kw)  # type: ignore[arg-type]  # passes git's keyword arguments through

    def move(*args: object) -> None:
        events.append("update_head")
        real_move(*args)  # type: ignore[arg-type]  # update_head's own arguments

    monkeypatch.setattr(write, "fsync_dir", sync)
    monkeypatch.setattr(Git, "run", run)
    monkeypatch.setattr(gitwrite, "update_head", move)
    append(store, "- durable\n")
    assert "synced .crustacean" in events[: events.index("update-index")]  # the journal's
    assert events.index("synced memory/notes") < events.index("update_head")


def test_a_file_that_cannot_be_written_leaves_nothing_behind(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One temp file of a call fails while the others are written at once: the error is
    raised, no file changed, no temp file and no journal is left, and no version is made."""
    from conftest import snapshot
    from crustacean.store import apply as write

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


# ------------------------------------------------------------------ the commit and HEAD in Python
# (gitwrite): byte-identical to git's, git itself for anything unusual, sound after a kill.

FIXED = datetime(2026, 5, 1, 10, 30, tzinfo=UTC)
TRAILERS = {"Crustacean-Actor": "curate", "Crustacean-Call": "c1"}


def plain_repo(tmp_path: Path, name: str = "repo") -> Path:
    root = tmp_path / name
    (root / "d").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "d/a.md").write_text("a\n")
    (root / "top.md").write_text("t\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    return root


def version_of(root: Path, now: datetime | None, actor: str = "curate") -> str:
    with (root / "d/a.md").open("a") as fh:
        fh.write("- more\n")
    return Git(root).commit_paths(
        ["d/a.md"], actor=actor, message="fast: more", trailers=TRAILERS, now=now
    )


def last_line(path: Path) -> bytes:
    return path.read_bytes().splitlines(keepends=True)[-1]


def test_the_commit_and_reflog_lines_are_byte_identical_to_gits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = plain_repo(tmp_path), tmp_path / "theirs"
    shutil.copytree(ours, theirs, symlinks=True)
    seen = recorded(monkeypatch)
    mine = version_of(ours, FIXED)
    assert "commit-tree" not in seen and "update-ref" not in seen
    monkeypatch.setattr(gitwrite, "unusual", lambda *a: "forced, for the comparison")
    seen.clear()
    gits = version_of(theirs, FIXED)
    assert "commit-tree" in seen and "update-ref" in seen
    assert mine == gits
    assert git(ours, "cat-file", "commit", mine) == git(theirs, "cat-file", "commit", gits)
    branch = git(ours, "symbolic-ref", "HEAD").strip()
    for log_file in ("logs/HEAD", f"logs/{branch}"):
        assert last_line(ours / ".git" / log_file) == last_line(theirs / ".git" / log_file)
    assert (ours / ".git" / branch).read_bytes() == (theirs / ".git" / branch).read_bytes()
    for root in (ours, theirs):
        assert_sound(root)
    obj = f".git/objects/{mine[:2]}/{mine[2:]}"
    assert (ours / obj).stat().st_mode & 0o777 == 0o444  # git's loose objects are read-only
    assert not list((ours / ".git/objects").glob("*/tmp_obj_*"))


def commit_tree(root: Path, tree: str, parent: str, message: str, env: dict[str, str]) -> str:
    """git's own commit of the same tree, parent, message and identity."""
    who = {"GIT_AUTHOR_NAME": "crustacean curate", "GIT_AUTHOR_EMAIL": "crustacean@localhost"}
    who |= {
        "GIT_COMMITTER_NAME": "crustacean curate",
        "GIT_COMMITTER_EMAIL": who["GIT_AUTHOR_EMAIL"],
    }
    proc = subprocess.run(
        ["git", "commit-tree", tree, "-p", parent],
        cwd=root,
        input=message,
        capture_output=True,
        text=True,
        env={**os.environ, **who, **env},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("zone", ["UTC0", "IST-5:30", "EST+5", "NPT-5:45", "NST+3:30"])
def test_the_clocks_date_and_zone_are_written_as_git_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    root = plain_repo(tmp_path)
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        mine = version_of(root, None)
        text = git(root, "cat-file", "commit", mine)
        author = next(line for line in text.splitlines() if line.startswith("author "))
        seconds, offset = author.split()[-2:]
        tree, parent = git(root, "rev-parse", f"{mine}^{{tree}}", f"{mine}~1").split()
        message = text.split("\n\n", 1)[1]
        gits = git(root, "cat-file", "commit", commit_tree(root, tree, parent, message, {}))
        their_author = next(line for line in gits.splitlines() if line.startswith("author "))
        assert their_author.split()[-1] == offset  # the zone git computes from TZ
        assert abs(int(their_author.split()[-2]) - int(seconds)) <= 5
        date = f"{seconds} {offset}"
        dated = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        assert commit_tree(root, tree, parent, message, dated) == mine  # same bytes, same id
        line = last_line(root / ".git/logs/HEAD").decode()
        assert line.endswith(f"<crustacean@localhost> {seconds} {offset}\tcrustacean curate\n")
    finally:
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", gitwrite._FSYNC_DEFAULT),
        ("none", 0),
        ("reference", gitwrite._FSYNC_DEFAULT | gitwrite._REF),
        ("loose-object,reference", gitwrite._FSYNC_DEFAULT | gitwrite._LOOSE | gitwrite._REF),
        ("committed", gitwrite._FSYNC_DEFAULT | gitwrite._OBJECTS | gitwrite._REF),
        ("-pack", gitwrite._FSYNC_DEFAULT & ~(gitwrite._PACK | gitwrite._PACK_META)),
        ("ind", gitwrite._FSYNC_DEFAULT | gitwrite._INDEX),  # a prefix names every match
        ("pack", gitwrite._FSYNC_DEFAULT | gitwrite._PACK | gitwrite._PACK_META),
        ("none,reference", gitwrite._FSYNC_DEFAULT | gitwrite._REF),  # `none` only alone
        # what is named wins over what is removed, whatever the order
        (" all, -index", gitwrite._OBJECTS | gitwrite._REF | gitwrite._DERIVED | gitwrite._INDEX),
        ("bogus", gitwrite._FSYNC_DEFAULT),
    ],
)
def test_core_fsync_is_read_as_git_reads_it(value: str, expected: int) -> None:
    assert gitwrite.fsync_components(value) == expected


@pytest.mark.parametrize(
    ("setting", "synced"),
    [(None, set()), ("reference", {"ref", "log"}), ("loose-object", {"object"})],
)
def test_refs_and_objects_are_fsynced_as_core_fsync_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, synced: set[str]
) -> None:
    root = plain_repo(tmp_path)
    if setting is not None:
        git(root, "config", "core.fsync", setting)
    seen: set[str] = set()
    real = os.fsync

    def spy(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if "/.git/logs/" in name:
            seen.add("log")
        elif name.endswith(".lock"):
            seen.add("ref")
        elif "/.git/objects/" in name:
            seen.add("object")
        real(fd)

    monkeypatch.setattr(gitwrite.os, "fsync", spy)
    version_of(root, FIXED)
    assert seen == synced
    assert_sound(root)


def _sign(root: Path) -> None:
    gpg = root.parent / "fake-gpg"
    gpg.write_text(
        "#!/bin/sh\ncat >/dev/null\necho '[GNUPG:] SIG_CREATED D 1 8 00 0 0' >&2\n"
        "printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nZmFrZQ==\\n-----END PGP SIGNATURE-----\\n'\n"
    )
    gpg.chmod(0o755)
    git(root, "config", "gpg.program", str(gpg))
    git(root, "config", "commit.gpgsign", "true")


def _hook(root: Path) -> None:
    hook = root / ".git/hooks/reference-transaction"
    hook.write_text(f'#!/bin/sh\necho "$1" >> {root.parent / "hook.log"}\n')
    hook.chmod(0o755)


UNUSUAL = {
    "signing": _sign,
    "an extension": lambda r: (
        git(r, "config", "core.repositoryformatversion", "1"),
        git(r, "config", "extensions.worktreeConfig", "true"),
    ),
    "a commit encoding": lambda r: git(r, "config", "i18n.commitEncoding", "ISO-8859-1"),
    "grafts": lambda r: (r / ".git/info").mkdir(exist_ok=True) or (r / ".git/info/grafts").touch(),
    "replace refs": lambda r: (r / ".git/refs/replace").mkdir(),
    "a reference-transaction hook": _hook,
    "no reflogs": lambda r: git(r, "config", "core.logAllRefUpdates", "false"),
    "batched fsync": lambda r: git(r, "config", "core.fsyncMethod", "batch"),
    "a shared repository": lambda r: git(r, "config", "core.sharedRepository", "group"),
    "a date in the environment": lambda r: os.environ.update(GIT_COMMITTER_DATE="1700000000 +0100"),
}


@pytest.mark.parametrize("case", list(UNUSUAL))
def test_anything_unusual_is_left_to_git(
    store: Store, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    root = store.root
    append(store, "- warm up\n")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "")  # restored after the test, then removed
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    UNUSUAL[case](root)
    seen = recorded(monkeypatch)
    version = append(store, "- now git writes it\n")
    assert "commit-tree" in seen  # and the ref too, but for signing, which changes no ref
    assert ("update-ref" in seen) == (case != "signing")
    assert git(root, "show", f"HEAD:{NOTE}") == "# fast\n- warm up\n- now git writes it\n"
    assert git(root, "rev-parse", "HEAD").strip() == version
    text = git(root, "cat-file", "commit", "HEAD")
    if case == "signing":
        assert "gpgsig -----BEGIN PGP SIGNATURE-----" in text
    if case == "a commit encoding":
        assert "\nencoding ISO-8859-1\n" in text
    if case == "a reference-transaction hook":
        assert (root.parent / "hook.log").read_text().split()[-2:] == ["prepared", "committed"]
    if case == "a date in the environment":
        assert "1700000000 +0100" in text
    if case not in ("grafts", "replace refs"):  # git warns of those itself
        assert_sound(root)
    assert git(root, "status", "--porcelain") == ""


def test_odd_actor_names_are_left_to_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = plain_repo(tmp_path)
    seen = recorded(monkeypatch)
    version = version_of(root, FIXED, actor="odd.")  # git strips a trailing dot from a name
    assert "commit-tree" in seen
    assert "author crustacean odd <" in git(root, "cat-file", "commit", version)


def test_a_config_change_is_seen_by_the_next_version(
    store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = store.root
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text("[include]\n\tpath = extra.gitconfig\n")
    (home / "extra.gitconfig").write_text("")
    append(store, "- one\n")
    seen = recorded(monkeypatch)
    append(store, "- two\n")
    assert seen == ["update-index"]  # the config is read once, then kept
    (home / "extra.gitconfig").write_text("[i18n]\n\tcommitEncoding = ISO-8859-1\n")
    seen.clear()
    append(store, "- three\n")
    assert "config" in seen and "commit-tree" in seen  # an included file changed
    assert "\nencoding ISO-8859-1\n" in git(root, "cat-file", "commit", "HEAD")


def test_packed_refs_are_moved_as_git_moves_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store.root
    append(store, "- one\n")
    git(root, "pack-refs", "--all", "--prune")
    branch = git(root, "symbolic-ref", "HEAD").strip()
    assert not (root / ".git" / branch).exists()
    seen = recorded(monkeypatch)
    version = append(store, "- two\n")
    assert seen == ["update-index"]
    assert (root / ".git" / branch).read_text() == f"{version}\n"  # a loose ref over the packed
    assert_sound(root)


def _take_the_branch_lock(root: Path) -> None:
    branch = git(root, "symbolic-ref", "HEAD").strip()
    (root / ".git" / f"{branch}.lock").write_text("another git's\n")


def _move_the_branch(root: Path) -> None:
    git(root, "update-ref", "HEAD", "HEAD~1")


@pytest.mark.parametrize("race", [_take_the_branch_lock, _move_the_branch])
def test_a_lock_taken_or_head_moved_meanwhile_fails_the_write_cleanly(
    store: Store, monkeypatch: pytest.MonkeyPatch, race: Callable[[Path], None]
) -> None:
    """Between the commit object and the ref update another git takes the branch's lock or
    moves it: git's own update-ref then says why, the write fails, and nothing changed."""
    from crustacean.store import apply as write

    root = store.root
    append(store, "- one\n")
    before = (root / NOTE).read_bytes()

    def hook(point: str) -> None:
        if point == gitwrite.COMMIT_WRITTEN:
            race(root)
            head.append(git(root, "rev-parse", "HEAD").strip())

    head: list[str] = []
    monkeypatch.setattr(write, "_FAULT_HOOK", hook)
    with pytest.raises(VersionError, match="update-ref failed"):
        append(store, "- two\n")
    assert (root / NOTE).read_bytes() == before
    assert git(root, "rev-parse", "HEAD").strip() == head[0]  # as the other git left it
    assert not (root / ".crustacean/journal.json").exists()


@pytest.mark.parametrize("point", gitwrite.STEPS)
def test_a_kill_at_every_step_of_the_version_leaves_before_or_after(
    ws: Workspace, point: str
) -> None:
    """SIGKILL at each step of the commit and the ref update (the crash suite's KILL_AT): the
    next run leaves the workspace as before the killed write (HEAD never moved) or as after
    (it did), git finds nothing wrong, and the next write is a version as usual."""
    from test_store_git import killed_cli

    from conftest import run_cli

    root = ws.root
    head = git(root, "rev-parse", "HEAD").strip()
    killed_cli(root, point, "remember", "tea", "Alice drinks green tea.")
    moved = git(root, "rev-parse", "HEAD").strip() != head
    assert moved == (point == gitwrite.REF_MOVED)  # HEAD moves with the rename, and only then
    run_cli("-w", str(root), "remember", "coffee", "Bob drinks coffee.")
    tea = root / "memory/lessons/tea.md"
    if moved:
        assert "green tea" in tea.read_text()
        assert "green tea" in git(root, "show", "HEAD:memory/lessons/tea.md")
    else:
        assert not tea.exists()
        assert "memory/lessons/tea.md" not in git(root, "ls-tree", "-r", "--name-only", "HEAD")
    assert "coffee" in git(root, "show", "HEAD:memory/lessons/coffee.md")
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "diff", "--cached", "--name-only") == ""
    assert_sound(root)


def test_a_reflog_that_cannot_be_written_undoes_the_write(store: Store) -> None:
    """An error under the locks (here logs/HEAD is a folder) fails the write with a clear
    message: the file is as it was, HEAD did not move, no lock is left."""
    root = store.root
    append(store, "- one\n")
    before, head = (root / NOTE).read_bytes(), git(root, "rev-parse", "HEAD")
    log_file = root / ".git/logs/HEAD"
    saved = log_file.read_bytes()
    log_file.unlink()
    log_file.mkdir()
    with pytest.raises(VersionError, match=r"could not be recorded .*undone"):
        append(store, "- two\n")
    assert (root / NOTE).read_bytes() == before
    log_file.rmdir()
    log_file.write_bytes(saved)
    assert git(root, "rev-parse", "HEAD") == head
    assert_sound(root)
    assert git(root, "status", "--porcelain") == ""


# ------------------------------------------------------------------ the tree without write-tree

NAMES = ["a.md", "a", "a-b.md", "b.md", "sub/c.md", "sub/deep/d.md", "sub.md", "sub-x/e.md"]


@pytest.fixture(scope="module")
def tree_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Names that sort differently as files and as folders ("sub" against "sub.md", "sub-x")."""
    root = tmp_path_factory.mktemp("trees") / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for name in ["a.md", "b.md", "sub/c.md", "sub/deep/d.md", "sub.md", "x.sh"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name + "\n")
    (root / "x.sh").chmod(0o755)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "commit", "-q", "-m", "one"], cwd=root, check=True, env=os.environ | USER_ENV
    )
    return root


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(
        st.sampled_from(NAMES), st.one_of(st.none(), st.sampled_from(["x\n", "y\n"])), max_size=5
    )
)
def test_trees_built_here_are_the_trees_git_writes(
    tree_repo: Path, edit: dict[str, str | None]
) -> None:
    root, gd = tree_repo, tree_repo / ".git"
    head = git(root, "rev-parse", "HEAD").strip()
    facts = gitwrite.parse_facts(root, gd, b"")
    changes: dict[str, tuple[bytes, str] | None] = {}
    info = []
    for path, text in edit.items():
        if text is None:
            changes[path] = None
            info.append(f"0 {'0' * 40}\t{path}")
        else:
            proc = subprocess.run(
                ["git", "hash-object", "-w", "--stdin"],
                cwd=root,
                input=text,
                capture_output=True,
                text=True,
                check=True,
            )
            changes[path] = (b"100644", proc.stdout.strip())
            info.append(f"100644 {proc.stdout.strip()}\t{path}")
    index = root.parent / "index-check"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=root, env=env, check=True)
    subprocess.run(
        ["git", "update-index", "--index-info"],
        cwd=root,
        env=env,
        input="".join(line + "\n" for line in info),
        text=True,
        check=True,
    )
    proc = subprocess.run(["git", "write-tree"], cwd=root, env=env, capture_output=True, text=True)
    index.unlink()
    assert gitwrite.tree_with(gd, head, changes, facts) == proc.stdout.strip()


def test_the_calls_entries_are_read_back_from_the_index_as_git_lists_them(
    tmp_path: Path,
) -> None:
    root = plain_repo(tmp_path)
    (root / "d/new.md").write_text("new\n")
    (root / "sk.md").write_text("skipped\n")
    (root / "ita.md").write_text("later\n")
    git(root, "add", "d/new.md", "sk.md")
    git(root, "commit", "-q", "-m", "two")
    git(root, "update-index", "--skip-worktree", "sk.md")  # an extended flag: a v3 index
    git(root, "add", "-N", "ita.md")
    data = (root / ".git/index").read_bytes()
    assert data[4:8] == b"\0\0\0\3"
    blob = {p: git(root, "rev-parse", f":{p}").strip() for p in ("d/a.md", "d/new.md", "top.md")}
    assert gitwrite.staged(data, {"d/a.md": blob["d/a.md"]}) == {"d/a.md": b"100644"}
    assert gitwrite.staged(data, blob) == {p: b"100644" for p in blob}
    assert gitwrite.staged(data, {"gone.md": None, "d/a.md": blob["d/a.md"]}) == {
        "gone.md": None,
        "d/a.md": b"100644",
    }
    assert gitwrite.staged(data, {"d/a.md": blob["d/new.md"]}) is None  # another blob
    assert gitwrite.staged(data, {"d/a.md": None}) is None  # there, but expected gone
    assert gitwrite.staged(data, {"a.md": blob["d/a.md"]}) is None  # not there (a suffix)
    sk = git(root, "rev-parse", ":sk.md").strip()
    assert gitwrite.staged(data, {"sk.md": sk}) is None  # skip-worktree: git decides
    assert gitwrite.staged(data, {"ita.md": gitread.blob_id(b"", sk)}) is None  # intent-to-add
    git(root, "update-index", "--index-version", "4")
    v4 = (root / ".git/index").read_bytes()
    assert gitwrite.staged(v4, {"d/a.md": blob["d/a.md"]}) is None  # prefix-compressed names


def test_a_tree_of_an_odd_shape_is_left_to_git(tmp_path: Path) -> None:
    root = plain_repo(tmp_path)
    gd, head = root / ".git", git(root, "rev-parse", "HEAD").strip()
    facts = gitwrite.parse_facts(root, gd, b"")
    blob = gitread.blob_id(b"x\n", head)
    for odd in ("top.md/x.md", "d", "d/../e.md", "d//e.md"):  # through a file, over a folder
        with pytest.raises(gitread.NotHere):
            gitwrite.tree_with(gd, head, {odd: (b"100644", blob)}, facts)
    git(root, "gc", "-q")
    with pytest.raises(gitread.NotHere):  # packed: git's write-tree builds it
        gitwrite.tree_with(gd, head, {"new.md": (b"100644", blob)}, facts)
