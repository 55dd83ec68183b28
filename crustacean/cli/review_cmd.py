"""`crustacean review`: the ask-first queue."""

from __future__ import annotations

from datetime import tzinfo
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state
from crustacean.cli.output import Col, fit_table, local_time, path_list, print_diff, zone_name
from crustacean.clock import stored_time
from crustacean.store import Store, proposals
from crustacean.store import review as store_review
from crustacean.store.proposals import Proposal

if TYPE_CHECKING:
    from rich.table import Table

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]

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
    if ctx.invoked_subcommand is not None:
        return
    ws = state(ctx).open()
    pending = proposals.list_proposals(ws)
    if as_json:
        print_json([p.to_json() | {"paths": p.paths} for p in pending])
    elif pending:
        console.print(_pending_table(pending, ws.tz))
    else:
        say("No pending proposals.")


def _pending_table(pending: list[Proposal], tz: tzinfo) -> Table:
    cols = [
        Col("id"),
        Col(f"created ({zone_name(tz)})", drop=2),
        Col("actor", drop=1),
        Col("files", shrink=24, path=True),
        Col("message", shrink=20),
    ]
    rows = [
        [str(p.id), _when(p.created, tz), p.actor, path_list(p.paths, 10), p.message]
        for p in pending
    ]
    return fit_table(cols, rows)


def _when(created: str, tz: tzinfo) -> str:
    """A proposal's stored UTC time, in the workspace's zone like every other view."""
    moment = stored_time(created)
    return local_time(moment, tz) if moment else created


@review_app.command("show")
def show(
    ctx: typer.Context,
    pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")],
    as_json: AsJson = False,
) -> None:
    """Print a proposal, a rejection's reason, and its diff (pending: against the files now)."""
    ws = state(ctx).open()
    seen = store_review.examine(Store(ws), pid)
    if as_json:
        print_json(seen.to_json())
        return
    for line in _described(seen, ws.tz):
        say(line)
    if seen.diff is not None:
        print_diff(seen.diff or "(no change)")


def _described(seen: store_review.Inspection, tz: tzinfo) -> list[str]:
    prop = seen.proposal
    lines = [
        f"Proposal {prop.id} ({prop.status}) by {prop.actor}, "
        f"{_when(prop.created, tz)} {zone_name(tz)}",
        f"Message: {prop.message}",
        f"Why it waits for you: {prop.reason}",
    ]
    if prop.status == "rejected":
        lines.append(f"Rejected: {prop.note or '(no reason given)'}")
    return [*lines, f"Diff: {seen.diff_of}"]


@review_app.command("approve")
def approve(
    ctx: typer.Context,
    pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")],
    as_json: AsJson = False,
) -> None:
    """Apply a proposal as one new version (refused if its files changed since)."""
    store = Store(state(ctx).open())
    result = store_review.approve(store, pid, store_review.local_user("on the command line"))
    if as_json:
        print_json({"id": pid, "status": "approved"} | result.to_json())
        return
    say(
        f"Approved proposal {pid}: version {(result.version or 'unversioned')[:12]}, "
        f"{len(result.files)} file(s)."
    )


@review_app.command("reject")
def reject(
    ctx: typer.Context,
    pid: Annotated[int, typer.Argument(help="Proposal id.", metavar="ID")],
    reason: Annotated[str, typer.Option("--reason", help="Why, kept with the proposal.")] = "",
    as_json: AsJson = False,
) -> None:
    """Drop a proposal; nothing is written to the workspace."""
    store_review.reject(Store(state(ctx).open()), pid, reason)
    if as_json:
        print_json({"id": pid, "status": "rejected", "reason": reason})
        return
    say(f"Rejected proposal {pid}.")
