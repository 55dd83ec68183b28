"""Full-text search over the workspace's markdown: lines ranked by their words, tight windows.

An agent pays for every character it loads, so a hit is as big as its evidence: the index holds
one SQLite FTS5 row per line (porter stemming, unicode61), whose title column is the file's name
(frontmatter `name:`, the file name, its first `#` heading) and the line's heading path. A
trigram index holds the lines with CJK text, which unicode61 cannot split into words.

What is indexed: every `*.md` file under the workspace except hidden folders (`.git/`,
`.crustacean/`, `memory/.system/` — pipeline instructions, not memory), symlinks and the trash
(`archive/trash/`); blank lines, frontmatter and one-line `<!-- … -->` comments are not rows.
`archive/` is indexed but left out of results unless asked for; so are scaffold files (any
README, AGENTS.md, CLAUDE.md: instructions, not memory) unless a `path_prefix` is given.

Ranking (plain words; search_query.py takes the query apart: stop words out, possessives and
punctuation split as the index splits them, dates found): lines holding all the query's words
come first, then those holding most, by subsets of the words; among lines holding the same
number, the rarer words (higher IDF) first, and a line holding them in its text before one that
holds some only in its heading or file name (`TITLE_WEIGHT`). A date in the query is one more
word, held by the lines of the daily logs of those days. CJK pieces and queries of more than
`TIER_WORDS` words are scored by IDF times the squared share of the words held. With the
`semantic` extra (semantic.py) the lexical score is fused with the cosine of local embeddings.
`raw=True` passes FTS5 syntax through (phrases, `NEAR`, `title:word`, prefix `word*`), ranked by
BM25.

Hits: the best lines; a line that asks something (ends with "?") comes with the next one
(`QUESTION_AFTER`: the answer is often the turn after the one a question's words match). A
window touching or overlapping another one of the same file is merged into it (up to
`WINDOW_LINES`), so no line comes back twice. `budget_chars` fills that many characters of
window text in rank order (a window that would overflow is skipped), so an agent asks for "the
best 2,000 characters", not "10 hits".

The index lives in state.db and is rebuildable: `update()` re-reads only files whose size or
mtime changed, and re-indexes them only if their sha256 changed too. The check stats every
file (an edit in place changes no folder's mtime, so folder mtimes cannot vouch for the files
in them) and hashes the scan into one number (`disk_mark`); when it equals the mark stored with
the last update, nothing is compared row by row, read or written.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import os
import re
import sqlite3
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any

from crustacean import daily
from crustacean.documents import Front, read_front
from crustacean.errors import SearchQueryError
from crustacean.recall.search_query import MAX_TERMS, Query, Term, fts_string, parse_query
from crustacean.state import StateDB, open_state
from crustacean.workspace import RECALLED, Progress, Workspace, walk

__all__ = [
    "MAX_TERMS",
    "Found",
    "Hit",
    "IndexStats",
    "Line",
    "SearchIndex",
    "SearchRequest",
    "find",
    "index_lines",
]

MAX_FILE_BYTES = 1024 * 1024
TITLE_WEIGHT = 0.6
CONTEXT_BEFORE = 0
CONTEXT_AFTER = 0
QUESTION_AFTER = 1  # a line that asks something comes with the next turn: its answer
MAX_HITS = 50
WINDOW_LINES = 8  # a window this long takes no more merges: the next hit starts its own
MAX_BUDGET_CHARS = 50_000
TOPIC_LINES = 3000  # lines a context topic ranks, to choose memories and fill the rest
MAX_SKIPS = 20  # windows too big for what is left of a budget, tried before giving up
CANDIDATES = 10  # best-scored lines considered for windows, per window asked for
TIER_WORDS = 6  # up to this many words, lines are ranked by word subsets (2**6 - 1 of them)
SNIPPET_CHARS = 200
ARCHIVE = "archive/"
TITLE_SEP = " › "
# Each file's lines get contiguous rowids in one of three partitions, so leaving the scaffold
# or the archive out of results is a rowid range FTS5 applies as it reads.
SCAFFOLD_ROWIDS = 1 << 39
ARCHIVE_ROWIDS = 1 << 40
TOP_ROWID = 1 << 62
SCAFFOLD_NAMES = ("agents.md", "claude.md")

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_TIME = re.compile(r"\[(\d{1,2}:\d{2})\]")
# Private marks (not [ ]) so that brackets in the text do not pass for a match.
_OPEN, _CLOSE = "\x01", "\x02"


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Hit:
    """One window of lines. `score`: higher is better; lines are 1-based and inclusive.

    `text` holds the window's lines (blank lines left out), `snippet` its best line on one line
    with the matched words in [brackets], `when` the date and `[HH:MM]` heading of a daily log.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    text: str = ""
    when: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": self.score,
            "snippet": self.snippet,
            "text": self.text,
            "when": self.when,
        }


@dataclass(frozen=True)
class IndexStats:
    """What an update did. `skipped`/`warnings` name every such file now, not only new ones."""

    indexed: int
    removed: int
    unchanged: int
    skipped: tuple[tuple[str, str], ...]
    warnings: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "indexed": self.indexed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "warnings": [{"path": p, "reason": r} for p, r in self.warnings],
        }


# ---------------------------------------------------------------- parsing (pure)


@dataclass(frozen=True)
class Line:
    """One indexed line: its 1-based number, title (file name › headings) and text."""

    number: int
    title: str
    body: str


