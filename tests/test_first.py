"""conftest's FIRST names tests that exist: a renamed or merged test would otherwise drop out of
the front of the run silently, and run late again."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import FIRST

REPO = Path(__file__).resolve().parents[1]


def test_every_test_started_first_exists() -> None:
    missing = []
    for nodeid in FIRST:
        path, name = nodeid.split("::")
        tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if name.split("[", 1)[0] not in defined:
            missing.append(nodeid)
    assert missing == [], f"conftest.FIRST names tests that are gone: {missing}"
