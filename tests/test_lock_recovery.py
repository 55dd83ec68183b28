"""A kill at every point of a write, then the user doing exactly what git advises (issue 32).

git's advice for a lock a killed process left is "remove the file manually", then the user's
own `git add` and `git commit`. Whatever point the kill landed on, that must lose nothing
acknowledged, show no temp file, and keep every acknowledged version in HEAD; the next
crustacean call (or `doctor --fix`) then leaves disk, index and HEAD agreeing. The same holds
in a linked worktree (`git worktree add`), whose index and HEAD locks live in its own git folder.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import USER_ENV

from conftest import run_cli
from crustacean.config import load_config
from crustacean.ops.status import doctor
from crustacean.store import Store
from crustacean.store import apply as store_apply
from crustacean.tree import is_temp
from crustacean.workspace import Workspace

ACKED = "memory/notes/acked.md"
KILLED_LINE = "- written by the killed call\n"

# A store write in a child that SIGKILLs itself at one fault point ("first": right after the
# first file of the call is renamed into place).
KILL_WRITE = """
import json, os, signal, sys
from pathlib import Path
from crustacean.store import apply as files
point = sys.argv[2]
def hook(path):
    if (point == "first" and not path.startswith(":")) or path == point:
        os.kill(os.getpid(), signal.SIGKILL)
