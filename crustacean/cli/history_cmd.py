"""`crustacean history`, `show` and `rollback`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.syntax import Syntax
from rich.table import Table

from crustacean.cli.common import cell, console, print_json, safe, state


def history(
    ctx: typer.Context,
    path: Annotated[
        str | None, typer.Argument(help="Only versions that changed this file.")
    ] = None,
    limit: Annotated[int, typer.Option("-n", min=1, help="How many versions to show.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List versions, newest first: id, time, actor, message and files."""
    from crustacean.store import Store
    from crustacean.store import history as hist

    versions = hist.history(Store(state(ctx).open()), path, limit)
    if as_json:
        print_json([{**v.__dict__, "time": v.time.isoformat()} for v in versions])
        return
    if not versions:
        console.print("No versions yet.")
        return
    table = Table(show_edge=False)
    for col in ("version", "time", "actor", "message", "files"):
        table.add_column(col, overflow="fold")
    for v in versions:
        files = ", ".join(v.files[:3]) + (f" (+{len(v.files) - 3})" if len(v.files) > 3 else "")
        when = v.time.strftime("%Y-%m-%d %H:%M")
        table.add_row(v.id[:12], when, cell(v.actor), cell(v.message), cell(files))
    console.print(table)


def show(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id (from `crustacean history`).")],
) -> None:
    """Show one version: who made it, why, and the diff."""
    from crustacean.store import Store
    from crustacean.store import history as hist

    text = safe(hist.show(Store(state(ctx).open()), version))
    console.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))


def rollback(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id to restore files to.")],
    paths: Annotated[
        list[str] | None, typer.Argument(help="Only these files (default: every changed file).")
    ] = None,
) -> None:
    """Restore files as they were at VERSION, recorded as a new version (history is kept)."""
    from crustacean.store import Store
    from crustacean.store import history as hist

    result = hist.rollback(Store(state(ctx).open()), version, list(paths or []))
    if not result.files:
        console.print("Nothing to roll back: the files already match that version.")
        return
    console.print(f"Restored {len(result.files)} file(s) as version {(result.version or '')[:12]}:")
    for path in result.files:
        console.print(f"  {safe(path)}", markup=False)
