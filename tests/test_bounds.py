"""Every read surface is bounded: the Claude Code hook under 10,000 characters, context and the
MCP tools within their config keys, on `init --sample` and on 10,000 memories (real CLI, real
MCP sessions)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from test_mcp import call as session

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.mcp_server import build_server
from crustacean.recall.context import loadable, not_loaded_summary
from crustacean.workspace import Workspace

CLAUDE_CODE_CAP = 10_000  # Claude Code saves a longer hook output to a file (since v2.1.89)
TOPIC = "garden budget meeting"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """10,000 memories and 3 years of daily logs (bench/generate.py), built once."""
    from bench.generate import generate_workspace

    tmp = tmp_path_factory.mktemp("big")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp / "home"))  # init's source detection looks at HOME
        (tmp / "home").mkdir()
        generate_workspace(tmp / "ws", 10_000)
    (tmp / "ws/memory/notes/huge.md").write_text("# Huge\n\n" + "- a line of notes\n" * 300_000)
    yield Workspace(tmp / "ws", load_config(tmp / "ws"))


def text_of(result: Any) -> str:
    """What the model reads of a tool result."""
    return "".join(getattr(c, "text", "") for c in result.content)


def hook(*args: str) -> tuple[str, str]:
    out = run_cli(*args, "context", "--format", "claude-hook").stdout.strip()
    return out, json.loads(out)["hookSpecificOutput"]["additionalContext"]


# ---------------------------------------------------------------- the Claude Code hook


def test_the_hook_fits_claude_code_on_the_sample(tmp_path: Path) -> None:
    root = tmp_path / "sample"
    run_cli("init", "--sample", str(root))
    full = run_cli("-w", str(root), "context").stdout
    assert len(full) > CLAUDE_CODE_CAP  # the case the issue found: 12,955 characters
    out, md = hook("-w", str(root))
    assert len(out) <= 9500 < CLAUDE_CODE_CAP
    memory = loadable((root / "MEMORY.md").read_text())
    assert memory.strip() in md  # MEMORY.md whole, without its template comments
    assert "<!--" not in md and "-->" not in md
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    assert heads[:4] == ["### MEMORY.md", "### SOUL.md", "### IDENTITY.md", "### USER.md"]
    assert md.rstrip().endswith("or `crustacean search WORDS` in a shell.")
    assert "This context is not your whole memory. Not loaded: memory/lessons/" in md
    out, md = hook("-w", str(root), "-c", "context.hook_chars=4000")  # a config key
    assert len(out) <= 4000
    assert "over context.hook_chars 4000" in md or "cut to fit context.hook_chars 4000" in md


def test_the_hook_with_memory_md_at_its_caps(tmp_path: Path) -> None:
    """MEMORY.md at memory.working_chars (12,000) cannot fit 9,500: its head loads, cut at a
    line, after room for who the agent and the user are; the rest is named."""
    root = tmp_path / "sample"
    run_cli("init", "--sample", str(root))
    sample = (root / "MEMORY.md").read_text()
    item = "- **Plot 17:** rebooked for Saturday 09:00. → `memory/notes/plots.md`\n"
    text, n = sample, 2
    while len(text) < 11_400:
        text += f"\n## Project log {n}\n\n" + item * 8
        n += 1
    (root / "MEMORY.md").write_text(text)
    assert 11_400 <= len(text) <= 12_000 and text.count("\n") < 500
    out, md = hook("-w", str(root))
    assert len(out) <= 9500
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    assert heads[:4] == ["### MEMORY.md", "### SOUL.md", "### IDENTITY.md", "### USER.md"]
    for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
        assert loadable((root / name).read_text()).strip() in md  # whole
    head = md.split("### MEMORY.md\n\n", 1)[1].split("\n\n[… cut to fit", 1)[0]
    assert len(head) > 3000 and loadable(text).startswith(head)  # its head, ended at a line
    assert "[… cut to fit; the rest: read_context_file MEMORY.md]" in md
    assert "MEMORY.md (cut to fit context.hook_chars 9500)" in md
    assert md.rstrip().endswith("or `crustacean search WORDS` in a shell.")


def test_a_failing_hook_does_not_block_claude_code(tmp_path: Path) -> None:
    """Claude Code reads exit 2 from a hook as a blocking error; a hook that cannot load memory
    exits 1 (a plain failure) with its one line on stderr, while `context` keeps exit 2."""
    missing = str(tmp_path / "nowhere")
    res = run_cli("-w", missing, "context", "--format", "claude-hook", code=1)
    assert res.stdout == ""
    assert res.stderr.startswith("Error: --workspace names ") and res.stderr.count("\n") == 1
    run_cli("-w", missing, "context", code=2)


def test_the_hook_fits_on_10000_memories(big: Workspace) -> None:
    for extra in ((), ("--topic", TOPIC)):
        out = run_cli(
            "-w", str(big.root), "context", "--format", "claude-hook", *extra
        ).stdout.strip()
        md = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert len(out) < CLAUDE_CODE_CAP, extra
        assert "search_memory" in md.splitlines()[-1] and "crustacean search" in md


def test_the_hook_with_nothing_to_cut_is_the_whole_context(ws: Workspace) -> None:
    _, md = hook("-w", str(ws.root))
    assert md.rstrip("\n") == run_cli("-w", str(ws.root), "context").stdout.rstrip("\n")
    assert "This context is not your whole memory" not in md


# ---------------------------------------------------------------- context and get_context


def test_context_on_10000_memories_stays_within_its_budgets(big: Workspace) -> None:
    s = big.settings
    ceiling = s.context.foundation_chars + s.memory.budget_chars + 5_000  # + headings, list
    md = run_cli("-w", str(big.root), "context", "--topic", TOPIC).stdout
    assert len(md) < ceiling
    assert "This context is not your whole memory. Not loaded: " in md
    assert "more in" in md or "…" in md  # counted, not listed one by one
    data = json.loads(
        run_cli("-w", str(big.root), "context", "--format", "json", "--topic", TOPIC).stdout
    )
    assert data["not_loaded_count"] > len(data["not_loaded"])
    assert len(json.dumps(data)) < ceiling + 20_000


def test_not_loaded_summary_counts_per_folder() -> None:
    cut = [(f"memory/notes/n{i}.md", "over memory.max_entries 50") for i in range(1000)]
    cut += [(f"knowledge/t{i}.md", "over memory.budget_chars 20000") for i in range(3)]
    cut += [("SOUL.md", "over context.foundation_chars 100")]
    cut += [(f"memory/f{i}/x.md", "over memory.max_entries 50") for i in range(20)]
    text = not_loaded_summary(cut, 2)
    assert text.startswith("memory/notes/ (1,000 over memory.max_entries 50: n0.md, n1.md, …)")
    assert "knowledge/ (3 over memory.budget_chars 20000: t0.md, t1.md, …)" in text
    assert "SOUL.md (over context.foundation_chars 100)" in text
    assert text.endswith("other folders") and len(text) < 1200


def test_get_context_honours_the_context_budgets(big: Workspace) -> None:
    (main, topic) = session(
        big, ("get_context", {"audience": "main"}), ("get_context", {"topic": TOPIC})
    )
    s = big.settings
    ceiling = s.context.foundation_chars + s.memory.budget_chars + 5_000
    for result in (main, topic):
        assert not result.is_error and len(text_of(result)) < ceiling
    assert text_of(topic).rstrip("\n") == run_cli(
        "-w", str(big.root), "context", "--topic", TOPIC
    ).stdout.rstrip("\n")


# ---------------------------------------------------------------- the other MCP tools


def test_each_mcp_tool_is_bounded_on_10000_memories(big: Workspace) -> None:
    first, second, search, read, part, small = session(
        big,
        ("list_context_files", {}),
        ("list_context_files", {"limit": 50, "prefix": "memory/notes/"}),
        ("search_memory", {"query": TOPIC, "limit": 50}),
        ("read_context_file", {"path": "memory/notes/huge.md"}),
        ("read_context_file", {"path": "memory/notes/huge.md", "start_line": 3, "end_line": 500}),
        ("read_context_file", {"path": "MEMORY.md"}),
    )
    page = json.loads(text_of(first))
    assert len(page["files"]) == 100 and page["total"] > 11_000 and page["next_cursor"]
    assert len(text_of(first)) < 20_000
    page2 = json.loads(text_of(second))
    assert len(page2["files"]) == 50
    assert all(f["path"].startswith("memory/notes/") for f in page2["files"])
    assert len(text_of(search)) < 40_000
    assert read.is_error
    refusal = text_of(read)
    assert "memory/notes/huge.md is 5,400,008 characters (300,002 lines in all)" in refusal
    assert "over context.read_chars 60,000" in refusal and "start_line" in refusal
    got = json.loads(text_of(part))
    assert got["start_line"] == 3 and got["end_line"] == 500 and got["lines"] == 300_002
    assert got["content"] == "- a line of notes\n" * 498 and len(got["sha256"]) == 64
    assert not small.is_error and len(text_of(small)) < 60_000
    largest = max(len(text_of(r)) for r in (first, second, search, read, part, small))
    print(f"largest MCP reply on 10,000 memories: {largest:,} characters")


def test_a_cursor_walks_every_file_once(ws: Workspace) -> None:
    for i in range(25):
        (ws.root / f"memory/notes/n{i:02d}.md").write_text(f"# n{i}\n")
    seen: list[str] = []
    cursor = None

    async def walk() -> None:
        nonlocal cursor
        async with Client(build_server(ws)) as client:
            while True:
                args: dict[str, Any] = {"prefix": "memory/notes/", "limit": 7}
                if cursor:
                    args["cursor"] = cursor
                page = json.loads(text_of(await client.call_tool("list_context_files", args)))
                seen.extend(f["path"] for f in page["files"])
                cursor = page["next_cursor"]
                if cursor is None:
                    return

    anyio.run(walk)
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 25


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("list_context_files", {"limit": 0}, "Error: limit must be from 1 to 100, not 0."),
        ("list_context_files", {"limit": 101}, "Error: limit must be from 1 to 100, not 101."),
        ("read_context_file", {"start_line": 0}, "start_line must be at least 1, not 0."),
        (
            "read_context_file",
            {"start_line": 5, "end_line": 2},
            "end_line 2 is before start_line 5.",
        ),
        ("read_context_file", {"start_line": 999}, "start_line 999 is past its end."),
    ],
)
def test_bad_list_arguments_and_line_ranges_are_tool_errors(
    ws: Workspace, tool: str, args: dict[str, Any], message: str
) -> None:
    before = snapshot(ws.root)
    if tool == "read_context_file":
        args = {"path": "MEMORY.md", **args}
    (result,) = session(ws, (tool, args))
    assert result.is_error and message in text_of(result)
    assert snapshot(ws.root) == before


def test_the_stages_tools_share_the_bounds(ws: Workspace) -> None:
    from crustacean.llm.tools import ToolExecutor
    from crustacean.store.write import Store

    (ws.root / "memory/notes/huge.md").write_text("- x\n" * 40_000)
    tools = ToolExecutor(Store(ws), "curate", "run-1")
    refused = tools.call("read_context_file", {"path": "memory/notes/huge.md"})
    assert refused.is_error and "over context.read_chars" in refused.text
    ok = tools.call("read_context_file", {"path": "memory/notes/huge.md", "end_line": 10})
    assert json.loads(ok.text)["content"] == "- x\n" * 10
    listed = json.loads(tools.call("list_context_files", {"limit": 3}).text)
    assert len(listed["files"]) == 3 and listed["next_cursor"]
    assert os.environ["HOME"] != str(ws.root)
