"""Transcript sources: parsing each format, cursors, bad input, big files and discovery.

Fixtures under tests/fixtures/transcripts are real-shaped sessions written from REFERENCE.md
§2.1 (OpenClaw) and §3.1 (Claude Code). Fake credentials are built by concatenation so this
file never holds a literal one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from crustacean.config import SourceConfig
from crustacean.sources import (
    Cursor,
    Message,
    ReadResult,
    default_sources,
    detect_kind,
    discover,
    read_new,
)
from crustacean.sources import base as sources_base
from crustacean.sources.base import MAX_TEXT, TOOL_LINE_MAX, TRUNCATED
from crustacean.sources.plain import strip_frontmatter

FIX = Path(__file__).parent / "fixtures" / "transcripts"
OC_MAIN = FIX / "openclaw" / "agents" / "main" / "sessions"
OC_COACH = FIX / "openclaw" / "agents" / "coach" / "sessions"
CC_PROJ = FIX / "claude" / "projects" / "-Users-maya-code-tidepool"
NOTES = FIX / "plain" / "notes"

RESET_ID = "4b1e7c2a-9d3f-4e51-a0c8-2f6d9e1b7a44"
RESET_FILE = f"{RESET_ID}.jsonl.reset.2026-11-24T03-00-00.000Z"
MAIN_ID = "8e2f0b71-5c3a-4d9e-b6f1-0a7c3e9d2b58"
TOPIC_ID = "c41d9a3e-7b2f-4f60-9e85-5d1a8b3c6f27"
BARE_ID = "2b8d4f6a-0c1e-4a3b-9d7f-6e5c8a2b1d03"
CC_S1 = "0f6b2d84-3c1a-4e97-b5d2-8a9c7e1f4b36"
CC_S2 = "7d3e9b15-6a2c-4f81-9e40-b3c5d7e9f1a2"
FAKE_KEY = "sk-ant-" + "api03-" + "Zq9xLp3Wm7" * 4

# (file, kind, session, source, [(line, role, text prefix)]) for every conversation fixture.
EXPECTED: list[tuple[Path, str, str, str, list[tuple[int, str, str]]]] = [
    (
        OC_MAIN / RESET_FILE,
        "openclaw",
        RESET_ID,
        "openclaw:main",
        [
            (4, "user", "[Telegram Maya Lindqvist (@mayalq)"),
            (5, "assistant", "Will do — I'll nudge you Friday"),
            (5, "tool", "[tool write memory/2026-11-23.md]"),
            (6, "tool", "[tool result write: ok]"),
            (8, "user", "Priya's birthday is Dec 3."),
            (9, "assistant", "A few ideas under €60:"),
            (10, "user", "yes, and go with the taster class"),
            (11, "assistant", "Noted: Priya's birthday is 3 Dec"),
            (11, "tool", "[tool edit memory/contacts/telegram-priya.md]"),
        ],
    ),
    (
        OC_MAIN / f"{MAIN_ID}.jsonl",
        "openclaw",
        MAIN_ID,
        "openclaw:main",
        [
            (3, "user", "morning. the dentist moved my cleaning"),
            (4, "assistant", "Ugh, sorry. I've put Dr. Brandt"),
            (4, "tool", "[tool cron dentist-reminder]"),
            (5, "tool", '[tool result cron: {"ok":true'),
            (8, "user", "Jonas and I are doing Lisbon Dec 11–14."),
            (9, "tool", "[tool web_search Alfama guesthouse"),
            (10, "tool", "[tool result web_search: 1. Casa das Janelas"),
            (11, "assistant", "Two fit the budget:"),
            (12, "user", "Casa das Janelas, yes. Jonas is vegetarian"),
            (13, "assistant", "Great choice. Noted that Jonas is vegetarian"),
            (15, "user", "this is the running plan the physio gave me\n[image]"),
            (16, "assistant", "Got it: 3 easy runs a week"),
            (19, "user", "can you check if the shared grocery list"),
            (20, "tool", "[tool exec ssh pi@groceries.local"),
            (21, "tool", "[tool result exec: error: ssh: connect to host"),
            (22, "assistant", "I couldn't reach the Pi"),
            (23, "user", "yes, 8pm. and idea for later"),
            (24, "assistant", "Reminder set for 20:00 tonight."),
        ],
    ),
    (
        OC_MAIN / f"{TOPIC_ID}-topic-42.jsonl",
        "openclaw",
        f"{TOPIC_ID}-topic-42",
        "openclaw:main",
        [
            (2, "user", "[Telegram Lisbon crew #trip id:-1001823467712 topic:42] Jonas:"),
            (4, "user", "[Telegram Lisbon crew #trip id:-1001823467712 topic:42] Priya:"),
            (5, "user", "[Telegram Lisbon crew #trip id:-1001823467712 topic:42] Maya:"),
            (6, "assistant", "First Sintra train from Rossio"),
        ],
    ),
    (
        OC_COACH / f"{BARE_ID}.jsonl",
        "openclaw",
        BARE_ID,
        "openclaw:coach",
        [
            (1, "user", "which shoes for the half?"),
            (2, "tool", "[tool web_search best stability running shoes"),
            (3, "tool", "[tool result web_search: Brooks Adrenaline GTS 25"),
            (4, "assistant", "At 700 km the Pegasus are done."),
            (6, "user", "I'll try the Brooks on Saturday"),
            (7, "assistant", "Good plan. Bring your own socks"),
        ],
    ),
    (
        CC_PROJ / f"{CC_S1}.jsonl",
        "claude_code",
        "",  # two sessions in one file: checked per message below
        "claude-code:-Users-maya-code-tidepool",
        [
            (5, "user", "the tide chart renders times in UTC."),
            (7, "assistant", "Let me look at how the chart formats times."),
            (8, "tool", "[tool Read /Users/maya/code/tidepool/src/chart/formatTime.ts]"),
            (9, "tool", "[tool result Read: 1 import { format } from 'date-fns']"),
            (10, "tool", "[tool Edit /Users/maya/code/tidepool/src/chart/formatTime.ts]"),
            (11, "tool", "[tool result Edit: The file /Users/maya/code/tidepool/src/chart/"),
            (12, "assistant", "I switched `formatTime` to `formatInTimeZone`"),
            (13, "user", "yes. and note for the future: I prefer date-fns over moment"),
            (14, "assistant", "Understood — date-fns only, no moment."),
            (15, "tool", "[tool Bash npm test -- formatTime]"),
            (16, "tool", "[tool result Bash: error: FAIL src/chart/formatTime.test.ts]"),
            (19, "user", "picking this up again: the DST test still fails"),
            (20, "assistant", "Both come from the same bug"),
            (21, "tool", "[tool Agent Find day-boundary code]"),
            (22, "tool", "[tool result Agent: Three places: src/chart/days.ts:14"),
            (23, "assistant", "Fixed all three to use the station timezone"),
        ],
    ),
    (
        CC_PROJ / CC_S1 / "subagents" / "agent-a7f3c1.jsonl",
        "claude_code",
        CC_S2,
        "claude-code:-Users-maya-code-tidepool",
        [
            (1, "user", "(subagent) Find every place that computes a day boundary"),
            (2, "tool", "(subagent) [tool Grep src]"),
            (3, "tool", "(subagent) [tool result Grep: Found 3 files]"),
            (4, "assistant", "(subagent) Three places: src/chart/days.ts:14"),
        ],
    ),
]


def read_all(path: Path, kind: str) -> ReadResult:
    """A first read, with no cursor."""
    return read_new(path, kind, None)


def records(path: Path) -> list[Any]:
    """The JSON records of a fixture, one per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def every_fixture_message() -> list[Message]:
    return [m for path, kind, *_ in EXPECTED for m in read_all(path, kind).messages]