def _body_start(text: str, front: Front) -> int:
    """Index of the first line after the frontmatter block (0 when there is none)."""
    if front.block is None:
        return 0
    end = front.end  # past the closing fence's newline, or the end of a text without one
    return text.count("\n", 0, end) + (text[end - 1] != "\n")


def _heading_paths(lines: list[str], start: int) -> list[tuple[str, ...]]:
    """Each line's heading path (outermost first), cut at ATX headings outside code fences."""
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for i in range(start, len(lines)):
        opened = _FENCE.match(lines[i])
        if opened:
            fence = None if fence == opened.group(1) else fence or opened.group(1)
        m = None if fence or opened else _HEADING.match(lines[i])
        if m and m.group(2):
            while stack and stack[-1][0] >= len(m.group(1)):
                stack.pop()
            stack.append((len(m.group(1)), m.group(2).strip()))
        paths.append(tuple(t for _, t in stack))
    return paths


def _title(parts: Iterable[str]) -> str:
    seen: set[str] = set()
    kept = []
    for part in parts:
        key = part.casefold()
        if part and key not in seen:
            seen.add(key)
            kept.append(part)
    return TITLE_SEP.join(kept)


def index_lines(text: str, stem: str) -> tuple[list[Line], str | None]:
    """A document's indexed lines and a frontmatter warning, if any (pure)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    front = read_front(text, as_body="indexed as body")
    meta, body_start, warning = front.meta, _body_start(text, front), front.problem
    name = str(meta["name"]).strip() if meta.get("name") is not None else ""
    paths = _heading_paths(lines, body_start)
    first_h1 = next((p[0] for p in paths if len(p) == 1), "")
    base = (name, re.sub(r"[-_]+", " ", stem).strip(), first_h1)
    titles: dict[tuple[str, ...], str] = {}
    out = []
    for i, path in enumerate(paths, start=body_start):
        body = lines[i].rstrip()
        if not body.strip() or _COMMENT.match(body):
            continue
        if path not in titles:
            titles[path] = _title((*base, *path))
        out.append(Line(i + 1, titles[path], body))
    if not out and name:
        out.append(Line(1, _title(base), ""))
    return out, warning


def is_scaffold(rel: str) -> bool:
    """READMEs, AGENTS.md, CLAUDE.md: instructions about the workspace, not memory."""
    name = rel.rsplit("/", 1)[-1].lower()
    return name.startswith("readme") or name in SCAFFOLD_NAMES


def log_day(rel: str) -> str | None:
    """The date of a daily log (`…/YYYY-MM-DD.md`), or None."""
    day = daily.log_day(rel)
    return day.isoformat() if day else None


def partition(rel: str) -> int:
    """The first rowid of the partition a file's lines go to."""
    if rel.startswith(ARCHIVE):
        return ARCHIVE_ROWIDS
    return SCAFFOLD_ROWIDS if is_scaffold(rel) else 0


def check_request(query: str, limit: int | None, budget_chars: int | None) -> None:
    """Refuse an empty query, a limit below 1 or a budget out of range, before any work."""
    if not query.strip():
        raise SearchQueryError("the search query is empty; give one or more words to find.")
    if limit is not None and limit < 1:
        raise SearchQueryError(f"limit must be at least 1, not {limit}.")
    if budget_chars is not None and not 1 <= budget_chars <= MAX_BUDGET_CHARS:
        raise SearchQueryError(
            f"the budget must be from 1 to {MAX_BUDGET_CHARS:,} characters, not {budget_chars}."
        )


def _snippet(marked: str) -> str:
    flat = " ".join(marked.split())
    if len(flat) > SNIPPET_CHARS:
        flat = flat[: SNIPPET_CHARS - 1].rstrip() + "…"
    if flat.count(_OPEN) > flat.count(_CLOSE):
        flat += _CLOSE
    return flat.replace(_OPEN, "[").replace(_CLOSE, "]")


# ---------------------------------------------------------------- ranking (pure)


@dataclass
class Word:
    """The lines holding one query word (or the query's date), and its IDF."""

    body: set[int]
    title: set[int]  # lines whose heading or file name holds it
    weight: float
    shares: dict[int, float] | None = None  # CJK: the share of the word's pieces a line holds


Ranked = tuple[int, float, float]  # rowid, score, share of the query's words the line holds


