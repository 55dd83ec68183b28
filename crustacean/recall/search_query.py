"""A plain-words search query taken apart: the words worth matching, CJK pieces, and a date.

Pure functions of the query text and `today`, so the rules are table-tested:

- words are split the way the index's tokenizer (FTS5 unicode61) splits them: at anything that
  is not a letter or digit. A word joined by punctuation (`10:05`, `e-mail`) stays one phrase of
  its parts; a possessive `'s` is dropped, so `Maria's` matches Maria's own lines;
- stop words ("what did", "the", "of") are dropped, unless nothing else is left;
- runs of CJK text, which unicode61 keeps as one token per run, become pieces for the trigram
  index: the run itself when short, else its three-character pieces;
- a date in the query ("2026-03-04", "3 May 2023", "May 3", "in May", "in 2025", "last week",
  "yesterday", "3 days ago", "this month") becomes a `DateRange` matched against the dates of
  the daily logs, and its words leave the query. "When did …" questions are flagged.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import NamedTuple

MAX_TERMS = 32
_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they
    this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself ever tell said say says please also may
    might must shall s t d ll m re ve
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
# English names, as calendar.month_name gives them in the C locale (calendar's import, with
# locale, is ~1.5 ms of a shell search; and a query's words do not change with LC_TIME).
_MONTH_TEXT = (
    "january february march april may june july august september october november december"
)
MONTHS = {name: i for i, name in enumerate(_MONTH_TEXT.split(), 1)}
MONTHS.update({name[:3]: i for name, i in list(MONTHS.items())})
MONTHS.pop("may", None)  # "may" alone is a verb far more often than a month: see _MONTH_WORD
_MONTH_NAMES = "|".join(sorted((*MONTHS, "may"), key=len, reverse=True))
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_FIRST = "\u3040"  # below this no character is CJK: most queries never compile _cjk()
_TOKEN = re.compile(r"[^\W_]+")
_WORD = re.compile(r"\S+")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)


class DateRange(NamedTuple):
    """Inclusive first and last day."""

    first: date
    last: date


class Term(NamedTuple):
    """One query word: FTS5 phrase strings that each count as a share of it (CJK pieces)."""

    text: str
    pieces: tuple[str, ...]
    cjk: bool = False


class Query(NamedTuple):
    terms: tuple[Term, ...]
    dates: DateRange | None = None
    when: bool = False  # a "when did …" question: the answer is a date
    text: str = ""  # the query as asked, for the semantic extra
    date_words: str = ""  # the words that named the date: searched when no log is in range


def fts_string(text: str) -> str:
    """`text` as one FTS5 string (a phrase of its tokens); quotes inside are doubled."""
    return '"' + text.replace('"', '""') + '"'


def _month_range(year: int, month: int) -> DateRange:
    first = date(year, month, 1)
    following = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return DateRange(first, following - timedelta(days=1))


def _past_year(month: int, day: int, today: date) -> int:
    """The year in which month/day last came, so "in May" asked in March means last May."""
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1


def _month(name: str) -> int | None:
    return 5 if name.lower() == "may" else MONTHS.get(name.lower())


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


# The date rules' patterns, compiled (`_date_rules`) only for a query that may name a date: the
# month names' alternations are most of this module's import otherwise.
_ISO_DAY = r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"
_ISO_MONTH = r"\b(\d{4})-(\d{1,2})\b"
_DAY_MONTH = rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_NAMES})\.?(?:,?\s+(\d{{4}}))?\b"
_MONTH_DAY = rf"\b({_MONTH_NAMES})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"
_MONTH_YEAR = rf"\b({_MONTH_NAMES})\.?\s+(\d{{4}})\b"
# "may" only counts as a month after a preposition, or with a day or year (handled above)
_MONTH_WORD = rf"\b(?:in|during|since|of|last|this)\s+({_MONTH_NAMES})\b"
_YEAR = r"\b(?:in|during|of)\s+((?:19|20)\d{2})\b"
_AGO = r"\b(\d{1,3}|a|an|one|two|three)\s+(day|week|month)s?\s+ago\b"
_RELATIVE = (
    r"\b(today|yesterday|the day before yesterday|last week|this week|last month|this month|"
    r"last year|this year|recently|lately)\b"
)
# Every rule needs a digit or one of these words, so a query with neither names no date.
DATE_WORDS = frozenset(
    {*MONTHS, "may", "today", "yesterday", "week", "month", "year", "recently", "lately", "ago"}
)
_WHEN = re.compile(r"^\s*(?:when|what (?:day|date|time)|how long ago)\b", re.IGNORECASE)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3}


def _relative(word: str, today: date) -> DateRange:
    w = word.lower()
    monday = today - timedelta(days=today.weekday())
    first_of_month = today.replace(day=1)
    ranges = {
        "today": DateRange(today, today),
        "yesterday": DateRange(today - timedelta(days=1), today - timedelta(days=1)),
        "the day before yesterday": DateRange(today - timedelta(2), today - timedelta(2)),
        "last week": DateRange(today - timedelta(days=7), today - timedelta(days=1)),
        "this week": DateRange(monday, today),
        "last month": _month_range(
            (first_of_month - timedelta(days=1)).year, (first_of_month - timedelta(days=1)).month
        ),
        "this month": DateRange(first_of_month, today),
        "last year": DateRange(date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)),
        "this year": DateRange(date(today.year, 1, 1), today),
    }
    return ranges.get(w, DateRange(today - timedelta(days=30), today))  # recently, lately


def may_name_a_date(text: str) -> bool:
    """Whether any date rule could match: a digit, or one of DATE_WORDS (folded as IGNORECASE
    folds them, so the long s is an s)."""
    return any(c.isdigit() for c in text) or not DATE_WORDS.isdisjoint(
        _TOKEN.findall(text.casefold())
    )


def find_dates(text: str, today: date) -> tuple[DateRange | None, str]:
    """The first date the query names (as a range of days) and the query without its words."""
    found, rest, _ = _find_dates(text, today)
    return found, rest


def _find_dates(text: str, today: date) -> tuple[DateRange | None, str, str]:
    """`find_dates`, and the words that named the date."""
    if not may_name_a_date(text):
        return None, text, ""
    for pattern, build in _date_rules():
        m = pattern.search(text)
        if not m:
            continue
        found = build(m, today)
        if found is not None:
            return found, (text[: m.start()] + " " + text[m.end() :]).strip(), m[0]
    return None, text, ""


def _iso_day(m: re.Match[str], today: date) -> DateRange | None:
    d = _safe_date(int(m[1]), int(m[2]), int(m[3]))
    return DateRange(d, d) if d else None


def _iso_month(m: re.Match[str], today: date) -> DateRange | None:
    month = int(m[2])
    return _month_range(int(m[1]), month) if 1 <= month <= 12 else None


def _day_month(m: re.Match[str], today: date) -> DateRange | None:
    month = _month(m[2])
    if month is None:
        return None
    year = int(m[3]) if m[3] else _past_year(month, int(m[1]), today)
    d = _safe_date(year, month, int(m[1]))
    return DateRange(d, d) if d else None


def _month_day(m: re.Match[str], today: date) -> DateRange | None:
    month = _month(m[1])
    if month is None:
        return None
    year = int(m[3]) if m[3] else _past_year(month, int(m[2]), today)
    d = _safe_date(year, month, int(m[2]))
    return DateRange(d, d) if d else None


def _month_year(m: re.Match[str], today: date) -> DateRange | None:
    month = _month(m[1])
    return _month_range(int(m[2]), month) if month else None


def _month_word(m: re.Match[str], today: date) -> DateRange | None:
    month = _month(m[1])
    if month is None:
        return None
    year = _past_year(month, 1, today)
    return _month_range(year, month)


def _year(m: re.Match[str], today: date) -> DateRange | None:
    year = int(m[1])
    return DateRange(date(year, 1, 1), date(year, 12, 31))


def _ago(m: re.Match[str], today: date) -> DateRange | None:
    n = int(m[1]) if m[1].isdigit() else _NUMBERS[m[1].lower()]
    unit = m[2].lower()
    if unit == "day":
        d = today - timedelta(days=n)
        return DateRange(d, d)
    if unit == "week":
        end = today - timedelta(weeks=n)
        return DateRange(end - timedelta(days=3), end + timedelta(days=3))
    year, month = divmod(today.year * 12 + today.month - 1 - n, 12)
    return _month_range(year, month + 1)


def _rel(m: re.Match[str], today: date) -> DateRange | None:
    return _relative(m[1], today)


_Build = Callable[[re.Match[str], date], DateRange | None]


@functools.cache
def _date_rules() -> tuple[tuple[re.Pattern[str], _Build], ...]:
    """The date rules in the order they are tried; the first that matches and builds wins."""
    rules: list[tuple[str, int, _Build]] = [
        (_ISO_DAY, 0, _iso_day),
        (_ISO_MONTH, 0, _iso_month),
        (_DAY_MONTH, re.IGNORECASE, _day_month),
        (_MONTH_DAY, re.IGNORECASE, _month_day),
        (_MONTH_YEAR, re.IGNORECASE, _month_year),
        (_AGO, re.IGNORECASE, _ago),
        (_RELATIVE, re.IGNORECASE, _rel),
        (_MONTH_WORD, re.IGNORECASE, _month_word),
        (_YEAR, re.IGNORECASE, _year),
    ]
    return tuple((re.compile(text, flags), build) for text, flags, build in rules)


def _cjk_term(run: str) -> Term:
    """Short runs as they are; longer ones as their 3-character pieces (the trigram index)."""
    if len(run) <= 3:
        return Term(run, (run,), cjk=True)
    return Term(run, tuple(dict.fromkeys(run[i : i + 3] for i in range(len(run) - 2))), cjk=True)


@functools.cache
def _cjk() -> re.Pattern[str]:
    """Runs of CJK text, compiled when first asked: re builds its character set code point by
    code point (~40,000 of them), a tenth of a shell search's start-up."""
    return re.compile(f"[{_CJK_CHARS}]+")


def split_words(text: str) -> list[Term]:
    """The query's words as the index splits them; CJK runs apart. Order kept, duplicates not."""
    terms: dict[str, Term] = {}
    for word in _WORD.findall(_POSSESSIVE.sub("", text)):
        cjk = _cjk() if word and max(word) >= _CJK_FIRST else None
        runs = cjk.findall(word) if cjk else []
        for k, part in enumerate(cjk.split(word) if cjk else [word]):
            tokens = [t.lower() for t in _TOKEN.findall(part)]
            if tokens:
                key = " ".join(tokens)
                terms.setdefault(key, Term(key, (fts_string(key),)))
            if k < len(runs):
                terms.setdefault(runs[k], _cjk_term(runs[k]))
    return list(terms.values())


def parse_query(text: str, today: date) -> Query:
    """The words worth matching (stop words out, unless nothing is left), a date, "when"."""
    when = bool(_WHEN.search(text))
    dates, rest, said = _find_dates(text, today)
    terms = split_words(rest)
    kept = [t for t in terms if t.cjk or t.text not in STOP_WORDS]
    if not kept and dates is None:
        kept = terms
    return Query(tuple(kept[:MAX_TERMS]), dates, when, text, said)
