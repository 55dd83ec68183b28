"""The root listing (`crustacean --help`, `-h`, a bare `crustacean`, `crustacean help`) printed
before typer loads, byte for byte what the app prints.

Loading typer, click and rich and laying out the panels is most of what `--help` costs. The
listing is fixed text (crustacean/cli/commands.py, which the app is built from too), so the
console script (crustacean/cli/entry.py) prints it here with a port of the few layout rules
rich applies to it: word wrapping (rich/_wrap.py, Text.wrap), the table's column widths
(Table._calculate_column_widths, ratio_reduce, ratio_distribute) and the rounded panels.

It answers only where the app's output is certain: stdout not a terminal (no colour, no
terminal-only rendering), UTF-8, none of the variables that change rich's or typer's rendering,
no translation catalog for typer's and click's words ("Options", "Usage:"),
the typer and rich versions the port was checked against (tests/test_help_fast.py compares it
with the app at every width), texts with no markup, and a width in range. Anything else goes to
the app, which prints what it always has.
"""

from __future__ import annotations

import codecs
import itertools
import os
import sys
from math import ceil

from crustacean.cli.commands import (
    COMMANDS,
    HELP,
    HELP_OPTION_NAMES,
    LISTING_FORMS,
    PROG,
    ROOT_EPILOG,
    ROOT_HELP,
    ROOT_OPTIONS,
    SUMMARIES,
)

TYPE_CHECKING = False  # no typing, re or gettext on the way (~15 ms of a ~40 ms listing)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import NamedTuple, TextIO
else:
    from crustacean.lean import NamedTuple

# The exact versions this port was compared against; another version goes to the app.
VERIFIED = {"typer": "0.29.2", "rich": "15.0.0"}
MIN_WIDTH, MAX_WIDTH = 20, 1000  # console widths the tests compare, and the lean path answers
# The environment that changes what typer or rich print (typer/rich_utils.py, typer/core.py,
# rich/console.py): any of these set, and the app answers. COLUMNS and TERMINAL_WIDTH (the
# width) are read here as rich and typer read them. Some change nothing on a pipe, so they do
# not stop the lean path (tests/test_help_fast.py shows the app's bytes unchanged with each):
# NO_COLOR (rich strips colour, and a pipe has none), _TYPER_FORCE_DISABLE_TERMINAL (rich is
# told stdout is no terminal, which it already is not), LINES (the height: no panel here has
# one), TERM (rich reads it for a terminal only).
DOUBT_VARS = (
    "FORCE_COLOR",
    "PY_COLORS",
    "GITHUB_ACTIONS",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
    "DATABRICKS_RUNTIME_VERSION",
    "TYPER_USE_RICH",
    "TYPER_STANDARD_TRACEBACK",
)
DOUBT_PREFIXES = ("_TYPER_", "_CRUSTACEAN_COMPLETE")  # typer's switches, shell completion
HARMLESS = ("NO_COLOR", "_TYPER_FORCE_DISABLE_TERMINAL")

# typer's own options on the root (add_completion=True and the help option), as typer prints
# them: these texts are typer's, not ours.
TYPER_OPTIONS = (
    ("--install-completion", "", "", "Install completion for the current shell."),
    (
        "--show-completion",
        "",
        "",
        "Show completion for the current shell, to copy it or customize the installation.",
    ),
    (HELP_OPTION_NAMES[1], HELP_OPTION_NAMES[0], "", "Show this message and exit."),
)


def answer(argv: Sequence[str], env: Mapping[str, str], stdout: TextIO) -> int | None:
    """Print the root listing for `argv` and return the exit code, or None: the app answers."""
    code = LISTING_FORMS.get(tuple(argv))
    if code is None:
        return None
    width = console_width(env, stdout)
    if width is None or not _versions_verified() or not all(map(plain, texts())):
        return None
    # the help option ends with click's echo of the (empty) help text: one more newline
    text = render(width) + ("\n" if argv and argv[0] in HELP_OPTION_NAMES else "")
    try:
        stdout.write(text)
        stdout.flush()
    except BrokenPipeError:  # what rich does: quiet the stream, exit 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        return 1
    return code


