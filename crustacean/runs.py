"""Run mechanics: the workspace run lock, run records in state.db and one log file per run.

A run (one stage, one model conversation) holds `.crustacean/run.lock` for its whole life, so
two runs never work the same workspace at once. The lock is an OS file lock (flock): the kernel
drops it when its process dies, so a killed run never blocks the next one. It is separate from
the store's short write lock, so MCP writes still go through while a run works.

Everything stored about a run (error text, tool inputs and results, log lines) is redacted with
`store.secrets.redact` first: state.db and the logs are read by people and by calibrate.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from crustacean.clock import Clock, wall_clock
from crustacean.config import STAGES
from crustacean.errors import EXIT_USAGE, CrustaceanError, LockedError, UsageError
from crustacean.secrets import redact
from crustacean.state import StateDB, from_db_time, open_state, to_db_time
from crustacean.usage import KINDS, Usage
from crustacean.workspace import Workspace

if TYPE_CHECKING:
    from filelock import FileLock

FINAL_STATUSES = ("ok", "partial", "failed", "skipped", "interrupted")
STATUSES = ("running", *FINAL_STATUSES)
LOCK_FILE = "run.lock"
LOCK_INFO_FILE = "run.lock.json"
INPUT_JSON_LIMIT = 2048
RESULT_LIMIT = 300
ERROR_LIMIT = 500
INTERRUPTED = "interrupted (the process was killed)"
CTRL_C = "interrupted by the user (Ctrl-C)"
NO_STATUS = "the run ended without recording a status"

_LISTS = ("files_changed", "versions", "proposals")  # JSON lists in their columns


class RunNotFoundError(CrustaceanError):
    """A run id names no recorded run."""

    exit_code = EXIT_USAGE


# ---------------------------------------------------------------------------- records


@dataclass
class ToolCallRecord:
    """One tool call as stored: input redacted and shrunk to ~2 KB, result to one short line."""

    seq: int
    name: str
    input: dict[str, Any]
    is_error: bool
    result: str


@dataclass
class SetAside:
    """One thing a run set aside and went on without: a transcript line, a message or a model's
    item (`kind`), why, and its redacted text (clipped), so a person can still act on it."""

    kind: str
    reason: str
    text: str = ""


@dataclass
class RunRecord:
    """What one run did and cost; a row of `run_records` plus its tool calls."""

    id: str
    stage: str
    started: datetime
    ended: datetime | None = None
    status: str = "running"
    dry_run: bool = False
    model: str | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    files_changed: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    proposals: list[int] = field(default_factory=list)
    error: str | None = None
    summary: str | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)

    @property
    def duration(self) -> timedelta | None:
        return None if self.ended is None else self.ended - self.started

    def to_json(self, *, tool_calls: bool = True) -> dict[str, Any]:
        """Plain data for `--json`; `tool_calls=False` for listings, which do not load them."""
        out = asdict(self)
        ended = self.ended.isoformat() if self.ended else None
        out |= {"started": self.started.isoformat(), "ended": ended}
        if not tool_calls:
            del out["tool_calls"], out["set_aside"]
        return out


# The run_records columns: the record's fields, its usage as one column per token kind.
_SCALARS = tuple(
    column
    for f in fields(RunRecord)
    if f.name not in ("tool_calls", "set_aside")
    for column in (KINDS if f.name == "usage" else (f.name,))
)
_SELECT = f"SELECT {', '.join(_SCALARS)} FROM run_records"


def new_run_id(moment: datetime) -> str:
    """`20261130T033000-ab12cd`: sorts by start time (UTC), random tail keeps it unique."""
    return f"{moment.astimezone(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


def log_path(ws: Workspace, run_id: str) -> Path:
    """Where a run's log file lives."""
    return ws.logs_dir / f"{run_id}.log"


# ---------------------------------------------------------------------------- text hygiene


