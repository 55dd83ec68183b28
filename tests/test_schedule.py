"""Due times (table-driven, injected clocks) and `tick`: catch-up once, failures, the lock."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import typer
from typer.testing import CliRunner

from crustacean.cli.app import root as root_callback
from crustacean.cli.common import CrustaceanGroup
from crustacean.cli.tick_cmd import tick as tick_command
from crustacean.config import load_config
from crustacean.errors import CrustaceanError
from crustacean.ops import tick as schedule
from crustacean.ops.tick import STAGE_ORDER, Due, due_stages, tick
from crustacean.runs import RunLock, RunRecorder, list_runs
from crustacean.workspace import Workspace

BERLIN = ZoneInfo("Europe/Berlin")
EVERY_2H, DAILY, WEEKLY, MONTHLY = "0 */2 * * *", "30 3 * * *", "0 4 * * 0", "0 5 1 * *"


def at(text: str) -> datetime:
    """`2026-11-29 04:00` as aware UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def one(
    expr: str,
    now: str,
    last: str | None,
    tz: tzinfo = UTC,
    created: str | None = None,
) -> Due:
    """Due of a single enabled stage (collect), the others disabled."""
    schedules = {s: DAILY for s in STAGE_ORDER} | {"collect": expr}
    enabled = {s: s == "collect" for s in STAGE_ORDER}
    last_ok = {"collect": at(last) if last else None}
    found = due_stages(at(now), schedules, enabled, last_ok, tz, at(created) if created else None)
    return found[0]


