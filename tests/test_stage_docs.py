"""Issue 34, items 3 and 12: CURATE.md agrees with the workspace it describes (the sample's own
files), and what collect writes into the daily log carries no noise."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from crustacean.ops.init import sample_files
from crustacean.stages.collect_notes import provenance

CURATE = (Path(__file__).resolve().parent.parent / "pipeline/CURATE.md").read_text("utf-8")
SAMPLE = sample_files(date(2026, 12, 1), datetime(2026, 12, 1, 9, 0, tzinfo=UTC))


def test_new_files_follow_their_neighbours_frontmatter() -> None:
    contacts = [d for p, d in SAMPLE.items() if p.startswith("memory/contacts/")]
    assert contacts and all(d.startswith(b"---\nname:") for d in contacts)
    assert "start with `name:`\n  frontmatter" in CURATE or "`name:` frontmatter" in CURATE


def test_contact_ids_follow_the_workspace() -> None:
    assert "memory/contacts/email-rui.md" in SAMPLE
    assert "(`email-rui.md`), do the same" in CURATE
    assert "If you cannot tell the channel or id" not in CURATE


def test_a_lesson_for_the_knowledge_base_may_go_there() -> None:
    garden = SAMPLE["knowledge/topics/garden-api.md"].decode()
    assert "Rules of thumb" in garden
    row = next(x for x in CURATE.splitlines() if x.startswith("| 3 |"))
    assert "`memory/lessons/`" in row and "`knowledge/`" in row


@pytest.mark.parametrize(
    ("path", "session", "want"),
    [
        # the file is the session: its id alone
        ("/h/.openclaw/agents/main/sessions/41ab.jsonl", "41ab", ""),
        # a subagent's file: the path below the source's root, never the absolute one
        (
            "/h/.claude/projects/-home-sam-code/0d80/subagents/agent-b4.jsonl",
            "0d80",
            " source=-home-sam-code/0d80/subagents/agent-b4.jsonl",
        ),
        # a file under no configured root: its name only
        ("/elsewhere/x/notes.jsonl", "s1", " source=notes.jsonl"),
    ],
)
def test_provenance_is_relative_to_the_sources_root(path: str, session: str, want: str) -> None:
    """Issue 34, item 12 (the provenance comment of a daily-log block)."""
    roots = ["/h/.openclaw/agents", "/h/.claude/projects"]
    assert provenance(path, session, roots) == want
