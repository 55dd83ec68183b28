"""Reading the search index: the freshness mark, ranking, windows and hits (search.py writes it).

The semantic extra is loaded by `semantic.load()` when a query asks. Every
rule of what is indexed, how lines rank and what a hit holds is in search.py's docstring;
this module is its read half, and search.py re-exports what it names.
"""

from __future__ import annotations

import heapq
import math
import os
import re
import sqlite3
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime
from itertools import combinations
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

from crustacean import daily
from crustacean.errors import SearchQueryError
from crustacean.recall.search_query import (
    STOP_WORDS,
    Query,
    Term,
    fts_string,
    parse_query,
    split_words,
)
from crustacean.tree import RECALLED, mark_of, stat_markdown

TITLE_WEIGHT = 0.6
CONTEXT_BEFORE = 0
CONTEXT_AFTER = 0
QUESTION_AFTER = 1  # a line that asks something comes with the next turn: its answer
MAX_HITS = 50
WINDOW_LINES = 8  # a window this long takes no more merges: the next hit starts its own
MAX_BUDGET_CHARS = 50_000
MAX_SKIPS = 20  # windows too big for what is left of a budget, tried before giving up
CANDIDATES = 10  # best-scored lines considered for windows, per window asked for
TIER_WORDS = 6  # up to this many words, lines are ranked by word subsets (2**6 - 1 of them)
COMMON_SHARE = 0.2  # a word held by more of the lines than this only breaks ties in the tiers
COMMON_LINES = 50  # ... and by at least this many (in a small workspace every word is "common")
PAIR_WEIGHT = 0.3  # a line holding the words only with the line before it (its question)
# With the semantic extra, a rare query word also matches its near words (semantic.py's
# `neighbours`: "car" for "automobile"): such a line ranks in the word's tier, after the lines
# that hold the words themselves, at NEAR_WEIGHT of their score (bench/RESULTS.md, Recall).
NEAR_WEIGHT = 0.6
NEAR_BELOW = 0.01  # ... for a word held by fewer than this share of the lines
PAIR_DEFER = 1  # ... ranks after the lines holding one word fewer themselves
GROW_FROM = 30  # windows grow from the best lines only, so `-n` changes no hit's lines
SNIPPET_CHARS = 200
ARCHIVE = "archive/"
# Each file's lines get contiguous rowids in one of three partitions, so leaving the scaffold
# or the archive out of results is a rowid range FTS5 applies as it reads.
SCAFFOLD_ROWIDS = 1 << 39
ARCHIVE_ROWIDS = 1 << 40
TOP_ROWID = 1 << 62
VECTOR_FILES = "search-vectors"  # .crustacean/search-vectors-<version>.{ids,int8}.npy

_T = TypeVar("_T")
_TIME = re.compile(r"\[(\d{1,2}:\d{2})\]")
# Private marks (not [ ]) so that brackets in the text do not pass for a match.
_OPEN, _CLOSE = "\x01", "\x02"


# ---------------------------------------------------------------- results


