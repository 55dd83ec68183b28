"""The `rerank` extra's rules: which lines are reranked, how the encoder's cosine is fused with
the lexical order, and that the hits stay prefix-stable and within budget. The real encoder
needs torch (the suite does without: its time budget), so the plumbing runs here with a small
encoder of plain vectors; bench/recall_bench.py measures the real one."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date

import numpy as np
import pytest

from crustacean.recall import rerank
from crustacean.recall.search import SearchIndex
from crustacean.recall.search_query import parse_query
from crustacean.workspace import Workspace


@pytest.mark.parametrize(
    ("head", "after", "want"),
    [
        # each head line, then the line after it, brought by it
        ([5, 9], {5: 6, 9: 10}, {5: 5, 6: 5, 9: 9, 10: 9}),
        # a line after that is itself a head line comes once, where first met
        ([5, 6, 9], {5: 6, 6: 7}, {5: 5, 6: 5, 7: 6, 9: 9}),
        # a head line met first as a line after stays brought by the line before it
        ([5, 4], {4: 5}, {5: 5, 4: 4}),
        # no line after (the file's last line, or another file's first): the line alone
        ([5, 9], {}, {5: 5, 9: 9}),
        ([1], {1: 2}, {1: 1, 2: 1}),
        ([], {}, {}),
    ],
)
def test_candidates_are_the_head_lines_each_with_the_next(
    head: list[int], after: dict[int, int], want: dict[int, int]
) -> None:
    got = rerank.candidates(head, after)
    assert got == want and list(got) == list(want)


@pytest.mark.parametrize(
    ("lines", "top", "want"),
    [
        # a copy of an earlier line's text takes no place; the next distinct one does
        (
            [(1, "- Ana: the dog barked."), (7, "- Ana: the dog barked."), (9, "- Ana: a pet.")],
            2,
            [1, 9],
        ),
        # the same text with other spaces around it is a copy
        ([(1, "- a dog "), (2, "- a dog"), (3, "- a cat")], 5, [1, 3]),
        # in order, at most `top`
        ([(4, "x"), (2, "y"), (3, "z")], 2, [4, 2]),
        ([(4, "x")], 30, [4]),
        ([], 30, []),
    ],
)
def test_the_head_is_the_best_lines_of_distinct_text(
    lines: list[tuple[int, str]], top: int, want: list[int]
) -> None:
    assert rerank.distinct(lines, top) == want


@pytest.mark.parametrize(
    ("query", "vectors", "want"),
    [
        ([1.0, 0.0], [[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]], [1.0, 0.0, -1.0]),
        ([3.0, 4.0], [[6.0, 8.0], [4.0, -3.0]], [1.0, 0.0]),
        ([1.0, 1.0], [[1.0, 0.0], [0.0, 0.0]], [math.sqrt(0.5), 0.0]),  # a zero vector: 0
    ],
)
def test_cosines_of_plain_vectors(
    query: list[float], vectors: list[list[float]], want: list[float]
) -> None:
    assert rerank.cosines(query, vectors) == pytest.approx(want)


@pytest.mark.parametrize(
    ("ranked", "cos", "weight", "want"),
    [
        # no cosine: the ranking as it was
        ([(1, 2.0), (2, 1.0)], {}, 1.0, [(1, 2.0), (2, 1.0)]),
        # the candidates reordered by score / best + weight x cosine; the rest after them
        (
            [(1, 4.0), (2, 2.0), (3, 1.0)],
            {1: 0.0, 2: 0.9},
            1.0,
            [(2, 1.4), (1, 1.0), (3, 0.25)],
        ),
        # a small weight keeps the lexical order
        ([(1, 4.0), (2, 2.0)], {1: 0.0, 2: 0.9}, 0.5, [(1, 1.0), (2, 0.95)]),
        # a widened line not ranked at all scores by its cosine alone
        ([(1, 4.0), (3, 1.0)], {1: 0.1, 7: 0.8}, 2.0, [(7, 1.6), (1, 1.2), (3, 0.45)]),
        # ties keep the candidates' order
        ([(1, 1.0), (2, 1.0)], {2: 0.5, 1: 0.5}, 1.0, [(2, 1.5), (1, 1.5)]),
        # a line after the candidates never scores above the last of them
        ([(1, 1.0), (2, 1.0), (3, 1.0)], {1: 0.0, 2: -0.5}, 1.0, [(1, 1.0), (2, 0.5), (3, 0.5)]),
    ],
)
def test_fusion_orders_the_candidates_then_the_rest(
    ranked: list[tuple[int, float]],
    cos: dict[int, float],
    weight: float,
    want: list[tuple[int, float]],
) -> None:
    got = rerank.fuse(ranked, cos, weight)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])
    scores = [s for _, s in got]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    ("lead", "on", "want"),
    [
        # the answer (7) after a matched question (1) ranks with the question's score
        ({1: 1, 7: 1, 3: 3}, True, [(7, 1.8), (1, 1.1), (3, 0.25)]),
        # a ranked line after the question: the better of the two scores
        ({1: 1, 3: 1}, True, [(1, 1.1), (3, 1.0)]),
        # LEAD off: a line after scores by its own lexical score (0 when not ranked)
        ({1: 1, 7: 1, 3: 3}, False, [(1, 1.1), (7, 0.8), (3, 0.25)]),
    ],
)
def test_a_line_brought_by_another_ranks_with_its_score(
    monkeypatch: pytest.MonkeyPatch, lead: dict[int, int], on: bool, want: list[tuple[int, float]]
) -> None:
    monkeypatch.setattr(rerank, "LEAD", on)
    ranked = [(1, 4.0), (3, 1.0)]
    cos = {r: c for r, c in {1: 0.1, 7: 0.8, 3: 0.0}.items() if r in lead}
    got = rerank.fuse(ranked, cos, 1.0, lead)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_a_line_is_embedded_after_the_line_it_answers() -> None:
    assert rerank.context_text("Ana: Biscuit.", "Rui: What's her name?") == (
        "Rui: What's her name?\nAna: Biscuit."
    )
    assert rerank.context_text("Ana: Biscuit.", None) == "Ana: Biscuit."


@pytest.mark.parametrize(
    ("value", "on"), [("0", False), ("off", False), ("No", False), ("1", True)]
)
def test_the_environment_switches_the_extra_off(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv(rerank.ENV, value)
    assert rerank.wanted() is on


def test_without_the_package_there_is_no_reranker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rerank.ENV, "1")
    monkeypatch.setattr(rerank, "MODULE", "crustacean_no_such_model_package")
    rerank.forget()
    assert rerank.load() is None  # never a download
    rerank.forget()


# ---------------------------------------------------------------- the plumbing, a plain encoder

CONCEPTS = (  # each word's dimension: a toy encoder that knows a puppy is a pet
    {"pet", "puppy", "named", "adopt"},
    {"shelter"},
    {"garden", "compost"},
)


class PlainEncoder:
    """`encode` as sentence-transformers calls it, with vectors of concept counts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            words = {w.strip(".,?!:").lower() for w in text.split()}
            vec = [float(len(words & c)) for c in CONCEPTS] + [0.1]
            norm = math.sqrt(sum(x * x for x in vec))
            rows.append([x / norm for x in vec])
        return np.array(rows, dtype=np.float32)


