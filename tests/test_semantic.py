"""The optional `semantic` extra: bundled local embeddings fused with the lexical score.

The test extra installs it (so these run in CI); conftest switches it off for every other test.
"""

from __future__ import annotations

import os
import subprocess
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


@pytest.mark.parametrize(
    ("ranked", "keys", "want"),
    [
        # a copy goes after every first line, scored no higher than the last of them
        ([(1, 0.9), (2, 0.8), (3, 0.7)], [b"a", b"a", b"b"], [(1, 0.9), (3, 0.7), (2, 0.7)]),
        # copies keep their order among themselves
        (
            [(1, 0.9), (2, 0.8), (3, 0.6), (4, 0.5)],
            [b"a", b"a", b"a", b"b"],
            [(1, 0.9), (4, 0.5), (2, 0.5), (3, 0.5)],
        ),
        # a line with no vector (an empty key) is no copy of anything
        ([(1, 0.9), (2, 0.8), (3, 0.7)], [b"", b"", b"a"], [(1, 0.9), (2, 0.8), (3, 0.7)]),
        # no copies: the ranking as it was
        ([(1, 0.9), (2, 0.8)], [b"a", b"b"], [(1, 0.9), (2, 0.8)]),
        ([], [], []),
    ],
)
def test_copies_of_one_text_come_after_the_first_lines(
    ranked: list[tuple[int, float]], keys: list[bytes], want: list[tuple[int, float]]
) -> None:
    assert semantic.copies_last(ranked, keys) == want


def test_a_line_logged_on_many_days_takes_one_place(ws: Workspace, extra: None) -> None:
    """30 copies of one line hold both words; the one other line holding "dog" comes right
    after the first copy in the ranking (not 31st), so among the first hits, not after four
    windows of copies."""
    copies = "- Ana: the dog barked all night.\n" * 30
    garden = "".join(f"- Ana: compost for the garden, day {k}.\n" for k in range(200))
    lake = "- Ana: walked the dog to the lake.\n"
    write(ws, "memory/notes/dog.md", f"# Dog\n\n{copies}{garden}{lake}")
    with SearchIndex(ws) as index:
        hits = index.search("dog barked", 3)
    assert any("lake" in h.text for h in hits), [h.text for h in hits]


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


def test_the_lean_loader_embeds_as_wordllama_does(extra: None) -> None:
    """semantic.py pools the bundled weights itself, to skip importing wordllama; the vectors
    must be WordLlama's own, to the bit (stored vectors from before stay valid)."""
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    embedder = semantic.load()
    assert embedder is not None
    own = Tokenizer.from_file(str(embedder.tokenizer_file))  # WordLlama turns padding on
    theirs = WordLlamaInference(embedder.np.asarray(embedder.embedding), own)
    texts = [
        "We adopted a puppy from the shelter.",
        "- [09:14] Ana: the invoice for March is late?",
        "短い日本語の行",
        "x",
        *(f"line {i} of a long batch, words words {i * 7}" for i in range(70)),
    ]
    texts += [  # lengths far apart: batched by length, each with its own padding
        "word " * 300,
        "a",
        "  leading and trailing spaces  ",
        "tab\tand\nnewline",
        "emoji 🦀 and ñ, é, ü; ‖ unusual ‖ marks",
        "\u2581already marked\u2581",
    ]
    np = embedder.np
    assert np.array_equal(embedder.embed(texts), theirs.embed(texts, norm=True))
    assert np.array_equal(embedder.query(texts[0]), theirs.embed([texts[0]], norm=True)[0])


TRICKY = [
    "garden budget meeting",
    "We adopted a puppy from the shelter.",
    "  two  spaces   and three ",
    "tab\tnewline\ncarriage\rreturn",
    "短い日本語の行と中文和한국어",
    "emoji 🦀🦞 and combining e\u0301 and zero\u200bwidth",
    "\u2581marks\u2581\u2581inside",
    "x",
    " ",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "- [09:14] Ana: the invoice for March is late?",
    "URL https://example.org/a_b-c?d=e&f=g#h 12,345.67",
    "a<s>b and </s> and <unk>",  # added tokens: the tokenizer decides
    "",
]


