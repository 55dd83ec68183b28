"""Bad input to the write layer (issue 3, "Bad input"): every refusal says what was wrong in words
a model can act on, and leaves every byte of the workspace (and its git refs) as it was. Plus the
all-or-nothing guarantees: a failure between two files, a failed commit and a hard crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_helpers import copy_workspace, git, make_template

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.errors import (
    LimitError,
    PathError,
    PolicyError,
    StaleWriteError,
    VersionError,
    WriteError,
)
from crustacean.store import apply as store_files
from crustacean.store import history as hist
from crustacean.store.versions import Git
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOTE = "memory/notes/a.md"
NOTE_TEXT = "one\ntwo\ntwo\ntwo\n"
STATUS = "?? memory/notes/outfile.md\n?? memory/out\n"  # the seeded symlinks, nothing else
LIMIT = 262_144  # store.max_file_bytes default


def _seed(ws: Workspace) -> None:
    Store(ws).write_context(
        [
            {"path": NOTE, "mode": "create", "content": NOTE_TEXT},
            {"path": "memory/notes/b.md", "mode": "create", "content": "bee\n"},
        ],
        actor="user",
        message="seed",
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory, _seed)


@pytest.fixture
def seeded(template: Path, tmp_path: Path) -> Workspace:
    """A workspace with a committed note, a clean tree, and two symlinks that lead outside."""
    ws = copy_workspace(template, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file.md").write_text("outside\n")
    os.symlink(outside, ws.root / "memory" / "out")
    os.symlink(outside / "file.md", ws.root / "memory" / "notes" / "outfile.md")
    return ws


def outside_state(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((tmp_path / "outside").iterdir())}


def sha_of(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


GOOD = {"path": "memory/notes/new.md", "mode": "create", "content": "fine\n"}

# (id, changes, actor, error type, message pattern). Where a valid change comes first, the test
# also shows that nothing of the call was applied.
CASES: list[tuple[str, object, str, type[Exception], str]] = [
    # ---- stale reads
    (
        "stale-sha",
        [GOOD, {"path": NOTE, "mode": "append", "content": "x\n", "expected_sha256": "0" * 64}],
        "user",
        StaleWriteError,
        r"memory/notes/a\.md changed since it was read .*Nothing was written",
    ),
    (
        "stale-sha-of-missing-file",
        [
            {
                "path": "memory/notes/gone.md",
                "mode": "append",
                "content": "x",
                "expected_sha256": "a" * 64,
            }
        ],
        "user",
        StaleWriteError,
        r"gone\.md changed since it was read",
    ),
    (
        "stale-after-earlier-change-in-call",
        [
            {"path": NOTE, "mode": "append", "content": "x\n"},
            {"path": NOTE, "mode": "append", "content": "y\n", "expected_sha256": sha_of("nope")},
        ],
        "user",
        StaleWriteError,
        r"changed since it was read",
    ),
    # ---- mode preconditions
    (
        "create-over-existing",
        [GOOD, {"path": NOTE, "mode": "create", "content": "x\n"}],
        "user",
        WriteError,
        r"create: memory/notes/a\.md already exists; read it, then use edit or append",
    ),
    (
        "edit-snippet-absent",
        [{"path": NOTE, "mode": "edit", "old": "three", "new": "3"}],
        "user",
        WriteError,
        r"does not occur in memory/notes/a\.md \(0 times\)",
    ),
    (
        "edit-snippet-empty",
        [{"path": NOTE, "mode": "edit", "old": "", "new": "3"}],
        "user",
        WriteError,
        r"\(0 times\)",
    ),
    (
        "edit-snippet-ambiguous",
        [GOOD, {"path": NOTE, "mode": "edit", "old": "two", "new": "2"}],
        "user",
        WriteError,
        r"occurs 3 times in memory/notes/a\.md; it must occur exactly once",
    ),
    (
        "edit-missing-file",
        [{"path": "memory/notes/none.md", "mode": "edit", "old": "a", "new": "b"}],
        "user",
        WriteError,
        r"edit: memory/notes/none\.md does not exist; use create",
    ),
    (
        "overwrite-missing-file",
        [{"path": "memory/notes/none.md", "mode": "overwrite", "content": "b"}],
        "user",
        WriteError,
        r"overwrite: memory/notes/none\.md does not exist",
    ),
    (
        "delete-missing-file",
        [{"path": "memory/notes/none.md", "mode": "delete"}],
        "user",
        WriteError,
        r"delete: memory/notes/none\.md does not exist",
    ),
    (
        "move-onto-existing",
        [GOOD, {"path": NOTE, "mode": "move", "to": "memory/notes/b.md"}],
        "user",
        WriteError,
        r"move: memory/notes/b\.md already exists",
    ),
    (
        "write-to-a-folder",
        [{"path": "memory/notes", "mode": "overwrite", "content": "x"}],
        "user",
        WriteError,
        r"memory/notes is a folder, not a file",
    ),
    # ---- limits
    (
        "file-over-size-limit",
        [{"path": "memory/notes/big.md", "mode": "create", "content": "a" * (LIMIT + 1)}],
        "user",
        LimitError,
        r"memory/notes/big\.md would be 262,145 bytes; the limit is 262,144 "
        r"\(store\.max_file_bytes\)",
    ),
    (
        "append-pushes-over-size-limit",
        [GOOD, {"path": NOTE, "mode": "append", "content": "a" * (LIMIT - len(NOTE_TEXT) + 1)}],
        "user",
        LimitError,
        r"memory/notes/a\.md would be 262,145 bytes",
    ),
    (
        "21-changes",
        [{"path": f"memory/notes/n{i}.md", "mode": "create", "content": "x\n"} for i in range(21)],
        "user",
        LimitError,
        r"21 changes in one call; the limit is 20 \(store\.max_files_per_call\)",
    ),
    # ---- the path jail
    *[
        (
            f"path-{name}",
            [GOOD, {"path": path, "mode": "create", "content": "x"}],
            "user",
            PathError,
            pat,
        )
        for name, path, pat in [
            ("dotdot-etc-passwd", "../../etc/passwd", r"'\.\./\.\./etc/passwd' uses '\.\.'"),
            ("absolute", "/etc/passwd", r"'/etc/passwd' is absolute"),
            ("inner-dotdot", "memory/../../x", r"uses '\.\.'; paths must stay inside"),
            ("backslash-dotdot", "memory\\..\\..\\x", r"uses '\.\.'"),
            ("windows-drive", "C:/x.md", r"is absolute"),
            (
                "symlink-dir-out",
                "memory/out/x.md",
                r"leads outside the workspace through a symlink",
            ),
            ("symlink-file-out", "memory/notes/outfile.md", r"leads outside the workspace"),
            ("git-config", ".git/config", r"'\.git/config' is inside \.git/"),
            ("git-dot-slash", "./.git/hooks/pre-commit", r"is inside \.git/"),
            ("state-dir", ".crustacean/x", r"'\.crustacean/x' is inside \.crustacean/"),
            # git silently refuses to version any `.git` component, so the jail refuses them all
            ("nested-git", "memory/.git/config", r"has a \.git folder in it"),
            ("nested-git-upper", "memory/notes/.GIT/HEAD", r"has a \.git folder in it"),
            ("top-git-upper", ".Git/config", r"has a \.git folder in it"),
            ("git-trailing-dot", "memory/.git./x", r"has a \.git folder in it"),
            ("git-short-name", "memory/GIT~1/x", r"has a \.git folder in it"),
            ("empty", "", r"path must be a non-empty string"),
            ("root", "./", r"names the workspace root"),
            ("nul", "memory/a\x00.md", r"contains a NUL character"),
        ]
    ],
    (
        "path-not-a-string",
        [{"path": 7, "mode": "create", "content": "x"}],
        "user",
        WriteError,
        r"changes\[0\]\.path must be a string",
    ),
    (
        "move-target-outside",
        [{"path": NOTE, "mode": "move", "to": "../elsewhere.md"}],
        "user",
        PathError,
        r"'\.\./elsewhere\.md' uses '\.\.'",
    ),
    (
        "move-target-into-git",
        [{"path": NOTE, "mode": "move", "to": ".git/hooks/post-commit"}],
        "user",
        PathError,
        r"is inside \.git/",
    ),
    (
        "move-target-through-symlink",
        [{"path": NOTE, "mode": "move", "to": "memory/out/a.md"}],
        "user",
        PathError,
        r"leads outside the workspace",
    ),
    # ---- content
    (
        "lone-surrogate",
        [GOOD, {"path": "memory/notes/s.md", "mode": "create", "content": "bad \ud800 text"}],
        "user",
        WriteError,
        r"changes\[1\]\.content is not valid UTF-8 text \(it has a lone surrogate\)",
    ),
    (
        "lone-surrogate-in-edit",
        [{"path": NOTE, "mode": "edit", "old": "one", "new": "\udfff"}],
        "user",
        WriteError,
        r"changes\[0\]\.new is not valid UTF-8",
    ),
    (
        "nul-in-content",
        [{"path": "memory/notes/s.md", "mode": "create", "content": "a\x00b"}],
        "user",
        WriteError,
        r"changes\[0\]\.content contains a NUL character",
    ),
    # ---- shape
    (
        "unknown-mode",
        [{"path": NOTE, "mode": "truncate"}],
        "user",
        WriteError,
        r"mode must be one of create, append, edit, overwrite, delete, move; got 'truncate'",
    ),
    ("no-mode", [{"path": NOTE}], "user", WriteError, r"changes\[0\]\.mode must be one of"),
    ("no-path", [{"mode": "create", "content": "x"}], "user", WriteError, r"path must be a string"),
    (
        "create-no-content",
        [{"path": "memory/notes/s.md", "mode": "create"}],
        "user",
        WriteError,
        r"mode create needs 'content' as a string",
    ),
    (
        "append-content-not-str",
        [{"path": NOTE, "mode": "append", "content": 5}],
        "user",
        WriteError,
        r"mode append needs 'content'",
    ),
    (
        "edit-no-new",
        [{"path": NOTE, "mode": "edit", "old": "one"}],
        "user",
        WriteError,
        r"mode edit needs 'new' as a string",
    ),
    (
        "move-no-to",
        [{"path": NOTE, "mode": "move"}],
        "user",
        WriteError,
        r"mode move needs 'to' as a string",
    ),
    (
        "unknown-field",
        [{"path": NOTE, "mode": "append", "content": "x", "sha": "1"}],
        "user",
        WriteError,
        r"unknown field 'sha'",
    ),
    (
        "bad-sha-length",
        [{"path": NOTE, "mode": "append", "content": "x", "expected_sha256": "abc"}],
        "user",
        WriteError,
        r"expected_sha256 must be the 64-hex sha256",
    ),
    (
        "sha-on-create",
        [
            {
                "path": "memory/notes/s.md",
                "mode": "create",
                "content": "x",
                "expected_sha256": "a" * 64,
            }
        ],
        "user",
        WriteError,
        r"create takes no expected_sha256",
    ),
    (
        "changes-not-a-list",
        {"path": NOTE, "mode": "delete"},
        "user",
        WriteError,
        r"changes must be a non-empty list",
    ),
    ("changes-empty", [], "user", WriteError, r"changes must be a non-empty list"),
    (
        "change-not-an-object",
        ["memory/notes/a.md"],
        "user",
        WriteError,
        r"changes\[0\] must be an object",
    ),
    # ---- policy
    (
        "curate-may-not-delete",
        [{"path": NOTE, "mode": "delete"}],
        "curate",
        PolicyError,
        r"curate may not delete memory/notes/a\.md; it may create, append or edit there; "
        r"nothing is ever deleted or overwritten by this stage",
    ),
    (
        "curate-may-not-overwrite",
        [{"path": NOTE, "mode": "overwrite", "content": "x"}],
        "curate",
        PolicyError,
        r"curate may not overwrite memory/notes/a\.md; it may create, append or edit there",
    ),
    (
        "collect-only-daily-logs",
        [
            {"path": "memory/2024-05-01.md", "mode": "append", "content": "ok\n"},
            {"path": NOTE, "mode": "append", "content": "x\n"},
        ],
        "collect",
        PolicyError,
        r"collect may not write memory/notes/a\.md\. Places it may write: memory/\[0-9\]",
    ),
    (
        "compile-move-outside-archive",
        [{"path": NOTE, "mode": "move", "to": "projects/a.md"}],
        "compile",
        PolicyError,
        r"compile may not move files to projects/a\.md\. Places it may write:",
    ),
    ("unknown-actor", [GOOD], "intruder", PolicyError, r"unknown actor 'intruder'; known: collect"),
]


@pytest.mark.parametrize(
    ("changes", "actor", "error", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_refused_and_nothing_changes(
    seeded: Workspace,
    tmp_path: Path,
    changes: object,
    actor: str,
    error: type[Exception],
    pattern: str,
) -> None:
    before, outside = snapshot(seeded.root), outside_state(tmp_path)
    with pytest.raises(error, match=pattern):
        Store(seeded).write_context(changes, actor=actor, message="bad")
    assert snapshot(seeded.root) == before
    assert outside_state(tmp_path) == outside
    assert not (seeded.root / "memory/notes/new.md").exists()


def test_empty_message_is_refused(seeded: Workspace) -> None:
    before = snapshot(seeded.root)
    with pytest.raises(WriteError, match=r"message must say what the change is"):
        Store(seeded).write_context([GOOD], actor="user", message="  ")
    assert snapshot(seeded.root) == before


def test_lower_per_call_file_limit_from_config(seeded: Workspace) -> None:
    ws = Workspace(seeded.root, load_config(seeded.root, overrides=["store.max_files_per_call=2"]))
    before = snapshot(ws.root)
    changes = [
        {"path": f"memory/notes/n{i}.md", "mode": "create", "content": "x"} for i in range(3)
    ]
    with pytest.raises(LimitError, match=r"3 changes in one call; the limit is 2"):
        Store(ws).write_context(changes, actor="user", message="x")
    assert snapshot(ws.root) == before


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (
            lambda s: hist.show(s, "deadbeef"),
            r"unknown version 'deadbeef'; see `crustacean history`",
        ),
        (lambda s: hist.show(s, "--all"), r"unknown version '--all'"),
        (
            lambda s: hist.rollback(s, "0123456789abcdef0123"),
            r"unknown version '0123456789abcdef0123'",
        ),
        (lambda s: hist.rollback(s, "HEAD~99"), r"unknown version 'HEAD~99'"),
        (
            lambda s: hist.rollback(s, "HEAD", ["memory/notes/never.md"]),
            r"memory/notes/never\.md did not exist at version [0-9a-f]{12}, so there is nothing",
        ),
        (
            lambda s: hist.rollback(s, "HEAD~1", ["memory/notes/b.md"]),
            r"memory/notes/b\.md did not exist at version",
        ),
    ],
    ids=[
        "show-unknown",
        "show-option-like",
        "rollback-unknown",
        "rollback-too-far",
        "rollback-path-never",
        "rollback-path-not-yet",
    ],
)
def test_version_errors(seeded: Workspace, call, pattern: str) -> None:
    before = snapshot(seeded.root)
    with pytest.raises(VersionError, match=pattern):
        call(Store(seeded))
    assert snapshot(seeded.root) == before


def test_rollback_path_outside_is_refused(seeded: Workspace) -> None:
    before = snapshot(seeded.root)
    with pytest.raises(PathError, match=r"uses '\.\.'"):
        hist.rollback(Store(seeded), "HEAD~1", ["../../etc/passwd"])
    assert snapshot(seeded.root) == before


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("show", "deadbeef"), "Error: unknown version 'deadbeef'"),
        (("rollback", "deadbeef"), "Error: unknown version 'deadbeef'"),
        (
            ("rollback", "HEAD", "memory/notes/never.md"),
            "Error: memory/notes/never.md did not exist",
        ),
    ],
)
def test_version_errors_through_the_cli(
    seeded: Workspace, args: tuple[str, ...], pattern: str
) -> None:
    before = snapshot(seeded.root)
    result = run_cli("-w", str(seeded.root), *args, code=2)
    assert pattern in result.stderr
    assert "Traceback" not in result.output
    assert snapshot(seeded.root) == before


# ------------------------------------------------------------------ all or nothing

THREE = [
    {"path": "MEMORY.md", "mode": "append", "content": "- appended\n"},
    {"path": NOTE, "mode": "overwrite", "content": "replaced\n"},
    {"path": "knowledge/topics/new.md", "mode": "create", "content": "brand new\n"},
]
MIXED = [
    {"path": "MEMORY.md", "mode": "edit", "old": "# MEMORY.md", "new": "# Memory"},
    {"path": NOTE, "mode": "delete"},
    {"path": "memory/notes/b.md", "mode": "move", "to": "archive/lessons/b.md"},
    {"path": "memory/notes/c.md", "mode": "create", "content": "c\n"},
]


def _fail_after(n: int):
    seen: list[str] = []

    def hook(path: str) -> None:
        seen.append(path)
        if len(seen) == n:
            raise OSError(f"injected failure after {path}")

    return hook, seen


@pytest.mark.parametrize(
    ("changes", "fail_at"),
    [(THREE, 1), (THREE, 2), (THREE, 3), (MIXED, 1), (MIXED, 3), (MIXED, 5)],
    ids=["three@1", "three@2", "three@3", "mixed@1", "mixed@3", "mixed@5"],
)
def test_failure_between_files_restores_everything(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch, changes: list[dict], fail_at: int
) -> None:
    root = seeded.root
    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    hook, seen = _fail_after(fail_at)
    monkeypatch.setattr(store_files, "_FAULT_HOOK", hook)
    with pytest.raises(OSError, match="injected failure"):
        Store(seeded).write_context(changes, actor="user", message="doomed")
    # the failure really came after `fail_at` files were written (from RENAME_LANES_FROM files
    # on, renames run on several threads: others may have gone on meanwhile)
    lanes = len(changes) >= store_files.RENAME_LANES_FROM
    assert len(seen) >= fail_at if lanes else len(seen) == fail_at
    assert snapshot(root) == before  # every file byte-identical, no temp file left, no commit
    assert git(root, "rev-parse", "HEAD") == head
    assert not (root / ".crustacean" / "journal.json").exists()
    assert git(root, "status", "--porcelain") == STATUS


# A call large enough that its files are renamed on several threads (RENAME_LANES_FROM): new
# files in folders not there yet, edits, a delete and a move.
MANY = MIXED + [
    {"path": f"archive/many/{i:02}/f.md", "mode": "create", "content": f"file {i}\n"}
    for i in range(40)
]


@pytest.mark.parametrize("fail_at", [1, 20, 0], ids=["first", "20th", "last"])
def test_failure_in_a_batched_call_restores_everything(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    """The renames of a large call run at once: a failure stops the ones not started, and every
    file is restored as before (the folders made for new files stay, empty)."""
    from crustacean.store.apply import RENAME_LANES_FROM
    from crustacean.store.parallel import LANES

    root = seeded.root
    assert len(MANY) >= RENAME_LANES_FROM
    store = Store(seeded)
    fail_at = fail_at or len(store.plan(MANY, actor="user", max_files=len(MANY)).touched)
    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    hook, seen = _fail_after(fail_at)
    monkeypatch.setattr(store_files, "_FAULT_HOOK", hook)
    with pytest.raises(OSError, match="injected failure"):
        store.write_context(MANY, actor="user", message="doomed", max_files=len(MANY))
    assert fail_at <= len(seen) < fail_at + LANES  # stopped early: at most one job per lane more
    assert snapshot(root) == before  # every file byte-identical, no temp file left, no commit
    assert git(root, "rev-parse", "HEAD") == head
    assert not (root / ".crustacean" / "journal.json").exists()
    assert git(root, "status", "--porcelain") == STATUS
    assert not any(p.is_file() for p in (root / "archive/many").rglob("*"))


def _outcome(fn, raw: str) -> str:
    try:
        return "ok " + fn(raw)
    except PathError as e:
        return f"refused {e}"


def test_one_calls_cached_jail_decides_every_path_as_the_plain_jail_does(
    seeded: Workspace, tmp_path: Path
) -> None:
    """Links in, out, dangling, looping, into .git and at the root; links to folders and to
    files; missing folders: a Jail answers each path (asked twice, in either order) exactly as
    a fresh `jail` does."""
    from crustacean.store.paths import Jail, jail

    root = seeded.root
    (root / "knowledge/real").mkdir(parents=True)
    (root / "knowledge/real/f.md").write_text("x\n")
    links = {
        "knowledge/in": "real",
        "knowledge/in-file.md": "real/f.md",
        "knowledge/dangling.md": str(tmp_path / "nowhere.md"),
        "knowledge/loop": "loop",
        "knowledge/to-git": "../.git",
        "knowledge/to-root": "..",
        "knowledge/in/chain": "../in",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    paths = [
        NOTE,
        "MEMORY.md",
        "new.md",
        "knowledge/real/f.md",
        "knowledge/real/new.md",
        "knowledge/missing/deeper/x.md",
        *links,
        *(f"{name}/x.md" for name in links),
        "knowledge/in/chain/chain/f.md",
        "memory/out/x.md",
        "memory/notes/outfile.md",
        "knowledge/to-root/MEMORY.md",
    ]
    want = {p: _outcome(lambda raw: jail(root, raw), p) for p in paths}
    assert {p: _outcome(Jail(root), p) for p in paths} == want
    one = Jail(root)
    assert {p: _outcome(one, p) for p in [*reversed(paths), *paths]} == want
    assert want["knowledge/in/x.md"] == "ok knowledge/real/x.md"  # followed, staying inside
    assert want["knowledge/to-git/x.md"].startswith("refused")


def test_a_folder_swapped_for_a_symlink_between_two_calls_is_refused(seeded: Workspace) -> None:
    """Each call resolves its folders afresh: one Store writes a note, then the folder becomes
    a link leading out, and its next call through it is refused with nothing written."""
    root = seeded.root
    store = Store(seeded)
    change = [{"path": "memory/notes/new.md", "mode": "create", "content": "x\n"}]
    assert store.write_context(change, actor="user", message="first").version
    os.rename(root / "memory/notes", root / "memory/notes-real")
    os.symlink(root / "memory/out", root / "memory/notes")  # memory/out leads outside
    before = snapshot(root)
    again = [{"path": "memory/notes/other.md", "mode": "create", "content": "y\n"}]
    with pytest.raises(PathError, match="leads outside the workspace through a symlink"):
        store.write_context(again, actor="user", message="second")
    assert snapshot(root) == before


def test_a_batched_call_makes_its_files_durable_at_once_before_any_rename(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call of many new files syncs their temp files with one syncfs per filesystem, while
    none is renamed yet and before the journal is in place; then it lands as usual."""
    from crustacean.store.apply import SYNC_ONCE_FROM
    from crustacean.store.atomic import FilesystemSync

    root, real = seeded.root, FilesystemSync.sync
    assert len(MANY) - len(MIXED) >= SYNC_ONCE_FROM  # its creates alone
    seen: list[tuple[int, bool, list[Path]]] = []

    def watched(self: FilesystemSync) -> bool:
        temps = [p for p in root.rglob("*.tmp") if ".crustacean" not in p.parts]
        made = list((root / "archive/many").rglob("f.md"))
        seen.append((len(temps), (root / ".crustacean/journal.json").exists(), made))
        return real(self)

    opened = FilesystemSync.open

    def watched_open(folders):  # before any temp file: syncfs then reports all their errors
        seen.append((len(list(root.rglob("*.tmp"))), False, []))
        return opened(folders)

    monkeypatch.setattr(FilesystemSync, "sync", watched)
    monkeypatch.setattr(FilesystemSync, "open", watched_open)
    result = Store(seeded).write_context(MANY, actor="user", message="many", max_files=len(MANY))
    assert seen == [(0, False, []), (44, False, [])]  # 40 creates, MIXED's 4; none renamed yet
    assert result.version and (root / "archive/many/39/f.md").read_text() == "file 39\n"
    assert git(root, "status", "--porcelain") == STATUS


