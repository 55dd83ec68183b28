"""A Ctrl-C, a full disk and a failed run each say so in one line (issue 32): the CLI and MCP
name a full disk, a Ctrl-C exits 130 and is recorded as interrupted, and there is one notion of
"the last run" (newest finished, not dry), which doctor fails on when that run failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from store_helpers import commit_all

from conftest import run_cli, snapshot
from crustacean.mcp_server import build_server
from crustacean.ops.status import doctor
from crustacean.runs import RunRecorder, get_run, last_run, list_runs
from crustacean.stages import collect_notes
from crustacean.store import apply as write
from crustacean.workspace import Workspace

NOTE = "memory/notes/garden.md"
NO_SPACE = (
    "Error: no space left on the device holding the workspace; nothing was written. "
    "Free some space there, then run it again.\n"
)


def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every temp file a write makes fails as on a full disk (what os.write raises then)."""

    def refuse(path: Path, data: bytes, mode: int | None) -> str:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(write, "synced_temp", refuse)
    monkeypatch.setattr(write, "unsynced_temp", refuse)


@pytest.fixture
def note(ws: Workspace) -> Workspace:
    (ws.root / NOTE).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / NOTE).write_text("---\nname: garden\n---\nThe beans are sown.\n")
    commit_all(ws.root, "garden")
    return ws


def test_a_full_disk_is_one_line_on_the_cli_and_nothing_changes(
    note: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(note.root)
    full_disk(monkeypatch)
    out = run_cli("-w", str(note.root), "remember", "peas", "And the peas.", code=1)
    assert out.output == NO_SPACE
    assert snapshot(note.root) == before


def test_a_full_disk_is_named_over_mcp_and_nothing_changes(
    note: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(note.root)
    full_disk(monkeypatch)

    async def main() -> Any:
        async with Client(build_server(note)) as client:
            change = {"path": NOTE, "mode": "append", "content": "And the peas.\n"}
            return await client.call_tool("write_context", {"changes": [change], "message": "peas"})

    result = anyio.run(main)
    assert result.is_error
    assert result.content[0].text == NO_SPACE.strip()

    def files(shot: dict[str, str]) -> dict[str, str]:  # the server's own state may move
        return {k: v for k, v in shot.items() if not k.startswith(".crustacean/")}

    assert files(snapshot(note.root)) == files(before)


def test_ctrl_c_exits_130_says_nothing_was_written_and_is_recorded_as_interrupted(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def pressed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(collect_notes, "discover", pressed)
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + '\n[[sources]]\nkind = "claude_code"\npath = "cc"\n')
    before = {k: v for k, v in snapshot(ws.root).items() if not k.startswith(".crustacean/")}
    out = run_cli("-w", str(ws.root), "collect", code=130)
    assert out.output == "Interrupted; nothing was written.\n"
    (rec,) = list_runs(ws)
    assert (rec.status, rec.error) == ("interrupted", "interrupted by the user (Ctrl-C)")
    after = {k: v for k, v in snapshot(ws.root).items() if not k.startswith(".crustacean/")}
    assert after == before
    health = json.loads(run_cli("-w", str(ws.root), "health", "--json").stdout)
    cadence = next(c for c in health["checks"] if c["name"] == "cadence")
    assert cadence["figures"]["collect"]["failed"] == 0  # a Ctrl-C is no stage failure


def test_ctrl_c_after_a_write_says_what_was_written(ws: Workspace) -> None:
    with pytest.raises(KeyboardInterrupt) as caught, RunRecorder(ws, "curate") as rec:
        rec.wrote(["memory/people/ana.md"], "abc123", None)
        raise KeyboardInterrupt
    assert caught.value.__notes__ == ["the curate run had written memory/people/ana.md."]
    assert get_run(ws, rec.record.id).status == "interrupted"


def finished(ws: Workspace, stage: str, status: str, when: datetime, **kw: Any) -> str:
    with RunRecorder(ws, stage, clock=lambda: when, dry_run=kw.pop("dry_run", False)) as rec:
        rec.finish(status, error=kw.get("error"))
    return rec.record.id


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_doctor_fails_on_a_failed_last_run_even_after_a_dry_run(ws: Workspace) -> None:
    """Before: `ok last run` for a failed run, `no run recorded yet` after one dry run."""
    failed = finished(
        ws, "collect", "failed", NOW - timedelta(hours=2), error="ModelError: the API failed"
    )
    finished(ws, "curate", "ok", NOW - timedelta(hours=1), dry_run=True)
    (finding,) = [f for f in doctor(ws.root, env={}, now=NOW).findings if f.name == "last run"]
    assert finding.status == "fail"
    assert finding.detail == (
        "the last run (collect at 2026-11-30 10:00) failed: ModelError: the API failed"
    )
    assert finding.fix == (
        f"see `crustacean runs show {failed}`, fix what it names, then `crustacean tick`"
    )
    finished(ws, "collect", "ok", NOW - timedelta(minutes=30))
    (finding,) = [f for f in doctor(ws.root, env={}, now=NOW).findings if f.name == "last run"]
    assert (finding.status, finding.detail) == ("ok", "last run collect at 2026-11-30 11:30")


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([], None),
        ([("a", "running", False), ("b", "failed", False)], "b"),
        ([("a", "ok", True), ("b", "ok", False)], "b"),
        ([("a", "interrupted", False), ("b", "ok", False)], "a"),
        ([("a", "ok", True)], None),
    ],
)
def test_last_run_is_the_newest_finished_real_run(
    runs: list[tuple[str, str, bool]], expected: str | None
) -> None:
    from crustacean.runs import RunRecord

    records = [
        RunRecord(id=i, stage="collect", started=NOW, status=s, dry_run=d) for i, s, d in runs
    ]
    found = last_run(records)
    assert (found.id if found else None) == expected
