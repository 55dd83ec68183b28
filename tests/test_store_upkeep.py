"""Git's housekeeping after a version: what `git commit` runs, the store runs too.

After each version the store runs `git maintenance run --auto --quiet` and git decides. These
tests run real git in tmp_path with `gc.autoDetach` and `maintenance.autoDetach` off in the test
repository, so whatever git starts has finished when the write returns.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from store_helpers import git

from conftest import run_cli
from crustacean.errors import CrustaceanError
from crustacean.store.versions import blob_id
from crustacean.store.write import Store
from crustacean.workspace import Workspace

# gc.auto 256 makes git's threshold one object in objects/17: two there and gc --auto runs.
SMALL = {"gc.auto": "256", "gc.autoDetach": "false", "maintenance.autoDetach": "false"}


@pytest.fixture
def ws(copied_ws: Workspace) -> Workspace:
    return copied_ws


def configure(root: Path, settings: dict[str, str]) -> None:
    for key, value in settings.items():
        git(root, "config", key, value)


def in_17(count: int, tag: str) -> list[str]:
    """`count` file contents whose blobs land in objects/17 (what git's estimate samples)."""
    found, i = [], 0
    while len(found) < count:
        text = f"- {tag} note {i}\n"
        if blob_id(text.encode(), "0" * 40).startswith("17"):
            found.append(text)
        i += 1
    return found


def loose_in_17(root: Path) -> int:
    folder = root / ".git" / "objects" / "17"
    return sum(1 for p in folder.iterdir() if len(p.name) == 38) if folder.is_dir() else 0


def packs(root: Path) -> int:
    return len(list((root / ".git" / "objects" / "pack").glob("*.pack")))


def write_17s(store: Store, tag: str, count: int = 2) -> str:
    changes = [
        {"path": f"knowledge/{tag}-{i}.md", "mode": "create", "content": text}
        for i, text in enumerate(in_17(count, tag))
    ]
    result = store.write_context(changes, actor="user", message=f"{tag} notes")
    assert result.version is not None
    return result.version


def fsck(root: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--strict"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


# ------------------------------------------------------------------ writes and git


def test_writes_past_gc_auto_leave_the_objects_packed(ws: Workspace) -> None:
    configure(ws.root, SMALL)
    store = Store(ws)
    before = loose_in_17(ws.root)
    assert before <= 1, "the scaffold already holds enough for gc: pick another tag"
    version = write_17s(store, "packme")
    assert loose_in_17(ws.root) == 0  # git's gc packed them within the write
    assert packs(ws.root)
    assert head(ws.root) == version
    for i, text in enumerate(in_17(2, "packme")):
        assert git(ws.root, "show", f"HEAD:knowledge/packme-{i}.md") == text
    fsck(ws.root)


def test_git_sees_nothing_to_do_after_any_write(ws: Workspace) -> None:
    """Cron's life in small: many versions, each adding a loose object to the folder git
    samples, and after each one git's own rule is satisfied: loose objects never pile up."""
    # git runs gc once 4 are in objects/17
    configure(ws.root, {**SMALL, "gc.auto": "768"})  # git runs once 4 are in objects/17
    store = Store(ws)
    for i, text in enumerate(in_17(24, "cron")):
        change = {"path": f"memory/notes/cron-{i}.md", "mode": "create", "content": text}
        version = store.write_context([change], actor="user", message=f"entry {i}").version
        assert loose_in_17(ws.root) <= 3, i
        assert head(ws.root) == version
    assert list((ws.root / ".git" / "objects" / "pack").glob("*.pack"))
    assert len(git(ws.root, "log", "--format=%H", "--grep=^entry").split()) == 24
    fsck(ws.root)


def test_too_many_packs_are_merged(ws: Workspace) -> None:
    configure(ws.root, {**SMALL, "gc.auto": "6700", "gc.autoPackLimit": "2"})
    store = Store(ws)
    for tag in ("p1", "p2", "p3"):
        write_17s(store, tag, count=1)
        git(ws.root, "repack", "-q")  # a new small pack each time, as fast-import leaves them
    assert packs(ws.root) >= 3
    write_17s(store, "p4", count=1)
    assert packs(ws.root) <= 2
    fsck(ws.root)


@pytest.mark.parametrize(
    "settings",
    [{"gc.auto": "0"}, {"maintenance.auto": "false"}, {"gc.pruneExpire": "now"}],
    ids=["gc.auto=0", "maintenance.auto=false", "gc.pruneExpire=now"],
)
def test_disabled_upkeep_runs_nothing(ws: Workspace, settings: dict[str, str]) -> None:
    configure(ws.root, {**SMALL, **settings})
    store = Store(ws)
    version = write_17s(store, "kept")
    assert store.git.maintain() == ("ran" if "gc.auto" in settings else "")  # git: nothing due
    assert loose_in_17(ws.root) >= 2  # left loose: no gc ran
    assert not list((ws.root / ".git" / "objects" / "pack").glob("*.pack"))
    assert head(ws.root) == version


def hold_gc_pid(root: Path) -> None:
    """A gc running on this machine, as git's gc.pid names it (this test's own live pid)."""
    (root / ".git" / "gc.pid").write_text(f"{os.getpid()} {socket.gethostname()}")


def hold_maintenance_lock(root: Path) -> None:
    (root / ".git" / "objects" / "maintenance.lock").write_text("")


def break_gc_config(root: Path) -> None:
    git(root, "config", "gc.pruneExpire", "not-a-date")  # git's gc dies on it


@pytest.mark.parametrize(
    ("trouble", "warns"),
    [(hold_gc_pid, False), (hold_maintenance_lock, False), (break_gc_config, True)],
    ids=["gc.pid held", "maintenance.lock held", "gc fails"],
)
def test_maintenance_that_cannot_run_keeps_the_write(
    ws: Workspace, caplog: pytest.LogCaptureFixture, trouble, warns: bool
) -> None:
    configure(ws.root, SMALL)
    trouble(ws.root)
    store = Store(ws)
    old = git(ws.root, "log", "--format=%H").split()
    with caplog.at_level(logging.WARNING, logger="crustacean.store.versions"):
        version = write_17s(store, "safe")
    assert head(ws.root) == version
    assert git(ws.root, "log", "--format=%H").split() == [version, *old]
    for i, text in enumerate(in_17(2, "safe")):
        assert (ws.root / f"knowledge/safe-{i}.md").read_text() == text
        assert git(ws.root, "show", f"HEAD:knowledge/safe-{i}.md") == text
    assert git(ws.root, "status", "--porcelain") == ""
    assert loose_in_17(ws.root) >= 2  # git honoured its lock (or died): nothing was packed
    assert ("housekeeping after a version failed" in caplog.text) is warns
    if warns:
        assert "the version is kept" in caplog.text and "not-a-date" in caplog.text
    fsck(ws.root)


def test_upkeep_that_raises_never_fails_the_write(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    configure(ws.root, SMALL)

    def broken() -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", broken)
    with caplog.at_level(logging.WARNING, logger="crustacean.store.versions"):
        version = write_17s(Store(ws), "nospace")
    assert head(ws.root) == version
    assert "could not start" in caplog.text and "No space left" in caplog.text


def test_nothing_runs_while_the_user_rebases(ws: Workspace) -> None:
    configure(ws.root, {**SMALL, "gc.auto": "0"})
    write_17s(Store(ws), "rebase")  # loose past the small threshold, nothing ran (gc.auto 0)
    configure(ws.root, SMALL)
    (ws.root / ".git" / "rebase-merge").mkdir()
    store = Store(ws)
    store.git.settings = store.git.read_settings()
    assert store.git.maintain() == ""
    assert loose_in_17(ws.root) >= 2
    (ws.root / ".git" / "rebase-merge").rmdir()
    assert store.git.maintain() == "ran" and loose_in_17(ws.root) == 0


# ------------------------------------------------------------------ after a gc


def test_history_show_rollback_and_writes_after_a_gc(ws: Workspace) -> None:
    store = Store(ws)
    versions = []
    for i in range(3):
        result = store.write_context(
            [
                {
                    "path": "knowledge/g.md",
                    "mode": "create" if i == 0 else "append",
                    "content": f"g{i}\n",
                }
            ],
            actor="curate",
            message=f"curate: g{i}",
        )
        versions.append(result.version)
    git(ws.root, "gc", "-q", "--prune=now")  # nothing else writes: pruning now is safe here
    assert not (ws.root / ".git" / "refs" / "heads" / "main").exists()  # packed-refs holds it
    assert not list((ws.root / ".git" / "objects").glob("??/*"))  # every object is packed
    w = ("-w", str(ws.root))
    listed = json.loads(run_cli(*w, "history", "--json").stdout)
    assert [d["id"] for d in listed[:3]] == versions[::-1]
    assert "+g1" in run_cli(*w, "show", versions[1][:10]).stdout
    assert "Restored" in run_cli(*w, "rollback", versions[0]).stdout
    assert (ws.root / "knowledge/g.md").read_text() == "g0\n"
    rolled = head(ws.root)
    assert rolled not in versions
    again = Store(ws).write_context(
        [{"path": "knowledge/g.md", "mode": "append", "content": "after\n"}],
        actor="user",
        message="after the gc",
    )
    assert head(ws.root) == again.version
    assert git(ws.root, "rev-parse", "HEAD~1").strip() == rolled
    assert git(ws.root, "show", "HEAD:knowledge/g.md") == "g0\nafter\n"
    assert git(ws.root, "status", "--porcelain") == ""
    fsck(ws.root)


GC_LOOP = """
import os, subprocess, sys
stop = sys.argv[1]
rounds = 0
while not os.path.exists(stop) or rounds < 2:
    for args in ("pack-refs --all --prune", "gc --quiet", "reflog expire --all"):
        subprocess.run(["git", *args.split()], check=True)
    rounds += 1
print(rounds)
"""


def test_writes_while_git_maintains_lose_nothing(ws: Workspace, tmp_path: Path) -> None:
    """gc, pack-refs and reflog expiry in a loop next to the store's writes: git's lock
    protocol keeps them apart, young loose objects are never pruned, and every write lands."""
    configure(ws.root, {"gc.autoDetach": "false"})
    store = Store(ws)
    stop = tmp_path / "stop"
    loop = subprocess.Popen(
        [sys.executable, "-c", GC_LOOP, str(stop)], cwd=ws.root, stdout=subprocess.PIPE, text=True
    )
    landed: dict[str, str] = {}
    failed = []
    try:
        for i in range(24):
            path = f"knowledge/c{i % 4}.md"
            text = landed.get(path, "") + f"- line {i}\n"
            mode = "create" if path not in landed else "overwrite"
            change = {"path": path, "mode": mode, "content": text}
            if mode == "overwrite":
                change["expected_sha256"] = store.read_context_file(path).sha256
            try:
                store.write_context([change], actor="user", message=f"c{i}")
                landed[path] = text
            except CrustaceanError as err:  # a clear refusal, never a half-made version
                failed.append(str(err))
    finally:
        stop.write_text("")
        out, _ = loop.communicate()
    assert loop.returncode == 0 and int(out) >= 2
    assert failed == []
    for path, text in landed.items():
        assert (ws.root / path).read_text() == text
        assert git(ws.root, "show", f"HEAD:{path}") == text
    assert len(git(ws.root, "log", "--format=%H", "--grep=^c[0-9]").split()) == 24
    assert git(ws.root, "status", "--porcelain") == ""
    fsck(ws.root)