def console_width(env: Mapping[str, str], stdout: TextIO) -> int | None:
    """The width rich would render at, or None where its output is not certain."""
    if sys.platform == "win32" or any(var in env for var in DOUBT_VARS):
        return None
    if any(var.startswith(DOUBT_PREFIXES) and var not in HARMLESS for var in env):
        return None
    try:
        if stdout.isatty() or codecs.lookup(stdout.encoding).name != "utf-8":
            return None
    except (AttributeError, LookupError, TypeError, ValueError):
        return None
    if _translated():
        return None
    width: int | None = None
    for name in ("TERMINAL_WIDTH", "COLUMNS"):  # typer's max width, then rich's COLUMNS
        value = env.get(name)
        if value is not None:
            if not (value.isascii() and value.isdigit()):
                return None  # typer fails on a bad TERMINAL_WIDTH; rich reads odd digits
            width = int(value)
            break
    if width is None:
        width = _terminal_width()
    return width if MIN_WIDTH <= width <= MAX_WIDTH else None


def _translated() -> bool:
    """typer's and click's words ("Options", "Usage:"…) go through gettext's default domain:
    a catalog for it where gettext looks by default would translate them."""
    if not os.path.isdir(os.path.join(sys.base_prefix, "share", "locale")):
        return False  # gettext's default folder: none, so nothing to find
    # lazy: gettext brings re, ~7 ms, and is needed only where a catalog could be
    import gettext

    return gettext.find("messages") is not None


def _terminal_width() -> int:
    """rich's Console.size: the first of stdin, stdout, stderr that is a terminal, else 80."""
    for fd in (0, 1, 2):
        try:
            columns = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        return columns or 80
    return 80


def _versions_verified() -> bool:
    """The typer and rich that would be imported are the versions the port was checked with:
    the first of sys.path holding the package also holds its dist-info of that version."""
    for name, version in VERIFIED.items():
        for entry in sys.path:
            folder = entry or "."
            if os.path.isfile(os.path.join(folder, name, "__init__.py")):
                if not os.path.isdir(os.path.join(folder, f"{name}-{version}.dist-info")):
                    return False
                break
        else:
            return False
    return True


def _options() -> list[tuple[str, str, str, str]]:
    """The Options panel's rows: (long name, short name, type shown, help)."""
    return [*((o.long, o.short, o.shown_type, o.help) for o in ROOT_OPTIONS), *TYPER_OPTIONS]


def texts() -> list[str]:
    """Every text the listing shows; each must be plain (no markup, one cell a character)."""
    return [ROOT_HELP, ROOT_EPILOG, *(s for row in _options() for s in row), *SUMMARIES.values()]


def plain(text: str) -> bool:
    """rich prints `text` as it is: no markup, emoji code or escape, one cell a character, no
    space at either end for typer to strip (a text that is not goes to the app;
    tests/test_help_fast.py keeps them all plain)."""
    if text != text.strip() or any(c in "[]\\" for c in text):  # rich markup and its escape
        return False
    if any(word.count(":") > 1 for word in text.split(" ")):  # could be an emoji code, :name:
        return False
    return all(" " <= c <= "~" or c == "…" for c in text)  # one cell each, only space as space


