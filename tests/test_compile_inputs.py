"""Compile's file cache: a pass over it acts exactly as a pass that reads every file.

Two workspaces are built alike, byte for byte and mtime for mtime, and compiled once (that run
saves the cache). Then the same change is made by hand in both: one is compiled from its cache,
the other by reading everything (`ReadInputs`, the pass as it was before the cache); what each
did must be the same, and the cached one must have read only what changed.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.stages import compile_inputs, compile_skip
from crustacean.stages.compile import Ops, compile_workspace, deterministic_pass
from crustacean.stages.compile_inputs import CachedInputs, ReadInputs
from crustacean.state import open_state
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
OLD = (NOW - timedelta(days=3)).timestamp()  # every file's mtime: days before NOW
MTIME_SLACK = timedelta(minutes=5)  # between the two workspaces' compiles
SETTINGS = ["workspace.timezone=UTC", "tiers.hot_limit=2", "tiers.memory_cap=40"]


def put(root: Path, rel: str, text: str | bytes, mtime: float = OLD) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.utime(path, (mtime, mtime))


def note(i: int, tier: str = "", recorded: str = "") -> str:
    meta = "".join(f"{k}: {v}\n" for k, v in (("tier", tier), ("recorded", recorded)) if v)
    return (f"---\n{meta}---\n" if meta else "") + f"# Note {i}\nthe detail of note {i}\n"


def build(root: Path) -> Workspace:
    init_workspace(root)
    for i in range(12):
        tier = ("hot", "warm", "cold", "")[i % 4]
        recorded = (NOW - timedelta(days=5 * i)).date().isoformat() if i % 3 else ""
        put(root, f"memory/notes/n{i}.md", note(i, tier, recorded))
    put(root, "memory/lessons/l1.md", "# Always test\nrecorded: 2026-11-01\n")
    put(root, "knowledge/topics/t1.md", "# Topic\nsome reference\n")
    for d in (2, 20, 40):
        day = (NOW - timedelta(days=d)).date()
        put(root, f"memory/{day.isoformat()}.md", f"# {day}\n- log {d}\n")
    return live(root)


def live(root: Path) -> Workspace:
    return Workspace(root, load_config(root, env={}, overrides=SETTINGS))


def edit_tier(root: Path, rng: random.Random) -> None:
    """The person rewrites a note without its own tier and with an old date: the lifecycle
    now decides its tier (kept in state.db), and an old unrecalled note fades."""
    i = rng.randrange(12)
    put(root, f"memory/notes/n{i}.md", note(i, "", "2026-01-01"), OLD + 60)


def same_size_same_mtime(root: Path, rng: random.Random) -> None:
    """An edit that restores the old mtime and keeps the size: only ctime tells. n10 names its
    own tier (cold) and is 50 days old; once its `tier:` line is gone it is warm by its folder
    and goes cold."""
    path = root / "memory/notes/n10.md"
    before = path.stat()
    text = path.read_text()
    assert "tier: cold" in text
    path.write_text(text.replace("tier: cold", "tags: cold"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


def new_old_log(root: Path, rng: random.Random) -> None:
    day = (NOW - timedelta(days=rng.randrange(31, 400))).date()
    put(root, f"memory/{day.isoformat()}.md", f"# {day}\n- backfilled\n")


def new_hook_file(root: Path, rng: random.Random) -> None:
    day = (NOW - timedelta(days=rng.randrange(2, 9))).date()
    put(root, f"memory/{day.isoformat()}-chat-{rng.randrange(99)}.md", "# hook\n- said\n")


def new_duplicate(root: Path, rng: random.Random) -> None:
    src = root / f"memory/notes/n{rng.randrange(12)}.md"
    if src.exists():
        put(root, f"knowledge/topics/copy{rng.randrange(99)}.md", src.read_bytes())


def new_empty(root: Path, rng: random.Random) -> None:
    put(root, f"memory/ideas/blank{rng.randrange(99)}.md", " \n\n")


def new_hot(root: Path, rng: random.Random) -> None:
    """One lesson more, hot by its folder, recorded weeks ago and never recalled: it goes warm."""
    n = rng.randrange(100, 200)
    put(root, f"memory/lessons/g{n}.md", note(n, "", "2026-10-27"))


def delete(root: Path, rng: random.Random) -> None:
    for path in sorted((root / "memory/notes").glob("*.md"))[: rng.randrange(1, 3)]:
        path.unlink()


def not_utf8(root: Path, rng: random.Random) -> None:
    put(root, f"memory/notes/n{rng.randrange(12)}.md", b"# broken \xff\xfe\n")


def symlinked(root: Path, rng: random.Random) -> None:
    """A symlinked memory: load_memories reads it, the store's listing does not list it."""
    link = root / f"memory/lists/link{rng.randrange(99)}.md"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(root / "memory/lessons/l1.md")


