"""`crustacean mcp` through a real MCP client, in-process and over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.mcp_server import build_server, tool_schemas
from crustacean.state import open_state
from crustacean.store.changes import sha256_hex
from crustacean.workspace import Workspace

PINNED = Path(__file__).parent / "fixtures/mcp_tools.json"


def call(ws: Workspace, *steps: tuple[str, dict[str, Any]]) -> list[Any]:
    """Run tool calls in one in-process session; return each result."""

    async def main() -> list[Any]:
        async with Client(build_server(ws)) as client:
            return [await client.call_tool(name, args) for name, args in steps]

    return anyio.run(main)


def payload(result: Any) -> Any:
    data = result.structured_content
    if isinstance(data, dict):
        return data["result"] if set(data) == {"result"} else data
    text = result.content[0].text
    try:
        return json.loads(text)
    except ValueError:
        return text


def write(*changes: dict[str, Any], message: str = "x") -> tuple[str, dict[str, Any]]:
    """A write_context tool call."""
    return ("write_context", {"message": message, "changes": list(changes)})


def versions(root: Path) -> int:
    out = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return int(out)


def test_the_tool_schemas_are_pinned(ws: Workspace) -> None:
    assert tool_schemas(ws) == json.loads(PINNED.read_text())


def test_every_tool(ws: Workspace) -> None:
    (ws.root / "memory/notes/tea.md").write_text("# Tea\nAlice likes green tea.\n")
    listed, read, found, ctx = call(
        ws,
        ("list_context_files", {"prefix": "memory/notes/"}),
        ("read_context_file", {"path": "memory/notes/tea.md"}),
        ("search_memory", {"query": "green tea", "limit": 5}),
        ("get_context", {"audience": "main", "topic": "green tea"}),
    )
    assert [f["path"] for f in payload(listed)["files"]] == ["memory/notes/tea.md"]
    got = payload(read)
    assert got["content"].startswith("# Tea") and len(got["sha256"]) == 64
    assert payload(found)[0]["path"] == "memory/notes/tea.md"
    assert "Alice likes green tea." in payload(ctx)
    with open_state(ws) as db:
        assert db.recalls_of("memory/notes/tea.md").uses >= 1  # read through MCP is a recall
    append = {"path": "memory/notes/tea.md", "mode": "append", "content": "- Also oolong.\n"}
    (wrote,) = call(ws, write({**append, "expected_sha256": got["sha256"]}, message="note"))
    assert not wrote.is_error and payload(wrote)["files"] == ["memory/notes/tea.md"]
    tea = (ws.root / "memory/notes/tea.md").read_bytes()
    assert payload(wrote)["sha256"] == {"memory/notes/tea.md": sha256_hex(tea)}


def test_refusals_are_tool_errors_and_change_nothing(ws: Workspace) -> None:
    (ws.root / "memory/notes/a.md").write_text("a\n")
    before = snapshot(ws.root)
    results = call(
        ws,
        write(
            {
                "path": "memory/notes/a.md",
                "mode": "append",
                "content": "b\n",
                "expected_sha256": "0" * 64,
            }
        ),
        write({"path": "../../etc/passwd", "mode": "create", "content": "x"}),
        write(
            {
                "path": "memory/notes/k.md",
                "mode": "create",
                "content": "key " + "sk-ant-" + "api03-" + "Q" * 40,
            }
        ),
        write({"path": "memory/2020-01-01.md", "mode": "append", "content": "old day\n"}),
        ("read_context_file", {"path": "nope.md"}),
        ("search_memory", {"query": "x", "limit": 500}),
        ("search_memory", {"query": "x", "budget_chars": 0}),
    )
    words = [
        "changed since it was read",
        "uses '..'",
        "Anthropic API key",
        "only to today's daily log",
        "does not exist",
        "limit must be",
        "budget_chars must be from 1 to 50,000, not 0.",
    ]
    for result, word in zip(results, words, strict=True):
        assert result.is_error and word in result.content[0].text, (word, result.content)
    assert "Q" * 40 not in results[2].content[0].text
    after = snapshot(ws.root)
    assert {k: v for k, v in after.items() if not k.startswith(".crustacean")} == {
        k: v for k, v in before.items() if not k.startswith(".crustacean")
    }


def test_search_memory_fills_a_budget_with_the_best_lines(ws: Workspace) -> None:
    notes = "\n".join(f"- puffin sighting {i}: " + "x" * 40 for i in range(60))
    (ws.root / "memory/notes/puffins.md").write_text(f"# Puffins\n\n{notes}\n")
    small, big, default = call(
        ws,
        ("search_memory", {"query": "puffin sighting", "budget_chars": 300}),
        ("search_memory", {"query": "puffin sighting", "budget_chars": 4000}),
        ("search_memory", {"query": "puffin sighting"}),
    )
    for result, budget in ((small, 300), (big, 4000)):
        hits = payload(result)
        assert sum(len(h["text"]) + 1 for h in hits) <= budget
    assert len(payload(small)) < len(payload(big)) and len(payload(default)) <= 10
    assert payload(big)[0]["text"].startswith("- puffin sighting")
    lines = [n for h in payload(big) for n in range(h["start_line"], h["end_line"] + 1)]
    assert len(lines) == len(set(lines))


def test_foundation_write_is_a_proposal_then_approved(ws: Workspace) -> None:
    soul = (ws.root / "SOUL.md").read_bytes()
    kinder = {"path": "SOUL.md", "mode": "append", "content": "- Be kind.\n"}
    (result,) = call(ws, write(kinder, message="kinder"))
    assert payload(result)["proposal"] == 1 and (ws.root / "SOUL.md").read_bytes() == soul
    assert payload(result)["applied"] is False
    run_cli("-w", str(ws.root), "review", "approve", "1")
    assert (ws.root / "SOUL.md").read_text().endswith("- Be kind.\n")


def test_mcp_write_off_and_ask(ws: Workspace) -> None:
    new = write({"path": "memory/notes/n.md", "mode": "create", "content": "n\n"})
    off = Workspace(ws.root, load_config(ws.root, env={}, overrides=["mcp.write=off"]))
    (r,) = call(off, new)
    assert r.is_error and "memory.write is off" in r.content[0].text
    ask = Workspace(ws.root, load_config(ws.root, env={}, overrides=["mcp.write=ask"]))
    (r,) = call(ask, new)
    assert payload(r)["proposal"] == 1 and not (ws.root / "memory/notes/n.md").exists()


def test_fifty_concurrent_appends_lose_nothing(ws: Workspace) -> None:
    from crustacean.store.write import Store

    path = "memory/notes/log.md"
    Store(ws).write_context(
        [{"path": path, "mode": "create", "content": "# Log\n"}],
        actor="user",
        message="start a log",
    )
    start = versions(ws.root)
    refused = 0

    async def main() -> None:
        async with Client(build_server(ws)) as client:

            async def one(i: int) -> None:
                nonlocal refused
                while True:
                    sha = json.loads(
                        (await client.call_tool("read_context_file", {"path": path}))
                        .content[0]
                        .text
                    )["sha256"]
                    append = {"path": path, "mode": "append", "content": f"- {i}\n"}
                    r = await client.call_tool(
                        *write({**append, "expected_sha256": sha}, message=f"entry {i}")
                    )
                    if not r.is_error:
                        return
                    assert "changed since it was read" in r.content[0].text
                    refused += 1

            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(one, i)

    anyio.run(main)
    lines = (ws.root / path).read_text().splitlines()
    assert sorted(lines[1:], key=lambda x: int(x[2:])) == [f"- {i}" for i in range(50)]
    assert versions(ws.root) - start == 50  # exactly one version per applied call
    print(f"50 appends applied, {refused} stale writes refused and retried")


def test_over_stdio_with_the_installed_command(ws: Workspace) -> None:
    exe = Path(sys.executable).parent / "crustacean"
    params = StdioServerParameters(command=str(exe), args=["-w", str(ws.root), "mcp"])

    async def main() -> tuple[list[str], Any]:
        async with Client(params) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            read = await client.call_tool("read_context_file", {"path": "MEMORY.md"})
            bad = await client.call_tool(
                *write({"path": "/etc/passwd", "mode": "create", "content": "x"})
            )
            return tools, (read, bad)

    tools, (read, bad) = anyio.run(main)
    assert tools == [
        "list_context_files",
        "read_context_file",
        "search_memory",
        "write_context",
        "get_context",
    ]
    assert "Memory Structure Map" in payload(read)["content"]
    assert bad.is_error and "is absolute" in bad.content[0].text
