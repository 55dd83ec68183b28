"""`crustacean mcp`: the memory tools for any MCP client, over stdio.

The same store, policy and guards as the pipeline, with actor `mcp`. Every refusal (stale,
policy, limits, path jail, secrets) is a tool error the model can act on, never a crash, and
nothing but the protocol is written to stdout.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from crustacean.clock import Clock, wall_clock
from crustacean.errors import CrustaceanError
from crustacean.llm.contract import actor_preamble, policy_modes
from crustacean.llm.tools import TOOLS, write_spec
from crustacean.store.write import Store
from crustacean.workspace import Workspace

ACTOR = "mcp"
REFRESH_SECONDS = 5.0  # search results are at most this stale for changes made elsewhere
GET_CONTEXT = (
    "The memory an agent should load now, as markdown: foundation files, today's and "
    "yesterday's daily logs, and the memories the tiers and caps allow. `audience` is "
    "main, dm:NAME, group:NAME or cron (the --for of `crustacean context`); `topic` loads "
    "relevant warm and cold memories."
)


def build_server(
    ws: Workspace, clock: Clock = wall_clock, monotonic: Callable[[], float] = time.monotonic
) -> Any:
    """An `MCPServer` whose tools call the store as actor `mcp`; `clock` dates what they write
    and recall, `monotonic` times the search index's refresh."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("crustacean", instructions=actor_preamble(ACTOR), log_level="WARNING")
    store = Store(ws, clock)
    # A search refreshes the index (a stat of every file) only when this server wrote something
    # or REFRESH_SECONDS have passed: a conversation's searches then cost the query alone.
    fresh = {"at": -REFRESH_SECONDS, "dirty": True}

    def guarded(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except CrustaceanError as e:  # a refusal the model can act on, never a crash
                raise ToolError(f"Error: {e}") from None

        return call

    def list_context_files(
        prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        from crustacean.store.reads import list_page

        return list_page(store, prefix, limit, cursor)

    def read_context_file(
        path: str, start_line: int | None = None, end_line: int | None = None
    ) -> dict[str, Any]:
        from crustacean.store.reads import read_range

        got = read_range(store, path, start_line, end_line)
        _recall(ws, got["path"], clock())
        return got

    def search_memory(
        query: str, limit: int | None = None, budget_chars: int | None = None
    ) -> list[dict[str, Any]]:
        from crustacean.recall.search import SearchIndex

        if limit is not None and not 1 <= limit <= 50:
            raise ToolError("Error: limit must be from 1 to 50.")
        now = monotonic()
        refresh = bool(fresh["dirty"]) or now - fresh["at"] >= REFRESH_SECONDS
        with SearchIndex(ws) as index:
            found = index.search(query, limit, refresh=refresh, budget_chars=budget_chars)
            hits = [h.to_json() for h in found]
        if refresh:
            fresh.update(at=now, dirty=False)
        return hits

    def write_context(changes: list[dict[str, Any]], message: str) -> dict[str, Any]:
        store.ws = _reread(ws)  # `mcp.write = "off"` set meanwhile holds from this call on
        result = store.write_context(changes, actor=ACTOR, message=message)
        fresh["dirty"] = True
        return result.to_json()

    def get_context(audience: str = "main", topic: str | None = None) -> str:
        from crustacean.recall.context import ContextRequest, build_context

        return build_context(ws, ContextRequest(audience, topic), clock()).to_markdown()

    for fn, name in (
        (list_context_files, "list_context_files"),
        (read_context_file, "read_context_file"),
        (search_memory, "search_memory"),
        (write_context, "write_context"),
        (get_context, "get_context"),
    ):
        description = TOOLS[name].description if name in TOOLS else GET_CONTEXT
        if name == "write_context":  # only the modes the mcp policy can allow
            description = write_spec(policy_modes(ACTOR)).description
        server.tool(name=name, description=description)(guarded(fn))
    return server


def _reread(ws: Workspace) -> Workspace:
    """The config as the files say now, under the -c flags the server was started with."""
    from crustacean.config import load_config

    flags = [
        f"{key}={value}"
        for key, value in ws.config.values.items()
        if ws.config.origins.get(key) == "flag" and not isinstance(value, list)
    ]
    return Workspace(ws.root, load_config(ws.root, overrides=flags))


def _recall(ws: Workspace, path: str, now: datetime) -> None:
    from crustacean.recall.memories import MEMORY_ROOTS
    from crustacean.state import open_state

    if path.startswith(tuple(f"{r}/" for r in MEMORY_ROOTS)):
        with open_state(ws) as db:
            db.record_recalls([path], now, "mcp")


def serve(ws: Workspace) -> None:
    """Run over stdio until the client goes away; logs go to stderr, never stdout."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    build_server(ws).run()


def tool_schemas(ws: Workspace) -> list[dict[str, Any]]:
    """The tool list as a client sees it (for the contract test and `--print-tools`)."""
    import anyio
    from mcp import Client

    async def main() -> list[dict[str, Any]]:
        async with Client(build_server(ws)) as client:
            tools = (await client.list_tools()).tools
            return [{"name": t.name, "input_schema": t.input_schema} for t in tools]

    plain: list[dict[str, Any]] = json.loads(json.dumps(anyio.run(main)))
    return plain
