"""Near words: with the semantic extra, a rare query word also matches the vocabulary's words
nearest to it ("car" for "automobile"), ranked after the lines holding the word itself."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from crustacean.recall import semantic
from crustacean.recall.search import SearchIndex
from crustacean.recall.search_read import Scored, Word
from crustacean.workspace import Workspace


@pytest.fixture
def extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[semantic.Embedder]:
    monkeypatch.setenv(semantic.ENV, "1")
    semantic.forget()
    embedder = semantic.load()
    if embedder is None:
        pytest.fail("the semantic extra is part of the test extra: pip install -e '.[test]'")
    yield embedder
    semantic.forget()


def W(body: set[int], near: Iterable[int] = (), weight: float = 1.0) -> Word:
    return Word(set(body), set(), weight, near=frozenset(near))


@pytest.mark.parametrize(
    ("words", "want"),
    [
        # one word: the line holding it, then the line holding only a near word of it
        ([W({5}, near={2})], [5, 2]),
        # two words: both held > one held and one near > one held alone
        ([W({1, 7}, near={4}), W({1, 4, 9})], [1, 4, 7, 9]),
        # a near word counts only for its own word: line 3 holds no word of the second, so it
        # ranks in the first word's one-word tier (after the heavier second word's)
        ([W({8}, near={3}), W({8, 6}, weight=2.0)], [8, 6, 3]),
        # no near words at all: the plain tiers
        ([W({1, 2}), W({2, 3})], [2, 1, 3]),
    ],
)
def test_a_near_word_ranks_in_its_tier_after_the_word_itself(
    words: list[Word], want: list[int]
) -> None:
    ranked = Scored(words, firsts=set(range(20))).ranked(None, 10)
    assert [r for r, _, _ in ranked] == want


def test_near_lines_obey_the_scope() -> None:
    ranked = Scored([W({5}, near={2, 12})], firsts=set(range(20))).ranked(lambda r: r < 10, 10)
    assert [r for r, _, _ in ranked] == [5, 2]


def test_neighbours_are_other_words_close_in_meaning(
    extra: semantic.Embedder, tmp_path: Path
) -> None:
    near = extra.neighbours("automobile", tmp_path)
    assert "car" in near and "automobile" not in near
    assert not any("automobile".startswith(n) or n.startswith("automobile") for n in near)
    assert "doctor" in extra.neighbours("physician", tmp_path)
    assert len(near) <= semantic.NEAR_WORDS
    assert list(tmp_path.glob(f"{semantic.WORD_FILES}-*.npy"))  # the table is kept


# Near words the float16 word table gave before it was kept as mapped float32 rows (main at
# d7c3102, wordllama 0.4's bundled tokenizer): the same table values, so the same words.
BEFORE_MAPPING = {
    "automobile": ["car", "cars", "vehicle", "vehicles", "veh"],
    "physician": ["doctor", "medical"],
    "garden": ["plants", "yard", "soil", "plant"],
    "ocean": ["sea", "coast", "marine", "beach"],
    "Programming": ["programs", "programmer", "programme"],
    "dentist": ["teeth"],
    "holiday": [],
}


def test_the_mapped_word_table_gives_the_near_words_of_the_float16_one(
    extra: semantic.Embedder, tmp_path: Path
) -> None:
    built = {word: extra.neighbours(word, tmp_path) for word in BEFORE_MAPPING}  # and kept
    semantic.forget()
    mapped = semantic.load()  # a later process: the table read from the kept file
    assert mapped is not None
    assert {word: mapped.neighbours(word, tmp_path) for word in BEFORE_MAPPING} == built
    assert built == BEFORE_MAPPING
    names, rows = mapped._words(tmp_path)
    np = mapped.np
    assert isinstance(rows, np.memmap) and isinstance(names, np.memmap)  # not converted
    assert rows.dtype == np.float32 and np.array_equal(rows, rows.astype(np.float16))


def test_a_word_table_of_the_older_layout_is_rebuilt(
    extra: semantic.Embedder, tmp_path: Path
) -> None:
    extra.neighbours("automobile", tmp_path)
    (kept,) = tmp_path.glob(f"{semantic.WORD_FILES}-*.npy")
    np = extra.np
    old = np.zeros(2, dtype=[("name", semantic._NAME), ("row", np.float16, (4,))])
    np.save(kept, old)
    semantic.forget()
    fresh = semantic.load()
    assert fresh is not None and "car" in fresh.neighbours("automobile", tmp_path)
    assert np.load(kept).dtype["row"].base == np.float32


def test_the_word_table_is_rebuilt_when_its_file_is_damaged(
    extra: semantic.Embedder, tmp_path: Path
) -> None:
    extra.neighbours("automobile", tmp_path)
    (kept,) = tmp_path.glob(f"{semantic.WORD_FILES}-*.npy")
    kept.write_bytes(b"not an array")
    semantic.forget()
    fresh = semantic.load()
    assert fresh is not None and "car" in fresh.neighbours("automobile", tmp_path)
    assert kept.read_bytes() != b"not an array"


def test_search_finds_the_line_worded_with_a_near_word(ws: Workspace, extra: None) -> None:
    notes = ws.root / "memory" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    filler = "".join(f"- Rui: line {k} about gardening and compost.\n" for k in range(60))
    (notes / "a.md").write_text(
        f"# Chat\n\n{filler}- Priya: We finally bought a car, a teal estate.\n{filler}", "utf-8"
    )
    (notes / "b.md").write_text(
        f"# Dreams\n\n{filler}- Priya: Purchased a purple automobile once.\n{filler}", "utf-8"
    )
    with SearchIndex(ws) as index:
        hits = index.search("automobile Priya purchased")
    lines = [h.text for h in hits]
    exact = next(i for i, t in enumerate(lines) if "automobile" in t)
    near = next(i for i, t in enumerate(lines) if "bought a car" in t)
    assert exact < near < 3, lines


def test_without_the_extra_no_near_word_is_used(ws: Workspace) -> None:
    notes = ws.root / "memory" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "a.md").write_text("# Chat\n\n- We finally bought a car.\n", "utf-8")
    with SearchIndex(ws) as index:
        assert not index.search("automobile")
