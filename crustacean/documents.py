"""Memory files: markdown with optional YAML frontmatter (seeds 000 and 002).

The one frontmatter reader (`read_front`): memories, the search index and plain notes all split
and parse a block here, so they agree on where a body starts and why a block is no metadata.

A memory file is owned by its user, so reading never fails and writing never reformats: the
frontmatter block is found here (exact offsets), then read through python-frontmatter with a
safe, bounded handler and edited line by line in crustacean/frontyaml.py, which is imported only
once a block is parsed or written (a text without frontmatter, a block of plain `key: value`
lines, and a command that reads memories from the index never load YAML).

Invariant of a parsed document: `text == bom + (front or "") + body`, where `bom` is "\\ufeff"
when the file starts with one. The BOM is an encoding mark, so it is in neither `front` nor `body`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from crustacean.markdown import FRONT_FENCE
from crustacean.tiers import TIERS

MAX_DOC_BYTES = 1_000_000
BOM = "\ufeff"
KNOWN_KEYS = ("name", "source", "recorded", "tier", "tier_set")

_LINE = re.compile(r"[^\n]*\n|[^\n]+")


class DocumentSkipped(Exception):
    """A file that cannot be read as a memory at all; callers name it and carry on."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class Document(NamedTuple):
    """One memory file as read: the exact text, its parts, and the frontmatter mapping. This
    module's records are NamedTuples, not frozen dataclasses (~0.5 ms of generated code each at
    the import, which every `context`, hook and search pays)."""

    path: str
    text: str
    meta: dict[str, Any]
    body: str
    front: str | None
    warning: str | None = None

    @property
    def name(self) -> str:
        """The `name` key (seed 000), else the file name without `.md`."""
        value = self.meta.get("name")
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return PurePosixPath(self.path).stem

    @property
    def source(self) -> str | None:
        value = self.meta.get("source")
        return value.strip() if isinstance(value, str) and value.strip() else None

    @property
    def recorded(self) -> date | None:
        return as_date(self.meta.get("recorded"))

    @property
    def tier(self) -> str | None:
        """The `tier` key when it names a tier; anything else counts as no tier."""
        value = self.meta.get("tier")
        if not isinstance(value, str):
            return None
        value = value.strip().lower()
        return value if value in TIERS else None

    @property
    def tier_set(self) -> date | None:
        return as_date(self.meta.get("tier_set"))


