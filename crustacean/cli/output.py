"""Output that adapts to where it goes: a terminal gets word-wrapped lines, tables fitted to its
width and progress bars; a pipe, a file or a cron log gets every line whole, never wrapped.

The rules (git's and gh's habits): stdout that is not a terminal is never wrapped, so
`crustacean paths | grep proposals` keeps the path and a piped diff applies; `NO_COLOR` turns
every style off; the global `--quiet` keeps only errors and output asked for by name (`--json`,
`context`); progress goes to stderr, only on a terminal, never with `--quiet` or `--json`.
"""

from __future__ import annotations

import builtins
import functools
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO, cast

import typer

from crustacean.cli.plain import safe as safe  # the one escape (stdlib only)
from crustacean.clock import local_time as local_time  # the one time format (clock.py)
from crustacean.clock import zone_name as zone_name

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod
    from rich.table import Table

    from crustacean.workspace import Progress

# Far wider than any line: tables piped to a file or `grep` take their natural width.
PIPE_WIDTH = 100_000


@functools.cache
def _adaptive() -> type[Console]:
    """The Console class, made on first print: rich costs ~20 ms to import, and a command that
    prints through typer.echo (`context`, the SessionStart hook, a no-op tick) never needs it."""
    # lazy: rich.console, ~50 ms; `context` and a no-op tick never load rich
    from rich.console import Console, ConsoleDimensions

    class AdaptiveConsole(Console):
        """A rich Console that wraps only on a terminal; anywhere else it is as wide as the
        line."""

        @property
        def size(self) -> ConsoleDimensions:
            if not self.is_terminal:  # rich takes COLUMNS as a width: a pipe ignores it
                return ConsoleDimensions(PIPE_WIDTH, 25)
            return super().size

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            self._width, self._height = new_size

        @property
        def soft_wrap(self) -> bool:
            return self._soft_wrap or not self.is_terminal

        @soft_wrap.setter
        def soft_wrap(self, value: bool) -> None:
            self._soft_wrap = value

    return AdaptiveConsole


# What makes rich's Console change a plain string on its way out: an emoji code (`:smile:`), the
# control codes its Text strips (BEL, BS, VT, FF, CR) and a tab (expanded to spaces).
_RICH_CHANGES = re.compile(r":\S*?:|[\a\b\t\v\f\r]")


def _plain_stream(stderr: bool) -> TextIO | None:
    """The stream itself when rich's Console would see no terminal there (so it writes a plain
    string as it is), else None. Mirrors rich's `is_terminal`; anything it might read otherwise
    (FORCE_COLOR, TTY_COMPATIBLE, TTY_INTERACTIVE, Jupyter, Windows) leaves it to rich."""
    env = os.environ
    if sys.platform == "win32" or "get_ipython" in vars(builtins):
        return None
    if "FORCE_COLOR" in env or "TTY_COMPATIBLE" in env or "TTY_INTERACTIVE" in env:
        return None
    stream = sys.stderr if stderr else sys.stdout
    stream = getattr(stream, "rich_proxied_file", stream)
    isatty = getattr(stream, "isatty", None)
    try:
        return None if stream is None or isatty is None or isatty() else stream
    except ValueError:  # a closed stream: rich says so too
        return None


class _LazyConsole:
    """Stands for an adaptive Console until something prints what rich would change; then it is
    made, once. Plain text to a pipe (`paths`, `say`, an error line) is written as rich would
    write it, without importing rich. Kept for the start-up budget (≤ 3x `import typer`):
    rich.console costs ~0.37x of that import, which would take `paths` from 2.9x to ~3.3x."""

    _stderr: bool
    _real: Console | None

    def __init__(self, stderr: bool) -> None:
        object.__setattr__(self, "_stderr", stderr)
        object.__setattr__(self, "_real", None)

    @property
    def is_terminal(self) -> bool:
        if self._real is None and _plain_stream(self._stderr) is not None:
            return False
        return self._get().is_terminal

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """`Console.print`; a lone plain str to a pipe goes straight to the stream."""
        stream = _plain_stream(self._stderr) if self._real is None else None
        if stream is None or not _is_plain(objects, kwargs):
            self._get().print(*objects, **kwargs)
            return
        if not self._stderr and MODE.quiet:  # the stdout console is made quiet
            return
        try:
            stream.write(objects[0] + "\n")
            stream.flush()
        except BrokenPipeError:  # what rich's Console.on_broken_pipe does
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(1) from None

    def _get(self) -> Console:
        real = self._real
        if real is None:
            plain = bool(os.environ.get("NO_COLOR"))  # no colour and no bold (rich keeps bold)
            real = _adaptive()(
                stderr=self._stderr,
                highlight=False,
                color_system=None if plain else "auto",
                no_color=plain,
            )
            if not self._stderr:
                real.quiet = MODE.quiet
            object.__setattr__(self, "_real", real)
        return real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get(), name, value)


