"""`crustacean history`, `show` and `rollback`."""

from __future__ import annotations

from typing import Annotated

import typer

from crustacean.cli.common import console, print_json, say, state
from crustacean.cli.output import Col, fit_table, local_time, path_list, print_diff, zone_name

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
    from crustacean.store import history as hist
    from crustacean.store.write import Store

    ws = state(ctx).open()
    store = Store(ws)
    versions = hist.history(store, path, limit)
    if as_json:
        print_json([{**v.__dict__, "time": v.time.isoformat()} for v in versions])
        return
    if not versions:
        if path and hist.history(store, None, 1):
            say(f"No version changed {path}; `crustacean history` lists the workspace's versions.")
        else:
            say("No versions yet.")
        return
    cols = [
        Col("version"),
        Col(f"time ({zone_name(ws.tz)})"),
        Col("actor", drop=1),
        Col("message", shrink=20),
        Col("files", shrink=24, path=True),
    ]
    rows = [
        [
            v.id[:12],
            local_time(v.time, ws.tz),
            v.actor,
            v.message,
            path_list(v.files),
        ]
        for v in versions
    ]
    console.print(fit_table(cols, rows))


def show(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id (from `crustacean history`).")],
    as_json: AsJson = False,
) -> None:
    """Show one version: who made it, why, and the diff."""
    from crustacean.store import history as hist
    from crustacean.store.write import Store

    store = Store(state(ctx).open())
    text = hist.show(store, version)
    if as_json:
        print_json({"version": store.git.resolve(version), "show": text})
        return
    print_diff(text)


def rollback(
    ctx: typer.Context,
    version: Annotated[str, typer.Argument(help="Version id to restore files to.")],
    paths: Annotated[
        list[str] | None, typer.Argument(help="Only these files (default: every changed file).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Restore files as they were at VERSION, recorded as a new version (history is kept)."""
    from crustacean.store import history as hist
    from crustacean.store.write import Store

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
