"""`crustacean runs` and `runs show`: what each pipeline run did and cost."""

import json
from datetime import timedelta, tzinfo
from typing import Annotated

import typer
from rich.table import Table

from crustacean import runs as run_log
from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state
from crustacean.cli.output import Col, fit_table, labelled, local_time, width, zone_name
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
        say("No runs yet.")
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
    for label, value in [*_details(rec, ws.tz), ("Log", str(run_log.log_path(ws, rec.id)))]:
        say(labelled(label, value, 10))
    if rec.tool_calls:
        say(f"\nTool calls ({len(rec.tool_calls)}):")
        for line in _calls(rec):
            say(line)
    else:
        say("\nNo tool calls.")
    _set_aside(rec)


def _set_aside(rec: RunRecord) -> None:
    if rec.set_aside:
        say(f"\nSet aside ({len(rec.set_aside)}), the run went on without them:")
        for item in rec.set_aside:
            say(f"  {item.kind}: {item.reason}" + (f"\n    {item.text}" if item.text else ""))


def _runs_table(found: list[RunRecord], tz: tzinfo) -> Table:
    """Id, stage, status, model, tokens and cost stay at 80 columns; the start time, duration,
    turns and files give way first (the id already sorts by start)."""
    cols = [
        Col("id"),
        Col("stage"),
        Col(f"started ({zone_name(tz)})", drop=1),
        Col("duration", drop=2),
        Col("status"),
        Col("model", shrink=10),
        Col("turns", justify="right", drop=3),
        Col("tokens in/out", justify="right"),
        Col("cost", justify="right"),
        Col("files", justify="right", drop=4),
    ]
    rows = [
        [
            r.id,
            r.stage,
            local_time(r.started, tz),
            _duration(r.duration),
            _status(r),
            _model(r.model),
            str(r.turns),
            f"{_tokens(r.usage.total_input)}/{_tokens(r.usage.output_tokens)}",
            f"${r.cost_usd:.4f}",
            str(len(r.files_changed)),
        ]
        for r in found
    ]
    return fit_table(cols, rows)


def _tokens(n: int) -> str:
    """`1,234` in a pipe; on a terminal big counts shorten (`123.4k`, `1.23M`) to fit."""
    if width() is None or n < 10_000:
        return f"{n:,}"
    return f"{n / 1000:.1f}k" if n < 1_000_000 else f"{n / 1_000_000:.2f}M"


def _model(model: str | None) -> str:
    """On a terminal the `claude-` prefix goes (it is on every row); a pipe keeps the full id."""
    if not model:
        return "—"
    return model.removeprefix("claude-") if width() is not None else model


def _details(r: RunRecord, tz: tzinfo) -> list[tuple[str, str]]:
    u = r.usage
    return [
        ("Run", f"{r.id} ({r.stage})"),
        ("Status", _status(r)),
        ("Started", f"{local_time(r.started, tz)} {zone_name(tz, r.started)}"),
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


def _calls(r: RunRecord) -> list[str]:
    """One entry per tool call, its input on the line under it: lines wrap between words, so
    a path in an input or a result is never cut (a table folded them mid-word at 80 columns)."""
    out = []
    for c in r.tool_calls:
        args = json.dumps(c.input, ensure_ascii=False)
        args = args if len(args) <= 120 else args[:119] + "…"
        outcome = "error" if c.is_error else "ok"
        out += [f"  {c.seq}. {c.name} ({outcome}): {c.result}", f"       input: {args}"]
    return out


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
