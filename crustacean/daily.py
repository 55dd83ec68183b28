"""Daily-log names: the one rule for what a `YYYY-MM-DD.md` log is, and where logs live.

Collect appends to `<folder>/YYYY-MM-DD.md`, where the folder is `memory/` (`daily_dir = "root"`)
or `memory/daily/`. OpenClaw's session-memory hook writes `memory/YYYY-MM-DD-<slug>.md` beside
them; the two are told apart by name. Compile moves old ones to `archive/daily/YYYY-MM/`. Every
module that asks "is this a daily log, and of which day" asks here (pure, no I/O).
"""

from __future__ import annotations

import re
from datetime import date

ROOT_FOLDER = "memory"
SUB_FOLDER = "memory/daily"
DAILY_FOLDERS = (ROOT_FOLDER, SUB_FOLDER)  # a workspace may have switched: both are scanned
ARCHIVE_DAILY = "archive/daily"

_LOG = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")
_HOOK = re.compile(r"(\d{4})-(\d{2})-(\d{2})-[^/]+\.md")


def folder(setting: str) -> str:
    """The daily-log folder for the `workspace.daily_dir` setting (root or daily)."""
    return ROOT_FOLDER if setting == "root" else SUB_FOLDER


def log_path(daily_folder: str, day: date | str) -> str:
    """Workspace-relative path of `day`'s log in `daily_folder` (`day` a date or its ISO form)."""
    return f"{daily_folder}/{day.isoformat() if isinstance(day, date) else day}.md"


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def is_log_name(path: str) -> bool:
    """Whether the last part of `path` is shaped like a daily log (`YYYY-MM-DD.md`)."""
    return _LOG.fullmatch(_name(path)) is not None


def is_dated_name(path: str) -> bool:
    """A daily log or a hook file by shape (`YYYY-MM-DD.md`, `YYYY-MM-DD-<slug>.md`)."""
    name = _name(path)
    return _LOG.fullmatch(name) is not None or _HOOK.fullmatch(name) is not None


def log_day(path: str) -> date | None:
    """The day of a daily log (the last part of `path`); None unless a real calendar date."""
    return _day(_LOG.fullmatch(_name(path)))


def hook_day(path: str) -> date | None:
    """The day of a session-memory hook file (`YYYY-MM-DD-<slug>.md`), or None."""
    return _day(_HOOK.fullmatch(_name(path)))


def dated_day(path: str) -> date | None:
    """The day of a daily log or a hook file, or None."""
    return log_day(path) or hook_day(path)


def _day(match: re.Match[str] | None) -> date | None:
    return calendar_day(*match.groups()) if match else None


def calendar_day(year: str, month: str, day: str) -> date | None:
    """A calendar date, or None for `2026-13-40`."""
    try:
        return date(int(year), int(month), int(day))
    except ValueError:
        return None
