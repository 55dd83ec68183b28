"""`crustacean undo VERSION [PATH]`: one version's files back as they were just before it, as a
new version, with rollback's refusals (the library and the CLI)."""

from __future__ import annotations

import json

import pytest
from store_helpers import git
from test_store_history import DAY, Versions, count, files, versions_after

from conftest import run_cli, snapshot
from crustacean.errors import StaleWriteError, VersionError
from crustacean.store import history as hist
from crustacean.store.write import Store
from crustacean.workspace import Workspace


@pytest.fixture
def store(copied_ws: Workspace) -> Store:
    return Store(copied_ws, clock=lambda: DAY)


@pytest.fixture
def agent(store: Store) -> Versions:
    """v1: the user makes a and b; v2: curate edits a and adds c (the change to undo); v3: the
    user edits b."""
    a, b = "memory/notes/a.md", "memory/notes/b.md"
    return versions_after(
        store,
        (
            [
                {"path": a, "mode": "create", "content": "# A\n\nplot 17\n"},
                {"path": b, "mode": "create", "content": "# B\n"},
            ],
            "user",
            "w",
        ),
        (
            [
                {"path": a, "mode": "append", "content": "plot 18 (wrong)\n"},
                {"path": "knowledge/c.md", "mode": "create", "content": "# C\n"},
            ],
            "curate",
            "curate: plots",
        ),
        ([{"path": b, "mode": "append", "content": "b\n"}], "user", "w"),
    )


def test_undo_puts_the_version_s_files_back_and_keeps_the_later_ones(agent) -> None:
    store, v, states = agent
    before = count(store.root)
    plan, result = hist.undo(store, v[2])
    assert plan.parent == v[1] and plan.later == []
    assert sorted(result.files) == [
        "archive/trash/2024-05-01/knowledge/c.md",  # created by that version: to the trash
        "knowledge/c.md",
        "memory/notes/a.md",
    ]
    now = files(store)
    assert now["memory/notes/a.md"] == states[1]["memory/notes/a.md"]
    assert "knowledge/c.md" not in now
    assert now["memory/notes/b.md"] == states[3]["memory/notes/b.md"]  # a later change, kept
    assert count(store.root) == before + 1
    message = git(store.root, "log", "-1", "--format=%s%n%an").split("\n")
    assert message[:2] == [f"undo 2 file(s) of version {v[2][:12]}", "crustacean user"]
    hist.undo(store, result.version or "")  # an undo can be undone in turn
    assert files(store) == states[3]


def test_undo_of_one_file_leaves_the_rest(agent) -> None:
    store, v, states = agent
    _, result = hist.undo(store, v[2], "memory/notes/a.md")
    assert result.files == ("memory/notes/a.md",)
    assert files(store)["knowledge/c.md"] == states[2]["knowledge/c.md"]


def test_undo_names_files_a_later_version_changed_too(agent) -> None:
    store, v, _states = agent
    plan = hist.undo_changes(store, v[1])
    assert plan.later == ["memory/notes/a.md", "memory/notes/b.md"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("{v2}", "memory/notes/b.md"), 2, "did not change memory/notes/b.md; `crustacean show"),
        (("{v0}",), 2, "is the workspace's first version; there is nothing before it"),
        (("nope",), 2, "unknown version 'nope'; see `crustacean history` for ids."),
        (("{v2}", "../x.md"), 1, "uses '..'; paths must stay inside the workspace."),
    ],
)
def test_undo_refusals_change_nothing(
    agent, args: tuple[str, ...], code: int, message: str
) -> None:
    store, v, _ = agent
    argv = [a.format(v0=v[0], v2=v[2]) for a in args]
    before = snapshot(store.root)
    res = run_cli("-w", str(store.root), "undo", *argv, code=code)
    assert res.stderr.startswith("Error: ") and message in res.stderr
    assert res.stderr.count("\n") <= 2
    assert snapshot(store.root) == before


def test_undo_is_refused_when_a_file_changed_under_it(agent) -> None:
    store, v, _ = agent
    plan = hist.undo_changes(store, v[2])
    (store.root / "memory/notes/a.md").write_text("# A\n\nhand edit\n")
    with pytest.raises(StaleWriteError):
        store.write_context(plan.changes, actor="user", message="undo", max_files=9)


def test_undo_cli_text_and_json(agent) -> None:
    store, v, _states = agent
    w = ("-w", str(store.root))
    out = run_cli(*w, "undo", v[2][:12], "memory/notes/a.md").stdout
    assert out.startswith(f"Undid version {v[2][:12]} as version ")
    assert "  memory/notes/a.md\n" in out
    again = run_cli(*w, "undo", v[2][:12], "memory/notes/a.md").stdout
    assert again.startswith("Nothing to undo: the files already match the version before ")
    data = json.loads(run_cli(*w, "undo", v[1], "--json").stdout)
    assert data["undone"] == v[1] and data["later"] == ["memory/notes/b.md"]  # a is as v1 left it
    with pytest.raises(VersionError):
        hist.undo_changes(store, v[0])
