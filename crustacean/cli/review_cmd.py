"""`crustacean review`: the ask-first queue."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.syntax import Syntax
from rich.table import Table

from crustacean.cli.common import CrustaceanGroup, cell, console, print_json, safe, state

review_app = typer.Typer(
    cls=CrustaceanGroup,
    help="Review proposals: changes a model asked to make to files that need approval.",
    invoke_without_command=True,
)


@review_app.callback()
def review(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List pending proposals (the subcommands show, approve or reject one)."""
    from crustacean.store import Store, proposals

    if ctx.invoked_subcommand is not None:
        return
    pending = proposals.list_proposals(Store(state(ctx).open()))
    if as_json:
        print_json([p.to_json() | {"paths": p.paths} for p in pending])
        return
    if not pending:
        console.print("No pending proposals.")
        return
    table = Table(show_edge=False)
    for col in ("id", "created", "actor", "files", "message"):
        table.add_column(col, overflow="fold")
    for p in pending:
        table.add_row(str(p.id), p.created, p.actor, cell(", ".join(p.paths)), cell(p.message))
    console.print(table)


@review_app.command("show")
def show(
    ctx: typer.Context, pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")]
) -> None:
    """Print a proposal and the diff it would apply to the files as they are now."""
    from crustacean.store import Store, proposals

    store = Store(state(ctx).open())
    prop = proposals.get(store, pid)
    console.print(
        f"Proposal {prop.id} ({prop.status}) by {prop.actor}, {prop.created}", markup=False
    )
    console.print(f"Message: {safe(prop.message)}", markup=False)
    console.print(f"Why it waits for you: {safe(prop.reason)}", markup=False)
    if prop.status == "pending":
        text = safe(proposals.diff(store, pid))
        console.print(
            Syntax(text or "(no change)", "diff", theme="ansi_dark", background_color="default")
        )


@review_app.command("approve")
def approve(
    ctx: typer.Context, pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")]
) -> None:
    """Apply a proposal as one new version (refused if its files changed since)."""
    from crustacean.store import Store, proposals

    result = proposals.approve(Store(state(ctx).open()), pid)
    console.print(
        f"Approved proposal {pid}: version {(result.version or 'unversioned')[:12]}, "
        f"{len(result.files)} file(s)."
    )


@review_app.command("reject")
def reject(
    ctx: typer.Context,
    pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")],
    reason: Annotated[str, typer.Option("--reason", help="Why, kept with the proposal.")] = "",
) -> None:
    """Drop a proposal; nothing is written to the workspace."""
    from crustacean.store import Store, proposals

    proposals.reject(Store(state(ctx).open()), pid, reason)
    console.print(f"Rejected proposal {pid}.")
