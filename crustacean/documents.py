"""Memory files: markdown with optional YAML frontmatter (seeds 000 and 002).

The one frontmatter reader (`read_front`): memories, the search index and plain notes all split
and parse a block here, so they agree on where a body starts and why a block is no metadata.

A memory file is owned by its user, so reading never fails and writing never reformats: the
frontmatter is split out by hand, parsed through python-frontmatter's YAML handler with a safe,
bounded loader (`BoundedYAMLHandler`), and edited line by line. python-frontmatter's `dumps`
would sort keys, strip the body and drop the final newline (STACK.md §5), so only its handler is
used. An alias bomb (a few hundred bytes that expand to millions of values) is refused before it
is built: a block that would expand past MAX_FRONT_VALUES values or MAX_FRONT_DEPTH levels is
reported as over the limit, not parsed.

Invariant of a parsed document: `text == bom + (front or "") + body`, where `bom` is "\\ufeff"
when the file starts with one. The BOM is an encoding mark, so it is in neither `front` nor `body`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from crustacean.tiers import TIERS

MAX_DOC_BYTES = 1_000_000
MAX_FRONT_VALUES = 10_000  # values a frontmatter block may expand to, aliases followed
MAX_FRONT_DEPTH = 64  # nesting levels, aliases followed (a self-referencing alias is infinite)
MAX_FRONT_BYTES = 64_000
BOM = "\ufeff"
KNOWN_KEYS = ("name", "source", "recorded", "tier", "tier_set")

_FENCE = re.compile(r"---[ \t]*(?:\r?\n)?")
_LINE = re.compile(r"[^\n]*\n|[^\n]+")
# Besides YAML errors: a timestamp-looking value that is no date, or absurdly deep nesting.
_YAML_FAILURES = (yaml.YAMLError, ValueError, TypeError, RecursionError)


class DocumentSkipped(Exception):
    """A file that cannot be read as a memory at all; callers name it and carry on."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Document:
    """One memory file as read: the exact text, its parts, and the frontmatter mapping."""

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


# libyaml's loader is about 7x faster, which matters when context reads 10,000 memories.
if TYPE_CHECKING:  # one static base for the checker; CSafeLoader has SafeLoader's interface
    _SafeBase = yaml.SafeLoader
else:
    _SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeBase):
    """The safe loader, except that an impossible date (2026-02-30) stays a string.

    Without this, one typo in `recorded` raises ValueError and costs the whole frontmatter.
    """


def _lenient_timestamp(loader: yaml.SafeLoader, node: ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _lenient_timestamp)


class FrontmatterOverLimit(Exception):
    """A frontmatter block that would expand past the limits; it is reported, never built."""


class BoundedYAMLHandler(YAMLHandler):
    """python-frontmatter's YAML handler with the safe loader, and alias expansion bounded.

    PyYAML shares an anchored node between its aliases, so composing a bomb is cheap; what
    explodes is everything after (walking, dumping, indexing the values). The composed graph is
    measured first, each shared node once, and only a block inside the limits is built."""

    def load(self, fm: str, **kwargs: object) -> Any:
        return self.compose_bounded(fm)[1]

    def compose_bounded(self, fm: str) -> tuple[Node | None, Any]:
        if len(fm) > MAX_FRONT_BYTES:
            raise FrontmatterOverLimit(f"is {len(fm):,} characters (limit {MAX_FRONT_BYTES:,})")
        loader = _Loader(fm)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, None
            _measure(node, {}, 0)
            return node, loader.construct_document(node)
        finally:
            loader.dispose()


def _measure(node: Node, seen: dict[int, tuple[int, int]], depth: int) -> tuple[int, int]:
    """(values, height) of `node` with aliases expanded; raises past either limit."""
    if depth > MAX_FRONT_DEPTH:
        raise FrontmatterOverLimit(f"nests deeper than {MAX_FRONT_DEPTH} levels")
    known = seen.get(id(node))
    if known is not None:
        if depth + known[1] > MAX_FRONT_DEPTH:
            raise FrontmatterOverLimit(f"nests deeper than {MAX_FRONT_DEPTH} levels")
        return known
    children: list[Node] = []
    if isinstance(node, SequenceNode):
        children = list(node.value)
    elif isinstance(node, MappingNode):
        children = [n for pair in node.value for n in pair]
    values, height = 1, 0
    for child in children:
        size, tall = _measure(child, seen, depth + 1)
        values, height = values + size, max(height, tall + 1)
        if values > MAX_FRONT_VALUES:
            raise FrontmatterOverLimit(
                f"expands to more than {MAX_FRONT_VALUES:,} values (YAML aliases?)"
            )
    seen[id(node)] = (values, height)
    return values, height


