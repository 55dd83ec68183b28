"""`crustacean compile` on a generated 3-month workspace, through the fake API."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakeapi import tool_use
from stagekit import live, write_call
from store_helpers import git

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.errors import LimitError
from crustacean.stages.compile import compile_workspace
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # a Sunday
TODAY = NOW.date()
KEY = "test-key"


def clock() -> datetime:
    return NOW


def put(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def build(root: Path) -> list[str]:
    """Three months of logs, hook files, junk, tiered notes and an overgrown MEMORY.md."""
    for d in range(92):
        day = TODAY - timedelta(days=d)
        put(root, f"memory/{day.isoformat()}.md", f"# {day}\n\n### [09:00] chat\n\n- note {d}\n")
    put(root, f"memory/{(TODAY - timedelta(days=40)).isoformat()}-api-design.md", "hook summary\n")
    put(root, f"memory/{TODAY.isoformat()}-fresh-hook.md", "today's hook summary\n")
    for odd in ("2026-13-40.md", "2026-01-05-.md", "2026-01-05.md.bak"):
        put(root, f"memory/{odd}", f"odd name {odd}\n")
    put(root, "memory/notes/empty.md", "")
    put(root, "memory/notes/dup-a.md", "# Same\nsame words\n")
    put(root, "memory/notes/dup-b.md", "# Same\nsame words\n")
    put(root, "memory/notes/old-hot.md", "---\nrecorded: 2026-06-01\n---\nold hot\n")
    sections = "".join(
        f"## Project {i}\n" + "".join(f"- detail {i}.{j}\n" for j in range(40)) for i in range(15)
    )
    memory = (
        "# MEMORY.md\n\n## 🔥 Hot / Time-Sensitive\n- **Rule:** never move me\n\n"
        "## 📂 Memory Structure Map\n- memory/ — episodic\n\n" + sections
    )
    put(root, "MEMORY.md", memory)
    return memory.splitlines()


@pytest.fixture
def setup(ws: Workspace, fake_api: Any) -> dict[str, Any]:
    lines = build(ws.root)
    running, env = live(ws, fake_api, key=KEY)
    return {"ws": running, "env": env, "fake": fake_api, "memory_lines": lines}


def run(s: dict[str, Any], **kw: Any) -> Any:
    return compile_workspace(s["ws"], env=s["env"], clock=clock, **kw)


def test_end_to_end_on_three_months(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    fake.enqueue(
        tool_use(
            write_call(
                "memory/lessons/lessons.md",
                "create",
                "lesson",
                content="# Lessons\n\n## Feed the starter\n**Learned:** 2026-11-20 (daily log)\n"
                "**Context:** it died.\n**Rule:** feed it twice a day.\n",
            ),
            write_call("memory/notes/old-hot.md", "move", "prune", to="archive/notes/old-hot.md"),
        ),
        tool_use(
            (
                "record_digest",
                {
                    "lessons": ["Feed the starter → memory/lessons/lessons.md"],
                    "patterns": ["sourdough came up 4 times"],
                    "flagged": ["memory/notes/dup-a.md may be stale"],
                },
            ),
            ("finish", {"summary": "done"}),
        ),
    )
    result = run(s)
    assert result.record.status == "ok", result.record.error
    ops = result.ops
    old = TODAY - timedelta(days=45)
    assert (root / f"archive/daily/{old:%Y-%m}/{old.isoformat()}.md").is_file()
    assert not (root / f"memory/{old.isoformat()}.md").exists()
    for d in range(31):  # within 30 days (and today, yesterday) nothing moves
        assert (root / f"memory/{(TODAY - timedelta(days=d)).isoformat()}.md").is_file()
    hook = f"{(TODAY - timedelta(days=40)).isoformat()}-api-design.md"
    assert (root / f"archive/daily/{(TODAY - timedelta(days=40)):%Y-%m}/{hook}").is_file()
    assert (root / f"memory/{TODAY.isoformat()}-fresh-hook.md").is_file()
    for odd in ("2026-13-40.md", "2026-01-05-.md", "2026-01-05.md.bak"):
        assert (root / f"memory/{odd}").is_file()
    assert not (root / "memory/notes/empty.md").exists()
    assert [
        p.exists() for p in (root / "memory/notes/dup-a.md", root / "memory/notes/dup-b.md")
    ].count(True) == 1
    assert any("old-hot.md" in t and "hot" in t for t in ops.tiers)

    memory = (root / "MEMORY.md").read_text()
    assert len(memory.splitlines()) <= 500 and len(memory) <= 12000
    assert "- **Rule:** never move me" in memory and "## 📂 Memory Structure Map" in memory
    everything = memory + "".join(p.read_text() for p in (root / "knowledge").rglob("*.md"))
    assert all(line in everything for line in s["memory_lines"] if line.strip())  # no line lost

    digest = (root / f"archive/digests/{TODAY.isoformat()}-weekly.md").read_text()
    assert digest.startswith(f"# Weekly Digest — {TODAY - timedelta(days=6)} to {TODAY}")
    assert f"- Files archived: {len(ops.archived) + len(ops.swept)}" in digest
    assert "- move memory/notes/old-hot.md → archive/notes/old-hot.md" in digest
    assert "Feed the starter" in digest and "sourdough came up 4 times" in digest
    assert "## Flagged for Calibrate\n- memory/notes/dup-a.md may be stale" in digest
    for line in ops.tiers + ops.archived:
        assert line in digest
    log = git(root, "log", "--format=%an|%s")
    assert "crustacean compile|compile: archive" in log and "compile: weekly digest" in log

    before = snapshot(root)
    again = run(s)  # the same day: nothing left to do, and no second model pass
    assert again.record.status == "skipped" and len(fake.messages()) == 2
    after = snapshot(root)
    assert {k: v for k, v in after.items() if not k.startswith(".crustacean")} == {
        k: v for k, v in before.items() if not k.startswith(".crustacean")
    }


def test_no_model_runs_only_the_deterministic_pass(setup: dict[str, Any]) -> None:
    fake, root = setup["fake"], setup["ws"].root
    out = run_cli("-w", str(root), "compile", "--no-model").stdout
    assert "archived:" in out and "Model pass: skipped (--no-model)." in out
    assert fake.requests == [] and list(root.glob("archive/digests/*-weekly.md"))


def test_model_cannot_rm_or_overwrite_a_log_or_drop_half_of_memory(setup: dict[str, Any]) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    compile_workspace(s["ws"], env={}, clock=clock, no_model=True)
    memory = (root / "MEMORY.md").read_text()
    half = "\n".join(memory.splitlines()[: len(memory.splitlines()) // 2]) + "\n"
    log = f"memory/{TODAY.isoformat()}.md"
    fake.enqueue(
        tool_use(
            write_call(log, "overwrite", content="gone"),
            write_call("MEMORY.md", "edit", old=memory, new=half),
            write_call("SOUL.md", "delete"),
        ),
        tool_use(("finish", {"summary": "tried"})),
    )
    before = (root / log).read_bytes(), (root / "MEMORY.md").read_bytes()
    ws = Workspace(root, load_config(root, env=s["env"]))
    compile_workspace(ws, env=s["env"], clock=lambda: NOW + timedelta(days=1))
    replies = fake.messages()[1].body["messages"][-1]["content"]
    assert (
        replies[0]["is_error"]
        and "compile is not offered mode 'overwrite'" in replies[0]["content"]
    )
    assert replies[1]["is_error"] and "compile.max_loss_fraction" in replies[1]["content"]
    assert replies[2]["is_error"] and "compile never changes SOUL.md" in replies[2]["content"]
    assert ((root / log).read_bytes(), (root / "MEMORY.md").read_bytes()) == before
    with pytest.raises(LimitError, match="would lose"):
        Store(ws).write_context(
            [{"path": "MEMORY.md", "mode": "edit", "old": memory, "new": half}],
            actor="compile",
            message="x",
        )


def test_collisions_both_daily_folders_and_a_clock_that_jumped_back(
    setup: dict[str, Any],
) -> None:
    s, root = setup, setup["ws"].root
    old = TODAY - timedelta(days=60)
    put(root, f"archive/daily/{old:%Y-%m}/{old.isoformat()}.md", "already archived\n")
    put(root, f"memory/daily/{(old - timedelta(days=1)).isoformat()}.md", "in memory/daily\n")
    put(root, f"memory/{(TODAY + timedelta(days=3)).isoformat()}.md", "from the future\n")
    compile_workspace(s["ws"], env={}, clock=clock, no_model=True)
    assert (root / f"archive/daily/{old:%Y-%m}/{old.isoformat()}.md").read_text() == (
        "already archived\n"
    )
    assert (root / f"archive/daily/{old:%Y-%m}/{old.isoformat()}~2.md").is_file()
    assert (
        root / f"archive/daily/{old - timedelta(days=1):%Y-%m}/"
        f"{(old - timedelta(days=1)).isoformat()}.md"
    ).is_file()
    assert (root / f"memory/{(TODAY + timedelta(days=3)).isoformat()}.md").is_file()


def test_interrupted_between_passes_then_idempotent(
    setup: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    from crustacean.stages import compile as compile_mod

    def boom(*args: Any, **kw: Any) -> str:
        raise KeyboardInterrupt("killed before the model pass")

    monkeypatch.setattr(compile_mod, "candidates_prompt", boom)
    with pytest.raises(KeyboardInterrupt):
        run(s)
    monkeypatch.undo()
    status = git(root, "status", "--porcelain", "--untracked-files=no")
    assert status.strip() == ""  # every step that ran is a whole version
    assert not (root / ".crustacean/journal.json").exists()
    fake.enqueue(tool_use(("finish", {"summary": "nothing"})))
    second = run(s)
    assert not second.ops.archived and not second.ops.trashed and not second.ops.tiers
    assert second.record.status == "ok"


def test_not_a_git_repo(tmp_path: Path) -> None:
    from crustacean.ops.init import init_workspace

    root = tmp_path / "plain"
    init_workspace(root)
    shutil.rmtree(root / ".git")
    build(root)
    ws = Workspace(root, load_config(root, env={}))
    result = compile_workspace(ws, env={}, clock=clock, no_model=True)
    assert result.ops.archived and result.ops.versions == []
    assert len((root / "MEMORY.md").read_text().splitlines()) <= 500
