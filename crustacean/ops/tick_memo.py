"""A no-op `tick` answered from its last identical answer, before anything heavy is imported.

cron runs `crustacean tick` every 15 minutes and nearly always nothing is due. Whether a stage is
due is a pure function of the config, the run records and the clock (`schedule.due_stages`), and
while nothing is due its answer ("not due (next slot X)") stays the same until the earliest of
those next slots. So a plain tick that found nothing due leaves its exact output in state.db with
what it depended on, and the next tick with the same inputs before that slot prints it again
without loading typer, rich, the config schema or croniter.

Anything that differs makes the tick take the ordinary path (which may leave a new answer): the
arguments, the environment, the cwd, the bytes of any config file or of the zone files, the run
records or the state's migrations, a terminal on stdout, the crustacean version, or a clock
outside [the answer's time, the next slot). Only plain ticks are answered: `tick`, `--json`,
`--dry-run`, after `-w/--workspace`. Only stdlib imports at the top: this runs on every tick.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from crustacean import __version__
from crustacean.memo import STATE_DB, WORKSPACE_FILE, before_command, digest, locate

FORMAT = "tick-memo-1"  # bump when what the key covers changes
RAN_STATUSES = ("ok", "skipped", "partial")  # a run that counts as ran (ops/tick.py uses these)
TICK_FLAGS = ("--json", "--dry-run")
ZONE_FILES = ("/etc/localtime", "/etc/timezone")  # the system zone, when workspace.timezone is ""
_LAST_OK_SQL = (
    "SELECT stage, max(started) FROM run_records WHERE dry_run = 0 AND status IN "
    f"({', '.join('?' for _ in RAN_STATUSES)}) GROUP BY stage ORDER BY stage"
)

_quiet: tuple[datetime, datetime] | None = None  # set by ops.tick.tick in this process


def note_quiet(since: datetime, until: datetime) -> None:
    """ops.tick.tick found nothing due at `since`, and its answer holds until `until`."""
    global _quiet
    _quiet = (since, until)


def take_quiet() -> tuple[datetime, datetime] | None:
    """What note_quiet said in this process, once."""
    global _quiet
    quiet, _quiet = _quiet, None
    return quiet


def last_ok_rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(stage, start of its latest real run that counts as ran), the run records' part of a
    tick's decision; ops.tick.last_ok_runs reads the same rows."""
    return [tuple(r) for r in conn.execute(_LAST_OK_SQL, RAN_STATUSES)]


def db_state(conn: sqlite3.Connection) -> str:
    """Everything of state.db a no-op tick's answer depends on: the last ok runs, and the
    migrations (their first is when the workspace started; never-run stages count from it)."""
    migrations = conn.execute("SELECT count(*), min(applied) FROM _migrations").fetchone()
    return json.dumps([last_ok_rows(conn), list(migrations)])


def split_argv(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """(the -w value or None, the tick flags) of a plain tick, else None."""
    found = before_command(argv, "tick")
    if found is None:
        return None
    workspace, i = found
    flags = list(argv[i + 1 :])
    if any(f not in TICK_FLAGS for f in flags) or len(set(flags)) < len(flags):
        return None
    return workspace, flags


@dataclass(frozen=True)
class Snapshot:
    """The inputs of a tick's decision as they were before it ran (see `Probe.snapshot`)."""

    files: tuple[str, ...]
    digest: str
    db_state: str


@dataclass(frozen=True)
class Probe:
    """A plain tick about to run: its workspace and the key of its arguments and environment."""

    root: Path
    key: str

    @property
    def db(self) -> Path:
        return self.root / STATE_DB

    def replay(self, now: datetime) -> str | None:
        """The stored answer, if every input is as it was and `now` is inside its window."""
        if not self.db.is_file():
            return None
        try:
            conn = sqlite3.connect(f"{self.db.as_uri()}?mode=ro", uri=True, timeout=1)
            try:
                row = conn.execute(
                    "SELECT files, digest, db_state, since, until, output FROM tick_memo "
                    "WHERE key = ?",
                    (self.key,),
                ).fetchone()
                if row is None or row[2] != db_state(conn):
                    return None
            finally:
                conn.close()
        except sqlite3.Error:  # no table yet, locked, unreadable: the ordinary path decides
            return None
        files, stored_digest, _, since, until, output = row
        inside = datetime.fromisoformat(since) <= now < datetime.fromisoformat(until)
        if not inside or digest(json.loads(files)) != stored_digest:
            return None
        return str(output)

    def snapshot(self, env: Mapping[str, str]) -> Snapshot | None:
        """The config files and state.db before an ordinary tick (None without a state.db)."""
        from crustacean.config import ORG_ENV, user_config_file

        files = [str(user_config_file(env)), str(self.root / WORKSPACE_FILE), *ZONE_FILES]
        if env.get(ORG_ENV):
            files.insert(0, str(Path(env[ORG_ENV]).expanduser()))
        if not self.db.is_file():
            return None
        try:
            conn = sqlite3.connect(self.db, timeout=1)
            try:
                state = db_state(conn)
            finally:
                conn.close()
        except sqlite3.Error:
            return None
        return Snapshot(tuple(files), digest(files), state)

    def store(self, before: Snapshot | None, output: str, env: Mapping[str, str]) -> bool:
        """Keep `output` as the answer, if the tick found nothing due (ops.tick.tick said so)
        and nothing it read changed while it ran. A cache: failing to write is not an error."""
        quiet = take_quiet()
        if quiet is None or before is None or self.snapshot(env) != before:
            return False
        since, until = quiet
        try:
            conn = sqlite3.connect(self.db, timeout=1, isolation_level=None)
            try:
                with conn:
                    conn.execute("DELETE FROM tick_memo WHERE until <= ?", (since.isoformat(),))
                    conn.execute(
                        "INSERT OR REPLACE INTO tick_memo "
                        "(key, files, digest, db_state, since, until, output) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            self.key,
                            json.dumps(before.files),
                            before.digest,
                            before.db_state,
                            since.isoformat(),
                            until.isoformat(),
                            output,
                        ),
                    )
            finally:
                conn.close()
        except sqlite3.Error:
            return False
        return True


def probe(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdout_is_tty: bool
) -> Probe | None:
    """A Probe when this is a plain tick whose output can be kept: not to a terminal (where
    rich may colour it), in a workspace found the ordinary way."""
    split = split_argv(argv)
    if split is None or stdout_is_tty:
        return None
    found = locate(split[0], env, cwd)
    if found is None:
        return None
    root = Path(found)
    key = json.dumps(
        [FORMAT, __version__, list(argv), str(cwd), str(root), sorted(env.items())]
    ).encode()
    return Probe(root, hashlib.sha256(key).hexdigest())
