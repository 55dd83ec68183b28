"""`tick`: run every due stage once, in pipeline order, then exit.

When a stage is due is pure cron arithmetic (`crustacean/schedule.py`); this reads the run
records it needs, runs the due stages through the registry (`crustacean/stages/registry.py`)
and says what each did.

A tick records each stage's slots (`schedule.Slots`: the latest, the next, the first after the
workspace began) in `SLOTS_FILE`, with the schedule, zone and start they were worked out for.
Until a stage's next slot comes, those slots are still the slots, so the next tick (cron's
usual one, every 15 minutes) reads them, compares them with the run records it reads anyway
and decides without croniter: a no-op tick loads neither the stages nor croniter. The record is
cron arithmetic, not output: every line is still made from the run records of this tick.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, NamedTuple

from crustacean.clock import Clock, wall_clock
from crustacean.config import STAGES
from crustacean.errors import (
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_OK,
    ConfigError,
    LockedError,
    UsageError,
)
from crustacean.schedule import Due, Slots, due_stages, fmt
from crustacean.state import from_db_time, open_state
from crustacean.workspace import Workspace

if TYPE_CHECKING:  # the stages load only when one is due
    from crustacean.stages.skeleton import Stage

RAN_STATUSES = ("ok", "skipped", "partial")  # a run that counts as ran
SLOTS_FILE = "tick-slots.json"  # in the state dir: each stage's slots, see the docstring
_LAST_OK_SQL = (
    "SELECT stage, max(started) FROM run_records WHERE dry_run = 0 AND status IN "
    f"({', '.join('?' for _ in RAN_STATUSES)}) GROUP BY stage ORDER BY stage"
)


class Preview(NamedTuple):
    """What a stage would do if it ran now (`tick --plan`): one line, and its first request's
    estimated size and cost (0 when it would make no model call)."""

    summary: str
    model: str | None = None
    est_input_tokens: int = 0
    est_cost: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self._asdict())


class StageOutcome(NamedTuple):
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
    ended: datetime | None = None  # the clock when the last stage was done (the log line's time)

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

    def shown(self, tz: tzinfo, *, log: bool = False, verbose: bool = False) -> list[str]:
        """What `tick` prints: one line per stage, then a plan's estimate; or with `log` the cron
        log's one line (none for a tick that ran nothing, unless `verbose`)."""
        if log:
            line = log_line(self.outcomes, self.ended or wall_clock(), tz, verbose=verbose)
            return [line] if line else []
        lines = [outcome_line(o, tz) for o in self.outcomes]
        if self.plan:
            lines.append(
                f"Estimated: ~${self.est_cost:.4f} for the first requests (a stage that uses "
                "tools takes a few turns). Nothing was run or written."
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan,
            "locked": self.locked,
            "exit_code": self.exit_code,
            "stages": [o.to_json() for o in self.outcomes],
        }


def run_state(ws: Workspace) -> tuple[dict[str, datetime | None], datetime | None]:
    """Start of each stage's latest real (not dry) run that counts as ran (ok, skipped,
    partial), and when the workspace's state began (its first migration: never-run stages
    count from it), in one opening of state.db.

    `runs.last_runs` gives only the latest run, which may have failed, so this asks directly."""
    with open_state(ws) as db:
        rows = db.conn.execute(_LAST_OK_SQL, RAN_STATUSES).fetchall()
        first = db.conn.execute("SELECT min(applied) FROM _migrations").fetchone()
    return {stage: from_db_time(started) for stage, started in rows}, from_db_time(first[0])


def plan_tick(ws: Workspace, now: datetime) -> list[Due]:
    """Due for every stage of this workspace at `now`."""
    stages = ws.settings.stages
    schedules = {s: getattr(stages, s).schedule for s in STAGES}
    last_ok, created = run_state(ws)
    recorded = recorded_slots(ws, now, schedules, created)
    try:
        dues = due_stages(
            now,
            schedules,
            {s: getattr(stages, s).enabled for s in STAGES},
            last_ok,
            ws.tz,
            created,
            recorded,
        )
    except ValueError as e:  # config validates schedules too; this is the last guard
        raise ConfigError(f"{e} Fix it in crustacean.toml.") from None
    if len(recorded) < len(schedules):
        record_slots(ws, now, schedules, created)
    return dues