def render(width: int) -> str:
    """The root listing at `width` columns, as typer's rich_format_help prints it to a pipe:
    the usage, the help, the Options and Commands panels, the epilog."""
    blank = " " * width
    lines = [blank, *_padded(f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...", width), blank]
    lines += [*_padded(ROOT_HELP, width, aligned=True), blank]
    option_rows = [
        [Cell(long), Cell(short), Cell(""), Cell(""), Cell(shown, "fold"), Cell(text, grid=True)]
        for long, short, shown, text in _options()
    ]
    lines += _panel("Options", _table([Column()] * 6, option_rows, width - 4), width)
    names = [name for name, _, _ in (*COMMANDS, HELP)]
    columns = [Column(width=max(map(len, names)), no_wrap=True), Column(ratio=10)]
    rows = [[Cell(name), Cell(SUMMARIES[name])] for name in names]
    lines += _panel("Commands", _table(columns, rows, width - 4), width)
    lines += [blank, *_padded(ROOT_EPILOG, width, aligned=True), blank]
    return "".join(f"{line}\n" for line in lines)


def _padded(text: str, width: int, aligned: bool = False) -> list[str]:
    """Padding(text, (0, 1)): wrapped one column in from each side; `aligned`, inside a left
    Align, which first narrows the text to its own length."""
    inner = width - 2
    return [
        f" {_fit(line, inner)} "
        for line in _wrap(text, min(len(text), inner) if aligned else inner)
    ]


# ---------------------------------------------------------------- rich's rules, for plain text


def _fit(line: str, width: int) -> str:
    """A rendered line cropped or padded to `width` (Segment.split_and_crop_lines, pad=True)."""
    return line[:width].ljust(width)


def _divide(text: str, width: int, fold: bool) -> list[int]:
    """rich's divide_line: the offsets to break `text` at to fit `width` cells."""
    breaks: list[int] = []
    offset = 0
    for start, word in _words(text):
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            if fold:
                chunks = [word[i : i + width] for i in range(0, len(word), width)]
                for index, chunk in enumerate(chunks):
                    if start:
                        breaks.append(start)
                    if index == len(chunks) - 1:
                        offset = len(chunk)
                    else:
                        start += len(chunk)
            else:
                if start:
                    breaks.append(start)
                offset = len(word)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def _words(text: str) -> Iterator[tuple[int, str]]:
    """rich's words (`\\s*\\S+\\s*`) of a plain text, whose only space is " ": each word with
    the spaces after it (and, first, before it), and where it starts."""
    at, end = 0, len(text)
    while at < end:
        start = at
        while at < end and text[at] == " ":
            at += 1
        if at == end:
            return
        while at < end and text[at] != " ":
            at += 1
        while at < end and text[at] == " ":
            at += 1
        yield start, text[start:at]


def _wrap(text: str, width: int, overflow: str = "fold", justify: bool = False) -> list[str]:
    """Text.wrap of one plain line: divided, trailing space past the width dropped, then cut
    with an ellipsis or folded; `justify` ("left") pads each line to the width."""
    offsets = [0, *_divide(text, width, fold=overflow == "fold"), len(text)]
    lines = []
    for start, end in itertools.pairwise(offsets):
        line = text[start:end]
        if len(line) > width:
            space = len(line) - len(line.rstrip(" "))
            line = line[: len(line) - min(space, len(line) - width)]
        if len(line) > width:
            line = line[: width - 1] + "…" if overflow == "ellipsis" else line[:width]
        lines.append(line.ljust(width) if justify else line)
    return lines


class Measure(NamedTuple):
    """rich's Measurement: the narrowest and widest a renderable can be laid out."""

    minimum: int
    maximum: int

    def normalize(self) -> Measure:
        low = min(max(0, self.minimum), self.maximum)
        return Measure(max(0, low), max(0, max(low, self.maximum)))

    def capped(self, width: int) -> Measure:
        return Measure(min(self.minimum, width), min(self.maximum, width))


class Cell(NamedTuple):
    """A table cell: a plain Text (its own overflow, or the column's), or, `grid`, typer's
    Columns of one Text (which has no measure of its own, so takes any width)."""

    text: str
    overflow: str | None = None
    grid: bool = False


class Column(NamedTuple):
    """A table column: a fixed width, a ratio of the spare width, or sized by its cells."""

    width: int | None = None
    ratio: int | None = None
    no_wrap: bool = False


def _text_measure(text: str) -> Measure:
    """Text's measure: its longest word, its longest line."""
    longest = max((len(line) for line in text.splitlines()), default=0)
    words = text.split()
    return Measure(max(len(w) for w in words) if words else longest, longest)


def _padded_measure(cell: Cell, pad: int, width: int) -> Measure:
    """Measurement.get of Padding(cell) at `width`."""
    if width < 1:
        return Measure(0, 0)
    if width - pad < 1:
        found = Measure(width, width)
    else:
        inner = Measure(0, width) if cell.grid else _text_measure(cell.text)
        found = Measure(inner.minimum + pad, inner.maximum + pad).capped(width)
    found = found.normalize().capped(width)
    return Measure(0, 0) if found.maximum < 1 else found.normalize()


def _pads(index: int, count: int) -> tuple[int, int]:
    """(left, right) padding of a column: (0, 1) cells, none at the table's edges."""
    return (0 if index == 0 else 1), (0 if index == count - 1 else 1)


def _measure_column(
    column: Column, cells: list[Cell], index: int, count: int, width: int
) -> Measure:
    """Table._measure_column: a fixed width, or the widest of its cells' measures."""
    if width < 1:
        return Measure(0, 0)
    pad = sum(_pads(index, count))
    if column.width is not None:
        return Measure(column.width + pad, column.width + pad).capped(width)
    found = [_padded_measure(cell, pad, width) for cell in cells]
    return Measure(
        max((m.minimum for m in found), default=1), max((m.maximum for m in found), default=width)
    ).capped(width)


def _ratio_reduce(
    total: int, ratios: list[int], maximums: list[int], values: list[int]
) -> list[int]:
    """rich's ratio_reduce: take `total` off `values` by ratio, each at most its maximum."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums, strict=True)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    remaining, result = total, []
    for ratio, maximum, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            distributed = min(maximum, round(ratio * remaining / total_ratio))
            result.append(value - distributed)
            remaining -= distributed
            total_ratio -= ratio
        else:
            result.append(value)
    return result


def _ratio_distribute(
    total: int, ratios: list[int], minimums: list[int] | None = None
) -> list[int]:
    """rich's ratio_distribute: share `total` by ratio, each at least its minimum."""
    if minimums:
        ratios = [r if m else 0 for r, m in zip(ratios, minimums, strict=True)]
    total_ratio = sum(ratios)
    remaining, result = total, []
    for ratio, minimum in zip(ratios, minimums or [0] * len(ratios), strict=True):
        distributed = (
            max(minimum, ceil(ratio * remaining / total_ratio)) if total_ratio > 0 else remaining
        )
        result.append(distributed)
        total_ratio -= ratio
        remaining -= distributed
    return result


def _collapse(widths: list[int], wrapable: list[bool], max_width: int) -> list[int]:
    """Table._collapse_widths: narrow the widest wrapping columns until the table fits."""
    total = sum(widths)
    excess = total - max_width
    if any(wrapable):
        while total and excess > 0:
            top = max(w for w, ok in zip(widths, wrapable, strict=True) if ok)
            second = max(
                w if ok and w != top else 0 for w, ok in zip(widths, wrapable, strict=True)
            )
            ratios = [1 if (w == top and ok) else 0 for w, ok in zip(widths, wrapable, strict=True)]
            if not any(ratios) or not top - second:
                break
            widths = _ratio_reduce(
                excess, ratios, [min(excess, top - second)] * len(widths), widths
            )
            total = sum(widths)
            excess = total - max_width
    return widths


def _column_widths(columns: list[Column], by_column: list[list[Cell]], max_width: int) -> list[int]:
    """Table._calculate_column_widths for an expanding table with no box."""
    count = len(columns)

    def measure(index: int, width: int) -> Measure:
        return _measure_column(columns[index], by_column[index], index, count, width)

    ranges = [measure(i, max_width) for i in range(count)]
    widths = [r.maximum or 1 for r in ranges]
    flexible = [c.ratio is not None for c in columns]
    if any(c.ratio for c in columns if c.ratio is not None):
        fixed = [0 if flex else r.maximum for r, flex in zip(ranges, flexible, strict=True)]
        minimum = [
            (c.width or 1) + sum(_pads(i, count))
            for i, c in enumerate(columns)
            if c.ratio is not None
        ]
        flex_widths = iter(
            _ratio_distribute(
                max_width - sum(fixed),
                [c.ratio or 0 for c in columns if c.ratio is not None],
                minimum,
            )
        )
        for index, flex in enumerate(flexible):
            if flex:
                widths[index] = fixed[index] + next(flex_widths)
    table_width = sum(widths)
    if table_width > max_width:
        wrapable = [c.width is None and not c.no_wrap for c in columns]
        widths = _collapse(widths, wrapable, max_width)
        table_width = sum(widths)
        if table_width > max_width:
            widths = _ratio_reduce(table_width - max_width, [1] * count, widths, widths)
            table_width = sum(widths)
        widths = [measure(i, w).maximum or 0 for i, w in enumerate(widths)]
    if table_width < max_width:
        pads = _ratio_distribute(max_width - table_width, widths)
        widths = [w + p for w, p in zip(widths, pads, strict=True)]
    return widths


def _cell_lines(cell: Cell, column: Column, index: int, count: int, width: int) -> list[str]:
    """A cell (Padding of its text) rendered at its column's width. rich renders nothing at
    all into less than one column (Console.render), so a cell that narrow has no lines."""
    left, right = _pads(index, count)
    inner = width - left - right
    if width < 1:
        return []
    if inner < 1:
        lines = []
    elif cell.grid:  # Columns: a grid of one column, not expanded, as wide as the text
        found = _padded_measure(cell._replace(grid=False), 0, inner)
        lines = _wrap(cell.text, found.maximum or 1, "ellipsis", justify=True)
    elif column.no_wrap:
        lines = [_wrap_unwrapped(cell.text, inner, cell.overflow or "ellipsis")]
    else:
        lines = _wrap(cell.text, inner, cell.overflow or "ellipsis", justify=True)
    return [" " * left + _fit(line, inner) + " " * right for line in lines]


def _wrap_unwrapped(text: str, width: int, overflow: str) -> str:
    """A no_wrap cell's one line, cut to the width (with an ellipsis) or padded to it."""
    if len(text) > width:
        return text[: width - 1] + "…" if overflow == "ellipsis" else text[:width]
    return text.ljust(width)


def _table(columns: list[Column], rows: list[list[Cell]], max_width: int) -> list[str]:
    """typer's expanding, boxless Table: each row as tall as its tallest cell."""
    count = len(columns)
    by_column = [[row[i] for row in rows] for i in range(count)]
    widths = _column_widths(columns, by_column, max_width)
    lines = []
    for row in rows:
        cells = [_cell_lines(cell, columns[i], i, count, widths[i]) for i, cell in enumerate(row)]
        height = max(1, *(len(c) for c in cells))  # a row is one line at least
        for line_no in range(height):
            lines.append(
                "".join(
                    _fit(c[line_no], w) if line_no < len(c) else " " * w
                    for c, w in zip(cells, widths, strict=True)
                )
            )
    return lines


def _panel(title: str, body: list[str], width: int) -> list[str]:
    """A rounded Panel, expanded to `width`, title on the left, padding (0, 1)."""
    inner = width - 2
    if width <= 4:
        top = "╭" + "─" * inner + "╮"
    else:
        label = f" {title} "[: width - 4]
        top = "╭─" + label + "─" * (width - 4 - len(label)) + "─╮"
    middle = [f"│{_fit(' ' + _fit(line, inner - 2) + ' ', inner)}│" for line in body]
    return [top, *middle, "╰" + "─" * inner + "╯"]
