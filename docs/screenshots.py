"""Regenerate the screenshots in docs/ui.md: a demo workspace, the real `crustacean ui` app under
uvicorn, and Debian's headless chromium (the same setup as tests/test_ui_browser.py).

    .venv/bin/python docs/screenshots.py          # rewrites docs/ui/*.png

Needs chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver).
Everything runs in a temporary HOME and workspace; nothing reaches the network.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for extra in (REPO, REPO / "tests"):  # this checkout, and the tests' demo data and server
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

OUT = REPO / "docs/ui"
WIDTH, MAX_HEIGHT = 1280, 1300
# (file name, path on the server, element to wait for)
PAGES = [
    ("overview", "/", "#stages"),
    ("files", "/files?dir=memory", "#tree"),
    ("file", "/file?path=memory/contacts/alice.md", "#rendered"),
    ("versions", "/versions", "table.versions"),
    ("version", "/versions/{compile_version}", ".diff"),
    (
        "rollback",
        "/versions/{curate_version}/rollback?path=memory/contacts/alice.md",
        "#confirm-text",
    ),
    ("undo", "/versions/{compile_version}/undo", "#confirm-text"),
    ("proposals", "/proposals", ".proposal"),
    ("runs", "/runs", "#runs"),
    ("run", "/runs/{run}", "#tool-calls"),
    ("search", "/search?q=lighthouse", "#hits"),
]
PHONE = 390  # CSS pixels, a phone's width (emulated: headless chromium keeps windows >= 500)
PHONE_PAGES = [
    ("phone-overview", "/", "#stages"),
    ("phone-versions", "/versions", "table.versions"),
    ("phone-version", "/versions/{compile_version}", ".diff"),
]


EXTRA = {
    "memory/contacts/bob.md": "---\nname: bob\ntier: hot\n---\nBob runs the lighthouse trust.\n",
    "memory/lessons/friday.md": "---\nname: friday\n---\nNo deploys on Friday.\n",
    "memory/reminders/dentist.md": "# Dentist\n\nAppointment on 12 December at 9:30.\n",
    "memory/ideas/tide-tables.md": "---\ntier: cold\n---\nPrint the tide tables for the keeper.\n",
}


def demo(root: Path) -> dict[str, str]:
    """The tests' seed plus a month of runs, so the cost chart has something to draw."""
    from ui_helpers import open_ws, seed

    from crustacean.ops.init import init_workspace
    from crustacean.runs import RunRecorder
    from crustacean.store import history as hist
    from crustacean.store.changes import Change
    from crustacean.store.write import Store
    from crustacean.usage import Usage

    init_workspace(root, detect=False)
    ws = open_ws(root)
    now = datetime.now(UTC)
    for day in range(29, 0, -1):
        plan = [("collect", 0.002 + 0.0004 * (day % 5)), ("curate", 0.021 + 0.002 * (day % 3))]
        if day % 7 == 3:
            plan.append(("compile", 0.38))
        for hour, (stage, cost) in enumerate(plan):
            at = now - timedelta(days=day, hours=hour)
            with RunRecorder(ws, stage, clock=lambda at=at: at, model="claude-demo") as rec:
                rec.add_usage(Usage(9_000, 600, 2_000, 0), cost)
                rec.finish("ok")
    info = seed(ws, now)
    store = Store(ws)
    for path, text in EXTRA.items():
        store.write_context(
            [Change(path, "create", content=text.encode())],
            actor="curate",
            message=f"curate: {path.rsplit('/', 1)[-1]}",
        )
    versions = hist.history(Store(ws), None, 50)
    by_message = {v.message: v.id for v in versions}
    return {
        "compile_version": by_message["compile: weekly pass"],
        "curate_version": by_message["curate: Alice from the 30 Nov log"],
        "run": str(info["runs"][0]),
    }


def main() -> int:
    from ui_helpers import chrome, find_browser, serve

    found = find_browser()
    if isinstance(found, str):
        print(f"Cannot take screenshots: {found}.", file=sys.stderr)
        return 1
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    import crustacean.ops.cron as cron

    cron.read_crontab = lambda _f, **_: ""  # the demo never reads this machine's crontab
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ.update(
            {"HOME": str(base), "CRUSTACEAN_CONFIG_DIR": str(base / "cfg"), "TZ": "UTC"}
        )
        root = base / "demo-workspace"
        ids = demo(root)
        OUT.mkdir(exist_ok=True)
        driver = chrome(*found, base / "profile", WIDTH, 900)
        try:
            with serve(root) as running:
                driver.get(running.url)
                for name, path, ready in PAGES:
                    driver.set_window_size(WIDTH, 900)
                    driver.get(running.base + path.format(**ids))
                    WebDriverWait(driver, 60).until(
                        ec.presence_of_element_located((By.CSS_SELECTOR, ready))
                    )
                    height = driver.execute_script("return document.documentElement.scrollHeight")
                    driver.set_window_size(WIDTH, min(int(height) + 20, MAX_HEIGHT))
                    driver.save_screenshot(str(OUT / f"{name}.png"))
                    print(f"docs/ui/{name}.png")
                for name, path, ready in PHONE_PAGES:
                    phone = {"width": PHONE, "height": 844, "deviceScaleFactor": 1, "mobile": True}
                    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", phone)
                    driver.get(running.base + path.format(**ids))
                    WebDriverWait(driver, 60).until(
                        ec.presence_of_element_located((By.CSS_SELECTOR, ready))
                    )
                    height = driver.execute_script("return document.documentElement.scrollHeight")
                    phone["height"] = min(int(height), MAX_HEIGHT)
                    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", phone)
                    driver.save_screenshot(str(OUT / f"{name}.png"))
                    print(f"docs/ui/{name}.png")
                driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        finally:
            driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
