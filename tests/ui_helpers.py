"""Shared by the UI tests and docs/screenshots.py: a workspace with something to look at, and a
real uvicorn server on an ephemeral port.

The socket is bound and listening before the server thread starts, so a client may connect at
once (the kernel queues the connection until uvicorn accepts it): no waiting for start-up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from crustacean.config import load_config
from crustacean.runs import RunRecorder
from crustacean.store.changes import Change
from crustacean.store.write import Store
from crustacean.ui.security import Guard
from crustacean.ui.server import UiContext, build_app, listen
from crustacean.usage import Usage
from crustacean.workspace import Workspace

HOSTILE = (
    "# Evil <script>alert('x')</script>\n\n"
    '<img src=x onerror="alert(1)">\n\n'
    '[click](javascript:alert(2)) and "quotes" & <b>bold</b>\n'
)
ALICE = "# Alice\n\nAlice prefers tea over coffee.\nShe works on the lighthouse project.\n"
SOUL_ADDED = "\nBe brief, warm and exact.\nAsk before deleting anything.\n"


def seed(ws: Workspace, now: datetime | None = None) -> dict[str, object]:
    """Memories by several actors, three runs with tool calls, and two pending proposals."""
    now = now or datetime.now(UTC)
    store = Store(ws)
    store.write_context(
        [Change("memory/contacts/alice.md", "create", content=ALICE.encode())],
        actor="curate",
        message="curate: Alice from the 30 Nov log",
    )
    store.write_context(
        [
            Change(
                "memory/contacts/alice.md",
                "edit",
                old=b"tea over coffee",
                new=b"green tea, never coffee",
            ),
            Change(
                "knowledge/topics/lighthouse.md",
                "create",
                content=b"# Lighthouse\n\nThe lighthouse project restores the old lamp.\n",
            ),
        ],
        actor="compile",
        message="compile: weekly pass",
    )
    store.write_context(
        [Change("memory/notes/hostile.md", "create", content=HOSTILE.encode())],
        actor="user",
        message="a note with <b>markup</b> in it",
    )
    runs = []
    for days_ago, stage, cost in (
        (0, "collect", 0.0021),
        (1, "curate", 0.0312),
        (6, "compile", 0.41),
    ):
        at = now - timedelta(days=days_ago, hours=1)
        with RunRecorder(ws, stage, clock=lambda at=at: at, model=f"claude-{stage}") as rec:
            rec.turn()
            rec.add_usage(Usage(12_000, 800, 3_000, 0), cost)
            rec.tool_call("read_context_file", {"path": "MEMORY.md"}, False, "read MEMORY.md")
            rec.tool_call(
                "write_context",
                {"changes": [{"path": "SOUL.md", "mode": "delete"}], "message": "<tidy>"},
                True,
                "refused: curate may not delete SOUL.md",
            )
            rec.wrote(["memory/contacts/alice.md"], None, None)
            rec.finish("ok", summary=f"{stage} done")
            runs.append(rec.record.id)
    soul = store.read_context_file("SOUL.md")
    first = store.write_context(
        [
            Change(
                "SOUL.md",
                "overwrite",
                content=(soul.content + SOUL_ADDED).encode(),
                expected_sha256=soul.sha256,
            )
        ],
        actor="calibrate",
        message="calibrate: tighten the soul",
    )
    second = store.write_context(
        [Change("USER.md", "append", content=b"\nLikes short answers.\n")],
        actor="calibrate",
        message="calibrate: note a preference",
    )
    return {"runs": runs, "proposals": [first.proposal, second.proposal]}


def open_ws(root: Path) -> Workspace:
    return Workspace(root, load_config(root))


@dataclass
class Running:
    guard: Guard
    base: str

    @property
    def url(self) -> str:
        return self.guard.url()


@contextmanager
def serve(root: Path, overrides: list[str] | None = None) -> Iterator[Running]:
    """The real app under uvicorn in a thread; stopped and joined on exit."""
    import uvicorn

    sock = listen(0)
    guard = Guard.new(sock.getsockname()[1])
    app = build_app(UiContext(root, overrides or [], guard))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield Running(guard, f"http://127.0.0.1:{guard.port}")
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> tuple[str, str] | str:
    """(browser, driver) paths, or why there is none (the browser tests skip with it)."""
    import shutil

    try:
        import selenium  # noqa: F401  (only whether it is installed)
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    browser = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        return (
            "no headless chromium and chromedriver on PATH "
            "(Debian: apt-get install chromium chromium-driver)"
        )
    return browser, driver


def chrome(
    browser: str, driver: str, profile: Path, width: int = 1280, height: int = 900
) -> object:
    """Debian's chromium, headless, offline: no sync, updates, extensions or proxy lookups."""
    import os

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver or browser
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--no-proxy-server",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)
