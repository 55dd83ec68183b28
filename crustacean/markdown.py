"""Markdown as crustacean reads it: lines, ATX headings, fenced code, sections and local links.

Pure text functions, no I/O, and the one home of the heading and fence rules: compile cuts
MEMORY.md along these sections, health checks the same sections and links, search titles each
line with its heading path and curate reads a daily log's blocks, all through `headings`, so
they agree on what a section is. The rules are CommonMark's, line by line (no list or quote
containers): a heading is 0-3 spaces, 1-6 `#`, then a space, a tab or the end of the line, and
an optional closing run of `#`; a fence is 0-3 spaces and 3 or more backticks or tildes (a
backtick fence's info string holds no backtick), closed by a line of only the same character,
at least as many. A fence never closed runs to the end of the text. A frontmatter block's
`---` fence is here too (`FRONT_FENCE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple
from urllib.parse import unquote

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r" {0,3}(`{3,}(?=[^`]*$)|~{3,})(.*)")
# A frontmatter fence line: `---`, trailing blanks, the line's end. documents.py finds a block
# with it and python-frontmatter splits one with it (frontyaml's handler): the same YAML.
FRONT_FENCE = re.compile(r"^---[ \t]*(?=\r?\n|\Z)", re.MULTILINE)


class Heading(NamedTuple):
    """An ATX heading outside fenced code: its 0-based line index, level and text (NamedTuples,
    not frozen dataclasses: ~0.5 ms of generated code each at every `context` and search)."""

    line: int
    level: int
    text: str


class Section(NamedTuple):
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


def heading(line: str) -> tuple[int, str] | None:
    """(level, text) when `line` alone is an ATX heading (`## Plans ##` is (2, "Plans")); None
    for anything else, `#hashtag` included. Whether it sits in fenced code is `headings`' part."""
    m = _HEADING.fullmatch(line.rstrip("\r\n"))
    if m is None:
        return None
    return len(m.group(1)), _CLOSING.sub("", m.group(2) or "").strip()


def code_lines(lines: list[str]) -> list[bool]:
    """For each line, whether it is fenced code: a fence line or a line between two."""
    out = []
    fence = ""
    for raw in lines:
        m = _FENCE.fullmatch(raw.rstrip("\r\n"))
        if m is not None and not fence:
            fence = m.group(1)
        elif m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            fence = "" if not m.group(2).strip() else fence
        elif not fence:
            out.append(False)
            continue
        out.append(True)
    return out


def headings(lines: list[str]) -> list[Heading]:
    """Every ATX heading outside fenced code, in order (`lines` with or without endings)."""
    found = []
    for i, (line, code) in enumerate(zip(lines, code_lines(lines), strict=True)):
        if not code and (head := heading(line)) is not None:
            found.append(Heading(i, *head))
    return found


def first_heading(text: str) -> str:
    """The text of a document's first heading of any level, or ""."""
    found = headings(text.split("\n"))
    return found[0].text if found else ""


def split_sections(text: str) -> list[Section]:
    """The `##` and `###` sections in document order. A section runs to the next heading of its
    level or higher (`#` ends both); headings inside fenced code do not count."""
    lines = split_lines(text)
    heads = headings(lines)
    sections = []
    for n, head in enumerate(heads):
        if head.level not in (2, 3):
            continue
        end = next((h.line for h in heads[n + 1 :] if h.level <= head.level), len(lines))
        sections.append(Section(head.text, head.level, head.line, end))
    return sections


# ---------------------------------------------------------------------------------------------
# Links


_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\"'\n]*[\"'])?\s*\)")
_POINTER = re.compile(r"→[^`\n]*`([^`\n]+)`")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:")
_INLINE_CODE = re.compile(r"`[^`\n]*`")


def link_targets(text: str, pointers: bool = False) -> Iterator[tuple[int, str]]:
    """(line, target) of every local link outside code; with `pointers`, `→ … \\`path\\`` too."""
    lines = text.splitlines()
    for n, (line, code) in enumerate(zip(lines, code_lines(lines), strict=True), 1):
        if code:
            continue
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if not _SCHEME.match(target) and not target.startswith("#"):
                yield n, unquote(target.split("#", 1)[0].split("?", 1)[0])
        if pointers:
            yield from ((n, t.strip()) for t in _POINTER.findall(line) if "/" in t)
