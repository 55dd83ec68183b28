"""The whole-workspace rollback confirmation, summarised by top-level folder, with every file one
link away (paged); a one-file rollback still names its file. A version that changed 600 files
(edits, deletions, new files in four folders) is rolled back through the page: in-process, then
in a real headless chromium.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from test_ui_browser import FOUND, click_and_wait, css, wait_for
from ui_helpers import chrome, serve

from crustacean.store import history as hist
from crustacean.store.changes import Change
from crustacean.store.write import Store
from crustacean.ui import views
from crustacean.ui.security import Guard
from crustacean.ui.server import FILES_PER_PAGE, UiContext, build_app
from crustacean.workspace import Workspace

FOLDERS = {"memory/contacts": 200, "memory/notes": 250, "knowledge/topics": 130}
GIT_ID = ["-c", "user.name=Sam", "-c", "user.email=sam@example.com"]

BY_FOLDER = [
    # (changes as (path, mode), expected rows as (folder, restore, bring back, trash))
    ([], []),
    ([("SOUL.md", "overwrite")], [("(root)", 1, 0, 0)]),
    (
        [
            ("memory/a.md", "overwrite"),
            ("memory/notes/b.md", "delete"),
            ("knowledge/c.md", "create"),
            ("USER.md", "edit"),
            ("memory/d.md", "create"),
        ],
        [("(root)", 1, 0, 0), ("knowledge", 0, 1, 0), ("memory", 1, 1, 1)],
    ),
]


@pytest.mark.parametrize(("changes", "rows"), BY_FOLDER)
def test_by_folder(changes: list[tuple[str, str]], rows: list[tuple[str, int, int, int]]) -> None:
    got = views.by_folder(Change(p, m) for p, m in changes)
    assert [(f.folder, f.restore, f.bring_back, f.trash) for f in got] == rows
    assert sum(f.total for f in got) == len(changes)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *GIT_ID, *args], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def big(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, str]:
    """580 memories committed, then one version that deletes half, edits the other half and
    adds 20 notes: the first version is a whole-workspace rollback of 600 files away."""
    import crustacean.ops.cron as cron

    monkeypatch.setattr(cron, "read_crontab", lambda _f, **_: "")
    for folder, n in FOLDERS.items():
        (ws.root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            text = f"# Note {i}\n\nMet at the co-op market on a Saturday; follow up {i}.\n"
            (ws.root / folder / f"note-{i:04d}.md").write_text(text)
    _git(ws.root, "add", "-A")
    _git(ws.root, "commit", "-qm", "memories")
    base = _git(ws.root, "rev-parse", "HEAD").strip()
    for folder, n in FOLDERS.items():
        for i in range(n):
            path = ws.root / folder / f"note-{i:04d}.md"
            if i % 2 == 0:
                path.unlink()
            else:
                path.write_text(path.read_text() + "- an agent's bad pass\n")
    for i in range(20):
        (ws.root / "knowledge" / f"new-{i}.md").write_text(f"# New {i}\n")
    _git(ws.root, "add", "-A")
    _git(ws.root, "commit", "-qm", "a bad pass")
    return ws, base


def _client(root: Path) -> TestClient:
    guard = Guard.new(8125)
    client = TestClient(
        build_app(UiContext(root, [], guard)),
        base_url="http://127.0.0.1:8125",
        follow_redirects=False,
    )
    client.cookies.set(guard.cookie, guard.token)
    return client


def _expected(ws: Workspace, base: str) -> list[views.FolderCount]:
    _, changes = hist.rollback_changes(Store(ws), base, [])
    return views.by_folder(changes)


def test_the_confirmation_counts_per_folder_and_links_the_full_list(
    big: tuple[Workspace, str],
) -> None:
    ws, base = big
    client = _client(ws.root)
    page = client.get(f"/versions/{base}/rollback").text
    rows = _expected(ws, base)
    total = sum(f.total for f in rows)
    assert total == 600 and [f.folder for f in rows] == ["knowledge", "memory"]
    assert "Roll back 600 file(s)" in page
    table = page.split('id="by-folder"', 1)[1].split("</table>", 1)[0]
    for f in rows:
        cells = re.findall(rf">{f.folder}</a></td>(.*?)</tr>", table)[0]
        assert re.findall(r">(\d+)</td>", cells) == [
            str(n) for n in (f.restore, f.bring_back, f.trash, f.total)
        ]
    assert 'id="what-changes"' not in page  # no file-by-file list on the confirmation
    assert page.count("restore: ") == 0
    assert f'href="/versions/{base}/rollback/files"' in page
    assert len(page.encode()) < 40_000  # a first look at the diff, not one line per file

    listed = []
    for n in (1, 2, 3, 4):
        part = client.get(f"/versions/{base}/rollback/files?page={n}").text
        if 'id="rollback-files"' in part:
            section = part.split('id="rollback-files"', 1)[1].split("</ul>", 1)[0]
            listed += re.findall(r"([\w/.-]+\.md)</", section)
    assert len(listed) == 600 == len(set(listed))
    assert len(re.findall("<li ", client.get(f"/versions/{base}/rollback/files").text)) == (
        FILES_PER_PAGE
    )
    past = client.get(f"/versions/{base}/rollback/files?page=9").text
    assert 'id="past-the-end"' in past
    knowledge = client.get(f"/versions/{base}/rollback/files?folder=knowledge").text
    assert "in this folder" in knowledge
    assert all(p.startswith("knowledge/") for p in re.findall(r"([\w/.-]+\.md)</", knowledge))


def test_a_one_file_rollback_still_names_its_file(big: tuple[Workspace, str]) -> None:
    ws, base = big
    page = _client(ws.root).get(f"/versions/{base}/rollback?path=memory/notes/note-0001.md").text
    assert "restore: memory/notes/note-0001.md" in page and 'id="by-folder"' not in page


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if isinstance(FOUND, str):
        pytest.skip(FOUND)
    browser = chrome(*FOUND, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield browser
    finally:
        browser.quit()  # type: ignore[attr-defined]  # selenium's driver


@pytest.mark.parametrize("width", [390, 1280])
def test_roll_back_600_files_in_the_browser(
    big: tuple[Workspace, str], driver: Any, width: int
) -> None:
    ws, base = big
    d = driver
    d.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 700},
    )
    try:
        with serve(ws.root) as running:
            d.get(running.url)
            wait_for(d, "#stages")
            d.get(f"{running.base}/versions/{base}/rollback")
            summary = wait_for(d, "#by-folder")
            assert "knowledge" in summary.text and "memory" in summary.text
            page = d.execute_script("return document.documentElement.scrollWidth")
            assert page <= width  # the summary fits a phone's width
            listing = click_and_wait(d, css(d, "#all-files")[0], "#rollback-files")
            assert len(listing.find_elements("css selector", "li")) == FILES_PER_PAGE
            click_and_wait(d, css(d, "#back-to-confirm")[0], "#by-folder")
            done = click_and_wait(d, css(d, "#confirm-rollback")[0], "#done")
            assert "Rolled back" in done.text
    finally:
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    top = hist.history(Store(ws), None, 1)[0]
    restored = [f for f in top.files if not f.startswith("archive/trash/")]
    assert top.actor == "user" and len(restored) == 600  # and the 20 new files' trash copies
    assert _git(ws.root, "status", "--porcelain") == ""
    assert (ws.root / "memory/notes/note-0000.md").is_file()  # deleted by the bad pass: back
    assert not (ws.root / "knowledge/new-0.md").exists()  # added by it: in the trash
