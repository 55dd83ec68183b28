"""The root command and its global options."""

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
# `crustacean paths` does not pay for `mcp` or `review`. A new command goes here and in SUMMARIES.
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
    ("context", "context_cmd", "context"),
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
HELP = ("help", "help_cmd", "help_")  # `crustacean help`: listed last, as typer lists its own

# The first paragraph of each command's help: the root's listing (`--help`, a bare `crustacean`,
# TAB completion) shows these without importing any command's module (tests/test_startup_diet.py
# checks each against its command).
SUMMARIES: dict[str, str] = {
    "init": "Create a workspace, or adopt an existing one without changing any file it has.",
    "collect": "Append what is new in the transcripts to the daily logs (stage 1 of 4C).",
    "curate": (
        "Route the last days' daily entries into contacts, lessons, knowledge… (stage 2 of 4C)."
    ),
    "compile": (
        "Archive, apply tiers, keep MEMORY.md under its caps, then judge and digest (stage 3)."
    ),
    "calibrate": (
        "Monthly audit: health by code, foundation and lessons review, proposals (stage 4)."
    ),
    "health": "Check the pipeline's cadence and cost and the workspace's shape, item by item.",
    "status": (
        "Show each stage's last run and next slot, 30-day cost, and the workspace at a glance."
    ),
    "doctor": (
        "Check what would stop a scheduled run, with a fix for each problem; exit 1 on a failure."
    ),
    "tick": "Run every stage that is due, then exit; put it in cron every 15 minutes.",
    "mcp": "Serve the memory tools to an MCP client over stdio (Claude Code, Claude Desktop, …).",
    "paths": "Print every location crustacean uses: workspace, config files, state, logs.",
    "history": "List versions, newest first: id, time, actor, message and files.",
    "show": "Show one version: who made it, why, and the diff.",
    "rollback": (
        "Restore files as they were at VERSION, recorded as a new version (history is kept)."
    ),
    "context": (
        "Print what an agent should load now: foundation, recent days and memories, within caps."
    ),
    "search": "Search the workspace's markdown; print path#lines, score and snippet per hit.",
    "index": "Rebuild the search index from scratch.",
    "remember": "Record a ruling in memory/lessons/NAME.md (the same NAME replaces the old one).",
    "ui": "Serve a local page to see memory, versions and costs, roll back and approve proposals.",
    "cron": "Schedule the pipeline: a crontab block (default), a systemd user timer, or OpenClaw.",
    "config": "Inspect the layered configuration.",
    "review": "Review proposals: changes a model asked to make to files that need approval.",
    "tier": "Memory tiers: list, plan the lifecycle, or set one by hand.",
    "runs": "List pipeline runs, or show one with the tool calls it made.",
    "help": "Show the help of a command, like COMMAND --help (without one: the list of commands).",
}


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


def main() -> None:
    """Run the app (the console script is crustacean.cli.entry:main, which may answer first)."""
    app(prog_name="crustacean")
