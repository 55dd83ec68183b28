"""Collect records every message exactly once (issue 17), on OpenClaw-shaped folders: items bound
to message references, copies sent once, the cursor as the truth, one budget per run, batches."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fakeapi import FakeAnthropic, error, prompt_of, tool_use

from conftest import run_cli, snapshot, stages_at
from crustacean.config import load_config
from crustacean.errors import UsageError
from crustacean.llm.loop import StageRequest, build_params, min_cacheable_tokens
from crustacean.sources import Message
from crustacean.stages.collect import CollectResult, Progress, collect
from crustacean.stages.collect_notes import (
    MAX_OUTPUT,
    MIN_OUTPUT,
    Chunk,
    Item,
    bind_items,
    build_chunks,
    build_request,
    bullet,
    clean_text,
    event_day,
    normalize,
    output_budget,
    parse_when,
)
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = "sk-ant-api03-" + "Q" * 40
NOTE = re.compile(r"note-\d+")


# ------------------------------------------------------------------ OpenClaw-shaped folders


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def header(session: str, moment: datetime) -> str:
    head = {"type": "session", "version": 3, "id": session, "timestamp": stamp(moment)}
    return json.dumps(head) + "\n"


def line(entry: str | None, role: str, words: str, moment: datetime) -> str:
    record: dict[str, Any] = {"type": "message", "parentId": None, "timestamp": stamp(moment)}
    if entry is not None:
        record["id"] = entry
    record["message"] = {"role": role, "content": [{"type": "text", "text": words}]}
    return json.dumps(record) + "\n"


def sessions_dir(root: Path, agent: str = "main") -> Path:
    folder = root / "openclaw/agents" / agent / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True)
class Kit:
    """A workspace reading OpenClaw's folders under `home`, its env and the fake API."""

    ws: Workspace
    env: dict[str, str]
    api: FakeAnthropic
    home: Path

    def live(self, *overrides: str) -> Workspace:
        pairs = ["llm.max_retries=0", *overrides]
        return Workspace(self.ws.root, load_config(self.ws.root, env=self.env, overrides=pairs))

    def run(self, ws: Workspace | None = None, now: datetime = NOW, **kw: Any) -> CollectResult:
        return collect(ws or self.live(), env=self.env, clock=lambda: now, **kw)


@pytest.fixture
def k(ws: Workspace, tmp_path: Path, fake_api: FakeAnthropic) -> Kit:
    toml = ws.root / "crustacean.toml"
    agents = tmp_path / "openclaw/agents"
    toml.write_text(toml.read_text() + f'\n[[sources]]\nkind = "openclaw"\npath = "{agents}"\n')
    return Kit(
        ws, {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_api.url}, fake_api, tmp_path
    )


def section(body: dict[str, Any]) -> str:
    return prompt_of(body).split("<transcripts>", 1)[1].split("</transcripts>", 1)[0]