# (id, schedule, now, last ok run, zone, created, due, slot, catching_up, words in the reason)
CASES: list[tuple[Any, ...]] = [
    # every 2 hours, the 08:00 slot: run at it (1h59 ago) vs just before it (2h01 ago)
    ("2h-ran-1h59-ago", EVERY_2H, "2026-11-30 09:59", "2026-11-30 08:00", UTC, None,
     False, None, False, "not due: next slot 2026-11-30 10:00 UTC"),
    ("2h-ran-2h01-ago", EVERY_2H, "2026-11-30 09:59", "2026-11-30 07:58", UTC, None,
     True, "2026-11-30 08:00", False, "due: slot 2026-11-30 08:00 UTC missed (last ok run"),
    ("2h-on-slot", EVERY_2H, "2026-11-30 10:00", "2026-11-30 08:01", UTC, None,
     True, "2026-11-30 10:00", False, "due: slot 2026-11-30 10:00 UTC (last"),
    ("2h-two-slots", EVERY_2H, "2026-11-30 10:00", "2026-11-30 07:59", UTC, None,
     True, "2026-11-30 10:00", True, "2 slots missed, caught up once"),
    # daily 03:30: a minute before the slot, at it, 15 minutes late, hours late
    ("daily-before", DAILY, "2026-11-30 03:29", "2026-11-29 03:31", UTC, None,
     False, None, False, "next slot 2026-11-30 03:30 UTC"),
    ("daily-at", DAILY, "2026-11-30 03:30", "2026-11-29 03:31", UTC, None,
     True, "2026-11-30 03:30", False, "due: slot 2026-11-30 03:30 UTC (last"),
    ("daily-15min-late", DAILY, "2026-11-30 03:45", "2026-11-29 03:31", UTC, None,
     True, "2026-11-30 03:30", False, "03:30 UTC (last ok run 2026-11-29 03:31)"),
    ("daily-after", DAILY, "2026-11-30 12:00", "2026-11-29 03:31", UTC, None,
     True, "2026-11-30 03:30", False, "03:30 UTC missed (last ok run"),
    ("daily-done", DAILY, "2026-11-30 12:00", "2026-11-30 03:31", UTC, None,
     False, None, False, "next slot 2026-12-01 03:30 UTC"),
    # weekly, Sunday 04:00: one missed Sunday; a laptop asleep for three weeks; already done
    ("weekly-missed", WEEKLY, "2026-11-30 09:00", "2026-11-22 04:01", UTC, None,
     True, "2026-11-29 04:00", False,
     "due: slot 2026-11-29 04:00 UTC missed (last ok run 2026-11-22 04:01)"),
    ("weekly-3-weeks-asleep", WEEKLY, "2026-11-30 09:00", "2026-11-08 04:01", UTC, None,
     True, "2026-11-29 04:00", True, "3 slots missed, caught up once"),
    ("weekly-done", WEEKLY, "2026-11-30 09:00", "2026-11-29 04:01", UTC, None,
     False, None, False, "not due: next slot 2026-12-06 04:00 UTC"),
    # monthly calibrate: two missed months caught up once; this month already done
    ("monthly-missed", MONTHLY, "2026-11-15 08:00", "2026-09-01 05:02", UTC, None,
     True, "2026-11-01 05:00", True, "2 slots missed"),
    ("monthly-done", MONTHLY, "2026-11-15 08:00", "2026-11-01 05:02", UTC, None,
     False, None, False, "next slot 2026-12-01 05:00 UTC"),
    # clocks that jumped: backwards (last ok run is in the future), and a year forwards
    ("clock-backwards", DAILY, "2026-11-29 12:00", "2026-11-30 03:31", UTC, None,
     False, None, False, "jumped backwards"),
    ("clock-year-forward", DAILY, "2027-11-30 12:00", "2026-11-30 03:31", UTC, None,
     True, "2027-11-30 03:30", True, "100+ slots missed, caught up once"),
    # never ran: counts from workspace creation; no creation time → due at the latest slot
    ("new-ws-first-slot-ahead", EVERY_2H, "2026-11-30 01:00", None, UTC, "2026-11-30 00:30",
     False, None, False, "never ran: first slot 2026-11-30 02:00 UTC"),
    ("new-ws-first-slot-passed", EVERY_2H, "2026-11-30 02:15", None, UTC, "2026-11-30 00:30",
     True, "2026-11-30 02:00", False, "never ran; workspace started 2026-11-30 00:30"),
    ("new-ws-weekly-ahead", WEEKLY, "2026-12-02 12:00", None, UTC, "2026-11-30 00:30",
     False, None, False, "never ran: first slot 2026-12-06 04:00 UTC"),
    ("new-ws-weeks-old", WEEKLY, "2026-12-15 12:00", None, UTC, "2026-11-30 00:30",
     True, "2026-12-13 04:00", True, "2 slots missed"),
    ("never-no-created", MONTHLY, "2026-11-15 08:00", None, UTC, None,
     True, "2026-11-01 05:00", False, "due: never ran; latest slot 2026-11-01 05:00 UTC"),
    # zones: 03:30 in Berlin is 02:30 UTC in winter, 01:30 UTC in summer; reasons say Berlin's
    ("berlin-winter", DAILY, "2026-11-30 02:45", "2026-11-29 03:31", BERLIN, None,
     True, "2026-11-30 02:30", False, "slot 2026-11-30 03:30 CET"),
    ("utc-same-clock", DAILY, "2026-11-30 02:45", "2026-11-29 03:31", UTC, None,
     False, None, False, "next slot 2026-11-30 03:30 UTC"),
    ("berlin-summer", DAILY, "2026-07-15 01:45", "2026-07-14 01:31", BERLIN, None,
     True, "2026-07-15 01:30", False, "slot 2026-07-15 03:30 CEST"),
    ("berlin-summer-before", DAILY, "2026-07-15 01:29", "2026-07-14 01:31", BERLIN, None,
     False, None, False, "next slot 2026-07-15 03:30 CEST"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "now", "last", "tz", "created", "due", "slot", "catching_up", "words"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_due_table(
    expr: str,
    now: str,
    last: str | None,
    tz: tzinfo,
    created: str | None,
    due: bool,
    slot: str | None,
    catching_up: bool,
    words: str,
) -> None:
    d = one(expr, now, last, tz, created)
    assert (d.due, d.slot, d.catching_up) == (due, at(slot) if slot else None, catching_up)
    assert words in d.reason, d.reason
    assert "\n" not in d.reason
    if d.slot is not None:
        assert d.slot.tzinfo is UTC and d.slot <= at(now)


def test_due_stages_order_defaults_and_disabled() -> None:
    schedules = {"collect": EVERY_2H, "curate": DAILY, "compile": WEEKLY, "calibrate": MONTHLY}
    enabled = {s: s != "calibrate" for s in STAGE_ORDER}
    last = {"collect": at("2026-11-29 22:00"), "compile": at("2026-11-29 04:02")}
    found = due_stages(at("2026-11-30 04:00"), schedules, enabled, last, UTC)
    assert [d.stage for d in found] == list(STAGE_ORDER)
    assert [d.due for d in found] == [True, True, False, False]
    assert found[0].catching_up  # 00:00, 02:00 and 04:00 since 22:00
    assert found[3] == Due("calibrate", None, False, "disabled", False)


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 0 9 * * *", "has 6 field(s); use 5"),
        ("0 4 * *", "has 4 field(s)"),
        ("61 * * * *", "not a valid cron expression"),
        ("@daily", "has 1 field(s)"),
    ],
)
def test_bad_schedules_are_value_errors(expr: str, words: str) -> None:
    schedules = {s: DAILY for s in STAGE_ORDER} | {"compile": expr}
    enabled = {s: s != "compile" for s in STAGE_ORDER}  # checked even when disabled
    with pytest.raises(ValueError, match=r"stages\.compile\.schedule") as info:
        due_stages(at("2026-11-30 04:00"), schedules, enabled, {}, UTC)
    assert words in str(info.value)


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        due_stages(datetime(2026, 11, 30), {s: DAILY for s in STAGE_ORDER}, {}, {}, UTC)