def test_a_query_is_tokenized_from_the_cached_table_as_the_tokenizer_does(
    extra: None, tmp_path: Path
) -> None:
    """`query` tokenizes from a compact BPE table cached in the state folder, not by parsing
    the tokenizer; its ids, and so its vector, must be the tokenizer's."""
    embedder = semantic.load()
    assert embedder is not None
    table = semantic.bpe_table(embedder.tokenizer_file, tmp_path, embedder.np)
    assert table is not None
    theirs = embedder._whole(TRICKY)
    for text, ids in zip(TRICKY, theirs, strict=True):
        mine = table.encode(text)
        assert mine is None or mine == ids, text
    assert table.encode("a<s>b") is None and table.encode("") is None
    np = embedder.np
    for text in TRICKY[:-1]:
        assert np.array_equal(embedder.query(text, tmp_path), embedder.embed([text])[0])


def test_many_texts_are_tokenized_word_by_word_as_the_tokenizer_does(extra: None) -> None:
    """The index's lines go word by word (each distinct word once); the ids must be those of
    the tokenizer given each whole line, spaces, marks and added tokens included."""
    embedder = semantic.load()
    assert embedder is not None
    texts = [*TRICKY, "a ", "a  ", " a", "\u2581", "\u2581\u2581x", "x\u2581y", "<s>", " <s> a"]
    texts += [f"{t} and {i} more words, words again" for i, t in enumerate(TRICKY * 300)]
    assert len(texts) >= semantic.BY_WORDS_FROM
    assert embedder.token_ids(texts) == embedder._whole(texts)


def test_the_bpe_table_is_cached_once_and_rebuilt_when_unreadable(
    extra: None, tmp_path: Path
) -> None:
    embedder = semantic.load()
    assert embedder is not None
    semantic.bpe_table(embedder.tokenizer_file, tmp_path, embedder.np)
    cached = sorted(tmp_path.glob(f"{semantic.BPE_FILES}-*.npy"))
    assert len(cached) == 1
    cached[0].write_bytes(b"not an array")
    table = semantic.bpe_table(embedder.tokenizer_file, tmp_path, embedder.np)
    assert table is not None and table.encode("garden") == embedder._whole(["garden"])[0]
    assert sorted(tmp_path.glob(f"{semantic.BPE_FILES}-*.npy")) == cached
    missing = tmp_path / "no-such-folder"  # a state folder it cannot write to: built in memory
    table = semantic.bpe_table(embedder.tokenizer_file, missing, embedder.np)
    assert table is not None and table.encode("garden") == embedder._whole(["garden"])[0]
    assert not missing.exists()


