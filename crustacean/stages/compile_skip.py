"""Compile's rerun skips a deterministic pass that cannot find anything new.

The pass (archive, sweep, trash, tiers, MEMORY.md caps) is a function of the workspace's files,
the config, the recall ledger and the clock. When a pass found nothing to do, its inputs are
kept here as a fingerprint in state.db, with the moment the clock alone could change its answer:
the next local midnight (the daily planners count days) or the first tier threshold a memory's
days without recall reach (`tiers.next_change`), whichever is first. A later pass with the same
fingerprint before then has nothing to do either, so compile does not re-plan the whole tree.

The fingerprint covers every file below the workspace (the state dir and .git aside) by path,
size and modification time, the content of any file modified within RACY_NS of the fingerprint
(a write in the same clock tick leaves the time as it was; git's "racy clean" rule), the
settings and zone, the recall ledger and the crustacean version. A pass that changed something
keeps nothing: only a pass that found nothing vouches for its inputs.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from time import time_ns

from crustacean import __version__
from crustacean.state import StateDB, from_db_time, open_state, to_db_time
from crustacean.workspace import STATE_DIR, Workspace

FORMAT = "compile-skip-1"  # bump when what the fingerprint covers changes
RACY_NS = 2_000_000_000  # 2 s: coarser than any filesystem's timestamp tick in use
SKIPPED_TOP = {".git", STATE_DIR}


def _tree(root: Path, since_ns: int, h: hashlib._Hash) -> None:
    """Every entry below root (symlinks as links), sorted; contents of racy files."""
    stack = [(root, "")]
    while stack:
        folder, rel = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in entries:
            path = f"{rel}{e.name}"
            if not rel and e.name in SKIPPED_TOP:
                continue
            st = e.stat(follow_symlinks=False)
            if e.is_dir(follow_symlinks=False):
                subdirs.append((Path(e.path), f"{path}/"))
                h.update(f"d {path}\0".encode())
                continue
            h.update(f"f {path} {st.st_size} {st.st_mtime_ns} {st.st_mode}\0".encode())
            if st.st_mtime_ns >= since_ns - RACY_NS and e.is_file(follow_symlinks=False):
                h.update(hashlib.sha256(Path(e.path).read_bytes()).digest())
        stack.extend(reversed(subdirs))


def fingerprint(ws: Workspace, db: StateDB, taken_ns: int) -> str:
    """The pass's inputs, as seen from `taken_ns` (see the module docstring)."""
    h = hashlib.sha256(f"{FORMAT} {__version__}\0{ws.settings!r}\0{ws.tz}\0".encode())
    for row in db.conn.execute("SELECT path, uses, last_recalled FROM recalls ORDER BY path"):
        h.update(repr(tuple(row)).encode())
    _tree(ws.root, taken_ns, h)
    return h.hexdigest()


def next_midnight(ws: Workspace, now: datetime) -> datetime:
    """When `ws.today` next changes: the daily planners count whole days."""
    tomorrow = now.astimezone(ws.tz).date() + timedelta(days=1)
    return datetime.combine(tomorrow, time(0), tzinfo=ws.tz)


@dataclass(frozen=True)
class PassCheck:
    """The fingerprint taken before a pass, and whether a kept one says it has nothing to do."""

    fingerprint: str
    taken_ns: int
    nothing_to_do: bool


def check(ws: Workspace, now: datetime) -> PassCheck:
    """Fingerprint the inputs now; nothing_to_do when a kept fingerprint equals it in its window.

    The kept one was taken at its own time, so the tree is hashed from that time's view (the
    same racy files) to compare; a fresh one, for keeping after this pass, from now."""
    with open_state(ws) as db:
        row = db.conn.execute(
            "SELECT fingerprint, taken_ns, since, until FROM compile_skip WHERE id = 1"
        ).fetchone()
        if row is not None:
            kept, kept_ns, since, until = row
            start, end = from_db_time(since), from_db_time(until)
            inside = start is not None and end is not None and start <= now < end
            if inside and fingerprint(ws, db, kept_ns) == kept:
                return PassCheck(kept, kept_ns, True)
        fresh_ns = time_ns()
        return PassCheck(fingerprint(ws, db, fresh_ns), fresh_ns, False)


def keep(ws: Workspace, found: PassCheck, now: datetime, until: datetime) -> None:
    """A pass found nothing to do: keep its fingerprint, good until `until` (UTC or aware)."""
    with open_state(ws) as db, db.transaction() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO compile_skip (id, fingerprint, taken_ns, since, until) "
            "VALUES (1, ?, ?, ?, ?)",
            (found.fingerprint, found.taken_ns, to_db_time(now), to_db_time(until)),
        )
