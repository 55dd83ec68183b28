"""`crustacean context`: what an agent should load now (the SessionStart hook runs it)."""

from datetime import UTC, datetime
from typing import Annotated

import typer

from crustacean.cli.common import fail, print_json, state, warn
from crustacean.errors import EXIT_FAILED, CrustaceanError
from crustacean.recall.context import FOR_FORMS, Context, ContextRequest, build_context
from crustacean.workspace import Workspace


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
        typer.Option(
            "--budget-chars",
            help="Characters of the whole output, headings and notes included (default: "
            "memory.budget_chars for memories, plus the foundation files).",
        ),
    ] = None,
) -> None:
    """Print what an agent should load now: foundation, recent days and memories, within caps."""
    if fmt not in ("markdown", "json", "claude-hook"):
        raise typer.BadParameter("use markdown, json or claude-hook.", param_hint="--format")
    request = ContextRequest(for_, topic, max_entries, budget_chars)
    ws, result = _built(ctx, request, hook=fmt == "claude-hook")
    for path, why in result.problems:
        warn(f"Skipped: {path} ({why})")
    if fmt == "json":
        print_json(result.to_json())
    elif fmt == "claude-hook":
        limit = ws.settings.context.hook_chars
        typer.echo(result.to_claude_hook(min(limit, budget_chars) if budget_chars else limit))
    else:
        typer.echo(result.to_markdown())


def _built(ctx: typer.Context, request: ContextRequest, hook: bool) -> tuple[Workspace, Context]:
    """The workspace and its context. For the hook, any refusal exits 1: Claude Code reads exit
    2 as a blocking error and any other failure as a plain one, and memory that cannot load
    must not stop the session."""
    try:
        ws = state(ctx).open()
        return ws, build_context(ws, request, datetime.now(UTC))
    except CrustaceanError as e:
        if not hook:
            raise
        raise fail(str(e), EXIT_FAILED) from None
