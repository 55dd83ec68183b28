"""`crustacean search` from the shell, answered before the app loads when nothing is in doubt.

A user's or an agent's shell search is one process per query; most of what it paid was the app
(typer, rich, the config schema, yaml), not the query. So the console script
(crustacean/cli/entry.py) hands every `search` here first. This answers only what it fully
understands, with the stdout, stderr and exit code the app would give, and leaves the rest to
the app, unchanged:

- the arguments: `[-w DIR] search WORDS… [-n N] [--budget-chars N] [--path-prefix P] [--json]
  [--raw] [--archive]`, each option once; anything else (`--help`, `--record`, which writes,
  `-c`, `-q`, `--`, an unknown flag, a value click might read otherwise) goes to the app;
- the config: the app's last search here left a memo in state.db (`search_memo`) of what its
  answer depended on beyond the index, keyed by the root arguments, the cwd, the environment and
  the crustacean version: the config files it read, their bytes' hash, the time zone they gave
  ("today" for dates in the query) and the schema's migrations. Any of those changed, a config
  that warned, or no memo yet: the app answers (and leaves a new memo);
- the index: the same freshness check as `SearchIndex.update` (every file's size and mtime as
  one mark, `search_read.recorded`); a stale index goes to the app, which re-indexes;
- the output: stdout and stderr that are not terminals (a terminal gets wrapping, colour and a
  progress bar from rich), UTF-8, and text rich prints as it is (no tab, nothing like an
  `:emoji:` code); any error at all (bad FTS syntax, a locked database) goes to the app, which
  reports it.

What it prints is made by the functions the app's `search` prints through (`hit_blocks`,
`report_lines`). Only stdlib, the index's read half (recall/search_read.py) and, for the
semantic extra, recall/semantic.py are imported.
"""

from __future__ import annotations

import codecs
import os
import re
import sqlite3
from datetime import UTC, date, datetime

from crustacean import __version__
from crustacean.cli.plain import safe
from crustacean.memo import STATE_DB, WORKSPACE_FILE, before_command, digest, hexdigest, locate
from crustacean.recall.search_read import (
    Hit,
    IndexReader,
    noted,
    recorded,
    scan_mark,
)

TYPE_CHECKING = False  # typing's import is ~3 ms of a shell search (crustacean/lean.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import NamedTuple, TextIO
else:
    from crustacean.lean import NamedTuple

FORMAT = "search-memo-2"  # bump when what the memo covers changes
NO_MATCHES = "No matches."
KEPT_MEMOS = 32  # rows kept per state.db (one per root arguments, cwd and environment)
_VALUES = {"-n": "n", "--budget-chars": "budget_chars", "--path-prefix": "path_prefix"}
_FLAGS = {"--json": "as_json", "--raw": "raw", "--archive": "archive"}
_COUNT = re.compile(r"[1-9][0-9]{0,8}")  # a count as typed; any other spelling: click decides
_EMOJI = re.compile(r":\S*?:")  # what rich may read as an `:emoji:` code (rich/_emoji_replace)
_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")  # rich treats a pipe as a terminal with these
_noted: tuple[str, str, bool] | None = None  # set by the app's search in this process


# ---------------------------------------------------------------- what the app prints


def hit_blocks(hits: Sequence[Hit], *, full: bool) -> list[str]:
    """Each hit as the lines `search` prints for it: `path#Lstart-Lend  score  snippet`, or with
    a budget (`full`) the score, the day, and the window's lines indented under it."""
    out = []
    for h in hits:
        where = safe(f"{h.path}#L{h.start_line}-L{h.end_line}")
        if full:
            when = f"  ({h.when})" if h.when else ""
            text = "\n".join(f"    {safe(line)}" for line in h.text.split("\n"))
            out.append(f"{where}  {h.score:.2f}{when}\n{text}")
        else:
            out.append(f"{where}  {h.score:.2f}  {safe(h.snippet)}")
    return out


def report_lines(
    skipped: Sequence[tuple[str, str]], warnings: Sequence[tuple[str, str]]
) -> list[str]:
    """The stderr notes naming the files search could not use, so nobody assumes the index is
    complete (printed through `warn`, which escapes them)."""
    return [f"Skipped: {p} ({r})" for p, r in skipped] + [f"Warning: {p}: {r}" for p, r in warnings]


def hits_json(hits: Sequence[Hit]) -> str:
    """`--json` as output.print_json writes it to a pipe."""
    # lazy: json, ~2 ms, for --json alone
    import json

    return json.dumps([h.to_json() for h in hits], default=str, ensure_ascii=False, indent=2)


