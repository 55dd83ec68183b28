"""`crustacean review` from the command line: who approved is in the version; `review show`
prints a rejection's reason and the diff of any proposal."""

from __future__ import annotations

import subprocess

from conftest import run_cli
from crustacean.store.write import Store
from crustacean.workspace import Workspace

SOUL_EDIT = {"path": "SOUL.md", "mode": "append", "content": "- Be kind to crabs.\n"}
NOTE_ADD = {"path": "memory/notes/crabs.md", "mode": "create", "content": "# Crabs\n"}


def propose(ws: Workspace) -> int:
    result = Store(ws).write_context(
        [SOUL_EDIT, NOTE_ADD], actor="curate", message="curate: values", run_id="run-7"
    )
    assert result.proposal is not None
    return result.proposal


def git(ws: Workspace, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ws.root, capture_output=True, text=True, check=True
    ).stdout


def test_an_approval_records_who_approved_in_the_version(ws: Workspace) -> None:
    pid = propose(ws)
    env = {"LOGNAME": "sam", "USER": "sam"}
    run_cli("-w", str(ws.root), "review", "approve", str(pid), env=env)
    assert git(ws, "log", "-1", "--format=%s") == f"curate: values (proposal {pid}, approved)\n"
    body = git(ws, "log", "-1", "--format=%b")
    assert body.startswith("Approved by sam on the command line.\n")
    assert "Crustacean-Actor: curate" in body  # the proposer stays the version's actor
