"""`crustacean tick`: run every stage that is due, then exit (cron calls it every 15 minutes)."""

from typing import Annotated

import typer

from crustacean.cli.common import print_json, say, state
from crustacean.cli.output import verbatim
from crustacean.ops.tick import TickRequest, scheduled


def tick(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Run nothing; list what is due and why.")
    ] = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Run nothing and call no model: show what every stage would do now, due or "
            "not, and the estimated cost of its first request.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    log: Annotated[
        bool,
        typer.Option(
            "--log",
            help="For the scheduler: one timestamped line per tick that ran something, nothing "
            "when nothing was due, and the cron log rotated by size (what `cron install` runs).",
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="With --log: also log ticks that ran nothing.")
    ] = False,
) -> None:
    """Run every stage that is due, then exit; put it in cron every 15 minutes."""
    request = TickRequest(dry_run=dry_run, plan=plan, log=log)  # refuses --dry-run with --plan
    ws = state(ctx).open()
    result = scheduled(ws, request)
    if as_json:
        print_json(result.to_json())
    else:
        for line in result.shown(ws.tz, log=log, verbose=verbose):
            (verbatim if log else say)(line)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