@dataclass
class Scored:
    """A query's words with their lines; `ranked()` orders the lines (pure)."""

    words: list[Word] = field(default_factory=list)

    def ranked(self, keep: Callable[[int], bool] | None, n: int) -> list[Ranked]:
        """The n best lines: all the words first, then most (by the words' IDF)."""
        if not self.words:
            return []
        if len(self.words) <= TIER_WORDS and all(w.shares is None for w in self.words):
            return self._tiers(keep, n)
        return self._summed(keep, n)

    def _tiers(self, keep: Callable[[int], bool] | None, n: int) -> list[Ranked]:
        """Set algebra, word subsets biggest first: cheap however many lines hold a word."""
        words, m = self.words, len(self.words)
        held = [w.body | w.title for w in words]
        if keep is not None:
            held = [{r for r in lines if keep(r)} for lines in held]
        combos = [c for k in range(m, 0, -1) for c in combinations(range(m), k)]
        combos.sort(key=lambda c: (-len(c), -sum(words[i].weight for i in c)))
        out: list[Ranked] = []
        seen: set[int] = set()
        for combo in combos:
            order = sorted(combo, key=lambda i: len(held[i]))
            lines = held[order[0]].intersection(*(held[i] for i in order[1:])) - seen
            if not lines:
                continue
            share = len(combo) / m
            base = sum(words[i].weight for i in combo) * share * share
            in_body = lines.intersection(*(words[i].body for i in combo))
            for group, score in ((in_body, base), (lines - in_body, base * TITLE_WEIGHT)):
                out += [(r, score, share) for r in sorted(group)[: n - len(out)]]
            if len(out) >= n:
                break
            seen |= lines
        return out

    def _summed(self, keep: Callable[[int], bool] | None, n: int) -> list[Ranked]:
        """IDF held times the squared share of the words held: for CJK pieces, or many words."""
        score: dict[int, float] = {}
        held: dict[int, float] = {}

        def add(lines: Iterable[int], weight: float, share: float) -> None:
            for r in lines:
                score[r] = score.get(r, 0.0) + weight
                held[r] = held.get(r, 0.0) + share

        for w in self.words:
            if w.shares is not None:
                for r, share in w.shares.items():
                    add((r,), w.weight * share, share)
                continue
            add(w.body, w.weight, 1.0)
            add(w.title - w.body, w.weight * TITLE_WEIGHT, 1.0)
            add(w.title & w.body, w.weight * TITLE_WEIGHT, 0.0)  # the word counts once
        m = len(self.words)
        final = [
            (r, s * (held[r] / m) ** 2, held[r] / m)
            for r, s in score.items()
            if keep is None or keep(r)
        ]
        best = heapq.nlargest(n, final, key=itemgetter(1))
        best.sort(key=lambda p: (-p[1], p[0]))  # ties: the earlier line first
        return best


def idf(total: int, found: int) -> float:
    return math.log(1 + total / max(found, 1))


# ---------------------------------------------------------------- the workspace side


