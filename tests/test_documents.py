"""Memory documents: frontmatter is read leniently and edited without reformatting the file."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from crustacean.documents import (
    MAX_DOC_BYTES,
    Document,
    DocumentSkipped,
    new_document,
    parse_document,
    read_document,
    set_meta,
    set_plain_meta,
    yaml_scalar,
)

P = "memory/x.md"

# --- set_meta(doc, {"tier": "hot"}) changes one line or adds one, and nothing else ------------

SET_TIER = [
    ("no frontmatter", "Body text\n", "---\ntier: hot\n---\nBody text\n"),
    ("no frontmatter, no final newline", "Body", "---\ntier: hot\n---\nBody"),
    ("no frontmatter, CRLF", "a\r\nb\r\n", "---\r\ntier: hot\r\n---\r\na\r\nb\r\n"),
    ("no frontmatter, leading blank lines", "\n\nBody\n", "---\ntier: hot\n---\n\n\nBody\n"),
    ("empty file", "", "---\ntier: hot\n---\n"),
    ("BOM, no frontmatter", "\ufeffBody\n", "\ufeff---\ntier: hot\n---\nBody\n"),
    (
        "BOM and frontmatter",
        "\ufeff---\nname: x\n---\nb\n",
        "\ufeff---\nname: x\ntier: hot\n---\nb\n",
    ),
    (
        "replaced in place",
        "---\nname: x\ntier: warm\nsource: s\n---\nbody\n",
        "---\nname: x\ntier: hot\nsource: s\n---\nbody\n",
    ),
    ("appended, no final newline", "---\nname: x\n---\nbody", "---\nname: x\ntier: hot\n---\nbody"),
    ("closing fence at EOF", "---\nname: x\n---", "---\nname: x\ntier: hot\n---"),
    (
        "CRLF appended",
        "---\r\nname: x\r\n---\r\n\r\nbody\r\n",
        "---\r\nname: x\r\ntier: hot\r\n---\r\n\r\nbody\r\n",
    ),
    ("CRLF replaced", "---\r\ntier: cold\r\n---\r\nbody", "---\r\ntier: hot\r\n---\r\nbody"),
    (
        "comments kept, even after the value",
        "---\n# pinned by hand\nname: x  # the id\ntier: warm # was hot\n---\nbody\n",
        "---\n# pinned by hand\nname: x  # the id\ntier: hot # was hot\n---\nbody\n",
    ),
    (
        "quoting of other keys kept",
        "---\nname: \"x\"\nsource: 'https://a/b#c'\ntier: 'warm'\n---\n",
        "---\nname: \"x\"\nsource: 'https://a/b#c'\ntier: hot\n---\n",
    ),
    (
        "key order kept",
        "---\nzeta: 1\nalpha: 2\nmid: 3\n---\n",
        "---\nzeta: 1\nalpha: 2\nmid: 3\ntier: hot\n---\n",
    ),
    (
        "fences with trailing spaces",
        "--- \nname: x\n---  \nbody\n",
        "--- \nname: x\ntier: hot\n---  \nbody\n",
    ),
    ("empty block", "---\n---\nbody\n", "---\ntier: hot\n---\nbody\n"),
    ("comment-only block", "---\n# nothing yet\n---\n", "---\n# nothing yet\ntier: hot\n---\n"),
    (
        "--- later in the body",
        "---\nname: x\n---\nintro\n---\nmore\n",
        "---\nname: x\ntier: hot\n---\nintro\n---\nmore\n",
    ),
    (
        "body whitespace kept",
        "---\nname: x\n---\n\n\n  body  \n\n\n",
        "---\nname: x\ntier: hot\n---\n\n\n  body  \n\n\n",
    ),
    (
        "list value replaced whole",
        "---\ntier:\n  - warm\n  - cold\nname: x\n---\n",
        "---\ntier: hot\nname: x\n---\n",
    ),
    (
        "indentless list value",
        "---\ntier:\n- warm\nname: x\n---\n",
        "---\ntier: hot\nname: x\n---\n",
    ),
    (
        "block scalar before the new key",
        "---\nnote: |\n  line one\n  line two\nname: x\n---\n",
        "---\nnote: |\n  line one\n  line two\nname: x\ntier: hot\n---\n",
    ),
    (
        "block scalar value, comment after it kept",
        "---\ntier: |\n  warm\n# keep me\nname: x\n---\n",
        "---\ntier: hot\n# keep me\nname: x\n---\n",
    ),
    ("empty value", "---\ntier:\nname: x\n---\n", "---\ntier: hot\nname: x\n---\n"),
    ("flow mapping", "---\n{name: x, tier: warm}\n---\nb\n", "---\n{name: x, tier: hot}\n---\nb\n"),
    ("flow mapping, appended", "---\n{name: x}\n---\n", "---\n{name: x, tier: hot}\n---\n"),
    (
        "duplicate keys both set",
        "---\ntier: warm\ntier: cold\n---\n",
        "---\ntier: hot\ntier: hot\n---\n",
    ),
    ("indented mapping", "---\n  name: x\n---\n", "---\n  name: x\n  tier: hot\n---\n"),
    (
        "blank line before the fence",
        "\n---\nname: x\n---\nb\n",
        "\n---\nname: x\ntier: hot\n---\nb\n",
    ),
    (
        "nested key of the same name untouched",
        "---\nmeta:\n  tier: cold\ntier: warm\n---\n",
        "---\nmeta:\n  tier: cold\ntier: hot\n---\n",
    ),
    ("quoted key", '---\n"tier": warm\n---\n', '---\n"tier": hot\n---\n'),
    ("anchored root", "---\n&a\n  name: x\n---\n", "---\n&a\n  name: x\n  tier: hot\n---\n"),
    ("complex key", "---\n? name\n: x\n---\n", "---\n? name\n: x\ntier: hot\n---\n"),
    (
        "non-ASCII before the key",
        "---\nname: café ☕ 日本\ntier: warm\n---\n",
        "---\nname: café ☕ 日本\ntier: hot\n---\n",
    ),
    (
        "dates stay as written",
        "---\nrecorded: 2026-08-12\ntier_set: '2026-09-01'\n---\n",
        "---\nrecorded: 2026-08-12\ntier_set: '2026-09-01'\ntier: hot\n---\n",
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in SET_TIER], ids=[c[0] for c in SET_TIER]
)
def test_set_meta_changes_only_the_tier_line(text: str, expected: str) -> None:
    """And no update changes nothing; set_plain_meta writes the same bytes, or declines."""
    doc = parse_document(text, P)
    assert doc.warning is None
    assert set_meta(doc, {}) == text
    out = set_meta(doc, {"tier": "hot"})
    assert out == expected
    assert set_plain_meta(text, "tier", "hot") in (None, out)
    again = parse_document(out, P)
    assert again.tier == "hot"
    assert {k: v for k, v in again.meta.items() if k != "tier"} == {
        k: v for k, v in doc.meta.items() if k != "tier"
    }


def test_set_meta_many_keys_replaces_and_appends_in_order() -> None:
    doc = parse_document("---\ntier: warm\nname: x\n---\nbody\n", P)
    out = set_meta(doc, {"tier_set": date(2026, 11, 3), "tier": "cold", "pinned": True})
    assert out == "---\ntier: cold\nname: x\ntier_set: 2026-11-03\npinned: true\n---\nbody\n"


def test_set_meta_on_no_frontmatter_keeps_key_order() -> None:
    out = set_meta(parse_document("b\n", P), {"tier": "hot", "tier_set": date(2026, 1, 2)})
    assert out == "---\ntier: hot\ntier_set: 2026-01-02\n---\nb\n"


def test_set_meta_values_are_typed_on_reading_back() -> None:
    when = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)
    updates: dict[str, Any] = {"a": "yes", "b": 7, "c": False, "d": when, "e": "2026-01-01"}
    doc = parse_document(set_meta(parse_document("x\n", P), updates), P)
    assert doc.meta == updates


MALFORMED = [
    ("unclosed", "---\nname: x\nbody\n", 1, "never closed"),
    ("unclosed after blank line", "\n---\nname: x\n", 2, "never closed"),
    ("bad flow", "---\nname: [x\n---\nbody", 3, "not valid YAML"),
    ("bad mapping", "---\nname: x\nbad: : :\n---\n", 3, "not valid YAML"),
    ("tab indent", "---\nname: x\n\tsource: y\n---\n", 3, "not valid YAML"),
    ("control character", "---\nname: x\nsource: \x07\n---\n", 3, "not valid YAML"),
    ("python tag", "---\nname: !!python/object:os.system x\n---\n", 2, "not valid YAML"),
    ("unknown tag", "---\n!custom x\n---\n", 2, "not valid YAML"),
    ("unhashable key", "---\n? [a]\n: b\n---\n", 2, "not valid YAML"),
    ("undefined alias", "---\na: *nope\n---\n", 2, "not valid YAML"),
    ("unterminated quote", '---\nname: "open\n---\nbody\n', 3, "not valid YAML"),
    ("deep nesting", "---\n" + "[" * 3000 + "]" * 3000 + "\n---\n", 2, "not valid YAML"),
    ("list", "---\n- a\n- b\n---\nbody\n", 2, "is a list"),
    ("scalar", "---\njust text\n---\nbody\n", 2, "single value (str)"),
    ("null", "---\n~\n---\n", 2, "single value (null)"),
    ("BOM and CRLF", "\ufeff---\r\n- a\r\n---\r\nb", 2, "is a list"),
    ("markdown rule then text", "---\nSome text: here: too\n---\n", 2, "not valid YAML"),
]


@pytest.mark.parametrize(
    ("text", "line", "what"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_frontmatter_is_body_only_with_a_warning(text: str, line: int, what: str) -> None:
    doc = parse_document(text, P)
    assert doc.meta == {}
    assert doc.front is None
    assert doc.body == text.removeprefix("\ufeff")
    assert doc.warning is not None
    assert doc.warning.startswith(f"{P} line {line}: frontmatter ")
    assert what in doc.warning
    assert doc.warning.endswith("; read as body only")
    assert doc.name == "x"
    with pytest.raises(ValueError, match=r"memory/x\.md line"):
        set_meta(doc, {"tier": "hot"})


def test_set_meta_refuses_where_a_line_cannot_be_added() -> None:
    doc = parse_document("---\nnote: |\n  a\n...\n---\nbody\n", P)
    assert doc.meta == {"note": "a\n"}
    with pytest.raises(ValueError, match=r"memory/x\.md: cannot set tier without reformatting"):
        set_meta(doc, {"tier": "hot"})


def test_set_meta_refuses_an_alias_value() -> None:
    doc = parse_document("---\nbase: &t warm\ntier: *t\n---\n", P)
    assert doc.tier == "warm"
    with pytest.raises(ValueError, match=r"memory/x\.md: 'tier' is a YAML alias"):
        set_meta(doc, {"tier": "hot"})


# --- parts and properties -------------------------------------------------------------------

SPLITS = [
    ("none", "just body\n", None, "just body\n"),
    ("plain", "---\nname: x\n---\nbody\n", "---\nname: x\n---\n", "body\n"),
    ("CRLF", "---\r\nname: x\r\n---\r\n\r\nb", "---\r\nname: x\r\n---\r\n", "\r\nb"),
    ("BOM", "\ufeff---\nname: x\n---\nb", "---\nname: x\n---\n", "b"),
    ("blank first", "\n---\nname: x\n---\nb", "\n---\nname: x\n---\n", "b"),
    ("rule in body", "---\nname: x\n---\na\n---\nb\n", "---\nname: x\n---\n", "a\n---\nb\n"),
    ("text before fence", "intro\n---\nname: x\n---\n", None, "intro\n---\nname: x\n---\n"),
    ("four dashes are a rule", "----\nname: x\n----\n", None, "----\nname: x\n----\n"),
]


@pytest.mark.parametrize(
    ("text", "front", "body"), [c[1:] for c in SPLITS], ids=[c[0] for c in SPLITS]
)
def test_split_into_front_and_body(text: str, front: str | None, body: str) -> None:
    doc = parse_document(text, P)
    assert (doc.front, doc.body, doc.warning) == (front, body, None)
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    assert doc.text == text == bom + (doc.front or "") + doc.body


PROPS: list[tuple[str, str, str, Any]] = [
    ("name", "name: no-barrel-files", "name", "no-barrel-files"),
    ("name missing", "source: s", "name", "x"),
    ("name empty", "name: ''", "name", "x"),
    ("name number", "name: 42", "name", "42"),
    ("name list", "name: [a]", "name", "x"),
    (
        "source",
        "source: https://github.com/a/b/pull/1#r2",
        "source",
        "https://github.com/a/b/pull/1#r2",
    ),
    ("source missing", "name: n", "source", None),
    ("source not text", "source: 3", "source", None),
    ("recorded date", "recorded: 2026-08-12", "recorded", date(2026, 8, 12)),
    ("recorded datetime", "recorded: 2026-08-12 10:00:00", "recorded", date(2026, 8, 12)),
    ("recorded ISO Z", "recorded: 2026-08-12T23:00:00Z", "recorded", date(2026, 8, 12)),
    ("recorded quoted", "recorded: '2026-08-12'", "recorded", date(2026, 8, 12)),
    ("recorded ISO text", "recorded: '2026-08-12T10:00:00+02:00'", "recorded", date(2026, 8, 12)),
    ("recorded impossible", "recorded: 2026-02-30", "recorded", None),
    ("recorded words", "recorded: last week", "recorded", None),
    ("recorded number", "recorded: 20260812", "recorded", None),
    ("recorded missing", "name: n", "recorded", None),
    ("tier", "tier: warm", "tier", "warm"),
    ("tier capitalised", "tier: Hot", "tier", "hot"),
    ("tier unknown", "tier: lukewarm", "tier", None),
    ("tier not text", "tier: 3", "tier", None),
    ("tier missing", "name: n", "tier", None),
    ("tier_set", "tier_set: 2026-09-01", "tier_set", date(2026, 9, 1)),
    ("tier_set bad", "tier_set: soon", "tier_set", None),
]


@pytest.mark.parametrize(
    ("line", "prop", "value"), [c[1:] for c in PROPS], ids=[c[0] for c in PROPS]
)
def test_properties(line: str, prop: str, value: Any) -> None:
    doc = parse_document(f"---\n{line}\n---\nbody\n", P)
    assert doc.warning is None
    assert getattr(doc, prop) == value


def test_impossible_date_keeps_the_rest_of_the_frontmatter() -> None:
    doc = parse_document("---\nname: n\nrecorded: 2026-02-30\ntier: cold\n---\nb\n", P)
    assert doc.meta == {"name": "n", "recorded": "2026-02-30", "tier": "cold"}


def test_no_frontmatter_properties_fall_back() -> None:
    doc = parse_document("Don't flag barrels.\n", "memory/lessons/no-barrel-files.md")
    assert (doc.name, doc.source, doc.recorded, doc.tier, doc.tier_set) == (
        "no-barrel-files",
        None,
        None,
        None,
        None,
    )
    assert doc.meta == {} and doc.warning is None


def test_document_is_frozen() -> None:
    doc = parse_document("b", P)
    assert isinstance(doc, Document)
    with pytest.raises(AttributeError):
        doc.body = "x"  # type: ignore[misc]  # the write under test


# --- new_document ---------------------------------------------------------------------------

NEW = [
    (
        "seed 000 example",
        {"name": "no-barrel-files", "source": "https://x/pr/812#r1", "recorded": date(2026, 8, 12)},
        "Don't flag barrels.\n\n\n",
        "---\nname: no-barrel-files\nsource: https://x/pr/812#r1\nrecorded: 2026-08-12\n---\n\n"
        "Don't flag barrels.\n",
    ),
    ("given order", {"tier": "hot", "name": "a"}, "b", "---\ntier: hot\nname: a\n---\n\nb\n"),
    (
        "quoted when needed",
        {"name": "yes", "note": "a: b"},
        "b",
        "---\nname: 'yes'\nnote: 'a: b'\n---\n\nb\n",
    ),
    ("multi-line value on one line", {"name": "a\nb"}, "b", '---\nname: "a\\nb"\n---\n\nb\n'),
    ("no keys: no block", {}, "body\n\n", "body\n"),
    ("no keys, body like a block", {}, "---\na: b\n---\n", "---\n---\n\n---\na: b\n---\n"),
    ("empty body", {"name": "a"}, "", "---\nname: a\n---\n"),
]


@pytest.mark.parametrize(
    ("meta", "body", "expected"), [c[1:] for c in NEW], ids=[c[0] for c in NEW]
)
def test_new_document(meta: dict[str, Any], body: str, expected: str) -> None:
    text = new_document(meta, body)
    assert text == expected
    doc = parse_document(text, P)
    assert doc.warning is None and doc.meta == meta
    assert doc.body.strip() == body.strip()


SCALARS: list[tuple[Any, str]] = [
    ("hot", "hot"),
    ("yes", "'yes'"),
    ("null", "'null'"),
    ("", "''"),
    ("2026-11-01", "'2026-11-01'"),
    ("a: b", "'a: b'"),
    ("#x", "'#x'"),
    (" lead", "' lead'"),
    ("https://x/y#z", "https://x/y#z"),
    ("café ☕", "café ☕"),
    ("line\nbreak", '"line\\nbreak"'),
    ("x\x07", '"x\\a"'),
    (date(2026, 11, 1), "2026-11-01"),
    (datetime(2026, 11, 1, 9, 5, tzinfo=UTC), "2026-11-01T09:05:00+00:00"),
    (True, "true"),
    (False, "false"),
    (12, "12"),
]


@pytest.mark.parametrize(("value", "expected"), SCALARS)
def test_yaml_scalar_quotes_only_when_needed(value: Any, expected: str) -> None:
    assert yaml_scalar(value) == expected
    assert yaml.safe_load(f"k: {expected}")["k"] == value


@pytest.mark.parametrize("value", [None, 1.5, ["a"], {"a": 1}])
def test_yaml_scalar_refuses_other_types(value: Any) -> None:
    with pytest.raises(TypeError, match="cannot write"):
        yaml_scalar(value)


# --- read_document --------------------------------------------------------------------------


def _write(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_read_keeps_exact_text(tmp_path: Path) -> None:
    raw = "\ufeff---\r\nname: n\r\n---\r\nbody\r\n".encode()
    _write(tmp_path, P, raw)
    doc = read_document(tmp_path, P)
    assert doc.text.encode() == raw
    assert (doc.path, doc.name, doc.body) == (P, "n", "body\r\n")
    assert set_meta(doc, {"tier": "hot"}).encode() == raw.replace(
        b"---\r\nb", b"tier: hot\r\n---\r\nb"
    )


def test_read_exactly_the_limit_is_fine(tmp_path: Path) -> None:
    _write(tmp_path, P, b"a" * MAX_DOC_BYTES)
    assert len(read_document(tmp_path, P).body) == MAX_DOC_BYTES


SKIPS = [
    ("not UTF-8", b"caf\xe9\n", "not UTF-8 text"),
    ("UTF-16", "\ufeffhi".encode("utf-16"), "not UTF-8 text"),
    ("too big", b"a" * (MAX_DOC_BYTES + 1), "larger than 1,000,000 bytes"),
    ("NUL bytes", b"a\x00b", "not text"),
]


@pytest.mark.parametrize(("data", "reason"), [c[1:] for c in SKIPS], ids=[c[0] for c in SKIPS])
def test_read_skips_what_is_no_text(tmp_path: Path, data: bytes, reason: str) -> None:
    _write(tmp_path, P, data)
    with pytest.raises(DocumentSkipped) as caught:
        read_document(tmp_path, P)
    assert caught.value.path == P
    assert caught.value.reason.startswith(reason)
    assert str(caught.value).startswith(f"{P}: {reason}")


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_read_skips_unreadable(tmp_path: Path, make: str) -> None:
    if make == "directory":
        (tmp_path / P).mkdir(parents=True)
    with pytest.raises(DocumentSkipped, match=r"^memory/x\.md: unreadable"):
        read_document(tmp_path, P)


# --- set_plain_meta: set_meta's bytes without YAML, or None -----------------------------------

_PLAIN_LINES = [
    "name: x\n",
    "tier: warm\n",
    "tier: cold\n",
    "recorded: 2026-08-12\n",
    "source: https://a.example/b\n",
    "at: 2026-08-12T10:00:00\n",
    "yes: no\n",
    "title: two words\n",
    "note: a: b\n",  # YAML refuses it
    "note: 'quoted'\n",
    "note: x # comment\n",
    "# a comment\n",
    "tier:\n",
    "  - warm\n",
    "note: |\n",
    "\n",
    "tier: warm\r\n",
    "k" * 70 + ": long key\n",
]


@given(
    lines=st.lists(st.sampled_from(_PLAIN_LINES), max_size=6),
    block=st.booleans(),
    body=st.sampled_from(["", "body\n", "# Title\n\ntier: cold\n", "---\nmore\n", "x"]),
    bom=st.booleans(),
    value=st.sampled_from(["hot", "warm", "cold", "archive", "yes", "Hot", "two words"]),
)
@settings(max_examples=400, deadline=None)
def test_set_plain_meta_is_set_meta_or_declines(
    lines: list[str], block: bool, body: str, bom: bool, value: str
) -> None:
    text = ("\ufeff" if bom else "") + ("---\n" + "".join(lines) + "---\n" if block else "") + body
    out = set_plain_meta(text, "tier", value)
    if out is None:
        return
    doc = parse_document(text, P)
    assert doc.warning is None
    assert out == set_meta(doc, {"tier": value})


def test_set_plain_meta_takes_the_files_crustacean_writes() -> None:
    text = "---\nname: a-b\nrecorded: 2026-05-20\ntier: cold\n---\n\n# A\n"
    assert set_plain_meta(text, "tier", "archive") == text.replace("cold", "archive")
    assert set_plain_meta("# A\n", "tier", "warm") == "---\ntier: warm\n---\n# A\n"


# --- plain blocks are read without YAML, exactly as YAML reads them ------------------------------

PLAIN_BLOCKS = [
    ("crustacean's own keys", "name: a-b-1\nrecorded: 2026-05-20\ntier: archive\n", True),
    ("impossible date stays a string", "recorded: 2026-02-30\n", True),
    ("words with spaces, slashes, colons", "source: collect 2026/11 a:b c.d\n", True),
    ("empty block", "", True),
    ("a bool word", "done: Yes\n", False),
    ("off is a bool", "tier: off\n", False),
    ("null word", "name: null\n", False),
    ("a bool key", "on: x\n", False),
    ("a number", "n: 12\n", False),
    ("sexagesimal", "t: 12:30\n", False),
    ("a version", "v: 1.2.3\n", False),
    ("a datetime", "at: 2026-05-20 10:00:00\n", False),
    ("a repeated key", "a: b\na: c\n", False),
    ("a comment", "a: b # c\n", False),
    ("a quoted value", "a: 'b'\n", False),
    ("a list", "a:\n  - b\n", False),
    ("CRLF", "a: b\r\n", False),
    ("unicode", "name: Café\n", False),
    ("a blank line", "a: b\n\n", False),
]


def read_as_yaml_reads(text: str) -> bool:
    """Whether the plain reader takes the block; if it does, YAML reads the same keys, values
    and types."""
    from crustacean.documents import plain_meta
    from crustacean.frontyaml import load_meta

    got = plain_meta(text)
    if got is not None:
        want, problem = load_meta(f"---\n{text}---\n", 2, "read as body")
        assert problem is None
        assert [(k, type(v), v) for k, v in got.items()] == [
            (k, type(v), v) for k, v in want.items()
        ]
    return got is not None


@pytest.mark.parametrize(
    ("text", "fast"), [(t, f) for _, t, f in PLAIN_BLOCKS], ids=[n for n, _, _ in PLAIN_BLOCKS]
)
def test_plain_blocks_are_read_without_yaml_as_yaml_reads_them(text: str, fast: bool) -> None:
    assert read_as_yaml_reads(text) == fast


_TOKENS = st.sampled_from(
    [
        "a",
        "Yes",
        "no",
        "On",
        "null",
        "NULL",
        "y",
        "x1",
        "_k",
        "1",
        "0x1F",
        "1_0",
        "12:30",
        "2026",
        "-",
        "05",
        "20",
        "2026-05-20",
        "2026-13-01",
        ".inf",
        "~",
        ":",
        " ",
        "#",
        "'",
        '"',
        "/",
        "+",
        "e5",
        "1e5",
        ".",
        "tier",
        "name",
        "<<",
        "=",
        "!",
        "&a",
        "*a",
        "\t",
        "é",
    ]
)
_LINES = st.lists(_TOKENS, min_size=1, max_size=5).map("".join)
_BLOCKS = st.lists(
    st.tuples(_LINES, _LINES).map(lambda kv: f"{kv[0]}: {kv[1]}\n"), min_size=0, max_size=4
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_BLOCKS)
def test_a_block_read_without_yaml_is_what_yaml_reads(text: str) -> None:
    """Any block the plain reader takes, YAML reads to the same keys, values and types."""
    read_as_yaml_reads(text)


# --- python-frontmatter reads the blocks, with the bounded handler ----------------------------

THROUGH_THE_LIBRARY = [
    "---\nname: x\ntier: hot\n---\nbody\n",
    "---\nname: 'x: y'\nlist: [1, 2]\n---\n\nbody\n",
    "\n---  \r\nname: x\r\n---\r\nbody",
    "---\nnote: |\n  ----\n  kept\n---\n",  # a longer dash run in the YAML is no fence
]


@pytest.mark.parametrize("text", THROUGH_THE_LIBRARY)
def test_frontmatter_parse_with_the_handler_reads_what_documents_reads(text: str) -> None:
    import frontmatter

    from crustacean.frontyaml import HANDLER

    meta, _ = frontmatter.parse(text, handler=HANDLER)
    assert parse_document(text, P).meta == meta != {}


def test_the_handler_refuses_what_the_library_would_read_as_no_keys() -> None:
    import frontmatter
    from frontmatter.default_handlers import YAMLHandler

    from crustacean.frontyaml import HANDLER, FrontmatterOverLimit, FrontmatterProblem

    assert frontmatter.parse("---\n- a\n---\n", handler=YAMLHandler())[0] == {}
    with pytest.raises(FrontmatterProblem, match="is a list"):
        frontmatter.parse("---\n- a\n---\n", handler=HANDLER)
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=False)
    )
    with pytest.raises(FrontmatterOverLimit, match="10,000 values"):
        frontmatter.parse(bomb + "---\n", handler=HANDLER)
