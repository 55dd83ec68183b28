"""A folder README's `## Index`: the one section of a human-written README that code writes.

Curate adds each file it created there, and calibrate's health check reads it for orphans, so
both follow one rule: a file is indexed when its name (or its path below the README's folder)
is in backticks under the `## Index` heading, and nowhere else counts. A bullet in `How it is
organized` that mentions `reminders/` is prose, never an anchor for a new line.
"""

from __future__ import annotations

import re

INDEX_HEADING = "## Index"
_TICKED = re.compile(r"`([^`\n]+)`")


def index_span(lines: list[str]) -> tuple[int, int] | None:
    """(heading line, end) of the Index section in `lines`, or None when there is none."""
    head = next((i for i, x in enumerate(lines) if x.rstrip() == INDEX_HEADING), None)
    if head is None:
        return None
    stop = next((i for i in range(head + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return head, stop


def indexed_names(text: str) -> set[str]:
    """Everything in backticks under `## Index`: file names, `sub/name` paths, folders."""
    lines = text.split("\n")
    span = index_span(lines)
    if span is None:
        return set()
    return {t.strip() for x in lines[span[0] + 1 : span[1]] for t in _TICKED.findall(x)}


def is_indexed(text: str, rel: str) -> bool:
    """Whether `rel` (a path below the README's folder) is listed in its Index."""
    names = indexed_names(text)
    return rel in names or rel.rpartition("/")[2] in names


def insert_line(text: str, sub: str, line: str) -> str:
    """`text` with `line` (an indented `  - \\`name\\` — what`) under `## Index` only: after the
    `sub/` folder's bullet and the lines already under it, else at the end of the Index (with a
    new folder bullet when `sub` is given); a README without an Index gets one at the end."""
    lines = text.split("\n")
    span = index_span(lines)
    if span is None:
        added = [f"- `{sub}/`", line] if sub else [line.strip()]
        return text.rstrip("\n") + f"\n\n{INDEX_HEADING}\n\n" + "\n".join(added) + "\n"
    head, stop = span
    anchor = next(
        (i for i in range(head + 1, stop) if sub and lines[i].startswith(f"- `{sub}/`")), None
    )
    if anchor is None:
        end = stop
        while end > head + 1 and not lines[end - 1].strip():
            end -= 1
        added = [f"- `{sub}/`", line] if sub else [line.strip()]
        return "\n".join([*lines[:end], *added, *lines[end:]])
    end = anchor + 1
    while end < stop and lines[end].startswith("  "):
        end += 1
    return "\n".join([*lines[:end], line, *lines[end:]])
