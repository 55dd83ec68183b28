"""What a topic-less context needs to know of every memory, kept in state.db between calls.

`crustacean context --for main` (a SessionStart hook runs it on every session) loads hot
memories and the audience's contact or group file; without a topic no warm or cold memory can
be picked, so their bodies are never looked at. Yet it must name every memory file it could not
use. So each memory's tier and problem (skipped, empty, frontmatter warning) is kept in
`memory_index`, keyed by path and checked against the file's size and modification time; only
new or changed files are parsed again. A file modified within RACY_NS of being indexed is
parsed again on the next call too (the same clock tick could hide a second write).

`load_memories(ws, bodies=False)` returns exactly what a topic-less context would use of
`memories.load_memories(ws)`: the memories it could load (hot ones, contacts, groups), parsed
from disk, in the same order, and every problem of every memory file, in the same order.
"""

from __future__ import annotations

import os
from time import time_ns

from crustacean import memories
from crustacean.memories import MemoryDoc, memory_paths, read_memory
from crustacean.state import open_state
from crustacean.workspace import Workspace

RACY_NS = 2_000_000_000
PERSON_FOLDERS = ("memory/contacts/", "memory/groups/")  # context's _person_file looks here


def _wanted(rel: str, tier: str) -> bool:
    return tier == "hot" or rel.startswith(PERSON_FOLDERS)


def load_memories(
    ws: Workspace, *, bodies: bool = True
) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
    """`memories.load_memories`; with bodies=False only the memories a topic-less context can
    use, and every problem (see the module docstring)."""
    if bodies:
        return memories.load_memories(ws)
    now_ns = time_ns()
    docs: list[MemoryDoc] = []
    problems: list[tuple[str, str]] = []
    with open_state(ws) as db:
        rows = {
            r[0]: r[1:]
            for r in db.conn.execute(
                "SELECT path, size, mtime_ns, racy, tier, problem, loaded FROM memory_index"
            )
        }
        fresh: list[tuple[object, ...]] = []
        paths = memory_paths(ws.root)
        for rel in paths:
            try:
                st = os.stat(ws.root / rel)
            except OSError:
                st = None
            kept = rows.get(rel)
            mem = None
            if (
                st is not None
                and kept is not None
                and not kept[2]
                and (kept[0], kept[1]) == (st.st_size, st.st_mtime_ns)
            ):
                tier, problem, loaded = kept[3], kept[4], bool(kept[5])
            else:
                mem, problem = read_memory(ws, rel)
                tier, loaded = (mem.tier, True) if mem is not None else ("", False)
                if st is not None:
                    racy = int(st.st_mtime_ns >= now_ns - RACY_NS)
                    fresh.append((rel, st.st_size, st.st_mtime_ns, racy, tier, problem, loaded))
            if loaded and _wanted(rel, tier):
                if mem is None:  # its body is used: read as it is now
                    mem, problem = read_memory(ws, rel)
                if mem is not None:
                    docs.append(mem)
            if problem:
                problems.append((rel, problem))
        gone = set(rows) - set(paths)
        if fresh or gone:
            with db.transaction() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO memory_index "
                    "(path, size, mtime_ns, racy, tier, problem, loaded) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    fresh,
                )
                conn.executemany("DELETE FROM memory_index WHERE path = ?", [(p,) for p in gone])
    return docs, problems
