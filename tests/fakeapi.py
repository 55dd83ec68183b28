"""A local fake of the Anthropic Messages API, so tests drive the real `anthropic` SDK offline.

A stdlib `ThreadingHTTPServer` on 127.0.0.1 answers `POST /v1/messages` from a FIFO queue of
scripted items (messages, errors, delays, dropped connections) and records every request, so a
test can assert exactly what the SDK sent: model, system, tools, cache_control, messages, and that
no secret travelled in a body. Streaming requests get SSE frames built from the same item.

    with FakeAnthropic() as fake:
        fake.enqueue(tool_use(("read_context_file", {"path": "README.md"})), text("done"))
        client = anthropic.Anthropic(api_key="test-key", base_url=fake.url)

Relay mode (`FakeAnthropic(relay_dir=folder)`) answers from files instead of the script: each
Messages API request is written to `folder/NNN.request.json` and the answer is whatever someone
writes to `folder/NNN.response.json` (a Messages API response body; `id`, `model`, `usage` and
`stop_reason` are filled in when missing), so a person or a session can play the model. A retry
of a body already numbered gets the same number (and its answer, once written).
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "claude-haiku-5-5"
DEFAULT_USAGE: dict[str, int] = {
    "input_tokens": 100,
    "output_tokens": 20,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}
MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
BATCHES_PATH = "/v1/messages/batches"

# The error type the real API uses for each status; anything else is reported as api_error.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


@dataclass
class Recorded:
    """One request as the server saw it; header names are lower-cased, `raw` is the body text."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: str = ""


@dataclass
class ErrorItem:
    """A scripted HTTP error answer in the API's `{"type": "error", ...}` shape."""

    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The JSON body the SDK turns into an `APIStatusError` subclass."""
        return {"type": "error", "error": {"type": self.type, "message": self.message}}


@dataclass
class DropItem:
    """Close the connection without answering, which the SDK reports as `APIConnectionError`."""


@dataclass
class DelayItem:
    """Wait before answering, so a client timeout fires first."""

    seconds: float
    then: dict[str, Any] | ErrorItem | DropItem


Reply = Callable[[dict[str, Any]], dict[str, Any]]
"""A reply built from the request body it answers (a test's stand-in for a model's judgement)."""

Item = dict[str, Any] | ErrorItem | DelayItem | DropItem | Reply


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults merged under the given fields, so a test can pass just `cache_read_input_tokens`."""
    return {**DEFAULT_USAGE, **(usage or {})}


def message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str,
    usage: dict[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Any assistant message; `id` is filled when served and `model=None` echoes the request's."""
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage(usage),
    }
    if model is not None:
        item["model"] = model
    return item


