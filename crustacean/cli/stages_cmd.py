"""The stage commands: `crustacean collect`, `curate`, `compile` and `calibrate`, one renderer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import err_console, print_json, say, state, warn
from crustacean.cli.output import MODE, print_diff, progress

if TYPE_CHECKING:
    from crustacean.llm.runner import RunPlan
    from crustacean.runs import RunRecord
    from crustacean.stages.collect import Progress
    from crustacean.stages.skeleton import StageResult

# The options every stage command shares, declared once.
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Run the model but write nothing; print the diff.")
]
PlanOnly = Annotated[
    bool, typer.Option("--plan", help="No model call: show what would be sent and its cost.")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(
            "use an ISO date or time, e.g. 2026-11-29 or 2026-11-29T08:00", param_hint="--since"
        ) from None
    return parsed if parsed.tzinfo else parsed.astimezone()


def collect(
    ctx: typer.Context,
    dry_run: DryRun = False,
    plan: PlanOnly = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Backfill: read every transcript from its start and collect the messages at "
            "or after this ISO time that were not collected yet. Without it, each file is read "
            "from its cursor, whatever the age of what follows; a file never read before from "
            "2 days before the last run.",
        ),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Only the source with this name, kind or path.")
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the chunks through the Message Batches API (half price, results within "
            "24 h); a later collect or tick appends them. For backfills and big first runs.",
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Append what is new in the transcripts to the daily logs (stage 1 of 4C)."""
    # lazy: one stage module, not all four (250-400 ms together), for one stage command
    from crustacean.stages.collect import collect as run_collect

    result = run_collect(
        state(ctx).open(),
        since=_since(since),
        source=source,
        dry_run=dry_run,
        plan=plan,
        batch=batch,
        progress=_progress() if not as_json else None,
    )
    show(result, as_json)


def show(result: StageResult, as_json: bool) -> None:
    """The one rendering of every stage's result: its JSON, or its lines, plan, diff and run
    line; a failed run exits 1."""
    if as_json:
        print_json(result.to_json())
    else:
        for line in result.warnings():
            warn(line)
        for line in result.head():
            say(line)
        if result.plan is not None:
            _render_plan(result.plan)
        for line in result.tail():
            say(line)
        if result.record is not None:
            _render_run(result.record, result.diff)
    if result.failed:
        raise typer.Exit(1)


def _progress() -> Callable[[Progress], None] | None:
    """A one-line progress display on a terminal (stderr), none otherwise."""
    if not err_console.is_terminal or MODE.quiet:
        return None

    def display(p: Progress) -> None:
        end = "\n" if p.chunks_sent == p.chunks_total else "\r"
        err_console.print(
            f"collect: chunk {p.chunks_sent}/{p.chunks_total}, {p.items} item(s), "
            f"{p.input_tokens:,} input tokens",
            markup=False,
            end=end,
        )

    return display


def curate(
    ctx: typer.Context,
    dry_run: DryRun = False,
    plan: PlanOnly = False,
    days: Annotated[
        int | None,
        typer.Option("--days", min=1, help="Curate the last N days of entries (curate.days)."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Route the last days' daily entries into contacts, lessons, knowledge… (stage 2 of 4C)."""
    # lazy: one stage module, not all four (250-400 ms together), for one stage command
    from crustacean.stages.curate import curate as run_curate

    show(run_curate(state(ctx).open(), days=days, dry_run=dry_run, plan=plan), as_json)


def _render_plan(p: RunPlan) -> None:
    scope = "the first turn" if p.requests == 1 else f"all {p.requests} requests"
    say(
        f"Plan: {p.model}, system {p.system_chars:,} chars, tools "
        f"{', '.join(p.tools)}, input {p.prompt_chars:,} chars; about "
        f"{p.est_input_tokens:,} input tokens, ~${p.est_cost_first_turn:.4f} for {scope}."
    )
    say("Input excerpt:\n" + p.excerpt)


def _render_run(rec: RunRecord, diff: str | None) -> None:
    if diff:
        print_diff(diff)
    version = ", ".join(v[:12] for v in rec.versions) or "none"
    say(
        f"Run {rec.id}: {rec.status}; {rec.usage.total_input:,} tokens in, "
        f"{rec.usage.output_tokens:,} out, ${rec.cost_usd:.4f}; version {version}."
        + (f" {rec.error}" if rec.error else "")
    )


def compile_(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Do everything in memory; print the diff.")
    ] = False,
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Only the deterministic pass (no model call).")
    ] = False,
    plan: PlanOnly = False,
    as_json: AsJson = False,
) -> None:
    """Archive, apply tiers, keep MEMORY.md under its caps, then judge and digest (stage 3)."""
    # lazy: one stage module, not all four (250-400 ms together), for one stage command
    from crustacean.stages.compile import compile_workspace

    ws = state(ctx).open()
    with progress("Compile: deterministic pass", enabled=not as_json) as report:
        result = compile_workspace(
            ws, dry_run=dry_run, no_model=no_model, plan=plan, progress=report
        )
    show(result, as_json)


def calibrate(
    ctx: typer.Context,
    dry_run: DryRun = False,
    plan: PlanOnly = False,
    as_json: AsJson = False,
) -> None:
    """Monthly audit: health by code, foundation and lessons review, proposals (stage 4)."""
    # lazy: one stage module, not all four (250-400 ms together), for one stage command
    from crustacean.stages.calibrate import calibrate as run_calibrate

    show(run_calibrate(state(ctx).open(), dry_run=dry_run, plan=plan), as_json)
