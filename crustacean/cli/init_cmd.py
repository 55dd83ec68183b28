"""`crustacean init`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import console, print_json, say, state
from crustacean.cli.output import Col, fit_table
from crustacean.errors import UsageError
from crustacean.ops.init import InitReport, InitRequest, initialize

if TYPE_CHECKING:
    from crustacean.config import SourceConfig


def init(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Argument(
            help="Workspace folder to create or adopt. Never the home folder or one above it.",
            show_default="the --workspace folder, else the current folder",
        ),
    ] = None,
    daily_dir: Annotated[
        str | None,
        typer.Option(
            "--daily-dir",
            help="Where daily logs live: root (memory/YYYY-MM-DD.md) or daily "
            "(memory/daily/YYYY-MM-DD.md). Written to crustacean.toml.",
            show_default="root",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every path, not only the created ones.")
    ] = False,
    no_detect: Annotated[
        bool,
        typer.Option(
            "--no-detect", help="Don't add ~/.openclaw or ~/.claude transcripts as collect sources."
        ),
    ] = False,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="Collect this agent's transcripts: openclaw or claude_code (twice for both). "
            "Without it, init adds the one platform it finds, and asks when it finds both.",
            show_default=False,
        ),
    ] = None,
    sample: Annotated[
        bool,
        typer.Option(
            "--sample",
            help="Make a demo workspace in a new folder: a few weeks of made-up memory, and two "
            "days of OpenClaw and Claude Code transcripts as its collect sources.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Create a workspace, or adopt an existing one without changing any file it has.

    The one exception: memory/.system/ docs you never edited are replaced by the shipped ones;
    an edited one is kept and the new version becomes a proposal (crustacean review)."""
    directory = _folder(directory, state(ctx).workspace)
    request = InitRequest(directory, daily_dir, not no_detect, tuple(source or ()), sample)
    report = initialize(request, _ask_which if _interactive() else None)
    if as_json:
        print_json(report.to_json())
        return
    _say_report(report, sample=sample, verbose=verbose)


def _folder(directory: Path | None, workspace: Path | None) -> Path | None:
    """The folder to init: `crustacean -w X init` inits X, as `git -C X init` does (init
    never looks for the nearest workspace upwards: that one exists already)."""
    if directory is None or workspace is None or directory.resolve() == workspace.resolve():
        return directory or workspace
    raise UsageError(
        f"init was given two folders, {directory} and --workspace {workspace}; "
        "give the folder once."
    )


def _say_report(report: InitReport, *, sample: bool, verbose: bool) -> None:
    rows = [[p, "created"] for p in report.created] + [[p, "kept"] for p in report.kept]
    if (report.created and not sample) or verbose:
        shown = rows if verbose else rows[: len(report.created)]
        cols = [Col("path", shrink=30, path=True), Col("status")]
        console.print(fit_table(cols, shown, title=f"Workspace {report.root}"))
    if sample:
        say(f"Sample workspace {report.root}")
    say(
        f"{len(report.created)} created, {len(report.kept)} kept as they were"
        + (f"; version {report.version[:12]}" if report.version else "")
        + "."
    )
    if report.left_out:
        console.print(
            f"Left out of git ({len(report.left_out)}, listed in .gitignore's crustacean block; "
            "move them out of the workspace, or delete the block's line to version one):",
            markup=False,
        )
        for item in report.left_out:
            console.print(f"  - {item.path}: {item.reason}", markup=False)
    for note in report.notes:
        say(f"Note: {note}")
    say("\nNext steps:")
    for step in report.next_steps:
        say(f"  - {step}")


def _interactive() -> bool:
    """A person at a terminal can be asked; cron, scripts and pipes never are."""
    return sys.stdin.isatty()


def _ask_which(offered: list[SourceConfig]) -> list[SourceConfig]:
    """Both OpenClaw and Claude Code are here: the user says which agent this workspace is for."""
    names = [s.kind for s in offered]
    console.print("Found transcripts of " + " and ".join(f"{s.kind} ({s.path})" for s in offered))
    options = [*names, "both", "none"]
    answer = typer.prompt(f"Collect which? ({', '.join(options)})", default="none").strip()
    if answer not in options:
        raise UsageError(f"answer one of {', '.join(options)}, not {answer!r}; nothing was made.")
    return offered if answer == "both" else [s for s in offered if s.kind == answer]
