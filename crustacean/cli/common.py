"""What every command shares: the consoles, the global options and the one error boundary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from crustacean.cli.output import console, err_console, print_json, safe, say, warn
from crustacean.errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CrustaceanError,
    interrupted_line,
    no_space,
)

if TYPE_CHECKING:
    from rich.text import Text

    from crustacean.config import LoadedConfig
    from crustacean.workspace import Workspace

__all__ = ["console", "err_console", "print_json", "safe", "say", "warn"]


class AppState:
    """Global options, set by the root callback (a plain class: every command makes one)."""

    def __init__(self) -> None:
        self.workspace: Path | None = None
        self.overrides: list[str] = []

    def open(self) -> Workspace:
        # lazy: the config schema, ~25 ms, is for commands that open a workspace, not --help
        from crustacean.workspace import open_workspace

        ws = open_workspace(self.workspace, self.overrides)
        for warning in ws.config.warnings:
            warn(f"Warning: {warning}")
        return ws

    def load(self) -> LoadedConfig:
        """The config of the workspace here, or of none (`config show` works outside one)."""
        # lazy: as in open()
        from crustacean.workspace import load_for

        loaded = load_for(self.workspace, self.overrides)
        for warning in loaded.warnings:
            warn(f"Warning: {warning}")
        return loaded


def cell(text: str) -> Text:
    """A table cell of workspace text: control characters escaped, `[markup]` kept literal."""
    # lazy: rich.text, ~50 ms with rich; `context` and a no-op tick never load rich
    from rich.text import Text

    return Text(safe(text))


def state(ctx: typer.Context) -> AppState:
    root = ctx.find_root()
    if not isinstance(root.obj, AppState):
        root.obj = AppState()
    return root.obj


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


def flags_as_flags(command: Any) -> None:
    """typer shows `<bool>` on a flag, as if `--plan true` were asked; a flag takes no value."""
    for param in command.params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


class CrustaceanGroup(TyperGroup):
    """Translates `CrustaceanError` into `Error: …` on stderr and its exit code, once, and
    typer's usage errors into the same short form, and shows flags as flags in the help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in (self, *self.commands.values()):
            flags_as_flags(command)

    def get_params(self, ctx: Any) -> Any:
        """typer adds the completion options after `__init__`; they are flags too."""
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params

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
        except KeyboardInterrupt as e:
            err_console.print(interrupted_line(e), markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as e:
            full = no_space(e)
            if full is None:
                raise
            raise fail(str(full), full.exit_code) from None