HANDLER = BoundedYAMLHandler()


@dataclass(frozen=True)
class _Split:
    """Where the frontmatter block is: `front` spans text[start:end], YAML text[ystart:yend]."""

    start: int
    ystart: int
    yend: int
    end: int
    first_line: int  # 1-based file line of the first YAML line


def _lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (str.splitlines also splits on \\x0c…)."""
    return _LINE.findall(text)


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
            if _FENCE.fullmatch(line):
                opened = (pos + len(line), lineno)
            elif line.strip():
                return None, None
        elif _FENCE.fullmatch(line):
            ystart, first = opened
            return _Split(len(bom), ystart, pos, pos + len(line), first + 1), None
        pos += len(line)
    return None, (opened[1] if opened else None)


@dataclass(frozen=True)
class Front:
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
    meta, problem = _load_meta(text[split.ystart : split.yend], split.first_line, as_body)
    if problem is not None:
        return Front({}, None, skip, skip, problem)
    return Front(meta, text[split.start : split.end], split.start, split.end)


def parse_document(text: str, path: str) -> Document:
    """Split and parse a memory file; malformed frontmatter gives body only and a warning."""
    front = read_front(text)
    warning = f"{path} {front.problem}" if front.problem is not None else None
    return Document(path, text, front.meta, text[front.end :], front.block, warning)


def _load_meta(yaml_text: str, first_line: int, as_body: str) -> tuple[dict[str, Any], str | None]:
    """The mapping, or ({}, "line N: what is wrong; read as body only")."""
    try:
        node, data = HANDLER.compose_bounded(yaml_text)
    except FrontmatterOverLimit as e:
        return {}, f"line {first_line}: frontmatter {e}, over the limit; not parsed, {as_body}"
    except _YAML_FAILURES as e:
        line = first_line + _error_line(e, yaml_text)
        return {}, f"line {line}: frontmatter is not valid YAML ({_problem(e)}); {as_body} only"
    if data is None and node is None:
        return {}, None
    if not isinstance(data, dict):
        line = first_line + (node.start_mark.line if node is not None else 0)
        kind = "a list" if isinstance(data, list) else f"a single value ({_kind(data)})"
        return {}, f"line {line}: frontmatter is {kind}, not a mapping of keys; {as_body} only"
    return data, None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _error_line(error: Exception, yaml_text: str) -> int:
    """0-based line of the YAML error inside the block, from its mark when it has one."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        return int(mark.line)
    position = getattr(error, "position", None)  # ReaderError: a character offset
    if isinstance(position, int):
        return yaml_text.count("\n", 0, position)
    return 0


def _problem(error: Exception) -> str:
    text = getattr(error, "problem", None) or getattr(error, "reason", None) or str(error)
    first = str(text).strip().splitlines()
    return first[0] if first else type(error).__name__


def read_document(root: Path, rel: str, *, lenient: bool = False) -> Document:
    """Read `root/rel` as a memory; raises DocumentSkipped when it is no text we can use.

    `lenient` (for readers that never write back: context, search) decodes invalid UTF-8 with
    U+FFFD in its place and says so in `warning`, so one bad byte does not hide a whole file."""
    data = _read_bytes(root / rel, rel)
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
        doc = replace(doc, warning=f"{doc.warning}; {note}" if doc.warning else note)
    return doc


def _read_bytes(path: Path, rel: str) -> bytes:
    """At most MAX_DOC_BYTES + 1 bytes, so a huge file is refused without loading it."""
    try:
        with path.open("rb") as handle:
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
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date):  # a datetime is a date too; both are written as ISO
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} into frontmatter: {value!r}")
    plain = _dump(value, None)
    if "\n" not in plain and _reads_back(plain, value):
        return plain
    return _dump(value, '"')