def notes(*items: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = {"input_tokens": len(json.dumps(body)) // 4} if body else None
    return tool_use(("record_notes", {"items": list(items)}), usage=usage)


def echo(body: dict[str, Any]) -> dict[str, Any]:
    """A model that notes every `note-N` it is shown, citing the message it is in (no session
    label, no time), and bills the tokens it was really sent."""
    first: dict[str, str] = {}
    for ref, word in re.findall(r"^(m\d+) \d\d:\d\d .*?(note-\d+)", section(body), re.M):
        first.setdefault(word, ref)
    items = [{"category": "fact", "text": f"Noted {w}.", "refs": [r]} for w, r in first.items()]
    return notes(*items, body=body)


def logged(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for log in (root / "memory").glob("????-??-??.md"):
        for word in re.findall(r"Noted (note-\d+)\.", log.read_text()):
            counts[word] = counts.get(word, 0) + 1
    return counts


def sent(fake: FakeAnthropic) -> list[str]:
    return [w for r in fake.messages() for w in NOTE.findall(section(r.body))]


# ------------------------------------------------------------------ items bound to messages


def test_two_sessions_in_one_run_with_a_model_that_gives_no_session_label(k: Kit) -> None:
    t = NOW - timedelta(hours=3)
    (sessions_dir(k.home) / "alpha.jsonl").write_text(
        header("alpha", t) + line("a1", "user", "note-1 Ana likes green tea", t)
    )
    coach = sessions_dir(k.home, "coach") / "beta.jsonl"
    coach.write_text(
        header("beta", t) + line("b1", "user", "note-2 run 5k on Sunday", t + timedelta(minutes=30))
    )
    k.api.enqueue(echo)
    result = k.run()
    assert result.record.status == "ok" and result.appended == 2 and result.chunks == 1
    log = (k.ws.root / "memory/2026-11-30.md").read_text()
    alpha, beta = log.split("session=alpha", 1)[1], log.split("session=beta", 1)[1]
    assert "Noted note-1." in alpha.split("### ")[0] and "Noted note-2." in beta.split("### ")[0]
    assert (
        "session=beta -->" in log
        and str(coach.parent) not in log
        and "### [09:00]" in log
        and "### [09:30]" in log
    )
    body = k.api.messages()[0].body
    assert "## openclaw:main · session alpha\n-- 2026-11-30 Mon\nm1 09:00 user:" in section(body)
    assert "## openclaw:coach · session beta\n-- 2026-11-30 Mon\nm2 09:30 user:" in section(body)
    assert k.run().record.status == "skipped"


def two_sessions(tmp_path: Path) -> None:
    """Two sessions small enough to share one chunk."""
    t = NOW - timedelta(hours=3)
    folder = sessions_dir(tmp_path)
    (folder / "alpha.jsonl").write_text(header("alpha", t) + line("a1", "user", "note-1 tea", t))
    (folder / "beta.jsonl").write_text(header("beta", t) + line("b1", "user", "note-2 5k", t))


def test_an_item_citing_nothing_in_a_two_session_chunk_is_refused_and_corrected_once(
    k: Kit,
) -> None:
    two_sessions(k.home)
    k.api.enqueue(
        notes(
            {"category": "fact", "text": "Ana likes tea.", "session": "telegram"},
            {"category": "fact", "text": "Noted note-2.", "refs": ["m2"]},
        ),
        notes({"category": "fact", "text": "Ana likes tea.", "refs": ["m1"]}),
    )
    result = k.run()
    assert result.record.status == "ok" and result.appended == 2 and result.set_aside == 0
    refusal = k.api.messages()[1].body["messages"][-1]["content"][0]
    assert refusal["is_error"] is True and refusal["content"].startswith("1 item(s) recorded.")
    assert (
        "- item 1 ('Ana likes tea.'): it cites no message of this text, which holds 2 "
        in (refusal["content"])
    )
    log = (k.ws.root / "memory/2026-11-30.md").read_text()
    assert "Ana likes tea." in log.split("session=alpha", 1)[1].split("### ")[0]
    assert "Noted note-2." in log.split("session=beta", 1)[1]
    assert k.run().record.status == "skipped"  # the cursors moved


def test_cli_an_item_still_miscited_after_one_correction_is_set_aside(
    k: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    stages_at(monkeypatch, NOW)
    two_sessions(k.home)
    wrong = {"category": "fact", "text": "Unbound.", "refs": ["m99"]}
    k.api.enqueue(
        notes(wrong, {"category": "fact", "text": "Noted note-1.", "refs": ["m1", "m7"]}),
        notes(wrong),
    )
    out = run_cli("-w", str(k.ws.root), "collect", "--json", env=k.env)
    data = json.loads(out.stdout)
    assert data["status"] == "ok" and data["appended"] == 1
    assert data["set_aside"] == 1 and data["bogus_refs"] == 3  # m7, then m99 twice
    assert "1 set aside" in data["run"]["summary"]
    shown = run_cli("-w", str(k.ws.root), "runs", "show", data["run"]["id"], "--json").stdout
    (aside,) = json.loads(shown)["set_aside"]
    assert aside["kind"] == "item" and aside["text"] == "Unbound."
    assert aside["reason"].startswith("chunk 1, its refs (m99) name no message of this text")
    assert logged(k.ws.root) == {"note-1": 1}


def test_an_item_citing_nothing_in_a_one_session_chunk_goes_to_that_session(k: Kit) -> None:
    t = NOW - timedelta(hours=3)
    (sessions_dir(k.home) / "solo.jsonl").write_text(
        header("solo", t) + line("s1", "user", "hello", t) + line("s2", "assistant", "hi", t)
    )
    k.api.enqueue(notes({"category": "person", "text": "Maya is the user's sister."}))
    result = k.run()
    assert result.record.status == "ok" and result.unbound == 1 and result.appended == 1
    log = (k.ws.root / "memory/2026-11-30.md").read_text()
    assert "session=solo" in log and "- [person] Maya is the user's sister." in log
    assert result.to_json()["attributed_to_chunk_session"] == 1


def msg(ref: int, session: str, minute: int) -> Message:
    when = datetime(2026, 11, 30, 9, minute, tzinfo=UTC)
    return Message("user", "x", when, session, f"{session}/{ref}", f"/t/{session}.jsonl", ref, "oc")


REFS = {"m1": msg(1, "a", 0), "m2": msg(2, "a", 5), "m3": msg(3, "b", 30)}


@pytest.mark.parametrize(
    ("entry", "session", "hhmm", "rejected"),
    [
        ({"category": "fact", "text": "t", "refs": ["m3"]}, "b", "09:30", None),
        ({"category": "fact", "text": "t", "refs": "[m2]"}, "a", "09:05", None),
        ({"category": "fact", "text": "t", "refs": ["M2", "m1"]}, "a", "09:00", None),
        (  # a `when` on the message's own day: filed as said, no event day
            {"category": "fact", "text": "t", "refs": ["m1", "m2"], "when": "2026-11-30 09:03"},
            "a",
            "09:00",
            None,
        ),
        (  # an event years ahead is still an event: filed when said
            {"category": "fact", "text": "t", "refs": ["m3"], "when": "2031-01-01T00:00:00Z"},
            "b",
            "09:30",
            None,
        ),
        ({"category": "fact", "text": "t", "refs": ["m3"], "session": "a"}, "b", "09:30", None),
        ({"category": "gossip", "text": "t", "refs": ["m1"]}, None, None, "unknown category"),
        ({"category": "fact", "text": "  ", "refs": ["m1"]}, None, None, "no text"),
        ({"category": "fact", "text": "- [fact]", "refs": ["m1"]}, None, None, "no text"),
        ("just a string", None, None, "not an object"),
    ],
)
def test_bind_items_table(
    entry: object, session: str | None, hhmm: str | None, rejected: str | None
) -> None:
    bound = bind_items([entry], REFS, UTC)
    assert bound.bad == []
    if rejected:
        assert bound.items == [] and dict(bound.rejected) == {rejected: 1}
        return
    (item,) = bound.items
    assert (item.session, item.when.strftime("%H:%M")) == (session, hhmm)
    assert item.path == f"/t/{session}.jsonl"


SAID = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("2026-11-30 18:00", None),  # the message's own day: no event day
        ("2026-11-29", date(2026, 11, 29)),  # "yesterday": before its message, kept
        ("2026-12-04 15:00", date(2026, 12, 4)),  # a plan: after it
        ("2025-03-01", date(2025, 3, 1)),  # before the first message, but not by years
        ("2031-01-01T00:00:00Z", date(2031, 1, 1)),
        ("2023-06-01", "years before this workspace's first message (2026-01-03)"),
        ("2099-01-01", "decades after its message (2026-11-30)"),
        ("2026-02-30", "is not a date"),
        ("yesterday", "is not a date"),
    ],
)
def test_event_day_keeps_past_and_future_and_refuses_only_absurd_dates(
    value: object, expected: object
) -> None:
    got = event_day(value, SAID, UTC, date(2026, 1, 3))
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got and "\n" not in got
    else:
        assert got == expected


def test_a_when_before_its_message_is_kept_and_dated_and_an_absurd_one_is_bad() -> None:
    entries = [
        {"category": "fact", "text": "Went to the support group.", "refs": ["m1"]}
        | {"when": "2026-11-29"},
        {"category": "fact", "text": "Grandma was born.", "refs": ["m1"], "when": "1931-05-02"},
    ]
    bound = bind_items(entries, REFS, UTC, date(2026, 11, 1))
    (kept,) = bound.items
    assert kept.when == REFS["m1"].timestamp and kept.event == date(2026, 11, 29)
    assert bullet(kept) == "- Went to the support group. (on 2026-11-29)"
    (bad,) = bound.bad
    assert bad.n == 2 and "leave when out and say the date in the text" in bad.reason


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({}, "- [plan] 2026-12-18 — Book the room"),
        ({"event": date(2026, 12, 18)}, "- [plan] 2026-12-18 — Book the room"),  # date in text
        ({"event": date(2026, 12, 19)}, "- [plan] 2026-12-18 — Book the room (on 2026-12-19)"),
        (
            {"date_doubt": "a Friday three weeks away: 12-18 or 12-25"},
            "- [plan] 2026-12-18 — Book the room (date uncertain: a Friday three weeks away: "
            "12-18 or 12-25)",
        ),
        (
            {"conflicts": "said the small room on 2026-11-03"},
            "- [plan] 2026-12-18 — Book the room (conflicts with: said the small room on "
            "2026-11-03)",
        ),
    ],
)
def test_bullet_carries_the_event_day_and_the_doubt_and_conflict_markers(
    fields: dict[str, Any], line: str
) -> None:
    base = Item("plan", "2026-12-18 — Book the room", SAID, "a", "oc", "/t/a.jsonl", "")
    assert bullet(replace(base, **fields)) == line