@dataclass(frozen=True)
class _Doc:
    """A file read and parsed, ready to store; `lines` is None when the content is unchanged."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    lines: tuple[Line, ...] | None
    skipped: str | None = None
    warning: str | None = None


def scan_markdown(root: Path) -> tuple[dict[str, os.stat_result], list[tuple[str, str]]]:
    """Every indexable markdown file with its stat, and the folders that could not be read."""
    problems: list[tuple[str, str]] = []
    found = {  # follow_symlinks=False: a symlink is not a file
        rel: entry.stat(follow_symlinks=False)
        for rel, entry in walk(root, RECALLED, problems=problems)
        if entry.name.lower().endswith(".md") and entry.is_file(follow_symlinks=False)
    }
    return found, problems


def disk_mark(disk: dict[str, os.stat_result]) -> int:
    """One signed 64-bit number for every file's path, size and mtime, in scan order.

    Folder mtimes cannot stand in for it: a write in place (an editor saving over the file,
    `>>`, a sync tool) changes the file's mtime and size, not its folder's. A different order
    of the same files only costs the row-by-row comparison."""
    text = "".join(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0" for rel, st in disk.items())
    digest = hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _read(root: Path, rel: str, st: os.stat_result, known_sha: str | None) -> _Doc:
    """Read one file whose stat changed; the same bytes give a stat-only refresh (lines=None)."""
    if st.st_size > MAX_FILE_BYTES:
        return _Doc(rel, st.st_size, st.st_mtime_ns, "", (), skipped="larger than 1 MB")
    try:
        data = (root / rel).read_bytes()
    except OSError as e:  # mtime -1: tried again next time (a chmod does not change mtime)
        return _Doc(rel, st.st_size, -1, "", (), skipped=f"unreadable: {e.strerror}")
    sha = hashlib.sha256(data).hexdigest()
    if known_sha == sha:
        return _Doc(rel, st.st_size, st.st_mtime_ns, sha, None)
    return _parse(rel, st, data, sha)


def _parse(rel: str, st: os.stat_result, data: bytes, sha: str) -> _Doc:
    def skip(reason: str) -> _Doc:
        return _Doc(rel, st.st_size, st.st_mtime_ns, sha, (), skipped=reason)

    bad = None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:  # one bad byte must not hide a whole daily log
        text, bad = data.decode("utf-8", "replace").removeprefix("\ufeff"), e.start
    if not text.strip():
        return skip("empty")
    lines, warning = index_lines(text, Path(rel).stem)
    if bad is not None:
        note = f"not valid UTF-8 at byte {bad}; indexed with U+FFFD in its place"
        warning = f"{warning}; {note}" if warning else note
    return _Doc(rel, st.st_size, st.st_mtime_ns, sha, tuple(lines), warning=warning)


@dataclass(frozen=True)
class _Row:
    path: str
    line: int
    title: str
    body: str


@dataclass
class _Window:
    path: str
    score: float
    best: int  # rowid of the line that made the window
    rows: dict[int, _Row]


@dataclass(frozen=True)
class _Scope:
    """Which rowids a search may return: partitions, and the files under a path prefix."""

    top: int  # rowids below this: a bound FTS5 applies as it reads
    keep: Callable[[int], bool] | None  # None: every rowid below `top`

    @property
    def sql(self) -> str:
        return f" AND rowid < {self.top}"


class SearchIndex:
    """The FTS5 index of one workspace, kept in its state database."""

    def __init__(self, ws: Workspace, db: StateDB | None = None) -> None:
        self.ws = ws
        self.root = ws.root
        self._owns_db = db is None
        self.db = db if db is not None else open_state(ws)
        self.scanned: dict[str, os.stat_result] = {}  # the last update's stat of each file

    def close(self) -> None:
        """Close the state database if this index opened it."""
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ indexing

    def update(self, progress: Progress | None = None) -> IndexStats:
        """Re-index changed files and drop deleted ones; a no-change update writes nothing.

        `progress(done, total)` hears of each file read, for a caller that shows a bar."""
        return self._sync(full=False, progress=progress)

    def rebuild(self, progress: Progress | None = None) -> IndexStats:
        """Drop everything and index from scratch, in one transaction."""
        return self._sync(full=True, progress=progress)

    def _sync(self, *, full: bool, progress: Progress | None = None) -> IndexStats:
        """A no-change update: one stat per file, compared as one mark (`disk_mark`) with the
        mark of what the index last recorded; only a different mark reads the index's rows."""
        disk, problems = scan_markdown(self.root)
        self.scanned = disk
        mark = disk_mark(disk)
        if not full and self._recorded(mark, len(disk)):
            return self._stats(0, 0, len(disk), problems)
        seen = {} if full else self._seen()
        changed = [rel for rel, st in disk.items() if seen.get(rel) != (st.st_size, st.st_mtime_ns)]
        docs = []
        for n, rel in enumerate(sorted(changed), 1):
            docs.append(_read(self.root, rel, disk[rel], None if full else self._sha(rel)))
            if progress is not None:
                progress(n, len(changed))
        gone = sorted(seen.keys() - disk.keys())
        # an unreadable file is recorded with mtime -1 (tried again): the disk's mark is not ours
        mark_now = None if any(d.mtime_ns == -1 for d in docs) else mark
        self._write(docs, gone, full=full, mark=mark_now)
        indexed = sum(1 for d in docs if d.lines is not None and d.skipped is None)
        return self._stats(indexed, len(gone), len(disk), problems)

    def _recorded(self, mark: int, files: int) -> bool:
        """Whether the index recorded exactly these files' sizes and mtimes, with vectors for
        every line when the semantic extra is on (the row count guards a table emptied since)."""
        conn = self.db.conn
        row = conn.execute("SELECT value FROM search_meta WHERE key = 'disk'").fetchone()
        if row is None or row[0] != mark:
            return False
        count = conn.execute("SELECT count(*) FROM search_files").fetchone()[0]
        return count == files and not _vectors_missing(conn)

    def _seen(self) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of every known file: the cheap check before any hashing."""
        rows = self.db.conn.execute("SELECT path, size, mtime_ns FROM search_files")
        return {path: (size, mtime_ns) for path, size, mtime_ns in rows}

    def _sha(self, path: str) -> str | None:
        row = self.db.conn.execute("SELECT sha256 FROM search_files WHERE path = ?", (path,))
        return (row.fetchone() or (None,))[0]

    def _write(self, docs: list[_Doc], gone: list[str], *, full: bool, mark: int | None) -> None:
        """Store what changed and the disk's mark; nothing at all when nothing changed."""
        conn = self.db.conn
        row = conn.execute("SELECT value FROM search_meta WHERE key = 'disk'").fetchone()
        stored = row[0] if row else None
        if not (full or docs or gone or stored != mark or _vectors_missing(conn)):
            return
        with self.db.transaction() as conn:
            if full:
                for table in ("search_lines", "search_cjk", "search_vectors", "search_files"):
                    conn.execute(f"DELETE FROM {table}")
            for path in gone:
                _drop(conn, path)
            free = {base: _next_rowid(conn, base) for base in (0, SCAFFOLD_ROWIDS, ARCHIVE_ROWIDS)}
            for doc in docs:
                base = partition(doc.path)
                free[base] = _store(conn, doc, free[base])
            if full or gone or any(d.lines is not None for d in docs):
                _vectors_changed(conn)  # lines went or came: a cached matrix is stale
            _embed_missing(conn)
            if mark is None:
                conn.execute("DELETE FROM search_meta WHERE key = 'disk'")
            else:
                conn.execute(
                    "INSERT INTO search_meta (key, value) VALUES ('disk', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (mark,),
                )
            if full:
                conn.execute("INSERT INTO search_lines(search_lines) VALUES ('optimize')")

    def _stats(
        self, indexed: int, removed: int, on_disk: int, problems: list[tuple[str, str]]
    ) -> IndexStats:
        conn = self.db.conn
        skipped = conn.execute(
            "SELECT path, skipped FROM search_files WHERE skipped IS NOT NULL ORDER BY path"
        ).fetchall()
        warnings = conn.execute(
            "SELECT path, warning FROM search_files WHERE warning IS NOT NULL ORDER BY path"
        ).fetchall()
        unchanged = on_disk - indexed - len(skipped)
        return IndexStats(
            indexed, removed, unchanged, tuple(problems) + tuple(skipped), tuple(warnings)
        )

    # ------------------------------------------------------------ searching

    def search(
        self,
        query: str,
        limit: int | None = None,
        *,
        raw: bool = False,
        path_prefix: str | None = None,
        include_archive: bool = False,
        refresh: bool = True,
        budget_chars: int | None = None,
        now: datetime | None = None,
    ) -> list[Hit]:
        """Best windows first: at most `limit` (10, or `MAX_HITS` with a budget) and, with
        `budget_chars`, at most that many characters of text. `now` dates "last week" and
        such. A `path_prefix` under archive/ implies `include_archive`."""
        check_request(query, limit, budget_chars)
        if refresh:
            self.update()
        prefix = (path_prefix or "").removeprefix("./").lstrip("/")
        archive = include_archive or prefix.startswith(ARCHIVE.rstrip("/"))
        scope = self._scope(prefix, archive)
        cap = limit or (MAX_HITS if budget_chars else 10)
        if raw:
            ranked, marks = self._raw(query, scope, CANDIDATES * cap), query
        else:
            parsed = parse_query(query, self.ws.today(now or datetime.now(UTC)))
            ranked = self.rank(parsed, scope, CANDIDATES * cap)
            marks = _marks(parsed)
        return self._windows(ranked, cap, budget_chars, marks)

    def _scope(self, prefix: str, archive: bool) -> _Scope:
        """Scaffold files only under a prefix; the archive only when asked."""
        top = TOP_ROWID if archive else ARCHIVE_ROWIDS if prefix else SCAFFOLD_ROWIDS
        if not prefix:
            return _Scope(top, None)
        rows = self.db.conn.execute(
            "SELECT first_rowid, lines FROM search_files "
            "WHERE substr(path, 1, ?) = ? AND lines > 0 ORDER BY first_rowid",
            (len(prefix), prefix),
        ).fetchall()
        starts = [first for first, _ in rows]

        def keep(rowid: int) -> bool:
            k = bisect_right(starts, rowid) - 1
            return k >= 0 and rowid < rows[k][0] + rows[k][1]

        return _Scope(top, keep)

    def rank(self, query: Query, scope: _Scope, n: int) -> list[tuple[int, float]]:
        """Lines as (rowid, score), best first: all the words, then most, by IDF; fused with
        the cosine of the semantic extra's vectors when it is installed."""
        ranked = self._scored(query, scope).ranked(scope.keep, n)
        return self._fused(query, [(r, s) for r, s, _ in ranked], scope, n)

    def _fused(
        self, query: Query, lexical: list[tuple[int, float]], scope: _Scope, n: int
    ) -> list[tuple[int, float]]:
        """Weighted score fusion: lexical / best lexical + WEIGHT x cosine (semantic.py)."""
        from crustacean.recall import semantic

        embedder = semantic.load()
        if embedder is None or not query.text.strip():
            return lexical
        ids, matrix = _vector_matrix(self.db, embedder)
        if not len(ids):
            return lexical
        np = embedder.np
        cos = embedder.cosines(matrix, embedder.query(query.text, self.db.path.parent))
        cos[ids >= scope.top] = -1.0
        if scope.keep is not None:
            cos[[not scope.keep(r) for r in ids.tolist()]] = -1.0
        best = lexical[0][1] if lexical and lexical[0][1] > 0 else 1.0
        fused = {r: s / best for r, s in lexical}
        if fused:  # each lexical line's vector, found by bisection: ids are in rowid order
            at = np.searchsorted(ids, list(fused)).tolist()
            for r, k in zip(list(fused), at, strict=True):
                if k < len(ids) and ids[k] == r:
                    fused[r] += semantic.WEIGHT * float(cos[k])
        top = np.argpartition(-cos, min(semantic.DENSE_TOP, len(cos) - 1))[: semantic.DENSE_TOP]
        for k in top:
            r = int(ids[k])
            if cos[k] > 0 and r not in fused:
                fused[r] = semantic.WEIGHT * float(cos[k])
        ranked = sorted(fused.items(), key=lambda p: (-p[1], p[0]))
        return ranked[:n]

    def _scored(self, query: Query, scope: _Scope) -> Scored:
        """Every line holding a query word; a date is one more word, held by that day's lines."""
        conn = self.db.conn
        total = _next_rowid(conn, 0)  # about the number of lines: all the IDF needs
        scored = Scored([self._word(term, scope, total) for term in query.terms])
        if query.dates is not None:
            spans = conn.execute(
                "SELECT first_rowid, lines FROM search_files WHERE day BETWEEN ? AND ? "
                "AND lines > 0 AND first_rowid < ?",
                (query.dates.first.isoformat(), query.dates.last.isoformat(), scope.top),
            ).fetchall()
            dated: set[int] = set()
            for first, count in spans:
                dated.update(range(first, first + count))
            rows = len(dated)
            if scored.words:  # held by the lines that hold some other word
                dated &= set().union(*(w.body | w.title for w in scored.words))
            scored.words.append(Word(dated, set(), idf(total, rows)))
        return scored

    def ranking(self, topic: str, now: datetime, n: int = TOPIC_LINES) -> Ranking:
        """The best `n` lines for a topic (live files, no scaffold), for `context --topic`."""
        self.update()
        query = parse_query(topic, self.ws.today(now))
        scope = self._scope("", archive=False)
        lexical = self._scored(query, scope).ranked(None, n)
        shares = {r: share for r, _, share in lexical}
        ranked = self._fused(query, [(r, s) for r, s, _ in lexical], scope, n)
        files = self.db.conn.execute(
            "SELECT first_rowid, lines, path FROM search_files "
            "WHERE lines > 0 AND first_rowid < ? ORDER BY first_rowid",
            (SCAFFOLD_ROWIDS,),
        ).fetchall()
        return Ranking(self, ranked, shares, _marks(query), files)

    def _word(self, term: Term, scope: _Scope, total: int) -> Word:
        conn = self.db.conn
        if term.cjk:
            sets = [self._cjk_rowids(piece, scope) for piece in term.pieces]
            union = set().union(*sets)
            shares = {r: sum(r in s for s in sets) / len(sets) for r in union}
            return Word(union, set(), idf(total, len(union)), shares)
        sql = f"SELECT rowid FROM search_lines WHERE search_lines MATCH ?{scope.sql}"
        piece = term.pieces[0]
        body = {r for (r,) in conn.execute(sql, (f"body : {piece}",))}
        title = {r for (r,) in conn.execute(sql, (f"title : {piece}",))}
        return Word(body, title, idf(total, len(body | title)))

    def _cjk_rowids(self, piece: str, scope: _Scope) -> set[int]:
        """Lines holding a CJK piece: the trigram index for 3+ characters, LIKE below that."""
        conn = self.db.conn
        if len(piece) >= 3:
            sql = f"SELECT rowid FROM search_cjk WHERE search_cjk MATCH ?{scope.sql}"
            return {r for (r,) in conn.execute(sql, (fts_string(piece),))}
        sql = f"SELECT rowid FROM search_cjk WHERE body LIKE ? ESCAPE '\\'{scope.sql}"
        pattern = "%" + re.sub(r"([%_\\])", r"\\\1", piece) + "%"
        return {r for (r,) in conn.execute(sql, (pattern,))}

    def _raw(self, query: str, scope: _Scope, n: int) -> list[tuple[int, float]]:
        sql = (
            f"SELECT rowid, -bm25(search_lines, 0, 0, {TITLE_WEIGHT}, 1.0) AS score "
            f"FROM search_lines WHERE search_lines MATCH ?{scope.sql} "
            "ORDER BY score DESC, rowid LIMIT ?"
        )
        try:
            rows = self.db.conn.execute(sql, (query, n if scope.keep is None else -1)).fetchall()
        except sqlite3.OperationalError as e:
            raise SearchQueryError(
                f"Invalid search query {query!r} ({e}); check the FTS5 syntax, "
                "or drop --raw to search plain words."
            ) from None
        return [(r, s) for r, s in rows if scope.keep is None or scope.keep(r)]

    # ------------------------------------------------------------ windows

    def _rows(self, first: int, last: int) -> dict[int, _Row]:
        rows = self.db.conn.execute(
            "SELECT rowid, path, line, title, body FROM search_lines WHERE rowid BETWEEN ? AND ?",
            (first, last),
        )
        return {r: _Row(p, int(n), t, b) for r, p, n, t, b in rows}

    def _windows(
        self, ranked: list[tuple[int, float]], limit: int, budget: int | None, marks: str
    ) -> list[Hit]:
        """Each best line with its neighbours, merged with any window it touches, in rank
        order until `limit` windows or the budget is reached; no line twice."""
        windows: list[_Window] = []
        owner: dict[int, _Window] = {}
        used = skips = 0
        for rowid, score in ranked:
            if rowid in owner:
                continue
            rows = self._rows(rowid - CONTEXT_BEFORE, rowid + QUESTION_AFTER)
            if rowid not in rows:
                continue
            after = QUESTION_AFTER if rows[rowid].body.rstrip().endswith("?") else CONTEXT_AFTER
            rows = {r: row for r, row in rows.items() if r <= rowid + after}
            path = rows[rowid].path
            new = {r: row for r, row in rows.items() if row.path == path and r not in owner}
            cost = sum(len(row.body) + 1 for row in new.values())
            if budget is not None and used + cost > budget:
                skips += 1
                if skips > MAX_SKIPS:
                    break
                continue
            near = [owner[x] for r in new for x in (r - 1, r + 1) if x in owner]
            touching = [
                w
                for w in windows
                if any(w is n for n in near) and w.path == path and len(w.rows) < WINDOW_LINES
            ]
            if touching:
                target = touching[0]
                for other in touching[1:]:
                    target.rows.update(other.rows)
                    windows.remove(other)
                    for r in other.rows:
                        owner[r] = target
                target.rows.update(new)
            else:
                if len(windows) >= limit:
                    break
                target = _Window(path, score, rowid, dict(new))
                windows.append(target)
            for r in new:
                owner[r] = target
            used += cost
            if budget is not None and used >= budget:
                break
        return [self._hit(w, marks) for w in windows]

    def _hit(self, w: _Window, marks: str) -> Hit:
        ordered = [w.rows[r] for r in sorted(w.rows)]
        best = w.rows[w.best]
        snippet = best.body
        if marks:
            try:
                got = self.db.conn.execute(
                    "SELECT highlight(search_lines, 3, char(1), char(2)) FROM search_lines "
                    "WHERE search_lines MATCH ? AND rowid = ?",
                    (marks, w.best),
                ).fetchone()
            except sqlite3.OperationalError:
                got = None
            snippet = got[0] if got else snippet
        day = log_day(w.path)
        at = _TIME.search(best.title) if day else None
        when = f"{day} {at.group(1)}" if at else day
        return Hit(
            w.path,
            ordered[0].line,
            ordered[-1].line,
            round(w.score, 4),
            _snippet(snippet),
            "\n".join(row.body for row in ordered),
            when,
        )


