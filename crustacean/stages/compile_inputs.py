"""What compile's deterministic pass reads, read in full or from a cache that rereads only the
files that changed since the last compile.

The pass needs the paths a writer may see (archive, sweep, caps), the bytes of every file under
memory/ and knowledge/ (empty files and duplicates) and each memory's tier, dates and override
(tiers). `ReadInputs` reads all of them every time (dry runs and plans, and the reference the
cache is tested against). `CachedInputs` keeps, per file, its sha256, whether it is empty and
its memory fields in state.db (`compile_files`), keyed by the file's size, mtime, ctime and
inode: a file with the same key is not read again. ctime cannot be set by hand, so an edit that
restores the old mtime (`touch -r`, `cp -p`) still changes the key.

Only a write in the same filesystem clock tick as the scan can leave the key as it was, so each
scan first stamps a file in the state folder and takes its mtime, from the same clock the files
get theirs from (git's "racy clean" rule): an entry changed at or after the stamp is racy and
read again at the next scan. The pass runs the same pure planners over either; only where the
bytes come from differs, and a sha256 stands in for bytes when duplicates are compared.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from crustacean import __version__
from crustacean.recall.memories import MEMORY_ROOTS, is_memory_path, load_memories, read_memory
from crustacean.stages.compile_plan import TRASH_ROOTS, is_empty
from crustacean.state import open_state
from crustacean.store import Store, walk_entries
from crustacean.store.changes import sha256_hex
from crustacean.tiers import Memory, with_stored
from crustacean.tree import WRITABLE, is_temp
from crustacean.workspace import Workspace

FORMAT = f"compile-files-2 {__version__}"  # bump when what an entry holds changes
STAMP = "compile-scan.stamp"
Key = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


class ReadInputs:
    """Every input read afresh, through the store (an overlay store sees its own writes)."""

    def __init__(self, ws: Workspace, store: Store) -> None:
        self.ws, self.store = ws, store
        self._paths: list[str] | None = None

    def stale(self) -> None:
        """The pass writes: the next `paths` lists again (unless `wrote` says what changed)."""
        self._paths = None

    def wrote(self, files: Iterable[str]) -> None:
        """The pass's own write went through and changed `files` alone: here the next `paths`
        lists again all the same (the store's listing is cheap next to the cache's scan)."""

    def paths(self) -> list[str]:
        if self._paths is None:
            self._paths = [f.path for f in self.store.list_context_files()]
        return self._paths

    def trash_files(self) -> dict[str, tuple[bytes, str]]:
        """Each file under memory/ and knowledge/: (bytes, or a stand-in with the same
        emptiness and equality, for the planner; its sha256 for the stale check)."""
        out = {}
        for p in self.paths():
            if p.startswith(TRASH_ROOTS):
                data = self.store.read_bytes(p) or b""
                out[p] = (data, sha256_hex(data))
        return out

    def memories(self) -> list[Memory]:
        return [m.as_memory() for m in load_memories(self.ws)[0]]

    def retiered(self) -> None:
        """The tier step kept new tiers in state.db: the memories are looked at again."""


MemoryRow = tuple[str, int, str, str | None]  # tier, pinned, created, tier_set as saved


@dataclass(eq=False, slots=True)
class Entry:
    """What is known of one file as of one stat; None: not read yet. `memory` is False for a
    memory path that is no usable memory, and a saved row until first used."""

    key: Key
    racy: bool
    sha: bytes | None = None
    empty: bool = False
    memory: Memory | MemoryRow | bool | None = None

    def stand_in(self) -> bytes:
        """Empty stays empty; other bytes compare equal exactly when their sha256 does."""
        return b"" if self.empty else b"#" + (self.sha or b"")


class CachedInputs(ReadInputs):
    """The same inputs, from `compile_files` for every file whose key is unchanged."""

    def __init__(self, ws: Workspace, store: Store) -> None:
        super().__init__(ws, store)
        self.kept = _load(ws)
        self.entries: dict[str, Entry] = {}
        self.read: set[str] = set()  # entries completed by a read since the last save
        self.odd = False  # a memory root or memory file os.walk sees and the store listing not
        self.reads = 0  # files read (not taken from the cache): for tests and the bench
        self._trash: dict[str, tuple[bytes, str]] | None = None
        self._memories: list[Memory] | None = None
        self._before: tuple[dict[str, Entry], list[str] | None] | None = None  # stale()'s

    def stale(self) -> None:
        self._before = (self.entries, self._paths) if self._paths is not None else None
        super().stale()
        self._trash = self._memories = None

    def wrote(self, files: Iterable[str]) -> None:
        """The listing after the pass's own write, from the stats of the files it named (a
        move names both ends) over the listing before it, not another walk of 11,000 files.
        The write changed nothing else the walk would see; a file that is no longer a regular
        one, or a folder that is not, is left to a full scan. Changes made meanwhile by
        others are seen by the next run's scan, as they would be after the pass's last one."""
        before, self._before = self._before, None
        if before is None:
            return
        entries, paths = dict(before[0]), set(before[1] or ())
        stamp = _stamp(self.ws)
        folders: dict[str, bool] = {}
        root = str(self.ws.root)
        for rel in dict.fromkeys(files):
            st = _walked(root, rel, folders)
            if st is None:
                entries.pop(rel, None)
                paths.discard(rel)
                continue
            if not stat.S_ISREG(st.st_mode):
                return  # not what the store writes: the next `paths` scans the tree
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            racy = stamp is None or st.st_ctime_ns >= stamp or st.st_mtime_ns >= stamp
            old = entries.get(rel)
            if old is None or old.key != key or old.racy or racy:
                entries[rel] = Entry(key, racy)
            paths.add(rel)
        self.entries, self._paths = entries, sorted(paths)

    def retiered(self) -> None:
        self._memories = None

    def unchanged(self) -> bool:
        """Whether the tree is the one the cache was saved for (no file new, gone, changed or
        racy); scans when the pass has not yet."""
        self.paths()
        kept = self.kept
        return len(kept) == len(self.entries) and all(
            kept.get(p) is e and not e.racy for p, e in self.entries.items()
        )

    def paths(self) -> list[str]:
        if self._paths is None:
            self._scan()
        assert self._paths is not None
        return self._paths

    def _scan(self) -> None:
        stamp = _stamp(self.ws)
        known = {**self.kept, **self.entries}
        entries, regular, odd = {}, [], _odd_roots(self.ws)
        for rel, st in walk_entries(self.ws.root):
            if not stat.S_ISREG(st.st_mode):
                odd = odd or is_memory_path(rel)
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            racy = stamp is None or st.st_ctime_ns >= stamp or st.st_mtime_ns >= stamp
            old = known.get(rel)
            if old is None or old.key != key or old.racy:
                old = Entry(key, racy)
            elif racy:  # the clock went back since: read it again next time
                old = Entry(key, racy, old.sha, old.empty, old.memory)
            entries[rel] = old
            regular.append(rel)
        self.entries, self._paths, self.odd = entries, sorted(regular), odd

    def trash_files(self) -> dict[str, tuple[bytes, str]]:
        if self._trash is not None and self._paths is not None:
            return self._trash
        out = {}
        for p in self.paths():
            if p.startswith(TRASH_ROOTS):
                e = self.entries[p]
                if e.sha is None:
                    data = self.store.read_bytes(p) or b""
                    e.sha, e.empty = hashlib.sha256(data).digest(), is_empty(data)
                    if e.memory is None and not self.odd and is_memory_path(p):
                        e.memory = self._memory_of(p, data)  # the tier step's, from one read
                    self.reads += 1
                    self.read.add(p)
                out[p] = (e.stand_in(), (e.sha or b"").hex())
        self._trash = out
        return out

    def memories(self) -> list[Memory]:
        paths = self.paths()
        if self._memories is not None:
            return self._memories
        if self.odd:  # symlinks or special files among the memories: read as load_memories does
            return super().memories()
        out: list[Memory] = []
        entries = self.entries
        for p in paths:
            e = entries[p]
            m = e.memory
            if m is None:  # not read, or not a memory path at all
                if not is_memory_path(p):
                    continue
                m = e.memory = self._memory_of(p)
                self.reads += 1
                self.read.add(p)
            elif isinstance(m, tuple):
                m = e.memory = _memory(p, m)
            if isinstance(m, Memory):
                out.append(m)
        with open_state(self.ws) as db:  # the file says what it names; state.db the rest
            stored = db.stored_tiers()
        self._memories = [with_stored(m, stored.get(m.path)) for m in out]
        return self._memories

    def _memory_of(self, path: str, data: bytes | None = None) -> Memory | bool:
        """What the file at `path` says of its memory (False: no usable memory), from `data`
        when the caller has read its bytes."""
        doc, _ = read_memory(self.ws, path, data=data)
        return doc.as_memory() if doc else False

    def settle(self) -> None:
        """Read whatever the next run would have to (after the pass wrote), so it need not."""
        self.trash_files()
        self.memories()

    def save(self, conn: sqlite3.Connection) -> None:
        """Keep every entry (in the caller's transaction); forget files that are gone."""
        rows = [
            (p, *e.key, int(e.racy), e.sha, int(e.empty), *_memory_row(e))
            for p, e in self.entries.items()
            if self.kept.get(p) is not e or p in self.read
        ]
        gone = [(p,) for p in self.kept if p not in self.entries]
        conn.execute("INSERT OR REPLACE INTO compile_meta (id, format) VALUES (1, ?)", (FORMAT,))
        conn.executemany("DELETE FROM compile_files WHERE path = ?", gone)
        conn.executemany(
            "INSERT OR REPLACE INTO compile_files (path, size, mtime_ns, ctime_ns, ino, racy, "
            "sha256, empty, memory, tier, manual, created, tier_set) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.kept, self.read = dict(self.entries), set()


def _memory_row(e: Entry) -> tuple[object, ...]:
    m = e.memory
    if m is None or m is False or m is True:
        return (None if m is None else 0, None, None, None, None)
    if isinstance(m, tuple):
        return (1, *m)
    # what the file says only (its own tier pins it); state.db's tiers are laid over on use
    return (1, m.tier, int(m.pinned), m.created.isoformat(), None)


def _memory(path: str, row: MemoryRow) -> Memory:
    tier, pinned, created, _ = row
    return Memory(path, tier, False, datetime.fromisoformat(created), pinned=bool(pinned))


def _entry(row: tuple[object, ...]) -> Entry:
    """A saved row as an entry; its memory is made when first used."""
    size, mtime, ctime, ino, racy, sha, empty, memory, tier, manual, created, tier_set = row
    mem = (tier, manual, created, tier_set) if memory else (None if memory is None else False)
    return Entry((size, mtime, ctime, ino), bool(racy), sha, bool(empty), mem)  # type: ignore[arg-type]  # a saved row's SQLite values carry no types


def _load(ws: Workspace) -> dict[str, Entry]:
    """The saved entries; none when another crustacean version saved them."""
    with open_state(ws) as db:
        meta = db.conn.execute("SELECT format FROM compile_meta WHERE id = 1").fetchone()
        if meta is None or meta[0] != FORMAT:
            return {}
        rows = db.conn.execute(
            "SELECT path, size, mtime_ns, ctime_ns, ino, racy, sha256, empty, memory, tier, "
            "manual, created, tier_set FROM compile_files"
        )
        return {r[0]: _entry(r[1:]) for r in rows}


def _stamp(ws: Workspace) -> int | None:
    """The filesystem's clock now, as the mtime it gives a file in the state folder; None when
    that folder is on another filesystem than the workspace (every entry is then racy)."""
    path = ws.state_dir / STAMP
    ws.state_dir.mkdir(exist_ok=True)
    with open(path, "ab"):
        pass
    os.utime(path)
    st = os.stat(path)
    return st.st_mtime_ns if st.st_dev == os.stat(ws.root).st_dev else None


def _walked(root: str, rel: str, folders: dict[str, bool]) -> os.stat_result | None:
    """The lstat of `rel` when the writer's walk (`tree.walk`, WRITABLE) would yield it: its
    folders neither left out nor symlinks (a walk never enters one), the file no killed
    write's temp and still there. `folders` keeps each folder's answer for the call."""
    parts = rel.split("/")
    rel_dir = ""
    for name in parts[:-1]:
        inside = f"{rel_dir}{name}/"
        ok = folders.get(inside)
        if ok is None:
            try:
                ok = not WRITABLE.leaves_out(rel_dir, name) and stat.S_ISDIR(
                    os.lstat(f"{root}/{inside}").st_mode
                )
            except OSError:
                ok = False
            folders[inside] = ok
        if not ok:
            return None
        rel_dir = inside
    if is_temp(parts[-1]):
        return None
    try:
        return os.lstat(f"{root}/{rel}")
    except OSError:
        return None


def _odd_roots(ws: Workspace) -> bool:
    """A memory root os.walk would enter through a symlink, which the store's listing skips."""
    tops = {"memory", "knowledge", *MEMORY_ROOTS}
    return any(os.path.islink(ws.root / top) for top in tops)