def test_lesson_is_a_category_and_doubt_and_conflicts_are_read() -> None:
    entry = {"category": "lesson", "text": "Check the zone first.", "refs": ["m1"]}
    entry |= {"date_doubt": " 12-18  or 12-25 ", "conflicts": "said violin"}
    (item,) = bind_items([entry], REFS, UTC).items
    assert (item.category, item.date_doubt, item.conflicts) == (
        "lesson",
        "12-18 or 12-25",
        "said violin",
    )


@pytest.mark.parametrize(
    ("chars", "budget"),
    [(0, MIN_OUTPUT), (20_000, MIN_OUTPUT), (40_000, 6_000), (60_000, 9_000), (10**6, MAX_OUTPUT)],
)
def test_the_output_budget_scales_with_the_chunk(chars: int, budget: int) -> None:
    assert output_budget("x" * chars) == budget


def test_a_request_names_the_zone_and_its_max_tokens_follow_its_chunk(ws: Workspace) -> None:
    t = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    small = Chunk("m1 09:00 user: hi", {"m1": Message("user", "hi", t, "a", "a/1", "/a", 1, "oc")})
    big = replace(small, text="x" * 60_000)
    assert build_request(ws, small).max_tokens == MIN_OUTPUT
    assert build_request(ws, big).max_tokens == 9_000
    assert "in the workspace's zone, UTC (UTC+00:00)." in build_request(ws, small).prompt