def test_one_query_loads_neither_the_tokenizer_nor_safetensors(ws: Workspace, extra: None) -> None:
    """What `crustacean search` pays for the extra on one query: numpy and mapped files."""
    write(ws, "memory/notes/pets.md", "We adopted a puppy from the shelter.\n")
    with SearchIndex(ws) as index:
        assert index.search("dog")  # indexes, embeds, caches the BPE table
    code = (
        "import sys; from pathlib import Path; from crustacean.config import load_config; "
        "from crustacean.recall.search import SearchIndex; "
        "from crustacean.workspace import Workspace; "
        f"root = Path({str(ws.root)!r}); index = SearchIndex(Workspace(root, load_config(root))); "
        "assert index.search('dog')[0].path == 'memory/notes/pets.md'; print(sorted(m for m in "
        "sys.modules if m.startswith(('wordllama', 'tokenizers', 'safetensors'))))"
    )
    env = {**os.environ, semantic.ENV: "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_wordllama_itself_is_not_imported_by_a_search(ws: Workspace, extra: None) -> None:
    """Its package imports requests and config classes: most of a search's start-up."""
    code = (
        "import sys; from pathlib import Path; from crustacean.config import load_config; "
        "from crustacean.recall.search import SearchIndex; "
        "from crustacean.workspace import Workspace; "
        f"root = Path({str(ws.root)!r}); index = SearchIndex(Workspace(root, load_config(root))); "
        "assert index.search('dog'); print(sorted(m for m in sys.modules if m.startswith("
        "('wordllama', 'requests'))))"
    )
    write(ws, "memory/notes/pets.md", "We adopted a puppy from the shelter.\n")
    env = {**os.environ, semantic.ENV: "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def vector_files(ws: Workspace) -> list[str]:
    return sorted(p.name for p in ws.state_dir.glob("search-vectors-*.npy"))


def test_the_vector_matrix_is_kept_in_files_named_by_its_version(
    ws: Workspace, extra: None
) -> None:
    from crustacean.recall import search as search_mod

    write(ws, "memory/notes/pets.md", "We adopted a puppy from the shelter.\n")
    with SearchIndex(ws) as index:
        assert index.search("dog")[0].path == "memory/notes/pets.md"
    first = vector_files(ws)
    assert len(first) == 2  # rowids and the int8 matrix
    search_mod._MATRICES.clear()  # as a new process: read from the files
    with SearchIndex(ws) as index:
        assert index.search("dog")[0].path == "memory/notes/pets.md"
    assert vector_files(ws) == first
    write(ws, "memory/notes/cats.md", "The kitten sleeps on the radiator.\n")
    search_mod._MATRICES.clear()
    with SearchIndex(ws) as index:
        assert index.search("cat")[0].path == "memory/notes/cats.md"
    assert len(vector_files(ws)) == 2 and vector_files(ws) != first  # the old ones removed
    for name in vector_files(ws):
        (ws.state_dir / name).write_bytes(b"not an array")
    search_mod._MATRICES.clear()
    with SearchIndex(ws) as index:  # unreadable files: rebuilt from state.db
        assert index.search("cat")[0].path == "memory/notes/cats.md"
        assert index.search("dog")[0].path == "memory/notes/pets.md"


def test_the_installed_wordllama_has_the_layout_semantic_reads() -> None:
    """semantic.py reads wordllama's bundled files, not its API (ARCHITECTURE.md says why):
    this names what changed when an installed wordllama no longer looks like that."""
    import importlib.metadata
    import importlib.util
    import json
    import struct

    version = importlib.metadata.version("wordllama")
    assert version.startswith("0.4."), f"wordllama {version}: the extra pins >=0.4,<0.5"
    spec = importlib.util.find_spec("wordllama")
    assert spec is not None and spec.submodule_search_locations
    pkg = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = pkg / semantic._WEIGHTS, pkg / semantic._TOKENIZER
    assert weights.is_file(), f"wordllama {version} bundles no {semantic._WEIGHTS}"
    assert tokenizer.is_file(), f"wordllama {version} bundles no {semantic._TOKENIZER}"
    with open(weights, "rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    assert semantic._TENSOR in header, f"{weights.name} holds {sorted(header)}"
    tensor = header[semantic._TENSOR]
    assert tensor["dtype"] in ("F16", "F32") and tensor["shape"][1] == 256, tensor
    import numpy as np

    config = json.loads(tokenizer.read_bytes())
    assert semantic._pack(config, np) is not None, "the tokenizer is no longer Llama's BPE"
    assert config["model"]["vocab"] and len(config["model"]["vocab"]) == tensor["shape"][0]


def test_below_the_floor_no_hit_and_a_hit_by_meaning_alone_is_labelled(
    ws: Workspace, extra: None
) -> None:
    write(ws, "memory/notes/pets.md", "# Notes\n\nWe adopted a puppy from the shelter.\n")
    write(ws, "memory/notes/work.md", "# Work\n\nThe invoice for March is late.\n")
    with SearchIndex(ws) as index:
        assert index.search("xyzzyqq") == []  # a word nowhere: no unrelated hits
        hits = index.search("dog invoice")
    by_path = {h.path: h for h in hits}
    assert by_path["memory/notes/work.md"].shares_words
    assert not by_path["memory/notes/pets.md"].shares_words
