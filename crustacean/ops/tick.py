"""When stages are due, and `tick`: run every due stage once, then exit.

A stage is due when its latest cron slot (in the workspace's zone) is later than the start of
its last successful run. A machine that slept through several slots catches up once, at the
latest one. `due_stages` is pure (time passed in); `tick` reads the run records and runs stages.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from croniter import croniter

from crustacean.clock import Clock, wall_clock
from crustacean.errors import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, ConfigError, LockedError
from crustacean.ops.tick_memo import FOREVER, last_ok_rows, note_quiet
from crustacean.runs import error_line
from crustacean.state import from_db_time, open_state
from crustacean.workspace import Workspace

STAGE_ORDER = ("collect", "curate", "compile", "calibrate")
LATE_AFTER = timedelta(minutes=30)  # a slot run later than this after its time was "missed"
COUNT_CAP = 100  # missed slots are counted up to here (a sleeping laptop, every 2 hours)
_RUNNERS = {
    "collect": ("crustacean.stages.collect", "collect"),
    "curate": ("crustacean.stages.curate", "curate"),
    "compile": ("crustacean.stages.compile", "compile_workspace"),
    "calibrate": ("crustacean.stages.calibrate", "calibrate"),
}


@dataclass(frozen=True)
class Due:
    """Whether one stage is due now, the slot it would cover, and why (one line).

    `holds_until`: a not-due answer stays exactly this (reason included) until then, which lets
    a no-op tick be answered from memory (crustacean/ops/tick_memo.py); None when it may not."""

    stage: str
    slot: datetime | None
    due: bool
    reason: str
    catching_up: bool = False
    holds_until: datetime | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "due": self.due,
            "slot": self.slot.isoformat() if self.slot else None,
            "catching_up": self.catching_up,
            "reason": self.reason,
        }


# ---------------------------------------------------------------------------- pure logic


def check_schedule(stage: str, expr: str) -> None:
    """A 5-field cron expression croniter accepts, else ValueError (6 fields read as seconds)."""
    fields = len(expr.split())
    if fields != 5:
        raise ValueError(
            f"stages.{stage}.schedule {expr!r} has {fields} field(s); use 5 (minute hour day "
            "month weekday). croniter would read a 6th field as seconds."
        )
    if not croniter.is_valid(expr):
        raise ValueError(f"stages.{stage}.schedule {expr!r} is not a valid cron expression.")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("scheduling needs timezone-aware datetimes")
    return moment.astimezone(UTC).replace(fold=0)


def latest_slot(expr: str, now: datetime, tz: tzinfo) -> datetime:
    """The latest slot at or before `now`, read in zone `tz`, as aware UTC."""
    base = _utc(now).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return _utc(croniter(expr, base.astimezone(tz)).get_prev(datetime))


def next_slot(expr: str, after: datetime, tz: tzinfo) -> datetime:
    """The first slot strictly after `after`, as aware UTC."""
    return _utc(croniter(expr, _utc(after).astimezone(tz)).get_next(datetime))


def slots_between(expr: str, after: datetime, until: datetime, tz: tzinfo) -> int:
    """How many slots fall in (after, until], counted up to COUNT_CAP."""
    it = croniter(expr, _utc(after).astimezone(tz))
    count = 0
    while count < COUNT_CAP and _utc(it.get_next(datetime)) <= until:
        count += 1
    return count


def fmt(moment: datetime, tz: tzinfo = UTC) -> str:
    """`2026-11-29 05:00 CET`: in the workspace's zone, as every view shows times."""
    return f"{_utc(moment).astimezone(tz):%Y-%m-%d %H:%M %Z}"


def _count(n: int) -> str:
    return f"{n}+" if n >= COUNT_CAP else str(n)


