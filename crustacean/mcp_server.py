"""`crustacean mcp`: the memory tools for any MCP client, over stdio.

The same store, policy and guards as the pipeline, with actor `mcp`. Every refusal (stale,
policy, limits, path jail, secrets) is a tool error the model can act on, never a crash, and
nothing but the protocol is written to stdout.

Each tool is a plain function of this module over the core calls the CLI makes too (the store's
reads and `write_context`, `recall.search.find`, `recall.context.build_context`); its first
argument is the `McpState` one server shares, and the rest are the tool's parameters, from
which the server derives the tool's input schema. `build_server` registers them.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from crustacean.clock import Clock, wall_clock
from crustacean.config import load_config
from crustacean.errors import CrustaceanError, UsageError, no_space
from crustacean.llm.contract import actor_preamble, policy_modes
from crustacean.llm.tools import TOOLS, write_spec
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.memories import MEMORY_ROOTS
from crustacean.recall.search import SearchRequest, find
from crustacean.state import open_state
from crustacean.store import Store
from crustacean.store.reads import list_page, read_range
from crustacean.workspace import Workspace

ACTOR = "mcp"
REFRESH_SECONDS = 5.0  # search results are at most this stale for changes made elsewhere
MAX_SEARCH_LIMIT = 50
GET_CONTEXT = (
    "The memory an agent should load now, as markdown: foundation files, today's and "
    "yesterday's daily logs, and the memories the tiers and caps allow. `audience` is "
    "main, dm:NAME, group:NAME or cron (the --for of `crustacean context`); `topic` loads "
    "relevant warm and cold memories."
)


@dataclass
class McpState:
    """What one server's tools share: the workspace, its store, and when search last refreshed
    the index. A search refreshes it (a stat of every file) only when this server wrote
    something or REFRESH_SECONDS have passed: a conversation's searches then cost the query
    alone."""

    ws: Workspace
    store: Store
    clock: Clock = wall_clock  # dates what the tools write and recall
    monotonic: Callable[[], float] = time.monotonic  # times the index refresh
    refreshed_at: float = -REFRESH_SECONDS
    dirty: bool = True

    @classmethod
    def open(
        cls,
        ws: Workspace,
        clock: Clock = wall_clock,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> McpState:
        return cls(ws, Store(ws, clock), clock, monotonic)


# ---------------------------------------------------------------- the tools


def list_context_files(
    st: McpState, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
) -> dict[str, Any]:
    return list_page(st.store, prefix, limit, cursor)


def read_context_file(
    st: McpState, path: str, start_line: int | None = None, end_line: int | None = None
) -> dict[str, Any]:
    got = read_range(st.store, path, start_line, end_line)
    _recall(st.ws, got["path"], st.clock())
    return got


def search_memory(
    st: McpState, query: str, limit: int | None = None, budget_chars: int | None = None
) -> list[dict[str, Any]]:
    if limit is not None and not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise UsageError(f"limit must be from 1 to {MAX_SEARCH_LIMIT}.")
    now = st.monotonic()
    refresh = st.dirty or now - st.refreshed_at >= REFRESH_SECONDS
    found = find(st.ws, SearchRequest(query, limit, budget_chars), refresh=refresh)
    if refresh:
        st.refreshed_at, st.dirty = now, False
    return [h.to_json() for h in found.hits]


def write_context(st: McpState, changes: list[dict[str, Any]], message: str) -> dict[str, Any]:
    st.store.ws = _reread(st.ws)  # `mcp.write = "off"` set meanwhile holds from this call on
    result = st.store.write_context(changes, actor=ACTOR, message=message)
    st.dirty = True
    return result.to_json()


def get_context(st: McpState, audience: str = "main", topic: str | None = None) -> str:
    return build_context(st.ws, ContextRequest(audience, topic), st.clock()).to_markdown()


TOOL_FUNCTIONS = (list_context_files, read_context_file, search_memory, write_context, get_context)


def description(name: str) -> str:
    """A tool's description, from the stage contract's tool specs (llm/contract.py)."""
    if name == "write_context":  # only the modes the mcp policy can allow
        return write_spec(policy_modes(ACTOR)).description
    return TOOLS[name].description if name in TOOLS else GET_CONTEXT


# ---------------------------------------------------------------- the server


def build_server(
    ws: Workspace, clock: Clock = wall_clock, monotonic: Callable[[], float] = time.monotonic
) -> MCPServer:
    """An `MCPServer` whose tools call the store as actor `mcp`; `clock` dates what they write
    and recall, `monotonic` times the search index's refresh."""
    server = MCPServer("crustacean", instructions=actor_preamble(ACTOR), log_level="WARNING")
    st = McpState.open(ws, clock, monotonic)
    for fn in TOOL_FUNCTIONS:
        server.tool(name=fn.__name__, description=description(fn.__name__))(_bound(fn, st))
    return server


def _bound(fn: Callable[..., Any], st: McpState) -> Callable[..., Any]:
    """`fn` with its state given, under its own name and its signature less that argument (the
    server reads the tool's schema off it); a refusal becomes a tool error, never a crash."""
    signature = inspect.signature(fn, eval_str=True)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(st, *args, **kwargs)
        except CrustaceanError as e:  # a refusal the model can act on
            raise ToolError(f"Error: {e}") from None
        except Exception as e:
            full = no_space(e)  # a full disk says so, not "Error executing tool"
            if full is None:
                raise
            raise ToolError(f"Error: {full}") from None

    call.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect
        parameters=list(signature.parameters.values())[1:]
    )
    return call


def _reread(ws: Workspace) -> Workspace:
    """The config as the files say now, under the -c flags the server was started with."""
    flags = [
        f"{key}={value}"
        for key, value in ws.config.values.items()
        if ws.config.origins.get(key) == "flag" and not isinstance(value, list)
    ]
    return Workspace(ws.root, load_config(ws.root, overrides=flags))


def _recall(ws: Workspace, path: str, now: datetime) -> None:
    if path.startswith(tuple(f"{r}/" for r in MEMORY_ROOTS)):
        with open_state(ws) as db:
            db.record_recalls([path], now, "mcp")


def serve(ws: Workspace) -> None:
    """Run over stdio until the client goes away; logs go to stderr, never stdout."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    build_server(ws).run()


def tool_schemas(ws: Workspace) -> list[dict[str, Any]]:
    """The tool list as a client sees it (for the contract test and `--print-tools`)."""

    async def main() -> list[dict[str, Any]]:
        async with Client(build_server(ws)) as client:
            tools = (await client.list_tools()).tools
            return [{"name": t.name, "input_schema": t.input_schema} for t in tools]

    plain: list[dict[str, Any]] = json.loads(json.dumps(anyio.run(main)))
    return plain