_MATRICES: dict[str, tuple[int, Any, Any]] = {}  # state.db path: (version, rowids, vectors)
VECTOR_FILES = "search-vectors"  # .crustacean/search-vectors-<version>.{ids,int8}.npy
EMBED_LINES = 8192  # lines embedded together when indexing


def _vector_matrix(db: StateDB, embedder: Any) -> tuple[Any, Any]:
    """Every stored vector as one int8 matrix, with the rowids of its rows.

    Cached per process until the vectors change, and between processes in two .npy files
    beside state.db named by the vectors' version token, mapped rather than read: a shell
    search would otherwise fetch every line's vector from SQLite (a fifth of a second on
    200,000 lines). The files are rebuilt from state.db whenever missing or unreadable."""
    conn = db.conn
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")  # one snapshot: the version and the rows it names
    try:
        row = conn.execute("SELECT value FROM search_meta WHERE key = 'vectors'").fetchone()
        version = row[0] if row else 0
        key = str(db.path)
        cached = _MATRICES.get(key)
        if cached is None or cached[0] != version:
            ids, matrix = _vector_files(db.path.parent, version, conn, embedder)
            cached = (version, ids, matrix)
            _MATRICES[key] = cached
    finally:
        if own:
            conn.execute("COMMIT")
    return cached[1], cached[2]


