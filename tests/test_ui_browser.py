"""`crustacean ui` in a real headless browser (Debian's chromium driven by Selenium).

One browser session serves the whole module; each test gets a fresh seeded workspace and its own
server on an ephemeral port. Waits are on page elements (WebDriverWait polls the page), with
a generous outer timeout only as a safety net. Without chromium and chromedriver the tests skip
and say why (.ci/run installs them where it can).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ui_helpers import ALICE, SOUL_ADDED, chrome, find_browser, seed, serve

from conftest import snapshot
from crustacean.store import history as hist
from crustacean.store import proposals
from crustacean.store.write import Store
from crustacean.workspace import Workspace

FOUND = find_browser()
pytestmark = pytest.mark.skipif(isinstance(FOUND, str), reason=str(FOUND))
WAIT = 60  # seconds: an outer safety net, never a timing assertion


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    assert not isinstance(FOUND, str)
    browser = chrome(*FOUND, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield browser
    finally:
        browser.quit()  # type: ignore[attr-defined]  # selenium's driver


@pytest.fixture(autouse=True)
def no_crontab(monkeypatch: pytest.MonkeyPatch) -> None:
    import crustacean.ops.cron as cron

    monkeypatch.setattr(cron, "read_crontab", lambda _f, **_: "")


@pytest.fixture
def site(ws: Workspace, driver: Any) -> Iterator[tuple[Workspace, Any, dict[str, object]]]:
    info = seed(ws)
    with serve(ws.root) as running:
        driver.get(running.url)  # the token URL: sets the cookie and lands on the overview
        wait_for(driver, "#stages")
        yield ws, driver, info


def wait_for(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def click_and_wait(driver: Any, element: Any, css: str) -> Any:
    """Click something that navigates, then wait for the old page to go and `css` to appear."""
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    element.click()
    WebDriverWait(driver, WAIT).until(ec.staleness_of(element))
    return wait_for(driver, css)


def link(driver: Any, text: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.PARTIAL_LINK_TEXT, text)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def test_overview_then_a_version_and_its_diff(site) -> None:
    _, d, _ = site
    assert d.current_url.endswith("/") and "token=" not in d.current_url
    assert "compile" in css(d, "#stages")[0].text and css(d, "svg.chart")
    assert "Pending proposals" in css(d, "#pending")[0].text
    click_and_wait(d, link(d, "Versions"), "table.versions")
    row = next(r for r in css(d, "table.versions tr") if "compile: weekly pass" in r.text)
    assert "agent write · compile" in row.text and "2 files" in row.text
    version = row.find_element("css selector", "a.version-link")
    click_and_wait(d, version, ".diff")
    paths = [x.get_attribute("data-path") for x in css(d, ".diff")]
    assert paths == ["knowledge/topics/lighthouse.md", "memory/contacts/alice.md"]
    added = [x.text for x in css(d, '.diff[data-path="memory/contacts/alice.md"] .add')]
    removed = [x.text for x in css(d, '.diff[data-path="memory/contacts/alice.md"] .del')]
    assert added == ["+Alice prefers green tea, never coffee."]
    assert removed == ["-Alice prefers tea over coffee."]


def test_roll_back_a_file_and_see_the_new_version(site) -> None:
    ws, d, _ = site
    path = "memory/contacts/alice.md"
    created = hist.history(Store(ws), path, 10)[-1]
    click_and_wait(d, link(d, "Versions"), "table.versions")
    row = next(r for r in css(d, "table.versions tr") if created.id[:12] in r.text)
    click_and_wait(d, row.find_element("css selector", "a.version-link"), ".diff")
    button = next(x for x in css(d, ".diff") if x.get_attribute("data-path") == path).find_element(
        "css selector", "a.rollback-file"
    )
    confirm = click_and_wait(d, button, "#confirm-text")
    assert "1 file(s)" in confirm.text and "new version" in confirm.text
    assert f"restore: {path}" in css(d, "#what-changes")[0].text
    done = click_and_wait(d, css(d, "#confirm-rollback")[0], "#done")
    assert "Rolled back" in done.text
    assert "rollback" in css(d, "h1 .badge")[0].text
    assert (ws.root / path).read_text() == ALICE
    click_and_wait(d, link(d, "Versions"), "table.versions")
    newest = css(d, "table.versions tr")[1]
    assert "rollback" in newest.text and path in newest.text


def test_approve_a_proposal_and_see_the_file_change(site) -> None:
    ws, d, info = site
    pid = info["proposals"][0]
    click_and_wait(d, link(d, "Proposals"), ".proposal")
    card = css(d, f"#proposal-{pid}")[0]
    assert "replaces SOUL.md" in card.find_element("css selector", ".mark").text
    assert "Be brief, warm and exact." in card.find_element("css selector", ".diff").text
    done = click_and_wait(d, card.find_element("css selector", "button.approve"), "#done")
    assert "Approved" in done.text
    click_and_wait(d, link(d, "SOUL.md"), "#rendered")
    assert SOUL_ADDED.split("\n")[1] in css(d, "#rendered")[0].text
    assert proposals.get(ws, pid).status == "approved"


def test_reject_a_proposal_and_see_nothing_change(site) -> None:
    ws, d, info = site
    pid = info["proposals"][1]
    before = {k: v for k, v in snapshot(ws.root).items() if not k.startswith(".crustacean/")}
    user_md = (ws.root / "USER.md").read_text()
    click_and_wait(d, link(d, "Proposals"), ".proposal")
    card = css(d, f"#proposal-{pid}")[0]
    card.find_element("css selector", "input[name=reason]").send_keys("not needed")
    done = click_and_wait(d, card.find_element("css selector", "button.reject"), "#done")
    assert f"Rejected proposal {pid}: nothing was written." in done.text
    assert not css(d, f"#proposal-{pid}")  # gone from the pending list
    assert (ws.root / "USER.md").read_text() == user_md
    after = {k: v for k, v in snapshot(ws.root).items() if not k.startswith(".crustacean/")}
    assert after == before
    assert proposals.get(ws, pid).status == "rejected"


def test_search_and_follow_a_hit(site) -> None:
    from selenium.webdriver.common.keys import Keys

    _, d, _ = site
    box = css(d, "header input[type=search]")[0]
    box.send_keys("lighthouse")
    old = css(d, "#stages")[0]
    box.send_keys(Keys.ENTER)
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(d, WAIT).until(ec.staleness_of(old))
    wait_for(d, "#hits")
    hits = css(d, "#hits a.hit")
    assert hits and any("knowledge/topics/lighthouse.md" in h.text for h in hits)
    hit = next(h for h in hits if "knowledge/topics/lighthouse.md" in h.text)
    click_and_wait(d, hit, "#raw")
    assert css(d, "#file-path")[0].text == "knowledge/topics/lighthouse.md"
    marked = " ".join(x.text for x in css(d, "#raw span.hl"))
    assert "lighthouse" in marked.lower()
    assert "#L" in d.current_url
