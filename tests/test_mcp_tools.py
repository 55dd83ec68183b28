"""The MCP tools as plain functions, without a session: the same core calls as the CLI, and the
server registers exactly these (their schemas and results are pinned in test_mcp.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime

import anyio
import pytest
from mcp import Client

from conftest import snapshot
from crustacean import mcp_server
from crustacean.errors import CrustaceanError, SearchQueryError, UsageError
from crustacean.mcp_server import McpState, build_server
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.search import SearchRequest, find
from crustacean.store.write import Store
from crustacean.workspace import Workspace


def test_the_server_registers_the_plain_functions_under_their_names(ws: Workspace) -> None:
    async def names() -> list[str]:
        async with Client(build_server(ws)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert anyio.run(names) == [fn.__name__ for fn in mcp_server.TOOL_FUNCTIONS]
    for fn in mcp_server.TOOL_FUNCTIONS:  # the state first, then the tool's own parameters
        assert next(iter(inspect.signature(fn).parameters)) == "st"


def test_search_memory_is_the_cli_search(ws: Workspace) -> None:
    (ws.root / "memory/notes/tea.md").write_text("# Tea\nAlice likes green tea.\n")
    st = McpState.open(ws)
    hits = mcp_server.search_memory(st, "green tea", limit=3)
    assert hits == [h.to_json() for h in find(ws, SearchRequest("green tea", 3)).hits]
    assert hits[0]["path"] == "memory/notes/tea.md"
    assert st.dirty is False  # refreshed once; the next search within REFRESH_SECONDS does not


def test_get_context_is_the_cli_context(ws: Workspace) -> None:
    st = McpState.open(ws)
    got = mcp_server.get_context(st, "main")
    want = build_context(ws, ContextRequest("main", None), datetime.now(UTC)).to_markdown()
    assert got.splitlines()[:3] == want.splitlines()[:3]


def test_write_then_read_through_the_plain_functions(ws: Workspace) -> None:
    st = McpState.open(ws)
    done = mcp_server.write_context(
        st, [{"path": "memory/notes/a.md", "mode": "create", "content": "# A\nhello\n"}], "add a"
    )
    assert done["files"] == ["memory/notes/a.md"]
    assert st.dirty is True  # the next search refreshes the index
    read = mcp_server.read_context_file(st, "memory/notes/a.md")
    assert "hello" in read["content"]
    listed = mcp_server.list_context_files(st, prefix="memory/notes/")
    assert "memory/notes/a.md" in [f["path"] for f in listed["files"]]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda st: mcp_server.search_memory(st, "tea", limit=51), UsageError, "from 1 to 50"),
        (lambda st: mcp_server.search_memory(st, "  "), SearchQueryError, "query is empty"),
        (lambda st: mcp_server.read_context_file(st, "../x.md"), CrustaceanError, "x.md"),
    ],
)
def test_a_refusal_is_a_crustacean_error_and_changes_nothing(
    ws: Workspace, call: Callable[[McpState], object], error: type[Exception], message: str
) -> None:
    """Without a session a refusal is the core's own error; the server turns it into a tool
    error with the same words (test_mcp.py, test_bounds.py)."""
    before = snapshot(ws.root)
    with pytest.raises(error, match=message):
        call(McpState.open(ws))
    assert snapshot(ws.root) == before


def test_search_refreshes_after_a_write_or_after_refresh_seconds(ws: Workspace) -> None:
    """The freshness rule on a fake clock: changes made elsewhere show up within
    REFRESH_SECONDS; this server's own write at once."""
    now = {"t": 1000.0}
    st = McpState(ws, Store(ws), monotonic=lambda: now["t"])

    def paths(words: str) -> list[str]:
        return [h["path"] for h in mcp_server.search_memory(st, words)]

    assert paths("kiwis") == []
    (ws.root / "memory/notes/k.md").write_text("# K\nkiwis grow here\n")  # written elsewhere
    now["t"] += 1
    assert paths("kiwis") == []  # within REFRESH_SECONDS: the index is not re-read
    now["t"] += mcp_server.REFRESH_SECONDS
    assert paths("kiwis") == ["memory/notes/k.md"]
    change = {"path": "memory/notes/m.md", "mode": "create", "content": "# M\nmore kiwis\n"}
    mcp_server.write_context(st, [change], "kiwi")
    assert sorted(paths("kiwis")) == ["memory/notes/k.md", "memory/notes/m.md"]
