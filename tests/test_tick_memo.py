"""A no-op tick answered from memory: the same bytes as the ordinary path, and never stale."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crustacean.config import STAGES as STAGE_ORDER
from crustacean.errors import WorkspaceNotFoundError
from crustacean.ops import tick_memo
from crustacean.ops.tick import tick
from crustacean.runs import RunRecorder
from crustacean.schedule import FOREVER, due_stages
from crustacean.workspace import Workspace, find_workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAILY = "30 3 * * *"


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["tick"], (None, [])),
        (["tick", "--json"], (None, ["--json"])),
        (["tick", "--dry-run", "--json"], (None, ["--dry-run", "--json"])),
        (["-w", "W", "tick"], ("W", [])),
        (["--workspace", "W", "tick", "--json"], ("W", ["--json"])),
        (["--workspace=W", "tick"], ("W", [])),
        (["tick", "--plan"], None),  # plans call the stages: never answered from memory
        (["tick", "--help"], None),
        (["tick", "--json", "--json"], None),
        (["-c", "stages.collect.enabled=false", "tick"], None),
        (["-w", "A", "-w", "B", "tick"], None),
        (["-w"], None),
        (["paths"], None),
        ([], None),
    ],
)
def test_only_plain_ticks_are_answered(
    argv: list[str], split: tuple[str | None, list[str]] | None
) -> None:
    assert tick_memo.split_argv(argv) == split


def test_locate_finds_what_find_workspace_finds(ws: Workspace, tmp_path: Path) -> None:
    deep = ws.root / "memory" / "notes"
    env = {"CRUSTACEAN_WORKSPACE": str(ws.root)}
    linked = tmp_path / "linked"
    linked.symlink_to(ws.root)
    for explicit, environ, cwd in [
        (None, {}, deep),
        (None, env, tmp_path),
        (str(ws.root), {}, tmp_path),
        (None, {}, linked / "memory"),  # a symlinked cwd: both resolve it
        (str(linked), {}, tmp_path),
        (f"{ws.root}//memory/..", {}, tmp_path),
    ]:
        expected = find_workspace(Path(explicit) if explicit else None, environ, cwd)
        assert tick_memo.locate(explicit, environ, cwd) == str(expected)
    for explicit, environ, cwd in [
        (None, {}, tmp_path),
        (str(tmp_path / "missing"), {}, tmp_path),
        (str(ws.root / "memory"), {}, tmp_path),  # a folder, but not a workspace
        (None, {"CRUSTACEAN_WORKSPACE": str(tmp_path / "missing")}, deep),
    ]:
        with pytest.raises(WorkspaceNotFoundError):
            find_workspace(Path(explicit) if explicit else None, environ, cwd)
        assert tick_memo.locate(explicit, environ, cwd) is None


def test_holds_until_is_the_next_slot_and_only_for_answers_that_hold() -> None:
    """Not due: until its next slot; never ran yet: its first slot; disabled: forever; due, or
    a clock behind the last run (whose reason names the clock): not at all."""
    schedules = dict.fromkeys(STAGE_ORDER, DAILY)
    enabled = dict.fromkeys(STAGE_ORDER, True) | {"calibrate": False}
    last_ok = {
        "collect": NOW - timedelta(hours=1),  # ran after today's 03:30 slot
        "curate": NOW - timedelta(days=2),  # missed today's slot: due
        "compile": NOW + timedelta(hours=1),  # the clock went backwards
    }
    dues = due_stages(NOW, schedules, enabled, last_ok, UTC)
    assert [d.holds_until for d in dues] == [
        datetime(2026, 12, 1, 3, 30, tzinfo=UTC),
        None,
        None,
        FOREVER,
    ]
    fresh = due_stages(NOW, schedules, enabled, {}, UTC, created=NOW - timedelta(minutes=5))
    assert fresh[0].holds_until == datetime(2026, 12, 1, 3, 30, tzinfo=UTC) and not fresh[0].due


def ran_everything(ws: Workspace, when: datetime) -> None:
    for stage in STAGE_ORDER:
        with RunRecorder(ws, stage, clock=lambda: when) as rec:
            rec.finish("ok", summary="test: just ran")


def test_tick_notes_quiet_only_when_nothing_is_due(ws: Workspace) -> None:
    later = datetime.now(UTC) + timedelta(days=3)  # past every daily slot since init

    def clock() -> datetime:
        return later

    tick_memo.take_quiet()
    tick(ws, dry_run=True, clock=clock)  # never ran: collect, curate are due
    assert tick_memo.take_quiet() is None
    ran_everything(ws, later)
    tick(ws, plan=True, clock=clock)
    assert tick_memo.take_quiet() is None  # a plan is never answered from memory
    result = tick(ws, clock=clock)
    assert not any(o.due.due for o in result.outcomes)
    since, until = tick_memo.take_quiet() or (None, None)
    assert since == later and until is not None and later < until <= later + timedelta(days=1)


def crustacean(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The console script's own code path (crustacean.cli.entry), as cron runs it."""
    code = "from crustacean.cli.entry import main; main()"
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def imported(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def quiet_workspace(ws: Workspace) -> dict[str, str]:
    """Every stage ran a minute ago (so none is due), in UTC; the env to run ticks in."""
    toml = ws.root / "crustacean.toml"
    text = re.sub(r'(?m)^(# )?timezone = ""', 'timezone = "UTC"', toml.read_text(), count=1)
    toml.write_text(text)
    ran_everything(ws, datetime.now(UTC) - timedelta(minutes=1))
    return {**os.environ}


@pytest.mark.parametrize("flags", [[], ["--json"], ["--dry-run"]])
def test_a_second_no_op_tick_prints_the_same_bytes_without_loading_typer(
    ws: Workspace, flags: list[str]
) -> None:
    env = quiet_workspace(ws)
    first = crustacean("tick", *flags, cwd=ws.root, env=env)
    second = crustacean("tick", *flags, cwd=ws.root, env=env)
    assert first.returncode == second.returncode == 0, first.stderr[-2000:]
    assert "not due (next slot" in first.stdout or '"due": false' in first.stdout
    assert second.stdout == first.stdout
    assert "typer" in imported(first.stderr)  # the ordinary way (a pipe needs no rich)
    assert not {"typer", "rich", "pydantic", "croniter", "crustacean.config"} & imported(
        second.stderr
    )


def test_anything_the_answer_depends_on_sends_the_tick_the_ordinary_way(
    ws: Workspace, tmp_path: Path
) -> None:
    env = quiet_workspace(ws)
    assert crustacean("tick", cwd=ws.root, env=env).returncode == 0
    probe = tick_memo.probe(["tick"], env, ws.root, False)
    assert probe is not None
    conn = sqlite3.connect(probe.db)
    since, until = conn.execute("SELECT since, until FROM tick_memo").fetchone()
    conn.close()
    inside = datetime.fromisoformat(since) + timedelta(seconds=1)
    assert probe.replay(inside) is not None
    assert probe.replay(datetime.fromisoformat(until)) is None  # the next slot came
    assert probe.replay(datetime.fromisoformat(since) - timedelta(seconds=1)) is None
    other = tick_memo.probe(["tick"], {**env, "CRUSTACEAN_LLM__MAX_RETRIES": "0"}, ws.root, False)
    assert other is not None and other.replay(inside) is None  # another environment
    assert tick_memo.probe(["tick"], env, ws.root, True) is None  # a terminal: rich may colour
    with RunRecorder(ws, "collect", clock=lambda: datetime.now(UTC)) as rec:
        rec.finish("ok")
    assert probe.replay(inside) is None  # a new run record
    assert crustacean("tick", cwd=ws.root, env=env).returncode == 0  # answers anew
    assert probe.replay(inside) is not None
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + "\n")
    assert probe.replay(inside) is None  # any config file's bytes


