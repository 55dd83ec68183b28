"""A 0-byte state.db is refused, naming what is lost and the fix, never silently recreated.

SQLite opens an empty file as a new database, so collect's cursors and the run history were
lost without a word (issue 32). A database is now made whole beside its place and linked in, so
crustacean itself never leaves an empty state.db: an empty one lost its bytes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import run_cli, snapshot
from crustacean.state import StateDB, StateDBError, open_state
from crustacean.workspace import Workspace


@pytest.mark.parametrize("command", [["status"], ["search", "tea"], ["collect", "--plan"]])
def test_an_empty_state_db_is_refused_in_one_message_and_nothing_changes(
    ws: Workspace, command: list[str]
) -> None:
    db = ws.state_dir / "state.db"
    with open_state(ws):
        pass
    db.write_bytes(b"")  # a full disk, or a sync tool, truncated it
    before = snapshot(ws.root)
    out = run_cli("-w", str(ws.root), *command, code=1)
    lines = out.stderr.strip().splitlines()
    assert len(lines) <= 2 and "Traceback" not in out.output, out.output
    message = " ".join(lines)
    assert "state.db is empty (0 bytes)" in message
    assert "Restore it from a backup, or move it aside" in message and ".empty`" in message
    assert "collect's cursors" in message  # what a new one forgets
    assert snapshot(ws.root) == before and db.stat().st_size == 0
    assert not db.with_name("state.db-wal").exists()


def test_moving_it_aside_as_told_starts_a_new_database(ws: Workspace) -> None:
    db = ws.state_dir / "state.db"
    db.write_bytes(b"")
    with pytest.raises(StateDBError):
        open_state(ws)
    db.rename(db.with_name("state.db.empty"))
    with open_state(ws) as state:
        assert state.conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] > 0


def test_an_empty_file_beside_a_log_that_is_not_sqlites_is_refused_too(tmp_path: Path) -> None:
    """Only a real write-ahead log (SQLite replays it) makes an empty main file no loss; SQLite
    ignores anything else and would start a new database."""
    with StateDB(tmp_path):
        pass
    (tmp_path / "state.db").write_bytes(b"")
    (tmp_path / "state.db-wal").write_bytes(b"not a log" * 100)
    with pytest.raises(StateDBError, match=r"is empty \(0 bytes\)"):
        StateDB(tmp_path)
    assert (tmp_path / "state.db").stat().st_size == 0


def test_a_new_database_is_made_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (tmp_path / "state.db").stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")] == []
    with sqlite3.connect(tmp_path / "state.db") as conn:
        assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] > 0


def test_threads_that_make_the_database_at_once_all_open_it(tmp_path: Path) -> None:
    """The MCP server's tool calls run on threads of one process: each makes its new
    database under its own name, so none links another's half-made file (a 0-byte
    state.db, "database is locked", "disk I/O error" before)."""
    import threading

    state = tmp_path / ".crustacean"
    state.mkdir()
    start, errors = threading.Barrier(12), []

    def open_one() -> None:
        start.wait()
        try:
            StateDB(state, any_thread=True).conn.close()
        except Exception as e:  # collected: the assertion names them
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert (state / "state.db").stat().st_size > 0
    assert not list(state.glob(".state.db.*.new"))
