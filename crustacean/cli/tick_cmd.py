"""`crustacean tick`: run every stage that is due, then exit (cron calls it every 15 minutes)."""

from __future__ import annotations

from typing import Annotated

import typer

from crustacean.cli.common import console, print_json, state


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
) -> None:
    """Run every stage that is due, then exit; put it in cron every 15 minutes."""
    from crustacean.errors import UsageError
    from crustacean.schedule import tick as run_tick

    if dry_run and plan:
        raise UsageError(
            "--dry-run and --plan can't be combined; pick one: --plan for costs, "
            "--dry-run for what is due."
        )
    result = run_tick(state(ctx).open(), dry_run=dry_run, plan=plan)
    if as_json:
        print_json(result.to_json())
    else:
        for outcome in result.outcomes:
            console.print(outcome_line(outcome), markup=False, soft_wrap=True)
        if plan:
            console.print(
                f"Estimated: ~${result.est_cost:.4f} for the first requests (a stage that uses "
                "tools takes a few turns). Nothing was run or written.",
                markup=False,
                soft_wrap=True,
            )
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def outcome_line(outcome: object) -> str:
    """One line per stage: `collect: ran (ok) …`, `curate: not due (next slot …)`."""
    from crustacean.schedule import StageOutcome, fmt

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
    slot = fmt(due.slot) if due.slot else "?"
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