class Hit(NamedTuple):
    """One window of lines. `score`: higher is better; lines are 1-based and inclusive.

    `text` holds the window's lines (blank lines left out), `snippet` its best line on one line
    with the matched words in [brackets], `when` the date and `[HH:MM]` heading of a daily log,
    `shares_words` whether any line of it holds a word of the query.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    text: str = ""
    when: str | None = None
    shares_words: bool = True  # False: found by meaning alone (the semantic extra)

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": self.score,
            "snippet": self.snippet,
            "text": self.text,
            "when": self.when,
            "shares_words": self.shares_words,
        }


def log_day(rel: str) -> str | None:
    """The date of a daily log (`…/YYYY-MM-DD.md`), or None."""
    day = daily.log_day(rel)
    return day.isoformat() if day else None


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


class Word(NamedTuple):
    """The lines holding one query word (or the query's date), and its IDF."""

    body: set[int]
    title: set[int]  # lines whose heading or file name holds it
    weight: float
    shares: dict[int, float] | None = None  # CJK: the share of the word's pieces a line holds
    common: bool = False  # held by more than COMMON_SHARE of the lines: a tie-breaker only
    near: frozenset[int] = frozenset()  # lines holding only a near word (semantic neighbours)


Ranked = tuple[int, float, float]  # rowid, score, share of the query's words the line holds


class Scored:
    """A query's words with their lines; `ranked()` orders the lines (pure)."""

    def __init__(self, words: list[Word] | None = None, firsts: set[int] | None = None) -> None:
        self.words = words if words is not None else []
        self.firsts = firsts  # each file's first rowid: no pair across two files

    def ranked(self, keep: Callable[[int], bool] | None, n: int) -> list[Ranked]:
        """The n best lines: all the words first, then most (by the words' IDF)."""
        if not self.words:
            return []
        if len(self.words) <= TIER_WORDS and all(w.shares is None for w in self.words):
            return self._tiers(keep, n)
        return self._summed(keep, n)

    def _tiers(self, keep: Callable[[int], bool] | None, n: int) -> list[Ranked]:
        """Set algebra, word subsets biggest first: cheap however many lines hold a word.

        Common words (`Word.common`) are left out of the subsets and order the lines of one
        subset instead. A line also holds, at `PAIR_WEIGHT`, the words of the line before it:
        a question and its answer scored as one, returned as the answer (when the answer holds
        some query word itself: often only the speaker's name). A word's near words
        (`Word.near`) count for it, after the lines holding the word itself."""
        words = self.words
        held = [w.body | w.title for w in words]
        if keep is not None:
            held = [{r for r in lines if keep(r)} for lines in held]
        core = [i for i, w in enumerate(words) if not w.common] or list(range(len(words)))
        common = [i for i in range(len(words)) if i not in core]
        m = len(core)
        firsts = self.firsts or set()
        nears = [w.near if keep is None else {r for r in w.near if keep(r)} for w in words]
        soft = [h | near for h, near in zip(held, nears, strict=True)] if any(nears) else held
        if len(words) > 1 and PAIR_WEIGHT > 0:  # one word: a pair line would hold none itself
            paired = {i: soft[i] | ({r + 1 for r in soft[i]} - firsts) for i in core}
        else:
            paired = {i: soft[i] for i in core}
        if keep is not None:
            paired = {i: {r for r in lines if keep(r)} for i, lines in paired.items()}
        combos = [c for k in range(m, 0, -1) for c in combinations(core, k)]
        combos.sort(key=lambda c: (-len(c), -sum(words[i].weight for i in c)))
        out: list[Ranked] = []
        seen: set[int] = set()
        later: list[tuple[int, set[int], float, float]] = []  # pairs: (size, lines, score, share)

        def add(group: set[int], score: float, share: float) -> None:
            got = self._ordered(group - taken, common, held, n - len(out))
            out.extend([(r, score, share) for r in got])
            taken.update(got)

        taken: set[int] = set()
        for combo in combos:
            while later and later[0][0] - PAIR_DEFER > len(combo):  # a tier smaller first
                add(*later.pop(0)[1:])
            order = sorted(combo, key=lambda i: len(paired[i]))
            lines = paired[order[0]].intersection(*(paired[i] for i in order[1:])) - seen
            if not lines:
                continue
            share = len(combo) / m
            base = sum(words[i].weight for i in combo) * share * share
            whole = lines.intersection(*(held[i] for i in combo))
            in_body = whole.intersection(*(words[i].body for i in combo))
            add(in_body, base, share)
            add(whole - in_body, base * TITLE_WEIGHT, share)
            if soft is not held:  # the lines holding some of the words only as near words
                near = soft[order[0]].intersection(*(soft[i] for i in order[1:])) - whole - seen
                add(near, base * NEAR_WEIGHT, share)
                whole |= near
            if PAIR_WEIGHT > 0:
                cand = lines - whole
                pair = set().union(*(cand & h for h in soft))  # holding a query word itself
                later.append((len(combo), pair, base * PAIR_WEIGHT, share))
            if len(out) >= n:
                break
            seen |= whole
        for _, group, score, share in later:
            if len(out) >= n:
                break
            add(group, score, share)
        return out

    def _ordered(
        self, group: set[int], common: list[int], held: list[set[int]], n: int
    ) -> list[int]:
        """The best n lines of one score: by the common words they hold (the subsets of them,
        heaviest first, as set algebra), then in file order. BM25 as the tie-break measured
        worse on bench/recall_bench.py, and 3x slower."""
        if not group or n <= 0:
            return []
        if not common or len(group) == 1:
            return heapq.nsmallest(n, group)
        weight = self.words
        subsets = [c for k in range(len(common), -1, -1) for c in combinations(common, k)]
        subsets.sort(key=lambda c: -sum(weight[i].weight for i in c))  # a superset first
        out: list[int] = []
        left = set(group)
        for sub in subsets:
            bucket = left.intersection(*(held[i] for i in sub))
            out += heapq.nsmallest(n - len(out), bucket)
            left -= bucket
            if len(out) >= n or not left:
                break
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
        rare = [w.body | w.title for w in self.words if not w.common]
        if rare and len(rare) < m:  # a line holding only common words is no match
            score = {r: s for r, s in score.items() if any(r in lines for lines in rare)}
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


# ---------------------------------------------------------------- freshness


def scan_markdown(root: Path) -> tuple[dict[str, os.stat_result], list[tuple[str, str]]]:
    """Every indexable markdown file with its stat, and the folders that could not be read."""
    problems: list[tuple[str, str]] = []
    paths, stats = stat_markdown(root, RECALLED, problems)
    return dict(zip(paths, stats, strict=True)), problems


def disk_mark(disk: dict[str, os.stat_result]) -> int:
    """One signed 64-bit number for every file's path, size and mtime, in scan order.

    Folder mtimes cannot stand in for it: a write in place (an editor saving over the file,
    `>>`, a sync tool) changes the file's mtime and size, not its folder's. A different order
    of the same files only costs the row-by-row comparison."""
    numbers = array("q")
    for st in disk.values():
        numbers.append(st.st_size)
        numbers.append(st.st_mtime_ns)
    return mark_of(list(disk), numbers)


def recorded(conn: sqlite3.Connection, mark: int, files: int) -> bool:
    """Whether the index recorded exactly these files' sizes and mtimes (`disk_mark`), with
    vectors for every line when the semantic extra is on (the row count guards a table emptied
    since): then an update has nothing to do and writes nothing."""
    row = conn.execute("SELECT value FROM search_meta WHERE key = 'disk'").fetchone()
    if row is None or row[0] != mark:
        return False
    count = conn.execute("SELECT count(*) FROM search_files").fetchone()[0]
    return bool(count == files) and not _vectors_missing(conn)


def noted(conn: sqlite3.Connection) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(path, reason) of every file the index skipped, and of every file it indexed with a
    warning: what a search names on stderr, so nobody assumes the index is complete."""
    skipped = conn.execute(
        "SELECT path, skipped FROM search_files WHERE skipped IS NOT NULL ORDER BY path"
    ).fetchall()
    warnings = conn.execute(
        "SELECT path, warning FROM search_files WHERE warning IS NOT NULL ORDER BY path"
    ).fetchall()
    return [(p, r) for p, r in skipped], [(p, r) for p, r in warnings]


def next_rowid(conn: sqlite3.Connection, base: int) -> int:
    """The first free rowid of the partition starting at `base` (live, scaffold, archive)."""
    top = {0: SCAFFOLD_ROWIDS, SCAFFOLD_ROWIDS: ARCHIVE_ROWIDS}.get(base, TOP_ROWID) - 1
    row = conn.execute(
        "SELECT rowid FROM search_lines WHERE rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT 1",
        (base, top),
    ).fetchone()
    return int(row[0] if row else base) + 1


# ---------------------------------------------------------------- reading


class _Row(NamedTuple):
    path: str
    line: int
    title: str
    body: str


class _Window:
    __slots__ = ("best", "path", "rows", "score")

    def __init__(self, path: str, score: float, best: int, rows: dict[int, _Row]) -> None:
        self.path = path
        self.score = score
        self.best = best  # rowid of the line that made the window
        self.rows = rows


class _Scope(NamedTuple):
    """Which rowids a search may return: partitions, and the files under a path prefix."""

    top: int  # rowids below this: a bound FTS5 applies as it reads
    keep: Callable[[int], bool] | None  # None: every rowid below `top`

    @property
    def sql(self) -> str:
        return f" AND rowid < {self.top}"


class IndexReader:
    """Queries over one workspace's index in state.db (`conn`); writes nothing to it.

    `today` turns the moment of a search into the workspace's day, for "last week" and such."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        db_path: Path | str,
        today: Callable[[datetime], date],
    ) -> None:
        self.conn = conn
        self.db_path = db_path
        self.today = today
        self._kept: dict[str, tuple[object, object]] = {}  # while_lines_same

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
        such. A `path_prefix` under archive/ implies `include_archive`. `refresh` brings the
        index up to date first where the reader can (`SearchIndex`; a bare reader only reads)."""
        check_request(query, limit, budget_chars)
        if refresh:
            self.refresh()
        prefix = (path_prefix or "").removeprefix("./").lstrip("/")
        archive = include_archive or prefix.startswith(ARCHIVE.rstrip("/"))
        scope = self._scope(prefix, archive)
        cap = limit or (MAX_HITS if budget_chars else 10)
        # the lexical ranking is the same list however deep; the fused one is not: a fixed depth
        fused = semantic_on()
        depth = CANDIDATES * (max(cap, MAX_HITS) if fused else max(cap, 10))
        if raw:
            ranked, marks = self._raw(query, scope, depth), query
        else:
            parsed = parse_query(query, self.today(now or datetime.now(UTC)))
            ranked = self.rank(parsed, scope, depth)
            marks = _marks(parsed)
        return self._windows(ranked, cap, budget_chars, marks)

    def refresh(self) -> None:
        """Nothing here: the index is read as it is (`SearchIndex` updates it)."""

    def _scope(self, prefix: str, archive: bool) -> _Scope:
        """Scaffold files only under a prefix; the archive only when asked."""
        top = TOP_ROWID if archive else ARCHIVE_ROWIDS if prefix else SCAFFOLD_ROWIDS
        if not prefix:
            return _Scope(top, None)
        rows = self.conn.execute(
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
        scored = self._fused(query, [(r, s) for r, s, _ in ranked], scope, n)
        return self.reranked(query, scored, scope)

    def reranked(
        self,
        query: Query,
        ranked: list[tuple[int, float]],
        scope: _Scope,
        top: int | None = None,
    ) -> list[tuple[int, float]]:
        """The best lines reordered by the rerank extra's encoder when it is installed
        (rerank.py): the best `top` (default `rerank.TOP`) of distinct text among the best
        `rerank.SCAN`, each with the line after it, and the answers a person the query names
        gave to copies of them (`_named_answers`), each embedded with the line before it."""
        from crustacean.recall import rerank

        top = rerank.TOP if top is None else top

        model = rerank.load() if ranked and query.text.strip() else None
        if model is None:
            return ranked
        scan = [r for r, _ in ranked[: rerank.SCAN]]
        rows = self._rows_of(scan, before=1)
        head = rerank.distinct(((r, rows[r].body) for r in scan if r in rows), top)
        after = {r: r + 1 for r in head if r + 1 in rows and rows[r + 1].path == rows[r].path}
        lead = rerank.candidates(head, after)
        for r, (row, brought) in self._named_answers(query, head, rows, lead, scope).items():
            rows[r - 1], rows[r] = brought, row  # the copy it answers, and the answer
            lead[r] = r
        pool = [r for r in lead if r in rows]
        texts = []
        for r in pool:  # rows holds the line before each (a widened line's: its head line)
            prev = rows.get(r - 1)
            same = prev is not None and prev.path == rows[r].path
            texts.append(rerank.context_text(rows[r].body, prev.body if same and prev else None))
        cos = dict(zip(pool, model.cosines(query.text, texts), strict=True))
        return rerank.fuse(ranked, cos, rerank.WEIGHT, lead)

    def _named_answers(
        self,
        query: Query,
        head: list[int],
        rows: dict[int, _Row],
        taken: Mapping[int, int],
        scope: _Scope,
    ) -> dict[int, tuple[_Row, _Row]]:
        """For each head line that is a chat turn, the line after each copy of its words
        elsewhere when a person the query names says it (`rerank.named_answer`): up to
        `rerank.ANSWERS` lines, each with the copy before it, in the head's order."""
        from crustacean.recall import rerank

        names = rerank.words(query.text)
        out: dict[int, tuple[_Row, _Row]] = {}
        sql = f"SELECT rowid FROM search_lines WHERE search_lines MATCH ?{scope.sql} LIMIT 500"
        for h in head:
            said = rerank.turn(rows[h].body) if h in rows else None
            if said is None or len(said[1]) < rerank.MIN_SAID:
                continue
            words = " ".join(re.findall(r"\w+", said[1]))
            if not words:
                continue
            copies = [r for (r,) in self.conn.execute(sql, (f"body : {fts_string(words)}",))]
            found = self._rows_of([c for c in copies if c != h], before=0)
            for c in copies:
                here, nxt = found.get(c), found.get(c + 1)
                if c == h or here is None or nxt is None or nxt.path != here.path:
                    continue
                if c + 1 in taken or c + 1 in out:
                    continue
                if scope.keep is not None and not scope.keep(c + 1):
                    continue
                if len(out) >= rerank.ANSWERS:
                    return out
                if rerank.named_answer(here.body, said[1], nxt.body, names):
                    out[c + 1] = (nxt, here)
        return out

    def _fused(
        self, query: Query, lexical: list[tuple[int, float]], scope: _Scope, n: int
    ) -> list[tuple[int, float]]:
        """Weighted score fusion: lexical / best lexical + WEIGHT x cosine (semantic.py),
        copies of one text after the first of each (`semantic.copies_last`)."""
        from crustacean.recall import semantic

        embedder = semantic.load()
        if embedder is None or not query.text.strip():
            return lexical
        from pathlib import Path  # the extra's imports dwarf it; a lexical search never pays

        db_path = Path(self.db_path)
        ids, matrix = _vector_matrix(self.conn, db_path, embedder)
        if not len(ids):
            return lexical
        np = embedder.np
        cos = embedder.cosines(matrix, embedder.query(query.text, db_path.parent))
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
        floor = 0.0 if lexical else semantic.ALONE_FLOOR  # no word held anywhere: a high bar
        for k in top:
            r = int(ids[k])
            if cos[k] > floor and r not in fused:
                fused[r] = semantic.WEIGHT * float(cos[k])
        ranked = sorted(fused.items(), key=lambda p: (-p[1], p[0]))
        at = np.searchsorted(ids, [r for r, _ in ranked]).tolist()
        keys = [  # each line's stored vector: copies of one text share it
            matrix[k].tobytes() if k < len(ids) and ids[k] == r else b""
            for (r, _), k in zip(ranked, at, strict=True)
        ]
        return semantic.copies_last(ranked, keys)[:n]

    def _scored(self, query: Query, scope: _Scope) -> Scored:
        """Every line holding a query word; a date is one more word, held by that day's lines.

        A date no daily log falls in matches nothing: its words ("recently", "last year") are
        searched as words instead. A joined word ("programming-related") the text never holds
        as a phrase is searched as its parts."""
        conn = self.conn
        total = next_rowid(conn, 0)  # about the number of lines: all the IDF needs
        words = [w for term in query.terms for w in self._words(term, scope, total)]
        scored = Scored(words, self._firsts() if len(words) > 1 else None)
        if query.dates is not None:
            spans = conn.execute(
                "SELECT first_rowid, lines FROM search_files WHERE day BETWEEN ? AND ? "
                "AND lines > 0 AND first_rowid < ?",
                (query.dates.first.isoformat(), query.dates.last.isoformat(), scope.top),
            ).fetchall()
            if not spans:
                terms = [t for t in split_words(query.date_words) if t.text not in STOP_WORDS]
                scored.words += [w for t in terms for w in self._words(t, scope, total)]
                return scored
            dated: set[int] = set()
            for first, count in spans:
                dated.update(range(first, first + count))
            rows = len(dated)
            if scored.words:  # held by the lines that hold some other word
                dated &= set().union(*(w.body | w.title for w in scored.words))
            scored.words.append(Word(dated, set(), idf(total, rows)))
        return scored

    def _firsts(self) -> set[int]:
        """Each file's first rowid (no pair of lines across two files)."""
        sql = "SELECT first_rowid FROM search_files"
        return self.while_lines_same("firsts", lambda: {r for (r,) in self.conn.execute(sql)})

    def while_lines_same(self, key: str, fetch: Callable[[], _T]) -> _T:
        """What `fetch` reads of the index, kept while its lines are the same: every update
        that adds or drops a line, or a rebuild, draws a new `vectors` token (search.py)."""
        row = self.conn.execute("SELECT value FROM search_meta WHERE key = 'vectors'").fetchone()
        token = row[0] if row else None
        kept = self._kept.get(key)
        if token is None or kept is None or kept[0] != token:
            kept = (token, fetch())
            self._kept[key] = kept
        return cast(_T, kept[1])

    def _words(self, term: Term, scope: _Scope, total: int) -> list[Word]:
        """One term's word, or a joined word's parts when no line holds it as a phrase."""
        word = self._word(term, scope, total)
        parts = term.text.split()
        if term.cjk or len(parts) < 2 or word.body or word.title:
            return [word]
        kept = [p for p in parts if p not in STOP_WORDS] or parts
        return [self._word(Term(p, (fts_string(p),)), scope, total) for p in kept]

    def _word(self, term: Term, scope: _Scope, total: int) -> Word:
        conn = self.conn
        if term.cjk:
            sets = [self._cjk_rowids(piece, scope) for piece in term.pieces]
            union = set().union(*sets)
            shares = {r: sum(r in s for s in sets) / len(sets) for r in union}
            return Word(union, set(), idf(total, len(union)), shares)
        sql = f"SELECT rowid FROM search_lines WHERE search_lines MATCH ?{scope.sql}"
        piece = term.pieces[0]
        body = {r for (r,) in conn.execute(sql, (f"body : {piece}",))}
        title = {r for (r,) in conn.execute(sql, (f"title : {piece}",))}
        found = len(body | title)
        common = found > COMMON_SHARE * total and found >= COMMON_LINES
        near: frozenset[int] = frozenset()
        if not common and found < NEAR_BELOW * total:
            near = frozenset(self._near(term.text, sql) - body - title)
        return Word(body, title, idf(total, found), common=common, near=near)

    def _near(self, word: str, sql: str) -> set[int]:
        """Lines holding a near word of `word` (semantic.py), when the extra is on."""
        from crustacean.recall import semantic

        embedder = semantic.load()
        if embedder is None or " " in word:
            return set()
        near = embedder.neighbours(word, Path(self.db_path).parent)
        if not near:
            return set()
        match = "body : (" + " OR ".join(fts_string(name) for name in near) + ")"
        return {r for (r,) in self.conn.execute(sql, (match,))}

    def _cjk_rowids(self, piece: str, scope: _Scope) -> set[int]:
        """Lines holding a CJK piece: the trigram index for 3+ characters, LIKE below that."""
        conn = self.conn
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
            rows = self.conn.execute(sql, (query, n if scope.keep is None else -1)).fetchall()
        except sqlite3.OperationalError as e:
            raise SearchQueryError(
                f"Invalid search query {query!r} ({e}); check the FTS5 syntax, "
                "or drop --raw to search plain words."
            ) from None
        return [(r, s) for r, s in rows if scope.keep is None or scope.keep(r)]

    # ------------------------------------------------------------ windows

    def _rows(self, first: int, last: int) -> dict[int, _Row]:
        rows = self.conn.execute(
            "SELECT rowid, path, line, title, body FROM search_lines WHERE rowid BETWEEN ? AND ?",
            (first, last),
        )
        return {r: _Row(p, int(n), t, b) for r, p, n, t, b in rows}

    def _rows_of(self, rowids: Iterable[int], before: int = CONTEXT_BEFORE) -> dict[int, _Row]:
        """The rows of these lines and of the line after each (and `before` lines before), in
        one statement of rowid ranges (FTS5 reads a range directly; `rowid IN (…)` would scan)."""
        spans = sorted({(r - before, r + QUESTION_AFTER) for r in rowids})
        out: dict[int, _Row] = {}
        one = "SELECT rowid, path, line, title, body FROM search_lines WHERE rowid BETWEEN ? AND ?"
        for k in range(0, len(spans), 50):
            chunk = spans[k : k + 50]
            sql = " UNION ALL ".join([one] * len(chunk))
            rows = self.conn.execute(sql, [x for span in chunk for x in span])
            out.update((r, _Row(p, int(n), t, b)) for r, p, n, t, b in rows)
        return out

    def _windows(
        self, ranked: list[tuple[int, float]], limit: int, budget: int | None, marks: str
    ) -> list[Hit]:
        """Each best line with its neighbours, merged with any window it touches, in rank
        order until `limit` windows or the budget is reached; no line twice.

        Only the best `GROW_FROM` lines grow a window they touch; after them a line opens its
        own. So a window's lines do not depend on how many windows are asked for: `-n 10`'s
        hits are the first ten of `-n 30`'s."""
        windows: list[_Window] = []
        owner: dict[int, _Window] = {}
        used = skips = 0
        near_best = self._rows_of(r for r, _ in ranked[:GROW_FROM])  # one query, not a hundred
        for k, (rowid, score) in enumerate(ranked):
            if rowid in owner:
                continue
            if k < GROW_FROM:
                span = range(rowid - CONTEXT_BEFORE, rowid + QUESTION_AFTER + 1)
                rows = {r: near_best[r] for r in span if r in near_best}
            else:
                rows = self._rows(rowid - CONTEXT_BEFORE, rowid + QUESTION_AFTER)
            if rowid not in rows:
                continue
            after = QUESTION_AFTER if "?" in rows[rowid].body else CONTEXT_AFTER
            rows = {r: row for r, row in rows.items() if r <= rowid + after}
            path = rows[rowid].path
            new = {r: row for r, row in rows.items() if row.path == path and r not in owner}
            cost = sum(len(row.body) + 1 for row in new.values())
            if budget is not None and used + cost > budget:
                skips += 1
                if skips > MAX_SKIPS:
                    break
                continue
            near = {id(w): w for r in new for x in (r - 1, r + 1) if (w := owner.get(x))}
            touching = [w for w in near.values() if w.path == path and len(w.rows) < WINDOW_LINES]
            if len(touching) > 1:
                touching.sort(key=windows.index)  # the first window made takes the others
            if touching and k < GROW_FROM:
                target = touching[0]
                for other in touching[1:]:
                    target.rows.update(other.rows)
                    windows.remove(other)
                    for r in other.rows:
                        owner[r] = target
                target.rows.update(new)
            else:
                if len(windows) >= limit and k >= GROW_FROM:
                    break
                target = _Window(path, score, rowid, dict(new))
                windows.append(target)
            for r in new:
                owner[r] = target
            used += cost
            if budget is not None and used >= budget:
                break
        return [self._hit(w, marks) for w in windows[:limit]]

    def _hit(self, w: _Window, marks: str) -> Hit:
        ordered = [w.rows[r] for r in sorted(w.rows)]
        best = w.rows[w.best]
        snippet = best.body
        if marks:
            try:
                got = self.conn.execute(
                    "SELECT highlight(search_lines, 3, char(1), char(2)) FROM search_lines "
                    "WHERE search_lines MATCH ? AND rowid = ?",
                    (marks, w.best),
                ).fetchone()
            except sqlite3.OperationalError:
                got = None
            snippet = got[0] if got else snippet
            shares = got is not None or self._holds(marks, min(w.rows), max(w.rows))
        else:
            shares = True
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
            shares,
        )

    def _holds(self, marks: str, first: int, last: int) -> bool:
        """Whether a line from `first` to `last` holds a word of the query."""
        sql = "SELECT 1 FROM search_lines WHERE search_lines MATCH ? AND rowid BETWEEN ? AND ?"
        try:
            return self.conn.execute(sql, (marks, first, last)).fetchone() is not None
        except sqlite3.OperationalError:
            return True


