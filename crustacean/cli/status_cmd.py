"""`crustacean status` (the dashboard) and `crustacean doctor` (what would stop a run)."""

from datetime import UTC, datetime, tzinfo
from typing import Annotated

import typer

from crustacean.cli.common import console, print_json, say, state
from crustacean.cli.output import Col, fit_table, local_time, zone_name
from crustacean.ops.status import Status, doctor_fixes, workspace_status
from crustacean.ops.status import doctor as run_doctor
from crustacean.runs import RunRecord, short_reason
from crustacean.workspace import find_workspace

BARS = " ▁▂▃▄▅▆▇█"


def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Show each stage's last run and next slot, 30-day cost, and the workspace at a glance."""
    ws = state(ctx).open()
    result = workspace_status(ws, datetime.now(UTC))
    if as_json:
        print_json(result.to_json())
        return
    _stages(result, ws.tz)
    _costs(result)
    _workspace(result)


def _stages(result: Status, tz: tzinfo) -> None:
    cols = [
        Col("stage"),
        Col("schedule", drop=2),
        Col("last run"),
        Col("result", shrink=16),
        Col("next slot", drop=1),
    ]
    rows = []
    for s in result.stages:
        last = local_time(s.last.started, tz) if s.last else "never"
        nxt = local_time(s.next_slot, tz) if s.next_slot else "disabled"
        rows.append([s.stage, s.schedule, last, _outcome(s.last), nxt])
    console.print(fit_table(cols, rows, title=f"Stages (times in {zone_name(tz)})"))
    for s in result.stages:
        if s.last and s.last.error:
            say(f"{s.stage}'s last run, in full: `crustacean runs show {s.last.id}`")


def _outcome(last: RunRecord | None) -> str:
    """`failed: ModelError: the model API refused…`: a short reason; the detail is in `runs
    show` (a whole error in a cell made the table a column of words)."""
    if last is None:
        return ""
    return last.status + (f": {short_reason(last.error)}" if last.error else "")


def _costs(result: Status) -> None:
    cols = [
        Col("stage"),
        Col("runs", justify="right"),
        Col("failures", justify="right"),
        Col("tokens in", justify="right", drop=1),
        Col("tokens out", justify="right", drop=1),
        Col("cost", justify="right"),
    ]
    rows = [
        [
            stage,
            str(int(t["runs"])),
            str(int(t["failures"])),
            f"{int(t['tokens_in']):,}",
            f"{int(t['tokens_out']):,}",
            f"${t['cost_usd']:.4f}",
        ]
        for stage, t in result.totals.items()
    ]
    console.print(fit_table(cols, rows, title="Last 30 days"))
    peak = max((c for _, c in result.daily_cost), default=0.0)
    bars = "".join(BARS[round(c / peak * 8)] if peak else BARS[0] for _, c in result.daily_cost)
    total = sum(c for _, c in result.daily_cost)
    say(f"Cost per day  |{bars}|  ${total:.4f} in 30 days (peak ${peak:.4f})")


def _workspace(result: Status) -> None:
    m = result.memory_md
    say(f"Workspace {result.root}")
    say("  files: " + ", ".join(f"{k} {v}" for k, v in result.areas.items()))
    say(
        f"  MEMORY.md: {m['lines']}/{m['line_cap']} lines, {m['chars']:,}/"
        f"{m['char_cap']:,} characters ({m['percent_of_tightest']}% of the tightest "
        f"limit: {m['state']})"
    )
    say(
        "  tiers: "
        + (", ".join(f"{k} {v}" for k, v in sorted(result.tiers.items())) or "no memories yet")
    )
    say(
        f"  pending proposals: {result.pending_proposals}"
        + (" (see `crustacean review`)" if result.pending_proposals else "")
    )
    say(f"  cron: {result.cron}")


def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool, typer.Option("--ping", help="Also make one tiny real request to the model API.")
    ] = False,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Repair what a killed write left, and recover a damaged repository "
            "(the files on disk as a new version).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
) -> None:
    """Check what would stop a scheduled run, with a fix for each problem; exit 1 on a failure."""
    st = state(ctx)
    root = find_workspace(st.workspace)
    for name, done in doctor_fixes(root) if fix else []:
        if not as_json:
            say(f" fix  {name}: {done}")
    report = run_doctor(root, ping=ping)
    if as_json:
        print_json(report.to_json())
    else:
        for f in report.findings:
            say(f"{f.status:>4}  {f.name}: {f.detail}")
            if f.fix and f.status != "ok":
                say(f"      fix: {f.fix}")
    if report.failed:
        raise typer.Exit(1)