def test_bind_items_refuses_to_guess_across_sessions_or_to_keep_a_credential() -> None:
    entries = [
        {"category": "fact", "text": "t", "refs": ["m7"]},
        {"category": "fact", "text": f"The key is {KEY}", "refs": ["m1"]},
        {"category": "fact", "text": "kept", "refs": ["m1", "m8"]},
    ]
    bound = bind_items(entries, REFS, UTC)
    assert [i.text for i in bound.items] == ["kept"] and bound.bogus_refs == 2
    first, second = bound.bad
    assert (first.n, second.n) == (1, 2) and "2 sessions" in first.reason
    assert second.reason.startswith("its text holds a credential (")
    assert KEY not in second.line() and "[REDACTED:" in second.line()
    assert bind_items("nope", REFS, UTC).rejected == {"items was not a list": 1}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-30T23:30:00Z", datetime(2026, 11, 30, 23, 30, tzinfo=UTC)),
        ("2026-11-30T23:30:00+02:00", datetime(2026, 11, 30, 21, 30, tzinfo=UTC)),
        ("2026-11-30 23:30", datetime(2026, 11, 30, 22, 30, tzinfo=UTC)),  # Berlin wall time
        ("[m3 2026-11-30 09:01]", datetime(2026, 11, 30, 8, 1, tzinfo=UTC)),
        ("yesterday-ish", None),
        (None, None),
    ],
)
def test_parse_when_reads_z_and_offsets_as_instants(value: object, expected: object) -> None:
    assert parse_when(value, ZoneInfo("Europe/Berlin")) == expected


@pytest.mark.parametrize(
    ("text", "clean", "norm"),
    [
        ("- [preference] - [preference] Likes tea.", "Likes tea.", "likes tea"),
        ("[idea]  Try a  CRAB logo!", "Try a CRAB logo!", "try a crab logo"),
        ("* 1. Ship it", "Ship it", "ship it"),
        ("[Ana] said hi", "[Ana] said hi", "[ana] said hi"),
    ],
)
def test_item_text_loses_copied_bullets_and_tags(text: str, clean: str, norm: str) -> None:
    assert clean_text(text) == clean and normalize(text) == norm


def test_echoed_log_lines_merge_instead_of_nesting(k: Kit) -> None:
    t = NOW - timedelta(hours=3)
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + line("e1", "user", "tea", t))
    day = k.ws.root / "memory/2026-11-30.md"
    day.write_text("# 2026-11-30\n\n### [08:00] drinks\n\n- [preference] Ana likes green tea.\n")
    k.api.enqueue(
        notes(
            {
                "category": "preference",
                "text": "- [preference] Ana likes green tea",
                "refs": ["m1"],
            },
            {"category": "preference", "text": "ana LIKES green tea.", "refs": ["m1"]},
        )
    )
    result = k.run()
    assert result.duplicates == 2 and result.appended == 0
    assert "merged as duplicates" in result.record.summary
    assert day.read_text().count("green tea") == 1


# ------------------------------------------------------------------ exactly once across files


def test_a_live_file_with_its_reset_and_checkpoint_copies_is_sent_once(k: Kit) -> None:
    folder = sessions_dir(k.home)
    t = NOW - timedelta(hours=5)
    first = [
        line("e1", "user", "note-1 my sister Maya visits", t),
        line("e2", "assistant", "note-2 noted, Maya", t + timedelta(minutes=1)),
        line(None, "user", "note-3 a line without an id", t + timedelta(minutes=2)),
    ]
    later = [line("e4", "user", "note-4 book the train", t + timedelta(minutes=3))]
    (folder / "s1.jsonl.reset.2026-11-30T08-00-00.000Z").write_text(
        header("s1", t) + "".join(first)
    )
    (folder / "s1.checkpoint.5f2e9c1a-7b3d.jsonl").write_text(
        header("s1", t) + "".join(first + later)
    )
    (folder / "s1.jsonl").write_text(header("s1", t) + "".join(first + later))
    (folder / "s2.jsonl").write_text(
        header("s2", t) + line("e1", "user", "note-5 other session", t)
    )
    k.api.enqueue(echo)
    result = k.run()
    assert result.record.status == "ok" and result.new_messages == 5 and result.copies == 7
    assert sorted(sent(k.api)) == [f"note-{i}" for i in range(1, 6)]
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(1, 6)}
    assert "session=s1 -->" in (k.ws.root / "memory/2026-11-30.md").read_text()  # the live file
    with (folder / "s1.jsonl").open("a") as fh:
        fh.write(line("e6", "user", "note-6 after the copies", t + timedelta(minutes=9)))
    (folder / "s1.checkpoint.0d1e.jsonl").write_bytes((folder / "s1.jsonl").read_bytes())
    k.api.enqueue(echo)
    assert k.run().new_messages == 1
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(1, 7)}
    assert k.run().record.status == "skipped"
    assert len(k.api.messages()) == 2


# ------------------------------------------------------------------ the cursor is the truth


def test_a_message_appended_after_the_cursor_four_days_ago_is_collected(k: Kit) -> None:
    then = NOW - timedelta(days=4)
    folder = sessions_dir(k.home)
    live_file = folder / "s1.jsonl"
    live_file.write_text(
        header("s1", then) + line("e1", "user", "note-1 before", then - timedelta(hours=1))
    )
    k.api.enqueue(echo)
    assert k.run(now=then).record.status == "ok"
    # the laptop slept (or the key failed) for four days; the conversation went on meanwhile
    with live_file.open("a") as fh:
        fh.write(
            line("e2", "user", "note-2 right after the last run", then + timedelta(minutes=10))
        )
    (folder / "s3.jsonl").write_text(
        header("s3", then)
        + line("x1", "user", "note-9 long before the last run", then - timedelta(days=3))
        + line("x2", "user", "note-3 a session started in the gap", then + timedelta(hours=1))
    )
    k.api.enqueue(echo)
    result = k.run()
    assert result.record.status == "ok" and result.new_messages == 2
    assert logged(k.ws.root) == {"note-1": 1, "note-2": 1, "note-3": 1}
    assert (k.ws.root / f"memory/{(then + timedelta(minutes=10)).date()}.md").exists()
    k.api.enqueue(echo)
    back = k.run(since=then - timedelta(days=5))  # --since still backfills
    assert back.new_messages == 1 and "note-9" in section(k.api.messages()[-1].body)


