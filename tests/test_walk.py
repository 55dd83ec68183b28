"""The one workspace walker (workspace.walk) and each caller's skip rule, on one tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.workspace import (
    CHECKED,
    MEMORY_HOMES,
    NOT_GIT,
    RECALLED,
    WRITABLE,
    Skip,
    Workspace,
    walk,
)

FILES = (
    "MEMORY.md",
    ".git/HEAD",
    ".crustacean/state.db",
    "archive/trash/2026-01-02/memory/x.md",
    "archive/daily/2026-01/2026-01-01.md",
    "memory/.system/COLLECT.md",
    "memory/notes/a.md",
    "memory/notes/.drafts/b.md",
    "node_modules/pkg/index.js",
    "deep/.git/config",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    (tmp_path / "memory/notes/link.md").symlink_to(tmp_path / "MEMORY.md")
    (tmp_path / "memory/linked").symlink_to(tmp_path / "archive", target_is_directory=True)
    return tmp_path


def files(root: Path, skip: Skip, under: str = "") -> set[str]:
    return {rel for rel, entry in walk(root, skip, under) if entry.is_file(follow_symlinks=False)}


ALL = set(FILES)
OWN = {p for p in FILES if p.startswith((".git/", ".crustacean/"))}
TRASHED = {"archive/trash/2026-01-02/memory/x.md"}
HIDDEN = OWN | {"memory/.system/COLLECT.md", "memory/notes/.drafts/b.md", "deep/.git/config"}


@pytest.mark.parametrize(
    ("skip", "expected"),
    [
        (WRITABLE, ALL - OWN - TRASHED),
        (RECALLED, ALL - HIDDEN - TRASHED),
        (CHECKED, ALL - OWN - {"node_modules/pkg/index.js", "deep/.git/config"}),
        (NOT_GIT, ALL - {".git/HEAD"}),
    ],
)
def test_each_skip_rule_leaves_out_its_folders_and_never_enters_a_symlink(
    tree: Path, skip: Skip, expected: set[str]
) -> None:
    assert files(tree, skip) == expected


def test_a_walk_under_a_folder_names_paths_from_the_root(tree: Path) -> None:
    assert files(tree, MEMORY_HOMES, "memory/notes") == {"memory/notes/a.md"}
    linked = {rel for rel, e in walk(tree, MEMORY_HOMES, "memory") if e.is_symlink()}
    assert linked == {"memory/notes/link.md", "memory/linked"}  # yielded, never entered


def test_an_unreadable_folder_is_named_when_asked(tree: Path) -> None:
    problems: list[tuple[str, str]] = []
    assert list(walk(tree, RECALLED, "missing", problems)) == []
    assert problems and problems[0][0] == "missing/"
    assert list(walk(tree, RECALLED, "missing")) == []  # not asked: skipped quietly


# ---------------------------------------------------------------- what no caller can read


def odd_tree(root: Path) -> None:
    """A symlink loop, a two-link loop and a FIFO, as `ln -s` and `mkfifo` make them."""
    notes = root / "memory/notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "self.md").symlink_to("self.md")
    (notes / "a.md").symlink_to("b.md")
    (notes / "b.md").symlink_to("a.md")
    os.mkfifo(root / "memory/fifo.md")
    (notes / "kept.md").write_text("# Kept\n\nThe beans are sown.\n")


def test_symlink_loops_and_fifos_are_left_out_and_named(tmp_path: Path) -> None:
    odd_tree(tmp_path)
    problems: list[tuple[str, str]] = []
    found = {rel for rel, _ in walk(tmp_path, CHECKED, problems=problems)}
    assert found == {"memory/notes/kept.md"}
    assert sorted(problems) == [
        ("memory/fifo.md", "a FIFO; skipped"),
        ("memory/notes/a.md", "a symlink loop; skipped"),
        ("memory/notes/b.md", "a symlink loop; skipped"),
        ("memory/notes/self.md", "a symlink loop; skipped"),
    ]


@pytest.mark.parametrize("command", [["health"], ["compile", "--plan"], ["calibrate", "--plan"]])
def test_health_compile_and_calibrate_neither_crash_nor_hang_on_them(
    ws: Workspace, command: list[str]
) -> None:
    """Before: `OSError: [Errno 40]` tracebacks, and health waiting forever on the FIFO. A
    subprocess, so a hang would end at the (generous) safety timeout instead of never."""
    odd_tree(ws.root)
    before = memory(ws.root)
    done = subprocess.run(
        [sys.executable, "-m", "crustacean", "-w", str(ws.root), *command],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in done.stderr and "Errno" not in done.stdout + done.stderr
    assert done.returncode in (0, 1), done.stderr
    if command == ["health"]:
        assert "memory/fifo.md: a FIFO; skipped" in done.stdout
        assert "memory/notes/self.md: a symlink loop; skipped" in done.stdout
    else:
        assert memory(ws.root) == before


def memory(root: Path) -> dict[str, str]:
    """Every file but crustacean's own state (a plan may cache what it read there)."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".crustacean/")}
