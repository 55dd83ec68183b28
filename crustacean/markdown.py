"""Markdown as the stages read it: lines, ATX headings, `##`/`###` sections and local links.

Pure text functions, no I/O. Compile cuts MEMORY.md along these sections and health checks the
same sections and links, so both read a file's structure the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    """A `##` or `###` section: 0-based line indexes [start, end), heading line included."""

    heading: str
    level: int
    start: int
    end: int


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on `\\n` only (so `\\r\\n` stays whole and the count matches
    the store's cap check); `"".join(split_lines(t)) == t`."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def count_lines(text: str) -> int:
    """Lines as the store counts them for the MEMORY.md cap."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line, level, text) of every ATX heading outside fenced code."""
    found = []
    fence = ""
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if mark := _FENCE.match(line):
            token = mark.group(1)
            if not fence:
                fence = token
            elif (
                token[0] == fence[0]
                and len(token) >= len(fence)
                and not line.strip().strip(token[0])
            ):
                fence = ""
            continue
        if not fence and (head := _HEADING.match(line)):
            text = _CLOSING.sub("", head.group(2) or "").strip()
            found.append((i, len(head.group(1)), text))
    return found


def split_sections(text: str) -> list[Section]:
    """The `##` and `###` sections in document order. A section runs to the next heading of its
    level or higher (`#` ends both); headings inside fenced code do not count."""
    lines = split_lines(text)
    heads = _headings(lines)
    sections = []
    for n, (start, level, heading) in enumerate(heads):
        if level not in (2, 3):
            continue
        end = next((i for i, lvl, _ in heads[n + 1 :] if lvl <= level), len(lines))
        sections.append(Section(heading, level, start, end))
    return sections


# ---------------------------------------------------------------------------------------------
# Links


_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_POINTER = re.compile(r"→[^`\n]*`([^`\n]+)`")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:")
_CODE_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def link_targets(text: str, pointers: bool = False) -> Iterator[tuple[int, str]]:
    """(line, target) of every local link outside code; with `pointers`, `→ … \\`path\\`` too."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if _CODE_FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if not _SCHEME.match(target) and not target.startswith("#"):
                yield n, unquote(target.split("#", 1)[0].split("?", 1)[0])
        if pointers:
            yield from ((n, t.strip()) for t in _POINTER.findall(line) if "/" in t)
