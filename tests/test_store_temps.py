"""A kill leaves nothing anyone can see (issue 32, item 3): a killed call's temp files are
listed by no walker, and the next write of any kind removes them."""

from __future__ import annotations

import subprocess

import pytest

from crustacean import mcp_server
from crustacean.mcp_server import McpState
from crustacean.recall.context import ContextRequest, build_context
from crustacean.recall.search import SearchRequest, find
from crustacean.tree import is_temp
from crustacean.workspace import Workspace

NOTE = "memory/notes/c31/f0.md"
TEMP = "memory/notes/c31/.f0.md.k3x9_q2a.tmp"  # atomic_write's mkstemp name for NOTE
JOURNAL_TEMP = ".crustacean/.journal.json.a1b2c3d4.tmp"
INDEX_COPY = ".crustacean/index-" + "0123456789abcdef" * 2


def killed_before_its_journal(ws: Workspace) -> None:
    """What a kill after a call's temp files and before its journal's rename leaves: the
    file's temp with the call's new bytes, the journal's temp, and a copy of git's index."""
    (ws.root / TEMP).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / TEMP).write_text("---\ntier: hot\n---\n- half of a call that never happened\n")
    (ws.root / JOURNAL_TEMP).write_text('{"call_id": "20261201T232500-abc123", "orig')
    (ws.root / INDEX_COPY).write_bytes(b"DIRC")


@pytest.mark.parametrize(
    ("name", "temp"),
    [
        (".f0.md.k3x9_q2a.tmp", True),
        (".journal.json.a1b2c3d4.tmp", True),
        ("index-" + "0" * 32, True),
        ("index-" + "0" * 32 + ".lock", True),
        ("f0.md", False),
        (".f0.md.tmp", False),  # no mkstemp part: a user's own file
        ("notes.tmp", False),
        ("index-notes.md", False),
    ],
)
def test_a_temp_name_is_the_mkstemp_name_or_a_private_index(name: str, temp: bool) -> None:
    assert is_temp(name) is temp


def test_no_one_lists_a_killed_calls_temp_file(copied_ws: Workspace) -> None:
    ws = copied_ws
    st = McpState.open(ws)
    mcp_server.write_context(
        st, [{"path": NOTE, "mode": "create", "content": "- kept fact\n"}], message="setup"
    )
    killed_before_its_journal(ws)
    listed = [f["path"] for f in mcp_server.list_context_files(st)["files"]]
    assert NOTE in listed and TEMP not in listed
    assert TEMP not in [f.path for f in st.store.list_context_files("memory/")]
    hits = find(ws, SearchRequest("half of a call that never happened"), refresh=True).hits
    assert not [h for h in hits if h.to_json().get("path") == TEMP]
    context = build_context(ws, ContextRequest("main"), st.clock()).to_markdown()
    assert "never happened" not in context


def test_the_next_mcp_write_removes_a_killed_calls_temp_files(copied_ws: Workspace) -> None:
    ws = copied_ws
    st = McpState.open(ws)
    killed_before_its_journal(ws)
    done = mcp_server.write_context(
        st, [{"path": "memory/notes/other.md", "mode": "create", "content": "- x\n"}], "next"
    )
    assert done["version"]
    for left in (TEMP, JOURNAL_TEMP, INDEX_COPY):
        assert not (ws.root / left).exists(), left
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ws.root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".tmp" not in status and "index-" not in status


def test_a_write_after_no_kill_leaves_other_temp_like_files_alone(copied_ws: Workspace) -> None:
    """Without a journal temp no call died before its journal: nothing is walked or removed
    outside the state folder (a user's own `.x.md.12345678.tmp` stays)."""
    ws = copied_ws
    st = McpState.open(ws)
    (ws.root / TEMP).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / TEMP).write_text("- an editor's own temp\n")
    mcp_server.write_context(
        st, [{"path": "memory/notes/other.md", "mode": "create", "content": "- x\n"}], "next"
    )
    assert (ws.root / TEMP).exists()
