"""The root command and its global options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from crustacean import __version__
from crustacean.cli.common import CrustaceanGroup, console, state
from crustacean.cli.lazy import LazyCommands, loader, plain_params
from crustacean.cli.output import set_quiet

# Every command: (name, module in crustacean.cli, attribute), in `--help` order: commands, then
# groups (a typer.Typer), as typer lists what `app.command` and `app.add_typer` registered. The
# module is imported only when its command is looked up (crustacean/cli/lazy.py), so
# `crustacean paths` does not pay for `mcp` or `review`. A new command goes here.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("init", "init_cmd", "init"),
    ("collect", "stages_cmd", "collect"),
    ("curate", "stages_cmd", "curate"),
    ("compile", "stages_cmd", "compile_"),
    ("calibrate", "stages_cmd", "calibrate"),
    ("health", "health_cmd", "health"),
    ("status", "status_cmd", "status"),
    ("doctor", "status_cmd", "doctor"),
    ("tick", "tick_cmd", "tick"),
    ("mcp", "mcp_cmd", "mcp"),
    ("paths", "config_cmd", "paths"),
    ("history", "history_cmd", "history"),
    ("show", "history_cmd", "show"),
    ("rollback", "history_cmd", "rollback"),
    ("context", "memory_cmd", "context"),
    ("search", "search_cmd", "search"),
    ("index", "search_cmd", "index"),
    ("remember", "memory_cmd", "remember"),
    ("ui", "ui_cmd", "ui"),
    ("cron", "cron_cmd", "cron_app"),
    ("config", "config_cmd", "config_app"),
    ("review", "review_cmd", "review_app"),
    ("tier", "memory_cmd", "tier_app"),
    ("runs", "runs_cmd", "runs_app"),
)


class RootGroup(CrustaceanGroup):
    """The root: its commands are built when looked up, and plain parameters coerce without
    pydantic (crustacean/cli/lazy.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = self.context_settings["help_option_names"]
        registered = dict(self.commands)  # any `app.command(...)` still works, listed last
        self.commands = LazyCommands(
            {
                name: loader(app, name, f"crustacean.cli.{mod}", attr, names)
                for name, mod, attr in COMMANDS
            }
        )
        self.commands.update(registered)
        for command in (self, *registered.values()):
            plain_params(command, names)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """typer appends its completion options after `__init__`: they go plain here, before
        the first parse coerces them (idempotent)."""
        plain_params(self, self.context_settings["help_option_names"])
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=RootGroup,
    name="crustacean",
    help="Keep an AI agent's markdown memory workspace alive: the 4C pipeline, versioned "
    "writes and recall.",
    epilog="Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from crustacean.ops.system_docs import shipped_version

        console.print(f"crustacean {__version__} (pipeline docs {shipped_version()})")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Workspace folder. Default: $CRUSTACEAN_WORKSPACE, then the nearest folder "
            "upwards holding crustacean.toml.",
            show_default=False,
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            "-c",
            metavar="KEY=VALUE",
            help="Override a config key for this run, as KEY=VALUE (repeatable), "
            "e.g. -c memory.write=off.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print only errors and what was asked for by name (--json, context); the exit "
            "code tells the rest. No progress, notes or warnings.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock."""
    st = state(ctx)
    st.workspace = workspace
    st.overrides = list(set_ or [])
    set_quiet(quiet)


def help_(
    ctx: typer.Context,
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The command (and subcommand) to explain, e.g. `review approve`."),
    ] = None,
) -> None:
    """Show the help of a command, like COMMAND --help (without one: the list of commands)."""
    from crustacean.errors import UsageError

    root = ctx.find_root()
    cmd, sub_ctx = root.command, root
    for name in command or []:
        sub = cmd.get_command(sub_ctx, name) if hasattr(cmd, "get_command") else None
        if sub is None:
            known = ", ".join(cmd.list_commands(sub_ctx)) if hasattr(cmd, "list_commands") else ""
            where = " ".join([*sub_ctx.command_path.split()[1:], name])
            raise UsageError(
                f"No command `{where}`."
                + (f" Commands here: {known}." if known else f" `{sub_ctx.command_path}` has none.")
            )
        sub_ctx = sub.make_context(name, [], parent=sub_ctx, resilient_parsing=True)
        cmd = sub
    typer.echo(sub_ctx.get_help(), nl=False)


app.command("help")(help_)


def main() -> None:
    """Run the app (the console script is crustacean.cli.entry:main, which may answer first)."""
    app(prog_name="crustacean")
