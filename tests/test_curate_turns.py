"""Issue 34, item 7: curate on the sample in at most 4 turns.

The model here is scripted (tests/fakeapi.py), doing what a real one would with the request it
is sent: it looks for an existing note first, takes each file's sha256 from what code handed it
(or from a read in that first turn), writes
every entry's content and MEMORY.md pointer in parallel calls of one turn (three of them edit
MEMORY.md with the same handed sha256: each edit's old text still occurs exactly once), reports
the routing in that turn, then finishes. A real model's run is not part of the test suite.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fakeapi import tool_use

from crustacean.config import load_config
from crustacean.ops.init import init_sample
from crustacean.stages.curate import curate, parse_entries
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
_HANDED = re.compile(r'<file path="([^"]+)" sha256="([0-9a-f]{64})">')
_ENTRY = re.compile(r"^- \[([0-9a-f]{12})\] \S+ · [^·]+ · (.*)$", re.MULTILINE)


def shas(body: dict[str, Any]) -> dict[str, str]:
    """Every sha256 the model has seen so far: handed in the prompt, or returned by a read."""
    seen: dict[str, str] = {}
    for msg in body["messages"]:
        blocks = msg["content"] if isinstance(msg["content"], list) else [msg["content"]]
        for b in blocks:
            t = b if isinstance(b, str) else b.get("text") or b.get("content") or ""
            t = t if isinstance(t, str) else json.dumps(t)
            seen |= dict(_HANDED.findall(t))
            if b is not t and isinstance(b, dict) and b.get("type") == "tool_result":
                try:
                    got = json.loads(t)
                except ValueError:
                    continue
                if isinstance(got, dict) and "sha256" in got and "path" in got:
                    seen[got["path"]] = got["sha256"]
    return seen


def entries(body: dict[str, Any]) -> dict[str, str]:
    first = body["messages"][0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    return {t: i for i, t in _ENTRY.findall(text)}


def look_before_creating(body: dict[str, Any]) -> dict[str, Any]:
    """What a careful model does first: read what it was not handed, and check that no note on
    rates exists before it creates one."""
    want = ("memory/goals/garden-api-v1.md", "knowledge/topics/garden-api.md")
    reads = [("read_context_file", {"path": p}) for p in want if p not in shas(body)]
    return tool_use(*reads, ("list_context_files", {"prefix": "memory/notes/"}))


def write_everything(body: dict[str, Any]) -> dict[str, Any]:
    sha, ids = shas(body), entries(body)
    soon = (NOW + timedelta(days=6)).date().isoformat()

    def mem(old: str, new: str) -> dict[str, Any]:
        return {"path": "MEMORY.md", "mode": "edit", "old": old, "new": new,
                "expected_sha256": sha["MEMORY.md"]}  # fmt: skip

    def call(message: str, *changes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return ("write_context", {"message": message, "changes": list(changes)})

    def of(start: str) -> str:
        return next(i for t, i in ids.items() if t.startswith(start))

    calls = [
        call(
            "Portuguese class moves to Wednesdays",
            {"path": "memory/reminders/personal.md", "mode": "create",
             "content": "# Personal reminders\n\nSam's own appointments and classes.\n\n"
             f"- [ ] {soon} — Portuguese class moves to Wednesdays at 19:00, with Dona Lurdes "
             "(daily log).\n"},
            mem("with one class a week.", "with one class a week (Wednesdays 19:00 from next "
                "week). → `memory/reminders/personal.md`"),
        ),
        call(
            "tool loans: 3 days at most",
            {"path": "knowledge/topics/garden-api.md", "mode": "append",
             "content": "\n- A tool loan lasts at most 3 days; only the strimmer and the "
             "wheelbarrows need booking.\n",
             "expected_sha256": sha["knowledge/topics/garden-api.md"]},
            mem("to be demoed at the\n  next co-op meeting.", "to be demoed at the\n  next "
                "co-op meeting; tool loans last 3 days at most."),
        ),
        call(
            "member spreadsheet",
            {"path": "memory/goals/garden-api-v1.md", "mode": "append",
             "content": "\n- Member spreadsheet: 118 households, 31 on the waitlist; clean the "
             "phone numbers (country codes) before the import.\n",
             "expected_sha256": sha["memory/goals/garden-api-v1.md"]},
        ),
        call(
            "day rate and retainer",
            {"path": "memory/notes/rates.md", "mode": "create",
             "content": "# Rates\n\nWhat Sam charges.\n\n- New clients: €420 a day from next "
             "month; the co-op keeps its agreed price (daily log).\n- Idea: a small yearly "
             "maintenance retainer for the co-op once v1 ships.\n- Flashcards from the "
             "Portuguese words he used in the week: wanted (daily log).\n"},
            mem("25 % of every invoice is set aside for taxes.", "25 % of every invoice is "
                "set aside for taxes. Rates: `memory/notes/rates.md`."),
        ),
    ]  # fmt: skip
    routes = {
        "[reminder] From next week": "memory/reminders/personal.md",
        "[decision] A tool loan": "knowledge/topics/garden-api.md",
        "[project] Ana sent": "memory/goals/garden-api-v1.md",
        "[todo] Clean up": "memory/goals/garden-api-v1.md",
        "[decision] New clients": "memory/notes/rates.md",
        "[idea] Offer the co-op": "memory/notes/rates.md",
        "[preference] Sam wants": "memory/notes/rates.md",
        "[joke] Sam says": "skip",
    }
    report = [{"id": of(s), "destination": d, "reason": "scripted"} for s, d in routes.items()]
    return tool_use(*calls, ("record_routing", {"entries": report}))


def test_curate_on_the_sample_takes_at_most_4_turns(tmp_path: Path, fake_api: Any) -> None:
    root = tmp_path / "sample"
    init_sample(root, NOW)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_api.url}
    ws = Workspace(root, load_config(root, env=env, overrides=["llm.max_retries=0"]))
    fake_api.enqueue(
        look_before_creating, write_everything, tool_use(("finish", {"summary": "ok"}))
    )
    result = curate(ws, env=env, clock=lambda: NOW)
    rec = result.record
    assert rec.status == "ok" and rec.turns <= 4, (rec.turns, rec.summary)
    replies = fake_api.messages()[2].body["messages"][-1]["content"]
    assert [r["is_error"] for r in replies if r["type"] == "tool_result"] == [False] * 5
    memory = (root / "MEMORY.md").read_text()
    assert "Wednesdays 19:00" in memory and "3 days at most" in memory and "rates.md" in memory
    day = (NOW - timedelta(days=2)).date().isoformat()
    total = len(parse_entries(day, (root / f"memory/{day}.md").read_text()))
    assert result.entries == total == 8 and result.unreported == 0
    assert sum(result.routed.values()) == 7 and result.skipped == {"scripted": 1}