def _vector_files(
    folder: Path, version: int, conn: sqlite3.Connection, embedder: Any
) -> tuple[Any, Any]:
    """The matrix of `version` from its files, else from state.db (then written for next time)."""
    np = embedder.np
    stem = folder / f"{VECTOR_FILES}-{version & 0xFFFF_FFFF_FFFF_FFFF:016x}"
    ids_file, matrix_file = stem.with_suffix(".ids.npy"), stem.with_suffix(".int8.npy")
    try:
        ids = np.load(ids_file)  # 8 bytes a line: read whole, looked up one by one
        matrix = np.load(matrix_file, mmap_mode="r")
        if len(ids) == len(matrix) and matrix.dtype == np.int8 and ids.dtype == np.int64:
            return ids, matrix
    except (OSError, ValueError):
        pass
    rows = conn.execute("SELECT rowid, vec FROM search_vectors ORDER BY rowid").fetchall()
    ids = np.array([r for r, _ in rows], dtype=np.int64)
    matrix = embedder.matrix([v for _, v in rows])
    try:
        for pattern in (f"{VECTOR_FILES}-*.npy", f".{VECTOR_FILES}-*.tmp"):
            for old in folder.glob(pattern):  # another version's, or a crashed write's
                old.unlink(missing_ok=True)
        for path, array in ((ids_file, ids), (matrix_file, matrix)):  # ids first: a matrix
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # file means both are whole
            with open(tmp, "wb") as fh:
                np.save(fh, array)
            os.replace(tmp, path)
    except OSError:
        pass  # a read-only state folder: the next search reads state.db again
    return ids, matrix


