"""Taking a plain-words query apart: stop words, splitting as the index does, CJK, dates."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crustacean.recall.search_query import (
    DateRange,
    _date_rules,
    find_dates,
    may_name_a_date,
    parse_query,
    split_words,
)

TODAY = date(2026, 3, 28)  # a Saturday


def texts(query: str) -> list[str]:
    return [t.text for t in parse_query(query, TODAY).terms]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("what did Caroline research", ["caroline", "research"]),
        ("Maria's sister", ["maria", "sister"]),
        ("Maria’s sister", ["maria", "sister"]),
        ("the e-mail at 10:05", ["e mail", "10 05"]),
        ('say "hi" -later', ["hi", "later"]),
        ("Kingfisher, KINGFISHER!", ["kingfisher"]),
        ("the who", ["the", "who"]),  # nothing but stop words: keep them
        ("- * :", []),
        ("don't forget", ["don t", "forget"]),  # a phrase, as the index holds "don't"
    ],
)
def test_words_are_split_as_the_index_splits_them_and_stop_words_go(
    query: str, words: list[str]
) -> None:
    assert texts(query) == words


def test_a_word_becomes_one_fts5_string_with_quotes_doubled() -> None:
    [term] = split_words('a"b')
    assert term.pieces == ('"a b"',)


@pytest.mark.parametrize(
    ("query", "text", "pieces"),
    [
        ("東京", "東京", ("東京",)),
        ("東京に行った", "東京に行った", ("東京に", "京に行", "に行っ", "行った")),
        ("trip 東京", "東京", ("東京",)),
        ("서울에서", "서울에서", ("서울에", "울에서")),
    ],
)
def test_cjk_runs_become_trigram_pieces(query: str, text: str, pieces: tuple[str, ...]) -> None:
    cjk = [t for t in parse_query(query, TODAY).terms if t.cjk]
    assert [(t.text, t.pieces) for t in cjk] == [(text, pieces)]


def d(y: int, m: int, day: int) -> date:
    return date(y, m, day)


@pytest.mark.parametrize(
    ("query", "first", "last", "rest"),
    [
        ("dinner on 2026-03-04", d(2026, 3, 4), d(2026, 3, 4), "dinner on"),
        ("notes 2025-11", d(2025, 11, 1), d(2025, 11, 30), "notes"),
        ("what on 3 May 2023?", d(2023, 5, 3), d(2023, 5, 3), "what on ?"),
        ("on 3rd May", d(2025, 5, 3), d(2025, 5, 3), "on"),  # May has not come yet this year
        ("on 3 March", d(2026, 3, 3), d(2026, 3, 3), "on"),
        ("on March 3, 2024", d(2024, 3, 3), d(2024, 3, 3), "on"),
        ("in February 2023", d(2023, 2, 1), d(2023, 2, 28), "in"),
        ("what happened in May", d(2025, 5, 1), d(2025, 5, 31), "what happened"),
        ("in jan", d(2026, 1, 1), d(2026, 1, 31), ""),
        ("in 2024", d(2024, 1, 1), d(2024, 12, 31), ""),
        ("last week", d(2026, 3, 21), d(2026, 3, 27), ""),
        ("this week", d(2026, 3, 23), d(2026, 3, 28), ""),
        ("yesterday", d(2026, 3, 27), d(2026, 3, 27), ""),
        ("today", d(2026, 3, 28), d(2026, 3, 28), ""),
        ("last month", d(2026, 2, 1), d(2026, 2, 28), ""),
        ("last year", d(2025, 1, 1), d(2025, 12, 31), ""),
        ("3 days ago", d(2026, 3, 25), d(2026, 3, 25), ""),
        ("two months ago", d(2026, 1, 1), d(2026, 1, 31), ""),
        ("recently", d(2026, 2, 26), d(2026, 3, 28), ""),
    ],
)
def test_dates_in_the_query(query: str, first: date, last: date, rest: str) -> None:
    found, left = find_dates(query, TODAY)
    assert found == DateRange(first, last)
    assert " ".join(left.split()) == rest


@pytest.mark.parametrize("query", ["you may go", "2026-13-45", "March madness", "the 2024 plan"])
def test_no_date(query: str) -> None:
    assert find_dates(query, TODAY)[0] is None


def test_date_words_leave_the_query_and_when_questions_are_flagged() -> None:
    q = parse_query("When did Joe cook dinner last week?", TODAY)
    assert [t.text for t in q.terms] == ["joe", "cook", "dinner"]
    assert q.dates == DateRange(d(2026, 3, 21), d(2026, 3, 27)) and q.when
    assert not parse_query("dinner", TODAY).when
    only = parse_query("in May", TODAY)
    assert only.terms == () and only.dates is not None


_DATEISH = st.sampled_from(
    [
        "May",
        "may",
        "in",
        "last",
        "week",
        "3",
        "2024-05-01",
        "ago",
        "two",
        "days",
        "ſeptember",
        "x_may",
        "Dec.",
        "todays",
        "yesterday",
        "garden",
        "١٢",
        "this",
        "year",
        "lately",
        "of",
    ]
)


@given(st.lists(st.one_of(_DATEISH, st.text(max_size=6)), max_size=6))
def test_a_query_the_date_prefilter_skips_matches_no_date_rule(words: list[str]) -> None:
    text = " ".join(words)
    if not may_name_a_date(text):
        assert not any(pattern.search(text) for pattern, _ in _date_rules())
