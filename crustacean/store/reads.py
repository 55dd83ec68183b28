"""Bounded reads for the tools a model calls (MCP and the stages' agent loop alike).

A model's context is small and every tool reply lands in it: a listing of 10,000 files was
971 KB and a 5 MB file came back whole. So a listing is paged (prefix, limit, cursor) and a read
takes a line range and refuses, with the file's size, a reply over `context.read_chars`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from crustacean.errors import UsageError
from crustacean.source_roots import inside_roots
from crustacean.store.write import Store


def list_page(
    store: Store,
    prefix: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> dict[str, Any]:
    """One page of files, sorted by path: those after `cursor` (the `next_cursor` a previous
    page gave), at most `limit` (default and ceiling `context.list_limit`)."""
    most = store.ws.settings.context.list_limit
    limit = most if limit is None else limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise UsageError(f"limit must be an integer from 1 to {most} (context.list_limit).")
    after_path = None if cursor is None else _cursor_path(cursor, prefix or "")
    transcripts = inside_roots(store.ws.root, store.ws.settings.sources)  # raw, never memory
    files = [f for f in store.list_context_files(prefix) if not f.path.startswith(transcripts)]
    after = [f for f in files if after_path is None or f.path > after_path]
    page = after[:limit]
    more = len(after) > limit
    out: dict[str, Any] = {
        "files": [f.to_json() for f in page],
        "total": len(files),
        "next_cursor": _cursor(prefix or "", page[-1].path) if more else None,
    }
    if more:
        out["note"] = (
            f"{len(after) - limit:,} more; call again with cursor=next_cursor, or narrow prefix."
        )
    return out


def _cursor(prefix: str, path: str) -> str:
    """An opaque token for "the files after `path` under `prefix`": a made-up or a reused
    cursor is told apart from a real one."""
    raw = json.dumps(["c1", prefix, path], ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_path(cursor: object, prefix: str) -> str:
    """The path a `next_cursor` stands for, or a one-line refusal saying what to pass."""
    bad = UsageError(
        "cursor is not a next_cursor list_context_files returned; pass one back as it came, "
        "or leave cursor out for the first page."
    )
    if not isinstance(cursor, str) or not cursor:
        raise bad
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise bad from None
    if not (isinstance(data, list) and len(data) == 3 and data[0] == "c1"):
        raise bad
    if not all(isinstance(x, str) for x in data[1:]):
        raise bad
    if data[1] != prefix:
        raise UsageError(
            f"this cursor is for prefix {data[1]!r}; pass that prefix with it, or leave cursor "
            "out to start again."
        )
    return str(data[2])


def read_range(
    store: Store, path: str, start_line: int | None = None, end_line: int | None = None
) -> dict[str, Any]:
    """A file's text (or lines `start_line`..`end_line`, 1-based, inclusive) and the whole
    file's sha256; refused, with the size, when the reply would pass `context.read_chars`."""
    for name, value in (("start_line", start_line), ("end_line", end_line)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise UsageError(f"{name} must be a line number (an integer from 1).")
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1, not {value}.")
    got = store.read_context_file(path)
    lines = got.content.splitlines(keepends=True)
    ranged = start_line is not None or end_line is not None
    first = start_line or 1
    last = min(end_line or len(lines), len(lines))
    if ranged and first > max(len(lines), 1):
        raise UsageError(
            f"{got.path} has {len(lines):,} lines; start_line {first} is past its end."
        )
    if ranged and last < first:
        raise UsageError(f"end_line {end_line} is before start_line {first}.")
    text = "".join(lines[first - 1 : last]) if ranged else got.content
    cap = store.ws.settings.context.read_chars
    if len(text) > cap:
        what = f"lines {first}-{last} of {got.path} are" if ranged else f"{got.path} is"
        per_line = max(len(got.content) // max(len(lines), 1), 1)
        raise UsageError(
            f"{what} {len(text):,} characters ({len(lines):,} lines in all), over "
            f"context.read_chars {cap:,}. Read it in parts with start_line and end_line (about "
            f"{max(cap // per_line, 1):,} lines fit), or search_memory for the part you need."
        )
    out: dict[str, Any] = {"path": got.path, "content": text, "sha256": got.sha256}
    if ranged:
        out |= {"start_line": first, "end_line": last, "lines": len(lines)}
    return out
