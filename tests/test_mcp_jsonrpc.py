"""Malformed JSON-RPC sent to `crustacean mcp` over stdio gets an error reply (issue 32).

The SDK's stdio transport drops a line it cannot read, so the client waits for its timeout.
Through a real `crustacean mcp` child: a line that is not JSON gets -32700 with a null id, a
JSON value that is not a JSON-RPC message gets -32600 (with its id when it has one), a blank
line gets nothing, the session goes on as if nothing happened, and no file changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.workspace import Workspace

EXE = str(Path(sys.executable).parent / "crustacean")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "a-client", "version": "1.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": "list", "method": "tools/list"}


def session(ws: Workspace, lines: list[str], replies: int) -> list[dict[str, object]]:
    """The first `replies` replies of one `crustacean mcp` session fed `lines`; its input is
    closed only then (a client waits for its answers), and it must then exit cleanly."""
    proc = subprocess.Popen(
        [EXE, "-w", str(ws.root), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, proc.kill)  # a safety net only: replies are waited for
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.flush()
        got = [json.loads(proc.stdout.readline()) for _ in range(replies)]
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait()
    finally:
        watchdog.cancel()
    assert proc.returncode == 0 and rest == "", (rest, err)
    assert "Traceback" not in err, err
    return got


def error(msg_id: object, code: int) -> tuple[object, int]:
    return msg_id, code


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("this is not json", error(None, -32700)),
        ('{"jsonrpc": "2.0", "id": 4, "method": "tools/list"', error(None, -32700)),  # torn
        ('{"jsonrpc": "2.0", "id": 5}', error(5, -32600)),  # no method, result or error
        ('{"jsonrpc": "1.0", "id": "x", "method": "tools/list"}', error("x", -32600)),
        ('{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": 5}', error(6, -32600)),
        ("[1, 2]", error(None, -32600)),  # a batch of non-messages
        ('"just a string"', error(None, -32600)),
    ],
)
def test_a_malformed_line_gets_a_json_rpc_error_and_the_session_goes_on(
    ws: Workspace, line: str, expected: tuple[object, int]
) -> None:
    before = snapshot(ws.root)
    lines = [json.dumps(INITIALIZE), json.dumps(INITIALIZED), line, json.dumps(LIST)]
    replies = session(ws, lines, 3)
    assert [r["id"] for r in replies] == ["init", expected[0], "list"]
    init, bad, listed = replies
    assert "result" in init and "result" in listed
    assert bad["jsonrpc"] == "2.0" and "result" not in bad
    err = bad["error"]
    assert isinstance(err, dict) and err["code"] == expected[1]
    message = err["message"]
    assert isinstance(message, str) and "\n" not in message
    assert message.startswith("Parse error" if expected[1] == -32700 else "Invalid Request")
    assert snapshot(ws.root) == before


def test_garbage_before_the_handshake_is_answered_and_blank_lines_are_not(
    ws: Workspace,
) -> None:
    replies = session(ws, ["", "garbage", "   ", json.dumps(INITIALIZE), json.dumps(LIST)], 3)
    assert [(r["id"], "error" in r) for r in replies] == [
        (None, True),
        ("init", False),
        ("list", False),
    ]