def _is_plain(objects: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """One str, printed without markup (or with none in it), highlighting or hard wrapping,
    that rich would write unchanged."""
    if len(objects) != 1 or type(objects[0]) is not str or _RICH_CHANGES.search(objects[0]):
        return False
    markup = kwargs.get("markup")
    return (
        set(kwargs) <= {"markup", "highlight", "soft_wrap"}
        and (markup is False or (markup is None and "[" not in objects[0]))
        and kwargs.get("highlight") in (None, False)
        and kwargs.get("soft_wrap") in (None, True)
    )


_out, _err = _LazyConsole(stderr=False), _LazyConsole(stderr=True)
console = cast("Console", _out)
err_console = cast("Console", _err)


class _Mode:
    """What the global options set for every print (a plain class: no dataclass to build)."""

    quiet: bool = False


MODE = _Mode()


def set_quiet(quiet: bool) -> None:
    """`--quiet`: the human-readable stdout and the stderr notes go silent; errors stay."""
    MODE.quiet = quiet
    if _out._real is not None:  # made before the option was read
        console.quiet = quiet


def width() -> int | None:
    """The terminal's width, or None when stdout is a pipe or a file (nothing is wrapped)."""
    return console.width if console.is_terminal else None


# ---------------------------------------------------------------- lines

_UNIT = r"(\s*)(`[^`]*`\S*|\S+)"  # compiled on first use (re caches it)


def wrap(text: str, width: int | None) -> list[str]:
    """Greedy word wrap that never breaks a word, a path or a `backticked command`.

    A unit longer than the width gets a line of its own, whole (the terminal folds it for the
    eye; a copy still gets it in one piece). Spacing inside a line is kept; continuation lines
    take the first line's indent plus two spaces. `width=None` (a pipe) keeps every line.
    """
    if width is None:
        return text.split("\n")
    # lazy: rich.cells loads rich, which `context` and a pipe never need (tests/test_cli_lazy.py)
    from rich.cells import cell_len

    out: list[str] = []
    for line in text.split("\n"):
        if cell_len(line) <= width:
            out.append(line)
            continue
        units = re.findall(_UNIT, line)
        hang = " " * (len(units[0][0]) + 2) if units else ""
        current = ""
        for space, unit in units:
            if current.strip() and cell_len(current + space + unit) > width:
                out.append(current)
                current = hang + unit
            else:
                current += space + unit
        out.append(current)
    return out


def say(text: str = "", *, err: bool = False) -> None:
    """Print plain text (no markup): wrapped on words on a terminal, whole in a pipe."""
    target = err_console if err else console
    if err and MODE.quiet:
        return
    lines = wrap(safe(text), target.width if target.is_terminal else None)
    target.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


def labelled(label: str, value: str, pad: int) -> str:
    """`Error      ModelError: …` with the value's wrapped lines aligned under its first word
    on a terminal (a pipe keeps the line whole)."""
    term = console.width if console.is_terminal else None
    lines = wrap(safe(value), None if term is None else max(term - pad - 1, 20))
    indent = " " * (pad + 1)
    return "\n".join([f"{label:<{pad}} {lines[0]}"] + [indent + x.lstrip() for x in lines[1:]])


def verbatim(text: str) -> None:
    """A line to copy as it is (a crontab line, a command): never wrapped, even on a terminal."""
    console.print(safe(text), markup=False, highlight=False, soft_wrap=True)


def warn(text: str) -> None:
    """A note on stderr (Warning:, Skipped:, Note:); `--quiet` drops it."""
    say(text, err=True)


def print_json(data: Any) -> None:
    """JSON asked for by name: printed even with `--quiet`, never wrapped, keys as given."""
    # lazy: json, ~2 ms, only for --json (paths and context print lines)
    import json

    text = json.dumps(data, default=str, ensure_ascii=False, indent=2)
    if console.is_terminal and not MODE.quiet:
        # lazy: rich.json, ~35 ms, only for JSON to a terminal
        from rich.json import JSON

        console.print(JSON(text), soft_wrap=True)  # coloured, but a long string stays one line
    else:
        typer.echo(text)


def print_diff(text: str) -> None:
    """A unified diff: coloured on a terminal, uncoloured and unwrapped in a pipe (so `git apply`
    takes it); control characters in it are shown as escapes either way."""
    text = safe(text)
    if not console.is_terminal:
        if not MODE.quiet:
            typer.echo(text.rstrip("\n"))
        return
    # lazy: rich.syntax (pygments), ~65 ms, only for a diff on a terminal
    from rich.syntax import Syntax

    wrapped = "\n".join(wrap_diff_line(line, console.width) for line in text.split("\n"))
    syntax = Syntax(wrapped, "diff", theme="ansi_dark", background_color="default")
    console.print(syntax, soft_wrap=True)  # rich cropped each line at the width: paths cut


def wrap_diff_line(line: str, width: int) -> str:
    """A diff line wrapped between words for a terminal, each piece keeping its `+`, `-` or
    ` ` in the first column (so it is coloured as the line it belongs to); a `---`/`+++`
    header (one path) and a lone long word stay whole."""
    if line.startswith(("--- ", "+++ ")):
        return line
    marker = line[:1] if line[:1] in ("+", "-", " ") else ""
    pieces = wrap(line[len(marker) :], max(width - len(marker), 20))
    return "\n".join(marker + piece for piece in pieces)


# ---------------------------------------------------------------- tables


class Col(NamedTuple):
    """One table column. `drop` 0 is a key column (always kept); higher numbers are dropped
    first when the terminal is too narrow. `shrink` is how narrow a column may get: a `path`
    column is shortened in the middle (`memory/con…/ada.md`), other text wraps on words."""

    name: str
    drop: int = 0
    shrink: int | None = None
    path: bool = False
    justify: JustifyMethod = "left"


GAP = 2  # the space between two columns (box.SIMPLE_HEAD, no edge padding)


def plan_columns(
    natural: Sequence[int], cols: Sequence[Col], width: int | None
) -> list[int | None]:
    """Each column's width, or None for a dropped column, so the table fits `width`.

    Pure: key columns keep their natural width; shrinkable ones give way down to their
    `shrink`; when even that does not fit, the columns with the highest `drop` go first.
    `width=None` (a pipe) keeps every column whole.
    """
    if width is None:
        return list(natural)
    kept = list(range(len(cols)))

    def need(idx: list[int], widths: Callable[[int], int]) -> int:
        return sum(widths(i) for i in idx) + GAP * (len(idx) - 1)

    def floor(i: int, texts_too: bool) -> int:
        limit = cols[i].shrink
        if limit is None or not (cols[i].path or texts_too):
            return natural[i]
        return min(natural[i], limit)

    # Paths shorten first, then low-value columns go; text wraps only when that is not enough
    # (and then only the columns that still do not fit go).
    for texts_too in (False, True):
        trial, shrunk = list(kept), functools.partial(floor, texts_too=texts_too)
        while need(trial, shrunk) > width:
            droppable = [i for i in trial if cols[i].drop > 0]
            if not droppable:
                break
            trial.remove(max(droppable, key=lambda i: (cols[i].drop, i)))
        if need(trial, shrunk) <= width or texts_too:
            kept = trial
            break
    out: list[int | None] = [None] * len(cols)
    spare = width - need(kept, lambda i: floor(i, True))
    for i in kept:  # from the tightest fit, give the room back left to right, up to natural
        least = floor(i, True)
        extra = min(max(spare, 0), natural[i] - least)
        out[i] = least + extra
        spare -= extra
    return out


def shorten_middle(text: str, limit: int) -> str:
    """`memory/contacts/a-very-long-name.md` → `memory/cont…long-name.md` within `limit` cells;
    the file name's end and the top folder stay readable."""
    # lazy: rich.cells loads rich, which `context` never does (tests/test_cli_lazy.py)
    from rich.cells import cell_len

    if cell_len(text) <= limit or limit < 5:
        return text
    tail = (limit - 1) * 3 // 5
    head = limit - 1 - tail
    return text[:head] + "…" + text[len(text) - tail :]


def path_list(paths: Sequence[str], limit: int = 3) -> str:
    """Files of one row: `a.md, b.md, c.md (+2)` in a pipe; on a terminal only the first, so a
    shortened cell still names one real path (`memory/con…/ada.md (+4)`)."""
    shown = list(paths[: limit if width() is None else 1])
    rest = len(paths) - len(shown)
    return ", ".join(shown) + (f" (+{rest})" if rest else "")


def fit_table(
    cols: Sequence[Col], rows: Sequence[Sequence[str]], *, title: str | None = None
) -> Table:
    """A table whose key columns stay whole at the terminal's width (see `plan_columns`), and
    whose cells never split a word, a path or a command across lines: a text column is kept
    at least as wide as its longest word when the table still fits, and a word wider than
    its column even so is shortened in the middle, as a path is."""
    # lazy: rich.table and rich.text, ~50 ms, only for a command that prints a table
    from rich import box
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text

    cells = [[safe(str(r[i])) for i in range(len(cols))] for r in rows]
    natural = [
        max([cell_len(c.name)] + [max(map(cell_len, r[i].split("\n"))) for r in cells])
        for i, c in enumerate(cols)
    ]
    longest = [
        max((cell_len(w) for r in cells for w in r[i].split()), default=0) for i in range(len(cols))
    ]
    widths = _word_safe_widths(natural, cols, longest)
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
    )
    keep = [i for i, w in enumerate(widths) if w is not None]
    for i in keep:
        c, w = cols[i], widths[i]
        wraps = c.shrink is not None and not c.path
        table.add_column(
            c.name,
            justify=c.justify,
            no_wrap=not wraps,
            overflow="ellipsis" if wraps else "ignore",
            width=w if w is not None and w < natural[i] else None,
        )
    for row in cells:
        table.add_row(*(Text(_fit_cell(row[i], cols[i], widths[i])) for i in keep))
    return table