def text(
    text: str,
    *,
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A plain text reply (model echoed from the request unless given)."""
    return message(
        [{"type": "text", "text": text}], stop_reason=stop_reason, usage=usage, model=model
    )


def tool_use(
    *calls: tuple[str, dict[str, Any]] | tuple[str, str, dict[str, Any]],
    text: str | None = None,
    stop_reason: str = "tool_use",
    usage: dict[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A reply calling tools: `(name, input)` or `(id, name, input)`; missing ids are numbered
    `toolu_01`, `toolu_02`, … per server when served, so they stay unique across turns."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    for call in calls:
        if len(call) == 3:
            content.append({"type": "tool_use", "id": call[0], "name": call[1], "input": call[2]})
        else:
            content.append({"type": "tool_use", "name": call[0], "input": call[1]})
    return message(content, stop_reason=stop_reason, usage=usage, model=model)


def error(
    status: int,
    type: str | None = None,
    message: str | None = None,
    *,
    retry_after_ms: int | None = 1,
    headers: dict[str, str] | None = None,
) -> ErrorItem:
    """An API error; retryable ones carry `retry-after-ms: 1` by default so SDK retries are fast
    (without it the SDK backs off ~0.5 s per attempt)."""
    err_type = type or ERROR_TYPES.get(status, "api_error")
    hdrs: dict[str, str] = {}
    if retry_after_ms is not None and (status in (408, 409, 429) or status >= 500):
        hdrs["retry-after-ms"] = str(retry_after_ms)
    hdrs.update(headers or {})
    return ErrorItem(status, err_type, message or f"fake API: {err_type}", hdrs)


def delay(seconds: float, then: dict[str, Any] | ErrorItem | DropItem) -> DelayItem:
    """Answer `then` after `seconds`; used to make client timeouts fire."""
    return DelayItem(seconds, then)


def drop() -> DropItem:
    """Close the connection without a response (a connection error for the SDK)."""
    return DropItem()


def relay_reply(reply: dict[str, Any], request_text: str = "") -> dict[str, Any]:
    """A relayed response body made whole: the fields a person writing it may leave out, with
    usage estimated at 4 characters a token so a run record shows plausible sizes."""
    content = reply.get("content") or []
    calls = any(b.get("type") == "tool_use" for b in content)
    usage = {
        "input_tokens": len(request_text) // 4,
        "output_tokens": max(1, len(json.dumps(content, ensure_ascii=False)) // 4),
    }
    full = {
        "type": "message",
        "role": "assistant",
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        **reply,
    }
    full["usage"] = _usage({**usage, **(reply.get("usage") or {})})
    return full


def prompt_of(body: dict[str, Any]) -> str:
    """The text of a request's first message: a string, or its text blocks joined."""
    first = body["messages"][0]["content"]
    return first if isinstance(first, str) else "".join(b.get("text", "") for b in first)


def find_key_leaks(fake: FakeAnthropic, key: str) -> list[str]:
    """Raw bodies of recorded requests containing `key` (plain or JSON-escaped). Headers are
    expected to carry the key; a body never should."""
    escaped = json.dumps(key)[1:-1]
    return [r.raw for r in fake.requests if key in r.raw or escaped in r.raw]


def _chunks(s: str, parts: int = 3) -> list[str]:
    """Split into a few non-empty pieces, so the SDK's delta accumulation is really exercised."""
    size = max(1, -(-len(s) // parts))
    return [s[i : i + size] for i in range(0, len(s), size)]


def _block_events(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The content_block_start payload and the deltas that rebuild `block` in the SDK."""
    kind = block.get("type")
    if kind == "text":
        deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"])]
        return {**block, "text": ""}, deltas
    if kind in ("tool_use", "server_tool_use"):
        arg_json = json.dumps(block.get("input", {})) if block.get("input") else ""
        deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(arg_json)]
        return {**block, "input": {}}, deltas
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        return {**block, "thinking": "", "signature": ""}, deltas
    return block, []


def sse_frames(msg: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream events, in the real API's order, that assemble into `msg`."""
    usage = msg["usage"]
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(msg["content"]):
        head, deltas = _block_events(block)
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": head},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": msg.get("stop_sequence")}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


@dataclass
class FakeBatch:
    """A submitted Message Batch: every request is answered from the script when it is
    created; it reads as `in_progress` until the test calls `FakeAnthropic.end_batches()`."""

    id: str
    created_at: str
    requests: list[dict[str, Any]]
    results: list[dict[str, Any]]
    ended: bool = False

    def payload(self, base_url: str) -> dict[str, Any]:
        """The `message_batch` object the API returns for create and retrieve."""
        kinds = [r["result"]["type"] for r in self.results]
        counts = {k: kinds.count(k) if self.ended else 0 for k in ("succeeded", "errored")}
        counts.update(canceled=0, expired=0, processing=0 if self.ended else len(self.results))
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": "ended" if self.ended else "in_progress",
            "request_counts": counts,
            "created_at": self.created_at,
            "expires_at": "2099-01-01T00:00:00Z",
            "ended_at": self.created_at if self.ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base_url}{BATCHES_PATH}/{self.id}/results" if self.ended else None,
        }


class _Handler(BaseHTTPRequestHandler):
    """Routes every method to the owning FakeAnthropic; HTTP/1.1 so the SDK keeps connections."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: avoid a 40 ms delayed ACK
    timeout = 10  # an idle keep-alive connection must not pin a thread forever
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.fake._track(self.connection, add=False)
        with contextlib.suppress(*_DISCONNECTS):  # the client gave up before we flushed
            super().finish()

    def handle(self) -> None:
        try:
            super().handle()
        except _DISCONNECTS:
            self.close_connection = True  # the client gave up; nothing to answer

    def do_POST(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging on stderr."""

    def send_json(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        """Write one complete JSON response."""
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def send_sse(
        self, frames: Iterator[tuple[str, dict[str, Any]]], headers: dict[str, str]
    ) -> None:
        """Write the whole event stream at once; the SDK parses it the same as a live one."""
        body = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in frames).encode()
        self._send(200, body, "text/event-stream", headers)

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    """Daemon handler threads; client disconnects are expected, not tracebacks."""

    daemon_threads = True
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FakeAnthropic:
    """The server: a context manager that starts on a free port and stops without hanging."""

    def __init__(self, relay_dir: Path | None = None, relay_poll: float = 0.2) -> None:
        self.url = ""
        self.relay_dir = relay_dir
        self.relay_poll = relay_poll
        self._relayed: dict[str, int] = {}  # request body text -> its number
        self.requests: list[Recorded] = []
        self._queue: deque[Item] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._counters = {"msg": 0, "toolu": 0, "req": 0, "msgbatch": 0}
        self.batches: dict[str, FakeBatch] = {}
        self._busy = 0.0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeAnthropic:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Bind 127.0.0.1:0 and serve from a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Wake delayed handlers, close open connections and the socket, join the thread."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def enqueue(self, *items: Item) -> None:
        """Script the next answers to `POST /v1/messages`, consumed first in, first out."""
        with self._lock:
            self._queue.extend(items)

    def messages(self) -> list[Recorded]:
        """Only the Messages API calls (not count_tokens or unknown paths)."""
        with self._lock:
            return [r for r in self.requests if r.path == MESSAGES_PATH]

    def batch_requests(self) -> list[dict[str, Any]]:
        """The `params` of every request submitted in a batch, in order."""
        with self._lock:
            return [r["params"] for b in self.batches.values() for r in b.requests]

    def end_batches(self) -> None:
        """Let every submitted batch report `ended`, with its results ready."""
        with self._lock:
            for batch in self.batches.values():
                batch.ended = True

    @property
    def busy_seconds(self) -> float:
        """Time spent answering requests (body read to answer written, scripted delays included),
        so a benchmark can subtract the server's share from a client's wall time."""
        with self._lock:
            return self._busy

    @property
    def remaining(self) -> int:
        """Scripted items not consumed yet; a test can assert a script was used up."""
        with self._lock:
            return len(self._queue)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counters[prefix] += 1
            return f"{prefix}_{self._counters[prefix]:02d}"

    def _serve(self, h: _Handler) -> None:
        """Record the request, route it, and add the time it took to `busy_seconds`."""
        start = time.perf_counter()
        try:
            self._route(h)
        finally:
            took = time.perf_counter() - start
            with self._lock:
                self._busy += took

    def _route(self, h: _Handler) -> None:
        """Record the request, then answer it by path."""
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        path = h.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in h.headers.items()}
        record = Recorded(h.command, path, headers, body if isinstance(body, dict) else {}, raw)
        with self._lock:
            self.requests.append(record)
        base = {"request-id": self._next_id("req")}
        if h.command == "POST" and path == MESSAGES_PATH:
            self._answer(h, record.body, base)
        elif h.command == "POST" and path == COUNT_TOKENS_PATH:
            h.send_json(200, {"input_tokens": len(json.dumps(record.body)) // 4}, base)
        elif h.command == "POST" and path == BATCHES_PATH:
            batch = self._create_batch(record.body)
            h.send_json(200, batch.payload(self.url), base)
        elif h.command == "GET" and path.startswith(BATCHES_PATH + "/"):
            self._batch_get(h, path[len(BATCHES_PATH) + 1 :], base)
        else:
            err = error(404, message=f"fake API: no route for {h.command} {path}")
            h.send_json(404, err.payload(), base)

    def _create_batch(self, body: dict[str, Any]) -> FakeBatch:
        """Answer every request of the batch from the script now (an unscripted one errors)."""
        requests = body.get("requests") or []
        results = [self._batch_result(r) for r in requests]
        batch = FakeBatch(self._next_id("msgbatch"), "2026-11-30T12:00:00Z", requests, results)
        with self._lock:
            self.batches[batch.id] = batch
        return batch

    def _batch_result(self, request: dict[str, Any]) -> dict[str, Any]:
        params = request.get("params") or {}
        with self._lock:
            item = self._queue.popleft() if self._queue else None
        if isinstance(item, DelayItem):
            item = item.then
        if callable(item):
            item = item(params)
        if isinstance(item, dict):
            result: dict[str, Any] = {"type": "succeeded", "message": self._complete(item, params)}
        else:
            err = item if isinstance(item, ErrorItem) else error(500, message="no scripted reply")
            result = {"type": "errored", "error": err.payload()}
        return {"custom_id": request.get("custom_id"), "result": result}

    def _batch_get(self, h: _Handler, rest: str, base: dict[str, str]) -> None:
        """`GET /v1/messages/batches/<id>` and `.../<id>/results` (JSONL, once ended)."""
        batch_id, _, tail = rest.partition("/")
        with self._lock:
            batch = self.batches.get(batch_id)
        if batch is None or tail not in ("", "results") or (tail and not batch.ended):
            err = error(404, message=f"fake API: no batch results at {rest}")
            h.send_json(404, err.payload(), base)
        elif tail == "results":
            body = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
            h._send(200, body, "application/binary", base)
        else:
            h.send_json(200, batch.payload(self.url), base)

    def _answer(self, h: _Handler, body: dict[str, Any], base: dict[str, str]) -> None:
        """Answer with the next scripted item, or a non-retryable 500 when the script ran out."""
        item: Item | None
        if self.relay_dir is not None:
            item = self._relay(body)
            if item is None:
                h.close_connection = True  # shutting down: don't answer
                return
        else:
            with self._lock:
                item = self._queue.popleft() if self._queue else None
        if item is None:
            err = error(500, message="fake API: no scripted response left", retry_after_ms=None)
            h.send_json(500, err.payload(), {**base, "x-should-retry": "false"})
            return
        if isinstance(item, DelayItem):
            if self._stopping.wait(item.seconds):
                h.close_connection = True  # shutting down: don't answer
                return
            item = item.then
        if callable(item):
            item = item(body)
        if isinstance(item, DropItem):
            h.close_connection = True
        elif isinstance(item, ErrorItem):
            h.send_json(item.status, item.payload(), {**base, **item.headers})
        else:
            msg = self._complete(item, body)
            if body.get("stream"):
                h.send_sse(sse_frames(msg), base)
            else:
                h.send_json(200, msg, base)

    def _relay(self, body: dict[str, Any]) -> dict[str, Any] | ErrorItem | None:
        """Write the request to the relay folder and wait for its response file (no deadline
        but a day-long safety net: the one answering may take minutes); None when stopping."""
        assert self.relay_dir is not None
        text = json.dumps(body, indent=1, ensure_ascii=False)
        with self._lock:
            number = self._relayed.get(text)
            if number is None:
                number = self._relayed[text] = len(self._relayed) + 1
                self.relay_dir.mkdir(parents=True, exist_ok=True)
                if (self.relay_dir / f"{number:03d}.response.json").exists():
                    return error(  # an earlier run's answer must not answer this request
                        500,
                        message=f"fake API: {self.relay_dir} already holds {number:03d}."
                        "response.json from an earlier run; relay into an empty folder",
                        retry_after_ms=None,
                    )
                temp = self.relay_dir / f".{number:03d}.request.json.tmp"
                temp.write_text(text + "\n", encoding="utf-8")
                temp.replace(self.relay_dir / f"{number:03d}.request.json")
        answer = self.relay_dir / f"{number:03d}.response.json"
        deadline = time.monotonic() + 86_400
        while time.monotonic() < deadline:
            try:
                reply = json.loads(answer.read_text(encoding="utf-8"))
            except (FileNotFoundError, ValueError):  # not written yet, or half written
                if self._stopping.wait(self.relay_poll):
                    return None
                continue
            return relay_reply(reply, text)
        return error(504, message=f"fake API: nobody wrote {answer.name} within a day")

    def _complete(self, item: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """Fill in what is only known when served: message id, echoed model, tool ids."""
        msg = copy.deepcopy(item)
        msg.setdefault("id", self._next_id("msg"))
        msg.setdefault("model", body.get("model") or DEFAULT_MODEL)
        for block in msg.get("content", []):
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = self._next_id("toolu")
        return msg
