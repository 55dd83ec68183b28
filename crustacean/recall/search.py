"""Full-text search over the workspace's markdown: lines ranked by their words, tight windows.

An agent pays for every character it loads, so a hit is as big as its evidence: the index holds
one SQLite FTS5 row per line (porter stemming, unicode61), whose title column is the file's name
(frontmatter `name:`, the file name, its first `#` heading) and the line's heading path. A
trigram index holds the lines with CJK text, which unicode61 cannot split into words.

What is indexed: every `*.md` file under the workspace except hidden folders (`.git/`,
`.crustacean/`, `memory/.system/` — pipeline instructions, not memory), symlinks and the trash
(`archive/trash/`); blank lines, frontmatter, one-line `<!-- … -->` comments and lines left as
init's templates wrote them (MEMORY.md, SOUL.md, …: scaffold, not memory) are not rows.
`archive/` is indexed but left out of results unless asked for; so are scaffold files (any
README, AGENTS.md, CLAUDE.md: instructions, not memory) unless a `path_prefix` is given.

Ranking (plain words; search_query.py takes the query apart: stop words out, possessives and
punctuation split as the index splits them, dates found): lines holding all the query's words
come first, then those holding most, by subsets of the words; among lines holding the same
number, the rarer words (higher IDF) first, and a line holding them in its text before one that
holds some only in its heading or file name (`TITLE_WEIGHT`). A date in the query is one more
word, held by the lines of the daily logs of those days. CJK pieces and queries of more than
`TIER_WORDS` words are scored by IDF times the squared share of the words held. With the
`semantic` extra (semantic.py) the lexical score is fused with the cosine of local embeddings;
with the `rerank` extra (rerank.py) a sentence encoder then reorders the best `rerank.TOP` lines
of distinct text.
`raw=True` passes FTS5 syntax through (phrases, `NEAR`, `title:word`, prefix `word*`), ranked by
BM25.

Words held by more than a fifth of the lines (a speaker's name) leave the subsets and order the
lines of one subset instead. A line also holds, at `PAIR_WEIGHT`, the words of the line before it
(a question and its answer scored as one document, returned as the answering line), ranked after
the lines holding one word fewer themselves. A line holding only common words is no match; with
the semantic extra, a query no line holds a word of gets dense hits only at `ALONE_FLOOR`.

Hits: the best lines; a line that asks something (holds a "?") comes with the next one
(`QUESTION_AFTER`: the answer is often the turn after the one a question's words match). A
window touching or overlapping another one of the same file is merged into it (up to
`WINDOW_LINES`; only the best `GROW_FROM` lines merge, so `-n 10`'s hits are the first ten of
`-n 30`'s), so no line comes back twice. `budget_chars` fills that many characters of
window text in rank order (a window that would overflow is skipped), so an agent asks for "the
best 2,000 characters", not "10 hits".

The index lives in state.db and is rebuildable: `update()` re-reads only files whose size or
mtime changed, and re-indexes them only if their sha256 changed too. The check stats every
file (an edit in place changes no folder's mtime, so folder mtimes cannot vouch for the files
in them) and hashes the scan into one number (`disk_mark`); when it equals the mark stored with
the last update, nothing is compared row by row, read or written.

The read half (ranking, windows, hits, the mark) is search_read.py.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sqlite3
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from crustacean.documents import Front, read_front
from crustacean.markdown import headings
from crustacean.recall.search_query import MAX_TERMS, parse_query
from crustacean.recall.search_read import _MATRICES as _MATRICES  # a test clears the cache
from crustacean.recall.search_read import (
    ARCHIVE,
    ARCHIVE_ROWIDS,
    MAX_BUDGET_CHARS,
    MAX_HITS,
    SCAFFOLD_ROWIDS,
    VECTOR_FILES,
    Hit,
    IndexReader,
    _marks,
    _vectors_missing,
    check_request,
    disk_mark,
    log_day,
    next_rowid,
    noted,
    recorded,
    scan_markdown,
)
from crustacean.state import StateDB, open_state
from crustacean.workspace import Progress, Workspace, data_dir

__all__ = [
    "MAX_BUDGET_CHARS",
    "MAX_HITS",
    "MAX_TERMS",
    "VECTOR_FILES",
    "Found",
    "Hit",
    "IndexStats",
    "Line",
    "SearchIndex",
    "SearchRequest",
    "check_request",
    "disk_mark",
    "find",
    "index_lines",
    "log_day",
    "scan_markdown",
]

MAX_FILE_BYTES = 1024 * 1024
TOPIC_LINES = 3000  # lines a context topic ranks, to choose memories and fill the rest
TITLE_SEP = " › "
SCAFFOLD_NAMES = ("agents.md", "claude.md")

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")


# ---------------------------------------------------------------- results


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
    """Each line's heading path (outermost first), cut at `markdown.headings`."""
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    heads = {h.line: h for h in headings(lines[start:])}
    for i in range(len(lines) - start):
        head = heads.get(i)
        if head is not None:
            while stack and stack[-1][0] >= head.level:
                stack.pop()
            stack.append((head.level, head.text))
        paths.append(tuple(t for _, t in stack if t))
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


