"""`crustacean context`, `remember` and `tier`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state, warn
from crustacean.cli.output import Col, fit_table
from crustacean.tiers import TIERS

FOR_FORMS = ("main", "dm:NAME", "group:NAME", "cron")  # as crustacean.recall.context, kept light


def context(
    ctx: typer.Context,
    for_: Annotated[
        str, typer.Option("--for", help=f"Who the context is for: {', '.join(FOR_FORMS)}.")
    ] = "main",
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic",
            help="What the conversation is about (loads warm and cold memories that match).",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="markdown, json, or claude-hook (SessionStart JSON, at most context.hook_chars).",
        ),
    ] = "markdown",
    max_entries: Annotated[
        int | None, typer.Option("--max-entries", help="At most N memories (memory.max_entries).")
    ] = None,
    budget_chars: Annotated[
        int | None,
        typer.Option("--budget-chars", help="Character budget of memories (memory.budget_chars)."),
    ] = None,
) -> None:
    """Print what an agent should load now: foundation, recent days and memories, within caps."""
    from crustacean.recall.context import ContextRequest, build_context

    if fmt not in ("markdown", "json", "claude-hook"):
        raise typer.BadParameter("use markdown, json or claude-hook.", param_hint="--format")
    request = ContextRequest(for_, topic, max_entries, budget_chars)
    ws = state(ctx).open()
    result = build_context(ws, request, datetime.now(UTC))
    for path, why in result.problems:
        warn(f"Skipped: {path} ({why})")
    if fmt == "json":
        print_json(result.to_json())
    elif fmt == "claude-hook":
        typer.echo(result.to_claude_hook(ws.settings.context.hook_chars))
    else:
        typer.echo(result.to_markdown())


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
    from crustacean.recall.memory_ops import remember as remember_memory

    result = remember_memory(
        state(ctx).open(), name, text, source=source, tier=tier, now=datetime.now(UTC)
    )
    if as_json:
        print_json({"path": f"memory/lessons/{name}.md"} | result.to_json())
        return
    say(f"Remembered memory/lessons/{name}.md (version {(result.version or '-')[:12]}).")


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
    from crustacean.recall.memory_ops import tier_rows

    if only is not None and only not in TIERS:
        raise typer.BadParameter(f"use one of {', '.join(TIERS)}.", param_hint="--tier")
    rows, problems = tier_rows(state(ctx).open())
    rows = [r for r in rows if only is None or r.tier == only]
    if as_json:
        print_json(
            [
                {
                    "path": r.path,
                    "tier": r.tier,
                    "how": r.how,
                    "uses": r.recalls.uses,
                    "last_recalled": r.recalls.last_recalled,
                }
                for r in rows
            ]
        )
        return
    cols = [
        Col("path", shrink=28, path=True),
        Col("tier"),
        Col("why", shrink=12, drop=2),
        Col("uses", justify="right", drop=1),
        Col("last recalled", drop=3),
    ]
    table_rows = [
        [
            r.path,
            r.tier,
            r.how,
            str(r.recalls.uses),
            r.recalls.last_recalled.strftime("%Y-%m-%d") if r.recalls.last_recalled else "never",
        ]
        for r in rows
    ]
    console.print(fit_table(cols, table_rows))
    for path, why in problems:
        warn(f"Skipped: {path} ({why})")


@tier_app.command("plan")
def tier_plan_cmd(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
) -> None:
    """Show what the tier lifecycle would change now, without changing anything."""
    from crustacean.recall.memory_ops import tier_plan

    decisions = tier_plan(state(ctx).open(), datetime.now(UTC))
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
    """Pin a memory to a tier by hand (written to its frontmatter, as a new version)."""
    from crustacean.recall.memory_ops import set_tier

    result = set_tier(state(ctx).open(), path, tier, datetime.now(UTC))
    if as_json:
        print_json({"path": path, "tier": tier} | result.to_json())
        return
    say(f"{path} is now {tier} (version {(result.version or '-')[:12]}).")
