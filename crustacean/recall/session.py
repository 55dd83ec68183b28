"""What a long-lived server keeps between calls, so a call does not stat every file.

A CLI process builds a context once and reads everything fresh (`context.Reader`). The MCP
server answers a conversation's calls: it keeps its search index open and the memories its
last sweep found (a stat of every file: the index's update, whose stats the memory index
reuses, memory_index.py), and sweeps again only when its caller says so: after the server's
own writes, or when its refresh interval has passed (mcp_server.py decides, for search and
context alike, and may sweep between calls). Between sweeps, a file the context loads (a
foundation file, a memory it keeps) is stat'ed on every call and read again as soon as its size
or mtime changed, so what a context loads is never older than the file; a file written within
RACY_NS of its read is read again (the same clock tick could hide a second write).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from datetime import datetime
from time import time_ns
from typing import TYPE_CHECKING

from crustacean.documents import Document
from crustacean.recall.context import RELEVANT, Reader, loadable, newest
from crustacean.recall.memories import MemoryDoc
from crustacean.recall.memory_index import RACY_NS, load_memories, read_doc
from crustacean.state import StateDB, open_state
from crustacean.workspace import Workspace

if TYPE_CHECKING:
    from crustacean.recall.search import Hit, Ranking, SearchIndex, SearchRequest

Problems = list[tuple[str, str]]
_Order = tuple[list[MemoryDoc], list[MemoryDoc], list[int], dict[str, int]]  # mems, sorted, places
LOADED_TEXTS = 512  # texts whose loadable form is kept (a context loads ~60 at most)


class SessionReader(Reader):
    """A `Reader` that keeps what it read for the next call; `sweep()` checks every file again.
    One caller at a time (the server serializes its calls and sweeps)."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        self._db: StateDB | None = None
        self._index: SearchIndex | None = None
        self._scanned: Mapping[str, os.stat_result] | None = None  # the last sweep's stats
        self._memories: dict[bool, tuple[list[MemoryDoc], Problems]] = {}
        self._docs: dict[str, tuple[tuple[int, int], Document]] = {}
        self._by_path: _Order | None = None  # the memories newest first, as of the last sweep
        self._long: tuple[list[MemoryDoc], AbstractSet[str]] | None = None  # per sweep
        self._loaded: dict[str, str] = {}  # text: loadable(text), for the files it keeps
        self.kept = 0  # counts what it keeps anew (the server's collector freezes it, gc.freeze)

    def sweep(self) -> None:
        """Check every file again now: the search index once a call has used it, then the
        memories of each kind a call has loaded (from the index's stats, not stat'ed twice)."""
        self._scanned = None
        self.kept += 1
        if self._index is not None:
            self._index.update()
            self._scanned = self._index.scanned
        kinds = list(self._memories)
        self._memories.clear()
        for topic in kinds:
            self._load(topic)

    def index(self) -> SearchIndex:
        """The session's search index, brought up to date when first opened."""
        if self._index is None:
            from crustacean.recall.search import SearchIndex

            self._index = SearchIndex(self.ws, self._state())
            self._index.update()
            self._scanned = self._index.scanned
            self.kept += 1
        return self._index

    def search(self, request: SearchRequest) -> list[Hit]:
        """`search.find`'s hits, from the index as of the last sweep."""
        return request.hits(self.index())

    @contextmanager
    def ranking(self, topic: str, now: datetime) -> Iterator[Ranking]:
        yield self.index().ranking(topic, now, refresh=False)

    def memories(self, ranking: Ranking | None) -> tuple[list[MemoryDoc], Problems]:
        topic = ranking is not None
        if topic not in self._memories:
            self._load(topic)
        return self._memories[topic]

    def _load(self, topic: bool) -> None:
        self.kept += 1
        got = self._memories[topic] = load_memories(
            self.ws, bodies=False, topic=topic, scanned=self._scanned
        )
        if topic:  # a topic's candidates come in this order (~10 ms on 10,000 memories)
            self._by_path = _ordered(got[0])

    def candidates(self, mems: list[MemoryDoc], shares: Mapping[str, float]) -> list[MemoryDoc]:
        """`Reader.candidates` from the memories sorted newest first once per sweep: each
        call picks the places of the hot ones and of those the ranking found relevant, and
        sorts them (a topic of common words touches thousands of memories, a few hundred
        of them relevant)."""
        kept = self._by_path
        if kept is None or kept[0] is not mems:  # sorted by the sweep: not in a call
            kept = self._by_path = _ordered(mems)
            self.kept += 1
        _, order, hot, others = kept
        places = hot + [
            i
            for p, share in shares.items()
            if share >= RELEVANT and (i := others.get(p)) is not None
        ]
        places.sort()
        return [order[i] for i in places]

    def long_paths(self, mems: list[MemoryDoc]) -> AbstractSet[str]:
        """`Reader.long_paths`, worked out once per sweep."""
        kept = self._long
        if kept is None or kept[0] is not mems:
            kept = self._long = (mems, super().long_paths(mems))
            self.kept += 1
        return kept[1]

    def document(self, rel: str) -> Document:
        return self._kept(rel, lambda: super(SessionReader, self).document(rel))

    def body(self, mem: MemoryDoc) -> Document:
        return self._kept(mem.path, lambda: read_doc(self.ws.root, mem.path))

    def _kept(self, rel: str, read: Callable[[], Document]) -> Document:
        """The file's document as last read while its size and mtime are the same."""
        try:
            st = os.stat(self.ws.root / rel)
        except OSError:
            self._docs.pop(rel, None)
            return read()  # gone meanwhile: the read says how
        key = (st.st_size, st.st_mtime_ns)
        got = self._docs.get(rel)
        if got is not None and got[0] == key:
            return got[1]
        doc = read()
        if st.st_mtime_ns < time_ns() - RACY_NS:
            self._docs[rel] = (key, doc)
            self.kept += 1
        else:
            self._docs.pop(rel, None)
        return doc

    def loaded(self, text: str) -> str:
        """`loadable(text)`, kept for the same text (a foundation file, each call)."""
        got = self._loaded.get(text)
        if got is None:
            if len(self._loaded) >= LOADED_TEXTS:
                self._loaded.clear()
            got = self._loaded[text] = loadable(text)
        return got

    def record(self, paths: list[str], now: datetime) -> None:
        self._state().record_recalls(paths, now, "context")

    def _state(self) -> StateDB:
        """The session's one connection to state.db (the index's too), opened on first use."""
        if self._db is None:
            self._db = open_state(self.ws, any_thread=True)  # the server serializes its calls
        return self._db

    def close(self) -> None:
        """Close the session's database."""
        if self._db is not None:
            self._db.close()
        self._db, self._index = None, None


def _ordered(mems: list[MemoryDoc]) -> _Order:
    """The memories newest first (`newest`), the places of the hot ones in that order, and the
    place of each other one by path."""
    order = sorted(mems, key=newest, reverse=True)
    hot = [i for i, m in enumerate(order) if m.tier == "hot"]
    return mems, order, hot, {m.path: i for i, m in enumerate(order) if m.tier != "hot"}
