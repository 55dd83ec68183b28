"""The one spelling of time: a `Clock` for what runs, a `now: datetime` for pure rules, and
the one format a person reads a moment in (every CLI table and UI page: `local_time`).

A stage, the store, the MCP server and the UI take `clock: Clock` (called when they need the
time, so a long run sees it move); the rules they apply take the `now` it gave. Tests pass a
fixed clock and every date a run writes (run records, trash folders, proposals) follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo

Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    """Now, aware, in UTC: the default clock of everything that runs."""
    return datetime.now(UTC)


TIME_FORMAT = "%Y-%m-%d %H:%M"  # as `git log --date=iso` shows it, without the offset


def local_time(moment: datetime, tz: tzinfo) -> str:
    """`2026-03-04 09:15`: a moment in the workspace's zone, the one format of every table and
    page; the view names the zone once (`zone_name`) instead of on every row."""
    return moment.astimezone(tz).strftime(TIME_FORMAT)


def zone_name(tz: tzinfo, when: datetime | None = None) -> str:
    """The workspace zone as a view names it once: `Europe/Berlin`, else its abbreviation."""
    key = getattr(tz, "key", None)
    if key and not str(key).startswith("Etc/"):  # Etc/UTC, Etc/GMT+2: the short name reads better
        return str(key)
    return (when or datetime.now(tz)).astimezone(tz).tzname() or "local"


def stored_time(text: str) -> datetime | None:
    """A stored ISO time (a proposal's `2026-03-04T09:15:00Z`) as an aware moment, or None."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
