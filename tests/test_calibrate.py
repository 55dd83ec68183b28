"""`crustacean calibrate` end to end through the fake API: health, proposal, archived lesson."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakeapi import tool_use
from stagekit import live, write_call

from conftest import run_cli, snapshot
from crustacean.runs import RunRecorder
from crustacean.stages.calibrate import calibrate
from crustacean.store.changes import sha256_hex
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
KEY = "test-key"


def history(ws: Workspace) -> None:
    """A month of runs with gaps and a failure: collect on some days, curate failed once."""
    for day in range(1, 30, 3):
        at = datetime(2026, 11, day, 10, 0, tzinfo=UTC)
        with RunRecorder(ws, "collect", clock=lambda at=at: at) as rec:
            rec.finish("ok", summary="collected")
    at = datetime(2026, 11, 20, 3, 30, tzinfo=UTC)
    with RunRecorder(ws, "curate", clock=lambda: at) as rec:
        rec.finish("failed", error="ModelError: the API was overloaded (529)")


@pytest.fixture
def setup(ws: Workspace, fake_api: Any) -> dict[str, Any]:
    root = ws.root
    (root / "MEMORY.md").write_text(
        (root / "MEMORY.md").read_text() + "".join(f"- hot item {i}\n" for i in range(520))
    )
    (root / "memory/lessons/old-rule.md").write_text(
        "---\nname: old-rule\nrecorded: 2025-01-10\n---\nAlways use the v1 API.\n"
    )
    (root / "memory/lessons/current.md").write_text(
        "---\nname: current\nrecorded: 2026-11-10\n---\nUse the v2 API.\n"
    )
    (root / "memory/projects-extra").mkdir()
    (root / "memory/projects-extra/x.md").write_text("# orphan folder\n")
    history(ws)
    running, env = live(ws, fake_api, key=KEY)
    return {"ws": running, "env": env, "fake": fake_api}


def test_end_to_end_report_proposal_and_archived_lesson(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    soul = (root / "SOUL.md").read_bytes()
    fake.enqueue(
        tool_use(("read_context_file", {"path": "SOUL.md"})),
        tool_use(
            write_call(
                "SOUL.md",
                "append",
                "SOUL: name the v2 preference",
                content="- I prefer current APIs.\n",
                expected_sha256=sha256_hex(soul),
            ),
            write_call(
                "memory/lessons/old-rule.md",
                "move",
                "retire an outdated lesson",
                to="archive/lessons/old-rule.md",
            ),
            write_call("memory/notes/x.md", "create", "sneaky", content="nope"),
        ),
        tool_use(
            (
                "record_audit",
                {
                    "foundation": {
                        "SOUL.md": "Proposed a line on current APIs",
                        "USER.md": "No changes",
                    },
                    "pipeline": {
                        "Collect": "runs missed on most days",
                        "Curate": "one 529 failure",
                    },
                    "lessons": {"validated": 1, "updated": 0},
                    "meta": ["run collect from tick so missed slots catch up"],
                    "human_review": ["MEMORY.md is over its cap; let compile move sections"],
                },
            ),
            ("finish", {"summary": "audited"}),
        ),
    )
    result = calibrate(s["ws"], env=s["env"], clock=lambda: NOW)
    assert result.record.status == "ok", result.record.error
    assert result.proposals == [1] and result.archived_lessons == ["memory/lessons/old-rule.md"]
    assert (root / "SOUL.md").read_bytes() == soul
    assert (root / "archive/lessons/old-rule.md").is_file()
    assert not (root / "memory/notes/x.md").exists()
    reply = fake.messages()[2].body["messages"][-1]["content"]
    assert (
        reply[2]["is_error"] and "calibrate may not write memory/notes/x.md" in reply[2]["content"]
    )

    audit = (root / "archive/audits/2026-12-calibrate.md").read_text()
    assert audit.startswith("# Monthly Calibrate — December 2026\n\n## Foundation Files\n")
    assert "- [ ] SOUL.md — Proposed a line on current APIs (proposal 1)" in audit
    assert "- [x] USER.md — No changes" in audit
    assert "cadence" in audit and "missed" in audit
    assert "memory_md" in audit and "fail" in audit
    assert "memory/projects-extra" in audit  # the orphan
    assert "- Archived: 1" in audit and "memory/lessons/old-rule.md → archive/lessons/" in audit
    assert "`crustacean review show 1`" in audit
    assert "run collect from tick" in audit and "MEMORY.md is over its cap" in audit

    w = ("-w", str(root))
    assert "SOUL.md" in run_cli(*w, "review").stdout
    approved = run_cli(*w, "review", "approve", "1").stdout
    assert "Approved proposal 1" in approved
    assert (root / "SOUL.md").read_text().endswith("- I prefer current APIs.\n")


def test_stale_approval_keeps_the_proposal(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    fake.enqueue(
        tool_use(write_call("IDENTITY.md", "append", "identity", content="- Name: Pinch\n")),
        tool_use(("finish", {"summary": "x"})),
    )
    calibrate(s["ws"], env=s["env"], clock=lambda: NOW)
    (root / "IDENTITY.md").write_text((root / "IDENTITY.md").read_text() + "- my own edit\n")
    before = snapshot(root)
    result = run_cli("-w", str(root), "review", "approve", "1", code=1)
    assert "Error: proposal 1 is stale" in result.stderr
    assert snapshot(root) == before
    assert "IDENTITY.md" in run_cli("-w", str(root), "review").stdout


def test_a_new_workspace_gets_a_useful_report(ws: Workspace, fake_api: Any) -> None:
    running, env = live(ws, fake_api, key=KEY)
    fake_api.enqueue(tool_use(("finish", {"summary": "nothing to say"})))
    result = calibrate(running, env=env, clock=lambda: NOW)
    audit = (ws.root / result.audit).read_text()
    assert audit.count("## Pipeline Health") == 1  # issue 34, item 11: one heading
    assert "calibrate: 1 run(s)" in audit  # the check ran after the review: its own run counts
    assert "## Human Review Needed\n- nothing" in audit


def test_cli_health_and_calibrate(setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    w = ("-w", str(root))
    health = run_cli(*w, "health", code=1)  # MEMORY.md over its cap is a failure
    assert "memory_md" in health.stdout and "fail" in health.stdout
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.enqueue(tool_use(("finish", {"summary": "ok"})))
    out = run_cli(*w, "calibrate").stdout
    assert "Audit: archive/audits/" in out
    audits = list(Path(root / "archive/audits").glob("*-calibrate.md"))
    assert len(audits) == 1 and Store(s["ws"]).read_bytes(f"archive/audits/{audits[0].name}")
