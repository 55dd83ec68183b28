"""`crustacean ui`: the local web page, in the foreground."""

import contextlib
import os
import sys
import threading
import webbrowser
from typing import Annotated

import typer

from crustacean.cli.common import console, state


def ui(
    ctx: typer.Context,
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one)."),
    ] = 0,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Do not open the page in a browser.")
    ] = False,
) -> None:
    """Serve a local page to see memory, versions and costs, roll back and approve proposals.

    It listens on 127.0.0.1 only; the printed URL holds a random token, needed once per browser.
    Stop it with Ctrl-C.
    """
    # lazy: ui.server imports starlette and uvicorn, ~370 ms, that `crustacean --help` (which
    # builds every command) would pay
    from crustacean.ui.server import prepare

    st = state(ctx)
    ws = st.open()
    serving = prepare(ws.root, st.overrides, port)
    console.print(f"crustacean ui for {ws.root}", markup=False)
    console.print(f"Open {serving.url}", markup=False, soft_wrap=True)
    console.print("Press Ctrl-C to stop.")
    if not no_open and not _open_browser(serving.url):
        console.print("No graphical browser here; open the URL in one on this machine.")
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        serving.run()
    console.print("Stopped.")


def _open_browser(url: str) -> bool:
    """Open a graphical browser, in the background. Without a display, Python's webbrowser
    would start a text browser in this terminal, so then it is not asked at all."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    return True
