"""`crustacean curate` end to end through the fake API: routing a 3-day daily log."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fakeapi import text, tool_use
from stagekit import write_call
from store_helpers import commit_all, git

from conftest import run_cli, stages_at
from crustacean.config import load_config
from crustacean.errors import LimitError
from crustacean.stages.curate import curate, parse_entries
from crustacean.store.changes import sha256_hex
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = "test-key"
ALICE = "memory/contacts/telegram-alice.md"
DAYS = {
    "2026-11-28": "# 2026-11-28\n\n### [09:10] bakery chat\n"
    "<!-- collect run=r1 session=s1 source=x -->\n\n"
    "- [person] Alice became head baker at the bakery.\n- [preference] Alice prefers green tea.\n",
    "2026-11-29": "# 2026-11-29\n\n### [14:00] debugging cron\n\n"
    "- [fact] Sourdough starter needs feeding every 12 hours at room temperature.\n"
    "- Turns out the cron job needs absolute paths; relative ones silently fail.\n",
    "2026-11-30": "# 2026-11-30\n\n### [08:30] errands\n\n"
    "- [reminder] Call Ana about the lease on Friday 2026-12-04.\n- [joke] The crab logo again.\n",
}


def clock() -> datetime:
    return NOW


@pytest.fixture
def setup(ws: Workspace, fake_api: Any) -> dict[str, Any]:
    for day, body in DAYS.items():
        (ws.root / f"memory/{day}.md").write_text(body)
    contact = ws.root / "memory/contacts/telegram-alice.md"
    contact.write_text("---\nname: Alice\n---\n# Alice\n\n- Works at the bakery.\n")
    commit_all(ws.root, "my logs")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_api.url}
    live = Workspace(ws.root, load_config(ws.root, env=env, overrides=["llm.max_retries=0"]))
    ids = {e.text: e.id for day, body in DAYS.items() for e in parse_entries(day, body)}
    return {"ws": live, "env": env, "fake": fake_api, "ids": ids}


def ids_of(s: dict[str, Any], *starts: str) -> list[str]:
    return [i for t, i in s["ids"].items() if t.startswith(starts)]


def routing(s: dict[str, Any], mapping: dict[str, str]) -> tuple[str, dict[str, Any]]:
    return (
        "record_routing",
        {
            "entries": [
                {"id": i, "destination": dest, "reason": "scripted"}
                for start, dest in mapping.items()
                for i in ids_of(s, start)
            ]
        },
    )


def test_routes_a_three_day_log_and_never_twice(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    contact = (root / "memory/contacts/telegram-alice.md").read_bytes()
    fake.enqueue(
        tool_use(
            ("read_context_file", {"path": "memory/README.md"}),
            ("read_context_file", {"path": "memory/contacts/telegram-alice.md"}),
        ),
        tool_use(
            (
                "write_context",
                {
                    "message": "route 3 days",
                    "changes": [
                        {
                            "path": "memory/contacts/telegram-alice.md",
                            "mode": "edit",
                            "old": "- Works at the bakery.\n",
                            "new": "- Works at the bakery; head baker since 2026-11-28.\n"
                            "- Prefers green tea (2026-11-28).\n",
                            "expected_sha256": sha256_hex(contact),
                        },
                        {
                            "path": "memory/lessons/lessons.md",
                            "mode": "create",
                            "content": "# Lessons\n\n## Cron needs absolute paths\n"
                            "**Learned:** 2026-11-29 "
                            "(daily log)\n**Context:** a cron job failed silently.\n**Rule:** use "
                            "absolute paths in cron entries.\n",
                        },
                        {
                            "path": "memory/reminders/ana-lease.md",
                            "mode": "create",
                            "content": "# Call Ana about the lease\n- Due 2026-12-04.\n",
                        },
                        {
                            "path": "knowledge/topics/sourdough.md",
                            "mode": "create",
                            "content": "# Sourdough\n- A starter needs feeding every 12 hours "
                            "at room "
                            "temperature.\n",
                        },
                    ],
                },
            ),
            routing(
                s,
                {
                    "[person]": "memory/contacts/telegram-alice.md",
                    "[preference]": "memory/contacts/telegram-alice.md",
                    "Turns out": "memory/lessons/lessons.md",
                    "[reminder]": "memory/reminders/ana-lease.md",
                    "[fact]": "knowledge/topics/sourdough.md",
                    "[joke]": "skip",
                },
            ),
        ),
        tool_use(
            write_call(ALICE, "append", "again", content="- Prefers   green tea (2026-11-28).\n"),
            write_call("SOUL.md", "append", "soul", content="- Bake bread.\n"),
            write_call("memory/2026-11-28.md", "delete", "tidy"),
        ),
        tool_use(("finish", {"summary": "Routed 5, skipped 1."})),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    rec = result.record
    assert rec.status == "ok" and rec.turns == 4 and rec.proposals == []
    alice = (root / "memory/contacts/telegram-alice.md").read_text()
    assert alice.count("green tea") == 1 and "head baker" in alice and alice.count("# Alice") == 1
    assert "Cron needs absolute paths" in (root / "memory/lessons/lessons.md").read_text()
    assert (root / "memory/reminders/ana-lease.md").is_file()
    assert (root / "knowledge/topics/sourdough.md").is_file()
    assert (root / "memory/2026-11-28.md").read_text() == DAYS["2026-11-28"]
    replies = fake.messages()[3].body["messages"][-1]["content"]
    assert "already there" in replies[0]["content"]
    # curate may not propose foundation changes, and is never offered delete: both refused whole
    assert replies[1]["is_error"] and "curate never changes SOUL.md" in replies[1]["content"]
    assert replies[2]["is_error"] and "not offered mode 'delete'" in replies[2]["content"]
    assert "nothing of this call was applied" in replies[2]["content"]
    index = (root / "memory/README.md").read_text()
    assert "  - `lessons.md` — Lessons" in index and "  - `ana-lease.md` — Call Ana" in index
    assert index.index("`lessons.md`") > index.index("- `lessons/`")
    assert "  - `sourdough.md` — Sourdough" in (root / "knowledge/README.md").read_text()
    log = git(root, "log", "--format=%an|%s", "-3").splitlines()
    assert log[:2] == [
        "crustacean curate|curate: index new files",
        "crustacean curate|route 3 days",
    ]
    assert result.routed["memory/contacts/telegram-alice.md"] == 2
    assert result.skipped == {"scripted": 1} and result.unreported == 0
    assert "6 entries" in rec.summary

    # the cached prefix: every later request starts with the earlier one, byte for byte
    bodies = [r.body for r in fake.messages()]
    for earlier, later in itertools.pairwise(bodies):
        assert later["system"] == earlier["system"] and later["tools"] == earlier["tools"]
        assert strip(later["messages"][: len(earlier["messages"])]) == strip(earlier["messages"])
    assert bodies[0]["tools"][-1]["cache_control"] == {"type": "ephemeral"}

    again = curate(s["ws"], env=s["env"], clock=clock)
    assert again.record.status == "skipped" and len(fake.messages()) == 4


def strip(messages: list[dict[str, Any]]) -> str:
    raw = json.loads(json.dumps(messages))
    for m in raw:
        if isinstance(m["content"], list):
            for block in m["content"]:
                block.pop("cache_control", None)
        else:
            m["content"] = [{"type": "text", "text": m["content"]}]
    return json.dumps(raw, sort_keys=True)


def test_a_budget_stop_marks_only_what_was_routed(setup: dict[str, Any]) -> None:
    s, fake = setup, setup["fake"]
    ws = Workspace(
        s["ws"].root, load_config(s["ws"].root, env=s["env"], overrides=["budget.max_turns=1"])
    )
    fake.enqueue(tool_use(routing(s, {"[joke]": "skip", "[fact]": "skip"})))
    first = curate(ws, env=s["env"], clock=clock)
    assert first.record.status == "partial" and first.unreported == 4
    fake.enqueue(tool_use(("finish", {"summary": "later"})))
    second = curate(s["ws"], env=s["env"], clock=clock)
    assert second.entries == 4  # the two reported ones are not shown again
    prompt = fake.messages()[1].body["messages"][0]["content"][0]["text"]
    assert "crab logo" not in prompt and "Call Ana" in prompt


def test_hand_edits_are_new_entries_and_nothing_doubles(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    fake.enqueue(tool_use(("finish", {"summary": "all skipped"})))
    curate(s["ws"], env=s["env"], clock=clock)
    path = root / "memory/2026-11-30.md"
    path.write_text(
        path.read_text().replace("Friday", "Thursday")
        + "- A new hand-written note.\n"
        + "\nSome prose the human added.\n"
    )
    fake.enqueue(tool_use(("finish", {"summary": "ok"})))
    result = curate(s["ws"], env=s["env"], clock=clock)
    assert result.entries == 2
    prompt = fake.messages()[1].body["messages"][0]["content"][0]["text"]
    assert "Thursday" in prompt and "A new hand-written note." in prompt
    assert "crab logo" not in prompt


def test_no_entries_makes_no_call(ws: Workspace, fake_api: Any) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_api.url}
    result = curate(ws, env=env, clock=clock)
    assert result.record.status == "skipped" and fake_api.requests == []


def test_stale_write_is_refused_and_the_model_retries(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    path = "memory/contacts/telegram-alice.md"
    old = (root / path).read_bytes()
    (root / path).write_text(old.decode() + "- Added by the agent mid-run.\n")
    now = sha256_hex((root / path).read_bytes())
    fake.enqueue(
        tool_use(
            write_call(path, "append", content="- Likes tea.\n", expected_sha256=sha256_hex(old))
        ),
        tool_use(("read_context_file", {"path": path})),
        tool_use(write_call(path, "append", content="- Likes tea.\n", expected_sha256=now)),
        text("done"),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    first = fake.messages()[1].body["messages"][-1]["content"][0]
    assert first["is_error"] and "changed since it was read" in first["content"]
    assert result.record.status == "ok"
    assert (root / path).read_text().endswith("- Added by the agent mid-run.\n- Likes tea.\n")


def test_memory_md_caps_refuse_growth_with_guidance(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    big = "".join(f"- line {i}\n" for i in range(600))
    fake.enqueue(
        tool_use(write_call("MEMORY.md", "append", content=big)),
        text("ok"),
    )
    before = (root / "MEMORY.md").read_bytes()
    curate(s["ws"], env=s["env"], clock=clock)
    reply = fake.messages()[1].body["messages"][-1]["content"][0]
    assert reply["is_error"] and "leave a one-line pointer in MEMORY.md" in reply["content"]
    assert (root / "MEMORY.md").read_bytes() == before
    with pytest.raises(LimitError, match=r"memory\.working_chars"):
        Store(s["ws"]).write_context(
            [{"path": "MEMORY.md", "mode": "append", "content": "x" * 13000}],
            actor="mcp",
            message="x",
        )
    Store(s["ws"]).write_context(
        [{"path": "MEMORY.md", "mode": "append", "content": big}],
        actor="user",
        message="the human may",
    )


def test_cli_curate_plan_and_dry_run(
    setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stages_at(monkeypatch, NOW)
    fake, root = setup["fake"], setup["ws"].root
    w = ("-w", str(root))
    out = run_cli(*w, "curate", "--plan", "--days", "3").stdout
    assert "uncurated daily entr" in out and "Plan: claude-sonnet-5-5" in out
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.enqueue(
        tool_use(write_call("memory/notes/dry.md", "create", content="# Dry\n")),
        tool_use(("finish", {"summary": "dry"})),
    )
    result = run_cli(*w, "curate", "--dry-run", "--days", "3")
    assert "+++ b/memory/notes/dry.md" in result.stdout
    assert not (root / "memory/notes/dry.md").exists()
    assert "--days" in run_cli(*w, "curate", "--days", "0", code=2).stderr


def test_a_routing_report_without_a_write_leaves_the_entry_for_next_time(
    setup: dict[str, Any],
) -> None:
    s, fake = setup, setup["fake"]
    fake.enqueue(
        tool_use(
            write_call("memory/2026-11-30.md", "append", content="- no\n"),
            routing(s, {"[reminder]": "memory/reminders/ana.md", "[joke]": "skip"}),
        ),
        tool_use(("finish", {"summary": "claimed more than it did"})),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    assert result.record.status == "ok" and result.unreported == 1  # the reminder: never written
    reply = json.loads(fake.messages()[1].body["messages"][-1]["content"][1]["content"])
    assert [r["why"] for r in reply["rejected"]] == ["memory/reminders/ana.md does not exist"]
    assert len(reply["recorded"]) == 1 and "not recorded" in reply["note"]
    fake.enqueue(tool_use(("finish", {"summary": "again"})))
    again = curate(s["ws"], env=s["env"], clock=clock)
    assert again.entries == 1
    assert "Call Ana" in fake.messages()[2].body["messages"][0]["content"][0]["text"]


def test_record_routing_names_destinations_not_written_this_run(setup: dict[str, Any]) -> None:
    s, fake = setup, setup["fake"]
    fake.enqueue(
        tool_use(routing(s, {"[person]": "memory/contacts/telegram-alice.md"})),
        tool_use(("record_routing", {"entries": [{"id": "nope", "destination": "skip"}]})),
        tool_use(("finish", {"summary": "claimed"})),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    replies = [m.body["messages"][-1]["content"][0] for m in fake.messages()[1:]]
    first, second = (json.loads(r["content"]) for r in replies)
    assert replies[0]["is_error"] and first["recorded"] == []
    assert {r["why"] for r in first["rejected"]} == {
        "memory/contacts/telegram-alice.md was not written in this run"
    }
    assert second["rejected"][0]["why"] == "no such entry id in this run's entries"
    assert "memory/contacts/telegram-alice.md" not in result.routed  # it comes back next run
    assert result.unreported == len(ids_of(s, "[person]"))


def test_curate_is_handed_its_likely_destinations_with_their_sha256(
    setup: dict[str, Any],
) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    contact = (root / "memory/contacts/telegram-alice.md").read_bytes()
    fake.enqueue(tool_use(("finish", {"summary": "looked"})))
    curate(s["ws"], env=s["env"], clock=clock)
    prompt = fake.messages()[0].body["messages"][0]["content"][0]["text"]
    handed = f'<file path="memory/contacts/telegram-alice.md" sha256="{sha256_hex(contact)}">'
    assert handed in prompt and '<file path="memory/README.md"' in prompt


def test_a_tidy_that_sorts_every_word_onto_one_line_is_refused_and_the_model_recovers(
    setup: dict[str, Any],
) -> None:
    """Issue 33 item 4, live: the model replaces a contact's 30 fact lines with one line of
    their words sorted ("tidy bob"). The tool result names the lines it would lose; the model's
    next call keeps them, and the run ends ok with every fact still readable."""
    s, fake, root = setup, setup["fake"], setup["ws"].root
    path = "memory/contacts/email-bob.md"
    facts = [
        f"- Bob fact {n}: he keeps bees number {n} behind the allotment shed." for n in range(30)
    ]
    (root / path).write_text("# Bob\n\n" + "\n".join(facts) + "\n")
    commit_all(root, "bob")
    sha = {"expected_sha256": sha256_hex((root / path).read_bytes())}
    tidy = " ".join(sorted(w for line in facts for w in line.split()))
    fake.enqueue(
        tool_use(write_call(path, "edit", "tidy bob", old="\n".join(facts), new=tidy, **sha)),
        tool_use(
            write_call(
                path, "append", "add the tea fact", content="- Bob drinks green tea.\n", **sha
            )
        ),
        text("done"),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    refusal = fake.messages()[1].body["messages"][-1]["content"][0]
    assert refusal["is_error"]
    assert "refused, nothing of this call was applied" in refusal["content"]
    assert f"{path} would lose 30 line(s)" in refusal["content"]
    assert "line 3: '- Bob fact 0: he keeps bees" in refusal["content"]
    assert result.record.status == "ok"
    text_now = (root / path).read_text()
    assert all(f in text_now for f in facts) and text_now.endswith("- Bob drinks green tea.\n")
