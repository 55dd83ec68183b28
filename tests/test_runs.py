"""Run mechanics: the workspace run lock, run records, run logs and `crustacean runs`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import Result

from conftest import run_cli
from crustacean.errors import EXIT_LOCKED, LockedError, UsageError
from crustacean.runs import (
    INPUT_JSON_LIMIT,
    INTERRUPTED,
    NO_STATUS,
    RESULT_LIMIT,
    RunLock,
    RunNotFoundError,
    RunRecorder,
    ToolCallRecord,
    get_run,
    last_runs,
    list_runs,
    log_path,
)
from crustacean.state import open_state
from crustacean.usage import Usage
from crustacean.workspace import Workspace

T0 = datetime(2026, 11, 30, 3, 30, tzinfo=UTC)
KEY = "sk-ant-api03-" + "Q7x" * 15


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def finished_run(
    ws: Workspace, stage: str, start: datetime, status: str = "ok", *, dry_run: bool = False
) -> str:
    with RunRecorder(ws, stage, dry_run=dry_run, clock=Clock(start)) as rec:
        rec.finish(status)
    return rec.record.id


# ---------------------------------------------------------------------------- lock


def test_a_second_run_lock_is_refused_at_once_naming_the_holder(ws: Workspace) -> None:
    with RunLock(ws, "curate", "r1", clock=lambda: T0), pytest.raises(LockedError) as caught:
        RunLock(ws, "collect", "r2").__enter__()
    assert caught.value.exit_code == EXIT_LOCKED == 75
    assert str(caught.value) == (
        f"another crustacean run holds the workspace (pid {os.getpid()}, stage curate, "
        "since 2026-11-30 03:30 UTC); wait for it to finish, or check `crustacean runs`."
    )


def test_releasing_removes_the_info_file_and_frees_the_lock(ws: Workspace) -> None:
    lock = RunLock(ws, "curate", "r1")
    with lock:
        info = json.loads(lock.info_path.read_text())
        assert info["pid"] == os.getpid() and info["run_id"] == "r1"
    assert not lock.info_path.exists()
    with RunLock(ws, "compile", "r2"):
        pass


@pytest.mark.parametrize("info", [None, "", "{not json", '{"pid": "x"}', "[1, 2]"])
def test_missing_or_corrupt_holder_info_says_pid_unknown(ws: Workspace, info: str | None) -> None:
    with RunLock(ws, "curate", "r1") as held:
        if info is None:
            held.info_path.unlink()
        else:
            held.info_path.write_text(info)
        with pytest.raises(LockedError, match=r"workspace \(pid unknown\); wait"):
            RunLock(ws, "collect", "r2").__enter__()


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from crustacean.config import load_config
    from crustacean.runs import RunRecorder
    from crustacean.workspace import Workspace

    root = Path(sys.argv[1])
    rec = RunRecorder(Workspace(root, load_config(root)), "curate").__enter__()
    rec.tool_call("read_context_file", {"path": "MEMORY.md"}, False, "42 lines")
    print(rec.record.id, flush=True)
    time.sleep(120)
    """
)


