"""The core functions the thin CLI commands call: each returns data (no printing, no exit), so
these tests assert on values; the CLI tests keep asserting the words the user sees."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.config import SourceConfig, config_rows, load_config
from crustacean.errors import UsageError
from crustacean.ops.init import InitRequest, initialize
from crustacean.recall import memory_ops
from crustacean.store import history, review
from crustacean.store.write import Store
from crustacean.workspace import Workspace


def test_config_rows_say_where_each_value_came_from() -> None:
    loaded = load_config(None, env={}, overrides=["memory.write=off"])
    rows = {r.key: r for r in config_rows(loaded)}
    assert rows["memory.write"].layer == "flag" and rows["memory.write"].value == "off"
    assert rows["memory.write"].to_json() == {
        "key": "memory.write",
        "value": "off",
        "default": rows["memory.write"].default,
        "layer": "flag",
        "source": loaded.sources.get("flag", ""),
        "locked": False,
        "redundant": False,
    }
    assert config_rows(loaded, redundant_only=True) == []  # a flag is never "redundant"


def test_tier_rows_filter_by_tier(ws: Workspace) -> None:
    now = datetime(2026, 3, 4, 12, tzinfo=UTC)
    memory_ops.remember(ws, "warm-one", "A warm ruling.", source=None, tier="warm", now=now)
    memory_ops.remember(ws, "cold-one", "A cold ruling.", source=None, tier="cold", now=now)
    rows, _ = memory_ops.tier_rows(ws, "warm")
    assert [r.path for r in rows] == [memory_ops.lesson_path("warm-one")]
    assert rows[0].to_json()["tier"] == "warm"
    everything, _ = memory_ops.tier_rows(ws)
    assert {memory_ops.lesson_path("warm-one"), memory_ops.lesson_path("cold-one")} <= {
        r.path for r in everything
    }


def test_history_listing_tells_no_versions_of_a_file_from_none_at_all(ws: Workspace) -> None:
    store = Store(ws)
    found = history.listing(store, "memory/never.md", 5)
    assert found.versions == [] and found.any_version is True
    assert history.listing(store, None, 1).versions[0].to_json()["id"] == store.git.head()


def test_a_decided_proposal_keeps_its_diff(ws: Workspace) -> None:
    """`review show` shows what a rejected proposal would have changed (issue 36 item 7)."""
    ask = Workspace(ws.root, load_config(ws.root, env={}, overrides=["mcp.write=ask"]))
    change = {"path": "memory/notes/p.md", "mode": "create", "content": "# P\n"}
    queued = Store(ask).write_context([change], actor="mcp", message="p")
    pid = queued.proposal
    assert pid is not None
    pending = review.examine(Store(ws), pid)
    assert pending.diff is not None and "+# P" in pending.diff
    review.reject(Store(ws), pid, "no")
    decided = review.examine(Store(ws), pid)
    assert decided.proposal.status == "rejected" and "+# P" in (decided.diff or "")
    assert "+# P" in decided.to_json()["diff"] and decided.to_json()["paths"] == [
        "memory/notes/p.md"
    ]


@pytest.mark.parametrize(
    ("request_kw", "message"),
    [
        ({"sample": True, "daily_dir": "daily"}, "--sample uses its own layout"),
        ({"sample": True, "sources": ("openclaw",)}, "--sample uses its own layout"),
        ({"sources": ("openclaw",), "detect": False}, "--no-detect adds none"),
    ],
)
def test_contradictory_init_flags_are_refused_before_anything_is_made(
    tmp_path: Path, request_kw: dict[str, object], message: str
) -> None:
    before = snapshot(tmp_path)
    with pytest.raises(UsageError, match=message):
        InitRequest(tmp_path / "w", **request_kw)  # type: ignore[arg-type]  # the table's kwargs
    assert snapshot(tmp_path) == before and not (tmp_path / "w").exists()


def test_initialize_asks_the_chooser_only_when_both_platforms_are_found(tmp_path: Path) -> None:
    home = tmp_path / "home"  # the autouse fixture's HOME
    (home / ".openclaw/agents/main/sessions").mkdir(parents=True)
    (home / ".claude/projects").mkdir(parents=True)
    asked: list[list[str]] = []

    def choose(offered: list[SourceConfig]) -> list[SourceConfig]:
        asked.append([s.kind for s in offered])
        return [s for s in offered if s.kind == "claude_code"]

    initialize(InitRequest(tmp_path / "a"), choose)
    assert asked == [["openclaw", "claude_code"]]
    assert [s.kind for s in load_config(tmp_path / "a", env={}).settings.sources] == ["claude_code"]
    initialize(InitRequest(tmp_path / "b", sources=("openclaw",)), choose)  # named: not asked
    initialize(InitRequest(tmp_path / "c", detect=False), choose)  # --no-detect: not asked
    assert len(asked) == 1
