"""The MCP server's session answers what a fresh process would: the kept index, memories and
documents, and the sweeps a running server makes between calls (mcp_server.Sweeper), never
change a result, only when the work is done."""

from __future__ import annotations

import gc
import os
import threading
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp import Client

from crustacean import mcp_server
from crustacean.mcp_server import McpState, Sweeper, build_server
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.search import SearchRequest, find
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
OLD = 1_700_000_000  # an mtime long past: a file the session may keep
TOPICS = [None, "green tea", "kiwi vines", "plum jam lemon"]
QUERIES = ["green tea", "kiwi", "lemon plum", "tea pot clay"]


def memory(name: str, tier: str, body: str) -> str:
    return (
        f"---\nname: {name}\nrecorded: 2026-11-0{len(name) % 9 + 1}\ntier: {tier}\n---\n\n{body}\n"
    )


def put(ws: Workspace, rel: str, text: str, mtime: int = OLD) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    os.utime(path, (mtime, mtime))


def long_body(word: str) -> str:
    """A memory over LONG_CHARS: the context loads its best lines, not the whole file."""
    parts = [
        f"## Part {i}\n\nNotes on the {word} harvest, day {i}, and the weather.\n"
        for i in range(60)
    ]
    return "\n".join(parts) + f"\nThe {word} tea was brewed with lemon.\n"


def fresh(ws: Workspace, topic: str | None) -> str:
    """What `crustacean context` prints now, everything read fresh."""
    return build_context(ws, ContextRequest("main", topic), NOW).to_markdown()


def fresh_hits(ws: Workspace, query: str) -> list[dict[str, object]]:
    return [h.to_json() for h in find(ws, SearchRequest(query, 10)).hits]


def same_as_fresh(st: McpState, ws: Workspace) -> None:
    for topic in TOPICS:
        assert mcp_server.get_context(st, "main", topic) == fresh(ws, topic), topic
    for query in QUERIES:
        assert mcp_server.search_memory(st, query, 10) == fresh_hits(ws, query), query


def test_the_session_answers_as_a_fresh_process_after_edits_of_every_kind(ws: Workspace) -> None:
    """Each step changes the workspace (by hand, then through the server), lets the session
    sweep, and compares every tool's answer with an uncached computation of the same call."""
    clock = {"t": 1000.0}
    st = McpState(ws, Store(ws), clock=lambda: NOW, monotonic=lambda: clock["t"])
    put(ws, "memory/notes/tea.md", memory("tea", "hot", "Alice drinks green tea."))
    put(ws, "memory/notes/oolong.md", memory("oolong", "warm", "Oolong is a green tea."))
    put(ws, "memory/ideas/pots.md", memory("pots", "warm", "A clay pot for the tea."))
    put(ws, "knowledge/kiwi.md", memory("kiwi", "warm", long_body("kiwi")))
    put(ws, "USER.md", "# User\n\nLikes green tea and kiwi.\n")
    same_as_fresh(st, ws)
    same_as_fresh(st, ws)  # the second time from what the session kept

    edits = [
        lambda: put(
            ws, "memory/notes/tea.md", memory("tea", "hot", "Alice drinks black tea."), OLD + 5
        ),
        lambda: put(ws, "memory/notes/plum.md", memory("plum", "warm", "Plum jam needs lemon.")),
        lambda: (ws.root / "memory/ideas/pots.md").unlink(),
        lambda: put(ws, "knowledge/kiwi.md", memory("kiwi", "cold", long_body("kiwi")), OLD + 9),
        lambda: put(ws, "USER.md", "# User\n\nLikes plum jam now.\n", OLD + 7),
    ]
    for edit in edits:
        edit()
        clock["t"] += mcp_server.REFRESH_SECONDS  # changed elsewhere: seen after the interval
        same_as_fresh(st, ws)
    change = {
        "path": "memory/notes/vines.md",
        "mode": "create",
        "content": memory("vines", "hot", "Kiwi vines."),
    }
    mcp_server.write_context(st, [change], "vines")
    same_as_fresh(st, ws)  # the server's own write: at once, no interval