def append(path: Path, *lines: Any, newline: bool = True) -> None:
    """Append JSON records (or raw bytes) to a transcript."""
    with open(path, "ab") as fh:
        for line in lines:
            data = line if isinstance(line, bytes) else json.dumps(line).encode()
            fh.write(data + (b"\n" if newline else b""))


def oc_user(text: str, ts: str = "2026-11-26T10:00:00.000Z", rid: str = "") -> dict[str, Any]:
    """A wrapped OpenClaw user message line."""
    record: dict[str, Any] = {
        "type": "message",
        "timestamp": ts,
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    }
    if rid:
        record["id"] = rid
    return record


def oc_call(name: str, arguments: dict[str, Any], rid: str) -> dict[str, Any]:
    """An OpenClaw assistant entry holding one tool call."""
    call = {"type": "toolCall", "id": "c1", "name": name, "arguments": arguments}
    return {"type": "message", "id": rid, "message": {"role": "assistant", "content": [call]}}


def cc(kind: str, content: Any, uid: str, ts: str = "2026-11-26T10:00:00Z") -> dict[str, Any]:
    """A Claude Code record of session "s"."""
    message = {"role": kind, "content": content}
    return {"type": kind, "uuid": uid, "sessionId": "s", "timestamp": ts, "message": message}


@pytest.fixture
def oc_copy(tmp_path: Path) -> Path:
    """A writable copy of the main OpenClaw session (sessions.json beside it)."""
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    shutil.copy(OC_MAIN / "sessions.json", folder)
    return Path(shutil.copy(OC_MAIN / f"{MAIN_ID}.jsonl", folder))


# ---------------------------------------------------------------- parsing the fixtures


@pytest.mark.parametrize(
    ("path", "kind", "session", "source", "expected"),
    EXPECTED,
    ids=[p.name[:24] for p, *_ in EXPECTED],
)
def test_fixture_parses_to_expected_messages(
    path: Path, kind: str, session: str, source: str, expected: list[tuple[int, str, str]]
) -> None:
    assert detect_kind(path) == kind
    result = read_all(path, kind)
    got = [(m.line, m.role, m.text) for m in result.messages]
    assert [(line, role) for line, role, _ in got] == [(line, role) for line, role, _ in expected]
    for (_, _, text), (_, _, prefix) in zip(got, expected, strict=True):
        assert text.startswith(prefix), (text, prefix)
    assert result.bad_lines == 0
    assert not result.restarted
    assert result.lines_read == len(path.read_bytes().splitlines())
    assert {m.source for m in result.messages} == {source}
    assert {m.path for m in result.messages} == {str(path)}
    if session:
        assert {m.session for m in result.messages} == {session}


def test_every_timestamp_is_aware_utc_and_in_late_november() -> None:
    for m in every_fixture_message():
        assert m.timestamp.tzinfo is not None and m.timestamp.utcoffset().total_seconds() == 0
        assert (
            datetime(2026, 11, 23, tzinfo=UTC) <= m.timestamp < datetime(2026, 11, 27, tzinfo=UTC)
        )