def note(root: str | os.PathLike[str], timezone: str, warned: bool) -> None:
    """The app's search ran in `root`, whose config gave `timezone` (and warned, or not)."""
    global _noted
    _noted = (os.fspath(root), timezone, warned)


def _take_note() -> tuple[str, str, bool] | None:
    global _noted
    got, _noted = _noted, None
    return got


# ---------------------------------------------------------------- the arguments


class Ask(NamedTuple):
    """A search invocation understood whole."""

    root_args: tuple[str, ...]  # before `search`: nothing, or -w/--workspace DIR
    workspace: str | None
    words: tuple[str, ...]
    n: int | None = None
    budget_chars: int | None = None
    path_prefix: str | None = None
    as_json: bool = False
    raw: bool = False
    archive: bool = False


def parse(argv: Sequence[str]) -> Ask | None:
    """The invocation, if it is a plain search this module can answer; else None (the app)."""
    found = before_command(argv, "search")
    if found is None:
        return None
    workspace, i = found
    root_args, i = tuple(argv[:i]), i + 1
    words: list[str] = []
    values: dict[str, str] = {}
    flags: dict[str, bool] = {}
    while i < len(argv):
        arg, i = argv[i], i + 1
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        elif arg.startswith("-n") and len(arg) > 2:
            name, value = "-n", arg[2:]
        if name in _FLAGS and value is None:
            flags[_FLAGS[name]] = True
        elif name in _VALUES and _VALUES[name] not in values:
            if value is None:
                if i == len(argv):
                    return None
                value, i = argv[i], i + 1
            if value.startswith("-"):
                return None
            values[_VALUES[name]] = value
        elif arg.startswith("-"):
            return None
        else:
            words.append(arg)
    counts = [values.get(k) for k in ("n", "budget_chars")]
    if not words or any(c is not None and not _COUNT.fullmatch(c) for c in counts):
        return None
    n, budget = (None if c is None else int(c) for c in counts)
    return Ask(
        root_args,
        workspace,
        tuple(words),
        n,
        budget,
        values.get("path_prefix"),
        flags.get("as_json", False),
        flags.get("raw", False),
        flags.get("archive", False),
    )


# ---------------------------------------------------------------- the memo and the answer


def _is_utf8(stream: TextIO) -> bool:
    try:
        return codecs.lookup(stream.encoding or "ascii").name == "utf-8"
    except LookupError:
        return False


def _pacify(*streams: TextIO) -> None:
    """Point closed pipes at /dev/null, so the interpreter's last flush does not complain."""
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in streams:
        try:
            os.dup2(null, stream.fileno())
        except (OSError, ValueError):  # no file behind it (contextlib's import: ~1 ms)
            continue
    os.close(null)


def _file_uri(path: str) -> str:
    """An absolute path as an SQLite URI (what Path.as_uri gives, without pathlib's import):
    `%`, `?` and `#` escaped, an empty authority before the path."""
    quoted = path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    return f"file://{quoted}"


def _today(timezone: str) -> Callable[[datetime], date]:
    """Workspace.today for a zone name ("" is the system's zone)."""
    if not timezone:
        return lambda now: now.astimezone().date()
    # lazy: zoneinfo, ~3 ms, only for a configured zone
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(timezone)
    return lambda now: now.astimezone(zone).date()