files._FAULT_HOOK = hook
from crustacean.config import load_config
from crustacean.store import Store
from crustacean.workspace import Workspace
root = Path(sys.argv[1])
store = Store(Workspace(root, load_config(root)))
store.write_context(
    json.loads(sys.argv[3]), actor="curate", message="the killed call", max_files=100
)
"""

# Each kill point of a write, with the call that reaches it: how many new files it makes (32
# or more take the batched path, whose temp files are all durable before the journal), and
# whether the user has an uncommitted edit in the file it appends to (a snapshot first).
POINTS = {
    "first": (2, False),
    store_apply.TEMPS_DURABLE: (40, False),
    store_apply.SNAPSHOT_MADE: (1, True),
    store_apply.INDEX_SYNC: (2, False),
    store_apply.HEAD_MOVED: (2, False),
}


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env={**os.environ, **USER_ENV}
    )
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def head_file(root: Path, path: str) -> str | None:
    proc = git(root, "show", f"HEAD:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def follow_gits_advice(root: Path, *args: str) -> list[str]:
    """Run the user's git command; while git says a lock is left and to remove the file
    manually, remove it, as a user would, and run it again. Returns the locks removed."""
    removed = []
    for _ in range(5):
        proc = git(root, *args, check=False)
        if proc.returncode == 0:
            return removed
        assert "remove the file manually" in proc.stderr, proc.stderr
        lock = re.search(r"Unable to create '([^']+)': File exists", proc.stderr)
        assert lock is not None, proc.stderr
        Path(lock.group(1)).unlink()
        removed.append(lock.group(1))
    raise AssertionError(f"git {args} kept failing")


def users_own_commit(root: Path) -> list[str]:
    """What the issue reproduced: the user edits USER.md, adds and commits just that file."""
    with (root / "USER.md").open("a") as fh:
        fh.write("- Prefers tea.\n")
    return follow_gits_advice(root, "add", "USER.md") + follow_gits_advice(
        root, "commit", "-q", "-m", "my own edit"
    )


def visible_temps(root: Path) -> list[str]:
    status = git(root, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    return [line for line in status if is_temp(Path(line[3:]).name)]


def the_killed_call(files: int) -> list[dict[str, str]]:
    changes = [{"path": ACKED, "mode": "append", "content": KILLED_LINE}]
    return changes + [
        {"path": f"memory/notes/k{i:02d}.md", "mode": "create", "content": f"# k{i}\n"}
        for i in range(files)
    ]


def kill_a_write(root: Path, point: str, changes: list[dict[str, str]]) -> None:
    child = subprocess.run(
        [sys.executable, "-c", KILL_WRITE, str(root), point, json.dumps(changes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def workspace_at(ws: Workspace, tmp_path: Path, where: str) -> Workspace:
    """The workspace itself, or a linked worktree of its repository on a branch of its own."""
    if where == "main":
        return ws
    linked = tmp_path / "linked"
    git(ws.root, "worktree", "add", "-q", "-b", "side", str(linked))
    return Workspace(linked, load_config(linked))


@pytest.mark.parametrize("where", ["main", "linked"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_at_any_point_then_gits_advice_loses_nothing(
    ws: Workspace, tmp_path: Path, point: str, where: str
) -> None:
    files, dirty = POINTS[point]
    w = workspace_at(ws, tmp_path, where)
    root = w.root
    acked = Store(w).write_context(
        [{"path": ACKED, "mode": "create", "content": "# acked\n- acknowledged\n"}],
        actor="curate",
        message="an acknowledged write",
    )
    assert acked.version is not None
    if dirty:  # the user's own uncommitted edit in the file the killed call appends to
        with (root / ACKED).open("a") as fh:
            fh.write("- the user's unsaved thought\n")
    changes = the_killed_call(files)
    kill_a_write(root, point, changes)

    removed = users_own_commit(root)

    # HEAD keeps every acknowledged version, the user's commit landed, no temp file shows
    assert "- acknowledged\n" in (head_file(root, ACKED) or "")
    assert "- Prefers tea.\n" in (head_file(root, "USER.md") or "")
    assert git(root, "merge-base", "--is-ancestor", acked.version, "HEAD").returncode == 0
    assert visible_temps(root) == []
    # the killed call is in HEAD whole or not at all (as the user's commit, when its index had
    # taken the call before the kill)
    in_head = [head_file(root, c["path"]) is not None for c in changes[1:]]
    assert in_head in ([True] * files, [False] * files), in_head
    assert (KILLED_LINE in (head_file(root, ACKED) or "")) == in_head[0]
    if point in (store_apply.INDEX_SYNC, store_apply.HEAD_MOVED):
        assert all(in_head)  # HEAD or the index had named it before the kill
    if point != store_apply.INDEX_SYNC:  # that kill leaves git's lock free
        assert removed and all(p.endswith("index.lock") for p in removed), removed

    # the next call repairs what is left: disk, index and HEAD agree, nothing lost
    after = Store(w).write_context(
        [{"path": "memory/notes/next.md", "mode": "create", "content": "# next\n"}],
        actor="curate",
        message="the next write",
    )
    assert after.version is not None
    assert "- acknowledged\n" in (head_file(root, ACKED) or "")
    assert "- Prefers tea.\n" in (head_file(root, "USER.md") or "")
    assert head_file(root, "memory/notes/next.md") == "# next\n"
    assert git(root, "diff", "--cached", "--name-only").stdout == ""
    left = git(root, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    assert left == ([f" M {ACKED}"] if dirty else []), left
    if dirty:  # the user's edit is still on disk, never overwritten
        assert "- the user's unsaved thought\n" in (root / ACKED).read_text()
    on_disk = [p for p in root.rglob("*") if is_temp(p.name) and ".git" not in p.parts]
    assert on_disk == []
    assert not (w.state_dir / "journal.json").exists()
    assert not (
        Path(git(root, "rev-parse", "--absolute-git-dir").stdout.strip()) / "index.lock"
    ).exists()


def leave_a_dropped_version(w: Workspace) -> str:
    """The state an earlier version of crustacean left (issue 32 item 4): its version landed,
    it was killed before the user's index followed, the user deleted the lock as git said and
    committed, and that commit dropped the version from HEAD. Returns the killed call's
    version."""
    root = w.root
    Store(w).write_context(
        [{"path": ACKED, "mode": "create", "content": "# acked\n- acknowledged\n"}],
        actor="curate",
        message="an acknowledged write",
    )
    kill_a_write(root, store_apply.HEAD_MOVED, the_killed_call(1))
    version = git(root, "rev-parse", "HEAD").stdout.strip()
    paths = [ACKED, "memory/notes/k00.md"]
    follow_gits_advice(root, "reset", "-q", "HEAD~1", "--", *paths)  # the index, as it lagged
    users_own_commit(root)
    assert KILLED_LINE not in (head_file(root, ACKED) or "")  # the drop the issue reproduced
    assert head_file(root, "memory/notes/k00.md") is None
    return version


def assert_restored(root: Path) -> None:
    assert KILLED_LINE in (head_file(root, ACKED) or "")
    assert head_file(root, "memory/notes/k00.md") == "# k0\n"
    subject = git(root, "log", "-n1", "--format=%an|%s", "--", ACKED).stdout.strip()
    assert subject == "crustacean curate|restore what a later commit dropped: the killed call"
    assert git(root, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize("where", ["main", "linked"])
def test_a_version_the_users_commit_dropped_is_restored_by_the_next_write(
    ws: Workspace, tmp_path: Path, where: str
) -> None:
    w = workspace_at(ws, tmp_path, where)
    leave_a_dropped_version(w)
    run_cli("-w", str(w.root), "remember", "coffee", "Bob drinks coffee.")
    assert_restored(w.root)
    assert "coffee" in (head_file(w.root, "memory/lessons/coffee.md") or "")


def test_doctor_names_the_interrupted_write_and_fix_restores_the_dropped_version(
    ws: Workspace,
) -> None:
    leave_a_dropped_version(ws)
    (found,) = [f for f in doctor(ws.root).findings if f.name == "interrupted write"]
    assert (
        found.status == "warn" and "an interrupted write (.crustacean/journal.json)" in found.detail
    )
    assert "crustacean doctor --fix" in found.fix and "do not delete" in found.fix
    out = run_cli("-w", str(ws.root), "doctor", "--fix", code=1)  # no API key: a failure
    assert " fix  interrupted write: repaired an interrupted write" in out.output
    assert "Traceback" not in out.output
    assert_restored(ws.root)
    (found,) = [f for f in doctor(ws.root).findings if f.name == "interrupted write"]
    assert found.status == "ok"


@pytest.mark.parametrize("where", ["main", "linked"])
def test_crustaceans_own_stale_index_lock_is_named_by_doctor_then_repaired(
    ws: Workspace, tmp_path: Path, where: str
) -> None:
    """Killed before HEAD moved (the user's index had taken the call): doctor names the lock as
    crustacean's own, with the fix, and changes nothing; `doctor --fix` repairs it (the call
    undone, the index as HEAD, the lock gone)."""
    w = workspace_at(ws, tmp_path, where)
    root = w.root
    kill_a_write(root, store_apply.INDEX_SYNC, the_killed_call(1))
    lock = Path(git(root, "rev-parse", "--absolute-git-dir").stdout.strip()) / "index.lock"
    assert lock.exists()
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    (found,) = [f for f in doctor(root).findings if f.name == "interrupted write"]
    shown = lock.relative_to(root).as_posix() if where == "main" else str(lock)
    assert f"crustacean's own stale {shown} (pid " in found.detail and "is gone" in found.detail
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before and lock.exists()
    out = run_cli("-w", str(root), "doctor", "--fix", code=1)
    assert "fix  interrupted write: repaired an interrupted write" in out.output
    assert not lock.exists() and not (root / ACKED).exists()
    assert git(root, "status", "--porcelain").stdout == ""


@pytest.mark.parametrize("lock", ["HEAD.lock", "branch"])
def test_a_stale_ref_lock_in_a_linked_worktree_is_named_then_cleared(
    ws: Workspace, tmp_path: Path, lock: str
) -> None:
    """A git killed inside `update-ref` leaves the linked worktree's own HEAD.lock (in
    .git/worktrees/NAME) or its branch's lock (in the main repository): doctor names it, and
    the next write clears it and makes its version."""
    w = workspace_at(ws, tmp_path, "linked")
    git_dir = Path(git(w.root, "rev-parse", "--absolute-git-dir").stdout.strip())
    path = git_dir / "HEAD.lock" if lock == "HEAD.lock" else ws.root / ".git/refs/heads/side.lock"
    path.write_bytes(b"")
    assert "fatal" in git(w.root, "commit", "--allow-empty", "-m", "x", check=False).stderr
    (found,) = [f for f in doctor(w.root).findings if f.name == "interrupted write"]
    assert f"a stale {path} that no running process holds" in found.detail
    run_cli("-w", str(w.root), "remember", "tea", "Alice drinks green tea.")
    assert not path.exists()
    assert "green tea" in (head_file(w.root, "memory/lessons/tea.md") or "")


def test_doctor_says_ok_when_no_write_was_left_half_done(ws: Workspace) -> None:
    (found,) = [f for f in doctor(ws.root).findings if f.name == "interrupted write"]
    assert (found.status, found.detail) == ("ok", "no write was left half done")
