"""The daily-log naming rule (crustacean/daily.py): one table per question, pure."""

from __future__ import annotations

from datetime import date

import pytest

from crustacean import daily


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("2026-01-05.md", date(2026, 1, 5)),
        ("memory/2026-01-05.md", date(2026, 1, 5)),
        ("2026-01-05-standup.md", date(2026, 1, 5)),
        ("2026-01-05-1430.md", date(2026, 1, 5)),
        ("2024-02-29.md", date(2024, 2, 29)),
        ("2026-02-29.md", None),
        ("2026-13-40.md", None),
        ("2026-00-10.md", None),
        ("2026-01-05-.md", None),
        ("2026-01-05.md.bak", None),
        ("2026-1-5.md", None),
        ("notes.md", None),
        ("x2026-01-05.md", None),
    ],
)
def test_dated_day(name: str, expected: date | None) -> None:
    assert daily.dated_day(name) == expected


@pytest.mark.parametrize(
    ("path", "log", "hook", "shaped"),
    [
        ("memory/2026-03-04.md", date(2026, 3, 4), None, True),
        ("archive/daily/2026-03/2026-03-04.md", date(2026, 3, 4), None, True),
        ("memory/2026-03-04-trip.md", None, date(2026, 3, 4), False),
        ("memory/2026-02-30.md", None, None, True),  # shaped like a log, but no real day
        ("memory/notes/trip.md", None, None, False),
    ],
)
def test_a_log_and_a_hook_file_are_told_apart_by_name(
    path: str, log: date | None, hook: date | None, shaped: bool
) -> None:
    assert (daily.log_day(path), daily.hook_day(path), daily.is_log_name(path)) == (
        log,
        hook,
        shaped,
    )
    assert daily.is_dated_name(path) == (shaped or hook is not None)


@pytest.mark.parametrize(("setting", "folder"), [("root", "memory"), ("daily", "memory/daily")])
def test_the_setting_names_the_folder(setting: str, folder: str) -> None:
    assert daily.folder(setting) == folder
    assert daily.log_path(folder, date(2026, 1, 2)) == f"{folder}/2026-01-02.md"