@pytest.mark.parametrize(
    ("release", "batched"),
    [("6.18.44-fc-v857", True), ("5.8.0", True), ("5.7.19-generic", False), ("weird", False)],
)
def test_before_linux_5_8_a_batch_is_synced_file_by_file(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch, release: str, batched: bool
) -> None:
    """Before 5.8 syncfs reports no writeback error, so it is not used: each temp file is
    fsynced as it is written, and the call lands the same."""
    import sys

    from crustacean.store import atomic

    if not sys.platform.startswith("linux"):
        pytest.skip("syncfs is Linux's")
    uname = os.uname()
    fake = os.uname_result((*uname[:2], release, *uname[3:]))
    monkeypatch.setattr(atomic, "_SYNCFS", [])
    monkeypatch.setattr(atomic.os, "uname", lambda: fake)
    opened: list[object] = []
    real = atomic.FilesystemSync.open
    monkeypatch.setattr(
        atomic.FilesystemSync, "open", lambda f: opened.append(real(f)) or opened[-1]
    )
    changes = [{**c, "path": c["path"].replace("many", "k")} for c in MANY[4:]]
    result = Store(seeded).write_context(changes, actor="user", message="k", max_files=40)
    assert (opened[0] is not None) == batched
    assert result.version and (seeded.root / "archive/k/39/f.md").read_text() == "file 39\n"


