"""`crustacean status` (the dashboard) and `crustacean doctor` (what would stop a run)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import cell, console, print_json, safe, state

if TYPE_CHECKING:
    from crustacean.status import Status

BARS = " ▁▂▃▄▅▆▇█"


def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Show each stage's last run and next slot, 30-day cost, and the workspace at a glance."""
    from crustacean.status import workspace_status

    ws = state(ctx).open()
    result = workspace_status(ws, datetime.now(UTC))
    if as_json:
        print_json(result.to_json())
        return
    _stages(result, ws.tz)
    _costs(result)
    _workspace(result)


def _stages(result: Status, tz: object) -> None:
    from rich.table import Table

    table = Table(title="Stages", show_edge=False)
    for col in ("stage", "schedule", "last run", "result", "next slot"):
        table.add_column(col)
    for s in result.stages:
        last = s.last.started.astimezone(tz).strftime("%Y-%m-%d %H:%M") if s.last else "never"
        outcome = (
            s.last.status + (f": {s.last.error[:40]}" if s.last.error else "") if s.last else ""
        )
        nxt = s.next_slot.astimezone(tz).strftime("%Y-%m-%d %H:%M") if s.next_slot else "disabled"
        table.add_row(s.stage, s.schedule, last, cell(outcome), nxt)
    console.print(table)


def _costs(result: Status) -> None:
    from rich.table import Table

    table = Table(title="Last 30 days", show_edge=False)
    for col in ("stage", "runs", "failures", "tokens in", "tokens out", "cost"):
        table.add_column(col, justify="right")
    for stage, t in result.totals.items():
        table.add_row(
            stage,
            str(int(t["runs"])),
            str(int(t["failures"])),
            f"{int(t['tokens_in']):,}",
            f"{int(t['tokens_out']):,}",
            f"${t['cost_usd']:.4f}",
        )
    console.print(table)
    peak = max((c for _, c in result.daily_cost), default=0.0)
    bars = "".join(BARS[round(c / peak * 8)] if peak else BARS[0] for _, c in result.daily_cost)
    total = sum(c for _, c in result.daily_cost)
    console.print(
        f"Cost per day  |{bars}|  ${total:.4f} in 30 days (peak ${peak:.4f})", markup=False
    )


def _workspace(result: Status) -> None:
    m = result.memory_md
    console.print(f"Workspace {safe(str(result.root))}", markup=False)
    console.print(
        "  files: " + ", ".join(f"{k} {v}" for k, v in result.areas.items()), markup=False
    )
    console.print(
        f"  MEMORY.md: {m['lines']}/{m['line_cap']} lines, {m['chars']:,}/"
        f"{m['char_cap']:,} characters ({m['percent_of_tightest']}% of the tightest "
        f"limit: {m['state']})",
        markup=False,
    )
    console.print(
        "  tiers: "
        + (", ".join(f"{k} {v}" for k, v in sorted(result.tiers.items())) or "no memories yet"),
        markup=False,
    )
    console.print(
        f"  pending proposals: {result.pending_proposals}"
        + (" (see `crustacean review`)" if result.pending_proposals else ""),
        markup=False,
    )
    console.print(f"  cron: {result.cron}", markup=False)


def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool, typer.Option("--ping", help="Also make one tiny real request to the model API.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
) -> None:
    """Check what would stop a scheduled run, with a fix for each problem; exit 1 on a failure."""
    from crustacean.status import doctor as run_doctor
    from crustacean.workspace import find_workspace

    st = state(ctx)
    report = run_doctor(find_workspace(st.workspace), ping=ping)
    if as_json:
        print_json(report.to_json())
    else:
        for f in report.findings:
            console.print(
                f"{f.status:>4}  {f.name}: {f.detail}"
                + (f"\n      fix: {f.fix}" if f.fix and f.status != "ok" else ""),
                markup=False,
            )
    if report.failed:
        raise typer.Exit(1)