class Probe(NamedTuple):
    """A search this module understood, in the workspace it would run in."""

    ask: Ask
    root: str
    key: str
    env: Mapping[str, str]

    @property
    def db(self) -> str:
        return os.path.join(self.root, STATE_DB)

    def answer(self, out: TextIO, err: TextIO) -> bool:
        """Print the app's answer and say True, or print nothing and say False."""
        try:
            printed = self._printed(out, err)
        except Exception:  # anything unexpected: the app answers, and reports it its way
            return False
        if printed is None:
            return False
        try:
            if printed[1]:
                err.write(printed[1])
                err.flush()
            out.write(printed[0])
            out.flush()
        except BrokenPipeError:  # as click's main: exit 1, and nothing said at exit
            _pacify(out, err)
            raise SystemExit(1) from None
        return True

    def _printed(self, out: TextIO, err: TextIO) -> tuple[str, str] | None:
        """(stdout, stderr) of the app's answer, or None where this cannot be sure of them."""
        ask = self.ask
        if out.isatty() or any(name in self.env for name in _TERMINAL_ENV):
            return None
        if err.isatty() and not ask.as_json:
            return None  # the app shows (and clears) a progress bar on a terminal
        if not (_is_utf8(out) and _is_utf8(err)) or not os.path.isfile(self.db):
            return None
        conn = sqlite3.connect(f"{_file_uri(self.db)}?mode=ro", uri=True, timeout=1)
        try:
            memo = self._memo(conn)
            if memo is None:
                return None
            mark, files, problems = scan_mark(self.root)
            if problems or not recorded(conn, mark, files):
                return None  # a stale index: the app re-indexes (and names what it skipped)
            reader = IndexReader(conn, self.db, _today(memo))
            hits = reader.search(
                " ".join(ask.words),
                ask.n,
                raw=ask.raw,
                path_prefix=ask.path_prefix,
                include_archive=ask.archive,
                budget_chars=ask.budget_chars,
                now=datetime.now(UTC),
            )
            notes = report_lines(*noted(conn))
        finally:
            conn.close()
        if notes and err.isatty():
            return None  # the app wraps them to the terminal's width
        if ask.as_json:
            text = [hits_json(hits)]
        else:
            text = hit_blocks(hits, full=ask.budget_chars is not None) or [NO_MATCHES]
        shown = [safe(line) for line in notes]
        if any("\t" in t or _EMOJI.search(t) for t in (*shown, *([] if ask.as_json else text))):
            return None  # rich would expand the tab or read an emoji code
        printed = "".join(f"{t}\n" for t in text), "".join(f"{t}\n" for t in shown)
        printed[0].encode(out.encoding, out.errors or "strict")  # as the app's write would
        printed[1].encode(err.encoding, err.errors or "strict")
        return printed

    def _memo(self, conn: sqlite3.Connection) -> str | None:
        """The time zone the memo holds, if the config and the schema are as it recorded."""
        row = conn.execute(
            "SELECT root, files, digest, migrations, timezone FROM search_memo WHERE key = ?",
            (self.key,),
        ).fetchone()
        if row is None or row[0] != self.root:
            return None
        migrations = conn.execute("SELECT count(*) FROM _migrations").fetchone()[0]
        if migrations != row[3] or digest(row[1].split("\0")) != row[2]:
            return None
        return str(row[4])

    def config_files(self) -> list[str]:
        """The files the app's config reads here (config.load_config's layers)."""
        # lazy: the config module, ~20 ms, is loaded by the app this runs beside
        from crustacean.config import ORG_ENV, user_config_file

        files = [str(user_config_file(self.env)), os.path.join(self.root, WORKSPACE_FILE)]
        if self.env.get(ORG_ENV):
            files.insert(0, os.path.expanduser(self.env[ORG_ENV]))
        return files

    def remember(self, before: str) -> bool:
        """After the app's search answered (exit 0): keep what it depended on, if its config
        did not warn and no config file changed while it ran (`before`: their digest then).
        A cache: failing to write it is not an error."""
        got = _take_note()
        files = self.config_files()
        if got is None or got[2] or got[0] != self.root or digest(files) != before:
            return False
        try:
            conn = sqlite3.connect(self.db, timeout=1, isolation_level=None)
            try:
                with conn:
                    migrations = conn.execute("SELECT count(*) FROM _migrations").fetchone()[0]
                    conn.execute(
                        "INSERT OR REPLACE INTO search_memo (key, root, files, digest, "
                        "migrations, timezone) VALUES (?, ?, ?, ?, ?, ?)",
                        (self.key, self.root, "\0".join(files), before, migrations, got[1]),
                    )
                    conn.execute(
                        "DELETE FROM search_memo WHERE rowid NOT IN "
                        "(SELECT rowid FROM search_memo ORDER BY rowid DESC LIMIT ?)",
                        (KEPT_MEMOS,),
                    )
            finally:
                conn.close()
        except sqlite3.Error:
            return False
        return True

    def snapshot(self) -> str:
        """The config files' digest before the app runs, for `remember`."""
        return digest(self.config_files())


def probe(argv: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str]) -> Probe | None:
    """A Probe when this is a search this module understands, in a workspace found the
    ordinary way; else None."""
    ask = parse(argv)
    if ask is None:
        return None
    root = locate(ask.workspace, env, cwd)
    if root is None:
        return None
    key = repr((FORMAT, __version__, ask.root_args, os.fspath(cwd), root, sorted(env.items())))
    return Probe(ask, root, hexdigest(key.encode("utf-8", "backslashreplace")), env)
