"""state.db: the migration registry, WAL and busy waiting, and the recall ledger."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import run_cli
from crustacean import state as state_mod
from crustacean.state import (
    MIGRATIONS,
    StateDB,
    StateDBError,
    from_db_time,
    open_state,
    split_statements,
    to_db_time,
)
from crustacean.tiers import Recalls
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NAMES = [name for name, _ in MIGRATIONS]


def test_a_fresh_database_gets_every_migration_in_order(tmp_path: Path) -> None:
    with StateDB(tmp_path / "state") as db:
        assert db.applied_migrations() == NAMES
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert (tmp_path / "state" / "state.db").is_file()


def test_migration_names_are_numbered_and_unique() -> None:
    numbers = [int(name[1:4]) for name in NAMES]
    assert numbers == list(range(1, len(NAMES) + 1))
    assert all(name.startswith(f"m{n:03d}_") for n, name in zip(numbers, NAMES, strict=True))


def test_reopening_applies_nothing_twice_and_keeps_data(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        db.record_recalls(["a.md"], NOW, "context")
    for _ in range(2):
        with StateDB(tmp_path) as db:
            assert db.applied_migrations() == NAMES
            assert db.recalls_of("a.md").uses == 1


def test_a_new_migration_is_applied_on_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    StateDB(tmp_path).close()
    extra = ("m999_runs", "CREATE TABLE runs (id INTEGER PRIMARY KEY); CREATE INDEX r ON runs(id);")
    monkeypatch.setattr(state_mod, "MIGRATIONS", [*MIGRATIONS, extra])
    with StateDB(tmp_path) as db:
        assert db.applied_migrations() == [*NAMES, "m999_runs"]
        assert db.conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_failing_migration_leaves_nothing_half_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    StateDB(tmp_path).close()
    broken = ("m999_broken", "CREATE TABLE half (x); CREATE TABLE half (y);")
    monkeypatch.setattr(state_mod, "MIGRATIONS", [*MIGRATIONS, broken])
    with pytest.raises(StateDBError, match="unusable"):
        StateDB(tmp_path)
    monkeypatch.setattr(state_mod, "MIGRATIONS", MIGRATIONS)
    with StateDB(tmp_path) as db:
        tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master")}
        assert "half" not in tables and db.applied_migrations() == NAMES


def test_an_unknown_newer_migration_is_a_clear_error(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        db.conn.execute("INSERT INTO _migrations VALUES ('m900_future', 'x')")
    with pytest.raises(StateDBError) as err:
        StateDB(tmp_path)
    message = str(err.value)
    assert "newer crustacean" in message and "m900_future" in message
    assert "Upgrade crustacean" in message


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateDBError, match="Move it aside") as err:
        StateDB(tmp_path)
    assert "cursors" in str(err.value) and "rebuildable" not in str(err.value)  # says what it costs


def test_a_folder_in_place_of_the_database_is_a_clear_error(ws: Workspace) -> None:
    (ws.state_dir / "state.db").mkdir(parents=True)
    out = run_cli("-w", str(ws.root), "search", "anything", code=1)
    assert "state.db is a folder, not the state database" in out.stderr
    assert "collect's cursors" in out.stderr and "Traceback" not in out.output
    assert (ws.state_dir / "state.db").is_dir()  # left for the user to move


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    sql = """
    CREATE TABLE t (x);
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = 1; UPDATE t SET x = 2; END;
    ;
    """
    parts = split_statements(sql)
    assert len(parts) == 2 and parts[1].startswith("CREATE TRIGGER") and parts[1].endswith("END;")


def test_open_state_lives_under_the_workspace_state_dir(ws: Workspace) -> None:
    with open_state(ws) as db:
        assert db.path == ws.root / ".crustacean" / "state.db"


# ---------------------------------------------------------------- recall ledger


def test_recalls_count_uses_and_keep_the_latest_time(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        db.record_recalls(["a.md", "b.md"], NOW, "context")
        db.record_recalls(["a.md"], NOW + timedelta(days=2), "mcp")
        db.record_recalls(["a.md"], NOW - timedelta(days=5), "search")  # late, older clock
        assert db.recalls_of("a.md") == Recalls(3, NOW + timedelta(days=2))
        assert db.recalls_of("b.md") == Recalls(1, NOW)
        assert db.recalls() == {
            "a.md": Recalls(3, NOW + timedelta(days=2)),
            "b.md": Recalls(1, NOW),
        }


def test_a_use_is_a_day_the_memory_was_recalled_not_a_load(tmp_path: Path) -> None:
    """13 get_context calls in a minute made a file "13 uses, stays hot" (issue 36)."""
    with StateDB(tmp_path) as db:
        for second in range(13):
            db.record_recalls(["memory/notes/a.md"], NOW + timedelta(seconds=5 * second), "mcp")
        assert db.recalls_of("memory/notes/a.md") == Recalls(1, NOW + timedelta(seconds=60))
        db.record_recalls(["memory/notes/a.md"], NOW + timedelta(days=1), "context")
        db.record_recalls(["memory/notes/a.md"], NOW + timedelta(days=1, hours=1), "search")
        assert db.recalls_of("memory/notes/a.md") == Recalls(2, NOW + timedelta(days=1, hours=1))


def test_a_path_twice_in_one_call_is_one_recall(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        db.record_recalls(iter(["a.md", "a.md"]), NOW, "search")
        assert db.recalls_of("a.md").uses == 1


def test_never_recalled_is_an_empty_usage(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        assert db.recalls_of("nope.md") == Recalls(0, None)
        assert db.recalls() == {}


def test_times_come_back_as_aware_utc(tmp_path: Path) -> None:
    plus_two = timezone(timedelta(hours=2))
    with StateDB(tmp_path) as db:
        db.record_recalls(["a.md"], datetime(2026, 1, 1, 14, 0, 0, 1, tzinfo=plus_two), "mcp")
        last = db.recalls_of("a.md").last_recalled
    assert last == datetime(2026, 1, 1, 12, 0, 0, 1, tzinfo=UTC)
    assert last is not None and last.tzinfo == UTC


def test_stored_times_are_fixed_width_so_they_sort_as_text() -> None:
    a, b = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 0, 500, tzinfo=UTC)
    assert len(to_db_time(a)) == len(to_db_time(b)) and to_db_time(a) < to_db_time(b)
    assert from_db_time(to_db_time(b)) == b and from_db_time(None) is None


@pytest.mark.parametrize(
    ("paths", "now", "how", "message"),
    [
        (["a.md"], NOW, "peek", "unknown recall kind"),
        (["a.md"], datetime(2026, 1, 1), "mcp", "timezone-aware"),
    ],
)
def test_bad_recall_arguments_are_refused_and_record_nothing(
    tmp_path: Path, paths: list[str], now: datetime, how: str, message: str
) -> None:
    with StateDB(tmp_path) as db:
        with pytest.raises(ValueError, match=message):
            db.record_recalls(paths, now, how)
        assert db.recalls() == {}


def test_a_second_writer_waits_for_the_first_instead_of_failing(tmp_path: Path) -> None:
    first = StateDB(tmp_path)
    done: list[BaseException | None] = []

    def write() -> None:
        try:
            with StateDB(tmp_path) as second:
                second.record_recalls(["b.md"], NOW, "mcp")
            done.append(None)
        except BaseException as e:
            done.append(e)

    with first.transaction():
        first.conn.execute("INSERT INTO recalls (path, uses) VALUES ('a.md', 1)")
        worker = threading.Thread(target=write)
        worker.start()
        time.sleep(0.3)  # the second writer is now blocked on the lock
        assert not done
    worker.join(10)
    assert done == [None]
    assert set(first.recalls()) == {"a.md", "b.md"}
    first.close()


def test_readers_see_committed_data_while_a_write_is_open(tmp_path: Path) -> None:
    with StateDB(tmp_path) as writer, StateDB(tmp_path) as reader:
        writer.record_recalls(["a.md"], NOW, "context")
        with writer.transaction():
            writer.conn.execute("UPDATE recalls SET uses = 99")
            assert reader.recalls_of("a.md").uses == 1  # WAL: no "database is locked" for readers
        assert reader.recalls_of("a.md").uses == 99


def test_the_connection_is_a_plain_sqlite3_connection(tmp_path: Path) -> None:
    with StateDB(tmp_path) as db:
        assert isinstance(db.conn, sqlite3.Connection)
