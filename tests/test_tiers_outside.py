"""Issue 34, item 10: code never writes a tier into a file a person wrote. Compile's lifecycle
keeps its tiers in state.db; a `tier:` the person wrote in the frontmatter still wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import snapshot
from crustacean.config import load_config
from crustacean.ops.init import init_sample
from crustacean.recall.memories import load_memories
from crustacean.recall.memory_ops import tier_rows
from crustacean.stages.compile import compile_workspace
from crustacean.state import open_state
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
RULING = "memory/lessons/co-op-invoices.md"


def test_the_lifecycle_keeps_its_tiers_outside_the_files(tmp_path: Path) -> None:
    root = tmp_path / "sample"
    init_sample(root, NOW)
    ws = Workspace(root, load_config(root, overrides=["workspace.timezone=UTC"]))
    memories = {p: b for p, b in snapshot(root).items() if p.startswith(("memory/", "knowledge/"))}
    later = NOW + timedelta(days=40)  # nothing recalled: the ruling (hot by its folder) fades
    result = compile_workspace(ws, env={}, no_model=True, clock=lambda: later)
    assert any(t.startswith(f"{RULING}: hot→") for t in result.ops.tiers)
    after = snapshot(root)
    for path, sha in memories.items():  # no memory file gained a byte; only whole-file moves
        assert after.get(path, sha) == sha, path
    with open_state(ws) as db:
        kept = db.stored_tiers()
    assert kept[RULING].tier in ("warm", "cold") and not kept[RULING].manual
    tiers = {m.path: m.tier for m in load_memories(ws)[0]}
    assert tiers[RULING] == kept[RULING].tier
    # the sample's Ana file names `tier: hot` itself: the person's word wins, and stays
    assert tiers["memory/contacts/telegram-ana.md"] == "hot"
    assert "memory/contacts/telegram-ana.md" not in kept
    rows = {r.path: r for r in tier_rows(ws)[0]}
    assert rows["memory/contacts/telegram-ana.md"].how.startswith("its own frontmatter")
    assert rows[RULING].how == "lifecycle"