def test_a_run_killed_with_sigkill_frees_the_lock_and_is_marked_interrupted(
    ws: Workspace,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ws.root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        killed_id = child.stdout.readline().strip()
        assert killed_id, "the child did not start its run"
        with pytest.raises(LockedError, match=f"pid {child.pid}, stage curate"):
            RunLock(ws, "collect", "r2").__enter__()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert get_run(ws, killed_id).status == "running"  # nobody has looked yet
    with RunRecorder(ws, "collect") as rec:  # timeout 0: would raise if still locked
        rec.finish("skipped")
    killed = get_run(ws, killed_id)
    assert (killed.status, killed.error) == ("failed", INTERRUPTED)
    assert [c.name for c in killed.tool_calls] == ["read_context_file"]
    assert "tool 1 read_context_file ok: 42 lines" in log_path(ws, killed_id).read_text()
    assert "marked 1 interrupted run(s) as failed" in rec.log_path.read_text()


def test_a_dead_running_row_is_marked_failed_by_the_next_run(ws: Workspace) -> None:
    dead = RunRecorder(ws, "compile", clock=Clock())
    dead.__enter__()
    dead._release()  # what a kill leaves: the lock gone, the row still 'running'
    with RunRecorder(ws, "compile", clock=Clock(T0 + timedelta(hours=1))) as rec:
        assert get_run(ws, dead.record.id).error == INTERRUPTED
        assert list_runs(ws)[0].status == "running"  # ours is untouched
        rec.finish("ok")
    assert [r.status for r in list_runs(ws)] == ["ok", "failed"]


# ---------------------------------------------------------------------------- recorder


def test_the_recorder_writes_a_row_a_log_file_and_releases_the_lock(ws: Workspace) -> None:
    tick = Clock()
    with RunRecorder(ws, "curate", clock=tick, model="claude-sonnet-5-5") as rec:
        assert rec.record.id.startswith("20261130T033000-") and len(rec.record.id) == 22
        assert list_runs(ws)[0].status == "running"
        rec.turn()
        rec.add_usage(Usage(100, 20, 5, 7), 0.01)
        rec.tool_call("read_context_file", {"path": "MEMORY.md"}, False, "42 lines")
        rec.turn()
        rec.add_usage(Usage(10, 2, 50, 0), 0.0023)
        rec.tool_call("write_context", {"path": "USER.md"}, True, "stale sha256:\nread it again")
        rec.wrote(["MEMORY.md"], "abc123", None)
        rec.wrote(["MEMORY.md", "memory/notes/x.md"], "def456", 3)
        tick.advance(seconds=90)
        final = rec.finish("ok", summary="routed 3 items")
    stored = get_run(ws, rec.record.id)
    assert stored == final
    assert (stored.status, stored.model, stored.turns) == ("ok", "claude-sonnet-5-5", 2)
    assert stored.summary == "routed 3 items"
    assert stored.usage == Usage(110, 22, 55, 7) and stored.usage.total_input == 172
    assert stored.cost_usd == pytest.approx(0.0123)
    assert stored.files_changed == ["MEMORY.md", "memory/notes/x.md"]
    assert (stored.versions, stored.proposals) == (["abc123", "def456"], [3])
    assert stored.tool_calls == [
        ToolCallRecord(1, "read_context_file", {"path": "MEMORY.md"}, False, "42 lines"),
        ToolCallRecord(
            2, "write_context", {"path": "USER.md"}, True, "stale sha256: read it again"
        ),
    ]
    assert stored.duration == timedelta(seconds=90)
    log = rec.log_path.read_text()
    assert rec.log_path == ws.logs_dir / f"{rec.record.id}.log"
    assert log.startswith(f"2026-11-30T03:30:00Z run {rec.record.id}: stage curate, pid ")
    assert "tool 2 write_context error: stale sha256" in log and "finished: ok" in log
    assert not (ws.state_dir / "run.lock.json").exists()
    with RunLock(ws, "curate", "next"):
        pass


def test_an_escaping_exception_fails_the_run_with_one_redacted_line(ws: Workspace) -> None:
    message = f"boom\n  sent x-api-key {KEY}\nTraceback (most recent call last)"
    with pytest.raises(RuntimeError, match="boom"), RunRecorder(ws, "collect") as rec:
        rec.log(f"calling the API with {KEY}")
        raise RuntimeError(message)  # not swallowed: pytest.raises sees it
    stored = get_run(ws, rec.record.id)
    assert stored.status == "failed" and stored.ended is not None
    assert stored.error == (
        "RuntimeError: boom sent x-api-key [REDACTED:Anthropic API key] "
        "Traceback (most recent call last)"
    )
    assert KEY not in rec.log_path.read_text()
    assert "[REDACTED:Anthropic API key]" in rec.log_path.read_text()
    with RunLock(ws, "collect", "next"):
        pass


def test_an_exception_after_finish_still_fails_the_run(ws: Workspace) -> None:
    with pytest.raises(KeyError), RunRecorder(ws, "compile") as rec:
        rec.finish("ok")
        raise KeyError("post-pass")
    assert get_run(ws, rec.record.id).status == "failed"
    assert rec.record.error == "KeyError: 'post-pass'"


def test_leaving_without_a_status_is_recorded_as_a_failure(ws: Workspace) -> None:
    with RunRecorder(ws, "calibrate") as rec:
        pass
    assert (get_run(ws, rec.record.id).status, rec.record.error) == ("failed", NO_STATUS)


def test_finish_refuses_an_unknown_status(ws: Workspace) -> None:
    with RunRecorder(ws, "curate") as rec:
        with pytest.raises(ValueError, match="unknown final run status 'done'"):
            rec.finish("done")
        rec.finish("partial", error="budget.max_turns (8) reached")
    assert get_run(ws, rec.record.id).error == "budget.max_turns (8) reached"


def test_a_locked_run_leaves_no_row_and_no_log(ws: Workspace) -> None:
    with RunRecorder(ws, "curate") as first:
        second = RunRecorder(ws, "collect")
        with pytest.raises(LockedError, match="stage curate"):
            second.__enter__()
        first.finish("ok")
    assert [r.id for r in list_runs(ws)] == [first.record.id]
    assert not second.log_path.exists()


def test_tool_calls_are_redacted_and_clipped(ws: Workspace) -> None:
    big = {"path": "MEMORY.md", "content": "x" * 10_000, "note": f"key {KEY}", "n": 3}
    with RunRecorder(ws, "curate") as rec:
        rec.tool_call("write_context", big, False, "line\n" * 500 + KEY)
        rec.tool_call("odd", {"items": [f"{i}" * 300 for i in range(50)]}, False, "")
        rec.finish("ok")
    first, second = get_run(ws, rec.record.id).tool_calls
    assert first.input["path"] == "MEMORY.md" and first.input["n"] == 3
    assert first.input["content"].startswith("x" * 64) and "more chars]" in first.input["content"]
    assert first.input["note"] == "key [REDACTED:Anthropic API key]"
    assert len(json.dumps(first.input, ensure_ascii=False)) <= INPUT_JSON_LIMIT
    assert len(first.result) <= RESULT_LIMIT and "\n" not in first.result
    assert len(json.dumps(second.input, ensure_ascii=False)) <= INPUT_JSON_LIMIT
    with open_state(ws) as db:
        stored = " ".join(r[0] for r in db.conn.execute("SELECT input_json FROM run_tool_calls"))
    assert KEY not in stored


def test_usage_adds_by_kind() -> None:
    assert Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40) == Usage(11, 22, 33, 44)