@pytest.fixture
def encoder(monkeypatch: pytest.MonkeyPatch) -> Iterator[PlainEncoder]:
    monkeypatch.setenv(rerank.ENV, "1")
    model = PlainEncoder()
    rerank.forget()
    rerank._cache["model"] = rerank.Reranker(model)
    yield model
    rerank.forget()


def _chat(ws: Workspace, name: str = "notes/chat.md") -> None:
    """51 lines hold "shelter" (a sixth of the lines: not a common word), none "pet"; the
    answer holds neither and follows the 21st."""
    path = ws.root / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    before = "".join(f"- Ana: walked past the shelter on day {k}.\n" for k in range(20))
    after = "".join(f"- Ana: the shelter again, day {k}.\n" for k in range(30))
    garden = "".join(f"- Ana: compost for the garden, day {k}.\n" for k in range(250))
    pair = "- Rui: Did you adopt a puppy from the shelter?\n- Ana: Yes, we named her Biscuit.\n"
    path.write_text(f"# Chat\n\n{before}{pair}{after}{garden}", "utf-8")


def test_the_encoder_brings_up_the_answer_that_shares_no_word(
    ws: Workspace, encoder: PlainEncoder
) -> None:
    _chat(ws)
    with SearchIndex(ws) as index:
        hits = index.search("shelter pet", 3)
    assert "Biscuit" in hits[0].text, [h.text for h in hits]
    embedded = [t for call in encoder.calls for t in call]
    assert "Rui: Did you adopt a puppy from the shelter?\nAna: Yes, we named her Biscuit." in [
        t.replace("- ", "") for t in embedded
    ]
    assert len(embedded) <= 2 * rerank.TOP + rerank.ANSWERS + 1  # never every line


