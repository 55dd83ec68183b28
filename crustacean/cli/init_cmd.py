"""`crustacean init`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from crustacean.cli.common import console


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
    table = Table(title=f"Workspace {report.root}", show_edge=False)
    table.add_column("path")
    table.add_column("status")
    for path in report.created:
        table.add_row(path, "created")
    for path in report.kept if verbose else []:
        table.add_row(path, "kept")
    if (report.created and not sample) or verbose:
        console.print(table)
    if sample:
        console.print(f"Sample workspace {report.root}", markup=False)
    console.print(
        f"{len(report.created)} created, {len(report.kept)} kept as they were"
        + (f"; version {report.version[:12]}" if report.version else "")
        + "."
    )
    for note in report.notes:
        console.print(f"Note: {note}", markup=False)
    console.print("\nNext steps:")
    for step in report.next_steps:
        console.print(f"  - {step}", markup=False)