def _slots_key(ws: Workspace, created: datetime | None) -> dict[str, str | None]:
    """What the recorded slots were worked out for, besides each schedule: the zone and start."""
    return {"zone": str(ws.tz), "created": created.isoformat() if created else None}


def recorded_slots(
    ws: Workspace, now: datetime, schedules: Mapping[str, str], created: datetime | None
) -> dict[str, Slots]:
    """The recorded slots of each stage that still hold at `now`, for the same schedule, zone
    and start; none from a missing, damaged or foreign record (then croniter decides)."""
    try:
        data = json.loads((ws.state_dir / SLOTS_FILE).read_text("utf-8"))
        if data["key"] != _slots_key(ws, created):
            return {}
        since = datetime.fromisoformat(data["at"])
        found = {}
        for stage, expr in schedules.items():
            row = data["stages"].get(stage)
            if row is None or row[0] != expr:
                continue
            first = datetime.fromisoformat(row[3]) if row[3] else None
            slots = Slots(datetime.fromisoformat(row[1]), datetime.fromisoformat(row[2]), first)
            if slots.hold_at(since, now):
                found[stage] = slots
        return found
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return {}


def record_slots(
    ws: Workspace, now: datetime, schedules: Mapping[str, str], created: datetime | None
) -> None:
    """Record every stage's slots at `now` for the next tick (only after `due_stages` checked
    the schedules). A record that cannot be written is no loss: the next tick works them out."""
    rows = {}
    for stage, expr in schedules.items():
        slots = Slots.at(expr, now, ws.tz, created)
        first = slots.first.isoformat() if slots.first else None
        rows[stage] = [expr, slots.latest.isoformat(), slots.upcoming.isoformat(), first]
    text = json.dumps({"key": _slots_key(ws, created), "at": now.isoformat(), "stages": rows})
    path = ws.state_dir / SLOTS_FILE
    tmp = path.with_name(f".{SLOTS_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, "utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def collect_waits(
    now: datetime, new_chars: int, oldest: datetime, worth_chars: int, max_wait: timedelta
) -> str | None:
    """Why a scheduled collect lets its new text wait (None: run now). A call repeats a fixed
    prefix, so a few new messages wait until their text is worth a call, but never longer
    than `max_wait` after the oldest of them (pure)."""
    if max_wait <= timedelta(0) or new_chars >= worth_chars or now - oldest >= max_wait:
        return None
    by = oldest + max_wait
    return (
        f"waiting for more text: {new_chars:,} new characters, a call is worth {worth_chars:,}; "
        f"sent by {by:%Y-%m-%d %H:%M} UTC at the latest (collect.max_wait_hours)"
    )


def scheduled_stage(ws: Workspace, stage: str) -> Stage[Any, Any]:
    """The stage as tick runs it: collect with its batching rule, the others as they are."""
    # lazy: as in tick
    from crustacean.stages import registry

    found = registry.stage(stage)
    if stage != "collect":
        return found
    from crustacean.stages.collect import Collect

    if not isinstance(found, Collect):
        return found
    wait = timedelta(hours=ws.settings.collect.max_wait_hours)
    return replace(
        found, hold=lambda now, chars, oldest, worth: collect_waits(now, chars, oldest, worth, wait)
    )


def preview_stage(ws: Workspace, stage: str, clock: Clock) -> Preview:
    """Ask the stage itself for its plan (no call, nothing written, no run recorded)."""
    # lazy: as in tick, only a plan loads the stages
    from crustacean.stages import registry

    result = registry.stage(stage).run(ws, plan=True, clock=clock)
    summary, plan = result.plan_line(), result.plan
    if plan is None:
        return Preview(f"{summary}: no model call")
    return Preview(summary, plan.model, plan.est_input_tokens, plan.est_cost_first_turn)


@dataclass(frozen=True)
class TickRequest:
    """What `crustacean tick` was asked, checked when made (before the workspace opens)."""

    dry_run: bool = False
    plan: bool = False
    log: bool = False  # for the scheduler: rotate the cron log first

    def __post_init__(self) -> None:
        if self.dry_run and self.plan:
            raise UsageError(
                "--dry-run and --plan can't be combined; pick one: --plan for costs, "
                "--dry-run for what is due."
            )


def scheduled(ws: Workspace, request: TickRequest, *, clock: Clock | None = None) -> TickResult:
    """The tick the CLI runs: the cron log rotated by size first when it logs, then `tick`."""
    if request.log:
        from crustacean.ops.cron import LOG_NAME, rotate_log  # lazy: only the scheduler's tick

        rotate_log(ws.logs_dir / LOG_NAME)
    return tick(ws, dry_run=request.dry_run, plan=request.plan, clock=clock)


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
        # lazy: the stages, the model SDK and the run records' redaction load only when a stage
        # is due, so a no-op tick (cron's usual one) decides and returns without them
        from crustacean.runs import error_line

        status: str | None = None
        try:
            record = scheduled_stage(ws, due.stage).run(ws, env=env, clock=clock).record
            status, error = (record.status, record.error) if record else (None, None)
        except LockedError as e:  # refused before any run record was written
            result.locked = True
            error = error_line(e)
        except Exception as e:  # a failing stage must not block the others
            status, error = "failed", error_line(e)
        result.outcomes.append(StageOutcome(due.stage, due, status, error))
    result.ended = clock()
    return result


# ---------------------------------------------------------------------------- lines


def log_line(outcomes: Sequence[StageOutcome], now: datetime, tz: tzinfo, *, verbose: bool) -> str:
    """The cron log's one line for a tick: its time, then each stage that was due; "" for a
    tick where nothing was due (unless `verbose`), so the log holds only work done."""
    due = [o for o in outcomes if o.due.due]
    if not due and not verbose:
        return ""
    parts = [outcome_line(o, tz) for o in due] or ["nothing due"]
    return f"{now.astimezone(tz):%Y-%m-%d %H:%M:%S %Z} " + "; ".join(parts)


def outcome_line(outcome: StageOutcome, tz: tzinfo = UTC) -> str:
    """One line per stage: `collect: ran (ok) …`, `curate: not due (next slot …)`."""
    due, name = outcome.due, outcome.stage
    if outcome.preview is not None:
        when = "Due now" if due.due else "N" + _not_due(due.reason)[1:]
        p = outcome.preview
        cost = (
            f"; {p.model}, ~{p.est_input_tokens:,} input tokens, ~${p.est_cost:.4f}"
            if p.model
            else ""
        )
        return f"{name}: {p.summary}{cost}. {when}."
    if not due.due:
        return f"{name}: {_not_due(due.reason)}"
    slot = fmt(due.slot, tz) if due.slot else "?"
    what = f"catching up slot {slot}" if due.catching_up else f"slot {slot}"
    if outcome.status is None and outcome.error is None:
        return f"{name}: due, {what} (dry run: not run) — {due.reason.removeprefix('due: ')}"
    if outcome.status is None:
        return f"{name}: not run ({outcome.error})"
    error = f": {outcome.error}" if outcome.error else ""
    return f"{name}: ran ({outcome.status}), {what}{error}"


def _not_due(reason: str) -> str:
    """`not due: next slot X` → `not due (next slot X)`; `disabled` stays as it is."""
    head, sep, rest = reason.partition(": ")
    if head == "not due" and sep:
        return f"not due ({rest})"
    return f"not due ({reason})" if reason != "disabled" else "disabled"
