"""What a topic-less context needs to know of every memory, kept in state.db between calls.

`crustacean context --for main` (a SessionStart hook runs it on every session) picks hot
memories, newest first within the caps, and the audience's contact or group file; without a
topic no warm or cold memory can be picked, so their bodies are never looked at. Yet it must
name every memory file it could not use, and every hot one the caps cut. So each memory's tier,
recorded date, body size and problem (skipped, empty, frontmatter warning) is kept in
`memory_index`, keyed by path and checked against the file's size and modification time; only
new or changed files are parsed again, and a kept memory's text is read when the context uses
it. A file modified within RACY_NS of being indexed is parsed again on the next call too (the
same clock tick could hide a second write).

`load_memories(ws, bodies=False)` returns what a topic-less context would use of
`memories.load_memories(ws)`: the hot memories, contacts and groups (as IndexedMemory, read on
first use), in the same order, and every problem of every memory file, in the same order.
"""

from __future__ import annotations

import os
import sqlite3
from array import array
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from time import time_ns

from crustacean.documents import Document, DocumentSkipped, read_document
from crustacean.recall import memories
from crustacean.recall.memories import MemoryDoc, memory_paths, read_memory
from crustacean.state import StateDB, open_state
from crustacean.tree import mark_of
from crustacean.workspace import Workspace

RACY_NS = 2_000_000_000
PERSON_FOLDERS = ("memory/contacts/", "memory/groups/")  # context's _person_file looks here
MARK_KEY = "memory_index"  # search_meta's row of the last trusted sweep's mark


class IndexedMemory(MemoryDoc):
    """A memory as the index knows it: path, tier, recorded date and size without reading the
    file; its document is read on first use (the memories a context keeps, the person file).

    A file that cannot be read by then (changed in the milliseconds since the index was
    checked) reads as an empty body with the reason as its warning."""

    _known: tuple[Path, str, str, str, int, float]  # root, path, tier, recorded, size, mtime
    _doc: Document | None
    _recorded: datetime | None

    def __init__(
        self, root: Path, path: str, tier: str, recorded: str, size: int, mtime: float
    ) -> None:
        """`recorded` as stored (ISO text), `mtime` as stat gives it: made datetimes on first
        use, since a topic's context passes 10,000 memories and sorts only those it picks."""
        object.__setattr__(self, "_known", (root, path, tier, recorded, size, mtime))
        object.__setattr__(self, "_doc", None)
        object.__setattr__(self, "_recorded", None)

    @property
    def mtime(self) -> datetime:
        return datetime.fromtimestamp(self._known[5], UTC)

    @property
    def doc(self) -> Document:
        doc = self._doc
        if doc is None:
            doc = read_doc(*self._known[:2])
            object.__setattr__(self, "_doc", doc)
        return doc

    @property
    def path(self) -> str:
        return self._known[1]

    @property
    def tier(self) -> str:
        return self._known[2]

    @property
    def recorded(self) -> datetime:
        when = self._recorded
        if when is None:  # parsed once: a server's session sorts the same memories each call
            when = datetime.fromisoformat(self._known[3])
            object.__setattr__(self, "_recorded", when)
        return when

    @property
    def size(self) -> int:
        return self._known[4]


def read_doc(root: Path, path: str) -> Document:
    """A memory's document; one that cannot be read (changed since its stat) reads as an
    empty body with the reason as its warning."""
    try:
        return read_document(root, path)
    except DocumentSkipped as e:
        return Document(path, "", {}, "", None, e.reason)


def _wanted(rel: str, tier: str, topic: bool) -> bool:
    """Hot memories and person files; with a topic every memory a context may pick."""
    return tier == "hot" or rel.startswith(PERSON_FOLDERS) or (topic and tier != "archive")


def load_memories(
    ws: Workspace,
    *,
    bodies: bool = True,
    topic: bool = False,
    scanned: Mapping[str, os.stat_result] | None = None,
) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
    """`memories.load_memories`; with bodies=False only the memories a topic-less context can
    use (with `topic`, every memory but the archived: the search ranking judges relevance, so
    no body is read to choose), and every problem (see the module docstring). `scanned`: the
    search index's stat of the files it just checked, not taken again (a file it has not,
    a symlink say, is stat'ed here)."""
    if bodies:
        return memories.load_memories(ws)
    paths = memory_paths(ws.root)
    root = str(ws.root)  # not Path / rel: for 10,000 files pathlib costs more than stat
    given = scanned or {}
    stats: list[os.stat_result | None] = []
    for rel in paths:
        st = given.get(rel)
        if st is None:
            try:
                st = os.stat(f"{root}/{rel}")
            except OSError:
                st = None
        stats.append(st)
    mark = _sweep_mark(paths, stats)
    with open_state(ws) as db:
        if _marked(db.conn, mark, len(paths)):
            return _unchanged(db.conn, ws.root, topic)
        return _checked(db, ws, paths, stats, topic, mark)


