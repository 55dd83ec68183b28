"""The stage commands: `crustacean collect` and `curate` (compile and calibrate join them)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import err_console, print_json, say, state, warn
from crustacean.cli.output import MODE, print_diff, progress

if TYPE_CHECKING:
    from crustacean.stages.collect import Progress

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
    if as_json:
        print_json(result.to_json())
    else:
        _render(result)
    if result.record is not None and result.record.status == "failed":
        raise typer.Exit(1)


def _render(result: object) -> None:
    from crustacean.stages.collect import CollectResult

    assert isinstance(result, CollectResult)
    for path in result.missing_sources:
        warn(f"Warning: source {path} has no transcripts (missing or empty).")
    say(
        f"Scanned {result.files_scanned} transcript file(s): "
        f"{result.new_messages} new message(s)"
        + (f", {result.bad_lines} unreadable line(s) skipped" if result.bad_lines else "")
        + "."
    )
    if result.record is None:  # a plan
        if result.plan is not None:
            _render_plan(result.plan)
        if result.left_for_next_run:
            say(
                f"The run budget (budget.*) covers part of it; {result.left_for_next_run} "
                "message(s) would wait for the next run."
            )
        if result.waiting_in_batch:
            say(f"{result.waiting_in_batch} message(s) wait for a batch's results.")
        return
    for path, n in sorted(result.items_by_day.items()):
        say(f"  {path}: {n} item(s) appended")
    for line in _collect_lines(result):
        say("  " + line)
    if result.record is not None:
        _render_run(result.record, result.diff)


def _collect_lines(result: object) -> list[str]:
    """What happened to every item and message that did not simply land."""
    from crustacean.stages.collect import CollectResult

    assert isinstance(result, CollectResult)
    lines = []
    if result.duplicates:
        lines.append(f"{result.duplicates} item(s) merged as duplicates")
    for reason, n in sorted(result.rejected.items()):
        lines.append(f"{n} item(s) rejected: {reason}")
    if result.unbound:
        lines.append(f"{result.unbound} item(s) cited no message; given to their chunk's session")
    if result.copies:
        lines.append(f"{result.copies} repeated message(s) in checkpoint/reset copies, sent once")
    batch = result.batch or {}
    if batch.get("fetched"):
        lines.append(f"appended the results of batch {batch['fetched']}")
    if batch.get("submitted"):
        lines.append(
            f"submitted batch {batch['submitted']}: {batch['requests']} request(s); "
            "a later collect or tick appends the results"
        )
    if result.waiting_in_batch:
        lines.append(f"{result.waiting_in_batch} message(s) wait for a batch's results")
    if result.left_for_next_run and result.record is not None:
        lines.append(f"{result.left_for_next_run} message(s) left for the next run")
    return lines


def _progress() -> Callable[[Progress], None] | None:
    """A one-line progress display on a terminal (stderr), none otherwise."""
    if not err_console.is_terminal or MODE.quiet:
        return None

    def show(p: Progress) -> None:
        end = "\n" if p.chunks_sent == p.chunks_total else "\r"
        err_console.print(
            f"collect: chunk {p.chunks_sent}/{p.chunks_total}, {p.items} item(s), "
            f"{p.input_tokens:,} input tokens",
            markup=False,
            end=end,
        )

    return show


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
    from crustacean.stages.curate import curate as run_curate

    result = run_curate(state(ctx).open(), days=days, dry_run=dry_run, plan=plan)
    if as_json:
        print_json(result.to_json())
    else:
        say(f"{result.entries} uncurated daily entr{'y' if result.entries == 1 else 'ies'}.")
        if result.plan is not None:
            _render_plan(result.plan)
        for dest, n in sorted(result.routed.items()):
            say(f"  routed {n} to {dest}")
        for why, n in sorted(result.skipped.items()):
            say(f"  skipped {n}: {why}")
        for line in result.indexed:
            say(f"  indexed {line}")
        if result.record is not None:
            _render_run(result.record, result.diff)
    if result.record is not None and result.record.status == "failed":
        raise typer.Exit(1)


def _render_plan(p: object) -> None:
    from crustacean.llm.runner import Plan

    assert isinstance(p, Plan)
    scope = "the first turn" if p.requests == 1 else f"all {p.requests} requests"
    say(
        f"Plan: {p.model}, system {p.system_chars:,} chars, tools "
        f"{', '.join(p.tools)}, input {p.prompt_chars:,} chars; about "
        f"{p.est_input_tokens:,} input tokens, ~${p.est_cost_first_turn:.4f} for {scope}."
    )
    say("Input excerpt:\n" + p.excerpt)


def _render_run(rec: object, diff: str | None) -> None:
    from crustacean.runs import RunRecord

    assert isinstance(rec, RunRecord)
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
    from crustacean.stages.compile import compile_workspace

    ws = state(ctx).open()
    with progress("Compile: deterministic pass", enabled=not as_json) as report:
        result = compile_workspace(
            ws, dry_run=dry_run, no_model=no_model, plan=plan, progress=report
        )
    if as_json:
        print_json(result.to_json())
    else:
        ops = result.ops
        if result.record is None:
            nothing = "" if ops.changed_anything else " nothing to archive, sweep, trash or move"
            say(f"Plan: the deterministic pass would do this (nothing written):{nothing}")
        for label, items in (
            ("archived", ops.archived),
            ("not archived", ops.held),
            ("swept", ops.swept),
            ("trashed", ops.trashed),
            ("tier", ops.tiers),
            ("moved section", ops.promoted),
            ("model", ops.model_changes),
        ):
            for item in items:
                say(f"  {label}: {item}")
        say(
            f"Model pass: {result.model}." + (f" Digest: {result.digest}." if result.digest else "")
        )
        if result.plan is not None:
            _render_plan(result.plan)
        if result.record is not None:
            _render_run(result.record, result.diff)
    if result.record is not None and result.record.status == "failed":
        raise typer.Exit(1)


def calibrate(
    ctx: typer.Context,
    dry_run: DryRun = False,
    plan: PlanOnly = False,
    as_json: AsJson = False,
) -> None:
    """Monthly audit: health by code, foundation and lessons review, proposals (stage 4)."""
    from crustacean.stages.calibrate import calibrate as run_calibrate

    result = run_calibrate(state(ctx).open(), dry_run=dry_run, plan=plan)
    if as_json:
        print_json(result.to_json())
    else:
        audit = f" Audit: {result.audit}." if result.audit else ""
        say(f"Health: {result.health.status}.{audit}")
        for pid in result.proposals:
            say(f"  proposal {pid}: see `crustacean review show {pid}`")
        for path in result.archived_lessons:
            say(f"  archived lesson {path}")
        if result.plan is not None:
            _render_plan(result.plan)
        if result.record is not None:
            _render_run(result.record, result.diff)
    if result.record is not None and result.record.status == "failed":
        raise typer.Exit(1)
