"""The root's words, in one place: its commands, their summaries, its help, epilog and options.

Stdlib only, so the console script can print the root listing from them before typer loads
(crustacean/cli/help_fast.py) while the app (crustacean/cli/app.py) builds its commands and
options from the same tuples: the two cannot drift apart.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~3 ms of the lean listing (cli/help_fast.py)
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from crustacean.lean import NamedTuple

PROG = "crustacean"

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
    ("undo", "history_cmd", "undo"),
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
    "undo": "Undo one version (or one file of it) as a new version: its files as they were before.",
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

ROOT_HELP = (
    "Keep an AI agent's markdown memory workspace alive: the 4C pipeline, versioned writes and "
    "recall."
)
ROOT_EPILOG = "Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock."
HELP_OPTION_NAMES = ("-h", "--help")
# The arguments that print the root listing, and the app's exit code for each (a bare call is
# typer's no_args_is_help: the listing, exit 2). The console script checks these before it
# imports the listing's renderer (cli/help_fast.py), so no other command pays for it.
LISTING_FORMS: dict[tuple[str, ...], int] = {
    **{(name,): 0 for name in HELP_OPTION_NAMES},
    (): 2,
    (HELP[0],): 0,
}


class RootOption(NamedTuple):
    """One of the root's own options: its names, the type its help shows, its help text."""

    long: str
    short: str
    shown_type: str  # what typer prints in the type column ("" for a flag)
    help: str


WORKSPACE = RootOption(
    "--workspace",
    "-w",
    "<path>",
    "Workspace folder. Default: $CRUSTACEAN_WORKSPACE, then the nearest folder upwards holding "
    "crustacean.toml.",
)
SET = RootOption(
    "--set",
    "-c",
    "KEY=VALUE",
    "Override a config key for this run, as KEY=VALUE (repeatable), e.g. -c memory.write=off.",
)
QUIET = RootOption(
    "--quiet",
    "-q",
    "",
    "Print only errors and what was asked for by name (--json, context); the exit code tells "
    "the rest. No progress, notes or warnings.",
)
VERSION = RootOption("--version", "", "", "Print the version and exit.")
ROOT_OPTIONS = (WORKSPACE, SET, QUIET, VERSION)  # in the order the root callback declares them