def _sweep_mark(paths: list[str], stats: list[os.stat_result | None]) -> int:
    """One number for every memory file's path, size and mtime (a file that could not be
    stat'ed counts as -1, -1)."""
    numbers = array("q")
    for st in stats:
        numbers.append(st.st_size if st is not None else -1)
        numbers.append(st.st_mtime_ns if st is not None else -1)
    return mark_of(paths, numbers)


def _marked(conn: sqlite3.Connection, mark: int, files: int) -> bool:
    """Whether the index holds a row for each of exactly these files as they are now: the
    sweep's mark is the one the last check stored (none is stored while a row is racy), and
    no row went since (a changed stored tier drops its row, state.set_tiers)."""
    row = conn.execute("SELECT value FROM search_meta WHERE key = ?", (MARK_KEY,)).fetchone()
    if row is None or row[0] != mark:
        return False
    return bool(conn.execute("SELECT count(*) FROM memory_index").fetchone()[0] == files)


def _unchanged(
    conn: sqlite3.Connection, root: Path, topic: bool
) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
    """What `_checked` would return when no file changed, from the rows it needs alone."""
    docs: list[MemoryDoc] = []
    problems: list[tuple[str, str]] = []
    person = " OR ".join(f"substr(path, 1, {len(f)}) = '{f}'" for f in PERSON_FOLDERS)
    wanted = "tier != 'archive'" if topic else f"tier = 'hot' OR {person}"
    sql = (
        "SELECT path, mtime_ns, tier, recorded, body, problem, loaded FROM memory_index "
        f"WHERE (loaded AND ({wanted})) OR (problem IS NOT NULL AND problem != '') ORDER BY path"
    )
    for rel, mtime_ns, tier, recorded, size, problem, loaded in conn.execute(sql):
        if loaded and _wanted(rel, tier, topic):
            docs.append(IndexedMemory(root, rel, tier, recorded, size, mtime_ns / 1e9))
        if problem:
            problems.append((rel, problem))
    return docs, problems


def _checked(
    db: StateDB,
    ws: Workspace,
    paths: list[str],
    stats: list[os.stat_result | None],
    topic: bool,
    mark: int,
) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
    """Each file against its row: new or changed ones parsed again and their rows written."""
    now_ns = time_ns()
    docs: list[MemoryDoc] = []
    problems: list[tuple[str, str]] = []
    rows = {
        r[0]: r[1:]
        for r in db.conn.execute(
            "SELECT path, size, mtime_ns, racy, tier, recorded, body, problem, loaded "
            "FROM memory_index"
        )
    }
    stored = db.stored_tiers()  # a changed stored tier dropped its row (set_tiers)
    fresh: list[tuple[object, ...]] = []
    for rel, st in zip(paths, stats, strict=True):
        kept = rows.get(rel)
        if (
            st is not None
            and kept is not None
            and not kept[2]
            and (kept[0], kept[1]) == (st.st_size, st.st_mtime_ns)
        ):
            tier, recorded, size, problem, loaded = kept[3:]
            if loaded and _wanted(rel, tier, topic):
                docs.append(IndexedMemory(ws.root, rel, tier, recorded, size, st.st_mtime))
        else:
            mem, problem = read_memory(ws, rel, stored.get(rel))
            if mem is not None and _wanted(rel, mem.tier, topic):
                docs.append(mem)
            if st is not None:
                racy = int(st.st_mtime_ns >= now_ns - RACY_NS)
                known = (
                    (mem.tier, mem.recorded.isoformat(), mem.size, problem, 1)
                    if mem is not None
                    else ("", None, 0, problem, 0)
                )
                fresh.append((rel, st.st_size, st.st_mtime_ns, racy, *known))
        if problem:
            problems.append((rel, problem))
    gone = set(rows) - set(paths)
    trusted = not any(row[3] for row in fresh)  # a racy row is checked again next time
    if not (fresh or gone or trusted):
        return docs, problems  # nothing to record, and no mark to trust
    with db.transaction() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO memory_index "
            "(path, size, mtime_ns, racy, tier, recorded, body, problem, loaded) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            fresh,
        )
        conn.executemany("DELETE FROM memory_index WHERE path = ?", [(p,) for p in gone])
        if trusted:
            conn.execute(
                "INSERT INTO search_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (MARK_KEY, mark),
            )
        else:
            conn.execute("DELETE FROM search_meta WHERE key = ?", (MARK_KEY,))
    return docs, problems
