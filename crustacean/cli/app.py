"""The root command and its global options."""

from pathlib import Path
from typing import Annotated, Any

import typer

from crustacean import __version__
from crustacean.cli.commands import (
    COMMANDS,
    HELP,
    HELP_OPTION_NAMES,
    PROG,
    QUIET,
    ROOT_EPILOG,
    ROOT_HELP,
    SET,
    SUMMARIES,
    VERSION,
    WORKSPACE,
)
from crustacean.cli.common import CrustaceanGroup, console, state
from crustacean.cli.lazy import LazyCommands, loader, plain_params
from crustacean.cli.output import set_quiet


class RootGroup(CrustaceanGroup):
    """The root: its commands are built when looked up, and plain parameters coerce without
    pydantic (crustacean/cli/lazy.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = self.context_settings["help_option_names"]
        registered = dict(self.commands)  # any `app.command(...)` still works, listed last
        self.lazy = LazyCommands(
            {
                name: loader(app, name, f"crustacean.cli.{mod}", attr, names)
                for name, mod, attr in (*COMMANDS, HELP)
            },
            SUMMARIES,
        )
        self.commands = self.lazy
        self.commands.update(registered)
        for command in (self, *registered.values()):
            plain_params(command, names)

    def list_commands(self, ctx: Any) -> list[str]:
        """The names, in order, without building a command (typer's builds every one)."""
        return list(self.commands)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The root's help lists every command by its summary, importing none of them."""
        with self.lazy.listing():
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        """TAB after `crustacean `: the names and summaries, importing no command module."""
        with self.lazy.listing():
            return super().shell_complete(ctx, incomplete)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """typer appends its completion options after `__init__`: they go plain here, before
        the first parse coerces them (idempotent)."""
        plain_params(self, self.context_settings["help_option_names"])
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=RootGroup,
    name=PROG,
    help=ROOT_HELP,
    epilog=ROOT_EPILOG,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": list(HELP_OPTION_NAMES)},
)


def _version(value: bool) -> None:
    if value:
        # lazy: system_docs imports the store, ~100 ms, that every command (they all load
        # app.py) would pay for --version alone
        from crustacean.ops.system_docs import shipped_version

        console.print(f"crustacean {__version__} (pipeline docs {shipped_version()})")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(WORKSPACE.long, WORKSPACE.short, help=WORKSPACE.help, show_default=False),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            SET.long, SET.short, metavar=SET.shown_type, help=SET.help, show_default=False
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option(QUIET.long, QUIET.short, help=QUIET.help)] = False,
    version: Annotated[
        bool,
        typer.Option(VERSION.long, callback=_version, is_eager=True, help=VERSION.help),
    ] = False,
) -> None:
    """Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock."""
    st = state(ctx)
    st.workspace = workspace
    st.overrides = list(set_ or [])
    set_quiet(quiet)


def main() -> None:
    """Run the app (the console script is crustacean.cli.entry:main, which may answer first)."""
    app(prog_name=PROG)
