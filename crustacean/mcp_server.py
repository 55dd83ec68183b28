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

import contextlib
import functools
import inspect
import json
import logging
import sys
import threading
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
)

from crustacean.clock import Clock, wall_clock
from crustacean.config import load_config
from crustacean.errors import CrustaceanError, UsageError, no_space
from crustacean.llm.contract import actor_preamble, policy_modes
from crustacean.llm.tools import (
    TOOLS,
    ToolSpec,
    check_input,
    get_context_spec,
    list_spec,
    write_spec,
)
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.memories import MEMORY_ROOTS
from crustacean.recall.search import SearchRequest, find
from crustacean.recall.session import SessionReader
from crustacean.state import open_state
from crustacean.store import Store
from crustacean.store.reads import list_page, read_range
from crustacean.tiers import default_tier
from crustacean.workspace import Workspace

ACTOR = "mcp"
REFRESH_SECONDS = 5.0  # search results are at most this stale for changes made elsewhere
MAX_SEARCH_LIMIT = 50
MAX_CONTEXT_CHARS = 50_000  # get_context's budget_chars ceiling


@dataclass
class McpState:
    """What one server's tools share: the workspace, its store, and when search last refreshed
    the index. A search refreshes it (a stat of every file) only when this server wrote
    something or REFRESH_SECONDS have passed: a conversation's searches then cost the query
    alone. get_context keeps its reads in `reader` and sweeps the files on the same rule."""

    ws: Workspace
    store: Store
    clock: Clock = wall_clock  # dates what the tools write and recall
    monotonic: Callable[[], float] = time.monotonic  # times the index refresh
    refreshed_at: float = -REFRESH_SECONDS
    dirty: bool = True
    # get_context's reads, swept again on the same rule as search's (recall/session.py)
    reader: SessionReader | None = None
    swept_at: float = -REFRESH_SECONDS
    swept_dirty: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)  # one get_context at a time

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
    page = list_page(st.store, prefix, limit, cursor)
    memory = tuple(f"{r}/" for r in (*MEMORY_ROOTS, "archive"))
    for f in page["files"]:  # a memory without a tier in its frontmatter has its folder's
        if "tier" not in f and f["path"].startswith(memory) and f["path"].endswith(".md"):
            f["tier"] = default_tier(f["path"])
    return page


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
    st.dirty = st.swept_dirty = True
    return result.to_json()


def get_context(
    st: McpState, audience: str = "main", topic: str | None = None, budget_chars: int | None = None
) -> str:
    request = ContextRequest(audience, topic, budget_chars=budget_chars)
    with st.lock:
        if st.reader is None:
            st.reader = SessionReader(st.ws)
        now = st.monotonic()
        if st.swept_dirty or now - st.swept_at >= REFRESH_SECONDS:
            st.reader.sweep()
            st.swept_at, st.swept_dirty = now, False
        built = build_context(st.ws, request, st.clock(), for_name="audience", reader=st.reader)
    return built.to_markdown()


TOOL_FUNCTIONS = (list_context_files, read_context_file, search_memory, write_context, get_context)


def specs(ws: Workspace) -> dict[str, ToolSpec]:
    """Each tool's name, description and input schema, from the tool specs the stages use
    too (llm/tools.py): write_context offers only the modes the mcp policy can allow, and
    list_context_files's limit is bounded by this workspace's `context.list_limit`."""
    out = {
        "list_context_files": list_spec(ws.settings.context.list_limit),
        "write_context": write_spec(policy_modes(ACTOR)),
        "get_context": get_context_spec(MAX_CONTEXT_CHARS),
    }
    return {fn.__name__: out.get(fn.__name__) or TOOLS[fn.__name__] for fn in TOOL_FUNCTIONS}


def description(name: str, ws: Workspace) -> str:
    return specs(ws)[name].description


# ---------------------------------------------------------------- the server


def build_server(
    ws: Workspace, clock: Clock = wall_clock, monotonic: Callable[[], float] = time.monotonic
) -> MCPServer:
    """An `MCPServer` whose tools call the store as actor `mcp`; `clock` dates what they write
    and recall, `monotonic` times the search index's refresh."""
    server = _Server(specs(ws))
    st = McpState.open(ws, clock, monotonic)
    for fn in TOOL_FUNCTIONS:
        spec = server.specs[fn.__name__]
        server.tool(name=spec.name, description=spec.description)(_bound(fn, st))
    return server


