"""`crustacean runs` and `runs show`: what each pipeline run did and cost."""

from __future__ import annotations

import json
from datetime import timedelta, tzinfo
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from crustacean import runs as run_log
from crustacean.cli.common import CrustaceanGroup, cell, console, print_json, safe, state
from crustacean.runs import RunRecord

runs_app = typer.Typer(
    cls=CrustaceanGroup,
    help="List pipeline runs, or show one with the tool calls it made.",
    invoke_without_command=True,
)


@runs_app.callback()
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("-n", min=1, help="How many runs to show.")] = 20,
    stage: Annotated[
        str | None,
        typer.Option("--stage", help="Only runs of this stage (collect, curate, compile, …)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List runs, newest first (the subcommand `show ID` prints one in full)."""
    if ctx.invoked_subcommand is not None:
        return
    ws = state(ctx).open()
    found = run_log.list_runs(ws, limit, stage)
    if as_json:
        print_json([r.to_json(tool_calls=False) for r in found])
        return
    if not found:
        console.print("No runs yet.")
        return
    console.print(_runs_table(found, ws.tz))


@runs_app.command("show")
def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="Run id (from `crustacean runs`).", metavar="ID")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Show one run: status, tokens by kind, cost, files, versions, error and tool calls."""
    ws = state(ctx).open()
    rec = run_log.get_run(ws, run_id)
    if as_json:
        print_json(rec.to_json() | {"log": str(run_log.log_path(ws, rec.id))})
        return
    console.print(_details(rec, ws.tz))
    console.print(f"Log        {run_log.log_path(ws, rec.id)}", markup=False)
    if rec.tool_calls:
        console.print(f"\nTool calls ({len(rec.tool_calls)}):")
        console.print(_calls_table(rec))
    else:
        console.print("\nNo tool calls.")


def _runs_table(found: list[RunRecord], tz: tzinfo) -> Table:
    """Ids, times and numbers stay whole; names fold when the terminal is narrow."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column("id", no_wrap=True, min_width=22)
    table.add_column("stage", overflow="fold", min_width=7)
    table.add_column("started", no_wrap=True, min_width=16)
    table.add_column("duration", no_wrap=True)
    table.add_column("status", overflow="fold", min_width=7)
    table.add_column("model", overflow="fold", min_width=10)
    table.add_column("turns", justify="right", no_wrap=True)
    table.add_column("tokens in/out", justify="right", overflow="fold", min_width=8)
    table.add_column("cost", justify="right", no_wrap=True, min_width=7)
    table.add_column("files", justify="right", no_wrap=True)
    for r in found:
        table.add_row(
            r.id,
            Text(r.stage),
            r.started.astimezone(tz).strftime("%Y-%m-%d %H:%M"),
            _duration(r.duration),
            _status(r),
            Text(r.model or "—"),
            str(r.turns),
            f"{r.usage.total_input:,} / {r.usage.output_tokens:,}",
            f"${r.cost_usd:.4f}",
            str(len(r.files_changed)),
        )
    return table


def _details(r: RunRecord, tz: tzinfo) -> Text:
    u = r.usage
    rows = [
        ("Run", f"{r.id} ({r.stage})"),
        ("Status", _status(r)),
        ("Started", f"{r.started.astimezone(tz):%Y-%m-%d %H:%M:%S %Z}"),
        ("Duration", _duration(r.duration)),
        ("Model", f"{r.model or '—'}, {r.turns} turn(s)"),
        (
            "Tokens",
            f"input {u.input_tokens:,} · output {u.output_tokens:,} · cache read "
            f"{u.cache_read_tokens:,} · cache write {u.cache_write_tokens:,}",
        ),
        ("Cost", f"${r.cost_usd:.4f} (estimated)"),
        ("Files", ", ".join(r.files_changed) or "—"),
        ("Versions", ", ".join(v[:12] for v in r.versions) or "—"),
        ("Proposals", ", ".join(map(str, r.proposals)) or "—"),
        ("Summary", r.summary or "—"),
        ("Error", r.error or "—"),
    ]
    return Text(safe("\n".join(f"{label:<10} {value}" for label, value in rows)))


def _calls_table(r: RunRecord) -> Table:
    table = Table(show_edge=False)
    for col in ("#", "tool", "result"):
        table.add_column(col)
    table.add_column("input", overflow="fold", max_width=60)
    table.add_column("summary", overflow="fold")
    for c in r.tool_calls:
        args = json.dumps(c.input, ensure_ascii=False)
        table.add_row(
            str(c.seq),
            cell(c.name),
            "error" if c.is_error else "ok",
            cell(args if len(args) <= 120 else args[:119] + "…"),
            cell(c.result),
        )
    return table


def _status(r: RunRecord) -> str:
    return f"{r.status} (dry)" if r.dry_run else r.status


def _duration(span: timedelta | None) -> str:
    """`45s`, `2m 03s`, `1h 02m`; a run with no end (running or killed) shows `—`."""
    if span is None:
        return "—"
    seconds = max(0, round(span.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
