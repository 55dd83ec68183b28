"""When stages are due: pure cron arithmetic over plain data (the time is always passed in).

A stage is due when its latest cron slot (in the workspace's zone) is later than the start of
its last successful run. A machine that slept through several slots catches up once, at the
latest one. Every function here takes `now` and plain values; `ops/tick.py` reads the run
records and runs what is due, and `stages/health.py` counts the slots a stage missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from croniter import croniter

LATE_AFTER = timedelta(minutes=30)  # a slot run later than this after its time was "missed"
COUNT_CAP = 100  # missed slots are counted up to here (a sleeping laptop, every 2 hours)


@dataclass(frozen=True)
class Due:
    """Whether one stage is due now, the slot it would cover, and why (one line)."""

    stage: str
    slot: datetime | None
    due: bool
    reason: str
    catching_up: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "due": self.due,
            "slot": self.slot.isoformat() if self.slot else None,
            "catching_up": self.catching_up,
            "reason": self.reason,
        }


def _cron(expr: str, base: datetime) -> croniter:
    """croniter over `expr` from `base`: imported here, so a tick that finds its slots recorded
    (ops/tick.py) decides without croniter's import (~15 ms, a fifth of a no-op tick)."""
    from croniter import croniter

    return croniter(expr, base)


class Slots(NamedTuple):
    """The three slots `stage_due` reads for a stage at one moment: the latest at or before it,
    the first after it, and the first after the workspace began (None without that)."""

    latest: datetime
    upcoming: datetime
    first: datetime | None

    @classmethod
    def at(cls, expr: str, now: datetime, tz: tzinfo, created: datetime | None) -> Slots:
        first = next_slot(expr, created, tz) if created is not None else None
        return cls(latest_slot(expr, now, tz), next_slot(expr, now, tz), first)

    def hold_at(self, since: datetime, now: datetime) -> bool:
        """Whether these slots, worked out at `since`, are still the slots at `now`: no slot
        falls between `since` and `upcoming`, so until then the latest and the next stay put."""
        return since <= now < self.upcoming


def check_schedule(stage: str, expr: str) -> None:
    """A 5-field cron expression croniter accepts, else ValueError (6 fields read as seconds)."""
    fields = len(expr.split())
    if fields != 5:
        raise ValueError(
            f"stages.{stage}.schedule {expr!r} has {fields} field(s); use 5 (minute hour day "
            "month weekday). croniter would read a 6th field as seconds."
        )
    from croniter import croniter

    if not croniter.is_valid(expr):
        raise ValueError(f"stages.{stage}.schedule {expr!r} is not a valid cron expression.")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("scheduling needs timezone-aware datetimes")
    return moment.astimezone(UTC).replace(fold=0)


def latest_slot(expr: str, now: datetime, tz: tzinfo) -> datetime:
    """The latest slot at or before `now`, read in zone `tz`, as aware UTC."""
    base = _utc(now).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return _utc(_cron(expr, base.astimezone(tz)).get_prev(datetime))


def next_slot(expr: str, after: datetime, tz: tzinfo) -> datetime:
    """The first slot strictly after `after`, as aware UTC."""
    return _utc(_cron(expr, _utc(after).astimezone(tz)).get_next(datetime))


def slot_at_or_after(expr: str, moment: datetime, tz: tzinfo = UTC) -> datetime:
    """The first slot at or after `moment` (a slot exactly at `moment` counts), as aware UTC."""
    return next_slot(expr, moment - timedelta(microseconds=1), tz)


def expected_slots(expr: str, start: datetime, end: datetime, tz: tzinfo = UTC) -> list[datetime]:
    """Every slot in [start, end), as aware UTC (cron read in `tz`)."""
    it = _cron(expr, _utc(start).astimezone(tz) - timedelta(microseconds=1))
    slots = []
    while (slot := _utc(it.get_next(datetime))) < end:
        slots.append(slot)
    return slots


def slots_between(expr: str, after: datetime, until: datetime, tz: tzinfo) -> int:
    """How many slots fall in (after, until], counted up to COUNT_CAP."""
    it = _cron(expr, _utc(after).astimezone(tz))
    count = 0
    while count < COUNT_CAP and _utc(it.get_next(datetime)) <= until:
        count += 1
    return count


def fmt(moment: datetime, tz: tzinfo = UTC) -> str:
    """`2026-11-29 05:00 CET`: in the workspace's zone, as every view shows times."""
    return f"{_utc(moment).astimezone(tz):%Y-%m-%d %H:%M %Z}"


def _due_reason(slot: datetime, now: datetime, missed: int, since: str, tz: tzinfo) -> str:
    """`due: slot … [missed] [(N slots missed, caught up once)] (since…)`."""
    late = " missed" if now - slot > LATE_AFTER else ""
    shown = f"{missed}+" if missed >= COUNT_CAP else str(missed)
    extra = f"; {shown} slots missed, caught up once" if missed > 1 else ""
    return f"due: slot {fmt(slot, tz)}{late}{extra} ({since})"


def stage_due(
    stage: str,
    expr: str,
    now: datetime,
    last_ok: datetime | None,
    tz: tzinfo,
    created: datetime | None = None,
    slots: Slots | None = None,
) -> Due:
    """Due for one enabled stage (see `due_stages`); `slots`, when given, are the stage's at
    `now` (else croniter works them out)."""
    now = _utc(now)
    latest = slots.latest if slots else latest_slot(expr, now, tz)
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
            upcoming = slots.upcoming if slots else next_slot(expr, now, tz)
            return Due(stage, None, False, f"not due: next slot {fmt(upcoming, tz)}")
        missed = slots_between(expr, last_ok, now, tz)
        since = f"last ok run {_utc(last_ok).astimezone(tz):%Y-%m-%d %H:%M}"
        return Due(stage, latest, True, _due_reason(latest, now, missed, since, tz), missed > 1)
    if created is None:
        return Due(stage, latest, True, f"due: never ran; latest slot {fmt(latest, tz)}")
    first = slots.first if slots and slots.first else next_slot(expr, created, tz)
    if first > now:
        return Due(stage, None, False, f"never ran: first slot {fmt(first, tz)}")
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
    recorded: Mapping[str, Slots] | None = None,
) -> list[Due]:
    """Due for each stage of `schedules`, in its order (the caller's: pipeline order); every
    schedule is validated, even a disabled one's. `recorded` holds slots the caller worked out
    for these same schedules, zone and start (`Slots.at`, after this check passed) that still
    hold at `now`: those stages are neither checked again nor given to croniter."""
    recorded = recorded or {}
    for stage, expr in schedules.items():
        if stage not in recorded:
            check_schedule(stage, expr)
    return [
        stage_due(stage, expr, now, last_ok.get(stage), tz, created, recorded.get(stage))
        if enabled.get(stage, True)
        else Due(stage, None, False, "disabled")
        for stage, expr in schedules.items()
    ]