def _dump(value: str, style: str | None) -> str:
    out = yaml.safe_dump(value, default_style=style, allow_unicode=True, width=2**31)
    return out.removesuffix("\n").removesuffix("\n...").removesuffix("\n")


def _reads_back(text: str, value: str) -> bool:
    try:
        loaded: object = yaml.load(text, Loader=_Loader)
        return loaded == value
    except _YAML_FAILURES:
        return False


def _entry(key: str, value: Any, eol: str) -> str:
    return f"{yaml_scalar(key)}: {yaml_scalar(value)}{eol}"


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
    block = "---\n" + "".join(_entry(k, v, "\n") for k, v in meta.items()) + "---\n"
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
    split, _ = _split(doc.text)
    eol = _eol(doc.text)
    if split is None:
        block = "---" + eol + "".join(_entry(k, v, eol) for k, v in updates.items()) + "---" + eol
        return doc.text[: len(BOM) if doc.text.startswith(BOM) else 0] + block + doc.body
    yaml_text = _edit_yaml(doc.text[split.ystart : split.yend], updates, eol, doc.path)
    return doc.text[: split.ystart] + yaml_text + doc.text[split.yend :]


# A frontmatter line set_plain_meta can edit without YAML: a short plain key, one space, a plain
# scalar of words (no quotes, flow, comment, anchor, tag or block marker: nothing YAML reads
# otherwise than as written), "\n". The keys crustacean writes itself look like this.
_PLAIN_ENTRY = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]{0,63}): [A-Za-z0-9](?:[A-Za-z0-9._/+-]|:(?=[A-Za-z0-9._/+-])"
    r"| (?=[A-Za-z0-9]))*\n"
)
_PLAIN_WORD = re.compile(r"(?!(?:y|n|yes|no|on|off|true|false|null)$)[a-z][a-z_]{0,31}")


def set_plain_meta(text: str, key: str, value: str) -> str | None:
    """`set_meta(parse_document(text, path), {key: value})` for a one-word `value`, found without
    YAML when the file has no block or a block of plain `key: value` lines only (compile sets
    thousands of tiers in one pass; the YAML edit and its checks cost half a millisecond each).
    None when the text is anything else: the caller then goes through `set_meta`."""
    if not (_PLAIN_WORD.fullmatch(key) and _PLAIN_WORD.fullmatch(value)):
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
    if len(yaml_text) > 4096:
        return None
    lines = _lines(yaml_text)
    keys = []
    for line in lines:
        m = _PLAIN_ENTRY.fullmatch(line)
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


def _edit_yaml(yaml_text: str, updates: dict[str, Any], eol: str, path: str) -> str:
    """Replace present keys in place, append the rest, and check the result reads as intended.

    YAML has corners (anchored or `?`-keyed roots, `...` markers) where a line cannot simply be
    added; rather than guess, each placement is checked and a ValueError says to edit by hand.
    """
    root = _compose(yaml_text, path)
    replaced, missing = _replace_present(yaml_text, root, updates, path)
    want = _expected(yaml_text, updates)
    for candidate in _appended(replaced, root, missing, eol):
        if _reads_as(candidate, want):
            return candidate
    raise ValueError(
        f"{path}: cannot set {', '.join(updates)} without reformatting its frontmatter; "
        "edit the file by hand"
    )


def _replace_present(
    yaml_text: str, root: Node | None, updates: dict[str, Any], path: str
) -> tuple[str, dict[str, Any]]:
    """The text with every present key's value replaced, and the updates still to append."""
    edits: list[tuple[int, int, str]] = []
    missing = dict(updates)
    if not isinstance(root, MappingNode):
        return yaml_text, missing
    for key_node, value_node in root.value:
        key = key_node.value if isinstance(key_node, ScalarNode) else None
        if key not in updates:
            continue
        missing.pop(key, None)
        try:
            edits.append(_replacement(yaml_text, root, key_node, value_node, updates[key]))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    for start, end, new in sorted(edits, reverse=True):
        yaml_text = yaml_text[:start] + new + yaml_text[end:]
    return yaml_text, missing


