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


# ---------------------------------------------------------------- a phone and a laptop


def screen(d: Any, width: int) -> None:
    """A viewport `width` CSS pixels wide, as a phone's (headless chromium keeps a desktop
    window at least 500 px wide, so the size is emulated, as devtools' device mode does)."""
    if width >= 1280:  # the driver's own window (ui_helpers.chrome: 1280 x 900)
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        return
    metrics = {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": True}
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def layout(d: Any) -> dict[str, Any]:
    """What the header and the page look like to the user: where each header link is, whether
    the page scrolls sideways, the search box's box."""
    result: dict[str, Any] = d.execute_script(
        """
        const bar = document.querySelector('header').getBoundingClientRect();
        const nav = document.querySelector('header nav');
        const links = [...nav.querySelectorAll('a')].map(a => {
          const r = a.getBoundingClientRect();
          return {text: a.textContent.trim(), top: r.top, bottom: r.bottom, left: r.left,
                  right: r.right};
        });
        const box = document.querySelector('header input[type=search]').getBoundingClientRect();
        return {width: window.innerWidth, page: document.documentElement.scrollWidth,
                bar: {top: bar.top, bottom: bar.bottom}, links: links,
                navScroll: nav.scrollWidth, navWidth: nav.clientWidth,
                search: {left: box.left, right: box.right},
                main: document.querySelector('main').getBoundingClientRect().top,
                wide: [...document.querySelectorAll('main *')].filter(
                  e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 5).map(
                  e => e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 60))};
        """
    )
    return result


@pytest.mark.parametrize("width", [390, 1280])
def test_the_page_fits_a_phone_and_a_laptop(site, width: int) -> None:
    ws, d, _ = site
    screen(d, width)
    weekly = next(
        v for v in hist.history(Store(ws), None, 20) if v.message == "compile: weekly pass"
    )
    for path, wait in (
        ("/", "#stages"),
        ("/versions", "table.versions"),
        (f"/versions/{weekly.id}", ".diff"),
    ):
        d.get(d.current_url.split("/", 3)[0] + "//" + d.current_url.split("/", 3)[2] + path)
        wait_for(d, wait)
        got = layout(d)
        assert got["page"] <= got["width"], (path, got["wide"])  # no sideways scroll
        names = [link["text"].split(" (")[0] for link in got["links"]]
        assert names == ["Overview", "Files", "Versions", "Proposals", "Runs", "Search"]
        for link in got["links"]:  # inside the bar, above the page (the bar may scroll them)
            assert got["bar"]["top"] <= link["top"] and link["bottom"] <= got["bar"]["bottom"]
        assert got["bar"]["bottom"] <= got["main"]
        assert got["search"]["left"] >= 0 and got["search"]["right"] <= got["width"]
    cells = css(d, ".diff pre span")
    assert cells and all(c.size["width"] <= width for c in cells)
    undo, whole = css(d, "#undo-all")[0], css(d, "#rollback-all")[0]
    if width == 390:  # the whole-workspace rollback comes after the everyday actions, as a link
        assert whole.location["y"] > undo.location["y"] or whole.location["x"] > undo.location["x"]
        assert whole.value_of_css_property("font-size") == "12px"
        d.get(d.current_url.rsplit("/versions", 1)[0] + "/versions")
        row = css(d, "table.versions tr")[1]
        assert row.value_of_css_property("display") == "block"  # stacked rows
    d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_undo_a_change_in_the_browser(site) -> None:
    ws, d, _ = site
    weekly = next(
        v for v in hist.history(Store(ws), None, 20) if v.message == "compile: weekly pass"
    )
    click_and_wait(d, link(d, "Versions"), "table.versions")
    row = next(r for r in css(d, "table.versions tr") if weekly.id[:12] in r.text)
    click_and_wait(d, row.find_element("css selector", "a.version-link"), ".diff")
    confirm = click_and_wait(d, css(d, "#undo-all")[0], "#confirm-text")
    assert "2 file(s)" in confirm.text and "new version" in confirm.text
    done = click_and_wait(d, css(d, "#confirm-undo")[0], "#done")
    assert "Undone" in done.text
    assert "tea over coffee" in (ws.root / "memory/contacts/alice.md").read_text()
    assert not (ws.root / "knowledge/topics/lighthouse.md").exists()
    assert hist.history(Store(ws), None, 1)[0].message.startswith(
        f"undo 2 file(s) of version {weekly.id[:12]}"
    )


def test_the_empty_past_the_end_and_404_pages(site) -> None:
    _, d, _ = site
    origin = "/".join(d.current_url.split("/", 3)[:3])
    d.get(origin + "/versions?page=99")
    assert "past the end" in wait_for(d, "#past-the-end").text
    d.get(origin + "/versions?path=memory/notes/never.md")
    assert "No versions yet" in wait_for(d, "#empty").text
    d.get(origin + "/no/such/page")
    assert "There is no page at /no/such/page" in wait_for(d, "#error").text
    assert [a.text for a in css(d, "header nav a")][:2] == ["Overview", "Files"]
    assert d.title == "Not found · crustacean"
