"""The operational SQLite database, `<workspace>/.crustacean/state.db`.

No memory lives here, but not all of it is rebuildable: besides the search index (rebuilt on
demand) and recall counts, it holds collect's cursors and collected ids, curate's curated ids
and the run history; losing those makes collect and curate redo work. The schema grows only
through `MIGRATIONS`, a numbered registry applied in order when the database is opened and
recorded in `_migrations`.
To change the schema, append a new `("mNNN_name", sql)` entry; never edit an applied one.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from crustacean.errors import CrustaceanError
from crustacean.workspace import Workspace

if TYPE_CHECKING:
    from crustacean.tiers import Recalls, StoredTier

DB_NAME = "state.db"
BUSY_TIMEOUT_MS = 10_000
RECALL_KINDS = ("context", "mcp", "search")
# Fixed width, so stored times sort as text in SQL (max(), ORDER BY) as they do as datetimes.
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f+00:00"

MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_recalls",
        """
        CREATE TABLE recalls (
            path TEXT PRIMARY KEY,
            uses INTEGER NOT NULL DEFAULT 0,
            last_recalled TEXT,
            last_how TEXT
        );
        """,
    ),
    (
        "m002_search",
        """
        CREATE TABLE search_files (
            path TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            first_rowid INTEGER NOT NULL DEFAULT 0,
            chunks INTEGER NOT NULL DEFAULT 0,
            skipped TEXT,
            warning TEXT
        );
        CREATE VIRTUAL TABLE search_chunks USING fts5(
            path UNINDEXED, start_line UNINDEXED, end_line UNINDEXED, title, body,
            tokenize='porter unicode61'
        );
        """,
    ),
    (
        "m003_runs",
        """
        CREATE TABLE run_records (
            id TEXT PRIMARY KEY,
            stage TEXT NOT NULL,
            started TEXT NOT NULL,
            ended TEXT,
            status TEXT NOT NULL DEFAULT 'running',
            dry_run INTEGER NOT NULL DEFAULT 0,
            model TEXT,
            turns INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            files_changed TEXT NOT NULL DEFAULT '[]',
            versions TEXT NOT NULL DEFAULT '[]',
            proposals TEXT NOT NULL DEFAULT '[]',
            error TEXT,
            summary TEXT
        );
        CREATE INDEX run_records_started ON run_records (started);
        CREATE INDEX run_records_stage_started ON run_records (stage, started);
        CREATE TABLE run_tool_calls (
            run_id TEXT NOT NULL REFERENCES run_records (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            input_json TEXT NOT NULL,
            is_error INTEGER NOT NULL DEFAULT 0,
            result_summary TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (run_id, seq)
        );
        """,
    ),
    (
        "m004_collect",
        """
        CREATE TABLE collect_cursors (
            path TEXT PRIMARY KEY,
            device INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            offset INTEGER NOT NULL,
            size INTEGER NOT NULL,
            head_hash TEXT NOT NULL,
            lines INTEGER NOT NULL DEFAULT 0,
            mtime_ns INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE collect_ids (
            id TEXT PRIMARY KEY,
            collected TEXT NOT NULL
        );
        CREATE INDEX collect_ids_collected ON collect_ids (collected);
        CREATE TABLE collect_batches (
            run_id TEXT PRIMARY KEY,
            created TEXT NOT NULL,
            payload TEXT NOT NULL
        );
        """,
    ),
    (
        "m005_curate",
        """
        CREATE TABLE curated_entries (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            destination TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            curated TEXT NOT NULL
        );
        """,
    ),
    (
        "m006_collect_sent_batches",
        """
        CREATE TABLE collect_sent_batches (
            batch_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            created TEXT NOT NULL,
            payload TEXT NOT NULL
        );
        """,
    ),
    (
        # Line-level search: one FTS5 row per line (its file name and heading path as title),
        # a trigram index of the lines holding CJK text, each daily log's date, and the
        # vectors of the optional semantic extra. Emptying search_files makes the next update
        # index every file again.
        "m007_search_lines",
        """
        DROP TABLE search_chunks;
        DELETE FROM search_files;
        ALTER TABLE search_files RENAME COLUMN chunks TO lines;
        ALTER TABLE search_files ADD COLUMN day TEXT;
        CREATE INDEX search_files_day ON search_files (day) WHERE day IS NOT NULL;
        CREATE VIRTUAL TABLE search_lines USING fts5(
            path UNINDEXED, line UNINDEXED, title, body, tokenize='porter unicode61'
        );
        CREATE VIRTUAL TABLE search_cjk USING fts5(body, tokenize='trigram');
        ALTER TABLE search_files ADD COLUMN vectors INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE search_vectors (rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
        CREATE TABLE search_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        """,
    ),
    (
        "m008_tick_memo",
        """
        CREATE TABLE tick_memo (
            key TEXT PRIMARY KEY,
            files TEXT NOT NULL,
            digest TEXT NOT NULL,
            db_state TEXT NOT NULL,
            since TEXT NOT NULL,
            until TEXT NOT NULL,
            output TEXT NOT NULL
        );
        """,
    ),
    (
        "m009_compile_skip",
        """
        CREATE TABLE compile_skip (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            fingerprint TEXT NOT NULL,
            taken_ns INTEGER NOT NULL,
            since TEXT NOT NULL,
            until TEXT NOT NULL
        );
        """,
    ),
    (
        "m010_memory_index",
        """
        CREATE TABLE memory_index (
            path TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            racy INTEGER NOT NULL,
            tier TEXT NOT NULL,
            recorded TEXT,
            body INTEGER NOT NULL,
            problem TEXT,
            loaded INTEGER NOT NULL
        );
        """,
    ),
    (
        # What compile's pass read of each file, keyed by its stat (stages/compile_inputs.py);
        # memory is NULL until read, 0 for a file that is no usable memory, 1 for one.
        "m011_compile_files",
        """
        CREATE TABLE compile_files (
            path TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            ctime_ns INTEGER NOT NULL,
            ino INTEGER NOT NULL,
            racy INTEGER NOT NULL,
            sha256 BLOB,
            empty INTEGER NOT NULL DEFAULT 0,
            memory INTEGER,
            tier TEXT,
            manual INTEGER,
            created TEXT,
            tier_set TEXT
        );
        CREATE TABLE compile_meta (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            format TEXT NOT NULL
        );
        """,
    ),
    (
        # What a shell search's answer depends on beyond the index (cli/search_fast.py): the
        # config files' bytes and the time zone they gave, per arguments, cwd and environment.
        "m012_search_memo",
        """
        CREATE TABLE search_memo (
            key TEXT PRIMARY KEY,
            root TEXT NOT NULL,
            files TEXT NOT NULL,
            digest TEXT NOT NULL,
            migrations INTEGER NOT NULL,
            timezone TEXT NOT NULL
        );
        """,
    ),
    (
        # The files a search names on stderr (search_read.noted), found without reading every
        # row of search_files: two scans of it were ~4 ms of each shell search on 10,000 files.
        "m013_search_noted",
        """
        CREATE INDEX search_files_skipped ON search_files (path) WHERE skipped IS NOT NULL;
        CREATE INDEX search_files_warning ON search_files (path) WHERE warning IS NOT NULL;
        """,
    ),
    (
        # What a run set aside instead of stopping (a transcript line it could not read, an
        # item the model cited wrongly twice), with why and its text, so nothing is dropped
        # unseen and the rest of the run goes on.
        "m014_run_set_aside",
        """
        CREATE TABLE run_set_aside (
            run_id TEXT NOT NULL REFERENCES run_records (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (run_id, seq)
        );
        """,
    ),
    (
        # The loss guard's cap per run (store/plan.py): what each run has lost of each file so
        # far, so a run whose calls come through several Store objects (an MCP server, a
        # restarted stage) cannot lose more than one call may.
        "m015_loss_tally",
        """
        CREATE TABLE loss_tally (
            run_id TEXT NOT NULL,
            path TEXT NOT NULL,
            base INTEGER NOT NULL,
            lost INTEGER NOT NULL,
            PRIMARY KEY (run_id, path)
        );
        """,
    ),
    (
        # The tick and search memos (m008, m012) went with the start-up shortcuts that read
        # them: a no-op tick decides early and a search runs through the app.
        "m016_drop_memos",
        """
        DROP TABLE IF EXISTS tick_memo;
        DROP TABLE IF EXISTS search_memo;
        """,
    ),
    (
        # Tiers outside the files (issue 34): the lifecycle's and `tier set`'s, never written
        # into a file a person wrote. The caches that held a tier read from the file go.
        "m017_memory_tiers",
        """
        CREATE TABLE memory_tiers (
            path TEXT PRIMARY KEY,
            tier TEXT NOT NULL,
            manual INTEGER NOT NULL DEFAULT 0,
            tier_set TEXT,
            set_by TEXT NOT NULL,
            updated TEXT NOT NULL
        );
        DELETE FROM memory_index;
        DELETE FROM compile_files;
        DELETE FROM compile_skip;
        """,
    ),
]


HOLDS = (
    "it holds no memory, but a fresh one forgets collect's cursors and collected ids, "
    "curate's curated ids and the run history, so collect and curate may redo work"
)

_LEDGER_SQL = (
    "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)"
)


class StateDBError(CrustaceanError):
    """state.db cannot be used as it is (written by a newer crustacean, or not a database)."""


def to_db_time(moment: datetime) -> str:
    """An aware datetime as the fixed-width ISO UTC text stored in the database."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("times given to the state database must be timezone-aware")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def from_db_time(text: str | None) -> datetime | None:
    """Stored text back to an aware UTC datetime."""
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)


def split_statements(sql: str) -> list[str]:
    """Split a migration script into statements (executescript would commit mid-transaction)."""
    out: list[str] = []
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                out.append(pending.strip())
            pending = ""
    return out


class StateDB:
    """One connection to state.db, migrated to the newest schema on open."""

    def __init__(self, state_dir: Path, *, any_thread: bool = False) -> None:
        """`any_thread`: the caller serializes use of one connection across threads."""
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / DB_NAME
        if self.path.exists() and not self.path.is_file():
            raise StateDBError(
                f"{self.path} is a folder, not the state database. Move it aside and run the "
                f"command again (a new database is made); {HOLDS}."
            )
        if _emptied(self.path):
            raise StateDBError(
                f"{self.path} is empty (0 bytes), so what it held is gone (a full disk, or a "
                "tool that truncated it?). Restore it from a backup, or move it aside (`mv "
                f"{self.path} {self.path}.empty`) and run the command again; {HOLDS}."
            )
        if not self.path.exists():
            self._create(any_thread)
        self.conn = self._open(self.path, any_thread)

    def _open(self, path: Path, any_thread: bool) -> sqlite3.Connection:
        """A connection, configured and migrated; a clear error when it cannot be used."""
        try:
            self.conn = sqlite3.connect(
                path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=not any_thread,
            )
        except sqlite3.Error as e:
            raise StateDBError(f"{self.path} cannot be opened ({e}); {HOLDS}.") from None
        try:
            self._configure()
            self._migrate()
        except sqlite3.DatabaseError as e:
            self.conn.close()
            raise StateDBError(
                f"{self.path} is unusable ({e}). Move it aside and run the command again; {HOLDS}."
            ) from None
        except BaseException:
            self.conn.close()
            raise
        return self.conn

    def _create(self, any_thread: bool) -> None:
        """A new database is made whole beside its place and linked in, so a kill never leaves
        an empty state.db (which `_emptied` must take for a lost one); a racing opener's
        database, linked first, is kept."""
        # one name per opener: threads of one process (the MCP server's tool calls) race too
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(6)}.new")
        self._open(tmp, any_thread).close()
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not self.path.exists():
                os.replace(tmp, self.path)
        tmp.unlink(missing_ok=True)

    def _configure(self) -> None:
        """WAL lets readers run beside a writer; busy_timeout makes writers wait, not fail."""
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        for attempt in range(50):  # switching a new file to WAL can report "locked" at once,
            try:  # without waiting on the busy handler, when several processes open it together
                self.conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == 49:
                    raise
                time.sleep(0.05)
        self.conn.execute("PRAGMA synchronous = NORMAL")

    def _migrate(self) -> None:
        """Apply the pending migrations in one write transaction, so racing openers serialize."""
        with self.transaction():
            self.conn.execute(_LEDGER_SQL)
            applied = {row[0] for row in self.conn.execute("SELECT name FROM _migrations")}
            self._refuse_unknown(applied)
            for name, sql in MIGRATIONS:
                if name not in applied:
                    self._apply(name, sql)

    def _refuse_unknown(self, applied: set[str]) -> None:
        """A migration we do not know means a newer crustacean shaped this database."""
        unknown = sorted(applied - {name for name, _ in MIGRATIONS})
        if unknown:
            raise StateDBError(
                f"{self.path} was written by a newer crustacean (unknown migration "
                f"{', '.join(unknown)}). Upgrade crustacean, or move the file aside to start "
                f"a fresh one; {HOLDS}."
            )

    def _apply(self, name: str, sql: str) -> None:
        for statement in split_statements(sql):
            self.conn.execute(statement)
        self.conn.execute(
            "INSERT INTO _migrations (name, applied) VALUES (?, ?)",
            (name, to_db_time(datetime.now(UTC))),
        )

    def applied_migrations(self) -> list[str]:
        """Names of the migrations this database has, in the order they were applied."""
        return [r[0] for r in self.conn.execute("SELECT name FROM _migrations ORDER BY rowid")]

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error): takes the write lock up front."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> StateDB:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ recall ledger

    def record_recalls(self, paths: Iterable[str], now: datetime, how: str) -> None:
        """A recall of each path: last_recalled = now, and uses + 1 unless the path was recalled
        already that day (UTC), so a use is a day the memory was needed, not a load: a
        conversation calling get_context 13 times in a minute counts once."""
        if how not in RECALL_KINDS:
            raise ValueError(f"unknown recall kind {how!r}; expected one of {RECALL_KINDS}")
        stamp = to_db_time(now)
        rows = [(path, stamp, how) for path in dict.fromkeys(paths)]
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO recalls (path, uses, last_recalled, last_how) VALUES (?, 1, ?, ?) "
                "ON CONFLICT(path) DO UPDATE SET uses = uses + (substr(coalesce(last_recalled, "
                "''), 1, 10) != substr(excluded.last_recalled, 1, 10)), "
                "last_recalled = max(coalesce(last_recalled, ''), excluded.last_recalled), "
                "last_how = excluded.last_how",
                rows,
            )

    def recalls_of(self, path: str) -> Recalls:
        """The recall record of one path; never recalled gives `Recalls()`."""
        from crustacean.tiers import Recalls  # lazy: a no-op tick opens state.db, never tiers

        row = self.conn.execute(
            "SELECT uses, last_recalled FROM recalls WHERE path = ?", (path,)
        ).fetchone()
        return Recalls(row[0], from_db_time(row[1])) if row else Recalls()

    def recalls(self) -> dict[str, Recalls]:
        """Every recorded path's usage."""
        from crustacean.tiers import Recalls  # lazy: as in recalls_of

        rows = self.conn.execute("SELECT path, uses, last_recalled FROM recalls ORDER BY path")
        return {path: Recalls(uses, from_db_time(last)) for path, uses, last in rows}

    # ------------------------------------------------------------ loss tally

    def loss_of(self, run_id: str, path: str) -> tuple[int, int] | None:
        """(lines of the file when the run first changed it, lines the run lost of it)."""
        row = self.conn.execute(
            "SELECT base, lost FROM loss_tally WHERE run_id = ? AND path = ?", (run_id, path)
        ).fetchone()
        return (row[0], row[1]) if row else None

    def record_loss(self, run_id: str, tally: dict[str, tuple[int, int]]) -> None:
        """The run's new tally of each file it lost lines of (replacing the old one)."""
        rows = [(run_id, path, base, lost) for path, (base, lost) in tally.items()]
        with self.transaction():
            self.conn.executemany(
                "INSERT INTO loss_tally (run_id, path, base, lost) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(run_id, path) DO UPDATE SET lost = excluded.lost",
                rows,
            )

    # ------------------------------------------------------------ tiers outside the files

    def stored_tiers(self) -> dict[str, StoredTier]:
        """Every tier kept here (the lifecycle's and `tier set`'s), by path."""
        from crustacean.tiers import StoredTier  # lazy: as in recalls_of

        rows = self.conn.execute("SELECT path, tier, manual, tier_set FROM memory_tiers")
        return {p: StoredTier(t, bool(m), from_db_time(s)) for p, t, m, s in rows}

    def set_tiers(self, tiers: Mapping[str, StoredTier], by: str, now: datetime) -> None:
        """Keep each path's tier (replacing what was kept), in one transaction; the context's
        index forgets those paths, since a tier is no longer a file's change."""
        stamp = to_db_time(now)
        rows = [
            (p, t.tier, int(t.manual), to_db_time(t.tier_set) if t.tier_set else None, by, stamp)
            for p, t in tiers.items()
        ]
        with self.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO memory_tiers "
                "(path, tier, manual, tier_set, set_by, updated) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany("DELETE FROM memory_index WHERE path = ?", [(p,) for p in tiers])


WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")  # a write-ahead log's first bytes


def _emptied(path: Path) -> bool:
    """A state.db of 0 bytes with no write-ahead log to replay: a database that was made
    (they are made whole, see `StateDB._create`) and then lost its bytes."""
    try:
        if not path.is_file() or path.stat().st_size:
            return False
    except OSError:
        return False
    try:
        with path.with_name(path.name + "-wal").open("rb") as wal:
            return wal.read(4) not in WAL_MAGIC  # SQLite ignores a log without it
    except OSError:
        return True


def open_state(ws: Workspace, *, any_thread: bool = False) -> StateDB:
    """The workspace's state database, created and migrated as needed."""
    return StateDB(ws.state_dir, any_thread=any_thread)
