"""Compile's rerun skips a deterministic pass that cannot find anything new.

The pass (archive, sweep, trash, tiers, MEMORY.md caps) is a function of the workspace's files,
the config, the recall ledger and the clock. When a pass found nothing to do, a fingerprint of
its other inputs is kept in state.db with the moment the clock alone could change its answer:
the next local midnight (the daily planners count days) or the first tier threshold a memory's
days without recall reach (`tiers.next_change`), whichever is first. A later pass before then
whose files are those the pass saved in compile's file cache (stages/compile_inputs.py: same
paths, same size, mtime, ctime and inode, none racy) and whose fingerprint is the same has
nothing to do either, so compile does not plan at all.

The fingerprint covers the settings and zone, the recall ledger, the tiers kept in state.db and
the crustacean version. A
pass that changed something keeps nothing (and forgets what was kept): only a pass that found
nothing vouches for its inputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from crustacean import __version__
from crustacean.stages.compile_inputs import CachedInputs
from crustacean.state import StateDB, from_db_time, open_state, to_db_time
from crustacean.store import Store
from crustacean.workspace import Workspace

FORMAT = "compile-skip-3"  # bump when what the fingerprint covers changes


def fingerprint(ws: Workspace, db: StateDB) -> str:
    """The pass's inputs besides its files and the clock (see the module docstring)."""
    h = hashlib.sha256(f"{FORMAT} {__version__}\0{ws.settings!r}\0{ws.tz}\0".encode())
    for row in db.conn.execute("SELECT path, uses, last_recalled FROM recalls ORDER BY path"):
        h.update(repr(tuple(row)).encode())
    h.update(b"\0tiers\0")  # a `tier set` override changes no file, but the pass's answer
    for row in db.conn.execute(
        "SELECT path, tier, manual, tier_set FROM memory_tiers ORDER BY path"
    ):
        h.update(repr(tuple(row)).encode())
    return h.hexdigest()


def next_midnight(ws: Workspace, now: datetime) -> datetime:
    """When `ws.today` next changes: the daily planners count whole days."""
    tomorrow = now.astimezone(ws.tz).date() + timedelta(days=1)
    return datetime.combine(tomorrow, time(0), tzinfo=ws.tz)


@dataclass(frozen=True)
class PassCheck:
    """The fingerprint taken before a pass, and whether a kept one says it has nothing to do."""

    fingerprint: str
    nothing_to_do: bool


def check(ws: Workspace, now: datetime, inputs: CachedInputs | None = None) -> PassCheck:
    """Fingerprint the inputs now; nothing_to_do when a kept fingerprint equals it in its
    window and the files are those the cache was saved for (`inputs` scans them)."""
    files = inputs or CachedInputs(ws, Store(ws))
    with open_state(ws) as db:
        fresh = fingerprint(ws, db)
        row = db.conn.execute(
            "SELECT fingerprint, since, until FROM compile_skip WHERE id = 1"
        ).fetchone()
    if row is not None:
        kept, since, until = row
        start, end = from_db_time(since), from_db_time(until)
        inside = start is not None and end is not None and start <= now < end
        if inside and kept == fresh and files.unchanged():
            return PassCheck(kept, True)
    return PassCheck(fresh, False)


def keep(
    ws: Workspace, found: PassCheck, now: datetime, until: datetime | None, files: CachedInputs
) -> None:
    """Save the pass's file cache; with `until` (the pass found nothing to do) its fingerprint
    too, good until then, else forget any kept one. One transaction: never a kept fingerprint
    beside files it was not taken for."""
    with open_state(ws) as db, db.transaction() as conn:
        conn.execute("DELETE FROM compile_skip")
        if until is not None:
            conn.execute(
                "INSERT INTO compile_skip (id, fingerprint, taken_ns, since, until) "
                "VALUES (1, ?, 0, ?, ?)",
                (found.fingerprint, to_db_time(now), to_db_time(until)),
            )
        files.save(conn)