_MATRICES: dict[str, tuple[int, Any, Any]] = {}  # state.db path: (version, rowids, vectors)


def _vector_matrix(conn: sqlite3.Connection, db_path: Path, embedder: Any) -> tuple[Any, Any]:
    """Every stored vector as one int8 matrix, with the rowids of its rows.

    Cached per process until the vectors change, and between processes in two .npy files
    beside state.db named by the vectors' version token, mapped rather than read: a shell
    search would otherwise fetch every line's vector from SQLite (a fifth of a second on
    200,000 lines). The files are rebuilt from state.db whenever missing or unreadable."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")  # one snapshot: the version and the rows it names
    try:
        row = conn.execute("SELECT value FROM search_meta WHERE key = 'vectors'").fetchone()
        version = row[0] if row else 0
        key = str(db_path)
        cached = _MATRICES.get(key)
        if cached is None or cached[0] != version:
            ids, matrix = _vector_files(db_path.parent, version, conn, embedder)
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


def semantic_on() -> bool:
    """Whether searches fuse the semantic extra's cosines (loaded once per process)."""
    from crustacean.recall import semantic

    return semantic.wanted() and semantic.load() is not None


def _marks(query: Query) -> str:
    """The FTS5 query that marks a line's matched words in its snippet."""
    return " OR ".join(p for t in query.terms if not t.cjk for p in t.pieces)
