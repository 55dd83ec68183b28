"""One clock, end to end: a stage's clock dates what the store writes for it (issue 21)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fakeapi import tool_use
from stagekit import live, write_call

from crustacean.stages.calibrate import calibrate
from crustacean.stages.compile import compile_workspace
from crustacean.store.proposals import list_proposals
from crustacean.workspace import Workspace

# Far from the wall clock, so a date that came from it would show.
THEN = datetime(2031, 5, 17, 12, 0, tzinfo=UTC)


def test_a_stage_run_trashes_under_its_clocks_date(ws: Workspace) -> None:
    (ws.root / "memory/notes/empty.md").write_text("")
    result = compile_workspace(ws, no_model=True, clock=lambda: THEN)
    assert result.ops.trashed, result.ops
    day = ws.today(THEN).isoformat()
    assert (ws.root / f"archive/trash/{day}/memory/notes/empty.md").is_file()
    assert not (ws.root / "memory/notes/empty.md").exists()
    assert [p.name for p in (ws.root / "archive/trash").iterdir() if p.is_dir()] == [day]


def test_a_proposal_made_in_a_stage_run_is_created_at_its_clocks_time(
    ws: Workspace, fake_api: Any
) -> None:
    running, env = live(ws, fake_api)
    fake_api.enqueue(
        tool_use(write_call("SOUL.md", "append", "bolder", content="- Be bolder.\n")),
        tool_use(("finish", {"summary": "proposed"})),
    )
    result = calibrate(running, env=env, clock=lambda: THEN)
    assert result.proposals == [1], result.record.error
    (proposal,) = list_proposals(running)
    assert proposal.created == THEN.isoformat(timespec="seconds")
    assert result.record.started == THEN
