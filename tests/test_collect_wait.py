"""A scheduled collect with only a few new messages waits for more text (issue 34.15): a call
repeats a fixed prefix, so a small increment waits until it is worth one, never longer than
`collect.max_wait_hours` after its oldest message; a manual `crustacean collect` runs now."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeAnthropic, tool_use

from crustacean.config import load_config
from crustacean.ops.tick import collect_waits, scheduled_stage
from crustacean.stages.collect import CollectResult, collect
from crustacean.stages.collect_notes import prefix_chars, worth_a_call
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = "sk-ant-api03-" + "W" * 40
H = timedelta(hours=1)


@pytest.mark.parametrize(
    ("chars", "oldest", "max_wait", "waits"),
    [
        (2_000, NOW - H, 12 * H, True),  # a few messages, an hour old: wait
        (60_000, NOW - H, 12 * H, False),  # worth a call: now
        (50_000, NOW - H, 12 * H, False),  # exactly worth it
        (2_000, NOW - 12 * H, 12 * H, False),  # waited the longest allowed
        (2_000, NOW - 3 * 24 * H, 12 * H, False),  # a gap of days: old text goes now
        (2_000, NOW - H, timedelta(0), False),  # max_wait 0: never waits
    ],
)
def test_collect_waits_table(
    chars: int, oldest: datetime, max_wait: timedelta, waits: bool
) -> None:
    why = collect_waits(NOW, chars, oldest, 50_000, max_wait)
    assert (why is not None) == waits
    if why:
        assert why.startswith("waiting for more text: 2,000 new characters")
        assert f"{oldest + max_wait:%Y-%m-%d %H:%M} UTC" in why and "\n" not in why


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def write_sessions(folder: Path, when: datetime) -> None:
    """Two short OpenClaw sessions, a day and a half apart (only the last is recent)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, moment in (("old", when - 36 * H), ("new", when)):
        head = {"type": "session", "version": 3, "id": name, "timestamp": stamp(moment)}
        lines = [json.dumps(head)]
        for i, (role, text) in enumerate((("user", f"{name}: lunch with Rui on Friday"),)):
            content = [{"type": "text", "text": text}]
            record = {"type": "message", "id": f"{name}{i}", "timestamp": stamp(moment)}
            lines.append(json.dumps(record | {"message": {"role": role, "content": content}}))
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def live(
    ws: Workspace, tmp_path: Path, fake_api: FakeAnthropic
) -> tuple[Workspace, dict[str, str]]:
    agents = tmp_path / "openclaw/agents"
    write_sessions(agents / "main/sessions", NOW - H)
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + f'\n[[sources]]\nkind = "openclaw"\npath = "{agents}"\n')
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_api.url}
    return Workspace(ws.root, load_config(ws.root, env=env)), env


def scheduled(ws: Workspace, env: dict[str, str], now: datetime) -> CollectResult:
    result: CollectResult = scheduled_stage(ws, "collect").run(ws, env=env, clock=lambda: now)
    return result


def noted(body: dict[str, Any]) -> dict[str, Any]:
    del body
    return tool_use(("record_notes", {"items": []}))


def test_a_scheduled_run_waits_and_a_manual_one_runs_now(
    live: tuple[Workspace, dict[str, str]], fake_api: FakeAnthropic
) -> None:
    ws, env = live
    (ws.root.parent / "openclaw/agents/main/sessions/old.jsonl").unlink()
    waited = scheduled(ws, env, NOW)
    assert waited.record.status == "skipped" and fake_api.messages() == []
    assert waited.waiting and "waiting for more text" in waited.record.summary
    assert waited.to_json()["waiting_for_more_text"] == waited.waiting
    fake_api.enqueue(noted)
    manual = collect(ws, env=env, clock=lambda: NOW)  # the cursor did not move: all of it
    assert manual.record.status == "ok" and manual.new_messages == 1
    assert len(fake_api.messages()) == 1


def test_a_waiting_increment_is_sent_once_it_waited_max_wait_hours(
    live: tuple[Workspace, dict[str, str]], fake_api: FakeAnthropic
) -> None:
    ws, env = live
    (ws.root.parent / "openclaw/agents/main/sessions/old.jsonl").unlink()
    assert scheduled(ws, env, NOW).record.status == "skipped"
    fake_api.enqueue(noted)
    later = scheduled(ws, env, NOW + 11 * H)  # the message is 12 hours old
    assert later.record.status == "ok" and later.new_messages == 1


def test_old_text_after_a_gap_of_days_is_sent_at_once(
    live: tuple[Workspace, dict[str, str]], fake_api: FakeAnthropic
) -> None:
    ws, env = live
    fake_api.enqueue(noted)
    since = scheduled(ws, env, NOW)
    assert since.record.status == "ok" and since.new_messages == 2


def test_max_wait_hours_zero_never_waits(
    live: tuple[Workspace, dict[str, str]], fake_api: FakeAnthropic
) -> None:
    ws, env = live
    (ws.root.parent / "openclaw/agents/main/sessions/old.jsonl").unlink()
    eager = Workspace(
        ws.root, load_config(ws.root, env=env, overrides=["collect.max_wait_hours=0"])
    )
    fake_api.enqueue(noted)
    assert scheduled(eager, env, NOW).record.status == "ok"


def test_worth_a_call_is_six_times_the_fixed_prefix(ws: Workspace) -> None:
    assert worth_a_call(ws) == 6 * prefix_chars(ws) and prefix_chars(ws) > 4_000


def test_a_scheduled_run_sends_its_full_chunks_and_lets_a_small_tail_wait(
    live: tuple[Workspace, dict[str, str]], fake_api: FakeAnthropic
) -> None:
    ws, env = live
    folder = ws.root.parent / "openclaw/agents/main/sessions"
    (folder / "old.jsonl").unlink()
    start = NOW - H
    head = {"type": "session", "version": 3, "id": "long", "timestamp": stamp(start)}
    lines = [json.dumps(head)]
    for i in range(24):  # about 70,000 characters: a full chunk and a small tail
        text = f"note-{i} " + "the garden budget and the lease " * 90
        moment = start + timedelta(seconds=i)
        record = {"type": "message", "id": f"l{i}", "timestamp": stamp(moment)}
        message = {"role": "user", "content": [{"type": "text", "text": text}]}
        lines.append(json.dumps(record | {"message": message}))
    (folder / "long.jsonl").write_text("\n".join(lines) + "\n")
    fake_api.enqueue(noted, noted)
    first = scheduled(ws, env, NOW)
    assert first.record.status == "ok" and first.chunks_sent == 1 and len(fake_api.messages()) == 1
    assert first.left_for_next_run > 0 and first.waiting
    rest = collect(ws, env=env, clock=lambda: NOW)  # manual: the tail goes now
    assert rest.new_messages == first.left_for_next_run and len(fake_api.messages()) == 2