def test_since_backfills_a_message_the_first_window_passed_by(k: Kit) -> None:
    folder = sessions_dir(k.home)
    old = NOW - timedelta(days=9)
    (folder / "s.jsonl").write_text(
        header("s", old)
        + line("e1", "user", "note-1 nine days ago", old)
        + line("e2", "user", "note-2 today", NOW - timedelta(hours=1))
    )
    k.api.enqueue(echo, echo)
    assert k.run().new_messages == 1  # a first run reads the window only
    back = k.run(since=NOW - timedelta(days=10))
    assert back.new_messages == 1 and logged(k.ws.root) == {"note-1": 1, "note-2": 1}
    assert (k.ws.root / f"memory/{old.date()}.md").exists()
    assert k.run(since=NOW - timedelta(days=10)).new_messages == 0  # never twice


# ------------------------------------------------------------------ one budget per run


def big_transcript(tmp_path: Path, count: int, size: int = 2900, now: datetime = NOW) -> None:
    t = now - timedelta(hours=20)
    lines = [header("big", t)]
    for i in range(count):
        words = f"note-{i} " + "lorem ipsum dolor sit amet " * (size // 27)
        lines.append(
            line(f"e{i}", "user" if i % 2 else "assistant", words, t + timedelta(minutes=i))
        )
    (sessions_dir(tmp_path) / "big.jsonl").write_text("".join(lines))


def test_a_later_chunk_is_shown_what_the_earlier_chunks_noted_for_its_days(k: Kit) -> None:
    big_transcript(k.home, 40)  # about 116,000 characters: two chunks, one day
    k.api.enqueue(echo, echo)
    result = k.run()
    assert result.record.status == "ok" and result.chunks_sent == 2
    first, second = (m.body for m in k.api.messages())
    assert "<noted-earlier-this-run>" not in json.dumps(first)
    noted = json.dumps(second).split("<noted-earlier-this-run>")[1].split("</noted-")[0]
    assert "-- 2026-11-29" in noted and "- Noted note-0." in noted
    assert "already-in-daily-logs" not in json.dumps(second)  # the day's log is not re-sent


def test_an_answer_near_its_output_budget_is_said_in_the_run_record(k: Kit) -> None:
    big_transcript(k.home, 2)
    reply = tool_use(("record_notes", {"items": []}), usage={"output_tokens": 4000})
    k.api.enqueue(reply)
    result = k.run()
    assert result.near_output_budget == 1 and result.to_json()["near_output_budget"] == 1
    assert "1 answer(s) came close to their output budget" in "\n".join(result.fates())
    log = (k.ws.logs_dir / f"{result.record.id}.log").read_text()
    assert "chunk 1: the answer used 4,000 of its 4,096 output tokens (max_tokens)" in log


def test_a_transcript_larger_than_the_run_budget_is_collected_over_two_runs(k: Kit) -> None:
    big_transcript(k.home, 80)
    small = k.live("budget.max_turns=2")
    planned = collect(small, env={}, clock=lambda: NOW, plan=True)
    assert planned.chunks == 4 and planned.plan and planned.plan.requests == 4
    assert planned.left_for_next_run > 0
    k.api.enqueue(*[echo] * 4)
    first = k.run(small)
    assert first.record.status == "partial" and first.chunks_sent == 2
    assert first.record.turns == 2 and first.left_for_next_run == 80 - len(set(sent(k.api)))
    assert "left for the next run" in first.record.summary
    assert "budget" in (first.record.error or "")
    half = logged(k.ws.root)
    assert set(half) == set(sent(k.api)) and all(n == 1 for n in half.values())
    second = k.run(small)
    assert second.record.status == "ok" and second.chunks_sent == 2
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(80)}  # nothing lost, nothing twice
    assert sorted(sent(k.api)) == sorted(f"note-{i}" for i in range(80))
    assert k.run(small).record.status == "skipped" and len(k.api.messages()) == 4


def test_input_tokens_bound_the_whole_run(k: Kit) -> None:
    big_transcript(k.home, 40)
    budget = 9000
    small = k.live(f"budget.max_input_tokens={budget}")
    k.api.enqueue(*[echo] * 40)
    runs = []
    while not runs or runs[-1].record.status == "partial":
        runs.append(k.run(small))
        assert runs[-1].record.usage.total_input <= budget
        assert len(runs) < 30
    assert len(runs) > 1 and runs[-1].record.status == "ok"
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(40)}


