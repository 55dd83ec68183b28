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
    every line it keeps, and the words of each line it adds. A lost line counts as kept only
    when one added line still says it (see `says`); each word of an added line vouches for one
    lost line only, so one line holding every word, or junk, cannot stand in for many."""

    def __init__(self, left: list[list[str]], added: list[list[str]]) -> None:
        """`left`: each file's normalized lines (see `_lines`), as `added` is."""
        self.kept = {x for lines in left for x in lines}
        self.lines = [_norm(x) for group in added for x in group]
        self.words = [_WORD.findall(x) for x in self.lines]
        self.used = [[False] * len(w) for w in self.words]
        self.where: dict[str, list[int]] = {}  # word -> the added lines holding it
        for i, words in enumerate(self.words):
            for w in dict.fromkeys(words):
                self.where.setdefault(w, []).append(i)

    def keeps(self, line: str) -> bool:
        """Still there: verbatim in a file the call leaves, inside one added line, or said again
        by one added line (most of its words in order and close together, or a line about its
        own length holding most of its words)."""
        if line in self.kept:
            return True
        words = _WORD.findall(line)
        if not words:
            return len(line) >= 12 and any(line in x for x in self.lines)
        shared: dict[int, int] = {}
        for w in set(words):
            for i in self.where.get(w, ()):
                shared[i] = shared.get(i, 0) + 1
        best = sorted(shared, key=lambda i: -shared[i])[:CANDIDATES]
        for i in best:
            taken = says(words, self.words[i], self.used[i])
            if taken is not None:
                for at in taken:
                    self.used[i][at] = True
                return True
        return len(line) >= 12 and any(line in x for x in self.lines)


CANDIDATES = 8  # added lines tried per lost line, those sharing the most words first


def says(lost: list[str], added: list[str], used: list[bool]) -> list[int] | None:
    """The positions of `added` (not yet `used`) that say the lost line again, or None.

    Most of the lost line's words must be there. Either in the lost line's order within a
    stretch not much longer than the line itself (a line merged into a longer one, a clause
    added), or in any order when the added line is about as long as the lost one (a close
    rewording). A line of hundreds of sorted words says none of the lines it was made from."""
    need = len(lost) // 2 + 1
    free = [(at, w) for at, w in enumerate(added) if not used[at]]
    order = _in_order(lost, free)
    if len(order) >= need and order[-1] - order[0] + 1 <= 2 * len(lost) + 2:
        return order
    if len(added) > 2 * len(lost) + 4:
        return None
    pool: dict[str, list[int]] = {}
    for at, w in free:
        pool.setdefault(w, []).append(at)
    taken = [pool[w].pop(0) for w in lost if pool.get(w)]
    return taken if len(taken) >= need else None


def _in_order(lost: list[str], free: list[tuple[int, str]]) -> list[int]:
    """The positions of the longest run of `lost`'s words found in order among `free`
    (a longest common subsequence), the tightest such run when several tie."""
    n, m = len(lost), len(free)
    if not m:
        return []
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            if lost[i] == free[j][1]:
                row[j] = below[j + 1] + 1
            else:
                row[j] = max(below[j], row[j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if lost[i] == free[j][1] and table[i][j] == table[i + 1][j + 1] + 1:
            out.append(free[j][0])
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def lost_lines(
    old: bytes, left: list[bytes] | Leftover, added: list[list[str]] | None = None
) -> list[tuple[int, str]]:
    """The old file's lines (number, text) that a call makes disappear: found in no file the
    call leaves behind (moved targets and the archive included), and said again by no line the
    call added (see `Leftover.keeps`)."""
    rest = left if isinstance(left, Leftover) else Leftover([_lines(d) for d in left], added or [])
    lost = []
    for n, raw in enumerate(old.decode("utf-8", "replace").splitlines(), 1):
        line = _norm(raw)
        if line and not rest.keeps(line):
            lost.append((n, raw.strip()))
    return lost