class _Server(MCPServer):
    """An MCPServer whose tools list the specs' schemas (typed, described, bounded, no unknown
    argument) and check every call against them first, answering a refusal in one line of
    the tool's own words: `Error: <what was wrong and how to fix it>`."""

    def __init__(self, tool_specs: dict[str, ToolSpec]) -> None:
        super().__init__("crustacean", instructions=actor_preamble(ACTOR), log_level="WARNING")
        self.specs = tool_specs

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        return [
            t.model_copy(update={"input_schema": self.specs[t.name].input_schema}) for t in tools
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        spec = self.specs.get(name)
        try:
            if spec is None:
                raise UsageError(f"unknown tool {name!r}; tools: {', '.join(self.specs)}.")
            checked = check_input(spec, arguments)
            return await super().call_tool(name, checked, context)
        except UnexpectedToolError:
            raise  # a crash: the server logs it and tells the model no more than its name
        except (ToolError, CrustaceanError) as e:
            cause = e.__cause__ if isinstance(e.__cause__, ToolError) else e
            line = " ".join(str(cause).split())
            text = line if line.startswith("Error: ") else f"Error: {line}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


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
    anyio.run(_serve_stdio, build_server(ws))


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport and server loop, with a JSON-RPC error answering each line
    it cannot read (the SDK drops those silently, so a client would wait for its timeout).
    The answers go out through the transport's one writer, so no reply is torn. The loop is
    reached through the attribute `MCPServer.run_stdio_async` and the SDK's own in-memory
    client use (the SDK notes it should be public; no public call takes the streams); an SDK
    without it serves as `run_stdio_async` does, only without those answers
    (tests/test_mcp_jsonrpc.py checks the installed one has it)."""
    loop = getattr(server, "_lowlevel_server", None)
    if loop is None or not hasattr(loop, "run"):
        await server.run_stdio_async()
        return
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_answer_unreadable, read_stream, send, write_stream)
            await loop.run(receive, write_stream, loop.create_initialization_options())


async def _answer_unreadable(
    lines: AsyncIterable[SessionMessage | Exception],
    server: MemoryObjectSendStream[SessionMessage | Exception],
    replies: Any,
) -> None:
    """Pass each message on to the server; answer a line that is not JSON with -32700 and
    one that is not a JSON-RPC message with -32600 (its id when it has one). Blank lines are
    no message and get no answer."""
    async with server:
        async for item in lines:
            if not isinstance(item, Exception):
                await server.send(item)
                continue
            error = unreadable(item)
            if error is not None:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await replies.send(SessionMessage(error))


def unreadable(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a line the transport could not read (the validation error of
    the message union the SDK reports), or None for a blank line."""
    listed = getattr(exc, "errors", None)  # the SDK's validator says what it found
    errors: list[dict[str, Any]] = list(listed()) if callable(listed) else []
    if errors and errors[0]["type"] == "json_invalid":
        if not str(errors[0].get("input", "")).strip():
            return None
        return _error(None, PARSE_ERROR, "Parse error: the line is not JSON")
    msg_id: str | int | None = None
    for err in errors:  # a field missing or wrong in the message: its input is the message
        given = err.get("input")
        if len(err["loc"]) == 2 and isinstance(given, dict):
            found = given.get("id")
            if isinstance(found, str | int) and not isinstance(found, bool):
                msg_id = found
            break
    what = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    return _error(msg_id, INVALID_REQUEST, what)


def _error(msg_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=msg_id, error=ErrorData(code=code, message=message))


def tool_schemas(ws: Workspace) -> list[dict[str, Any]]:
    """The tool list as a client sees it (for the contract test and `--print-tools`)."""

    async def main() -> list[dict[str, Any]]:
        async with Client(build_server(ws)) as client:
            tools = (await client.list_tools()).tools
            return [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in tools
            ]

    plain: list[dict[str, Any]] = json.loads(json.dumps(anyio.run(main)))
    return plain