# ---------------------------------------------------------------------------- queries


@pytest.fixture
def history(ws: Workspace) -> dict[str, str]:
    """collect, curate, collect, then a dry run of curate, an hour apart."""
    return {
        "collect1": finished_run(ws, "collect", T0),
        "curate": finished_run(ws, "curate", T0 + timedelta(hours=1), "partial"),
        "collect2": finished_run(ws, "collect", T0 + timedelta(hours=2), "skipped"),
        "dry": finished_run(ws, "curate", T0 + timedelta(hours=3), dry_run=True),
    }


def test_list_runs_newest_first_with_limit_and_stage(
    ws: Workspace, history: dict[str, str]
) -> None:
    h = history
    assert [r.id for r in list_runs(ws)] == [h["dry"], h["collect2"], h["curate"], h["collect1"]]
    assert [r.id for r in list_runs(ws, limit=2)] == [h["dry"], h["collect2"]]
    assert [r.id for r in list_runs(ws, stage="collect")] == [h["collect2"], h["collect1"]]
    assert list_runs(ws, stage="calibrate") == []
    assert list_runs(ws)[0].dry_run and list_runs(ws)[0].tool_calls == []


def test_an_unknown_stage_is_a_usage_error_but_a_recorded_one_is_fine(ws: Workspace) -> None:
    with pytest.raises(UsageError, match="unknown stage 'bogus'; expected one of collect, cur"):
        list_runs(ws, stage="bogus")
    run_id = finished_run(ws, "scripted", T0)
    assert [r.id for r in list_runs(ws, stage="scripted")] == [run_id]


def test_last_runs_gives_the_latest_real_run_of_each_stage(
    ws: Workspace, history: dict[str, str]
) -> None:
    latest = last_runs(ws)
    assert {s: r.id for s, r in latest.items()} == {
        "collect": history["collect2"],
        "curate": history["curate"],
    }
    assert last_runs(ws, include_dry_runs=True)["curate"].id == history["dry"]


def test_get_run_of_an_unknown_id_is_a_usage_error(ws: Workspace) -> None:
    with pytest.raises(RunNotFoundError) as caught:
        get_run(ws, "nope")
    assert caught.value.exit_code == 2
    assert str(caught.value) == "no run 'nope'; `crustacean runs` lists them."


def test_to_json_is_plain_data(ws: Workspace) -> None:
    with RunRecorder(ws, "curate", clock=Clock()) as rec:
        rec.tool_call("finish", {"summary": "done"}, False, "ok")
        rec.finish("ok")
    data = get_run(ws, rec.record.id).to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["started"] == "2026-11-30T03:30:00+00:00"
    kinds = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    assert data["usage"] == dict.fromkeys(kinds, 0)
    call = {"seq": 1, "name": "finish", "input": {"summary": "done"}, "is_error": False}
    assert data["tool_calls"] == [{**call, "result": "ok"}]
    assert "tool_calls" not in get_run(ws, rec.record.id).to_json(tool_calls=False)