def _vectors_missing(conn: sqlite3.Connection) -> bool:
    """Files indexed before the semantic extra was installed, to embed now. The model is
    loaded (its imports are most of a search's start-up) only when there are some."""
    from crustacean.recall import semantic

    if not semantic.wanted():
        return False
    sql = "SELECT 1 FROM search_files WHERE lines > 0 AND vectors = 0 LIMIT 1"
    return conn.execute(sql).fetchone() is not None and semantic.load() is not None


def _vectors_changed(conn: sqlite3.Connection) -> None:
    """A new version token for the stored vectors (random: a fresh state.db never repeats one)."""
    conn.execute(
        "INSERT INTO search_meta (key, value) VALUES ('vectors', random()) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
    )


def _embed_missing(conn: sqlite3.Connection) -> None:
    """Embed the lines of every file that has none yet (new, changed, or from before)."""
    from crustacean.recall import semantic

    if not _vectors_missing(conn):
        return
    embedder = semantic.load()
    assert embedder is not None  # _vectors_missing loaded it
    files = conn.execute(
        "SELECT path, first_rowid, lines FROM search_files WHERE lines > 0 AND vectors = 0"
    ).fetchall()
    while files:  # EMBED_LINES lines at a time: the tokenizer and the pooling batch them
        batch: list[tuple[str, int, int]] = []
        size = 0
        while files and (not batch or size + files[-1][2] <= EMBED_LINES):
            batch.append(files.pop())
            size += batch[-1][2]
        rows = [
            row
            for _, first, count in batch
            for row in conn.execute(
                "SELECT rowid, body FROM search_lines WHERE rowid BETWEEN ? AND ?",
                (first, first + count - 1),
            )
        ]
        vectors = embedder.lines([body for _, body in rows])
        conn.executemany(
            "INSERT OR REPLACE INTO search_vectors (rowid, vec) VALUES (?, ?)",
            [(r, v) for (r, _), v in zip(rows, vectors, strict=True)],
        )
        conn.executemany(
            "UPDATE search_files SET vectors = 1 WHERE path = ?", [(p,) for p, _, _ in batch]
        )
    _vectors_changed(conn)


def _marks(query: Query) -> str:
    """The FTS5 query that marks a line's matched words in its snippet."""
    return " OR ".join(p for t in query.terms if not t.cjk for p in t.pieces)