def _due_reason(slot: datetime, now: datetime, missed: int, since: str, tz: tzinfo) -> str:
    """`due: slot … [missed] [(N slots missed, caught up once)] (since…)`."""
    late = " missed" if now - slot > LATE_AFTER else ""
    extra = f"; {_count(missed)} slots missed, caught up once" if missed > 1 else ""
    return f"due: slot {fmt(slot, tz)}{late}{extra} ({since})"


def stage_due(
    stage: str,
    expr: str,
    now: datetime,
    last_ok: datetime | None,
    tz: tzinfo,
    created: datetime | None = None,
) -> Due:
    """Due for one enabled stage (see `due_stages`)."""
    now = _utc(now)
    latest = latest_slot(expr, now, tz)
    if last_ok is not None:
        last_ok = _utc(last_ok)
        if last_ok > now:
            return Due(
                stage,
                None,
                False,
                f"not due: the clock ({fmt(now, tz)}) is behind the last ok run "
                f"({fmt(last_ok, tz)}); it jumped backwards, waiting for it to pass that run",
            )
        if latest <= last_ok:
            upcoming = next_slot(expr, now, tz)
            return Due(
                stage, None, False, f"not due: next slot {fmt(upcoming, tz)}", False, upcoming
            )
        missed = slots_between(expr, last_ok, now, tz)
        since = f"last ok run {_utc(last_ok).astimezone(tz):%Y-%m-%d %H:%M}"
        return Due(stage, latest, True, _due_reason(latest, now, missed, since, tz), missed > 1)
    if created is None:
        return Due(stage, latest, True, f"due: never ran; latest slot {fmt(latest, tz)}")
    first = next_slot(expr, created, tz)
    if first > now:
        return Due(stage, None, False, f"never ran: first slot {fmt(first, tz)}", False, first)
    missed = slots_between(expr, created, now, tz)
    since = f"never ran; workspace started {_utc(created).astimezone(tz):%Y-%m-%d %H:%M}"
    return Due(stage, latest, True, _due_reason(latest, now, missed, since, tz), missed > 1)


def due_stages(
    now: datetime,
    schedules: Mapping[str, str],
    enabled: Mapping[str, bool],
    last_ok: Mapping[str, datetime | None],
    tz: tzinfo,
    created: datetime | None = None,
) -> list[Due]:
    """Due for each stage in STAGE_ORDER; every schedule is validated, even a disabled one's."""
    for stage in STAGE_ORDER:
        check_schedule(stage, schedules[stage])
    return [
        stage_due(stage, schedules[stage], now, last_ok.get(stage), tz, created)
        if enabled.get(stage, True)
        else Due(stage, None, False, "disabled", False, FOREVER)
        for stage in STAGE_ORDER
    ]


# ---------------------------------------------------------------------------- tick


@dataclass(frozen=True)
class Preview:
    """What a stage would do if it ran now (`tick --plan`): one line, and its first request's
    estimated size and cost (0 when it would make no model call)."""

    summary: str
    model: str | None = None
    est_input_tokens: int = 0
    est_cost: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class StageOutcome:
    """One stage in a tick: its Due, and what running it gave (None when it did not run)."""

    stage: str
    due: Due
    status: str | None = None
    error: str | None = None
    preview: Preview | None = None

    def to_json(self) -> dict[str, Any]:
        out = {**self.due.to_json(), "status": self.status, "error": self.error}
        return out | ({"plan": self.preview.to_json()} if self.preview else {})


@dataclass
class TickResult:
    """Every stage's outcome in pipeline order; `locked` when another run held the workspace."""

    outcomes: list[StageOutcome] = field(default_factory=list)
    dry_run: bool = False
    locked: bool = False
    plan: bool = False

    @property
    def est_cost(self) -> float:
        return sum(o.preview.est_cost for o in self.outcomes if o.preview)

    @property
    def exit_code(self) -> int:
        """0 all ok/skipped/nothing due, 1 a stage failed, 75 the workspace was locked."""
        if self.locked:
            return EXIT_LOCKED
        failed = any(o.status == "failed" for o in self.outcomes)
        return EXIT_FAILED if failed else EXIT_OK

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan,
            "locked": self.locked,
            "exit_code": self.exit_code,
            "stages": [o.to_json() for o in self.outcomes],
        }


