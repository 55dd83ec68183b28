"""`tick`: run every due stage once (catch-up once, failures, the lock), and its CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import typer
from typer.testing import CliRunner

from crustacean.cli.app import root as root_callback
from crustacean.cli.common import CrustaceanGroup
from crustacean.cli.tick_cmd import tick as tick_command
from crustacean.config import STAGES as STAGE_ORDER
from crustacean.config import load_config
from crustacean.errors import CrustaceanError
from crustacean.ops import tick as ticking
from crustacean.ops.tick import tick
from crustacean.runs import RunLock, RunRecorder, list_runs
from crustacean.stages import registry
from crustacean.workspace import Workspace


def at(text: str) -> datetime:
    """`2026-11-29 04:00` as aware UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def utc_ws(ws: Workspace) -> Workspace:
    """The workspace with its zone pinned to UTC."""
    return Workspace(ws.root, load_config(ws.root, overrides=["workspace.timezone=UTC"]))


def created_at(monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    """The workspace's state began at `when` (its run records are read as they are)."""
    real = ticking.run_state
    monkeypatch.setattr(ticking, "run_state", lambda ws: (real(ws)[0], when))


def fixed(text: str) -> Callable[[], datetime]:
    moment = at(text)
    return lambda: moment


def by_stage(result: ticking.TickResult) -> dict[str, tuple[bool, str | None, str | None]]:
    return {o.stage: (o.due.due, o.status, o.error) for o in result.outcomes}


def test_a_failing_stage_does_not_block_the_others(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sunday 04:10: collect, curate and compile are due; collect raises, compile has no key."""
    created_at(monkeypatch, at("2026-11-28 00:00"))

    def boom(*args: object, **kwargs: object) -> None:
        raise CrustaceanError("transcripts unreadable")

    real = registry.stage
    monkeypatch.setattr(registry, "stage", lambda name: boom() if name == "collect" else real(name))
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
    from stagekit import live

    disabled = ("stages.collect.enabled=false", "stages.curate.enabled=false")
    running, env = live(ws, fake_api, "workspace.timezone=UTC", *disabled)
    created_at(monkeypatch, at("2026-11-28 00:00"))
    fake_api.enqueue(tool_use(("finish", {"summary": "nothing"})))
    result = tick(running, env=env, clock=fixed("2026-11-29 04:10"))
    assert by_stage(result)["compile"] == (True, "ok", None) and result.exit_code == 0
    assert by_stage(tick(running, env=env, clock=fixed("2026-11-29 04:30")))["compile"][0] is False


def test_failed_and_dry_runs_do_not_count_as_ran(utc_ws: Workspace) -> None:
    for status, dry, when in (
        ("ok", False, "2026-11-29 03:31"),
        ("failed", False, "2026-11-30 03:31"),
        ("ok", True, "2026-11-30 03:40"),
    ):
        with RunRecorder(utc_ws, "curate", dry_run=dry, clock=fixed(when)) as rec:
            rec.finish(status)
    last_ok, created = ticking.run_state(utc_ws)
    assert last_ok == {"curate": at("2026-11-29 03:31")}
    assert created is not None and abs(datetime.now(UTC) - created) < timedelta(minutes=5)


@pytest.mark.parametrize(
    "then",
    [
        "2026-11-29 03:45",  # before any next slot: every stage from the record
        "2026-11-29 04:00",  # collect's slot came (and compile's): those two worked out again
        "2026-12-01 05:10",  # every slot passed, calibrate's monthly one too
        "2026-11-29 03:20",  # the clock went back before the record: worked out again
    ],
)
def test_recorded_slots_decide_as_croniter_does(
    utc_ws: Workspace, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """A tick at 03:31 records the slots; a tick at `then` says exactly what a tick with no
    record says (the same dues, reasons and slots)."""
    created_at(monkeypatch, at("2026-11-28 00:00"))
    for stage in ("collect", "curate"):  # two ran, two never did
        with RunRecorder(utc_ws, stage, clock=fixed("2026-11-29 03:30")) as rec:
            rec.finish("ok")
    tick(utc_ws, dry_run=True, clock=fixed("2026-11-29 03:31"))
    record = utc_ws.state_dir / ticking.SLOTS_FILE
    assert record.is_file()
    from_record = tick(utc_ws, dry_run=True, clock=fixed(then)).to_json()
    record.unlink()
    assert from_record == tick(utc_ws, dry_run=True, clock=fixed(then)).to_json()


def test_recorded_slots_hold_only_for_their_schedule_zone_and_start(utc_ws: Workspace) -> None:
    tick(utc_ws, dry_run=True, clock=fixed("2026-11-29 03:31"))
    schedules = {s: getattr(utc_ws.settings.stages, s).schedule for s in STAGE_ORDER}
    _, created = ticking.run_state(utc_ws)
    now = at("2026-11-29 03:40")
    assert set(ticking.recorded_slots(utc_ws, now, schedules, created)) == set(STAGE_ORDER)
    moved = {**schedules, "curate": "0 5 * * *"}
    assert set(ticking.recorded_slots(utc_ws, now, moved, created)) == set(STAGE_ORDER) - {"curate"}
    assert ticking.recorded_slots(utc_ws, now, schedules, at("2026-11-01 00:00")) == {}
    berlin = Workspace(
        utc_ws.root, load_config(utc_ws.root, overrides=["workspace.timezone=Europe/Berlin"])
    )
    assert ticking.recorded_slots(berlin, now, schedules, created) == {}
    for damaged in ("{not json", "[]", '{"key": 1}', ""):
        (utc_ws.state_dir / ticking.SLOTS_FILE).write_text(damaged)
        assert ticking.recorded_slots(utc_ws, now, schedules, created) == {}


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
    from crustacean.ops.tick import StageOutcome, log_line
    from crustacean.schedule import Due

    tokyo = ZoneInfo("Asia/Tokyo")
    outcomes = [
        StageOutcome(s, Due(s, at("2026-11-30 04:00"), True, "due: x"), "ok", None)
        if s in due
        else StageOutcome(s, Due(s, None, False, "not due: next slot x"))
        for s in STAGE_ORDER
    ]
    assert log_line(outcomes, at("2026-11-30 04:10"), tokyo, verbose=verbose) == expected
