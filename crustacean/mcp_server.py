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
import gc
import inspect
import json
import logging
import sys
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
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
from crustacean.recall.search import SearchRequest
from crustacean.recall.session import SessionReader
from crustacean.state import open_state
from crustacean.store import Store
from crustacean.store.reads import list_page, read_range
from crustacean.tiers import default_tier
from crustacean.workspace import Workspace

ACTOR = "mcp"
REFRESH_SECONDS = 5.0  # search results are at most this stale for changes made elsewhere
IDLE_SECONDS = 120.0  # a running server sweeps between calls for this long after a call
SWEEP_AHEAD = 0.8  # ... this share of REFRESH_SECONDS after the last sweep, before a call must
MAX_SEARCH_LIMIT = 50
MAX_CONTEXT_CHARS = 50_000  # get_context's budget_chars ceiling


@dataclass
class McpState:
    """What one server's tools share: the workspace, its store, and the session's reads
    (`reader`: the search index open, the memories, the files a context loaded), swept
    again (a stat of every file) only when this server wrote something or REFRESH_SECONDS
    have passed: a conversation's calls then cost the query alone. A running server sweeps
    between calls too (`Sweeper`), so a call seldom waits for one."""

    ws: Workspace
    store: Store
    clock: Clock = wall_clock  # dates what the tools write and recall
    monotonic: Callable[[], float] = time.monotonic  # times the sweeps
    refreshed_at: float = -REFRESH_SECONDS  # when the last sweep began
    dirty: bool = True  # this server wrote since: the next call sweeps first
    called_at: float = -IDLE_SECONDS  # when the last search or context call began
    reader: SessionReader | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one reader at a time
    poke: Callable[[], None] = lambda: None  # tells a running server's Sweeper of a call

    @classmethod
    def open(
        cls,
        ws: Workspace,
        clock: Clock = wall_clock,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> McpState:
        return cls(ws, Store(ws), clock, monotonic)

    @contextlib.contextmanager
    def session(self) -> Iterator[SessionReader]:
        """The session's reads for one call, swept first if stale (under `lock`)."""
        with self.lock:
            now = self.monotonic()
            self.called_at = now
            if self.due_in(now, REFRESH_SECONDS) <= 0:
                self.sweep(now)
            assert self.reader is not None
            yield self.reader

    def due_in(self, now: float, interval: float) -> float:
        """Seconds until the next sweep is due, `interval` after the last one (0: now)."""
        if self.dirty or self.reader is None:
            return 0.0
        return max(self.refreshed_at + interval - now, 0.0)

    def sweep(self, now: float) -> None:
        """Check every file again (the caller holds `lock`); a write from now on is not seen
        by it, so it leaves `dirty` set for the next sweep."""
        if self.reader is None:
            self.reader = SessionReader(self.ws)
        self.dirty = False
        try:
            self.reader.sweep()
        except BaseException:
            self.dirty = True  # the next call sweeps again, and says what went wrong
            raise
        self.refreshed_at = now


class Sweeper:
    """Works for a running server between calls, so a call seldom waits for more than its own
    query. It sweeps the session (a stat of every file) at once after the server's own write,
    and SWEEP_AHEAD of REFRESH_SECONDS after the last sweep while a conversation calls (until
    IDLE_SECONDS after its last call). A call still sweeps itself when it finds the session
    stale (the thread was late, or the conversation idle): the freshness rule is the calls'
    own; this only moves the work. A call that comes during a sweep waits for it
    (`McpState.lock`).

    It keeps the garbage collector's full collections out of the calls too: one walks every
    object the process holds (~117,000 with a 10,000-memory session: ~75 ms of CPU at load 8),
    and would land inside some call. Whatever a sweep or a call kept is frozen
    (`gc.freeze`, after a collection of the young generations), so the collector's own
    collections walk only what came after; once no call came for REFRESH_SECONDS, everything
    is unfrozen, collected in full and frozen again, so no garbage outlives a pause."""

    def __init__(self, st: McpState) -> None:
        self.st = st
        self.wake = threading.Condition()
        self.stopped = False
        self.failed = False  # a sweep raised: wait for the next call, which reports it
        self.frozen = -1  # the session's `kept` count when last frozen
        self.collected = True  # collected in full since the last call
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="crustacean-sweep", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread; the collector walks every object again, as before the server ran."""
        with self.wake:
            self.stopped = True
            self.wake.notify()
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        gc.unfreeze()

    def poke(self) -> None:
        """A call or a write happened: work out again what is due, and when."""
        with self.wake:
            self.failed = self.collected = False
            self.wake.notify()

    def _next(self) -> tuple[float | None, Callable[[], None] | None]:
        """Seconds until the next job (None: until poked), and the job once it is due."""
        st = self.st
        reader = st.reader
        if reader is None:
            return None, None
        now = st.monotonic()
        quiet = st.called_at + REFRESH_SECONDS - now
        if not self.failed and now - st.called_at < IDLE_SECONDS:
            due = st.due_in(now, REFRESH_SECONDS * SWEEP_AHEAD)
            if due == 0:
                return 0.0, self._sweep
        else:
            due = None
        if reader.kept != self.frozen:
            return 0.0, self._freeze
        if not self.collected:
            if quiet <= 0:
                return 0.0, self._collect
            due = quiet if due is None else min(due, quiet)
        return due, None

    def _run(self) -> None:
        while True:
            with self.wake:
                while True:
                    if self.stopped:
                        return
                    wait, job = self._next()
                    if job is not None:
                        break
                    self.wake.wait(wait)
            job()

    def _sweep(self) -> None:
        with self.st.lock:
            now = self.st.monotonic()
            if self.st.due_in(now, REFRESH_SECONDS * SWEEP_AHEAD) != 0:
                return  # a call swept meanwhile
            try:
                self.st.sweep(now)
            except Exception:
                logging.getLogger(__name__).debug("sweep between calls", exc_info=True)
                self.failed = True

    def _freeze(self) -> None:
        with self.st.lock:
            kept = self.st.reader.kept if self.st.reader is not None else -1
        gc.collect(1)
        gc.freeze()
        self.frozen = kept

    def _collect(self) -> None:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.collected = True


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
    request = SearchRequest(query, limit, budget_chars)  # refused before any sweep
    with st.session() as reader:
        hits = reader.search(request)
    st.poke()
    return [h.to_json() for h in hits]


def write_context(st: McpState, changes: list[dict[str, Any]], message: str) -> dict[str, Any]:
    st.store.ws = _reread(st.ws)  # `mcp.write = "off"` set meanwhile holds from this call on
    result = st.store.write_context(changes, actor=ACTOR, message=message)
    st.dirty = True
    st.poke()
    return result.to_json()


def get_context(
    st: McpState, audience: str = "main", topic: str | None = None, budget_chars: int | None = None
) -> str:
    request = ContextRequest(audience, topic, budget_chars=budget_chars)
    with st.session() as reader:
        built = build_context(st.ws, request, st.clock(), for_name="audience", reader=reader)
    st.poke()
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


# ---------------------------------------------------------------- the server


def build_server(
    ws: Workspace, clock: Clock = wall_clock, monotonic: Callable[[], float] = time.monotonic
) -> MCPServer:
    """An `MCPServer` whose tools call the store as actor `mcp`; `clock` dates what they write
    and recall, `monotonic` times the search index's refresh."""
    st = McpState.open(ws, clock, monotonic)
    sweeper = Sweeper(st)
    st.poke = sweeper.poke

    @contextlib.asynccontextmanager
    async def sweeping(_: MCPServer) -> AsyncIterator[dict[str, Any]]:
        sweeper.start()
        try:
            yield {}
        finally:
            await anyio.to_thread.run_sync(sweeper.stop)

    server = _Server(specs(ws), sweeping)
    for fn in TOOL_FUNCTIONS:
        spec = server.specs[fn.__name__]
        server.tool(name=spec.name, description=spec.description)(_bound(fn, st))
    return server


class _Server(MCPServer):
    """An MCPServer whose tools list the specs' schemas (typed, described, bounded, no unknown
    argument) and check every call against them first, answering a refusal in one line of
    the tool's own words: `Error: <what was wrong and how to fix it>`."""

    def __init__(
        self,
        tool_specs: dict[str, ToolSpec],
        lifespan: Callable[[MCPServer], contextlib.AbstractAsyncContextManager[dict[str, Any]]],
    ) -> None:
        super().__init__(
            "crustacean",
            instructions=actor_preamble(ACTOR),
            log_level="WARNING",
            lifespan=lifespan,
        )
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