def recall(root: Path, rng: random.Random) -> None:
    ws = live(root)
    with open_state(ws) as db:
        db.record_recalls([f"memory/notes/n{rng.randrange(12)}.md"], NOW, how="search")


CHANGES: dict[str, Callable[[Path, random.Random], None]] = {
    f.__name__: f
    for f in (
        edit_tier,
        same_size_same_mtime,
        new_old_log,
        new_hook_file,
        new_duplicate,
        new_empty,
        new_hot,
        delete,
        not_utf8,
        symlinked,
        recall,
    )
}


# The changes a pass must act on (the others may leave it nothing to do: it must still agree).
ACTED_ON = {
    "edit_tier",
    "same_size_same_mtime",
    "new_old_log",
    "new_hook_file",
    "new_duplicate",
    "new_empty",
    "new_hot",
}


def did(ops: Ops) -> dict[str, list[str]]:
    keys = ("archived", "held", "swept", "trashed", "tiers", "promoted")
    return {k: getattr(ops, k) for k in keys}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Workspace, Workspace]:
    """(cached, reference): built alike, each compiled once (the cached one keeps its cache)."""
    a, b = build(tmp_path / "a"), build(tmp_path / "b")
    first_a = compile_workspace(a, env={}, no_model=True, clock=lambda: NOW)
    first_b = compile_workspace(b, env={}, no_model=True, clock=lambda: NOW)
    assert did(first_a.ops) == did(first_b.ops) and first_a.ops.changed_anything
    return a, b


def compare(a: Workspace, b: Workspace, at: datetime) -> tuple[Ops, int]:
    """Compile a from its cache and b by reading everything at `at`; they must act alike.
    Returns what a did and how many files it read."""
    inputs = CachedInputs(a, Store(a))
    cached = deterministic_pass(a, Store(a), "cached", at, inputs=inputs)
    full = deterministic_pass(b, Store(b), "full", at, inputs=ReadInputs(b, Store(b)))
    assert did(cached) == did(full)
    # files the two compiles wrote have their own mtimes (a memory's clock without `recorded`)
    hold = (cached.tiers_hold_until, full.tiers_hold_until)
    assert hold[0] == hold[1] or (None not in hold and abs(hold[0] - hold[1]) < MTIME_SLACK)  # type: ignore[operator]  # both sides are datetimes here
    reads = inputs.reads
    inputs.stale()  # keep the cache as a run does, so the next comparison starts from it
    inputs.settle()
    compile_skip.keep(a, compile_skip.check(a, at, inputs), at, None, inputs)
    return cached, reads


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_by_hand_is_acted_on_as_a_full_read_would(
    pair: tuple[Workspace, Workspace], change: str
) -> None:
    a, b = pair
    for ws in pair:
        CHANGES[change](ws.root, random.Random(change))
    ops, reads = compare(a, b, NOW)
    if change in ACTED_ON:
        assert ops.changed_anything
    if change != "symlinked":  # a symlinked memory makes the pass read every memory
        assert reads <= 4, "the cache was not used"


