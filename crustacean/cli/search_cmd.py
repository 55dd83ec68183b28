"""`crustacean search` and `crustacean index`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from crustacean.cli.common import console, err_console, print_json, safe, state

if TYPE_CHECKING:
    from crustacean.search import Hit, IndexStats


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to find (all of them, else any).")],
    n: Annotated[int, typer.Option("-n", min=1, help="How many hits to show.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
    path_prefix: Annotated[
        str | None,
        typer.Option("--path-prefix", help="Only files whose path starts with this."),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Pass FTS5 syntax through (phrases, OR, NEAR, title:).")
    ] = False,
    archive: Annotated[
        bool, typer.Option("--archive", help="Include archive/ (the trash never).")
    ] = False,
    record: Annotated[
        bool, typer.Option("--record", help="Count each returned file as recalled (tiers).")
    ] = False,
) -> None:
    """Search the workspace's markdown; print path#lines, score and snippet per hit."""
    from crustacean.search import SearchIndex
    from crustacean.state import open_state

    ws = state(ctx).open()
    with open_state(ws) as db, SearchIndex(ws, db) as index:
        _report(index.update())
        hits = index.search(
            query, n, raw=raw, path_prefix=path_prefix, include_archive=archive, refresh=False
        )
        if record and hits:
            db.record_recalls([h.path for h in hits], datetime.now(UTC), how="search")
    _print_hits(hits, as_json)


def index(ctx: typer.Context) -> None:
    """Rebuild the search index from scratch."""
    from crustacean.search import SearchIndex

    with SearchIndex(state(ctx).open()) as idx:
        stats = idx.rebuild()
    _report(stats)
    console.print(f"Indexed {stats.indexed} file(s); skipped {len(stats.skipped)}.")


def _print_hits(hits: list[Hit], as_json: bool) -> None:
    if as_json:
        print_json([h.to_json() for h in hits])
        return
    if not hits:
        console.print("No matches.")
    for h in hits:
        line = f"{h.path}#L{h.start_line}-L{h.end_line}  {h.score:.2f}  {h.snippet}"
        console.print(safe(line), markup=False, soft_wrap=True)


def _report(stats: IndexStats) -> None:
    """Name the files search could not use, so nobody assumes the index is complete."""
    for path, reason in stats.skipped:
        err_console.print(safe(f"Skipped: {path} ({reason})"), markup=False, soft_wrap=True)
    for path, reason in stats.warnings:
        err_console.print(safe(f"Warning: {path}: {reason}"), markup=False, soft_wrap=True)