def test_ids_are_unique_and_stable_across_reads() -> None:
    first = [m.id for m in every_fixture_message()]
    assert len(first) == len(set(first))
    assert [m.id for m in every_fixture_message()] == first


def test_noise_never_reaches_the_model() -> None:
    texts = "\n".join(m.text for m in every_fixture_message())
    for noise in (
        "NO_REPLY",
        "HEARTBEAT_OK",
        "Read HEARTBEAT.md",
        "Pre-compaction memory flush",
        "/model opus",
        "/reset",
        "<system>",
        "Current time:",
        "<tool_call>",
        "User wants a reminder",  # a thinking block
        "Need to look at src/chart",  # a Claude thinking block
        "<command-name>",
        "<local-command-stdout>",
        "Caveat: The messages below",
        "Request interrupted",
        "Tide chart shows UTC instead of local time",  # a summary record
        "Conversation compacted",  # a system record
        "iVBORw0KGgo",  # image data
    ):
        assert noise not in texts, noise


def test_openclaw_wrapped_ids_are_session_scoped_entry_ids() -> None:
    path = OC_MAIN / f"{MAIN_ID}.jsonl"
    entry_ids = [r.get("id") for r in records(path)]
    msgs = read_all(path, "openclaw").messages
    for m in msgs:
        base_id, _, call = m.id.partition("#")
        assert base_id == f"{MAIN_ID}/{entry_ids[m.line - 1]}"
        assert call in ("", "1")  # tool calls of an assistant entry are numbered
    assert msgs[2].id == msgs[1].id + "#1"


def test_openclaw_falls_back_to_message_timestamp_ms() -> None:
    path = OC_MAIN / f"{MAIN_ID}.jsonl"
    line = next(i for i, r in enumerate(records(path), 1) if "timestamp" not in r)
    (m,) = [m for m in read_all(path, "openclaw").messages if m.line == line]
    assert m.timestamp == datetime(2026, 11, 25, 8, 14, 9, 330000, tzinfo=UTC)


def test_openclaw_bare_lines_get_sha1_ids_from_name_session_and_line() -> None:
    path = OC_COACH / f"{BARE_ID}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    msgs = read_all(path, "openclaw").messages
    first = msgs[0]
    want = hashlib.sha1(f"{path.name}\0{BARE_ID}\0{lines[0]}".encode()).hexdigest()
    assert first.id == want
    assert first.timestamp == datetime(2026, 11, 26, 6, 48, 10, tzinfo=UTC)


@pytest.mark.parametrize("original", [OC_MAIN / RESET_FILE, OC_COACH / f"{BARE_ID}.jsonl"])
def test_reset_rename_keeps_session_and_ids(tmp_path: Path, original: Path) -> None:
    """`/new` renames `<id>.jsonl` to `<id>.jsonl.reset.<ts>`: nothing may look new."""
    stem = original.name.split(".jsonl")[0]
    live = Path(shutil.copy(original, tmp_path / f"{stem}.jsonl"))
    reset = Path(shutil.copy(original, tmp_path / f"{stem}.jsonl.reset.2026-11-27T03-00-00.000Z"))
    before, after = read_all(live, "openclaw").messages, read_all(reset, "openclaw").messages
    assert [(m.id, m.session, m.text) for m in before] == [(m.id, m.session, m.text) for m in after]


def test_topic_file_is_its_own_session_and_no_reply_is_stripped() -> None:
    msgs = read_all(OC_MAIN / f"{TOPIC_ID}-topic-42.jsonl", "openclaw").messages
    assert {m.session for m in msgs} == {f"{TOPIC_ID}-topic-42"}
    assert all(m.id.startswith(f"{TOPIC_ID}-topic-42/") for m in msgs)
    assert msgs[-1].text.endswith("before the crowds.")  # the trailing NO_REPLY token is gone


@pytest.mark.parametrize(
    "name",
    [
        "e9a7c5b3-1f2d-4a6e-8c0b-3d5f7e9a1c24.jsonl",  # first user message starts "[cron:"
        "5a3c1e9f-2b4d-4c6e-8f0a-7b9d1c3e5f62.jsonl",  # key in sessions.json is agent:main:cron:…
    ],
)
def test_cron_sessions_are_skipped_whole(name: str) -> None:
    result = read_all(OC_MAIN / name, "openclaw")
    assert result.messages == ()
    assert result.bad_lines == 0
    assert result.lines_read == len(records(OC_MAIN / name))


def test_cron_index_only_counts_next_to_the_file(tmp_path: Path) -> None:
    """Without sessions.json the curate run is just a conversation (no other signal)."""
    name = "5a3c1e9f-2b4d-4c6e-8f0a-7b9d1c3e5f62.jsonl"
    copy = Path(shutil.copy(OC_MAIN / name, tmp_path / name))
    assert [m.role for m in read_all(copy, "openclaw").messages] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("file_name", "header", "first_user"),
    [
        ("a1.jsonl", {"label": "Cron: nightly digest"}, "Summarise the inbox"),
        ("a2.jsonl", {"sessionKey": "agent:main:cron:digest:run:42"}, "Summarise the inbox"),
        ("a3.jsonl", {"label": "heartbeat"}, "Check the calendar"),
        ("heartbeat-a4.jsonl", {}, "Check the calendar"),
        ("a5.jsonl", {}, "[cron:digest Daily digest] Summarise the inbox"),
    ],
)
def test_automation_sessions_detected_by_header_name_or_prompt(
    tmp_path: Path, file_name: str, header: dict[str, str], first_user: str
) -> None:
    path = tmp_path / file_name
    head = {"type": "session", "version": 3, "id": "s-" + file_name[:-6], **header}
    head["timestamp"] = "2026-11-26T04:00:00.000Z"
    append(path, head, oc_user(first_user, rid="u1"), oc_user("and mail me the result", rid="u2"))
    assert read_all(path, "openclaw").messages == ()


