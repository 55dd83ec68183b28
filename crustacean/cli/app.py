"""The root command, its global options and every command, registered the ordinary typer way."""

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer

from crustacean import __version__
from crustacean.cli.common import CrustaceanGroup, console, flags_as_flags, state
from crustacean.cli.output import set_quiet

# Every command, in `--help` order: its name, where it lives ("module:attribute" in
# crustacean.cli: a command function, or a typer.Typer for a group) and the first paragraph of
# its help (tests/test_startup_diet.py checks each against its command).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "init",
        "init_cmd:init",
        "Create a workspace, or adopt an existing one without changing any file it has.",
    ),
    (
        "collect",
        "stages_cmd:collect",
        "Append what is new in the transcripts to the daily logs (stage 1 of 4C).",
    ),
    (
        "curate",
        "stages_cmd:curate",
        "Route the last days' daily entries into contacts, lessons, knowledge… (stage 2 of 4C).",
    ),
    (
        "compile",
        "stages_cmd:compile_",
        "Archive, apply tiers, keep MEMORY.md under its caps, then judge and digest (stage 3).",
    ),
    (
        "calibrate",
        "stages_cmd:calibrate",
        "Monthly audit: health by code, foundation and lessons review, proposals (stage 4).",
    ),
    (
        "health",
        "health_cmd:health",
        "Check the pipeline's cadence and cost and the workspace's shape, item by item.",
    ),
    (
        "status",
        "status_cmd:status",
        "Show each stage's last run and next slot, 30-day cost, and the workspace at a glance.",
    ),
    (
        "doctor",
        "status_cmd:doctor",
        "Check what would stop a scheduled run, with a fix for each problem; exit 1 on a failure.",
    ),
    (
        "tick",
        "tick_cmd:tick",
        "Run every stage that is due, then exit; put it in cron every 15 minutes.",
    ),
    (
        "mcp",
        "mcp_cmd:mcp",
        "Serve the memory tools to an MCP client over stdio (Claude Code, Claude Desktop, …).",
    ),
    (
        "paths",
        "config_cmd:paths",
        "Print every location crustacean uses: workspace, config files, state, logs.",
    ),
    (
        "history",
        "history_cmd:history",
        "List versions, newest first: id, time, actor, message and files.",
    ),
    ("show", "history_cmd:show", "Show one version: who made it, why, and the diff."),
    (
        "rollback",
        "history_cmd:rollback",
        "Restore files as they were at VERSION, recorded as a new version (history is kept).",
    ),
    (
        "undo",
        "history_cmd:undo",
        "Undo one version (or one file of it) as a new version: its files as they were before.",
    ),
    (
        "context",
        "context_cmd:context",
        "Print what an agent should load now: foundation, recent days and memories, within caps.",
    ),
    (
        "search",
        "search_cmd:search",
        "Search the workspace's markdown; print path#lines, score and snippet per hit.",
    ),
    ("index", "search_cmd:index", "Rebuild the search index from scratch."),
    (
        "remember",
        "memory_cmd:remember",
        "Record a ruling in memory/lessons/NAME.md (the same NAME replaces the old one).",
    ),
    (
        "ui",
        "ui_cmd:ui",
        "Serve a local page to see memory, versions and costs, roll back and approve proposals.",
    ),
    (
        "cron",
        "cron_cmd:cron_app",
        "Schedule the pipeline: crontab, launchd (macOS), systemd, OpenClaw or Kubernetes.",
    ),
    ("config", "config_cmd:config_app", "Inspect the layered configuration."),
    (
        "review",
        "review_cmd:review_app",
        "Review proposals: changes a model asked to make to files that need approval.",
    ),
    ("tier", "memory_cmd:tier_app", "Memory tiers: list, plan the lifecycle, or set one by hand."),
    ("runs", "runs_cmd:runs_app", "List pipeline runs, or show one with the tool calls it made."),
    (
        "help",
        "help_cmd:help_",
        "Show the help of a command, like COMMAND --help (without one: the list of commands).",
    ),
)


class LazyGroup(CrustaceanGroup):
    """The root, whose commands are imported when one is looked up, the way click documents for
    large CLIs: a command's start-up does not import the other 23 commands' modules. The
    listing (`--help`, TAB completion) shows each command by its summary, importing none."""

    listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name, _, _ in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = next((row for row in COMMANDS if row[0] == cmd_name), None)
        if found is None:
            return None
        name, where, summary = found
        if self.listing and name not in self.commands:
            return typer.core.TyperCommand(name, help=summary)
        if name not in self.commands:
            self.commands[name] = _load(name, where)
        return self.commands[name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        self.listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self.listing = False


def _load(name: str, where: str) -> Any:
    """The click command `name`, built by typer from `crustacean.cli.<module>:<attribute>`."""
    module, attr = where.split(":")
    target = getattr(importlib.import_module(f"crustacean.cli.{module}"), attr)
    single = typer.Typer(add_completion=False)  # completion is the root's alone
    if isinstance(target, typer.Typer):
        single.add_typer(target, name=name)
        groups: Any = typer.main.get_command(single)  # a group holding the one group
        return groups.commands[name]
    single.command(name)(target)
    command = typer.main.get_command(single)
    flags_as_flags(command)  # a group's CrustaceanGroup does its own
    return command


app = typer.Typer(
    cls=LazyGroup,
    name="crustacean",
    help="Keep an AI agent's markdown memory workspace alive: the 4C pipeline, versioned writes "
    "and recall.",
    epilog="Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        # lazy: system_docs imports the store, which --version alone needs
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
            help="Override a config key for this run, as KEY=VALUE (repeatable), e.g. "
            "-c memory.write=off.",
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
    """The console script: run the app."""
    app(prog_name="crustacean")