def test_copies_of_one_line_take_one_candidate(ws: Workspace, encoder: PlainEncoder) -> None:
    """40 copies of one line rank above the question (file order breaks the tie): the best
    30 lines would all be that text, so the answer after the question would never be embedded."""
    path = ws.root / "memory" / "notes" / "chat.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    copies = "- Ana: the shelter dog barked all night.\n" * 40
    garden = "".join(f"- Ana: compost for the garden, day {k}.\n" for k in range(250))
    pair = "- Rui: Did you adopt a puppy from the shelter?\n- Ana: Yes, we named her Biscuit.\n"
    path.write_text(f"# Chat\n\n{copies}{pair}{garden}", "utf-8")
    with SearchIndex(ws) as index:
        hits = index.search("shelter pet", 3)
    assert "Biscuit" in hits[0].text, [h.text for h in hits]
    embedded = [t for call in encoder.calls for t in call]
    # the first copy, the copy after it, and the question read after the last copy
    assert sum("barked" in t for t in embedded) <= 3


def test_switched_off_the_ranking_is_the_lexical_one(
    ws: Workspace, encoder: PlainEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chat(ws)
    with SearchIndex(ws) as index:
        monkeypatch.setenv(rerank.ENV, "0")
        off = index.search("shelter pet", 3)
        rerank.forget()
        monkeypatch.setattr(rerank, "MODULE", "crustacean_no_such_model_package")
        monkeypatch.setenv(rerank.ENV, "1")
        absent = index.search("shelter pet", 3)
    assert off == absent
    assert "Biscuit" not in off[0].text
    assert not encoder.calls


def test_reranked_hits_of_n_10_are_the_first_ten_of_n_30(
    ws: Workspace, encoder: PlainEncoder
) -> None:
    _chat(ws)
    with SearchIndex(ws) as index:
        ten, thirty = index.search("shelter pet", 10), index.search("shelter pet", 30)
    assert len(thirty) > len(ten) == 10  # adjacent lines merge into one window
    assert ten == thirty[:10]


@pytest.mark.parametrize("budget", [60, 400, 2000])
def test_reranked_hits_fill_the_budget_and_no_more(
    ws: Workspace, encoder: PlainEncoder, budget: int
) -> None:
    _chat(ws)
    with SearchIndex(ws) as index:
        hits = index.search("shelter pet", budget_chars=budget)
    assert hits
    assert sum(len(h.text) + 1 for h in hits) <= budget


def test_vectors_are_kept_by_text(encoder: PlainEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    model = rerank.load()
    assert model is not None
    model.cosines("pet", ["a puppy", "compost"])
    model.cosines("pet", ["a puppy", "the shelter"])
    assert encoder.calls == [["pet", "a puppy", "compost"], ["the shelter"]]
    monkeypatch.setattr(rerank, "KEEP_TEXTS", 4)
    model.cosines("garden", ["x"])  # over the cap: the kept ones are dropped first
    assert len(model.kept) == 2


def test_a_topic_context_is_reranked_within_its_budget(
    ws: Workspace, encoder: PlainEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a tight whole budget the reranked answer is among the found lines; without the
    rerank, lines in file order fill the room first and the answer is left out."""
    from datetime import UTC, datetime

    from crustacean.recall.context import ContextRequest, build_context

    _chat(ws, "2026-10-01.md")  # an old daily log: its lines come as found lines
    now = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
    request = ContextRequest("main", "shelter pet", budget_chars=1200)
    text = build_context(ws, request, now).to_markdown()
    assert len(text) <= 1200
    assert "Biscuit" in text
    monkeypatch.setenv(rerank.ENV, "0")
    text = build_context(ws, request, now).to_markdown()
    assert len(text) <= 1200
    assert "Biscuit" not in text and "shelter on day 0." in text


def test_a_topic_reranks_twice_the_lines_a_search_does(
    ws: Workspace, encoder: PlainEncoder
) -> None:
    """`context --topic` fills four times a search's budget: the encoder reads `TOPIC_TOP`
    candidates for it (each with the line after it), `TOP` for a search."""
    from datetime import UTC, datetime

    _chat(ws, "2026-10-01.md")
    more = "".join(f"- Ana: the shelter cat, day {k}.\n" for k in range(80))
    more += "".join(f"- Ana: weeds in the garden, day {k}.\n" for k in range(800))
    (ws.root / "memory" / "2026-10-02.md").write_text(f"# More\n\n{more}")  # 131 "shelter"

    def read() -> int:
        return sum(len(call) for call in encoder.calls) - 1  # less the query

    with SearchIndex(ws) as index:
        index.search("shelter pet", 10)
        searched = read()
        encoder.calls.clear()
        rerank.load().forget_texts()  # type: ignore[union-attr]  # loaded by the fixture
        index.ranking("shelter pet", datetime(2026, 12, 2, 4, 0, tzinfo=UTC))
        topic = read()
    assert rerank.TOPIC_TOP == 2 * rerank.TOP
    assert rerank.TOP < searched <= 2 * rerank.TOP
    assert 2 * rerank.TOP < topic <= 2 * rerank.TOPIC_TOP


# ---------------------------------------------------------------- answers to copies of a question


@pytest.mark.parametrize(
    ("line", "turn"),
    [
        ("- **Joe**: What language are you studying?", ("Joe", "What language are you studying?")),
        ("* **Ana Silva**: Yes, Welsh.", ("Ana Silva", "Yes, Welsh.")),
        ("  - **Joe**:", ("Joe", "")),
        ("- Ana: a plain line", None),
        ("### [10:05] quick call", None),
        ("- **bold** words, no speaker", None),
        ("I said **Joe**: no", None),
    ],
)
def test_a_chat_turn_is_a_speaker_and_what_they_said(
    line: str, turn: tuple[str, str] | None
) -> None:
    assert rerank.turn(line) == turn


ASKED = "Did you adopt a puppy from the shelter?"


@pytest.mark.parametrize(
    ("copy", "after", "names", "answers"),
    [
        (f"- **Joe**: {ASKED}", "- **Priya**: Yes, we named her Biscuit.", {"priya"}, True),
        (f"- **Joe**: {ASKED}", "- **Priya Rao**: Yes, Biscuit.", {"priya", "pet"}, True),
        (f"- **Joe**: {ASKED}", "- **Ana**: Yes, we named him Rex.", {"priya"}, False),
        ("- **Joe**: Did you adopt a kitten?", "- **Priya**: Yes.", {"priya"}, False),
        (f"- **Joe**: {ASKED}", "Priya said yes.", {"priya"}, False),
        (f"Joe asked: {ASKED}", "- **Priya**: Yes.", {"priya"}, False),
    ],
)
def test_an_answer_to_a_copy_counts_when_the_query_names_who_answers(
    copy: str, after: str, names: set[str], answers: bool
) -> None:
    assert rerank.named_answer(copy, ASKED, after, names) is answers


def _conversations(ws: Workspace) -> None:
    """Priya asks the question in her own log, first; 40 lines of Mo's after it hold the
    query's three words too, and Joe's copy, which Priya answers, holds two: it ranks below
    them all, past the 30 candidates. Rui's copy is answered by Ana, whom the query does not
    name."""
    notes = ws.root / "memory" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    filler = "".join(f"- **Mo**: Priya might adopt from the shelter, day {k}.\n" for k in range(40))
    garden = "".join(f"- **Mo**: compost for the garden, day {k}.\n" for k in range(600))
    (notes / "priya.md").write_text(f"# Priya\n\n- **Priya**: {ASKED}\n{filler}{garden}")
    (notes / "joe.md").write_text(
        f"# Joe\n\n- **Joe**: {ASKED}\n- **Priya**: Yes, we named her Biscuit.\n"
    )
    (notes / "rui.md").write_text(
        f"# Rui\n\n- **Rui**: {ASKED}\n- **Ana**: Yes, we named him Rex.\n"
    )


def test_the_answers_to_copies_of_a_candidate_are_those_of_a_person_the_query_names(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _conversations(ws)
    with SearchIndex(ws) as index:
        index.update()
        ids = {
            body: rowid
            for rowid, body in index.conn.execute("SELECT rowid, body FROM search_lines")
        }
        head = [ids[f"- **Priya**: {ASKED}"]]  # her copy, as a candidate
        biscuit = ids["- **Priya**: Yes, we named her Biscuit."]
        rows = index._rows_of(head, before=1)
        query = parse_query("Priya adopt shelter", date(2026, 12, 1))

        def answers(taken: dict[int, int], prefix: str = "") -> dict[int, tuple[str, str]]:
            scope = index._scope(prefix, archive=False)
            got = index._named_answers(query, head, rows, taken, scope)
            return {r: (answer.body, asked.body) for r, (answer, asked) in got.items()}

        joe = ("- **Priya**: Yes, we named her Biscuit.", f"- **Joe**: {ASKED}")
        assert answers({}) == {biscuit: joe}  # Ana's answer to Rui: the query names no Ana
        assert answers({biscuit: biscuit}) == {}  # a candidate already
        assert answers({}, "memory/notes/priya.md") == {}  # outside the path searched
        monkeypatch.setattr(rerank, "ANSWERS", 0)
        assert answers({}) == {}