def test_a_config_broken_after_a_quiet_tick_still_gets_its_error(ws: Workspace) -> None:
    env = quiet_workspace(ws)
    assert crustacean("tick", cwd=ws.root, env=env).returncode == 0
    toml = ws.root / "crustacean.toml"
    before = toml.read_text()
    toml.write_text(
        before.replace("[stages.collect]\n", '[stages.collect]\nschedule = "61 * * * *"\n')
    )
    broken = crustacean("tick", cwd=ws.root, env=env)
    assert broken.returncode == 2 and "Error: " in broken.stderr
    assert "not a valid cron expression" in broken.stderr or "field" in broken.stderr
    assert toml.read_text() != before  # only the user's edit; tick wrote nothing
    rows = sqlite3.connect(ws.root / ".crustacean" / "state.db").execute(
        "SELECT count(*) FROM tick_memo"
    )
    assert rows.fetchone() == (1,)  # the failed tick left no answer


def test_a_tick_that_warns_is_not_kept(ws: Workspace) -> None:
    """Its warning goes to stderr on every tick, so the ordinary path answers each time."""
    env = quiet_workspace(ws)
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + "\n[governance]\nlocked = []\n")
    first = crustacean("tick", cwd=ws.root, env=env)
    second = crustacean("tick", cwd=ws.root, env=env)
    assert first.returncode == second.returncode == 0
    assert "governance.locked is only read from the org file" in second.stderr
    assert second.stdout == first.stdout and "typer" in imported(second.stderr)


def test_the_tee_keeps_what_typer_and_rich_print_and_is_the_real_stream_otherwise(
    tmp_path: Path,
) -> None:
    """click writes to the stream it is given only when its encoding looks right, and rich
    takes its fileno on a broken pipe: both must see the real stream's."""
    from rich.console import Console
    from typer import echo

    from crustacean.cli.entry import _Tee

    with (tmp_path / "out.txt").open("w", encoding="utf-8") as real:
        tee = _Tee(real)
        echo("via echo", file=tee)  # type: ignore[arg-type]  # _Tee is a text stream
        Console(file=tee, highlight=False).print("via rich", markup=False)  # type: ignore[arg-type]  # _Tee is a text stream
        assert (tee.encoding, tee.fileno(), tee.isatty()) == ("utf-8", real.fileno(), False)
        tee.flush()
    assert tee.copy.getvalue() == "via echo\nvia rich\n"
    assert (tmp_path / "out.txt").read_text() == "via echo\nvia rich\n"