def test_claude_code_two_sessions_in_one_file_keep_their_own_ids() -> None:
    path = CC_PROJ / f"{CC_S1}.jsonl"
    uuids = {r["uuid"]: r["sessionId"] for r in records(path) if "uuid" in r}
    msgs = read_all(path, "claude_code").messages
    for m in msgs:
        assert uuids[m.id] == m.session  # uuid is the id; one message per record here
    by_session = {s: [m.line for m in msgs if m.session == s] for s in (CC_S1, CC_S2)}
    assert by_session[CC_S1] == [5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert by_session[CC_S2] == [19, 20, 21, 22, 23]


def test_claude_code_tool_results_inside_user_records_are_tool_lines() -> None:
    msgs = read_all(CC_PROJ / f"{CC_S1}.jsonl", "claude_code").messages
    user_records_with_results = [m for m in msgs if m.text.startswith("[tool result")]
    assert {m.role for m in user_records_with_results} == {"tool"}
    assert all(len(m.text) <= TOOL_LINE_MAX for m in msgs if m.role == "tool")
    assert not any(m.role == "user" and "tool_result" in m.text for m in msgs)


def test_claude_code_summary_only_file_has_no_messages_and_no_bad_lines() -> None:
    result = read_all(CC_PROJ / "9c1e5a7b-2d4f-4a6c-8e0b-1f3a5c7e9b2d.jsonl", "claude_code")
    assert (result.messages, result.bad_lines, result.lines_read) == ((), 0, 2)


def test_claude_code_record_with_several_blocks_numbers_extra_messages(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    content = [
        {"type": "text", "text": "Running the tests now."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}},
    ]
    append(path, cc("assistant", content, "u-1"))
    msgs = read_all(path, "claude_code").messages
    assert [(m.id, m.role, m.text) for m in msgs] == [
        ("u-1", "assistant", "Running the tests now."),
        ("u-1#1", "tool", "[tool Bash pytest -q]"),
    ]


def test_plain_notes_are_one_message_each(tmp_path: Path) -> None:
    notes = Path(shutil.copytree(NOTES, tmp_path / "notes"))
    groceries = notes / "2026-11-23-groceries.md"
    mtime = datetime(2026, 11, 23, 17, 20, tzinfo=UTC)
    os.utime(groceries, (mtime.timestamp(), mtime.timestamp()))
    result = read_all(groceries, "plain")
    (m,) = result.messages
    content = groceries.read_bytes()
    assert m.role == "user" and m.line == 1 and m.session == "2026-11-23-groceries"
    assert m.timestamp == mtime
    assert m.source == "plain:notes"
    assert m.text.startswith("# Groceries (week of 23 Nov)")  # frontmatter dropped
    assert "tags:" not in m.text
    assert m.id == hashlib.sha1(str(groceries).encode() + b"\0" + content).hexdigest()
    assert result.cursor.offset == result.cursor.size == len(content)


# ---------------------------------------------------------------- cursors


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (OC_MAIN / f"{MAIN_ID}.jsonl", "openclaw"),
        (CC_PROJ / f"{CC_S1}.jsonl", "claude_code"),
        (NOTES / "gift-ideas.txt", "plain"),
    ],
)
def test_second_read_from_the_cursor_yields_nothing(path: Path, kind: str) -> None:
    first = read_all(path, kind)
    again = read_new(path, kind, first.cursor)
    assert first.messages
    assert (again.messages, again.bad_lines, again.restarted, again.lines_read) == ((), 0, False, 0)
    assert again.cursor == first.cursor


