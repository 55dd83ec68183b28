"""`--plan` for every stage and for `tick`: what would run and cost, with no model call, nothing
written and no run recorded; and sources given relative to the workspace."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_collect_exact import header, line

from conftest import run_cli
from conftest import snapshot as _snapshot
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.ops.tick import tick
from crustacean.runs import list_runs
from crustacean.workspace import Workspace


def snapshot(root: Path) -> dict[str, str]:
    """Every file but crustacean's own state (a plan may create the state database)."""
    return {k: v for k, v in _snapshot(root).items() if not k.startswith(".crustacean/")}


NOW = datetime.now(UTC)


def _fresh_openclaw(dst: Path) -> None:
    """A small OpenClaw session from an hour ago, so collect's two-day window sees it."""
    hour_ago = NOW - timedelta(hours=1)
    dst.mkdir(parents=True)
    session = header("s-plan", hour_ago) + line("m1", "user", "Call Ana at 5.", hour_ago)
    (dst / "s-plan.jsonl").write_text(session)


@pytest.fixture
def planned(tmp_path: Path) -> Path:
    """A workspace whose source is a relative path inside it, with one new message and one
    uncurated daily entry."""
    root = tmp_path / "ws"
    init_workspace(root, detect=False)
    _fresh_openclaw(root / "transcripts/agents/main/sessions")
    toml = root / "crustacean.toml"
    toml.write_text(
        toml.read_text() + '\n[[sources]]\nkind = "openclaw"\npath = "transcripts/agents"\n'
    )
    today = NOW.astimezone(Workspace(root, load_config(root)).tz).date()
    (root / f"memory/{today}.md").write_text(f"# {today}\n\n### [09:00] garden\n- Ana: plot 4\n")
    return root


def test_tick_plan_shows_every_stage_and_its_cost_without_a_call(
    planned: Path, monkeypatch: pytest.MonkeyPatch, fake_api: Any
) -> None:
    """No key, no base URL: still a plan; the fake server would have failed any call."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(planned)
    before = snapshot(planned)
    out = run_cli("tick", "--plan").output
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == [
        "collect",
        "curate",
        "compile",
        "calibrate",
    ]
    assert "1 new message(s) in 1 transcript file(s); claude-haiku-5-5" in lines[0]
    assert "1 uncurated daily entry; claude-sonnet-5-5" in lines[1]
    assert "model pass would run; claude-opus-5-5" in lines[2]
    assert all("input tokens, ~$" in line for line in lines[:4])
    assert "Nothing was run or written." in out
    assert snapshot(planned) == before and fake_api.requests == []
    ws = Workspace(planned, load_config(planned))
    assert list_runs(ws) == []


def test_tick_plan_json_and_a_stage_with_nothing_to_do(planned: Path) -> None:
    ws = Workspace(planned, load_config(planned))
    shutil.rmtree(planned / "transcripts")
    result = tick(ws, plan=True)
    stages = {o.stage: o.to_json() for o in result.outcomes}
    assert stages["collect"]["plan"]["model"] is None
    assert stages["collect"]["plan"]["summary"].endswith("no model call")
    assert stages["compile"]["plan"]["est_cost"] > 0
    assert result.to_json()["plan"] is True and result.exit_code == 0
    assert result.est_cost == pytest.approx(sum(s["plan"]["est_cost"] for s in stages.values()))


def test_tick_plan_skips_a_disabled_stage(planned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(planned)
    out = run_cli("-c", "stages.calibrate.enabled=false", "tick", "--plan").output
    assert "calibrate: disabled" in out


def test_tick_plan_and_dry_run_together_is_a_usage_error(
    planned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(planned)
    before = snapshot(planned)
    result = run_cli("tick", "--plan", "--dry-run", code=2)
    assert "--dry-run and --plan can't be combined" in result.output
    assert snapshot(planned) == before


def test_compile_plan_lists_the_deterministic_pass_and_writes_nothing(
    planned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old daily log would be archived; the plan says so and leaves it where it is."""
    monkeypatch.chdir(planned)
    old = planned / "memory/2020-01-01.md"
    old.write_text("# 2020-01-01\n\n### [09:00] old\n- something old\n")
    before = snapshot(planned)
    out = run_cli("compile", "--plan").output
    assert "archived: memory/2020-01-01.md → archive/daily/" in out
    assert "Model pass: would run." in out and "Plan: claude-opus-5-5" in out
    assert snapshot(planned) == before and old.is_file()
    data = json.loads(run_cli("compile", "--plan", "--json").output)
    assert data["status"] == "plan" and data["run"] is None and data["plan"]["est_cost_first_turn"]
    assert list_runs(Workspace(planned, load_config(planned))) == []


def test_calibrate_plan_runs_the_health_check_and_sends_nothing(
    planned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(planned)
    before = snapshot(planned)
    out = run_cli("calibrate", "--plan").output
    assert out.startswith("Health: ") and "Plan: claude-opus-5-5" in out and "Audit" not in out
    assert snapshot(planned) == before


def test_a_relative_source_path_is_inside_the_workspace_wherever_cron_starts(
    planned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    data = json.loads(run_cli("-w", str(planned), "collect", "--plan", "--json").output)
    assert data["new_messages"] == 1 and data["missing_sources"] == []