def as_date(value: Any) -> date | None:
    """A date from what YAML 1.1 gives: date, datetime or an ISO string; anything else is None."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    for parse in (date.fromisoformat, datetime.fromisoformat):
        try:
            return as_date(parse(text))
        except ValueError:
            continue
    return None


# ---------------------------------------------------------------------------------------------
# Reading


class _Split(NamedTuple):
    """Where the frontmatter block is: `front` spans text[start:end], YAML text[ystart:yend]."""

    start: int
    ystart: int
    yend: int
    end: int
    first_line: int  # 1-based file line of the first YAML line


def _iter_lines(text: str) -> Iterator[str]:
    """Lazily, so finding a block at the top of a 1 MB file does not split the whole file."""
    return (m.group() for m in _LINE.finditer(text))


def _split(text: str) -> tuple[_Split | None, int | None]:
    """Locate the block: leading blank lines, an opening `---`, a closing `---`.

    Returns (split, None), (None, None) when there is no frontmatter, or (None, line) when an
    opening fence on `line` is never closed.
    """
    bom = BOM if text.startswith(BOM) else ""
    pos, opened = len(bom), None
    for lineno, line in enumerate(_iter_lines(text[len(bom) :]), start=1):
        if opened is None:
            if FRONT_FENCE.match(line):
                opened = (pos + len(line), lineno)
            elif line.strip():
                return None, None
        elif FRONT_FENCE.match(line):
            ystart, first = opened
            return _Split(len(bom), ystart, pos, pos + len(line), first + 1), None
        pos += len(line)
    return None, (opened[1] if opened else None)


class Front(NamedTuple):
    """Where a text's frontmatter ends and what it holds; one reader for every caller.

    `block` spans text[start:end] (None when there is none, or it cannot be used); the body is
    text[end:]. `problem` says why a block was read as body: "line N: …; <as_body> only"."""

    meta: dict[str, Any]
    block: str | None
    start: int
    end: int
    problem: str | None = None


def read_front(text: str, *, as_body: str = "read as body") -> Front:
    """Split and parse the frontmatter of `text`; malformed frontmatter is body, with a problem.

    `as_body` is how the caller treats such a text, for the problem line ("indexed as body")."""
    split, unclosed = _split(text)
    skip = len(BOM) if text.startswith(BOM) else 0
    if split is None:
        problem = None
        if unclosed is not None:
            problem = f"line {unclosed}: frontmatter opened with --- is never closed"
            problem += f"; {as_body} only"
        return Front({}, None, skip, skip, problem)
    yaml_text = text[split.ystart : split.yend]
    meta = plain_meta(yaml_text)
    if meta is None:
        # lazy: PyYAML and python-frontmatter, ~15 ms, only once a block is more than plain lines
        from crustacean.frontyaml import load_meta

        meta, problem = load_meta(text[split.start : split.end], split.first_line, as_body)
        if problem is not None:
            return Front({}, None, skip, skip, problem)
    return Front(meta, text[split.start : split.end], split.start, split.end)


# A frontmatter line read and edited without YAML: a short plain key, one space, then a plain
# scalar of words (no quotes, flow, comment, anchor, tag or block marker: nothing YAML reads
# otherwise than as written), "\n". The keys crustacean writes itself look like this. Its value
# means one thing to YAML 1.1 when it is words that start with a letter and no bool or null word
# (YAML reads `yes` and `off` as booleans), which are that string, or an ISO date, which is that
# date (an impossible one stays a string, as frontyaml's loader keeps it). Anything else goes
# through YAML.
_PLAIN_LINE = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]{0,63}): ([A-Za-z0-9](?:[A-Za-z0-9._/+-]|:(?=[A-Za-z0-9._/+-])"
    r"| (?=[A-Za-z0-9]))*)\n"
)
_PLAIN_BYTES = 4096  # a bigger block is not plain lines worth reading by hand
_ISO_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def plain_meta(yaml_text: str) -> dict[str, Any] | None:
    """The mapping of a block of plain `key: value` lines exactly as the YAML loader reads it,
    without YAML (compile reads 10,000 memories' blocks: half a millisecond saved on each);
    None when any line is more than that, or a key repeats."""
    if len(yaml_text) > _PLAIN_BYTES:
        return None
    meta: dict[str, Any] = {}
    for line in _iter_lines(yaml_text):
        m = _PLAIN_LINE.fullmatch(line)
        if m is None:
            return None
        key, value = m.group(1), m.group(2)
        if key in meta or key.casefold() in _YAML_WORDS:
            return None
        if value[0].isalpha():
            if value.casefold() in _YAML_WORDS:
                return None
            meta[key] = value
            continue
        day = _ISO_DAY.fullmatch(value)
        if day is None:
            return None  # a number, a time, a version: YAML decides what it is
        try:
            meta[key] = date(int(day[1]), int(day[2]), int(day[3]))
        except ValueError:
            meta[key] = value
    return meta


def parse_document(text: str, path: str) -> Document:
    """Split and parse a memory file; malformed frontmatter gives body only and a warning."""
    front = read_front(text)
    warning = f"{path} {front.problem}" if front.problem is not None else None
    return Document(path, text, front.meta, text[front.end :], front.block, warning)


def read_document(
    root: Path, rel: str, *, lenient: bool = False, data: bytes | None = None
) -> Document:
    """Read `root/rel` as a memory; raises DocumentSkipped when it is no text we can use.

    `lenient` (for readers that never write back: context, search) decodes invalid UTF-8 with
    U+FFFD in its place and says so in `warning`, so one bad byte does not hide a whole file.
    `data` is the file's bytes when the caller has read them already (compile reads each once)."""
    if data is None:
        data = _read_bytes(os.path.join(root, rel), rel)  # no Path: compile reads 10,000
    elif len(data) > MAX_DOC_BYTES:
        raise DocumentSkipped(rel, f"larger than {MAX_DOC_BYTES:,} bytes")
    bad = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not lenient:
            raise DocumentSkipped(rel, f"not UTF-8 text (bad byte at offset {e.start})") from None
        text, bad = data.decode("utf-8", "replace"), e.start
    if "\x00" in text:
        raise DocumentSkipped(rel, "not text (contains NUL bytes)")
    doc = parse_document(text, rel)
    if bad is not None:
        note = f"{rel}: not valid UTF-8 at byte {bad}; read with U+FFFD in its place"
        doc = doc._replace(warning=f"{doc.warning}; {note}" if doc.warning else note)
    return doc


def _read_bytes(path: str, rel: str) -> bytes:
    """At most MAX_DOC_BYTES + 1 bytes, so a huge file is refused without loading it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DOC_BYTES + 1)
    except OSError as e:
        raise DocumentSkipped(rel, f"unreadable ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_DOC_BYTES:
        raise DocumentSkipped(rel, f"larger than {MAX_DOC_BYTES:,} bytes")
    return data


# ---------------------------------------------------------------------------------------------
# Writing


def yaml_scalar(value: Any) -> str:
    """One value as a single line of YAML, quoted only when YAML would misread it."""
    # lazy: PyYAML, ~15 ms, only to write a block
    from crustacean.frontyaml import yaml_scalar as scalar

    return scalar(value)


def _eol(text: str) -> str:
    """The file's line ending, judged by its first line; "\\n" when it has none."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def new_document(meta: dict[str, Any], body: str) -> str:
    """A new memory file: the block in the given key order, a blank line, the body, one newline.

    With no keys there is no block, unless the body itself starts with a `---` line (it would be
    read back as frontmatter, so an empty block protects it).
    """
    body = body.rstrip("\n")
    text = f"{body}\n" if body else ""
    if not meta and _split(text) == (None, None):
        return text
    # lazy: PyYAML, ~15 ms, only to write a block
    from crustacean.frontyaml import entry

    block = "---\n" + "".join(entry(k, v, "\n") for k, v in meta.items()) + "---\n"
    return f"{block}\n{text}" if text else block


def set_meta(doc: Document, updates: dict[str, Any]) -> str:
    """The file's new text with `updates` applied; every byte not about those keys is kept.

    Present keys are replaced where they stand, new keys are appended to the block in order,
    and a file without frontmatter gets a block prepended. Malformed frontmatter raises
    ValueError: guessing would risk the user's text.
    """
    if doc.warning is not None:
        raise ValueError(f"cannot set {', '.join(updates)}: {doc.warning}")
    if not updates:
        return doc.text
    # lazy: PyYAML, ~15 ms, only to write a block
    from crustacean.frontyaml import edit_yaml, entry

    split, _ = _split(doc.text)
    eol = _eol(doc.text)
    if split is None:
        block = "---" + eol + "".join(entry(k, v, eol) for k, v in updates.items()) + "---" + eol
        return doc.text[: len(BOM) if doc.text.startswith(BOM) else 0] + block + doc.body
    yaml_text = edit_yaml(doc.text[split.ystart : split.yend], updates, eol, doc.path)
    return doc.text[: split.ystart] + yaml_text + doc.text[split.yend :]


_PLAIN_WORD = re.compile(r"[a-z][a-z_]{0,31}")  # a key or value set_plain_meta writes


def _plain_word(word: str) -> bool:
    return bool(_PLAIN_WORD.fullmatch(word)) and word not in _YAML_WORDS


def set_plain_meta(text: str, key: str, value: str) -> str | None:
    """`set_meta(parse_document(text, path), {key: value})` for a one-word `value`, found without
    YAML when the file has no block or a block of plain `key: value` lines only (compile sets
    thousands of tiers in one pass; the YAML edit and its checks cost half a millisecond each).
    None when the text is anything else: the caller then goes through `set_meta`."""
    if not (_plain_word(key) and _plain_word(value)):
        return None
    if "\r" in text or "\x00" in text or len(text) > MAX_DOC_BYTES:
        return None
    entry = f"{key}: {value}\n"
    split, unclosed = _split(text)
    if split is None:
        if unclosed is not None:
            return None
        skip = len(BOM) if text.startswith(BOM) else 0
        return text[:skip] + "---\n" + entry + "---\n" + text[skip:]
    yaml_text = text[split.ystart : split.yend]
    if len(yaml_text) > _PLAIN_BYTES:
        return None
    lines = _LINE.findall(yaml_text)
    keys = []
    for line in lines:
        m = _PLAIN_LINE.fullmatch(line)
        if m is None:
            return None
        keys.append(m.group(1))
    if len(set(keys)) != len(keys):
        return None
    if key in keys:
        lines[keys.index(key)] = entry
    else:
        lines.append(entry)
    return text[: split.ystart] + "".join(lines) + text[split.yend :]
