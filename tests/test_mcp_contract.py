"""The MCP tools as a model meets them, through a real MCP client session: every parameter
typed, described and bounded, no unknown argument, one-line refusals in the tools' own words,
and results that hold what the descriptions promise."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from test_mcp import payload

from conftest import snapshot
from crustacean.llm.tools import write_spec
from crustacean.mcp_server import build_server
from crustacean.store.policy import MODES
from crustacean.workspace import Workspace

CHANGE_FIELDS = ["path", "mode", "content", "old", "new", "to", "expected_sha256"]
MCP_FIELDS = [f for f in CHANGE_FIELDS if f != "to"]  # the mcp policy allows no move


def session(ws: Workspace, *steps: tuple[str, dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The listed tools, then each call's result, in one in-process session."""

    async def main() -> tuple[list[Any], list[Any]]:
        async with Client(build_server(ws)) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool(name, args) for name, args in steps]

    return anyio.run(main)


def walk(schema: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every property schema under `schema`, with where it is."""
    out = []
    for key, prop in schema.get("properties", {}).items():
        out.append((f"{where}.{key}", prop))
        if prop.get("type") == "array":
            out += walk(prop["items"], f"{where}.{key}[]")
    return out


def test_every_schema_is_typed_described_bounded_and_closed(ws: Workspace) -> None:
    tools, _ = session(ws)
    names = [t.name for t in tools]
    assert names == [
        "list_context_files",
        "read_context_file",
        "search_memory",
        "write_context",
        "get_context",
    ]
    for tool in tools:
        schema = tool.input_schema
        assert tool.description and len(tool.description) > 80, tool.name
        assert "anyOf" not in json.dumps(schema) and "null" not in json.dumps(schema)
        assert "title" not in json.dumps(schema)  # pydantic's noise
        assert schema["additionalProperties"] is False, tool.name
        for where, prop in walk(schema, tool.name):
            assert prop.get("type") in ("string", "integer", "array", "object"), where
            assert len(prop.get("description", "")) > 10, where
            if prop["type"] == "integer":
                assert prop["minimum"] >= 1, where
            if prop["type"] == "object":
                assert prop["additionalProperties"] is False, where
    by_name = {t.name: t for t in tools}
    assert by_name["list_context_files"].input_schema["properties"]["limit"]["maximum"] == 100
    search = by_name["search_memory"].input_schema["properties"]
    assert (search["limit"]["maximum"], search["budget_chars"]["maximum"]) == (50, 50_000)
    ctx = by_name["get_context"].input_schema["properties"]
    assert set(ctx) == {"audience", "topic", "budget_chars"} and "pattern" in ctx["audience"]


def test_write_context_says_what_each_mode_needs(ws: Workspace) -> None:
    tools, _ = session(ws)
    write = next(t for t in tools if t.name == "write_context")
    changes = write.input_schema["properties"]["changes"]
    item = changes["items"]
    assert list(item["properties"]) == MCP_FIELDS
    assert item["required"] == ["path", "mode"] and item["additionalProperties"] is False
    mode = item["properties"]["mode"]
    assert mode["enum"] == ["create", "append", "edit"]  # the modes the mcp policy allows
    for needs in ("create (a new file; needs content)", "needs old and new"):
        assert needs in mode["description"]
    props = item["properties"]
    assert props["content"]["description"].startswith("For create and append: ")
    assert props["old"]["description"].startswith("For edit: ")
    assert props["expected_sha256"]["pattern"] == "^[0-9a-fA-F]{64}$"
    assert props["expected_sha256"]["description"].startswith("For append and edit: ")
    assert changes["minItems"] == 1 and write.input_schema["required"] == ["changes", "message"]


def test_every_mode_and_field_of_the_full_write_spec_is_described() -> None:
    item = write_spec(MODES).input_schema["properties"]["changes"]["items"]
    assert list(item["properties"]) == CHANGE_FIELDS
    mode = item["properties"]["mode"]["description"]
    for name in MODES:
        assert f"{name} (" in mode
    assert "move (to the path `to`; needs to)" in mode
    assert item["properties"]["to"]["description"].startswith("For move: ")


@pytest.mark.parametrize(
    ("name", "args", "line"),
    [
        (
            "list_context_files",
            {"prefix": "memory/", "folder": "notes"},
            "Error: list_context_files has no argument 'folder'; it takes prefix, limit, cursor.",
        ),
        (
            "list_context_files",
            {"cursor": "memory/notes/zz.md"},
            "Error: cursor is not a next_cursor list_context_files returned; pass one back as "
            "it came, or leave cursor out for the first page.",
        ),
        ("list_context_files", {"limit": 0}, "Error: limit must be from 1 to 100, not 0."),
        ("list_context_files", {"limit": "10"}, "Error: limit must be an integer, not str."),
        ("read_context_file", {}, "Error: path is required."),
        (
            "write_context",
            {"message": "m", "changes": [{"path": "memory/notes/a.md", "mode": "make"}]},
            "Error: changes[0].mode must be one of create, append, edit, not 'make'.",
        ),
        (
            "write_context",
            {"message": "m", "changes": [{"path": "a.md", "mode": "create", "text": "x"}]},
            "Error: changes[0] has no argument 'text'; it takes path, mode, content, old, new, "
            "expected_sha256.",
        ),
        (
            "get_context",
            {"audience": "everyone"},
            "Error: audience 'everyone' is not valid: Who the context is for: main (the direct "
            "chat with your human, the default), dm:NAME (a person), group:NAME (a group) or "
            "cron.",
        ),
        ("get_context", {"audience": "dm: "}, "Error: unknown audience 'dm: '; use one of: main, "),
        ("nope", {}, "Error: unknown tool 'nope'; tools: list_context_files, "),
    ],
)
def test_a_bad_call_is_refused_in_one_line_and_changes_nothing(
    ws: Workspace, name: str, args: dict[str, Any], line: str
) -> None:
    before = snapshot(ws.root)
    _, (result,) = session(ws, (name, args))
    text = result.content[0].text
    assert result.is_error and "\n" not in text and text.startswith(line), text
    assert "Error executing" not in text and "pydantic" not in text and "--for" not in text
    assert snapshot(ws.root) == before


def test_a_cursor_pages_on_and_is_bound_to_its_prefix(ws: Workspace) -> None:
    for i in range(5):
        (ws.root / f"memory/notes/n{i}.md").write_text(f"# Note {i}\n\nplot {i}\n")
    _, (first,) = session(ws, ("list_context_files", {"prefix": "memory/notes/", "limit": 2}))
    cursor = payload(first)["next_cursor"]
    assert cursor and "memory/notes" not in cursor  # opaque
    _, (second, other) = session(
        ws,
        ("list_context_files", {"prefix": "memory/notes/", "limit": 2, "cursor": cursor}),
        ("list_context_files", {"prefix": "knowledge/", "cursor": cursor}),
    )
    got = [f["path"] for f in payload(first)["files"] + payload(second)["files"]]
    assert got == sorted(got) and len(set(got)) == 4
    assert other.is_error and other.content[0].text == (
        "Error: this cursor is for prefix 'memory/notes/'; pass that prefix with it, or leave "
        "cursor out to start again."
    )


def test_the_listing_holds_the_tiers_it_promises(ws: Workspace) -> None:
    (ws.root / "memory/notes/tea.md").write_text("# Tea\n\nAlice likes green tea.\n")
    (ws.root / "memory/lessons/ask.md").write_text("# Ask\n\nAsk before booking.\n")
    (ws.root / "memory/notes/pin.md").write_text("---\ntier: hot\n---\n# Pin\n\nPinned.\n")
    tools, (listed,) = session(ws, ("list_context_files", {"prefix": "memory/"}))
    assert "tier" in next(t for t in tools if t.name == "list_context_files").description
    tiers = {f["path"]: f.get("tier") for f in payload(listed)["files"]}
    assert tiers["memory/notes/tea.md"] == "warm"
    assert tiers["memory/lessons/ask.md"] == "hot"
    assert tiers["memory/notes/pin.md"] == "hot"


def test_get_context_takes_a_budget(ws: Workspace) -> None:
    for i in range(6):
        body = f"Falcon launch detail {i}. " * 40
        (ws.root / f"memory/notes/f{i}.md").write_text(f"---\ntier: hot\n---\n# F{i}\n\n{body}\n")
    _, (small, whole) = session(ws, ("get_context", {"budget_chars": 2500}), ("get_context", {}))
    assert not small.is_error and not whole.is_error
    assert len(payload(small)) <= 2500 < len(payload(whole))  # the whole output is bounded