def _expected(yaml_text: str, updates: dict[str, Any]) -> dict[Any, Any]:
    """The mapping the edited block must read as: the old one with the updates applied."""
    old = yaml.load(yaml_text, Loader=_Loader) or {}
    new = {key: yaml.load(yaml_scalar(value), Loader=_Loader) for key, value in updates.items()}
    return {**old, **new}


def _reads_as(yaml_text: str, want: dict[Any, Any]) -> bool:
    try:
        got = yaml.load(yaml_text, Loader=_Loader)
    except _YAML_FAILURES:
        return False
    return bool(got == want or repr(got) == repr(want))  # repr: `.nan` is not equal to itself


def _compose(yaml_text: str, path: str) -> Node | None:
    try:
        return yaml.compose(yaml_text, Loader=_Loader)
    except _YAML_FAILURES as e:
        raise ValueError(f"{path}: frontmatter is not valid YAML ({_problem(e)})") from None


def _replacement(
    yaml_text: str, root: MappingNode, key_node: Node, value_node: Node, value: Any
) -> tuple[int, int, str]:
    """(start, end, new text) for one present key.

    A value on the key's own line is swapped in place, keeping any comment after it. A value that
    runs over several lines (a list, a `|` block) is replaced with its whole entry.
    """
    start, end = value_node.start_mark, value_node.end_mark
    if start.index < key_node.end_mark.index:
        raise ValueError(f"{key_node.value!r} is a YAML alias (*name); edit that key by hand")
    one_line = start.line == end.line == key_node.start_mark.line and end.index > start.index
    if one_line or root.flow_style:
        return start.index, end.index, yaml_scalar(value)
    line_start = yaml_text.rfind("\n", 0, key_node.start_mark.index) + 1
    stop = _entry_end(yaml_text, key_node.start_mark.line, end)
    indent = _blanks(yaml_text[line_start:])
    old_end = yaml_text[line_start:stop]
    eol = "\r\n" if old_end.endswith("\r\n") else "\n" if old_end.endswith("\n") else ""
    return line_start, stop, f"{indent}{yaml_scalar(key_node.value)}: {yaml_scalar(value)}{eol}"


def _entry_end(yaml_text: str, key_line: int, end: yaml.Mark) -> int:
    """Offset just past the entry's last line; trailing blank and comment lines stay outside."""
    lines = _lines(yaml_text)
    last = end.line - 1 if end.column == 0 and end.line > key_line else end.line
    last = min(last, len(lines) - 1)
    while last > key_line and (not lines[last].strip() or lines[last].startswith("#")):
        last -= 1
    return sum(len(line) for line in lines[: last + 1])


def _appended(yaml_text: str, root: Node | None, new: dict[str, Any], eol: str) -> Iterator[str]:
    """Where the new keys could go, best guess first: inside a `{…}`, else at the block's end
    indented like the first key, like the root node, or not at all."""
    if not new:
        yield yaml_text
        return
    if isinstance(root, MappingNode) and root.flow_style:
        close = root.end_mark.index - 1  # the closing brace
        items = ", ".join(f"{yaml_scalar(k)}: {yaml_scalar(v)}" for k, v in new.items())
        yield yaml_text[:close] + (", " if root.value else "") + items + yaml_text[close:]
        return
    if yaml_text and not yaml_text.endswith("\n"):
        yaml_text += eol
    column = root.start_mark.column if isinstance(root, MappingNode) else 0
    for indent in dict.fromkeys((_key_indent(yaml_text, root), " " * column, "")):
        yield yaml_text + "".join(indent + _entry(k, v, eol) for k, v in new.items())


def _key_indent(yaml_text: str, root: Node | None) -> str:
    """The leading whitespace of the first key's line (the root may be indented, or anchored)."""
    if not isinstance(root, MappingNode) or not root.value:
        return ""
    line_start = yaml_text.rfind("\n", 0, root.value[0][0].start_mark.index) + 1
    return _blanks(yaml_text[line_start:])


def _blanks(text: str) -> str:
    """The spaces and tabs `text` starts with."""
    return text[: len(text) - len(text.lstrip(" \t"))]
