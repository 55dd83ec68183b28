"""`crustacean history`, `show` and `rollback`."""

from __future__ import annotations

from datetime import tzinfo
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import console, print_json, say, state
from crustacean.cli.output import Col, fit_table, local_time, path_list, print_diff, zone_name
from crustacean.store import Store
from crustacean.store import history as hist
from crustacean.store.versions import Version

if TYPE_CHECKING:
    from rich.table import Table

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def history(
    ctx: typer.Context,
    path: Annotated[
        str | None, typer.Argument(help="Only versions that changed this file.")
    ] = None,
    limit: Annotated[int, typer.Option("-n", min=1, help="How many versions to show.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List versions, newest first: id, time, actor, message and files."""
    store = Store(state(ctx).open())
    found = hist.listing(store, path, limit)
    if as_json:
        print_json([v.to_json() for v in found.versions])
    elif found.versions:
        console.print(_versions_table(found.versions, store.ws.tz))
    elif path and found.any_version:
        say(f"No version changed {path}; `crustacean history` lists the workspace's versions.")
    else:
        say("No versions yet.")


def _versions_table(versions: list[Version], tz: tzinfo) -> Table:
    cols = [
        Col("version"),
        Col(f"time ({zone_name(tz)})"),
        Col("actor", drop=1),
        Col("message", shrink=20),
        Col("files", shrink=24, path=True),
    ]
    rows = [
        [v.id[:12], local_time(v.time, tz), v.actor, _bounded(v.message), path_list(v.files)]
        for v in versions
    ]
    return fit_table(cols, rows)


MESSAGE_SHOWN = 200


def _bounded(message: str) -> str:
    """A version's message as one line of at most MESSAGE_SHOWN characters: a 1 MB message
    (a model's, say) made the listing print megabytes; `--json` keeps it whole."""
    flat = " ".join(message[: MESSAGE_SHOWN * 4].split())
    if len(flat) <= MESSAGE_SHOWN and len(message) <= MESSAGE_SHOWN * 4:
        return flat
    return f"{flat[: MESSAGE_SHOWN - 1]}… ({len(message):,} chars)"


def show(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id (from `crustacean history`).")],
    as_json: AsJson = False,
) -> None:
    """Show one version: who made it, why, and the diff."""
    shown = hist.show_version(Store(state(ctx).open()), version)
    if as_json:
        print_json({"version": shown.version, "show": shown.text})
        return
    print_diff(shown.text)


def rollback(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id to restore files to.")],
    paths: Annotated[
        list[str] | None, typer.Argument(help="Only these files (default: every changed file).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Restore files as they were at VERSION, recorded as a new version (history is kept)."""
    result = hist.rollback(Store(state(ctx).open()), version, list(paths or []))
    if as_json:
        print_json(result.to_json() | {"restored_from": version})
        return
    if not result.files:
        say("Nothing to roll back: the files already match that version.")
        return
    say(f"Restored {len(result.files)} file(s) as version {(result.version or '')[:12]}:")
    for path in result.files:
        say(f"  {path}")


def undo(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id to undo (from `crustacean history`).")],
    path: Annotated[
        str | None, typer.Argument(help="Only this file of it (default: every file it changed).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Undo one version (or one file of it) as a new version: its files as they were before."""
    plan, result = hist.undo(Store(state(ctx).open()), version, path)
    if as_json:
        print_json(result.to_json() | {"undone": plan.version, "later": plan.later})
        return
    if not result.files:
        say(f"Nothing to undo: the files already match the version before {plan.version[:12]}.")
        return
    say(f"Undid version {plan.version[:12]} as version {(result.version or '')[:12]}:")
    for changed in result.files:
        say(f"  {changed}")
    for later in plan.later:
        say(f"Note: {later} changed after that version too; those later changes are undone too.")