def test_a_tier_due_date_passing_is_acted_on_with_no_file_changed(
    pair: tuple[Workspace, Workspace],
) -> None:
    a, b = pair
    later = datetime.now(UTC) + timedelta(days=95)  # tier edits of the first run: mtime is now
    ops, reads = compare(a, b, later)
    assert any("cold→archive" in t or "warm→cold" in t for t in ops.tiers)
    assert reads == 0


@pytest.mark.parametrize("seed", range(4))
def test_a_random_sequence_of_changes_and_days_matches_a_full_read(
    pair: tuple[Workspace, Workspace], seed: int
) -> None:
    a, b = pair
    rng = random.Random(seed)
    at = NOW
    for _ in range(5):
        change = rng.choice(sorted(CHANGES))
        state = rng.getstate()
        for ws in pair:
            rng.setstate(state)
            CHANGES[change](ws.root, rng)
        at += timedelta(days=rng.choice([0, 0, 1, 8, 31]))
        compare(a, b, at)


def test_a_racy_entry_is_read_again_and_a_kept_one_is_not(
    pair: tuple[Workspace, Workspace], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry changed at or after the scan's stamp may hide a second write in the same clock
    tick: it is read again next time, however its stat looks."""
    a, _ = pair
    memories = len(CachedInputs(a, Store(a)).memories())
    kept = CachedInputs(a, Store(a))
    kept.memories()
    assert kept.reads == 0
    monkeypatch.setattr(compile_inputs, "_stamp", lambda ws: 0)  # every file is "now"
    racy = CachedInputs(a, Store(a))
    racy.memories()
    racy.stale()
    with open_state(a) as db, db.transaction() as conn:
        racy.save(conn)
    monkeypatch.undo()
    again = CachedInputs(a, Store(a))
    again.memories()
    assert again.reads == memories > 0


def test_a_cache_of_another_version_is_not_used(pair: tuple[Workspace, Workspace]) -> None:
    a, _ = pair
    with open_state(a) as db:
        db.conn.execute("UPDATE compile_meta SET format = 'compile-files-0 old'")
    fresh = CachedInputs(a, Store(a))
    fresh.memories()
    assert fresh.reads == len(fresh.memories()) > 0


def test_the_rerun_reads_nothing_and_a_copied_workspace_reads_all(
    pair: tuple[Workspace, Workspace], tmp_path: Path
) -> None:
    """`cp -a` keeps mtimes but not ctimes and inodes: a copy is read afresh."""
    a, _ = pair
    rerun = CachedInputs(a, Store(a))
    rerun.trash_files()
    rerun.memories()
    assert rerun.reads == 0
    shutil.copytree(a.root, tmp_path / "copy", symlinks=True)
    copy = live(tmp_path / "copy")
    fresh = CachedInputs(copy, Store(copy))
    fresh.memories()
    assert fresh.reads == len(fresh.memories()) > 0


def test_writes_after_a_pass_that_found_nothing_keep_no_fingerprint(
    pair: tuple[Workspace, Workspace],
) -> None:
    """The model (or anything after the pass) may leave the pass something to do: the cache
    is kept as the files are, the fingerprint is not, so the next run plans."""
    from crustacean.stages.compile import _keep_cache

    a, _ = pair
    inputs = CachedInputs(a, Store(a))
    found = compile_skip.check(a, NOW, inputs)
    ops = deterministic_pass(a, Store(a), "t", NOW, inputs=inputs)
    assert not ops.changed_anything
    put(a.root, "memory/ideas/blank.md", "")  # as a model's write would
    _keep_cache(a, (inputs, found), NOW, ops, None)  # None: what was written is not known
    assert not compile_skip.check(a, NOW).nothing_to_do
    result = compile_workspace(a, env={}, no_model=True, clock=lambda: NOW)
    assert result.ops.trashed == ["memory/ideas/blank.md (empty file)"]