def test_appended_lines_are_all_that_is_read(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    n = first.cursor.lines
    append(
        oc_copy, oc_user("book the Sintra train for 08:11", rid="n1"), oc_user("thanks", rid="n2")
    )
    second = read_new(oc_copy, "openclaw", first.cursor)
    assert [(m.line, m.text, m.id) for m in second.messages] == [
        (n + 1, "book the Sintra train for 08:11", f"{MAIN_ID}/n1"),
        (n + 2, "thanks", f"{MAIN_ID}/n2"),
    ]
    assert second.lines_read == 2 and not second.restarted
    assert second.cursor.offset == oc_copy.stat().st_size


def test_small_file_growing_past_its_first_kb_does_not_restart(tmp_path: Path) -> None:
    """The head hash covers consumed bytes only, so a 200-byte file may grow."""
    path = tmp_path / "tiny.jsonl"
    append(path, oc_user("hi", rid="a"))
    first = read_all(path, "openclaw")
    append(path, *[oc_user("x" * 100, rid=f"b{i}") for i in range(20)])
    second = read_new(path, "openclaw", first.cursor)
    assert not second.restarted and len(second.messages) == 20


def test_a_line_without_newline_waits_until_it_is_complete(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    line = json.dumps(oc_user("half-written", rid="p1")).encode()
    append(oc_copy, line[:40], newline=False)
    partial = read_new(oc_copy, "openclaw", first.cursor)
    assert (partial.messages, partial.bad_lines, partial.lines_read) == ((), 0, 0)
    assert partial.cursor.offset == first.cursor.offset
    append(oc_copy, line[40:])
    done = read_new(oc_copy, "openclaw", partial.cursor)
    assert [m.text for m in done.messages] == ["half-written"]
    assert done.cursor.offset == oc_copy.stat().st_size


def test_rotated_file_restarts_and_keeps_ids(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    rotated = oc_copy.with_name(oc_copy.name + ".reset.2026-11-26T03-00-00.000Z")
    oc_copy.rename(rotated)
    new_header = {"type": "session", "version": 3, "id": "fresh-session"}
    append(
        oc_copy, new_header | {"timestamp": "2026-11-26T03:00:01Z"}, oc_user("new day", rid="d1")
    )
    fresh = read_new(oc_copy, "openclaw", first.cursor)
    assert fresh.restarted
    assert [(m.session, m.text, m.line) for m in fresh.messages] == [
        ("fresh-session", "new day", 2)
    ]
    old = read_new(rotated, "openclaw", None)  # the renamed file is found as a new path
    assert [m.id for m in old.messages] == [m.id for m in first.messages]


def test_a_cursor_follows_its_file_across_a_rename(oc_copy: Path) -> None:
    """The cursor names the file by device+inode, so the caller may hand the old cursor to the
    `.reset.` path it finds after `/new` and read nothing twice."""
    first = read_all(oc_copy, "openclaw")
    rotated = oc_copy.rename(oc_copy.with_name(oc_copy.name + ".reset.2026-11-26T03-00-00.000Z"))
    again = read_new(rotated, "openclaw", first.cursor)
    assert (again.messages, again.restarted) == ((), False)
    assert again.cursor.path == str(rotated)


def test_a_cursor_without_the_optional_fields_still_resumes(oc_copy: Path) -> None:
    """`lines` and `mtime_ns` default to 0: resuming works, line numbers count from the cursor."""
    full = read_all(oc_copy, "openclaw").cursor
    bare = Cursor(full.path, full.device, full.inode, full.offset, full.size, full.head_hash)
    append(oc_copy, oc_user("late note", rid="z"))
    (m,) = read_new(oc_copy, "openclaw", bare).messages
    assert (m.text, m.line) == ("late note", 1)


def test_replaced_file_with_same_content_restarts_with_same_ids(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    data = oc_copy.read_bytes()
    oc_copy.unlink()
    oc_copy.write_bytes(data)  # a new inode
    again = read_new(oc_copy, "openclaw", first.cursor)
    if oc_copy.stat().st_ino == first.cursor.inode:  # the filesystem reused the inode
        again = read_new(oc_copy, "openclaw", _with(first.cursor, inode=-1))
    assert again.restarted
    assert [m.id for m in again.messages] == [m.id for m in first.messages]


def test_truncated_file_restarts_from_zero(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    data = oc_copy.read_bytes()
    with open(oc_copy, "r+b") as fh:
        fh.truncate(len(data) // 3)
    shrunk = read_new(oc_copy, "openclaw", first.cursor)
    assert shrunk.restarted
    assert shrunk.cursor.offset <= len(data) // 3
    oc_copy.write_bytes(data)  # same inode, written again
    regrown = read_new(oc_copy, "openclaw", shrunk.cursor)
    assert not regrown.restarted
    assert [m.id for m in shrunk.messages + regrown.messages] == [m.id for m in first.messages]


def test_rewritten_head_restarts_even_on_the_same_inode(oc_copy: Path) -> None:
    first = read_all(oc_copy, "openclaw")
    with open(oc_copy, "r+b") as fh:
        fh.seek(20)
        fh.write(b"X")
    assert read_new(oc_copy, "openclaw", first.cursor).restarted


def test_since_drops_old_messages_but_still_advances(oc_copy: Path) -> None:
    since = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
    result = read_new(oc_copy, "openclaw", None, since=since)
    assert result.messages and all(m.timestamp >= since for m in result.messages)
    assert result.cursor.offset == oc_copy.stat().st_size
    naive = read_new(oc_copy, "openclaw", None, since=since.replace(tzinfo=None))
    assert naive.messages == result.messages


def test_since_skips_old_records_but_a_new_tool_result_keeps_its_tool_name(tmp_path: Path) -> None:
    """Old records are skipped before any text work (a first run over months stays fast), yet a
    Claude Code tool call from before the window still names the result that comes after it."""
    path = tmp_path / "s.jsonl"
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make test"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "3 passed"}
    append(
        path,
        cc("assistant", [call], "u1", "2026-11-01T10:00:00Z"),
        cc("user", [result], "u2", "2026-11-29T10:00:00Z"),
    )
    got = read_new(path, "claude_code", None, since=datetime(2026, 11, 28, tzinfo=UTC))
    assert [m.text for m in got.messages] == ["[tool result Bash: 3 passed]"]
    assert got.cursor.offset == path.stat().st_size and got.bad_lines == 0


def test_a_tool_result_read_after_a_cursor_keeps_its_tool_name(tmp_path: Path) -> None:
    """Before: reading resumed after the tool call, so its result lost the tool's name."""
    path = tmp_path / "s.jsonl"
    call = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}
    append(path, cc("assistant", [call], "u1", "2026-11-29T10:00:00Z"))
    first = read_new(path, "claude_code", None)
    assert [m.text for m in first.messages] == ["[tool Bash ls]"]
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "notes.md"}
    append(path, cc("user", [result], "u2", "2026-11-29T10:01:00Z"))
    later = read_new(path, "claude_code", first.cursor)
    assert not later.restarted
    assert [m.text for m in later.messages] == ["[tool result Bash: notes.md]"]


def test_plain_note_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    note = Path(shutil.copy(NOTES / "gift-ideas.txt", tmp_path / "gift-ideas.txt"))
    first = read_all(note, "plain")
    assert read_new(note, "plain", first.cursor).messages == ()
    note.write_text(note.read_text().replace("Jonas (xmas)", "Jonas (bday)"))  # same size
    os.utime(note, ns=(first.cursor.mtime_ns + 10**9, first.cursor.mtime_ns + 10**9))
    edited = read_new(note, "plain", first.cursor)
    (m,) = edited.messages
    assert edited.restarted and m.id != first.messages[0].id and "Jonas (bday)" in m.text


# ---------------------------------------------------------------- bad input


BAD_LINES = [
    b"\xff\xfe not utf-8 \x80",
    b"[1, 2, 3]",
    b'"just a string"',
    b"42",
    b"null",
    b'{"content": "a dict without role or type"}',
    b'{"type": "message", "message": {"content": "wrapped, no role"}}',
    b'{"type": "message", "id": "m9", "timestamp": "2026-11-26T10:00:00Z", "mess',
    b"[" * 100_000 + b"]" * 100_000,
]


CLAUDE_BAD = [
    b'{"type": "user", "message": "not a dict"}',
    b'{"uuid": "u", "sessionId": "s"}',
    b"[]",
    b"\xc3\x28",
]


@pytest.mark.parametrize(
    ("kind", "bad", "record"),
    [
        ("openclaw", BAD_LINES, lambda text, rid: oc_user(text, rid=rid)),
        ("claude_code", CLAUDE_BAD, lambda text, rid: cc("user", text, rid)),
    ],
)
def test_bad_lines_are_skipped_and_counted_never_raised(
    tmp_path: Path, kind: str, bad: list[bytes], record: Any
) -> None:
    path = tmp_path / "bad.jsonl"
    append(path, record("before", "a"), *bad, b"", b"   ", record("after", "b"))
    result = read_all(path, kind)
    assert [m.text for m in result.messages] == ["before", "after"]
    assert result.bad_lines == len(bad)  # blank lines are not bad
    assert result.cursor.offset == path.stat().st_size


def test_odd_but_valid_content_shapes_do_not_raise(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    append(
        path,
        {"type": "message", "message": {"role": "user", "content": 42}},
        {"type": "message", "message": {"role": "assistant", "content": [None, 7, "hi"]}},
        {"type": "message", "message": {"role": "toolResult", "content": {"x": 1}}},
        {"type": "message", "message": {"role": "system", "content": "ignored"}},
        {
            "type": "message",
            "timestamp": "not a date",
            "message": {"role": "user", "content": "ok"},
        },
    )
    result = read_all(path, "openclaw")
    assert [(m.role, m.text) for m in result.messages] == [("assistant", "hi"), ("user", "ok")]
    assert result.bad_lines == 0


@pytest.mark.parametrize("kind", ["openclaw", "claude_code", "plain"])
def test_empty_file_reads_as_nothing(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("empty.txt" if kind == "plain" else "empty.jsonl")
    path.write_bytes(b"")
    result = read_all(path, kind)
    assert (result.messages, result.bad_lines, result.cursor.offset) == ((), 0, 0)


def test_overlong_line_is_skipped_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources_base, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.jsonl"
    append(path, oc_user("x" * 500, rid="big"), {"role": "user", "content": "short"})
    result = read_all(path, "openclaw")
    assert [m.text for m in result.messages] == ["short"]
    assert result.bad_lines == 1 and result.cursor.offset == path.stat().st_size


def test_plain_binary_and_bad_utf8_notes(tmp_path: Path) -> None:
    binary = tmp_path / "photo.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert (read_all(binary, "plain").messages, read_all(binary, "plain").bad_lines) == ((), 1)
    latin = tmp_path / "latin.md"
    latin.write_bytes("Café with Ana on Friday".encode("latin-1"))
    result = read_all(latin, "plain")
    assert result.bad_lines == 1 and result.messages[0].text == "Caf\ufffd with Ana on Friday"


def test_unknown_kind_is_a_value_error(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="unknown transcript kind"):
        read_new(tmp_path / "x.jsonl", "slack", None)


# ---------------------------------------------------------------- text: secrets and size


def test_api_keys_come_out_redacted_in_every_format(tmp_path: Path) -> None:
    oc = tmp_path / "oc.jsonl"
    append(
        oc,
        oc_user(f"my key is {FAKE_KEY} keep it safe", rid="k1"),
        oc_call("exec", {"command": f"export ANTHROPIC_API_KEY={FAKE_KEY}"}, "k2"),
        {
            "type": "message",
            "id": "k3",
            "message": {"role": "toolResult", "toolName": "exec", "content": f"set {FAKE_KEY}"},
        },
    )
    claude = tmp_path / "cc.jsonl"
    append(claude, cc("user", f"use {FAKE_KEY} for the bench", "u1"))
    note = tmp_path / "keys.md"
    note.write_text(f"staging key: {FAKE_KEY}\n")
    msgs = [
        *read_all(oc, "openclaw").messages,
        *read_all(claude, "claude_code").messages,
        *read_all(note, "plain").messages,
    ]
    assert len(msgs) == 5
    for m in msgs:
        assert FAKE_KEY not in m.text and FAKE_KEY[:20] not in m.text
        assert "[REDACTED:Anthropic API key]" in m.text


def test_long_texts_are_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    append(path, oc_user("word " * 5000, rid="t"), oc_call("write", {"path": "p" * 500}, "c"))
    text, tool = (m.text for m in read_all(path, "openclaw").messages)
    assert len(text) == MAX_TEXT and text.endswith(TRUNCATED)
    assert len(tool) <= TOOL_LINE_MAX and tool.startswith("[tool write ppp") and tool.endswith("]")


# ---------------------------------------------------------------- big files


LINE_TEXT = "npm warn deprecated inflight@1.0.6: leaks memory " * 2000  # ~100 KB per line
BIG_LINES = 2100  # ~206 MB


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ~200 MB transcript of tool results, read once under tracemalloc."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    result_line = {
        "type": "message",
        "timestamp": "2026-11-25T09:00:00Z",
        "message": {"role": "toolResult", "toolName": "exec", "content": LINE_TEXT},
    }
    header = {"type": "session", "id": "big", "timestamp": "2026-11-25T09:00:00Z"}
    line = json.dumps(result_line).encode() + b"\n"
    with open(path, "wb") as fh:
        fh.write(json.dumps(header).encode() + b"\n")
        for _ in range(BIG_LINES):
            fh.write(line)
    tracemalloc.start()
    try:
        result = read_new(path, "openclaw", None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"path": path, "result": result, "peak": peak}


def test_200mb_transcript_is_streamed_with_bounded_memory(big: dict[str, Any]) -> None:
    result, path = big["result"], big["path"]
    assert path.stat().st_size > 200 * 10**6
    assert len(result.messages) == BIG_LINES and result.bad_lines == 0
    assert big["peak"] < 20 * 2**20, big["peak"]


class CountingFile(io.FileIO):
    """A raw file that counts the bytes read through it."""

    total = 0

    def readinto(self, buffer: Any) -> int | None:
        n = super().readinto(buffer)
        CountingFile.total += n or 0
        return n


def test_ten_new_lines_after_a_big_file_touch_only_those_bytes(
    big: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, cursor = big["path"], big["result"].cursor
    new = [oc_user(f"note {i}", rid=f"n{i}") for i in range(10)]
    append(path, *new)
    added = path.stat().st_size - cursor.offset
    CountingFile.total = 0
    monkeypatch.setattr(sources_base, "open_binary", lambda p: io.BufferedReader(CountingFile(p)))
    result = read_new(path, "openclaw", cursor)
    assert result.lines_read == 10 and not result.restarted
    assert [m.text for m in result.messages] == [f"note {i}" for i in range(10)]
    # the session sniff (64 KB), the head hash (1 KB) and one buffer: nowhere near 200 MB
    assert CountingFile.total < added + 128 * 1024, CountingFile.total


# ---------------------------------------------------------------- discovery


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fake HOME holding copies of the fixture trees where the tools keep them."""
    home = tmp_path / "home"
    shutil.copytree(FIX / "openclaw", home / ".openclaw")
    shutil.copytree(FIX / "claude", home / ".claude")
    shutil.copytree(NOTES, home / "notes")
    return home


def names(found: list[tuple[Path, str]]) -> list[tuple[str, str]]:
    return [(p.name, kind) for p, kind in found]


OC_FILES = sorted(
    [
        f"{BARE_ID}.jsonl",
        RESET_FILE,
        "5a3c1e9f-2b4d-4c6e-8f0a-7b9d1c3e5f62.jsonl",
        f"{MAIN_ID}.jsonl",
        f"{TOPIC_ID}-topic-42.jsonl",
        "e9a7c5b3-1f2d-4a6e-8c0b-3d5f7e9a1c24.jsonl",
    ]
)


@pytest.mark.parametrize(
    ("kind", "path", "glob", "expected"),
    [
        ("openclaw", "~/.openclaw", "", OC_FILES),  # cron/runs/*.jsonl left out
        ("openclaw", "~/.openclaw/agents", "", OC_FILES),
        ("openclaw", "~/.openclaw/agents/main/sessions", "", OC_FILES[1:]),
        ("openclaw", "~/.openclaw/agents", "*.jsonl.reset.*", [RESET_FILE]),
        (
            "claude_code",
            "~/.claude",  # history.jsonl left out
            "",
            [f"{CC_S1}.jsonl", "9c1e5a7b-2d4f-4a6c-8e0b-1f3a5c7e9b2d.jsonl", "agent-a7f3c1.jsonl"],
        ),
        ("plain", "~/notes", "", ["2026-11-23-groceries.md", "gift-ideas.txt", "reading-list.md"]),
        ("plain", "~/notes", "*.txt", ["gift-ideas.txt"]),
        ("plain", "~/missing", "", []),
    ],
)
def test_discover(home: Path, kind: str, path: str, glob: str, expected: list[str]) -> None:
    found = discover(SourceConfig(kind=kind, path=path, glob=glob), home)  # type: ignore[arg-type]  # parametrized kinds
    assert sorted(p.name for p, _ in found) == sorted(expected)
    assert {k for _, k in found} <= {kind}
    assert [p for p, _ in found] == sorted(p for p, _ in found)


def test_discover_expands_tilde_from_the_environment(home: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    found = discover(SourceConfig(kind="plain", path="~/notes"))
    assert len(found) == 3 and all(p.is_absolute() for p, _ in found)


def test_discover_auto_detects_each_file(home: Path) -> None:
    found = dict(
        names(discover(SourceConfig(kind="auto", path="~/.openclaw"), home))
        + names(discover(SourceConfig(kind="auto", path="~/.claude"), home))
    )
    assert found[f"{MAIN_ID}.jsonl"] == "openclaw"
    assert found[RESET_FILE] == "openclaw"
    assert found[f"{BARE_ID}.jsonl"] == "openclaw"
    assert found["agent-a7f3c1.jsonl"] == "claude_code"
    assert found["9c1e5a7b-2d4f-4a6c-8e0b-1f3a5c7e9b2d.jsonl"] == "claude_code"
    assert "history.jsonl" not in found and "collect-2h.jsonl" not in found  # unknown shapes
    assert not any(name.endswith((".md", ".txt")) for name in found)  # notes need a glob
    notes = discover(SourceConfig(kind="auto", path="~/notes", glob="**/*.md, **/*.txt"), home)
    assert {k for _, k in notes} == {"plain"} and len(notes) == 3


def test_discover_a_single_file_and_hidden_folders(home: Path) -> None:
    one = f"~/.claude/projects/-Users-maya-code-tidepool/{CC_S1}.jsonl"
    assert names(discover(SourceConfig(kind="auto", path=one), home)) == [
        (f"{CC_S1}.jsonl", "claude_code")
    ]
    found = discover(SourceConfig(kind="plain", path="~/notes", glob="**/*.md"), home)
    assert "old-todo.md" not in [p.name for p, _ in found]  # notes/.trash is hidden


def test_discover_survives_a_symlink_loop(home: Path) -> None:
    (home / "notes" / "again").symlink_to(home / "notes", target_is_directory=True)
    (home / "notes" / "sub").mkdir()
    (home / "notes" / "sub" / "up").symlink_to(home / "notes" / "sub", target_is_directory=True)
    found = discover(SourceConfig(kind="plain", path="~/notes"), home)
    assert sorted(p.name for p, _ in found) == [
        "2026-11-23-groceries.md",
        "gift-ideas.txt",
        "reading-list.md",
    ]


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("a.jsonl", b'{"type":"session","version":3,"id":"x"}\n', "openclaw"),
        ("b.jsonl", b'{"type":"message","message":{"role":"user","content":"hi"}}\n', "openclaw"),
        ("c.jsonl", b'{"role":"assistant","content":[]}\n', "openclaw"),
        ("d.jsonl", b'{"type":"summary","summary":"x","leafUuid":"u"}\n', "claude_code"),
        ("e.jsonl", b'{"type":"user","uuid":"u","sessionId":"s","message":{}}\n', "claude_code"),
        ("f.jsonl", b'not json\n[1]\n{"type":"user","parentUuid":null}\n', "claude_code"),
        ("g.jsonl.reset.2026-11-26T03-00-00.000Z", b'{"type":"session","id":"x"}\n', "openclaw"),
        ("h.jsonl", b"", "unknown"),
        ("i.jsonl", b'{"type":"session","id":"x"}', "unknown"),  # no complete line yet
        ("j.jsonl", b'{"display":"hi","project":"/p","timestamp":1}\n', "unknown"),
        ("l.jsonl", b'{"ts":1,"jobId":"j","action":"finished","sessionId":"s"}\n', "unknown"),
        ("k.jsonl", b"\xff\xfe\n", "unknown"),
        ("notes.md", b"", "plain"),
        ("todo.TXT", b"buy milk", "plain"),
        ("photo.png", b"\x89PNG", "unknown"),
        ("gone.jsonl", None, "unknown"),  # a missing file
    ],
)
def test_detect_kind(tmp_path: Path, name: str, data: bytes | None, kind: str) -> None:
    if data is not None:
        (tmp_path / name).write_bytes(data)
    assert detect_kind(tmp_path / name) == kind


def test_default_sources(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    assert default_sources(home) == []
    (home / ".claude" / "projects").mkdir(parents=True)
    assert default_sources(home) == [SourceConfig(kind="claude_code", path="~/.claude/projects")]
    (home / ".openclaw" / "agents").mkdir(parents=True)
    offered = default_sources(home)
    assert [(s.kind, s.path) for s in offered] == [
        ("openclaw", "~/.openclaw/agents"),
        ("claude_code", "~/.claude/projects"),
    ]
    assert all(discover(s, home) == [] for s in offered)
    in_openclaw = default_sources(home, home / ".openclaw/workspace")
    assert [s.kind for s in in_openclaw] == ["openclaw"]  # no coding sessions in the agent's memory
    assert [s.kind for s in default_sources(home, home / "agent")] == ["openclaw", "claude_code"]


def test_default_sources_find_the_fixture_trees(home: Path) -> None:
    offered = default_sources(home)
    counts = {s.kind: len(discover(s, home)) for s in offered}
    assert counts == {"openclaw": 6, "claude_code": 3}


def _with(cursor: Cursor, **changes: Any) -> Cursor:
    return Cursor(**{**cursor.__dict__, **changes})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("---\ntags: [a]\n---\n# Note\n", "# Note\n"),
        ("\ufeff---\ntags: [a]\n---\r\nbody\n", "body\n"),
        ("---\nJust a line of prose between rules.\n---\nrest\n", None),  # no mapping: text
        ("---\nname: [unclosed\n---\nrest\n", None),
        ("no block\n", "no block\n"),
    ],
)
def test_a_note_loses_its_frontmatter_and_nothing_else(text: str, kept: str | None) -> None:
    assert strip_frontmatter(text) == (text if kept is None else kept)
