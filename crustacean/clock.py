"""The one spelling of time: a `Clock` for what runs, a `now: datetime` for pure rules.

A stage, the store, the MCP server and the UI take `clock: Clock` (called when they need the
time, so a long run sees it move); the rules they apply take the `now` it gave. Tests pass a
fixed clock and every date a run writes (run records, trash folders, proposals) follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    """Now, aware, in UTC: the default clock of everything that runs."""
    return datetime.now(UTC)
