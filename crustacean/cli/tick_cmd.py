"""`crustacean tick`: run every stage that is due, then exit (cron calls it every 15 minutes)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from crustacean.cli.common import print_json, say, state
from crustacean.cli.output import verbatim


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
    from crustacean.errors import UsageError
    from crustacean.ops.tick import log_line
    from crustacean.ops.tick import tick as run_tick

    if dry_run and plan:
        raise UsageError(
            "--dry-run and --plan can't be combined; pick one: --plan for costs, "
            "--dry-run for what is due."
        )
    ws = state(ctx).open()
    if log:
        from crustacean.ops.cron import LOG_NAME, rotate_log

        rotate_log(ws.logs_dir / LOG_NAME)
    result = run_tick(ws, dry_run=dry_run, plan=plan)
    if as_json:
        print_json(result.to_json())
    elif log:
        line = log_line(result.outcomes, datetime.now(UTC), ws.tz, verbose=verbose)
        if line:
            verbatim(line)
    else:
        for line in result.lines(ws.tz):
            say(line)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