def _word_safe_widths(
    natural: Sequence[int], cols: Sequence[Col], longest: Sequence[int]
) -> list[int | None]:
    """`plan_columns` with each wrapping text column's floor raised to its longest word, so
    rich never folds one; when that cannot fit the terminal, the plain plan."""
    term = width()
    raised = [
        c._replace(shrink=max(c.shrink, min(longest[i], natural[i])))
        if c.shrink is not None and not c.path
        else c
        for i, c in enumerate(cols)
    ]
    planned = plan_columns(natural, raised, term)
    kept = [w for w in planned if w is not None]
    if term is None or sum(kept) + GAP * (len(kept) - 1) <= term:
        return planned
    return plan_columns(natural, cols, term)


def _fit_cell(cell: str, col: Col, w: int | None) -> str:
    """A path shortened in the middle to its column; in a text column, each word too wide."""
    if w is None:
        return cell
    if col.path:
        return shorten_middle(cell, w)
    if col.shrink is None:
        return cell
    return re.sub(r"\S+", lambda m: shorten_middle(m.group(), w), cell)


# ---------------------------------------------------------------- progress


@contextmanager
def progress(label: str, *, enabled: bool = True) -> Iterator[Progress | None]:
    """Yield the callback a core function reports `(done, total)` through, or None.

    A bar on stderr, only on a terminal, gone when the work ends; None (the core then skips its
    reports) for a pipe, cron, `--quiet` or `--json`, so those outputs never hold a bar.
    """
    if not enabled or MODE.quiet or not err_console.is_terminal:
        yield None
        return
    # lazy: rich.progress, ~65 ms, only with a bar on a terminal
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
    from rich.progress import Progress as Bar

    bar = Bar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=_err._get(),  # rich needs the Console itself
        transient=True,
    )
    task = bar.add_task(label, total=None)
    with bar:

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield report