# ---------------------------------------------------------------------------- tick


@pytest.fixture
def utc_ws(ws: Workspace) -> Workspace:
    """The workspace with its zone pinned to UTC."""
    return Workspace(ws.root, load_config(ws.root, overrides=["workspace.timezone=UTC"]))


def created_at(monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    monkeypatch.setattr(schedule, "workspace_created", lambda ws: when)


def fixed(text: str) -> Callable[[], datetime]:
    moment = at(text)
    return lambda: moment


def by_stage(result: schedule.TickResult) -> dict[str, tuple[bool, str | None, str | None]]:
    return {o.stage: (o.due.due, o.status, o.error) for o in result.outcomes}


def test_a_failing_stage_does_not_block_the_others(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sunday 04:10: collect, curate and compile are due; collect raises, compile has no key."""
    created_at(monkeypatch, at("2026-11-28 00:00"))

    def boom(*args: object, **kwargs: object) -> None:
        raise CrustaceanError("transcripts unreadable")

    monkeypatch.setattr("crustacean.stages.collect.collect", boom)
    result = tick(utc_ws, env={}, clock=fixed("2026-11-29 04:10"))
    got = by_stage(result)
    assert got["collect"] == (True, "failed", "CrustaceanError: transcripts unreadable")
    assert got["curate"] == (True, "skipped", None)  # no daily entries: no model call
    assert got["compile"][:2] == (True, "failed")  # work for the model, no API key
    assert "no API key" in (got["compile"][2] or "")
    assert got["calibrate"] == (False, None, None)
    assert result.exit_code == 1
    assert sorted(r.stage for r in list_runs(utc_ws)) == ["compile", "curate"]


def test_locked_workspace_exits_75_and_records_nothing(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    created_at(monkeypatch, at("2026-11-28 00:00"))
    with RunLock(utc_ws, "compile", "held-by-test"):
        result = tick(utc_ws, env={}, clock=fixed("2026-11-29 04:10"))
    got = by_stage(result)
    assert result.exit_code == 75 and result.locked
    assert got["collect"][1] is None and "another crustacean run" in (got["collect"][2] or "")
    assert got["curate"] == (True, None, "workspace locked by another run")
    assert list_runs(utc_ws) == []
    again = tick(utc_ws, env={}, clock=fixed("2026-11-29 04:10"))  # lock gone: collect runs
    assert by_stage(again)["collect"] == (True, "skipped", None)


def test_second_tick_runs_nothing(utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Monday: collect (two slots since creation) and curate are due; compile and calibrate
    are not; after one tick nothing is, until collect's next slot."""
    created_at(monkeypatch, at("2026-11-30 00:00"))
    first = tick(utc_ws, env={}, clock=fixed("2026-11-30 04:10"))
    assert by_stage(first) == {
        "collect": (True, "skipped", None),
        "curate": (True, "skipped", None),
        "compile": (False, None, None),
        "calibrate": (False, None, None),
    }
    assert first.outcomes[0].due.catching_up and first.exit_code == 0
    second = tick(utc_ws, env={}, clock=fixed("2026-11-30 04:11"))
    assert [o.due.due for o in second.outcomes] == [False] * 4
    assert second.exit_code == 0 and len(list_runs(utc_ws)) == 2
    later = tick(utc_ws, env={}, clock=fixed("2026-11-30 06:01"))
    assert [o.stage for o in later.outcomes if o.status] == ["collect"]


def test_tick_passes_env_to_a_stage_with_model_work(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, fake_api: Any
) -> None:
    """Sunday: compile is due and calls the (fake) model with the key tick was given."""
    from fakeapi import tool_use

    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_api.url}
    overrides = ["workspace.timezone=UTC", "llm.max_retries=0", "stages.collect.enabled=false"]
    overrides.append("stages.curate.enabled=false")
    live = Workspace(ws.root, load_config(ws.root, env=env, overrides=overrides))
    created_at(monkeypatch, at("2026-11-28 00:00"))
    fake_api.enqueue(tool_use(("finish", {"summary": "nothing"})))
    result = tick(live, env=env, clock=fixed("2026-11-29 04:10"))
    assert by_stage(result)["compile"] == (True, "ok", None) and result.exit_code == 0
    assert by_stage(tick(live, env=env, clock=fixed("2026-11-29 04:30")))["compile"][0] is False


def test_failed_and_dry_runs_do_not_count_as_ran(utc_ws: Workspace) -> None:
    for status, dry, when in (
        ("ok", False, "2026-11-29 03:31"),
        ("failed", False, "2026-11-30 03:31"),
        ("ok", True, "2026-11-30 03:40"),
    ):
        with RunRecorder(utc_ws, "curate", dry_run=dry, clock=fixed(when)) as rec:
            rec.finish(status)
    assert schedule.last_ok_runs(utc_ws) == {"curate": at("2026-11-29 03:31")}
    created = schedule.workspace_created(utc_ws)
    assert created is not None and abs(datetime.now(UTC) - created) < timedelta(minutes=5)


def test_dry_run_tick_runs_nothing(utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    created_at(monkeypatch, at("2026-10-01 00:00"))
    result = tick(utc_ws, dry_run=True, clock=fixed("2026-11-30 04:10"))
    assert [o.due.due for o in result.outcomes] == [True] * 4
    assert all(o.status is None and o.error is None for o in result.outcomes)
    assert result.exit_code == 0 and list_runs(utc_ws) == []


# ---------------------------------------------------------------------------- CLI


def cli(*args: str, code: int = 0) -> Any:
    """The tick command under the real root callback (global options, error boundary)."""
    app = typer.Typer(cls=CrustaceanGroup)
    app.callback()(root_callback)
    app.command("tick")(tick_command)
    result = CliRunner().invoke(app, list(args), prog_name="crustacean")
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def test_cli_dry_run_lists_and_runs_nothing(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    created_at(monkeypatch, datetime.now(UTC) - timedelta(days=70))  # two monthly slots
    out = cli("-w", str(utc_ws.root), "-c", "workspace.timezone=UTC", "tick", "--dry-run").output
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == list(STAGE_ORDER)
    for line in lines:
        assert ": due, catching up slot " in line and "(dry run: not run)" in line, line
    assert list_runs(utc_ws) == []


def test_cli_tick_then_nothing_due(utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    created_at(monkeypatch, datetime.now(UTC) - timedelta(days=40))
    base = ["-w", str(utc_ws.root), "-c", "stages.compile.enabled=false"]
    base += ["-c", "stages.calibrate.enabled=false"]
    out = cli(*base, "tick").output
    assert "collect: ran (skipped), catching up slot " in out
    assert "curate: ran (skipped)" in out
    assert "compile: disabled" in out and "calibrate: disabled" in out
    data = json.loads(cli(*base, "tick", "--json").output)
    assert data["exit_code"] == 0 and not data["dry_run"]
    assert [s["due"] for s in data["stages"]] == [False] * 4
    assert data["stages"][0]["reason"].startswith("not due: next slot ")
    assert len(list_runs(utc_ws)) == 2


def test_cli_locked_exits_75(utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    created_at(monkeypatch, datetime.now(UTC) - timedelta(days=40))
    with RunLock(utc_ws, "collect", "held-by-test"):
        out = cli("-w", str(utc_ws.root), "tick", code=75).output
    assert "collect: not run (LockedError: another crustacean run holds" in out
    assert list_runs(utc_ws) == []


def test_cli_tick_log_writes_one_timestamped_line_only_when_work_was_done(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the scheduled line runs: a tick that ran something is one line starting with its
    time; a tick with nothing due writes nothing, unless --verbose."""
    created_at(monkeypatch, datetime.now(UTC) - timedelta(days=40))
    base = ["-w", str(utc_ws.root), "-c", "stages.compile.enabled=false"]
    base += ["-c", "stages.calibrate.enabled=false"]
    (line,) = cli(*base, "tick", "--log").output.splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC collect: ran \(skipped\), ", line)
    assert "; curate: ran (skipped)" in line and "disabled" not in line
    assert cli(*base, "tick", "--log").output == ""  # not due: nothing at all
    (quiet_tick,) = cli(*base, "tick", "--log", "--verbose").output.splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC nothing due$", quiet_tick)


def test_cli_tick_log_rotates_the_cron_log_by_size(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crustacean.ops import cron

    log = utc_ws.logs_dir / cron.LOG_NAME
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("old line\n" * (cron.LOG_MAX_BYTES // 9 + 1))
    cli("-w", str(utc_ws.root), "tick", "--log")
    assert log.read_text() == "" and (log.parent / "cron.log.1").read_text().startswith("old")


@pytest.mark.parametrize(
    ("due", "verbose", "expected"),
    [
        ([], False, ""),
        ([], True, "2026-11-30 13:10:00 JST nothing due"),
        (
            ["collect"],
            False,
            "2026-11-30 13:10:00 JST collect: ran (ok), slot 2026-11-30 13:00 JST",
        ),
    ],
)
def test_log_line_table(due: list[str], verbose: bool, expected: str) -> None:
    from crustacean.cli.tick_cmd import log_line
    from crustacean.ops.tick import Due, StageOutcome

    tokyo = ZoneInfo("Asia/Tokyo")
    outcomes = [
        StageOutcome(s, Due(s, at("2026-11-30 04:00"), True, "due: x"), "ok", None)
        if s in due
        else StageOutcome(s, Due(s, None, False, "not due: next slot x"))
        for s in STAGE_ORDER
    ]
    assert log_line(outcomes, at("2026-11-30 04:10"), tokyo, verbose=verbose) == expected
