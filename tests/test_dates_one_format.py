"""One time format everywhere a person reads a moment: `2026-03-04 09:15` in the workspace's zone
(as `git log --date=iso` shows it, less the offset), the zone named once per view. Every CLI
table and every UI page takes it from `clock.local_time`.

The workspace is in Asia/Kathmandu (UTC+05:45) while the process runs in UTC, so a time shown in
the host's zone, in UTC, or in git's own format cannot pass for the right one.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from html import unescape
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from starlette.testclient import TestClient
from ui_helpers import seed

from conftest import run_cli
from crustacean.clock import local_time, stored_time, zone_name
from crustacean.runs import list_runs
from crustacean.store import history as hist
from crustacean.store.write import Store
from crustacean.ui.security import Guard
from crustacean.ui.server import UiContext, build_app
from crustacean.workspace import Workspace

ZONE = "Asia/Kathmandu"
KTM = ZoneInfo(ZONE)
OVERRIDE = f"workspace.timezone={ZONE}"
# A date followed by a time, in any spelling: the one allowed is `YYYY-MM-DD HH:MM` then no
# seconds, no `T`, no offset.
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}\S*")
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")
GIT_DATE = re.compile(
    r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
)

LOCAL_TIMES = [
    # (moment, zone, shown)
    (datetime(2026, 3, 4, 9, 15, 59, tzinfo=UTC), UTC, "2026-03-04 09:15"),
    (datetime(2026, 3, 4, 23, 30, tzinfo=UTC), KTM, "2026-03-05 05:15"),  # the next day there
    (datetime(2026, 3, 8, 6, 59, tzinfo=UTC), ZoneInfo("America/New_York"), "2026-03-08 01:59"),
    (datetime(2026, 3, 8, 7, 0, tzinfo=UTC), ZoneInfo("America/New_York"), "2026-03-08 03:00"),
    (datetime(2026, 3, 4, 9, 15, tzinfo=timezone(timedelta(hours=-3))), UTC, "2026-03-04 12:15"),
]


@pytest.mark.parametrize(("moment", "tz", "shown"), LOCAL_TIMES)
def test_local_time(moment: datetime, tz: ZoneInfo, shown: str) -> None:
    assert local_time(moment, tz) == shown


STORED = [
    # (stored text, moment)
    ("2026-03-04T09:15:00Z", datetime(2026, 3, 4, 9, 15, tzinfo=UTC)),
    ("2026-03-04T09:15:00+00:00", datetime(2026, 3, 4, 9, 15, tzinfo=UTC)),
    ("2026-03-04T09:15:00", datetime(2026, 3, 4, 9, 15, tzinfo=UTC)),  # stored naive: UTC
    ("yesterday", None),
]


@pytest.mark.parametrize(("text", "moment"), STORED)
def test_stored_time(text: str, moment: datetime | None) -> None:
    assert stored_time(text) == moment


def test_zone_name() -> None:
    assert zone_name(KTM) == ZONE
    assert zone_name(UTC) == "UTC" and zone_name(ZoneInfo("Etc/UTC")) == "UTC"


def only_one_format(text: str) -> list[str]:
    """Every date with a time in `text`, each checked to be in the one format."""
    found = DATE_TIME.findall(text)
    for shown in found:
        assert ONE_FORMAT.fullmatch(shown.rstrip(".,;)<")), (shown, text)
    assert not GIT_DATE.search(text), GIT_DATE.search(text)
    return found


@pytest.fixture
def seeded(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, dict[str, object]]:
    import crustacean.ops.cron as cron

    monkeypatch.setattr(cron, "read_crontab", lambda _f, **_: "")  # never the real crontab
    return ws, seed(ws)


def _pages(root: Path, run_id: str, version: str) -> dict[str, str]:
    guard = Guard.new(8124)
    client = TestClient(
        build_app(UiContext(root, [OVERRIDE], guard)), base_url="http://127.0.0.1:8124"
    )
    client.cookies.set(guard.cookie, guard.token)
    urls = [
        "/",
        "/versions",
        f"/versions/{version}",
        "/runs",
        f"/runs/{run_id}",
        "/proposals",
        "/file?path=memory/contacts/alice.md",
    ]
    out = {}
    for url in urls:
        got = client.get(url)
        assert got.status_code == 200, (url, got.text[:500])
        out[url] = unescape(re.sub(r"<[^>]+>", " ", got.text))
    return out


def test_every_ui_page_shows_times_in_the_one_format_and_the_workspace_zone(
    seeded: tuple[Workspace, dict[str, object]],
) -> None:
    ws, _ = seeded
    run = list_runs(ws)[0]
    version = hist.history(Store(ws), None, 1)[0]
    pages = _pages(ws.root, run.id, version.id)
    started = local_time(run.started, KTM)
    committed = local_time(version.time, KTM)
    for url, text in pages.items():
        assert f"times in {ZONE}" in text, url
        only_one_format(text)
    assert started in pages["/runs"] and started in pages[f"/runs/{run.id}"]
    assert started in pages["/"]  # the stage's last run
    assert committed in pages["/versions"] and committed in pages[f"/versions/{version.id}"]
    assert committed in pages["/file?path=memory/contacts/alice.md"]
    assert len(only_one_format(pages["/proposals"])) >= 2  # each proposal's `created`


def test_every_cli_table_shows_the_same_times(
    seeded: tuple[Workspace, dict[str, object]],
) -> None:
    ws, _ = seeded
    run = list_runs(ws)[0]
    version = hist.history(Store(ws), None, 1)[0]
    w = ["-w", str(ws.root), "-c", OVERRIDE]
    started, committed = local_time(run.started, KTM), local_time(version.time, KTM)
    shown = {
        args: run_cli(*w, *args.split()).stdout
        for args in ("status", "runs", f"runs show {run.id}", "history", "review", "review show 1")
    }
    for args, text in shown.items():
        assert only_one_format(text), args
        assert ZONE in text, args
    assert started in shown["runs"] and started in shown[f"runs show {run.id}"]
    assert started in shown["status"] and committed in shown["history"]


def test_the_version_page_shows_git_s_date_in_the_one_format() -> None:
    from crustacean.ui.views import ShownVersion

    shown = ShownVersion("0" * 40, "a", "user", "Wed Dec 2 00:44:32 2026 +0000", [], [])
    assert shown.time == datetime(2026, 12, 2, 0, 44, 32, tzinfo=UTC)
    assert local_time(shown.time, KTM) == "2026-12-02 06:29"
    assert ShownVersion("0", "a", "user", "2026-12-02 00:44", [], []).time is None  # shown as is
