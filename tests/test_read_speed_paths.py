"""The read paths' shortcuts never serve what a file no longer says: the MCP server's kept
context reads (recall/session.py), checked on a fake monotonic clock."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from crustacean import mcp_server
from crustacean.mcp_server import McpState
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.session import SessionReader
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
OLD = 1_700_000_000  # an mtime long past: a file the session may keep


def put(ws: Workspace, rel: str, text: str, mtime: int = OLD) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    os.utime(path, (mtime, mtime))


def hot(name: str, body: str) -> str:
    return f"---\nname: {name}\nrecorded: 2026-11-01\ntier: hot\n---\n\n{body}\n"


def warm(name: str, body: str) -> str:
    return f"---\nname: {name}\nrecorded: 2026-11-01\ntier: warm\n---\n\n{body}\n"


@pytest.fixture
def session(ws: Workspace) -> tuple[McpState, dict[str, float]]:
    clock = {"t": 1000.0}
    return McpState(ws, Store(ws), clock=lambda: NOW, monotonic=lambda: clock["t"]), clock


@pytest.mark.parametrize(
    ("rel", "before", "after"),
    [
        (  # a memory the context keeps
            "memory/notes/tea.md",
            hot("tea", "Alice drinks green tea."),
            hot("tea", "Alice drinks black coffee now."),
        ),
        (
            "USER.md",
            "# User\n\nLikes green tea.\n",
            "# User\n\nLikes black coffee, four of them.\n",
        ),
    ],
)
def test_a_loaded_file_edited_by_hand_loads_its_new_text_at_once(
    ws: Workspace, session: tuple[McpState, dict[str, float]], rel: str, before: str, after: str
) -> None:
    st, clock = session
    put(ws, rel, before)
    assert "green tea" in mcp_server.get_context(st)
    put(ws, rel, after, OLD + 60)
    clock["t"] += 1  # within REFRESH_SECONDS: no sweep, yet the file's stat changed
    got = mcp_server.get_context(st)
    assert "black coffee" in got and "green tea" not in got


def test_added_and_deleted_memories_show_after_a_write_or_refresh_seconds(
    ws: Workspace, session: tuple[McpState, dict[str, float]]
) -> None:
    st, clock = session
    assert "memory/notes/kiwi.md" not in mcp_server.get_context(st)
    put(ws, "memory/notes/kiwi.md", hot("kiwi", "Kiwis grow on vines."))  # written elsewhere
    clock["t"] += mcp_server.REFRESH_SECONDS
    assert "memory/notes/kiwi.md" in mcp_server.get_context(st)
    (ws.root / "memory/notes/kiwi.md").unlink()
    clock["t"] += mcp_server.REFRESH_SECONDS
    assert "memory/notes/kiwi.md" not in mcp_server.get_context(st)
    change = {"path": "memory/notes/fig.md", "mode": "create", "content": hot("fig", "Figs.")}
    mcp_server.write_context(st, [change], "a fig")
    assert "memory/notes/fig.md" in mcp_server.get_context(st)  # its own write: at once


def test_a_topic_finds_a_memory_written_through_the_server_at_once(
    ws: Workspace, session: tuple[McpState, dict[str, float]]
) -> None:
    st, _ = session
    assert "memory/notes/plum.md" not in mcp_server.get_context(st, topic="plum jam")
    change = {
        "path": "memory/notes/plum.md",
        "mode": "create",
        "content": warm("plum", "Plum jam needs lemon."),
    }
    mcp_server.write_context(st, [change], "plum")
    assert "memory/notes/plum.md" in mcp_server.get_context(st, topic="plum jam")


@pytest.mark.parametrize("topic", [None, "green tea"])
def test_a_session_reader_builds_the_context_a_fresh_one_does(
    ws: Workspace, topic: str | None
) -> None:
    put(ws, "memory/notes/tea.md", hot("tea", "Alice drinks green tea."))
    put(ws, "memory/notes/oolong.md", warm("oolong", "Oolong is a green tea, half oxidised."))
    put(ws, "memory/ideas/pots.md", warm("pots", "A clay pot for the tea."))
    request = ContextRequest("main", topic)
    reader = SessionReader(ws)
    try:
        for _ in range(2):  # the second call from what the session kept
            kept = build_context(ws, request, NOW, reader=reader)
            assert kept == build_context(ws, request, NOW)
    finally:
        reader.close()


# ---------------------------------------------------------------- a fresh process


def loaded(ws: Workspace, topic: str | None = None) -> set[str]:
    """What `crustacean context` loads now (each call as a fresh process reads)."""
    return set(build_context(ws, ContextRequest("main", topic), NOW).memory_paths)


def note(name: str, tier: str, body: str) -> str:
    return f"---\nname: {name}\nrecorded: 2026-11-01\ntier: {tier}\n---\n\n{body}\n"


def test_the_context_trusts_its_mark_only_while_no_memory_file_changed(ws: Workspace) -> None:
    """The second call answers from the memory index's rows (the sweep's mark is the one
    stored), yet an edit in place, an added file and a deleted one count at once."""
    put(ws, "memory/notes/a.md", note("a", "hot", "apples"))
    put(ws, "memory/notes/b.md", note("b", "warm", "bananas"))
    assert loaded(ws) == {"memory/notes/a.md"}
    assert loaded(ws) == {"memory/notes/a.md"}  # from the mark: nothing changed
    put(ws, "memory/notes/b.md", note("b", "hot ", "bananas"), OLD + 1)  # in place, same size
    assert loaded(ws) == {"memory/notes/a.md", "memory/notes/b.md"}
    put(ws, "memory/notes/c.md", note("c", "hot", "cherries"))
    assert "memory/notes/c.md" in loaded(ws)
    (ws.root / "memory/notes/a.md").unlink()
    assert loaded(ws) == {"memory/notes/b.md", "memory/notes/c.md"}


def test_a_tier_kept_in_state_counts_at_once(ws: Workspace) -> None:
    """`tier set` changes no file: the row it drops is what the next context notices."""
    from crustacean.state import open_state
    from crustacean.tiers import StoredTier

    put(ws, "memory/notes/d.md", "---\nname: d\nrecorded: 2026-11-01\n---\n\ndates\n")
    assert loaded(ws) == set()
    assert loaded(ws) == set()
    with open_state(ws) as db:
        db.set_tiers({"memory/notes/d.md": StoredTier("hot", manual=True)}, "user", NOW)
    assert loaded(ws) == {"memory/notes/d.md"}


def test_a_racy_file_keeps_the_mark_from_being_trusted(ws: Workspace) -> None:
    """A file modified within RACY_NS of its check (the same clock tick could hide a second
    write of the same size) is checked again however its stat looks."""
    path = ws.root / "memory/notes/e.md"
    path.write_text(note("e", "warm", "eggs"), "utf-8")
    tick = path.stat().st_mtime_ns  # now: within RACY_NS of the check below
    assert loaded(ws) == set()
    path.write_text(note("e", "hot ", "eggs"), "utf-8")  # the same size
    os.utime(path, ns=(tick, tick))  # and the same mtime: only the racy rule sees it
    assert loaded(ws) == {"memory/notes/e.md"}