def test_a_running_server_sweeps_after_its_own_write_before_the_next_call(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep a write makes due runs on the sweeper's thread, so the next call finds the
    session fresh and sweeps nothing itself; its answer still holds the write."""
    clock = {"t": 1000.0}
    st = McpState(ws, Store(ws), clock=lambda: NOW, monotonic=lambda: clock["t"])
    sweeper = Sweeper(st)
    st.poke = sweeper.poke
    swept = threading.Event()
    calls: list[str] = []
    real_sweep = st.sweep

    def sweep(now: float) -> None:
        calls.append(threading.current_thread().name)
        real_sweep(now)
        swept.set()

    monkeypatch.setattr(st, "sweep", sweep)
    sweeper.start()
    try:
        assert mcp_server.search_memory(st, "kiwis") == []  # the first call sweeps itself
        change = {
            "path": "memory/notes/kiwi.md",
            "mode": "create",
            "content": "# Kiwi\nripe kiwis\n",
        }
        swept.clear()
        mcp_server.write_context(st, [change], "kiwi")
        assert swept.wait(30)  # an outer safety bound only: it runs as soon as it can
        with st.lock:  # the sweep has finished
            assert st.dirty is False
        hits = mcp_server.search_memory(st, "kiwis")
    finally:
        sweeper.stop()
    assert [h["path"] for h in hits] == ["memory/notes/kiwi.md"]
    assert calls[0] != "crustacean-sweep" and calls[1:] == ["crustacean-sweep"]
    assert gc.get_freeze_count() == 0  # stopped: the collector walks every object again


def test_the_server_starts_and_stops_its_sweeper_with_each_session(ws: Workspace) -> None:
    def sweepers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == "crustacean-sweep"]

    async def main() -> list[Any]:
        async with Client(build_server(ws)) as client:
            running = sweepers()
            found = await client.call_tool("search_memory", {"query": "memory"})
            return [running, found.is_error]

    assert anyio.run(main) == [["crustacean-sweep"], False]
    assert sweepers() == []
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("failing", [OSError("disk gone"), RuntimeError("bug")])
def test_a_sweep_that_fails_between_calls_is_left_for_the_next_call(
    ws: Workspace, failing: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread does not retry in a loop; the next call sweeps itself and says what failed."""
    st = McpState(ws, Store(ws))
    mcp_server.search_memory(st, "memory")
    sweeper = Sweeper(st)
    tried = threading.Event()

    def sweep(now: float) -> None:
        tried.set()
        raise failing

    monkeypatch.setattr(st, "sweep", sweep)
    st.dirty = True  # as after a write: the thread sweeps at once
    sweeper.start()
    try:
        assert tried.wait(30)
        with st.lock:
            pass  # the failed sweep has returned
        assert sweeper.failed
        assert sweeper._next()[1] != sweeper._sweep  # no retry until the next call
    finally:
        sweeper.stop()
    with pytest.raises(type(failing)):
        mcp_server.search_memory(st, "memory")


def test_the_session_keeps_the_newest_first_order_of_many_hot_memories_per_sweep(
    ws: Workspace,
) -> None:
    """More hot memories than max_entries (50), recorded on few days (ties go by path): the
    order the session sorts once per sweep cuts the same memories as a fresh sort, and a sweep
    that sees a newer memory, a date changed, a memory gone or one grown long (its best lines
    load) sorts again."""
    clock = {"t": 1000.0}
    st = McpState(ws, Store(ws), clock=lambda: NOW, monotonic=lambda: clock["t"])

    def note(i: int, day: int, tier: str = "hot", mtime: int = OLD) -> None:
        text = f"---\nname: n{i}\nrecorded: 2026-10-{day:02d}\ntier: {tier}\n---\n\nTea note {i}.\n"
        put(ws, f"memory/notes/n{i:02d}.md", text, mtime)

    for i in range(70):
        note(i, 1 + i * 7 % 9, "warm" if i % 5 == 0 else "hot")
    same_as_fresh(st, ws)
    same_as_fresh(st, ws)  # from the order the session kept
    edits = [
        lambda: note(70, 28),
        lambda: note(3, 29, mtime=OLD + 3),
        lambda: (ws.root / "memory/notes/n70.md").unlink(),
        lambda: put(ws, "memory/notes/n01.md", memory("n1", "hot", long_body("green")), OLD + 1),
    ]
    for edit in edits:
        edit()
        clock["t"] += mcp_server.REFRESH_SECONDS
        same_as_fresh(st, ws)
