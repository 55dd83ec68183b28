"""Full-text search over the workspace's markdown: SQLite FTS5 BM25, chunked by heading.

What is indexed: every `*.md` file under the workspace except hidden folders (`.git/`,
`.crustacean/`, `memory/.system/` — pipeline instructions, not memory), symlinks and the trash
(`archive/trash/`). `archive/` is indexed but left out of results unless asked for.

Chunks: a heading and its section; a section longer than `CHUNK_CHARS` is split at blank lines
(and a paragraph longer than that at line ends), so a hit names a few lines, not a whole file.
Each chunk's title column holds the file's name (frontmatter `name:`, the file name, its first
`#` heading) and the section's heading path; BM25 weighs the title `TITLE_WEIGHT` times the body.

Queries: by default each word is quoted as an FTS5 string, so `"`, `-`, `*`, `:`, `AND` are
plain text, and the words are ANDed. When no chunk has every word, the query falls back to OR,
so a natural-language question still finds something; the OR score is the BM25 score times the
squared share of the query's words the chunk holds, so chunks with most words come first.
`raw=True` passes FTS5 syntax through (phrases, `NEAR`, `title:word`, prefix `word*`).

The index lives in state.db and is rebuildable: `update()` re-reads only files whose size or
mtime changed, and re-indexes them only if their sha256 changed too.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import yaml

from crustacean.documents import HANDLER, FrontmatterOverLimit
from crustacean.errors import SearchQueryError
from crustacean.state import StateDB, open_state
from crustacean.workspace import Workspace

MAX_FILE_BYTES = 1024 * 1024
CHUNK_CHARS = 1500
TITLE_WEIGHT = 4.0
BODY_WEIGHT = 1.0
SNIPPET_TOKENS = 16
SNIPPET_CHARS = 200
MAX_TERMS = 32
ARCHIVE = "archive/"
# Chunks of archive/ files get rowids from here up, so leaving the archive out of results is a
# rowid range FTS5 applies as it reads, not a read of every matching row's path.
ARCHIVE_ROWIDS = 1 << 40
TRASH = "archive/trash"
TITLE_SEP = " › "

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_WORD = re.compile(r"\w")
_RANK = f"-bm25(search_chunks, 0, 0, 0, {TITLE_WEIGHT}, {BODY_WEIGHT})"
# Private marks (not [ ]) so that brackets in the text do not pass for a match.
_OPEN, _CLOSE = "\x01", "\x02"
_SNIPPETS = ", ".join(
    f"snippet(search_chunks, {col}, char(1), char(2), '…', {SNIPPET_TOKENS})" for col in (3, 4)
)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Hit:
    """One matching chunk. `score`: higher is better; lines are 1-based and inclusive."""

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": self.score,
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class IndexStats:
    """What an update did. `skipped`/`warnings` name every such file now, not only new ones."""

    indexed: int
    removed: int
    unchanged: int
    skipped: tuple[tuple[str, str], ...]
    warnings: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- parsing (pure)


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    title: str
    body: str


@dataclass(frozen=True)
class _Section:
    start: int  # 0-based line index, inclusive
    end: int  # exclusive
    path: tuple[str, ...]  # heading texts, outermost first
    heading: bool  # the first line is the heading


def split_frontmatter(lines: list[str]) -> tuple[dict[str, object], int, str | None]:
    """(metadata, index of the first body line, warning); broken frontmatter is body."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0, None
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return {}, 0, "line 1: frontmatter has no closing '---'; indexed as body"
    try:
        meta = HANDLER.load("\n".join(lines[1:end]))
    except FrontmatterOverLimit as e:
        return {}, 0, f"line 2: frontmatter {e}, over the limit; not parsed, indexed as body"
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as e:
        mark = getattr(e, "context_mark", None) or getattr(e, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        return {}, 0, f"line {line}: frontmatter is not valid YAML; indexed as body"
    if meta is None:
        return {}, end + 1, None
    if not isinstance(meta, dict):
        return {}, 0, "line 1: frontmatter is not a list of key: value lines; indexed as body"
    return meta, end + 1, None


def _sections(lines: list[str], start: int) -> list[_Section]:
    """Cut the body at ATX headings outside code fences, tracking each heading's path."""
    out: list[_Section] = []
    stack: list[tuple[int, str]] = []
    current = _Section(start, len(lines), (), False)
    fence: str | None = None
    for i in range(start, len(lines)):
        opened = _FENCE.match(lines[i])
        if opened:
            fence = None if fence == opened.group(1) else fence or opened.group(1)
        m = None if fence or opened else _HEADING.match(lines[i])
        if m and m.group(2):
            out.append(_Section(current.start, i, current.path, current.heading))
            while stack and stack[-1][0] >= len(m.group(1)):
                stack.pop()
            stack.append((len(m.group(1)), m.group(2).strip()))
            current = _Section(i, len(lines), tuple(t for _, t in stack), True)
    out.append(current)
    return out


def _blank(lines: list[str], start: int, end: int) -> bool:
    return all(not line.strip() for line in lines[start:end])


def _keep(lines: list[str], sections: list[_Section], k: int) -> bool:
    """Drop empty preambles, and empty headings whose children carry their title anyway."""
    sec = sections[k]
    if not _blank(lines, sec.start + sec.heading, sec.end):
        return True
    if not sec.heading:
        return False
    after = sections[k + 1] if k + 1 < len(sections) else None
    return not (after and after.path[: len(sec.path)] == sec.path and after.path != sec.path)


def _paragraphs(lines: list[str], start: int, end: int) -> Iterator[tuple[int, int]]:
    """Runs of non-blank lines as (first, last) indexes; over-long runs come line by line."""
    i = start
    while i < end:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        while j + 1 < end and lines[j + 1].strip():
            j += 1
        if _chars(lines, i, j) > CHUNK_CHARS:
            yield from ((k, k) for k in range(i, j + 1))
        else:
            yield i, j
        i = j + 1


def _chars(lines: list[str], first: int, last: int) -> int:
    return sum(len(line) + 1 for line in lines[first : last + 1])


def _pieces(lines: list[str], sec: _Section) -> list[tuple[int, int]]:
    """A section as (first, last) line ranges of at most ~CHUNK_CHARS characters each."""
    pieces: list[tuple[int, int]] = []
    for first, last in _paragraphs(lines, sec.start, sec.end):
        if pieces and _chars(lines, pieces[-1][0], last) <= CHUNK_CHARS:
            pieces[-1] = (pieces[-1][0], last)
        else:
            pieces.append((first, last))
    return pieces


def _title(parts: list[str]) -> str:
    seen: set[str] = set()
    kept = []
    for part in parts:
        key = part.casefold()
        if part and key not in seen:
            seen.add(key)
            kept.append(part)
    return TITLE_SEP.join(kept)


def chunk_markdown(text: str, stem: str) -> tuple[list[Chunk], str | None]:
    """A document's chunks (1-based inclusive lines) and a frontmatter warning, if any."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    meta, body_start, warning = split_frontmatter(lines)
    name = str(meta["name"]).strip() if meta.get("name") is not None else ""
    sections = _sections(lines, body_start)
    first_h1 = next((s.path[0] for s in sections if s.heading and len(s.path) == 1), "")
    base = [name, re.sub(r"[-_]+", " ", stem).strip(), first_h1]
    chunks = []
    for k, sec in enumerate(sections):
        if not _keep(lines, sections, k):
            continue
        for first, last in _pieces(lines, sec):
            skip_heading = sec.heading and first == sec.start
            body = "\n".join(lines[first + skip_heading : last + 1]).strip("\n")
            chunks.append(Chunk(first + 1, last + 1, _title([*base, *sec.path]), body))
    if not chunks and name:
        chunks.append(Chunk(1, max(body_start, 1), _title(base), ""))
    return chunks, warning


# ---------------------------------------------------------------- queries (pure)


def quote_terms(query: str) -> list[str]:
    """Each whitespace-separated word as an FTS5 string; words without letters are dropped, and
    words past the first `MAX_TERMS` are ignored (a pasted paragraph stays a fast query)."""
    words = [word for word in query.split() if _WORD.search(word)][:MAX_TERMS]
    return ['"' + word.replace('"', '""') + '"' for word in words]


def _coverage_score(n: int) -> str:
    """BM25 times the squared share of the n query words a chunk holds (for the OR fallback)."""
    held = " + ".join(
        f"(rowid IN (SELECT rowid FROM search_chunks WHERE search_chunks MATCH :t{i}))"
        for i in range(n)
    )
    return f"{_RANK} * (({held}) * 1.0 / {n}) * (({held}) * 1.0 / {n})"


def _snippet(title: str, body: str) -> str:
    """The body around its matches; a match in the title only shows the title, then the body."""
    text = body if _OPEN in body or not title else f"{title}: {body}"
    flat = " ".join(text.split())
    if len(flat) > SNIPPET_CHARS:
        flat = flat[: SNIPPET_CHARS - 1].rstrip() + "…"
    if flat.count(_OPEN) > flat.count(_CLOSE):
        flat += _CLOSE
    return flat.replace(_OPEN, "[").replace(_CLOSE, "]")


# ---------------------------------------------------------------- the workspace side


@dataclass(frozen=True)
class _Doc:
    """A file read and parsed, ready to store; `chunks` is None when the content is unchanged."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    chunks: tuple[Chunk, ...] | None
    skipped: str | None = None
    warning: str | None = None


def scan_markdown(root: Path) -> tuple[dict[str, os.stat_result], list[tuple[str, str]]]:
    """Every indexable markdown file with its stat, and the folders that could not be read."""
    found: dict[str, os.stat_result] = {}
    problems: list[tuple[str, str]] = []
    stack = [("", str(root))]
    while stack:
        rel_dir, full = stack.pop()
        try:
            entries = list(os.scandir(full))
        except OSError as e:
            problems.append((rel_dir or ".", f"folder cannot be read: {e.strerror}"))
            continue
        for entry in entries:  # follow_symlinks=False: a symlink is neither a dir nor a file
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if name[0] != "." and rel_dir + name != TRASH:
                    stack.append((rel_dir + name + "/", entry.path))
            elif name.lower().endswith(".md") and entry.is_file(follow_symlinks=False):
                found[rel_dir + name] = entry.stat(follow_symlinks=False)
    return found, problems


def _read(root: Path, rel: str, st: os.stat_result, known_sha: str | None) -> _Doc:
    """Read one file whose stat changed; the same bytes give a stat-only refresh (chunks=None)."""
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
    chunks, warning = chunk_markdown(text, Path(rel).stem)
    if bad is not None:
        note = f"not valid UTF-8 at byte {bad}; indexed with U+FFFD in its place"
        warning = f"{warning}; {note}" if warning else note
    return _Doc(rel, st.st_size, st.st_mtime_ns, sha, tuple(chunks), warning=warning)


class SearchIndex:
    """The FTS5 index of one workspace, kept in its state database."""

    def __init__(self, ws: Workspace, db: StateDB | None = None) -> None:
        self.ws = ws
        self.root = ws.root
        self._owns_db = db is None
        self.db = db if db is not None else open_state(ws)

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

    def update(self) -> IndexStats:
        """Re-index changed files and drop deleted ones; a no-change update writes nothing."""
        return self._sync(full=False)

    def rebuild(self) -> IndexStats:
        """Drop everything and index from scratch, in one transaction."""
        return self._sync(full=True)

    def _sync(self, *, full: bool) -> IndexStats:
        disk, problems = scan_markdown(self.root)
        seen = {} if full else self._seen()
        changed = [rel for rel, st in disk.items() if seen.get(rel) != (st.st_size, st.st_mtime_ns)]
        docs = [
            _read(self.root, rel, disk[rel], None if full else self._sha(rel))
            for rel in sorted(changed)
        ]
        gone = sorted(seen.keys() - disk.keys())
        if full or docs or gone:
            self._write(docs, gone, full=full)
        indexed = sum(1 for d in docs if d.chunks is not None and d.skipped is None)
        return self._stats(indexed, len(gone), len(disk), problems)

    def _seen(self) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of every known file: the cheap check before any hashing."""
        rows = self.db.conn.execute("SELECT path, size, mtime_ns FROM search_files")
        return {path: (size, mtime_ns) for path, size, mtime_ns in rows}

    def _sha(self, path: str) -> str | None:
        row = self.db.conn.execute("SELECT sha256 FROM search_files WHERE path = ?", (path,))
        return (row.fetchone() or (None,))[0]

    def _write(self, docs: list[_Doc], gone: list[str], *, full: bool) -> None:
        with self.db.transaction() as conn:
            if full:
                conn.execute("DELETE FROM search_chunks")
                conn.execute("DELETE FROM search_files")
            for path in gone:
                _drop(conn, path)
            free = {False: _next_rowid(conn, 0), True: _next_rowid(conn, ARCHIVE_ROWIDS)}
            for doc in docs:
                archived = doc.path.startswith(ARCHIVE)
                free[archived] = _store(conn, doc, free[archived])
            if full:
                conn.execute("INSERT INTO search_chunks(search_chunks) VALUES ('optimize')")

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
        limit: int = 10,
        *,
        raw: bool = False,
        path_prefix: str | None = None,
        include_archive: bool = False,
        refresh: bool = True,
    ) -> list[Hit]:
        """Best chunks first. A `path_prefix` under archive/ implies `include_archive`."""
        if not query.strip():
            raise SearchQueryError("the search query is empty; give one or more words to find.")
        if limit < 1:
            raise SearchQueryError(f"limit must be at least 1, not {limit}.")
        if refresh:
            self.update()
        prefix = (path_prefix or "").removeprefix("./").lstrip("/")
        archive = include_archive or prefix.startswith(ARCHIVE.rstrip("/"))
        if raw:
            return self._raw(query, limit, prefix, archive)
        terms = quote_terms(query)
        if not terms:
            return []
        hits = self._query(" ".join(terms), _RANK, {}, limit, prefix, archive)
        if hits or len(terms) == 1:
            return hits
        params = {f"t{i}": term for i, term in enumerate(terms)}
        score = _coverage_score(len(terms))
        return self._query(" OR ".join(terms), score, params, limit, prefix, archive)

    def _raw(self, query: str, limit: int, prefix: str, archive: bool) -> list[Hit]:
        try:
            return self._query(query, _RANK, {}, limit, prefix, archive)
        except sqlite3.OperationalError as e:
            raise SearchQueryError(
                f"Invalid search query {query!r} ({e}); check the FTS5 syntax, "
                "or drop --raw to search plain words."
            ) from None

    def _query(
        self,
        match: str,
        score: str,
        params: dict[str, str],
        limit: int,
        prefix: str,
        archive: bool,
    ) -> list[Hit]:
        filters = "" if archive else f" AND rowid < {ARCHIVE_ROWIDS}"
        if prefix:
            filters += " AND substr(path, 1, :plen) = :prefix"
        sql = (
            f"WITH top AS (SELECT rowid AS id, {score} AS score FROM search_chunks "
            f"WHERE search_chunks MATCH :q{filters} "
            "ORDER BY score DESC, rowid LIMIT :limit) "
            f"SELECT path, start_line, end_line, top.score, {_SNIPPETS} "
            "FROM top CROSS JOIN search_chunks ON search_chunks.rowid = top.id "
            "WHERE search_chunks MATCH :q ORDER BY top.score DESC, top.id"
        )
        args = {**params, "q": match, "limit": limit, "plen": len(prefix), "prefix": prefix}
        rows = self.db.conn.execute(sql, args).fetchall()
        return [Hit(p, int(s), int(e), float(sc), _snippet(t, b)) for p, s, e, sc, t, b in rows]


def _next_rowid(conn: sqlite3.Connection, base: int) -> int:
    """The first free rowid of the partition starting at `base` (live files or archive)."""
    top = base + ARCHIVE_ROWIDS - 1 if base == 0 else (1 << 62)
    row = conn.execute(
        "SELECT rowid FROM search_chunks WHERE rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT 1",
        (base, top),
    ).fetchone()
    return (row[0] if row else base) + 1


def _drop(conn: sqlite3.Connection, path: str) -> None:
    """Remove a file's chunks (a contiguous rowid range) and its row."""
    row = conn.execute(
        "SELECT first_rowid, chunks FROM search_files WHERE path = ?", (path,)
    ).fetchone()
    if row and row[1]:
        conn.execute(
            "DELETE FROM search_chunks WHERE rowid BETWEEN ? AND ?", (row[0], row[0] + row[1] - 1)
        )
    conn.execute("DELETE FROM search_files WHERE path = ?", (path,))


def _store(conn: sqlite3.Connection, doc: _Doc, next_rowid: int) -> int:
    """Write one file's row (and chunks, if its content changed); returns the next free rowid."""
    if doc.chunks is None:
        conn.execute(
            "UPDATE search_files SET size = ?, mtime_ns = ? WHERE path = ?",
            (doc.size, doc.mtime_ns, doc.path),
        )
        return next_rowid
    _drop(conn, doc.path)
    conn.executemany(
        "INSERT INTO search_chunks (rowid, path, start_line, end_line, title, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (next_rowid + i, doc.path, c.start_line, c.end_line, c.title, c.body)
            for i, c in enumerate(doc.chunks)
        ],
    )
    conn.execute(
        "INSERT INTO search_files (path, size, mtime_ns, sha256, first_rowid, chunks, skipped, "
        "warning) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            doc.path,
            doc.size,
            doc.mtime_ns,
            doc.sha256,
            next_rowid,
            len(doc.chunks),
            doc.skipped,
            doc.warning,
        ),
    )
    return next_rowid + len(doc.chunks)
