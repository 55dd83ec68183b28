"""Compile's rerun skips a pass that cannot find anything new, and never one that could."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crustacean.config import load_config
from crustacean.stages import compile as compile_stage
from crustacean.stages import compile_skip
from crustacean.stages.compile import compile_workspace
from crustacean.state import open_state
from crustacean.tiers import Memory, Recalls, Rules, next_change, plan_tiers
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RULES = Rules(hot_days=7, hot_min_uses=5, warm_days=30, cold_days=90, hot_limit=3, memory_cap=8)


@st.composite
def memories(draw: Any) -> tuple[list[Memory], dict[str, Recalls]]:
    n = draw(st.integers(1, 10))
    mems, recalls = [], {}
    for i in range(n):
        created = NOW - timedelta(hours=draw(st.integers(0, 24 * 200)))
        tier = draw(st.sampled_from(["hot", "warm", "cold"]))
        mems.append(Memory(f"m{i}.md", tier, False, created))
        if draw(st.booleans()):
            ago = timedelta(minutes=draw(st.integers(0, 60 * 24 * 120)))
            recalls[f"m{i}.md"] = Recalls(draw(st.integers(0, 9)), NOW - ago)
    return mems, recalls


@given(memories(), st.floats(0, 1))
def test_tier_decisions_hold_until_next_change(
    case: tuple[list[Memory], dict[str, Recalls]], frac: float
) -> None:
    """Every moment in [now, next_change) gives the decisions of now; None: every moment."""
    mems, recalls = case
    until = next_change(mems, recalls, NOW, RULES)
    span = (until - NOW) if until else timedelta(days=400)
    later = NOW + span * frac
    if until is not None and later >= until:
        later = until - timedelta(microseconds=1)

    def decided(at: datetime) -> list[tuple[str, str]]:
        return [(d.path, d.next) for d in plan_tiers(mems, recalls, at, RULES)]

    assert decided(later) == decided(NOW)


def test_next_change_is_the_first_threshold_reached() -> None:
    fresh = Memory("a.md", "hot", False, NOW - timedelta(days=6, hours=23))
    old = Memory("b.md", "warm", False, NOW - timedelta(days=29))
    assert next_change([fresh, old], {}, NOW, RULES) == NOW + timedelta(hours=1)
    recalled = {"a.md": Recalls(1, NOW)}  # the recall restarts a's clock: b's 30 days come first
    assert next_change([fresh, old], recalled, NOW, RULES) == NOW + timedelta(days=1)
    gone = Memory("c.md", "cold", False, NOW - timedelta(days=500))
    assert next_change([gone], {}, NOW, RULES) is None


def put(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def quiet(ws: Workspace) -> Workspace:
    """A workspace with a few memories where a first compile leaves nothing to do."""
    put(ws.root, "memory/notes/garden.md", "# Garden\nwater the roses\n")  # warm by its folder
    put(ws.root, "memory/notes/budget.md", "# Budget\nrent is due on the 1st\n")
    live = Workspace(ws.root, load_config(ws.root, env={}, overrides=["workspace.timezone=UTC"]))
    compile_workspace(live, env={}, no_model=True, clock=lambda: NOW)
    return live


def passes(ws: Workspace, monkeypatch: pytest.MonkeyPatch, at: datetime = NOW) -> int:
    """How many deterministic passes one `compile --no-model` at `at` ran (0: skipped)."""
    calls = []
    real = compile_stage.deterministic_pass

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compile_stage, "deterministic_pass", counting)
    result = compile_workspace(ws, env={}, no_model=True, clock=lambda: at)
    monkeypatch.setattr(compile_stage, "deterministic_pass", real)
    assert result.record is not None
    return len(calls)


def test_a_rerun_of_a_pass_that_found_nothing_is_skipped_with_the_same_result(
    quiet: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = compile_workspace(quiet, env={}, no_model=True, clock=lambda: NOW)  # keeps
    second = compile_workspace(quiet, env={}, no_model=True, clock=lambda: NOW)

    def same(result: Any) -> dict[str, Any]:
        data = result.to_json()
        return data | {"run": {k: v for k, v in data["run"].items() if k != "id"}}

    assert same(first) == same(second)
    assert first.record and second.record and first.record.summary == second.record.summary
    assert passes(quiet, monkeypatch) == 0


@pytest.mark.parametrize(
    "change",
    ["edit", "same-size-same-mtime", "new-file", "delete", "recall", "config", "dry-run-only"],
)
def test_any_input_that_changed_makes_the_pass_run(
    quiet: Workspace, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    compile_workspace(quiet, env={}, no_model=True, clock=lambda: NOW)  # keeps a fingerprint
    ws, garden = quiet, quiet.root / "memory/notes/garden.md"
    if change == "edit":
        garden.write_text(garden.read_text() + "and the tulips\n")
    elif change == "same-size-same-mtime":  # a write in the same clock tick: content decides
        before = garden.stat()
        garden.write_text(garden.read_text().replace("roses", "ROSES"))
        os.utime(garden, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert garden.stat().st_size == before.st_size
    elif change == "new-file":
        put(ws.root, "memory/notes/empty.md", "")
    elif change == "delete":
        garden.unlink()
    elif change == "recall":
        with open_state(ws) as db:
            db.record_recalls(["memory/notes/garden.md"], NOW, how="search")
    elif change == "config":
        overrides = ["workspace.timezone=UTC", "tiers.warm_days=1"]
        ws = Workspace(ws.root, load_config(ws.root, env={}, overrides=overrides))
    if change == "dry-run-only":
        compile_workspace(ws, env={}, no_model=True, dry_run=True, clock=lambda: NOW)
        assert passes(ws, monkeypatch) == 0  # a dry run neither used nor replaced it
        return
    assert passes(ws, monkeypatch) == 1


def test_a_new_day_or_a_tier_threshold_ends_the_skip(
    quiet: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept window ends at the first threshold: the pass then runs and does the change a
    pass without any skip would do."""
    compile_workspace(quiet, env={}, no_model=True, clock=lambda: NOW)
    with open_state(quiet) as db:
        since, until = db.conn.execute("SELECT since, until FROM compile_skip").fetchone()
    end = datetime.fromisoformat(until)
    assert datetime.fromisoformat(since) == NOW < end <= NOW + timedelta(days=1)
    assert passes(quiet, monkeypatch, end - timedelta(seconds=1)) == 0
    assert passes(quiet, monkeypatch, NOW - timedelta(seconds=1)) == 1  # the clock went back
    warm_done = datetime.now(UTC) + timedelta(days=31)  # garden.md (made now): 30 days passed
    result = compile_workspace(quiet, env={}, no_model=True, clock=lambda: warm_done)
    assert any(t.startswith("memory/notes/garden.md: warm→cold") for t in result.ops.tiers)


