"""The loss guard's text rules: which of a file's old lines a call makes disappear.

A stage that edits files it did not write (curate, compile, calibrate) may reword, merge or move
lines, never drop them; `store/plan.py` refuses a call that loses more than its cap.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")


def _norm(line: str) -> str:
    return " ".join(line.split()).casefold()


# casefold maps no character to or from whitespace or a line break (checked over every code
# point), so a whole text folded once splits into the same lines as each line folded: `_norm`
# of each line, at a fraction of the calls (a compile pass splits thousands of files).


def _lines(data: bytes) -> list[str]:
    """The normalized (see `_norm`) lines of a text that are not blank."""
    folded = data.decode("utf-8", "replace").casefold().splitlines()
    return [line for x in folded if (line := " ".join(x.split()))]


def _numbered(data: bytes) -> list[tuple[int, str, str]]:
    """(line number, line, normalized line) of each line that is not blank."""
    text = data.decode("utf-8", "replace")
    raws, folded = text.splitlines(), text.casefold().splitlines()
    return [
        (n, raw, line)
        for n, (raw, x) in enumerate(zip(raws, folded, strict=True), 1)
        if (line := " ".join(x.split()))
    ]


class Leftover:
    """What a call leaves behind, built once per call (a compile pass may touch 1,000 files):
    every line it keeps, the text and words of the lines it adds. Words are drawn from one pool
    for the whole call, each used once, so junk or one reworded line cannot vouch for many."""

    def __init__(self, left: list[list[str]], added: list[list[str]]) -> None:
        """`left`: each file's normalized lines (see `_lines`), as `added` is."""
        self.kept = {x for lines in left for x in lines}
        lines = [x for group in added for x in group]
        self.added = "\n".join(lines)
        self.pool: dict[str, int] = {}
        for line in lines:
            for w in _WORD.findall(_norm(line)):
                self.pool[w] = self.pool.get(w, 0) + 1

    def keeps(self, line: str) -> bool:
        """Still there (verbatim, reworded, or merged into an added line)."""
        if line in self.kept:
            return True
        words = _WORD.findall(line)
        found = [w for w in words if self.pool.get(w, 0) > 0]
        if words and len(found) * 2 > len(words):
            for w in found:
                self.pool[w] -= 1
            return True
        return len(line) >= 12 and line in self.added


def lost_lines(
    old: bytes, left: list[bytes] | Leftover, added: list[list[str]] | None = None
) -> list[tuple[int, str]]:
    """The old file's lines (number, text) that a call makes disappear: found in no file the
    call leaves behind (moved targets and the archive included), and not reworded: most of
    their words do not reappear in the lines the call added."""
    rest = left if isinstance(left, Leftover) else Leftover([_lines(d) for d in left], added or [])
    lost = []
    for n, raw in enumerate(old.decode("utf-8", "replace").splitlines(), 1):
        line = _norm(raw)
        if line and not rest.keeps(line):
            lost.append((n, raw.strip()))
    return lost