def test_when_the_one_sync_fails_each_file_is_synced_and_its_error_fails_the_call(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syncfs cannot say which file's data did not reach the disk: when it fails, every temp
    file is synced on its own, and an fsync error fails the call with every file as before."""
    root = seeded.root
    synced: list[str] = []
    from crustacean.store.atomic import FilesystemSync

    monkeypatch.setattr(FilesystemSync, "sync", lambda self: False)
    monkeypatch.setattr(store_files, "fsync_file", synced.append)
    store = Store(seeded)

    def creates(folder: str, n: int) -> list[dict]:
        return [{**c, "path": c["path"].replace("many", folder)} for c in MANY[4 : 4 + n]]

    done = store.write_context(creates("few", 30), actor="user", message="few", max_files=30)
    assert done.version and synced == []  # under SYNC_ONCE_FROM: each synced as it is written
    many = creates("many", 40)
    result = store.write_context(many, actor="user", message="many", max_files=40)
    assert len(synced) == 40 and all(p.endswith(".tmp") for p in synced)
    assert result.version and (root / "archive/many/39/f.md").read_text() == "file 39\n"

    def broken(path: str) -> None:
        raise OSError(5, "Input/output error", path)

    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    monkeypatch.setattr(store_files, "fsync_file", broken)
    with pytest.raises(OSError, match="Input/output error"):
        store.write_context(creates("more", 40), actor="user", message="doomed", max_files=40)
    assert snapshot(root) == before  # nothing renamed, no temp file left, no commit
    assert git(root, "rev-parse", "HEAD") == head
    assert not (root / ".crustacean" / "journal.json").exists()


def test_a_path_git_would_skip_fails_the_commit_instead_of_going_unversioned(
    seeded: Workspace,
) -> None:
    """Belt and braces behind the jail: `git update-index` skips some names with exit code 0."""
    root = seeded.root
    (root / "memory/.git").mkdir()
    (root / "memory/.git/x").write_text("x\n")
    head = git(root, "rev-parse", "HEAD")
    with pytest.raises(VersionError, match=r"git cannot version this change"):
        Git(root).commit_paths(["memory/.git/x"], actor="user", message="m", trailers={})
    assert git(root, "rev-parse", "HEAD") == head


def test_failed_commit_restores_the_files(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = seeded.root
    before = snapshot(root)

    def broken(*args, **kwargs):
        raise VersionError("git commit-tree failed: disk full")

    monkeypatch.setattr(Git, "commit_paths", broken)
    with pytest.raises(VersionError, match="disk full"):
        Store(seeded).write_context(THREE, actor="user", message="doomed")
    assert snapshot(root) == before
    assert not (root / ".crustacean" / "journal.json").exists()


CRASH_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from crustacean.config import load_config
    from crustacean.store import apply as files
    from crustacean.store.versions import Git
    from crustacean.store.write import Store
    from crustacean.workspace import Workspace

    root, where, changes = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    if where.startswith("file"):
        n, seen = int(where[4:]), []
        def hook(path):
            seen.append(path)
            if len(seen) == n:
                os._exit(9)  # power cut: no except, no finally, no atexit
        files._FAULT_HOOK = hook
    else:
        real = Git.commit_paths
        def commit_then_die(self, *a, **kw):
            real(self, *a, **kw)
            os._exit(9)
        Git.commit_paths = commit_then_die
    store = Store(Workspace(root, load_config(root)))
    store.write_context(changes, actor="user", message="crash test")
    sys.exit(0)
    """
)