def last_ok_runs(ws: Workspace) -> dict[str, datetime | None]:
    """Start of each stage's latest real (not dry) run that counts as ran: ok, skipped, partial.

    `runs.last_runs` gives only the latest run, which may have failed, so this asks directly."""
    with open_state(ws) as db:
        rows = last_ok_rows(db.conn)
    return {stage: from_db_time(started) for stage, started in rows}


def workspace_created(ws: Workspace) -> datetime | None:
    """When the workspace's state began (its first migration): never-run stages count from it."""
    with open_state(ws) as db:
        row = db.conn.execute("SELECT min(applied) FROM _migrations").fetchone()
    return from_db_time(row[0]) if row else None


def plan_tick(ws: Workspace, now: datetime) -> list[Due]:
    """Due for every stage of this workspace at `now`."""
    stages = ws.settings.stages
    try:
        return due_stages(
            now,
            {s: getattr(stages, s).schedule for s in STAGE_ORDER},
            {s: getattr(stages, s).enabled for s in STAGE_ORDER},
            last_ok_runs(ws),
            ws.tz,
            workspace_created(ws),
        )
    except ValueError as e:  # config validates schedules too; this is the last guard
        raise ConfigError(f"{e} Fix it in crustacean.toml.") from None


def run_stage(
    ws: Workspace,
    stage: str,
    env: Mapping[str, str] | None,
    clock: Clock,
) -> tuple[str | None, str | None]:
    """Run one stage; (status, error line). A stage's own error fails only that stage;
    LockedError propagates (the run was refused before any record was written)."""
    module, name = _RUNNERS[stage]
    fn = getattr(importlib.import_module(module), name)
    try:
        record = fn(ws, env=env, clock=clock).record
    except LockedError:
        raise
    except Exception as e:  # a failing stage must not block the others
        return "failed", error_line(e)
    if record is None:
        return None, None
    return record.status, record.error


def preview_stage(ws: Workspace, stage: str, clock: Clock) -> Preview:
    """Ask the stage itself for its plan (no call, nothing written, no run recorded)."""
    module, name = _RUNNERS[stage]
    result = getattr(importlib.import_module(module), name)(ws, plan=True, clock=clock)
    summary, plan = result.plan_line(), result.plan
    if plan is None:
        return Preview(f"{summary}: no model call")
    return Preview(summary, plan.model, plan.est_input_tokens, plan.est_cost_first_turn)


def tick(
    ws: Workspace,
    *,
    dry_run: bool = False,
    plan: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> TickResult:
    """Run every due stage once, in pipeline order; `dry_run` only says what would run.

    `plan` shows what every enabled stage would do and cost if it ran now, due or not: each is
    planned on the workspace as it is, so curate does not see what collect would add."""
    clock = clock or wall_clock
    result = TickResult(dry_run=dry_run, plan=plan)
    now = clock()
    dues = plan_tick(ws, now)
    holds = [d.holds_until for d in dues]
    if not plan and all(h is not None for h in holds):  # nothing due, nothing will run
        note_quiet(now, min(h for h in holds if h is not None))
    for due in dues:
        if plan:
            preview = None if due.reason == "disabled" else preview_stage(ws, due.stage, clock)
            result.outcomes.append(StageOutcome(due.stage, due, preview=preview))
            continue
        if not due.due or dry_run:
            result.outcomes.append(StageOutcome(due.stage, due))
            continue
        if result.locked:
            result.outcomes.append(
                StageOutcome(due.stage, due, None, "workspace locked by another run")
            )
            continue
        try:
            status, error = run_stage(ws, due.stage, env, clock)
        except LockedError as e:
            result.locked = True
            status, error = None, error_line(e)
        result.outcomes.append(StageOutcome(due.stage, due, status, error))
    return result
