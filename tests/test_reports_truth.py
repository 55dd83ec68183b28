"""Issue 34, item 11: the digest and the audit tell the truth, from the run's own record of
operations: prunes and MEMORY.md edits counted, one `## Pipeline Health`, every item the model
gave on its own line, the lessons' notes kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fakeapi import tool_use
from stagekit import live

from crustacean.stages.calibrate import calibrate
from crustacean.stages.compile import compile_workspace
from crustacean.store.changes import sha256_hex
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
REMINDERS = "memory/reminders/admin.md"
TEXT = "# Admin\n\n## Done\n\n- [x] 2026-11-01 — Send the invoice.\n- [ ] 2026-12-20 — Taxes.\n"


def test_the_digest_counts_the_prunes_and_memory_md_edits_of_the_run(
    ws: Workspace, fake_api: Any
) -> None:
    (ws.root / REMINDERS).write_text(TEXT)
    memory = (ws.root / "MEMORY.md").read_bytes()
    line = "- [x] 2026-11-01 — Send the invoice.\n"
    prune = {
        "message": "prune a done reminder",
        "changes": [
            {"path": REMINDERS, "mode": "edit", "old": line, "new": "",
             "expected_sha256": sha256_hex(TEXT.encode())},
            {"path": f"archive/pruned/{REMINDERS}", "mode": "append", "content": line},
        ],
    }  # fmt: skip
    first = memory.decode().splitlines(keepends=True)[0]
    pointer = {
        "message": "pointer",
        "changes": [{"path": "MEMORY.md", "mode": "edit", "old": first,
                     "new": first + "\n- Admin reminders → `memory/reminders/admin.md`\n",
                     "expected_sha256": sha256_hex(memory)}],
    }  # fmt: skip
    fake_api.enqueue(
        tool_use(("write_context", prune), ("write_context", pointer)),
        tool_use(("record_digest", {"flagged": ["one", "two"]}), ("finish", {"summary": "ok"})),
    )
    w, env = live(ws, fake_api)
    result = compile_workspace(w, env=env, clock=lambda: NOW)
    assert result.record.status == "ok"
    digest = (ws.root / str(result.digest)).read_text()
    assert f"- Content pruned: 1\n- {REMINDERS} → archive/pruned/{REMINDERS}\n" in digest
    assert "- MEMORY.md: 1 change(s) by the model" in digest
    assert "## Flagged for Calibrate\n- one\n- two\n" in digest


def test_the_audit_has_one_health_heading_taken_after_the_review(
    ws: Workspace, fake_api: Any
) -> None:
    audit = {
        "meta": ["run curate at 04:00", "use the small tier for collect", "split lessons.md"],
        "lessons": {"validated": 2, "updated": 0, "notes": "two lessons say the same thing"},
    }
    fake_api.enqueue(
        tool_use(("record_audit", audit), ("finish", {"summary": "ok"})),
    )
    w, env = live(ws, fake_api)
    result = calibrate(w, env=env, clock=lambda: NOW)
    text = (ws.root / str(result.audit)).read_text()
    assert text.count("## Pipeline Health") == 1
    assert "calibrate: 1 run(s)" in text  # the snapshot includes the run it reports on
    for item in audit["meta"]:
        assert f"\n- {item}\n" in text
    assert "- Notes: two lessons say the same thing" in text
