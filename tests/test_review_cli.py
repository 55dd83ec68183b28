"""`crustacean review` from the command line: who approved is in the version; `review show`
prints a rejection's reason and the diff of any proposal."""

from __future__ import annotations

from store_helpers import git

from conftest import run_cli
from crustacean.store.write import Store
from crustacean.workspace import Workspace

SOUL_EDIT = {"path": "SOUL.md", "mode": "append", "content": "- Be kind to crabs.\n"}
NOTE_ADD = {"path": "memory/notes/crabs.md", "mode": "create", "content": "# Crabs\n"}


def propose(ws: Workspace) -> int:
    result = Store(ws).write_context(
        [SOUL_EDIT, NOTE_ADD], actor="mcp", message="curate: values", run_id="run-7"
    )
    assert result.proposal is not None
    return result.proposal


def test_an_approval_records_who_approved_in_the_version(ws: Workspace) -> None:
    pid = propose(ws)
    env = {"LOGNAME": "sam", "USER": "sam"}
    run_cli("-w", str(ws.root), "review", "approve", str(pid), env=env)
    assert (
        git(ws.root, "log", "-1", "--format=%s") == f"curate: values (proposal {pid}, approved)\n"
    )
    body = git(ws.root, "log", "-1", "--format=%b")
    assert body.startswith("Approved by sam on the command line.\n")
    assert "Crustacean-Actor: mcp" in body  # the proposer stays the version's actor


def test_review_show_prints_a_rejection_s_reason_and_the_diff(ws: Workspace) -> None:
    pid = propose(ws)
    w = ("-w", str(ws.root))
    run_cli(*w, "review", "reject", str(pid), "--reason", "SOUL.md is mine to write")
    shown = run_cli(*w, "review", "show", str(pid)).stdout
    assert f"Proposal {pid} (rejected) by mcp" in shown
    assert "Rejected: SOUL.md is mine to write\n" in shown
    assert "Diff: what it would have changed, against now\n" in shown
    assert "+- Be kind to crabs." in shown and "+# Crabs" in shown


def test_review_show_of_an_approved_one_shows_its_version(ws: Workspace) -> None:
    pid = propose(ws)
    w = ("-w", str(ws.root))
    run_cli(*w, "review", "approve", str(pid))
    version = git(ws.root, "rev-parse", "HEAD").strip()
    shown = run_cli(*w, "review", "show", str(pid)).stdout
    assert f"Diff: version {version[:12]}\n" in shown and "+- Be kind to crabs." in shown
