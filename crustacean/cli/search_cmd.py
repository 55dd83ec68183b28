"""`crustacean search` and `crustacean index`."""

from datetime import UTC, datetime
from typing import Annotated

import typer

from crustacean.cli.common import print_json, safe, say, state, warn
from crustacean.cli.output import progress
from crustacean.recall.search import Hit, IndexStats, SearchIndex, SearchRequest, find

NO_GOOD_MATCH = "No good match in the workspace; try other words, or fewer."


def search(
    ctx: typer.Context,
    words: Annotated[
        list[str],
        typer.Argument(
            help="Words to find, no quotes needed: lines with all of them first, then most. "
            "Dates such as 'last week', 'in May' or '2026-03-04' match the daily logs of those "
            "days.",
            metavar="WORDS...",
        ),
    ],
    n: Annotated[
        int | None,
        typer.Option("-n", min=1, help="How many hits at most (default 10; 50 with a budget)."),
    ] = None,
    budget_chars: Annotated[
        int | None,
        typer.Option(
            "--budget-chars",
            min=1,
            help="Fill this many characters with the best hits' lines, in rank order, and print "
            "those lines under each hit.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")] = False,
    path_prefix: Annotated[
        str | None,
        typer.Option(
            "--path-prefix",
            help="Only files whose path starts with this (READMEs and AGENTS.md included).",
        ),
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
    request = SearchRequest(" ".join(words), n, budget_chars, raw, path_prefix, archive)
    ws = state(ctx).open()
    with progress("Indexing", enabled=not as_json) as report:
        found = find(
            ws, request, now=datetime.now(UTC), record="search" if record else None, progress=report
        )
    if found.stats is not None:
        _report(found.stats)
    _print_hits(found.hits, as_json, full=budget_chars is not None)


def index(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Rebuild the search index from scratch."""
    with SearchIndex(state(ctx).open()) as idx, progress("Indexing", enabled=not as_json) as bar:
        stats = idx.rebuild(bar)
    if as_json:
        print_json(stats.to_json())
        return
    _report(stats)
    say(f"Indexed {stats.indexed} file(s); skipped {len(stats.skipped)}.")


def _print_hits(hits: list[Hit], as_json: bool, *, full: bool) -> None:
    """One line per hit; with a budget, each hit's lines follow it, indented."""
    if as_json:
        print_json([h.to_json() for h in hits])
        if not hits:
            warn(NO_GOOD_MATCH)
        return
    if not hits:
        say(NO_GOOD_MATCH)
    for h in hits:
        where = safe(f"{h.path}#L{h.start_line}-L{h.end_line}")
        if not h.shares_words:
            where += "  (by meaning: shares no word with the query)"
        if full:
            when = f"  ({h.when})" if h.when else ""
            text = "\n".join(f"    {safe(line)}" for line in h.text.split("\n"))
            block = f"{where}  {h.score:.2f}{when}\n{text}"
        else:
            block = f"{where}  {h.score:.2f}  {safe(h.snippet)}"
        say(block)  # on a terminal wrapped between words: a path stays whole


def _report(stats: IndexStats) -> None:
    """Name the files search could not use, so nobody assumes the index is complete."""
    for p, r in stats.skipped:
        warn(f"Skipped: {p} ({r})")
    for p, r in stats.warnings:
        warn(f"Warning: {p}: {r}")
