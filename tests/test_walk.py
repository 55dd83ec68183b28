"""The one workspace walker (workspace.walk) and each caller's skip rule, on one tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from crustacean.workspace import CHECKED, MEMORY_HOMES, NOT_GIT, RECALLED, WRITABLE, Skip, walk

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
