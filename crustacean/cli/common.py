"""What every command shares: the consoles, the global options and the one error boundary."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from typer.core import TyperGroup

from crustacean.errors import EXIT_USAGE, CrustaceanError
from crustacean.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


class _LazyConsole:
    """A rich Console made on first use: rich costs ~20 ms to import, and a command that prints
    through typer.echo (`context`, the SessionStart hook) never needs it."""

    def __init__(self, **settings: Any) -> None:
        self._settings = settings
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._settings)
        return getattr(self._console, name)


console = cast("Console", _LazyConsole(highlight=False))
err_console = cast("Console", _LazyConsole(stderr=True, highlight=False))


@dataclass
class AppState:
    """Global options, set by the root callback."""

    workspace: Path | None = None
    overrides: list[str] = field(default_factory=list)

    def open(self) -> Workspace:
        ws = open_workspace(self.workspace, self.overrides)
        for warning in ws.config.warnings:
            err_console.print(f"Warning: {warning}", markup=False)
        return ws


# C0 (but tab and newline), DEL, C1 and the bidi overrides: each can rewrite what a terminal
# shows (`\x1b[2K` erases a line, `\r` overwrites it, U+202E reverses it).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """Workspace text as a terminal may show it: every control character visible as an escape."""
    return _CONTROL.sub(lambda m: repr(m[0])[1:-1], text)


def cell(text: str) -> Text:
    """A table cell of workspace text: control characters escaped, `[markup]` kept literal."""
    from rich.text import Text

    return Text(safe(text))


def state(ctx: typer.Context) -> AppState:
    root = ctx.find_root()
    if not isinstance(root.obj, AppState):
        root.obj = AppState()
    return root.obj


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))


def fail(message: str, code: int) -> typer.Exit:
    err_console.print(f"Error: {message}", markup=False, soft_wrap=True)
    return typer.Exit(code)


def usage_failure(e: typer.TyperException) -> typer.Exit:
    """A usage error (unknown command or option, missing argument, bad value) in two lines.

    typer's own rendering is a five-line rich panel; ours matches every other error: what was
    wrong, then the command's usage and where its help is.
    """
    if type(e).__name__ == "NoArgsIsHelpError":  # the help is printed already; keep typer's exit
        raise e
    err_console.print(f"Error: {e.format_message()}", markup=False, soft_wrap=True)
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        usage = " ".join(ctx.get_usage().split())
        help_ = f"{ctx.command_path} {ctx.help_option_names[0]}"
        err_console.print(f"{usage}; see `{help_}`.", markup=False, soft_wrap=True)
    return typer.Exit(getattr(e, "exit_code", EXIT_USAGE))


class CrustaceanGroup(TyperGroup):
    """Translates `CrustaceanError` into `Error: …` on stderr and its exit code, once, and
    typer's usage errors into the same short form."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Parse errors of the root options happen here, before `invoke`."""
        try:
            return super().make_context(*args, **kwargs)
        except typer.TyperException as e:
            raise usage_failure(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CrustaceanError as e:
            raise fail(str(e), e.exit_code) from None
        except typer.TyperException as e:
            raise usage_failure(e) from None