def test_plan_prices_every_chunk(k: Kit) -> None:
    big_transcript(k.home, 80)
    one = k.live()
    planned = collect(one, env={}, clock=lambda: NOW, plan=True)
    assert planned.plan and planned.plan.requests == planned.chunks == 4
    assert planned.plan.est_input_tokens > 4 * 15_000
    batch = collect(one, env={}, clock=lambda: NOW, plan=True, batch=True)
    assert batch.plan and batch.plan.est_cost_first_turn == pytest.approx(
        planned.plan.est_cost_first_turn / 2
    )
    # the CLI reads the last two days by the wall clock: the same transcript, 20 hours before it
    big_transcript(k.home, 80, now=datetime.now(UTC))
    out = run_cli("-w", str(k.ws.root), "collect", "--plan").stdout
    assert "for all 4 requests" in out
    out = run_cli("-w", str(k.ws.root), "-c", "budget.max_turns=2", "collect", "--plan").stdout
    assert "covers part of it; 40 message(s) would wait for the next run" in out
    assert k.api.requests == []


# ------------------------------------------------------------------ clean input


def test_every_chunk_starts_with_its_session_header() -> None:
    t = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    messages = [
        Message("user", "w" * 900, t + timedelta(minutes=i), s, f"{s}/{i}", f"/{s}", i, "oc")
        for s in ("a", "b")
        for i in range(6)
    ]
    chunks = build_chunks(messages, UTC, 4000)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.text.startswith("## oc · session ")
        assert chunk.text.split("\n")[1] == "-- 2026-11-30 Mon"  # the day before its lines
        for ref, m in chunk.refs.items():
            assert f"\n{ref} 09:" in chunk.text and m.session in chunk.text
    assert [r for c in chunks for r in c.refs] == [f"m{i}" for i in range(1, 13)]


def test_noise_is_stripped_and_a_bad_byte_does_not_drop_the_message(k: Kit) -> None:
    t = NOW - timedelta(hours=2)
    meta = (
        'Conversation info (untrusted metadata):\n```json\n{"message_id": "42", "sender": '
        '"tg"}\n```\n\nSender (untrusted metadata):\n```json\n{"name": "Ana"}\n```\n\n'
    )
    body = (
        header("s", t)
        + line("e1", "user", "[OpenClaw heartbeat poll] anything to do?", t)
        + line("e2", "user", meta + "note-1 book the dentist", t)
        + line("e3", "assistant", "\x1b[31mnote-2 red\x1b[0m text \x1b]0;title\x07done", t)
    ).encode()
    bad = line("e4", "user", "note-3 cafX with a bad byte", t).encode()
    bad = bad.replace(b"cafX", b"caf\xe9")  # Latin-1 bytes in a UTF-8 file
    (sessions_dir(k.home) / "s.jsonl").write_bytes(body + bad)
    k.api.enqueue(echo)
    result = k.run()
    assert result.record.status == "ok" and result.new_messages == 3 and result.bad_lines == 0
    text = section(k.api.messages()[0].body)
    assert "heartbeat poll" not in text and "untrusted metadata" not in text
    assert "message_id" not in text and "\x1b" not in text and "title" not in text
    assert "note-2 red text done" in text and "note-3 caf\ufffd with a bad byte" in text


def test_cache_marks_only_a_stable_prefix_big_enough_to_cache(k: Kit) -> None:
    t = NOW - timedelta(hours=2)
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + line("e1", "user", "hi", t))
    k.api.enqueue(echo, echo)
    k.run()  # the default small model: its minimum is larger than the prefix
    body = k.api.messages()[0].body
    assert "cache_control" not in json.dumps(body)
    assert min_cacheable_tokens("claude-haiku-5-5") == 4096
    with (sessions_dir(k.home) / "s.jsonl").open("a") as fh:
        fh.write(line("e2", "user", "again", t))
    k.run(k.live("models.small=claude-sonnet-5-5"))
    body = k.api.messages()[1].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps(body["messages"])  # the one-off prompt is not
    req = StageRequest(
        stage="collect", system_doc="short", prompt="p", tools=(), min_cache_tokens=1024
    )
    assert "cache_control" not in json.dumps(build_params(req, "m", []))


# ------------------------------------------------------------------ batches


def test_batch_submits_records_the_id_and_a_later_run_appends(k: Kit) -> None:
    big_transcript(k.home, 80)
    one = k.live()
    k.api.enqueue(*[echo] * 4)
    submitted = k.run(one, batch=True)
    assert submitted.record.status == "ok" and submitted.batch
    batch_id = submitted.batch["submitted"]
    assert submitted.batch["requests"] == 4 and submitted.waiting_in_batch == 80
    assert k.api.messages() == [] and len(k.api.batch_requests()) == 4
    assert all(p["tool_choice"]["name"] == "record_notes" for p in k.api.batch_requests())
    with sqlite3.connect(k.ws.root / ".crustacean/state.db") as db:
        assert db.execute("SELECT batch_id FROM collect_sent_batches").fetchall() == [(batch_id,)]
    assert logged(k.ws.root) == {}
    waiting = k.run(one)  # not ended yet: nothing is sent again, nothing appended
    assert waiting.record.status == "skipped" and waiting.waiting_in_batch == 80
    assert waiting.batch and waiting.batch["still_waiting"] == [batch_id]
    assert k.api.messages() == [] and len(k.api.batch_requests()) == 4
    k.api.end_batches()
    fetched = k.run(one)
    assert fetched.record.status == "ok" and fetched.batch and fetched.batch["fetched"] == batch_id
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(80)}
    assert f"batch={batch_id}" in "".join(
        p.read_text() for p in (k.ws.root / "memory").glob("*.md")
    )
    assert fetched.record.cost_usd > 0
    assert k.run(one).record.status == "skipped" and k.api.messages() == []