# ---------------------------------------------------------------------------- CLI


def cli(ws: Workspace, *args: str, code: int = 0) -> Result:
    """`crustacean runs …` in the workspace, as `CRUSTACEAN_WORKSPACE` names it."""
    return run_cli("runs", *args, code=code, env={"CRUSTACEAN_WORKSPACE": str(ws.root)})


@pytest.fixture
def one_run(ws: Workspace) -> str:
    tick = Clock()
    with RunRecorder(ws, "curate", clock=tick, model="claude-sonnet-5-5") as rec:
        rec.turn()
        rec.add_usage(Usage(1000, 20, 5, 7), 0.0123)
        rec.tool_call("read_context_file", {"path": "MEMORY.md"}, False, "42 lines")
        rec.tool_call("write_context", {"path": "SOUL.md"}, True, "policy: SOUL.md is ask-first")
        rec.wrote(["MEMORY.md"], "0123456789abcdef", None)
        tick.advance(minutes=2, seconds=3)
        rec.finish("ok", summary="routed 3 items")
    return rec.record.id


def test_cli_says_no_runs_yet(ws: Workspace) -> None:
    assert cli(ws).stdout == "No runs yet.\n"
    assert json.loads(cli(ws, "--json").stdout) == []


def test_cli_lists_runs_as_a_table(ws: Workspace, one_run: str) -> None:
    out = cli(ws).stdout
    for header in ("id", "stage", "started", "duration", "status", "model", "turns", "files"):
        assert header in out
    row = next(line for line in out.splitlines() if one_run in line)
    for cell in ("curate", "2026-11-30 03:30", "2m 03s", "ok", "claude-sonnet-5-5"):
        assert cell in row
    assert "1,012/20" in row and "$0.0123" in row


def test_cli_list_options(ws: Workspace, history: dict[str, str]) -> None:
    out = cli(ws, "-n", "1").stdout
    assert history["dry"] in out and history["collect2"] not in out
    assert "ok (dry)" in out
    out = cli(ws, "--stage", "collect").stdout
    assert history["collect1"] in out and history["curate"] not in out
    listed = json.loads(cli(ws, "--json", "-n", "2").stdout)
    assert [r["id"] for r in listed] == [history["dry"], history["collect2"]]
    assert "tool_calls" not in listed[0] and listed[0]["dry_run"] is True


def test_cli_list_rejects_a_bad_count_or_stage(ws: Workspace) -> None:
    assert "Invalid value" in cli(ws, "-n", "0", code=2).output
    result = cli(ws, "--stage", "bogus", code=2)
    assert result.stderr.startswith("Error: unknown stage 'bogus'; expected one of collect")


def test_cli_show_prints_one_run_with_its_tool_calls(ws: Workspace, one_run: str) -> None:
    out = cli(ws, "show", one_run).stdout
    assert f"Run        {one_run} (curate)" in out
    assert "input 1,000 · output 20 · cache read 5 · cache write 7" in out
    assert "$0.0123" in out and "Files      MEMORY.md" in out
    assert "Versions   0123456789ab" in out and "Summary    routed 3 items" in out
    assert f"{one_run}.log" in out and "Tool calls (2):" in out
    row = next(line for line in out.splitlines() if "write_context" in line)
    assert "error" in row and "policy: SOUL.md is ask-first" in row and "SOUL.md" in row


def test_cli_show_json(ws: Workspace, one_run: str) -> None:
    data = json.loads(cli(ws, "show", one_run, "--json").stdout)
    assert data["id"] == one_run and data["usage"]["cache_write_tokens"] == 7
    assert [c["name"] for c in data["tool_calls"]] == ["read_context_file", "write_context"]
    assert data["log"].endswith(f"{one_run}.log")


def test_cli_show_marks_an_interrupted_run(ws: Workspace) -> None:
    dead = RunRecorder(ws, "compile")
    dead.__enter__()
    dead._release()
    finished_run(ws, "collect", T0 + timedelta(hours=1))
    out = cli(ws, "show", dead.record.id).stdout
    assert "Status     failed" in out and f"Error      {INTERRUPTED}" in out
    assert "Duration   —" in out and "No tool calls." in out
