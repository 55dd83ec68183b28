"""The daily-log warning names its days as ranges on one line (issue 34, item 6): a month of
missing logs in calibrate's request is one line, not one date per line."""

from __future__ import annotations

from datetime import date

import pytest

from crustacean.stages import health as h
from crustacean.stages.calibrate import build_request
from crustacean.workspace import Workspace

D = date.fromisoformat


@pytest.mark.parametrize(
    ("days", "line"),
    [
        ([], ""),
        (["2026-11-03"], "2026-11-03"),
        (["2026-11-03", "2026-11-04"], "2026-11-03..2026-11-04"),
        (
            ["2026-11-05", "2026-11-03", "2026-11-04", "2026-11-09"],
            "2026-11-03..2026-11-05, 2026-11-09",
        ),
        (["2026-10-31", "2026-11-01", "2026-11-01"], "2026-10-31..2026-11-01"),  # over a month end
        (["2026-11-01", "2026-11-03", "2026-11-05"], "2026-11-01, 2026-11-03, 2026-11-05"),
    ],
)
def test_date_ranges(days: list[str], line: str) -> None:
    assert h.date_ranges([D(d) for d in days]) == line


def test_twenty_missing_days_are_one_detail_line() -> None:
    good = "# log\n- 09:00 talked to Ana about the move to Berlin next spring\n"
    logs = {D("2026-11-28"): good, D("2026-11-29"): good}
    logs |= {D(f"2026-11-{d:02d}"): good for d in range(1, 8)}  # 11-08..11-27 missing
    check = h.daily_logs(logs, D("2026-11-30"))
    assert check.figures["missing"][0] == "2026-11-08" and len(check.figures["missing"]) == 20
    assert [line for line in check.details if line.startswith("missing")] == [
        "missing: 2026-11-08..2026-11-27"
    ]


def test_calibrates_request_shows_the_warning_on_one_line(ws: Workspace) -> None:
    good = "# log\n- 09:00 talked to Ana about the move to Berlin next spring\n"
    logs = {D("2026-11-01"): good, D("2026-11-29"): good}
    check = h.daily_logs(logs, D("2026-11-30"))
    health = h.Health((check,))
    prompt = build_request(ws, health, lambda _: None).prompt
    assert "missing: 2026-11-02..2026-11-28" in prompt
    assert "2026-11-15" not in prompt