def test_a_failed_batch_request_is_released_and_sent_again(k: Kit) -> None:
    big_transcript(k.home, 60)
    one = k.live()
    cut = tool_use(("record_notes", {"items": []}), stop_reason="max_tokens")
    k.api.enqueue(echo, error(500, message="overloaded"), cut)
    assert k.run(one, batch=True).batch["requests"] == 3  # type: ignore[index]  # a batch run sets .batch
    k.api.end_batches()
    k.api.enqueue(echo, echo)
    result = k.run(one)  # appends chunk 1, then sends chunks 2 and 3 again directly
    assert result.batch and result.batch["released_chunks"] == 2
    assert len(k.api.messages()) == 2
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(60)}


def test_batch_cost_is_half_the_direct_cost(k: Kit) -> None:
    usage = {"input_tokens": 10_000, "output_tokens": 500}
    reply = tool_use(("record_notes", {"items": []}), usage=usage)
    t = NOW - timedelta(hours=2)
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + line("e1", "user", "hi", t))
    k.api.enqueue(reply)
    direct = k.run(since=NOW - timedelta(days=1)).record.cost_usd
    with sqlite3.connect(k.ws.root / ".crustacean/state.db") as db:
        db.execute("DELETE FROM collect_ids")
        db.execute("DELETE FROM collect_cursors")
    k.api.enqueue(reply)
    k.run(batch=True)
    k.api.end_batches()
    batched = k.run().record.cost_usd
    assert direct > 0 and batched == pytest.approx(direct / 2)


def test_batch_with_dry_run_is_a_usage_error(k: Kit) -> None:
    t = NOW - timedelta(hours=2)
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + line("e1", "user", "hi", t))
    before = snapshot(k.ws.root)
    with pytest.raises(UsageError, match="--batch cannot be combined with --dry-run"):
        k.run(batch=True, dry_run=True)
    out = run_cli("-w", str(k.ws.root), "collect", "--batch", "--dry-run", code=2, env=k.env)
    assert "Error: --batch cannot be combined with --dry-run" in out.stderr
    assert snapshot(k.ws.root) == before and k.api.requests == []


# ------------------------------------------------------------------ progress


def test_progress_reports_each_chunk(k: Kit) -> None:
    big_transcript(k.home, 80)
    seen: list[Progress] = []
    k.api.enqueue(*[echo] * 4)
    k.run(progress=seen.append)
    assert [p.chunks_sent for p in seen] == [1, 2, 3, 4]
    assert all(p.chunks_total == 4 for p in seen) and seen[-1].items == 80
    assert seen[-1].input_tokens > seen[0].input_tokens > 0


# ------------------------------------------------------------------ curate sees backfills


def route_all(body: dict[str, Any]) -> dict[str, Any]:
    """A curate model that skips every listed entry (so each is marked seen), then finishes."""
    listed = prompt_of(body).split("<entries>", 1)[1].split("</entries>", 1)[0]
    ids = re.findall(r"^- \[([0-9a-f]{12})\]", listed, re.M)
    routing = [{"id": i, "destination": "skip", "reason": "seen"} for i in ids]
    return tool_use(("record_routing", {"entries": routing}), ("finish", {"summary": "done"}))


def test_curate_sees_a_backfilled_old_day_and_compile_waits_for_it(k: Kit) -> None:
    from crustacean.stages.compile import compile_workspace
    from crustacean.stages.curate import curate

    old = NOW - timedelta(days=40)
    (sessions_dir(k.home) / "s.jsonl").write_text(
        header("s", old)
        + line("e1", "user", "note-1 forty days ago", old)
        + line("e2", "user", "note-2 today", NOW - timedelta(hours=1))
    )
    one = k.live()
    k.api.enqueue(echo, echo)
    k.run(one)
    k.run(one, since=NOW - timedelta(days=41))
    old_log = f"memory/{old.date()}.md"
    assert (k.ws.root / old_log).exists()
    held = compile_workspace(one, env=k.env, clock=lambda: NOW, no_model=True)
    assert held.ops.archived == [] and held.ops.held == [
        f"{old_log}: 1 uncurated entry from a collect backfill; archived once curate has seen them"
    ]
    assert (k.ws.root / old_log).exists()
    out = run_cli("-w", str(k.ws.root), "compile", "--no-model", env=k.env).stdout
    assert f"not archived: {old_log}: 1 uncurated entry" in out
    k.api.enqueue(route_all)
    curated = curate(one, env=k.env, clock=lambda: NOW + timedelta(minutes=1))
    listed = k.api.messages()[-1].body["messages"][0]["content"]
    assert curated.entries == 2 and str(old.date()) in json.dumps(listed)
    archived = compile_workspace(
        one, env=k.env, clock=lambda: NOW + timedelta(minutes=2), no_model=True
    )
    assert archived.ops.held == [] and len(archived.ops.archived) == 1
    assert not (k.ws.root / old_log).exists()


