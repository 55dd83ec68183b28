"""Due times, table-driven with injected clocks: catch-up once, zones, bad schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from crustacean import schedule
from crustacean.config import STAGES as STAGE_ORDER
from crustacean.schedule import Due, due_stages

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


# ---------------------------------------------------------------------------- slots


def day(d: int, hour: int = 3, minute: int = 30, month: int = 11) -> datetime:
    return datetime(2026, month, d, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "start", "end", "expected"),
    [
        ("30 3 * * *", day(27), day(30), [day(27), day(28), day(29)]),  # start inclusive, end not
        ("30 3 * * *", day(27, 4), day(29, 3, 31), [day(28), day(29)]),
        ("0 4 * * 0", day(1, 0), day(30, 12, 0), [day(d, 4, 0) for d in (1, 8, 15, 22, 29)]),
        ("0 5 1 * *", day(15), day(1, 6, month=12), [datetime(2026, 12, 1, 5, tzinfo=UTC)]),
        ("0 */2 * * *", day(30, 0, 0), day(30, 6, 0), [day(30, hh, 0) for hh in (0, 2, 4)]),
        ("30 3 * * *", day(30, 4), day(30, 5), []),
    ],
)
def test_expected_slots(expr: str, start: datetime, end: datetime, expected: list) -> None:
    got = schedule.expected_slots(expr, start, end)
    assert got == expected
    assert all(s.tzinfo is not None and s.utcoffset() == timedelta(0) for s in got)


@pytest.mark.parametrize(
    ("moment", "at_or_after", "strictly_after"),
    [
        (day(29), day(29), day(30)),  # on a slot: the slot itself, or the next one
        (day(29, 3, 31), day(30), day(30)),
        (day(29, 3, 29), day(29), day(29)),
    ],
)
def test_slot_at_or_after_and_next_slot(
    moment: datetime, at_or_after: datetime, strictly_after: datetime
) -> None:
    assert schedule.slot_at_or_after(DAILY, moment) == at_or_after
    assert schedule.next_slot(DAILY, moment, UTC) == strictly_after