def one_line(text: str, limit: int) -> str:
    """Whitespace collapsed to single spaces, cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


REASON_LIMIT = 60


def short_reason(error: str, limit: int = REASON_LIMIT) -> str:
    """A run's failure as a table cell shows it: the first line, cut at a word within `limit`
    characters (the whole text stays in the record, for `runs show` and the run's page)."""
    first = (error.strip().splitlines() or [""])[0].strip()
    if len(first) <= limit:
        return first
    cut = first[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "…"


def error_line(exc: BaseException) -> str:
    """`Type: message` on one redacted line; a traceback never reaches the record."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return one_line(redact(text), ERROR_LIMIT)


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """Apply `fn` to every string inside JSON-like data (anything else odd becomes a string)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {str(k): _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(v, fn) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return fn(str(value))


def _shorten(text: str, cap: int) -> str:
    return text if len(text) <= cap else f"{text[:cap]}… [{len(text) - cap} more chars]"


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def clip_input(data: Any) -> dict[str, Any]:
    """Tool input as stored: redacted, long strings shrunk until the JSON is about 2 KB."""
    clean = _map_strings(data if isinstance(data, dict) else {"_input": data}, redact)
    for cap in (None, 1024, 256, 64):
        clipped: dict[str, Any] = (  # a dict in gives a dict out
            clean if cap is None else _map_strings(clean, partial(_shorten, cap=cap))
        )
        if len(_dumps(clipped)) <= INPUT_JSON_LIMIT:
            return clipped
    return {"_truncated": _shorten(_dumps(clean), INPUT_JSON_LIMIT - 64)}


# ---------------------------------------------------------------------------- lock


class RunLock:
    """The workspace run lock: taken at once or refused, with who holds it and since when."""

    def __init__(
        self,
        ws: Workspace,
        stage: str,
        run_id: str,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.stage = stage
        self.run_id = run_id
        self.path = ws.state_dir / LOCK_FILE
        self.info_path = ws.state_dir / LOCK_INFO_FILE
        self._state_dir = ws.state_dir
        self.clock = clock or wall_clock
        self._lock: FileLock | None = None

    def __enter__(self) -> RunLock:
        from filelock import FileLock  # lazy: only a run takes the lock; `runs`, `status` read
        from filelock import Timeout as LockTimeout

        self._state_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path), timeout=0, thread_local=False)
        try:
            lock.acquire()
        except LockTimeout:
            raise LockedError(
                f"another crustacean run holds the workspace ({self._holder()}); "
                "wait for it to finish, or check `crustacean runs`."
            ) from None
        self._lock = lock
        try:
            self._write_info()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_: object) -> None:
        """Remove the info file before releasing, so it never erases the next holder's."""
        if self._lock is None:
            return
        self.info_path.unlink(missing_ok=True)
        self._lock.release()
        self._lock = None

    def _write_info(self) -> None:
        info = {
            "pid": os.getpid(),
            "stage": self.stage,
            "run_id": self.run_id,
            "since": self.clock().astimezone(UTC).isoformat(),
        }
        self.info_path.write_text(json.dumps(info), "utf-8")

    def _holder(self) -> str:
        """Who holds the lock, from the info file; it may be missing, half written or stale."""
        try:
            info = json.loads(self.info_path.read_text("utf-8"))
            pid, stage = int(info["pid"]), str(info["stage"])
            since = datetime.fromisoformat(info["since"]).astimezone(UTC)
        except (OSError, ValueError, KeyError, TypeError):
            return "pid unknown"
        return f"pid {pid}, stage {stage}, since {since:%Y-%m-%d %H:%M} UTC"


# ---------------------------------------------------------------------------- recorder


class RunRecorder:
    """Owns one run: its record, its log file, its lock.

    Use it as a context manager. Every event is saved as it happens, so a run killed midway
    still shows what it spent; the next run marks it failed as interrupted.
    """

    def __init__(
        self,
        ws: Workspace,
        stage: str,
        *,
        dry_run: bool = False,
        clock: Clock | None = None,
        model: str | None = None,
        repair: Callable[[], tuple[bool, list[str]]] | None = None,
    ) -> None:
        self.ws = ws
        self._repair_fn = repair
        self._repaired: tuple[bool, int] = (False, 0)  # interrupted write undone, stray temps
        self.clock = clock or wall_clock
        started = self.clock()
        self.record = RunRecord(
            id=new_run_id(started), stage=stage, started=started, dry_run=dry_run, model=model
        )
        self.log_path = log_path(ws, self.record.id)
        self._lock = RunLock(ws, stage, self.record.id, clock=self.clock)
        self._db: StateDB | None = None

    def __enter__(self) -> RunRecorder:
        self._lock.__enter__()
        try:
            # A killed run may have left a half-applied write or temp files: clean up first, so
            # this run reads only whole versions. The stage hands in its store's `repair` (a run
            # record is ground floor; the store is not).
            if self._repair_fn is not None:
                undone, stray = self._repair_fn()
                self._repaired = (undone, len(stray))
            self._db = open_state(self.ws)
            self.record.started = self.clock()
            stale = self._insert()
            self._log_start(stale)
        except BaseException:
            self._release()
            raise
        return self

    def _log_start(self, stale: int) -> None:
        self.log(f"run {self.record.id}: stage {self.record.stage}, pid {os.getpid()}")
        undone, stray = self._repaired
        if undone or stray:
            self.log(
                f"repaired the workspace first: interrupted write undone={undone}, "
                f"{stray} stray temp file(s) removed"
            )
        if self.record.dry_run:
            self.log("dry run: nothing will be written, versioned or advanced")
        if stale:
            self.log(f"marked {stale} interrupted run(s) as failed")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """An escaping exception fails the run (one redacted line); it is never swallowed. A
        Ctrl-C is recorded as interrupted, not failed, and says what the run had written."""
        try:
            if exc is not None and self.record.files_changed:
                wrote = self.record.files_changed
                more = f" and {len(wrote) - 3} more" if wrote[3:] else ""
                exc.add_note(
                    f"the {self.record.stage} run had written {', '.join(wrote[:3])}{more}."
                )
            if isinstance(exc, KeyboardInterrupt):
                self.finish("interrupted", error=CTRL_C)
            elif exc is not None:
                self.finish("failed", error=error_line(exc))
            elif self.record.status == "running":
                self.finish("failed", error=NO_STATUS)
        except (OSError, sqlite3.Error):
            if exc is None:
                raise
            # a full disk may refuse the record too: the run stays `running` and the next run
            # marks it interrupted; the error that stopped this one is what the user sees
        finally:
            self._release()

    def _release(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._lock.__exit__(None, None, None)

    def _insert(self) -> int:
        """Mark runs left 'running' as interrupted (we hold the lock: they are dead), add ours."""
        with self._conn_tx() as conn:
            stale = conn.execute(
                "UPDATE run_records SET status = 'failed', error = ? WHERE status = 'running'",
                (INTERRUPTED,),
            ).rowcount
            row = _to_row(self.record)
            conn.execute(
                f"INSERT INTO run_records ({', '.join(row)}) "
                f"VALUES ({', '.join(':' + k for k in row)})",
                row,
            )
        return stale

    def _conn_tx(self) -> AbstractContextManager[sqlite3.Connection]:
        if self._db is None:
            raise RuntimeError("RunRecorder is used outside its `with` block")
        return self._db.transaction()

    def _save(self) -> None:
        """Write the record's scalar columns (not the tool calls, which are inserted as made)."""
        row = _to_row(self.record)
        assignments = ", ".join(f"{k} = :{k}" for k in row if k != "id")
        with self._conn_tx() as conn:
            conn.execute(f"UPDATE run_records SET {assignments} WHERE id = :id", row)

    def log(self, message: str) -> None:
        """Append a timestamped, redacted line to the run's log file (opened per line: a kill
        loses nothing already logged)."""
        stamp = f"{self.clock().astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        lines = redact(message).splitlines() or [""]
        text = "\n".join([f"{stamp} {lines[0]}", *(f"    {line}" for line in lines[1:])])
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")

    def tool_call(self, name: str, input: dict[str, Any], is_error: bool, result: str) -> None:
        """Record one tool call, redacted and clipped, as soon as it is answered."""
        call = ToolCallRecord(
            seq=len(self.record.tool_calls) + 1,
            name=name,
            input=clip_input(input),
            is_error=bool(is_error),
            result=one_line(redact(result), RESULT_LIMIT),
        )
        with self._conn_tx() as conn:
            conn.execute(
                "INSERT INTO run_tool_calls "
                "(run_id, seq, name, input_json, is_error, result_summary) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    self.record.id,
                    call.seq,
                    name,
                    _dumps(call.input),
                    int(call.is_error),
                    call.result,
                ),
            )
        self.record.tool_calls.append(call)
        self.log(f"tool {call.seq} {name} {'error' if call.is_error else 'ok'}: {call.result}")

    def set_aside(self, kind: str, reason: str, text: str = "") -> None:
        """Keep one thing the run goes on without, redacted and clipped, as soon as it is met."""
        item = SetAside(kind, one_line(redact(reason), ERROR_LIMIT), _shorten(redact(text), 1024))
        with self._conn_tx() as conn:
            conn.execute(
                "INSERT INTO run_set_aside (run_id, seq, kind, reason, text) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.record.id, len(self.record.set_aside) + 1, kind, item.reason, item.text),
            )
        self.record.set_aside.append(item)
        self.log(f"set aside a {kind}: {item.reason}")

    def turn(self) -> None:
        """Count one model turn (one `messages.create` call)."""
        self.record.turns += 1
        self._save()

    def add_usage(self, usage: Usage, cost_usd: float) -> None:
        """Add one response's tokens and estimated cost."""
        self.record.usage = self.record.usage + usage
        self.record.cost_usd += cost_usd
        self._save()

    def wrote(self, files: list[str], version: str | None, proposal: int | None) -> None:
        """Note a write: the files it changed, its version id, or the proposal it became."""
        rec = self.record
        seen = set(rec.files_changed)  # a compile notes thousands: no list scan per file
        rec.files_changed.extend(f for f in dict.fromkeys(files) if f not in seen)
        if version is not None and version not in rec.versions:
            rec.versions.append(version)
        if proposal is not None and proposal not in rec.proposals:
            rec.proposals.append(proposal)
        self._save()
        self.log(
            f"wrote {', '.join(files) or '(no files)'}" + (f" as {version}" if version else "")
        )

    def finish(
        self, status: str, summary: str | None = None, error: str | None = None
    ) -> RunRecord:
        """Set the final status, stamp the end time, persist, and return the record."""
        if status not in FINAL_STATUSES:
            raise ValueError(
                f"unknown final run status {status!r}; expected one of {FINAL_STATUSES}"
            )
        rec = self.record
        rec.status, rec.ended = status, self.clock()
        if summary is not None:
            rec.summary = redact(summary).strip()
        if error is not None:
            rec.error = one_line(redact(error), ERROR_LIMIT)
        self._save()
        self.log(f"finished: {status}" + (f" ({rec.error})" if rec.error else ""))
        return rec


def _to_row(rec: RunRecord) -> dict[str, Any]:
    """A record as the named parameters of its `run_records` row."""
    row = {k: getattr(rec, k) for k in _SCALARS if k not in KINDS}
    row |= {k: _dumps(row[k]) for k in _LISTS} | asdict(rec.usage)
    ended = to_db_time(rec.ended) if rec.ended else None
    return row | {"started": to_db_time(rec.started), "ended": ended, "dry_run": int(rec.dry_run)}


def _from_row(values: tuple[Any, ...]) -> RunRecord:
    row = dict(zip(_SCALARS, values, strict=True))
    usage = Usage(*(row.pop(k) for k in KINDS))
    row |= {k: json.loads(row[k]) for k in _LISTS}
    started = from_db_time(row.pop("started"))
    assert started is not None  # NOT NULL column
    ended, dry_run = from_db_time(row.pop("ended")), bool(row.pop("dry_run"))
    return RunRecord(**row, started=started, ended=ended, dry_run=dry_run, usage=usage)


# ---------------------------------------------------------------------------- queries


def stage_names(ws: Workspace) -> list[str]:
    """The pipeline's stages (config.STAGES), then any other stage name that has runs (tests)."""
    with open_state(ws) as db:
        present = [r[0] for r in db.conn.execute("SELECT DISTINCT stage FROM run_records")]
    return [*STAGES, *sorted(set(present) - set(STAGES))]


def list_runs(ws: Workspace, limit: int = 20, stage: str | None = None) -> list[RunRecord]:
    """The latest runs, newest first, without their tool calls; an unknown stage is an error."""
    if stage is not None and stage not in STAGES and stage not in (known := stage_names(ws)):
        raise UsageError(f"unknown stage {stage!r}; expected one of {', '.join(known)}.")
    where, params = ("WHERE stage = ?", [stage]) if stage else ("", [])
    with open_state(ws) as db:
        rows = db.conn.execute(
            f"{_SELECT} {where} ORDER BY started DESC, id DESC LIMIT ?", [*params, limit]
        ).fetchall()
    return [_from_row(r) for r in rows]


def get_run(ws: Workspace, run_id: str) -> RunRecord:
    """One run with its tool calls, in call order."""
    with open_state(ws) as db:
        row = db.conn.execute(f"{_SELECT} WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r}; `crustacean runs` lists them.")
        calls = db.conn.execute(
            "SELECT seq, name, input_json, is_error, result_summary FROM run_tool_calls "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        aside = db.conn.execute(
            "SELECT kind, reason, text FROM run_set_aside WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    rec = _from_row(row)
    rec.tool_calls = [ToolCallRecord(s, n, json.loads(i), bool(e), r) for s, n, i, e, r in calls]
    rec.set_aside = [SetAside(*values) for values in aside]
    return rec


def counts_as_last(rec: RunRecord) -> bool:
    """The one notion of "the last run" (tick, status, health, doctor and the UI): the newest
    run that finished (not one still running) and was not a dry run, which changed nothing."""
    return not rec.dry_run and rec.status != "running"


def last_run(runs: Iterable[RunRecord], stage: str | None = None) -> RunRecord | None:
    """The last run (`counts_as_last`) among `runs`, newest first as `list_runs` gives them;
    of one stage, or of any."""
    return next(
        (r for r in runs if counts_as_last(r) and (stage is None or r.stage == stage)), None
    )


def latest_run(ws: Workspace) -> RunRecord | None:
    """The workspace's last run of any stage (`counts_as_last`), in one query."""
    with open_state(ws) as db:
        row = db.conn.execute(
            f"{_SELECT} WHERE dry_run = 0 AND status != 'running' "
            "ORDER BY started DESC, id DESC LIMIT 1"
        ).fetchone()
    return _from_row(row) if row else None


def last_runs(ws: Workspace, *, include_dry_runs: bool = False) -> dict[str, RunRecord]:
    """The latest finished run of each stage that has one. Dry runs changed nothing, so by
    default they do not count (a schedule asking "when did curate last run?" should not see
    them); see `counts_as_last`."""
    where = "WHERE status != 'running'" + ("" if include_dry_runs else " AND dry_run = 0")
    sql = (
        f"SELECT {', '.join(_SCALARS)} FROM (SELECT *, row_number() OVER "
        f"(PARTITION BY stage ORDER BY started DESC, id DESC) AS n FROM run_records {where}) "
        "WHERE n = 1 ORDER BY stage"
    )
    with open_state(ws) as db:
        rows = db.conn.execute(sql).fetchall()
    return {rec.stage: rec for rec in map(_from_row, rows)}