def test_old_notes_a_budget_left_behind_are_read_again_next_run(k: Kit) -> None:
    """Plain notes have no lines to stop before: one left unsent keeps no usable cursor, so it is
    read whole again, even though it is older than any window."""
    import os

    notes_dir = k.home / "notes"
    notes_dir.mkdir()
    old = (NOW - timedelta(days=6)).timestamp()
    for i in range(60):
        note = notes_dir / f"n{i:02d}.md"
        note.write_text(f"note-{i} " + "a thought about the garden plan " * 95)
        os.utime(note, (old, old))
    toml = k.ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + f'\n[[sources]]\nkind = "plain"\npath = "{notes_dir}"\n')
    small = k.live("budget.max_turns=1")
    k.api.enqueue(*[echo] * 10)
    first = k.run(small, since=NOW - timedelta(days=7))
    assert first.record.status == "partial" and first.chunks > 1
    runs = [first]
    while runs[-1].record.status == "partial":
        runs.append(k.run(small))
        assert len(runs) < 10
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(60)}
    assert k.run(small).record.status == "skipped"


def test_the_cli_shows_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from crustacean.cli import stages_cmd

    assert stages_cmd._progress() is None  # tests run without a terminal
    screen = io.StringIO()
    monkeypatch.setattr(stages_cmd, "err_console", Console(file=screen, force_terminal=True))
    show = stages_cmd._progress()
    assert callable(show)
    show(Progress(1, 3, 4, 12_000))
    show(Progress(3, 3, 9, 30_000))
    out = screen.getvalue()
    assert "collect: chunk 1/3, 4 item(s), 12,000 input tokens\r" in out
    assert out.endswith("collect: chunk 3/3, 9 item(s), 30,000 input tokens\n")


def test_a_crash_after_a_batch_append_neither_loses_nor_repeats(
    k: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crustacean.stages import collect_batch

    big_transcript(k.home, 40)
    one = k.live()
    k.api.enqueue(*[echo] * 2)
    k.run(one, batch=True)
    k.api.end_batches()
    real = collect_batch.finish_batch

    def killed(*args: Any, **kw: Any) -> None:
        raise KeyboardInterrupt("killed after the batch's append")

    monkeypatch.setattr(collect_batch, "finish_batch", killed)
    with pytest.raises(KeyboardInterrupt):
        k.run(one)
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(40)}  # the append landed
    monkeypatch.setattr(collect_batch, "finish_batch", real)
    again = k.run(one)  # finds the marker: finishes the batch instead of fetching it again
    assert again.recovered and again.record.status == "skipped"
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(40)}
    assert k.api.messages() == []
    with sqlite3.connect(k.ws.root / ".crustacean/state.db") as db:
        assert db.execute("SELECT count(*) FROM collect_sent_batches").fetchone() == (0,)


def test_tick_fetches_a_finished_batch(k: Kit) -> None:
    from crustacean.ops.tick import tick

    big_transcript(k.home, 40)
    off = [f"stages.{s}.enabled=false" for s in ("curate", "compile", "calibrate")]
    one = k.live(*off)
    k.api.enqueue(*[echo] * 2)
    submitted = k.run(one, batch=True)
    k.api.end_batches()
    later = NOW + timedelta(hours=3)  # the next collect slot has come
    done = tick(one, env=k.env, clock=lambda: later)
    assert [(o.stage, o.status) for o in done.outcomes if o.status] == [("collect", "ok")]
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(40)}
    assert submitted.batch and k.api.messages() == []


def test_a_batch_the_api_lost_is_released_and_sent_again(k: Kit) -> None:
    t = NOW - timedelta(hours=2)
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + line("e1", "user", "note-1", t))
    one = k.live()
    k.api.enqueue(echo)
    batch_id = k.run(one, batch=True).batch["submitted"]  # type: ignore[index]  # a batch run sets .batch
    del k.api.batches[batch_id]  # expired results, or deleted: the API answers 404
    k.api.enqueue(echo)
    result = k.run(one)
    assert result.batch and result.batch["released_chunks"] == 1
    assert len(k.api.messages()) == 1 and logged(k.ws.root) == {"note-1": 1}


def test_an_answer_cut_at_max_tokens_is_not_trusted_and_the_chunk_goes_again_in_halves(
    k: Kit,
) -> None:
    t = NOW - timedelta(hours=3)
    lines = [
        line(f"e{i}", "user", f"note-{i} item {i}", t + timedelta(minutes=i)) for i in range(6)
    ]
    (sessions_dir(k.home) / "s.jsonl").write_text(header("s", t) + "".join(lines))
    cut = tool_use(
        (
            "record_notes",
            {"items": [{"category": "fact", "text": "Noted note-0.", "refs": ["m1"]}]},
        ),
        stop_reason="max_tokens",
    )
    k.api.enqueue(cut, echo, echo)
    result = k.run()
    assert result.record.status == "ok", result.record.error
    assert result.chunks_sent == 2
    assert logged(k.ws.root) == {f"note-{i}": 1 for i in range(6)}
    assert [len(NOTE.findall(section(r.body))) for r in k.api.messages()] == [6, 3, 3]
