"""The optional `semantic` extra: bundled local embeddings fused with the lexical score.

The test extra installs it (so these run in CI); conftest switches it off for every other test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crustacean.recall import semantic
from crustacean.recall.search import SearchIndex
from crustacean.workspace import Workspace


def write(ws: Workspace, rel: str, text: str) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


@pytest.fixture
def extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(semantic.ENV, "1")
    semantic.forget()
    if semantic.load() is None:
        pytest.fail("the semantic extra is part of the test extra: pip install -e '.[test]'")
    yield
    semantic.forget()


def vectors(ws: Workspace) -> int:
    with SearchIndex(ws) as index:
        return index.db.conn.execute("SELECT count(*) FROM search_vectors").fetchone()[0]


def lines(ws: Workspace) -> int:
    with SearchIndex(ws) as index:
        return index.db.conn.execute("SELECT count(*) FROM search_lines").fetchone()[0]


def test_installed_it_finds_a_line_worded_differently(ws: Workspace, extra: None) -> None:
    write(ws, "memory/notes/pets.md", "# Notes\n\nWe adopted a puppy from the shelter.\n")
    write(ws, "memory/notes/work.md", "# Work\n\nThe invoice for March is late.\n")
    with SearchIndex(ws) as index:
        hits = index.search("dog")  # no line holds the word
    assert hits and hits[0].path == "memory/notes/pets.md"
    assert vectors(ws) == lines(ws)


def test_vectors_follow_the_index_incrementally(ws: Workspace, extra: None) -> None:
    write(ws, "memory/notes/a.md", "one line\nanother line\n")
    with SearchIndex(ws) as index:
        index.update()
        before = vectors(ws)
        write(ws, "memory/notes/a.md", "one line\nanother line\na third line\n")
        index.update()
        assert vectors(ws) == before + 1 == lines(ws)
        (ws.root / "memory/notes/a.md").unlink()
        index.update()
    assert vectors(ws) == lines(ws)


def test_files_indexed_before_the_extra_are_embedded_on_the_next_update(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(ws, "memory/notes/a.md", "We adopted a puppy.\n")
    monkeypatch.setenv(semantic.ENV, "0")
    with SearchIndex(ws) as index:
        index.update()
    assert vectors(ws) == 0
    monkeypatch.setenv(semantic.ENV, "1")
    semantic.forget()
    with SearchIndex(ws) as index:
        assert index.update().indexed == 0  # nothing re-read: only the missing vectors
        assert index.search("dog")[0].path == "memory/notes/a.md"
    assert vectors(ws) == lines(ws) > 0
    semantic.forget()


def test_absent_search_is_lexical_and_stores_no_vectors(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(semantic.ENV, "1")
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama raises ImportError
    semantic.forget()
    assert semantic.load() is None
    write(ws, "memory/notes/pets.md", "We adopted a puppy from the shelter.\n")
    with SearchIndex(ws) as index:
        assert index.search("dog") == []
        assert [h.path for h in index.search("puppies")] == ["memory/notes/pets.md"]
    assert vectors(ws) == 0
    semantic.forget()


def test_a_wordllama_without_bundled_weights_stays_lexical(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(semantic.ENV, "1")
    monkeypatch.setattr(semantic, "_WEIGHTS", "no/such/weights.safetensors")
    semantic.forget()
    assert semantic.load() is None  # never a download
    semantic.forget()
