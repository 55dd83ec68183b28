"""`crustacean tick`: run every stage that is due, then exit (cron calls it every 15 minutes)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
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
        for outcome in result.outcomes:
            say(outcome_line(outcome, ws.tz))
        if plan:
            say(
                f"Estimated: ~${result.est_cost:.4f} for the first requests (a stage that uses "
                "tools takes a few turns). Nothing was run or written."
            )
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def log_line(outcomes: Sequence[object], now: datetime, tz: tzinfo, *, verbose: bool) -> str:
    """The cron log's one line for a tick: its time, then each stage that was due; "" for a
    tick where nothing was due (unless `verbose`), so the log holds only work done."""
    from crustacean.ops.tick import StageOutcome

    due = [o for o in outcomes if isinstance(o, StageOutcome) and o.due.due]
    if not due and not verbose:
        return ""
    parts = [outcome_line(o, tz) for o in due] or ["nothing due"]
    return f"{now.astimezone(tz):%Y-%m-%d %H:%M:%S %Z} " + "; ".join(parts)


def outcome_line(outcome: object, tz: tzinfo = UTC) -> str:
    """One line per stage: `collect: ran (ok) …`, `curate: not due (next slot …)`."""
    from crustacean.ops.tick import StageOutcome, fmt

    assert isinstance(outcome, StageOutcome)
    due, name = outcome.due, outcome.stage
    if outcome.preview is not None:
        when = "Due now" if due.due else "N" + _not_due(due.reason)[1:]
        p = outcome.preview
        cost = (
            f"; {p.model}, ~{p.est_input_tokens:,} input tokens, ~${p.est_cost:.4f}"
            if p.model
            else ""
        )
        return f"{name}: {p.summary}{cost}. {when}."
    if not due.due:
        return f"{name}: {_not_due(due.reason)}"
    slot = fmt(due.slot, tz) if due.slot else "?"
    what = f"catching up slot {slot}" if due.catching_up else f"slot {slot}"
    if outcome.status is None and outcome.error is None:
        return f"{name}: due, {what} (dry run: not run) — {due.reason.removeprefix('due: ')}"
    if outcome.status is None:
        return f"{name}: not run ({outcome.error})"
    error = f": {outcome.error}" if outcome.error else ""
    return f"{name}: ran ({outcome.status}), {what}{error}"


def _not_due(reason: str) -> str:
    """`not due: next slot X` → `not due (next slot X)`; `disabled` stays as it is."""
    head, sep, rest = reason.partition(": ")
    if head == "not due" and sep:
        return f"not due ({rest})"
    return f"not due ({reason})" if reason != "disabled" else "disabled"
