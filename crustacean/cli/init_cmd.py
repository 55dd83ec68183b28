"""`crustacean init`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import console, print_json, say
from crustacean.cli.output import Col, fit_table

if TYPE_CHECKING:
    from crustacean.config import SourceConfig


def init(
    directory: Annotated[
        Path | None,
        typer.Argument(
            help="Workspace folder to create or adopt. Never the home folder or one above it.",
            show_default="current folder",
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
    from crustacean.errors import UsageError
    from crustacean.ops.init import init_sample, init_workspace, offered_sources, sources_named

    if sample and (daily_dir or source):
        raise UsageError("--sample uses its own layout and sources; drop --daily-dir/--source.")
    if source and no_detect:
        raise UsageError("--source names the sources to add and --no-detect adds none; pick one.")
    chosen = sources_named(source) if source else None
    if chosen is None and not (sample or no_detect) and _interactive():
        offered = offered_sources(directory)
        if len({s.kind for s in offered}) > 1:
            chosen = _ask_which(offered)
    if sample:
        report = init_sample(directory or Path("."))
    else:
        report = init_workspace(directory, daily_dir, detect=not no_detect, sources=chosen)
    if as_json:
        print_json(
            {
                "root": str(report.root),
                "created": report.created,
                "kept": report.kept,
                "version": report.version,
                "baseline": report.baseline,
                "notes": report.notes,
                "left_out": [{"path": i.path, "reason": i.reason} for i in report.left_out],
                "next_steps": list(report.next_steps),
            }
        )
        return
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
    import sys

    return sys.stdin.isatty()


def _ask_which(offered: list[SourceConfig]) -> list[SourceConfig]:
    """Both OpenClaw and Claude Code are here: the user says which agent this workspace is for."""
    names = [s.kind for s in offered]
    console.print("Found transcripts of " + " and ".join(f"{s.kind} ({s.path})" for s in offered))
    options = [*names, "both", "none"]
    answer = typer.prompt(f"Collect which? ({', '.join(options)})", default="none").strip()
    if answer not in options:
        from crustacean.errors import UsageError

        raise UsageError(f"answer one of {', '.join(options)}, not {answer!r}; nothing was made.")
    return offered if answer == "both" else [s for s in offered if s.kind == answer]