def index_lines(
    text: str, stem: str, template: frozenset[str] = frozenset()
) -> tuple[list[Line], str | None]:
    """A document's indexed lines and a frontmatter warning, if any (pure). Lines equal to a
    line of the file's `template` (init's text, not the agent's) are not indexed."""
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
        if not body.strip() or _COMMENT.match(body) or body.strip() in template:
            continue
        if path not in titles:
            titles[path] = _title((*base, *path))
        out.append(Line(i + 1, titles[path], body))
    if not out and name:
        out.append(Line(1, _title(base), ""))
    return out, warning


@functools.cache
def template_lines(rel: str) -> frozenset[str]:
    """The lines of init's template for this path (MEMORY.md, SOUL.md, …), stripped: scaffold
    text no search should return, however many questions share its words."""
    try:
        path = data_dir("templates") / "workspace" / rel
        text = path.read_text("utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError, FileNotFoundError):
        return frozenset()
    return frozenset(line.strip() for line in text.split("\n") if line.strip())


def is_scaffold(rel: str) -> bool:
    """READMEs, AGENTS.md, CLAUDE.md: instructions about the workspace, not memory."""
    name = rel.rsplit("/", 1)[-1].lower()
    return name.startswith("readme") or name in SCAFFOLD_NAMES


def partition(rel: str) -> int:
    """The first rowid of the partition a file's lines go to."""
    if rel.startswith(ARCHIVE):
        return ARCHIVE_ROWIDS
    return SCAFFOLD_ROWIDS if is_scaffold(rel) else 0


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
    lines, warning = index_lines(text, Path(rel).stem, template_lines(rel))
    if bad is not None:
        note = f"not valid UTF-8 at byte {bad}; indexed with U+FFFD in its place"
        warning = f"{warning}; {note}" if warning else note
    return _Doc(rel, st.st_size, st.st_mtime_ns, sha, tuple(lines), warning=warning)


class SearchIndex(IndexReader):
    """The FTS5 index of one workspace, kept in its state database: kept up to date here, read
    through `IndexReader` (search_read.py)."""

    def __init__(self, ws: Workspace, db: StateDB | None = None) -> None:
        self.ws = ws
        self.root = ws.root
        self._owns_db = db is None
        self.db = db if db is not None else open_state(ws)
        super().__init__(self.db.conn, self.db.path, ws.today)
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
        if not full and recorded(self.db.conn, mark, len(disk)):
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
            free = {base: next_rowid(conn, base) for base in (0, SCAFFOLD_ROWIDS, ARCHIVE_ROWIDS)}
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
        skipped, warnings = noted(self.db.conn)
        unchanged = on_disk - indexed - len(skipped)
        return IndexStats(
            indexed, removed, unchanged, tuple(problems) + tuple(skipped), tuple(warnings)
        )

    # ------------------------------------------------------------ searching

    def refresh(self) -> None:
        """Bring the index up to date before a search (`IndexReader.search`'s `refresh`)."""
        self.update()

    def ranking(
        self, topic: str, now: datetime, n: int = TOPIC_LINES, *, refresh: bool = True
    ) -> Ranking:
        """The best `n` lines for a topic (live files, no scaffold), for `context --topic`;
        `refresh` updates the index first (a server that just did leaves it)."""
        if refresh:
            self.update()
        query = parse_query(topic, self.ws.today(now))
        scope = self._scope("", archive=False)
        lexical = self._scored(query, scope).ranked(None, n)
        shares = {r: share for r, _, share in lexical}
        fused = self._fused(query, [(r, s) for r, s, _ in lexical], scope, n)
        from crustacean.recall import rerank  # lazy, as `reranked` imports it: no model loads

        ranked = self.reranked(query, fused, scope, rerank.TOPIC_TOP)
        sql = (
            "SELECT first_rowid, lines, path FROM search_files "
            f"WHERE lines > 0 AND first_rowid < {SCAFFOLD_ROWIDS} ORDER BY first_rowid"
        )

        def fetch() -> tuple[list[tuple[int, int, str]], list[int]]:
            files = self.db.conn.execute(sql).fetchall()
            return files, [first for first, _, _ in files]

        files, starts = self.while_lines_same("live files", fetch)
        return Ranking(self, ranked, shares, _marks(query), files, _starts=starts)


EMBED_LINES = 8192  # lines embedded together when indexing


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


@dataclass
class Ranking:
    """A topic's best lines over the whole workspace, for choosing and filling a context."""

    index: SearchIndex
    lines: list[tuple[int, float]]  # (rowid, score), best first
    shares: dict[int, float]  # rowid: share of the topic's words the line holds
    marks: str
    files: list[tuple[int, int, str]]  # (first rowid, lines, path), by first rowid
    _paths: list[str | None] | None = None
    _starts: list[int] | None = None  # each file's first rowid, for bisecting
    _by_path: dict[str, list[tuple[int, float]]] | None = None

    def path_of(self, rowid: int) -> str | None:
        if self._starts is None:
            self._starts = [first for first, _, _ in self.files]
        k = bisect_right(self._starts, rowid) - 1
        if k < 0:
            return None
        first, count, path = self.files[k]
        return path if rowid < first + count else None

    def paths(self) -> list[str | None]:
        """The file of each ranked line (worked out once: a context asks often); `path_of`
        inlined, since a topic ranks 3,000 lines."""
        if self._paths is None:
            if self._starts is None:
                self._starts = [first for first, _, _ in self.files]
            starts, files = self._starts, self.files
            paths: list[str | None] = []
            for rowid, _ in self.lines:
                k = bisect_right(starts, rowid) - 1
                first, count, path = files[k] if k >= 0 else (0, 0, None)
                paths.append(path if rowid < first + count else None)
            self._paths = paths
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
        best: dict[str, float] = {}  # in by_path's order: each file's first ranked line
        shares = self.shares
        for (rowid, _), path in zip(self.lines, self.paths(), strict=True):
            if path is not None:
                share = shares.get(rowid, 0.0)
                if share > best.get(path, -1.0):
                    best[path] = share
        return {path: share for path, share in best.items() if share > 0.0}

    def hits(self, keep: Callable[[str], bool], budget: int, limit: int = MAX_HITS) -> list[Hit]:
        """The best windows of the files `keep` accepts, filling `budget` characters."""
        kept = {p for p in self.by_path() if keep(p)}
        lines = [ln for ln, p in zip(self.lines, self.paths(), strict=True) if p in kept]
        return self.index._windows(lines, limit, budget, self.marks)

    def file_hits(self, path: str, budget: int, limit: int = MAX_HITS) -> list[Hit]:
        """`hits` of one file."""
        return self.index._windows(self.by_path().get(path, []), limit, budget, self.marks)


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

    def hits(self, index: IndexReader, now: datetime | None = None) -> list[Hit]:
        """What `index` answers to this request as it is (no refresh)."""
        return index.search(
            self.query,
            self.limit,
            raw=self.raw,
            path_prefix=self.path_prefix,
            include_archive=self.include_archive,
            refresh=False,
            budget_chars=self.budget_chars,
            now=now,
        )


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
        hits = request.hits(index, now)
        if record is not None and hits:
            db.record_recalls([h.path for h in hits], now or datetime.now(UTC), how=record)
    return Found(hits, stats)