def _crash(root: Path, where: str, changes: list[dict]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(root), where, json.dumps(changes)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 9, proc.stderr


def _fsck(root: Path) -> None:
    proc = subprocess.run(
        ["git", "fsck", "--no-progress"], cwd=root, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("where", ["file1", "file2", "file3"])
def test_crash_before_commit_is_undone_by_recover(seeded: Workspace, where: str) -> None:
    root = seeded.root
    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    _crash(root, where, THREE)
    journal = root / ".crustacean" / "journal.json"
    assert journal.exists()  # the crash left a half-applied call behind ...
    assert snapshot(root) != before
    assert Store(seeded).recover() is True  # ... and recovery puts every file back
    assert not journal.exists()
    assert snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == STATUS
    _fsck(root)


def test_crash_is_recovered_by_the_next_write(seeded: Workspace) -> None:
    root = seeded.root
    original = {p: (root / p).read_bytes() for p in ("MEMORY.md", NOTE)}
    _crash(root, "file2", THREE)
    result = Store(seeded).write_context(
        [{"path": "memory/notes/b.md", "mode": "append", "content": "later\n"}],
        actor="user",
        message="next call",
    )
    assert result.files == ("memory/notes/b.md",)
    assert {p: (root / p).read_bytes() for p in original} == original
    assert not (root / "knowledge/topics/new.md").exists()
    assert git(root, "status", "--porcelain") == STATUS
    _fsck(root)


def test_crash_after_commit_keeps_the_version(seeded: Workspace) -> None:
    root = seeded.root
    count = int(git(root, "rev-list", "--count", "HEAD"))
    _crash(root, "commit", THREE)
    assert (root / ".crustacean" / "journal.json").exists()
    assert Store(seeded).recover() is False  # committed: nothing to undo
    assert not (root / ".crustacean" / "journal.json").exists()
    assert int(git(root, "rev-list", "--count", "HEAD")) == count + 1
    assert (root / NOTE).read_bytes() == b"replaced\n"
    assert (root / "knowledge/topics/new.md").read_bytes() == b"brand new\n"
    assert git(root, "status", "--porcelain") == STATUS
    _fsck(root)


def test_torn_journal_is_discarded(seeded: Workspace) -> None:
    root = seeded.root
    (root / ".crustacean" / "journal.json").write_bytes(b'{"call_id": "x", "orig')
    before = snapshot(root)
    assert Store(seeded).recover() is False
    assert not (root / ".crustacean" / "journal.json").exists()
    before.pop(".crustacean/journal.json")
    assert snapshot(root) == before
