"""`crustacean init`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crustacean.cli.common import console, print_json, say
from crustacean.cli.output import Col, fit_table


def init(
    directory: Annotated[
        Path,
        typer.Argument(help="Workspace folder to create or adopt.", show_default="current folder"),
    ] = Path("."),
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
    from crustacean.init import init_sample, init_workspace

    if sample and daily_dir:
        raise UsageError("--sample uses the default daily-log layout; drop --daily-dir.")
    if sample:
        report = init_sample(directory)
    else:
        report = init_workspace(directory, daily_dir, detect=not no_detect)
    if as_json:
        print_json(
            {
                "root": str(report.root),
                "created": report.created,
                "kept": report.kept,
                "version": report.version,
                "baseline": report.baseline,
                "notes": report.notes,
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
    for note in report.notes:
        say(f"Note: {note}")
    say("\nNext steps:")
    for step in report.next_steps:
        say(f"  - {step}")
