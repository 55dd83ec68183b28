"""The YAML side of frontmatter: the safe, bounded loader and the line-preserving edits.

Kept apart from crustacean/documents.py so that finding where a block ends, and reading files
with no frontmatter (or from the index), does not import PyYAML and python-frontmatter (~15 ms
at start-up): documents.py imports this module on the first block it parses or edits.

A block is read the ordinary way, `frontmatter.parse(block, handler=HANDLER)`, with a handler
whose boundary is markdown.py's frontmatter fence and whose `load` is bounded: an alias bomb (a few
hundred bytes that expand to millions of values) is refused before it is built, and a block
that is no mapping raises rather than reading as `{}`. Where a block starts and ends (the BOM,
an unclosed block, exact offsets for line-preserving edits) documents.py finds itself, as
python-frontmatter strips the text and the body; its `dumps` would also sort keys and drop the
final newline (STACK.md §5), so writing is the line edits below.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import TYPE_CHECKING, Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from crustacean.markdown import FRONT_FENCE

MAX_FRONT_VALUES = 10_000  # values a frontmatter block may expand to, aliases followed
MAX_FRONT_DEPTH = 64  # nesting levels, aliases followed (a self-referencing alias is infinite)
MAX_FRONT_BYTES = 64_000
# Besides YAML errors: a timestamp-looking value that is no date, or absurdly deep nesting.
_YAML_FAILURES = (yaml.YAMLError, ValueError, TypeError, RecursionError)


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


class FrontmatterProblem(Exception):
    """Why a block is no metadata: at `line` (0-based in the handler's text, whose line 0 is
    the opening fence's), `what` is wrong."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line, self.what = line, what

    def says(self, as_body: str) -> str:
        return f"{self.what}; {as_body} only"


class FrontmatterOverLimit(FrontmatterProblem):
    """A frontmatter block that would expand past the limits; it is reported, never built."""

    def __init__(self, what: str) -> None:
        super().__init__(1, what)

    def says(self, as_body: str) -> str:
        return f"frontmatter {self.what}, over the limit; not parsed, {as_body}"


class BoundedYAMLHandler(YAMLHandler):
    """python-frontmatter's YAML handler with the safe loader, and alias expansion bounded.

    PyYAML shares an anchored node between its aliases, so composing a bomb is cheap; what
    explodes is everything after (walking, dumping, indexing the values). The composed graph is
    measured first, each shared node once, and only a block inside the limits is built."""

    FM_BOUNDARY = FRONT_FENCE

    def load(self, fm: str, **kwargs: object) -> dict[str, Any]:
        """The mapping (empty for an empty block); raises FrontmatterProblem for anything else."""
        try:
            node, data = self.compose_bounded(fm)
        except FrontmatterProblem:
            raise
        except _YAML_FAILURES as e:
            what = f"frontmatter is not valid YAML ({_problem(e)})"
            raise FrontmatterProblem(_error_line(e, fm), what) from None
        if data is None and node is None:
            return {}
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else f"a single value ({_kind(data)})"
            line = node.start_mark.line if node is not None else 1
            raise FrontmatterProblem(line, f"frontmatter is {kind}, not a mapping of keys")
        return data

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


def load_meta(block: str, first_line: int, as_body: str) -> tuple[dict[str, Any], str | None]:
    """The mapping of a `---` block whose first YAML line is file line `first_line`, or
    ({}, "line N: what is wrong; read as body only")."""
    try:
        meta, _ = frontmatter.parse(block, handler=HANDLER)
    except FrontmatterProblem as e:
        return {}, f"line {first_line - 1 + e.line}: {e.says(as_body)}"
    return meta, None


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
    if "\n" not in plain and _reads_as(plain, value):
        return plain
    return _dump(value, '"')


def _dump(value: str, style: str | None) -> str:
    out = yaml.safe_dump(value, default_style=style, allow_unicode=True, width=2**31)
    return out.removesuffix("\n").removesuffix("\n...").removesuffix("\n")


def entry(key: str, value: Any, eol: str) -> str:
    return f"{yaml_scalar(key)}: {yaml_scalar(value)}{eol}"


def _lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (str.splitlines also splits on \\x0c…)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def edit_yaml(yaml_text: str, updates: dict[str, Any], eol: str, path: str) -> str:
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


def _reads_as(yaml_text: str, want: object) -> bool:
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
        yield yaml_text + "".join(indent + entry(k, v, eol) for k, v in new.items())


def _key_indent(yaml_text: str, root: Node | None) -> str:
    """The leading whitespace of the first key's line (the root may be indented, or anchored)."""
    if not isinstance(root, MappingNode) or not root.value:
        return ""
    line_start = yaml_text.rfind("\n", 0, root.value[0][0].start_mark.index) + 1
    return _blanks(yaml_text[line_start:])


def _blanks(text: str) -> str:
    """The spaces and tabs `text` starts with."""
    return text[: len(text) - len(text.lstrip(" \t"))]
