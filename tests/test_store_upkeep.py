"""Git's housekeeping after a version (store/upkeep.py): what `git commit` runs, the store too.

The decision is a pure function of two counts and the config, tested table-driven (and its
config parsing against git's own); the rest runs real git in tmp_path with `gc.autoDetach` and
`maintenance.autoDetach` off in the test repository, so whatever git starts has finished when
the write returns.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import copy_workspace, git, make_template

from conftest import run_cli
from crustacean.errors import CrustaceanError
from crustacean.store import gitread, gitwrite, upkeep
from crustacean.store.upkeep import Limits, Sample, due, limits, sample
from crustacean.store.write import Store
from crustacean.workspace import Workspace

# gc.auto 256 makes git's threshold one object in objects/17: two there and gc --auto runs.
SMALL = {"gc.auto": "256", "gc.autoDetach": "false", "maintenance.autoDetach": "false"}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory)


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Workspace:
    return copy_workspace(template, tmp_path)


def configure(root: Path, settings: dict[str, str]) -> None:
    for key, value in settings.items():
        git(root, "config", key, value)


def in_17(count: int, tag: str) -> list[str]:
    """`count` file contents whose blobs land in objects/17 (what git's estimate samples)."""
    found, i = [], 0
    while len(found) < count:
        text = f"- {tag} note {i}\n"
        if gitread.blob_id(text.encode(), "0" * 40).startswith("17"):
            found.append(text)
        i += 1
    return found


def loose_in_17(root: Path) -> int:
    folder = root / ".git" / "objects" / "17"
    return sum(1 for p in folder.iterdir() if len(p.name) == 38) if folder.is_dir() else 0


def tidy(root: Path) -> bool:
    """Whether git's own rule sees nothing to do (the config as the repository has it)."""
    listing = git(root, "config", "-l", "-z").encode()
    got = limits(listing)
    return due(sample(root / ".git" / "objects", got), got) == ""


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


# ------------------------------------------------------------------ the decision


@pytest.mark.parametrize(
    ("loose", "packs", "settings", "runs"),
    [
        (0, 0, {}, False),
        (27, 50, {}, False),  # git's defaults: more than ceil(6700/256) = 27, more than 50
        (28, 0, {}, True),
        (0, 51, {}, True),
        (2, 0, {"gc_auto": 256}, True),
        (1, 0, {"gc_auto": 256}, False),
        (2, 0, {"gc_auto": 1}, True),  # ceil(1/256) is 1
        (1000, 1000, {"gc_auto": 0}, False),  # gc.auto 0 (or less) disables gc --auto
        (1000, 1000, {"gc_auto": -5}, False),
        (0, 1000, {"pack_limit": 0}, False),  # autoPackLimit 0: packs never count
        (28, 1000, {"pack_limit": 0}, True),  # ... the loose objects still do
        (1000, 1000, {"auto": False}, False),  # maintenance.auto false: git commit runs none
        (1000, 1000, {"why_not": "gc.auto is not a number"}, False),
        (3, 0, {"pack_limit": 2}, False),
        (0, 3, {"pack_limit": 2}, True),
    ],
)
def test_due_follows_gc_auto(loose: int, packs: int, settings: dict, runs: bool) -> None:
    assert bool(due(Sample(loose=loose, packs=packs), Limits(**settings))) is runs


@pytest.mark.parametrize(
    ("entries", "expect"),
    [
        ([], Limits()),
        (["gc.auto\n1k"], Limits(gc_auto=1024)),
        (["gc.auto\n0x10"], Limits(gc_auto=16)),
        (["gc.auto\n010"], Limits(gc_auto=8)),  # strtoimax base 0, as git
        (["gc.auto\n-1"], Limits(gc_auto=-1)),
        (["gc.auto\n0"], Limits(gc_auto=0)),
        (["gc.auto\n100", "gc.auto\n7"], Limits(gc_auto=7)),  # the last value wins
        (["gc.autopacklimit\n2"], Limits(pack_limit=2)),
        (["gc.auto\nlots"], Limits(why_not="gc.auto is not a number")),
        (["maintenance.auto\nfalse"], Limits(auto=False)),
        (["maintenance.auto\nOff"], Limits(auto=False)),
        (["maintenance.auto\n0"], Limits(auto=False)),
        (["maintenance.auto\n"], Limits(auto=False)),  # `auto =` is false in git
        (["maintenance.auto"], Limits(auto=True)),  # `auto` alone is true
        (["maintenance.auto\n2"], Limits(auto=True)),
        (
            ["maintenance.auto\nmaybe"],
            Limits(auto=False, why_not="maintenance.auto is not a boolean"),
        ),
        (["gc.pruneexpire\nnow"], Limits(why_not="gc.pruneExpire is now")),
        (["gc.pruneexpire\n2.weeks.ago"], Limits()),
        (["extensions.objectformat\nsha256"], Limits(hex_len=62)),
        (["gc.autodetach\nfalse"], Limits(detach=False)),
        (["maintenance.autodetach\nno"], Limits(detach=False)),
        (["gc.autodetach\nfalse", "maintenance.autodetach\ntrue"], Limits(detach=True)),
        (["gc.autodetach\nsoon"], Limits(why_not="gc.autodetach is not a boolean")),
    ],
)
def test_limits_read_from_the_config_listing(entries: list[str], expect: Limits) -> None:
    listing = b"".join(e.encode() + b"\0" for e in entries)
    assert limits(listing) == expect


@pytest.mark.parametrize("value", ["1k", "0x10", "010", "-3", "7", "2m"])
def test_numbers_read_as_git_reads_them(tmp_path: Path, value: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    git(tmp_path / "r", "config", "gc.auto", value)
    theirs = int(git(tmp_path / "r", "config", "--int", "gc.auto"))
    assert limits(f"gc.auto\n{value}\0".encode()).gc_auto == theirs


@pytest.mark.parametrize("value", ["true", "yes", "On", "1", "false", "no", "off", "0", "", "5"])
def test_booleans_read_as_git_reads_them(tmp_path: Path, value: str) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    git(tmp_path / "r", "config", "maintenance.auto", value)
    theirs = git(tmp_path / "r", "config", "--bool", "maintenance.auto").strip() == "true"
    assert limits(f"maintenance.auto\n{value}\0".encode()).auto is theirs


def test_sample_counts_what_git_counts(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    (objects / "17").mkdir(parents=True)
    (objects / "pack").mkdir()
    for name in ("a" * 38, "b" * 38, "tmp_obj_x", "c" * 37, "G" * 38):
        (objects / "17" / name).write_bytes(b"")
    for base, parts in (
        ("pack-1", (".idx", ".pack")),
        ("pack-2", (".idx", ".pack", ".keep")),  # kept: git's rule leaves it out
        ("pack-3", (".idx",)),  # no .pack: git loads no pack
        ("pack-4", (".pack",)),  # no .idx either
        ("pack-5", (".idx", ".pack", ".bitmap")),
    ):
        for suffix in parts:
            (objects / "pack" / f"{base}{suffix}").write_bytes(b"")
    assert sample(objects, Limits()) == Sample(loose=2, packs=2)
    assert sample(objects, Limits(gc_auto=1)).loose == 2  # stops one past the threshold (1)
    assert sample(tmp_path / "none", Limits()) == Sample(loose=0, packs=0)


# ------------------------------------------------------------------ writes and git


def test_writes_past_gc_auto_leave_the_objects_packed(ws: Workspace) -> None:
    configure(ws.root, SMALL)
    store = Store(ws)
    before = loose_in_17(ws.root)
    assert before <= 1, "the scaffold already holds enough for gc: pick another tag"
    version = write_17s(store, "packme")
    assert loose_in_17(ws.root) == 0  # git's gc packed them within the write
    assert list((ws.root / ".git" / "objects" / "pack").glob("*.pack"))
    assert tidy(ws.root)
    assert head(ws.root) == version
    for i, text in enumerate(in_17(2, "packme")):
        assert git(ws.root, "show", f"HEAD:knowledge/packme-{i}.md") == text
    fsck(ws.root)


def test_git_sees_nothing_to_do_after_any_write(ws: Workspace) -> None:
    """Cron's life in small: many versions, each adding a loose object to the folder git
    samples, and after each one git's own rule is satisfied: loose objects never pile up."""
    configure(ws.root, {**SMALL, "gc.auto": "768"})  # git runs once 4 are in objects/17
    store = Store(ws)
    for i, text in enumerate(in_17(24, "cron")):
        change = {"path": f"memory/notes/cron-{i}.md", "mode": "create", "content": text}
        version = store.write_context([change], actor="user", message=f"entry {i}").version
        assert tidy(ws.root), i
        assert loose_in_17(ws.root) <= 3
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
    assert sample(ws.root / ".git" / "objects", limits(b"")).packs >= 3
    write_17s(store, "p4", count=1)
    assert tidy(ws.root)
    fsck(ws.root)


@pytest.mark.parametrize(
    "settings",
    [{"gc.auto": "0"}, {"maintenance.auto": "false"}, {"gc.pruneExpire": "now"}],
    ids=["gc.auto=0", "maintenance.auto=false", "gc.pruneExpire=now"],
)
def test_disabled_upkeep_runs_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str]
) -> None:
    configure(ws.root, {**SMALL, **settings})
    ran: list[str] = []
    real = upkeep._run
    monkeypatch.setattr(
        upkeep, "_run", lambda root, why, detach: ran.append(why) or real(root, why, detach)
    )
    version = write_17s(Store(ws), "kept")
    assert ran == []
    assert loose_in_17(ws.root) >= 2  # left loose: no gc ran
    assert not list((ws.root / ".git" / "objects" / "pack").glob("*.pack"))
    assert head(ws.root) == version


def test_nothing_runs_below_the_threshold(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The common case: the check costs two listings and starts no process."""
    ran: list[str] = []
    monkeypatch.setattr(upkeep, "_run", lambda root, why, detach: ran.append(why) or "")
    store = Store(ws)
    for i in range(3):
        store.write_context(
            [
                {
                    "path": "knowledge/n.md",
                    "mode": "create" if i == 0 else "append",
                    "content": "x\n",
                }
            ],
            actor="user",
            message="n",
        )
    assert ran == []


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
    with caplog.at_level(logging.WARNING, logger="crustacean.store.upkeep"):
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

    def broken(root: Path, why: str, detach: bool) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(upkeep, "_run", broken)
    with caplog.at_level(logging.WARNING, logger="crustacean.store.upkeep"):
        version = write_17s(Store(ws), "nospace")
    assert head(ws.root) == version
    assert "could not start" in caplog.text and "No space left" in caplog.text


def test_nothing_runs_while_the_user_rebases(ws: Workspace) -> None:
    configure(ws.root, {**SMALL, "gc.auto": "0"})
    write_17s(Store(ws), "rebase")  # loose past the small threshold, nothing ran (gc.auto 0)
    configure(ws.root, SMALL)
    (ws.root / ".git" / "rebase-merge").mkdir()
    store = Store(ws)
    got = upkeep.after_commit(ws.root, lambda: store.git.facts().upkeep, store.git.busy)
    assert got == ""
    assert loose_in_17(ws.root) >= 2
    (ws.root / ".git" / "rebase-merge").rmdir()
    got = upkeep.after_commit(ws.root, lambda: store.git.facts().upkeep, store.git.busy)
    assert got.startswith("ran:") and loose_in_17(ws.root) == 0


def test_an_unusual_repository_leaves_it_to_git(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects not plain `.git/objects` (a linked worktree...): git decides, as after a commit."""
    configure(ws.root, {**SMALL, "gc.auto": "6700"})
    monkeypatch.setattr(upkeep.gitread, "plain_git_dir", lambda root: None)
    got = upkeep.after_commit(ws.root, lambda: limits(b""), lambda: None)
    assert got == "ran: git decides (not a plain repository)"
    got = upkeep.after_commit(ws.root, lambda: Limits(auto=False), lambda: None)
    assert got == ""


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


def test_an_object_pruned_before_its_freshen_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune may take an old unreachable loose object between the store's exists check and
    its freshen; git then writes the object again, and so does gitwrite."""
    root = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git_dir = root / ".git"
    facts = gitwrite.parse_facts(root, git_dir, b"")
    oid = gitwrite.write_object(git_dir, b"blob", b"kept\n", facts)
    real = os.utime

    def pruned_first(path: str) -> None:
        os.unlink(path)  # the prune wins the race
        real(path)

    with monkeypatch.context() as patch:
        patch.setattr(gitwrite.os, "utime", pruned_first)
        assert gitwrite.write_object(git_dir, b"blob", b"kept\n", facts) == oid
    assert git(root, "cat-file", "blob", oid) == "kept\n"


def test_a_fan_out_folder_a_gc_empties_away_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc's prune-packed removes the emptied fan-out folders; one may go between gitwrite's
    mkdir and its temp file's create (seen with gc in a loop next to writes: "the version could
    not be recorded (No such file or directory: …/objects/a1/tmp_obj_…)"). The folder is made
    again and the object written, as git's create_tmpfile does; a gc that always wins still
    ends in a clear error, never a half-written object."""
    root = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    git_dir = root / ".git"
    facts = gitwrite.parse_facts(root, git_dir, b"")
    real_open = os.open
    removed = []

    def gc_first(path: str, flags: int, mode: int = 0o777) -> int:
        folder = os.path.dirname(path)
        if "tmp_obj_" in path and len(removed) < limit and os.path.isdir(folder):
            os.rmdir(folder)  # the prune wins the race once more
            removed.append(folder)
        return real_open(path, flags, mode)

    limit = gitwrite.FAN_OUT_TRIES - 2  # the first try finds no folder of itself
    with monkeypatch.context() as patch:
        patch.setattr(gitwrite.os, "open", gc_first)
        oid = gitwrite.write_object(git_dir, b"blob", b"raced\n", facts)
    assert len(removed) == limit
    assert git(root, "cat-file", "blob", oid) == "raced\n"
    assert not list((git_dir / "objects" / oid[:2]).glob("tmp_obj_*"))

    removed.clear()
    limit = gitwrite.FAN_OUT_TRIES + 5  # a gc that wins every time
    with monkeypatch.context() as patch:
        patch.setattr(gitwrite.os, "open", gc_first)
        with pytest.raises(FileNotFoundError):
            gitwrite.write_object(git_dir, b"blob", b"never\n", facts)
    assert subprocess.run(["git", "-C", str(root), "fsck", "--strict"], check=False).returncode == 0