def test_a_pass_that_changed_something_vouches_for_nothing(ws: Workspace) -> None:
    put(ws.root, "memory/notes/empty.md", "")
    live = Workspace(ws.root, load_config(ws.root, env={}, overrides=["workspace.timezone=UTC"]))
    result = compile_workspace(live, env={}, no_model=True, clock=lambda: NOW)
    assert result.ops.trashed
    assert not compile_skip.check(live, NOW).nothing_to_do


def test_the_listing_after_each_write_of_the_pass_is_the_one_a_scan_finds(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the pass's own write the cache lists the tree from the files that write named
    (CachedInputs.wrote), not another walk: a full scan then finds the same files and keys."""
    from crustacean.stages.compile_inputs import CachedInputs

    today = NOW.date()
    for d in range(60):  # the old ones are archived (moved), a write of 2 names per log
        day = today - timedelta(days=d)
        put(ws.root, f"memory/{day.isoformat()}.md", f"# {day}\n\n### [09:00] chat\n\n- note {d}\n")
    put(ws.root, f"memory/{(today - timedelta(days=40)).isoformat()}-api-design.md", "hook\n")
    put(ws.root, "memory/notes/empty.md", "")  # trashed
    put(ws.root, "memory/notes/dup-a.md", "# Same\nsame words\n")
    put(ws.root, "memory/notes/dup-b.md", "# Same\nsame words\n")
    put(ws.root, "memory/notes/old-hot.md", "---\nrecorded: 2026-06-01\n---\nold hot\n")
    live = Workspace(ws.root, load_config(ws.root, env={}, overrides=["workspace.timezone=UTC"]))
    compared: list[str] = []
    real = CachedInputs.wrote

    def checked(self: CachedInputs, files: Any) -> None:
        named = list(files)
        real(self, named)
        if self._paths is None:
            return
        scan = CachedInputs(self.ws, self.store)
        assert scan.paths() == self._paths
        assert {p: e.key for p, e in scan.entries.items()} == {
            p: e.key for p, e in self.entries.items()
        }
        compared.extend(named)

    monkeypatch.setattr(CachedInputs, "wrote", checked)
    result = compile_workspace(live, env={}, no_model=True, clock=lambda: NOW)
    assert result.ops.archived and result.ops.trashed
    assert any(p.startswith("archive/") for p in compared)  # moves: both ends checked
