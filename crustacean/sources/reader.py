"""`read_new`: what a transcript gained since its cursor, in O(new bytes).

The cursor is trusted only while it still describes the same file: same device and inode, not
shorter than the offset, and the same bytes at the start. Anything else (a `/reset` rename with
a fresh file in its place, a truncation, a replacement) restarts from byte 0; message ids do not
depend on byte offsets, so the caller recognises what it already has.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from crustacean.sources import base
from crustacean.sources.base import (
    Cursor,
    Message,
    ReadResult,
    as_utc,
    complete_lines,
    decode_json_line,
    head_hash,
)
from crustacean.sources.claude_code import ClaudeCodeParser
from crustacean.sources.openclaw import OpenClawParser
from crustacean.sources.plain import read_plain

KINDS = ("openclaw", "claude_code", "plain")


# A format's `parse`: messages of one parsed JSON line, [] for a non-message, None for bad shape.
LineParser = OpenClawParser | ClaudeCodeParser
PARSERS: dict[str, type[LineParser]] = {
    "openclaw": OpenClawParser,
    "claude_code": ClaudeCodeParser,
}


def read_new(
    path: Path, kind: str, cursor: Cursor | None, *, since: datetime | None = None
) -> ReadResult:
    """Messages added to `path` since `cursor` (all of them when None).

    Bad lines are skipped and counted, never raised; only opening the file can raise OSError.
    """
    path = Path(path)
    since = as_utc(since) if since is not None else None
    if kind == "plain":
        return read_plain(path, cursor, since=since)
    if kind not in PARSERS:
        raise ValueError(f"unknown transcript kind {kind!r}; expected one of {', '.join(KINDS)}")
    with base.open_binary(path) as fh:
        st = os.fstat(fh.fileno())
        start, lines_before, restarted = resume_point(fh, st, cursor)
        parser = PARSERS[kind](path, fh)
        parser.since = since  # a first run over months of history skips the old text cheaply
        fh.seek(start)
        scan = _scan(fh, parser, start, lines_before, since)
        cursor = Cursor(
            path=str(path),
            device=st.st_dev,
            inode=st.st_ino,
            offset=scan.end,
            size=max(st.st_size, scan.end),
            head_hash=head_hash(fh, scan.end),
            lines=lines_before + scan.count,
        )
    return ReadResult(
        tuple(scan.messages), cursor, scan.bad, restarted, scan.count, tuple(scan.set_aside)
    )


def resume_point(fh: BinaryIO, st: os.stat_result, cursor: Cursor | None) -> tuple[int, int, bool]:
    """(offset, lines before it, restarted) for this file and cursor."""
    if cursor is None:
        return 0, 0, False
    same_file = (st.st_dev, st.st_ino) == (cursor.device, cursor.inode)
    fits = same_file and st.st_size >= cursor.offset >= 0
    if fits and head_hash(fh, cursor.offset) == cursor.head_hash:
        return cursor.offset, cursor.lines, False
    return 0, 0, True


@dataclass
class _Scan:
    """Running totals of one pass over the new lines."""

    end: int
    messages: list[Message] = field(default_factory=list)
    bad: int = 0
    count: int = 0
    set_aside: list[tuple[int, str]] = field(default_factory=list)


SET_ASIDE_NAMED = 20
"""How many bad lines of one file are named (line, why) for the run record; all are counted."""


def _scan(
    fh: BinaryIO, parser: LineParser, start: int, lines_before: int, since: datetime | None
) -> _Scan:
    """Parse complete lines from `start`; `end` is just past the last one."""
    scan = _Scan(end=start)
    for end, raw in complete_lines(fh, start):
        begin, scan.end = scan.end, end
        scan.count += 1
        found = parse_line_or_why(parser, raw, lines_before + scan.count)
        if isinstance(found, str):
            scan.bad += 1
            if len(scan.set_aside) < SET_ASIDE_NAMED:
                scan.set_aside.append((lines_before + scan.count, found))
            continue
        scan.messages.extend(
            replace(m, offset=begin) for m in found if since is None or m.timestamp >= since
        )
    return scan


def cursor_before(cursor: Cursor, message: Message) -> Cursor:
    """The cursor of `cursor`'s file stopped just before `message`'s line.

    A run that could not send everything it read moves the cursor only this far, so what was
    not sent is read again next time (ids keep what was sent from repeating)."""
    offset = min(message.offset, cursor.offset)
    with base.open_binary(Path(cursor.path)) as fh:
        head = head_hash(fh, offset)
    return replace(cursor, offset=offset, lines=max(0, message.line - 1), head_hash=head)


def parse_line_or_why(parser: LineParser, raw: bytes | None, line: int) -> list[Message] | str:
    """One line through the parser, or why it is bad: any surprise in the data is a bad line,
    not a crash."""
    if raw is None:
        return f"longer than {base.MAX_LINE_BYTES // (1024 * 1024)} MB"
    if not raw.strip():
        return []
    try:
        record = decode_json_line(raw)
    except ValueError as exc:
        return f"not JSON ({str(exc)[:80]})"
    try:
        found = parser.parse(record, raw, line)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        return f"unreadable record ({type(exc).__name__})"
    return "not a record of this format" if found is None else found