@dataclass
class Ranking:
    """A topic's best lines over the whole workspace, for choosing and filling a context."""

    index: SearchIndex
    lines: list[tuple[int, float]]  # (rowid, score), best first
    shares: dict[int, float]  # rowid: share of the topic's words the line holds
    marks: str
    files: list[tuple[int, int, str]]  # (first rowid, lines, path), by first rowid
    _paths: list[str | None] | None = None
    _by_path: dict[str, list[tuple[int, float]]] | None = None

    def path_of(self, rowid: int) -> str | None:
        k = bisect_right(self.files, (rowid, TOP_ROWID, "")) - 1
        if k < 0:
            return None
        first, count, path = self.files[k]
        return path if rowid < first + count else None

    def paths(self) -> list[str | None]:
        """The file of each ranked line (worked out once: a context asks often)."""
        if self._paths is None:
            self._paths = [self.path_of(rowid) for rowid, _ in self.lines]
        return self._paths

    def by_path(self) -> dict[str, list[tuple[int, float]]]:
        """Each file's ranked lines, best first."""
        if self._by_path is None:
            self._by_path = {}
            for line, path in zip(self.lines, self.paths(), strict=True):
                if path is not None:
                    self._by_path.setdefault(path, []).append(line)
        return self._by_path

    def best_shares(self) -> dict[str, float]:
        """Each file's best line: the share of the topic's words it holds (0 to 1)."""
        out: dict[str, float] = {}
        for path, lines in self.by_path().items():
            best = max(self.shares.get(rowid, 0.0) for rowid, _ in lines)
            if best > 0.0:
                out[path] = best
        return out

    def hits(self, keep: Callable[[str], bool], budget: int, limit: int = MAX_HITS) -> list[Hit]:
        """The best windows of the files `keep` accepts, filling `budget` characters."""
        kept = {p for p in self.by_path() if keep(p)}
        lines = [ln for ln, p in zip(self.lines, self.paths(), strict=True) if p in kept]
        return self.index._windows(lines, limit, budget, self.marks)

    def file_hits(self, path: str, budget: int, limit: int = MAX_HITS) -> list[Hit]:
        """`hits` of one file."""
        return self.index._windows(self.by_path().get(path, []), limit, budget, self.marks)


def _next_rowid(conn: sqlite3.Connection, base: int) -> int:
    """The first free rowid of the partition starting at `base` (live, scaffold, archive)."""
    top = {0: SCAFFOLD_ROWIDS, SCAFFOLD_ROWIDS: ARCHIVE_ROWIDS}.get(base, TOP_ROWID) - 1
    row = conn.execute(
        "SELECT rowid FROM search_lines WHERE rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT 1",
        (base, top),
    ).fetchone()
    return (row[0] if row else base) + 1


def _drop(conn: sqlite3.Connection, path: str) -> None:
    """Remove a file's lines (a contiguous rowid range) and its row."""
    row = conn.execute("SELECT first_rowid, lines FROM search_files WHERE path = ?", (path,))
    got = row.fetchone()
    if got and got[1]:
        span = (got[0], got[0] + got[1] - 1)
        conn.execute("DELETE FROM search_lines WHERE rowid BETWEEN ? AND ?", span)
        conn.execute("DELETE FROM search_cjk WHERE rowid BETWEEN ? AND ?", span)
        conn.execute("DELETE FROM search_vectors WHERE rowid BETWEEN ? AND ?", span)
    conn.execute("DELETE FROM search_files WHERE path = ?", (path,))


def _store(conn: sqlite3.Connection, doc: _Doc, next_rowid: int) -> int:
    """Write one file's row (and lines, if its content changed); returns the next free rowid."""
    if doc.lines is None:
        conn.execute(
            "UPDATE search_files SET size = ?, mtime_ns = ? WHERE path = ?",
            (doc.size, doc.mtime_ns, doc.path),
        )
        return next_rowid
    _drop(conn, doc.path)
    rows = [
        (next_rowid + i, doc.path, ln.number, ln.title, ln.body) for i, ln in enumerate(doc.lines)
    ]
    conn.executemany(
        "INSERT INTO search_lines (rowid, path, line, title, body) VALUES (?, ?, ?, ?, ?)", rows
    )
    conn.executemany(
        "INSERT INTO search_cjk (rowid, body) VALUES (?, ?)",
        [(r[0], r[4]) for r in rows if _CJK.search(r[4])],
    )
    conn.execute(
        "INSERT INTO search_files (path, size, mtime_ns, sha256, first_rowid, lines, skipped, "
        "warning, day) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            doc.path,
            doc.size,
            doc.mtime_ns,
            doc.sha256,
            next_rowid,
            len(doc.lines),
            doc.skipped,
            doc.warning,
            log_day(doc.path),
        ),
    )
    return next_rowid + len(doc.lines)


# ---------------------------------------------------------------- one search, as asked


@dataclass(frozen=True)
class SearchRequest:
    """What `crustacean search` and the MCP `search_memory` ask; refused when made, before any
    work (`check_request`)."""

    query: str
    limit: int | None = None
    budget_chars: int | None = None
    raw: bool = False
    path_prefix: str | None = None
    include_archive: bool = False

    def __post_init__(self) -> None:
        check_request(self.query, self.limit, self.budget_chars)


@dataclass(frozen=True)
class Found:
    """The hits, and what refreshing the index first found (None: it was not refreshed)."""

    hits: list[Hit]
    stats: IndexStats | None


def find(
    ws: Workspace,
    request: SearchRequest,
    *,
    now: datetime | None = None,
    refresh: bool = True,
    record: str | None = None,
    progress: Progress | None = None,
) -> Found:
    """Refresh the index (unless told it is fresh), search, and with `record` (a recall kind)
    count each file returned as recalled."""
    with open_state(ws) as db, SearchIndex(ws, db) as index:
        stats = index.update(progress) if refresh else None
        hits = index.search(
            request.query,
            request.limit,
            raw=request.raw,
            path_prefix=request.path_prefix,
            include_archive=request.include_archive,
            refresh=False,
            budget_chars=request.budget_chars,
            now=now,
        )
        if record is not None and hits:
            db.record_recalls([h.path for h in hits], now or datetime.now(UTC), how=record)
    return Found(hits, stats)
