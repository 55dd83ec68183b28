"""`crustacean remember` and `crustacean tier`."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state, warn
from crustacean.cli.output import Col, fit_table, local_time, zone_name
from crustacean.recall import memory_ops
from crustacean.recall.memory_ops import TierRow
from crustacean.tiers import TIERS

if TYPE_CHECKING:
    from rich.table import Table


def remember(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A slug naming the memory; the file name too.")],
    text: Annotated[str, typer.Argument(help="The ruling itself, in a sentence or two.")],
    source: Annotated[
        str | None, typer.Option("--source", help="Where it was learned (a link).")
    ] = None,
    tier: Annotated[
        str | None, typer.Option("--tier", help=f"Start in this tier: {', '.join(TIERS)}.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Record a ruling in memory/lessons/NAME.md (the same NAME replaces the old one)."""
    result = memory_ops.remember(
        state(ctx).open(), name, text, source=source, tier=tier, now=datetime.now(UTC)
    )
    path = memory_ops.lesson_path(name)
    if as_json:
        print_json({"path": path} | result.to_json())
        return
    say(f"Remembered {path} (version {(result.version or '-')[:12]}).")


tier_app = typer.Typer(
    cls=CrustaceanGroup,
    help="Memory tiers: list, plan the lifecycle, or set one by hand.",
    no_args_is_help=True,
)


@tier_app.command("list")
def tier_list(
    ctx: typer.Context,
    only: Annotated[str | None, typer.Option("--tier", help="Only this tier.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List memories with their tier, why they are in it, and their recall counts."""
    if only is not None and only not in TIERS:
        raise typer.BadParameter(f"use one of {', '.join(TIERS)}.", param_hint="--tier")
    ws = state(ctx).open()
    rows, problems = memory_ops.tier_rows(ws, only)
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    console.print(_tier_table(rows, ws.tz))
    for path, why in problems:
        warn(f"Skipped: {path} ({why})")


def _tier_table(rows: list[TierRow], tz: tzinfo) -> Table:
    cols = [
        Col("path", shrink=28, path=True),
        Col("tier"),
        Col("why", shrink=12, drop=2),
        Col("uses", justify="right", drop=1),
        Col(f"last recalled ({zone_name(tz)})", drop=3),
    ]
    table_rows = [
        [
            r.path,
            r.tier,
            r.how,
            str(r.recalls.uses),
            local_time(r.recalls.last_recalled, tz) if r.recalls.last_recalled else "never",
        ]
        for r in rows
    ]
    return fit_table(cols, table_rows)


@tier_app.command("plan")
def tier_plan_cmd(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
) -> None:
    """Show what the tier lifecycle would change now, without changing anything."""
    decisions = memory_ops.tier_plan(state(ctx).open(), datetime.now(UTC))
    if as_json:
        print_json([d.to_json() for d in decisions])
        return
    if not decisions:
        say("No tier changes are due.")
    for d in decisions:
        say(f"{d.path}: {d.reason}")


@tier_app.command("set")
def tier_set(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="The memory file.")],
    tier: Annotated[str, typer.Argument(help=f"One of {', '.join(TIERS)}.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Pin a memory to a tier by hand (kept in state.db; the file is not touched)."""
    memory_ops.set_tier(state(ctx).open(), path, tier, datetime.now(UTC))
    if as_json:
        print_json({"path": path, "tier": tier, "kept_in": "state.db"})
        return
    say(f"{path} is now {tier} (kept in state.db; the file is unchanged).")
