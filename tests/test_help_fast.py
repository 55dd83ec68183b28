"""The root listing printed before typer loads (cli/help_fast.py): the app's exact bytes.

Each form (`--help`, `-h`, a bare `crustacean`, `crustacean help`) is compared with what the typer
app prints for it (stdout, stderr, exit code), in-process at every width the lean path answers
for, and in fresh processes through the console script; whatever the lean path is not sure of
goes to the app, which prints what it always has.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from crustacean.cli import app as app_module
from crustacean.cli import commands, help_fast
from crustacean.cli.app import app

FORMS = [["--help"], ["-h"], [], ["help"]]
IDS = ["--help", "-h", "bare", "help"]
UI = ("typer", "click", "rich")

# The console script's main, reporting at exit which of typer, click, rich it had loaded.
LEAN = (
    "import atexit, json, sys\n"
    "mark = sys.argv.pop(1)\n"
    f"atexit.register(lambda: open(mark, 'w').write(json.dumps([m for m in {UI!r} "
    "if m in sys.modules])))\n"
    "sys.argv[0] = 'crustacean'\n"
    "from crustacean.cli.entry import main\n"
    "main()\n"
)
APP = "import sys\nsys.argv[0] = 'crustacean'\nfrom crustacean.cli.app import main\nmain()\n"


class _Pipe(io.TextIOWrapper):
    """A stdout that is a pipe: UTF-8, no terminal."""

    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__(io.BytesIO(), encoding=encoding, newline="")

    def value(self) -> bytes:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue()


def _app(argv: list[str], columns: int) -> tuple[bytes, bytes, int]:
    result = CliRunner().invoke(app, argv, prog_name="crustacean", env={"COLUMNS": str(columns)})
    return result.stdout_bytes, result.stderr_bytes, result.exit_code


def _lean(argv: list[str], env: dict[str, str]) -> tuple[bytes, bytes, int | None]:
    out = _Pipe()
    code = help_fast.answer(argv, env, out)
    return out.value(), b"", code


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without what the lean path defers on (conftest sets some of them)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in help_fast.DOUBT_VARS and not k.startswith(help_fast.DOUBT_PREFIXES)
    }
    for name in ("COLUMNS", "TERM", *help_fast.HARMLESS):  # conftest's; tests set their own
        env.pop(name, None)
    env.update({"PYTHONIOENCODING": "utf-8", **extra})
    return env


def _run(
    script: str, argv: list[str], env: dict[str, str], tmp_path: Path, **kw: Any
) -> tuple[bytes, bytes, int, list[str] | None]:
    """(stdout, stderr, exit code, UI modules the console script loaded; None for the app)."""
    mark = tmp_path / "loaded.json"
    mark.unlink(missing_ok=True)
    pre = [str(mark)] if script is LEAN else []
    done = subprocess.run(
        [sys.executable, "-c", script, *pre, *argv],
        capture_output="stdout" not in kw,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
        **kw,
    )
    loaded = json.loads(mark.read_text()) if mark.is_file() else None
    return done.stdout, done.stderr, done.returncode, loaded


# ---------------------------------------------------------------- the same bytes, in-process


@pytest.mark.parametrize("columns", range(help_fast.MIN_WIDTH, 221))
def test_help_is_the_apps_at_every_width(columns: int) -> None:
    assert _lean(["--help"], {"COLUMNS": str(columns)}) == _app(["--help"], columns)


@pytest.mark.parametrize("columns", [20, 21, 33, 47, 48, 60, 79, 80, 81, 120, 200, 221, 500, 1000])
@pytest.mark.parametrize("argv", FORMS, ids=IDS)
def test_each_form_is_the_apps(argv: list[str], columns: int) -> None:
    """stdout, stderr and exit code: 0 for the help option and `help`, 2 for a bare call (typer's
    no_args_is_help), which also has no trailing blank line."""
    assert _lean(argv, {"COLUMNS": str(columns)}) == _app(argv, columns)


def test_terminal_width_is_read_as_typer_reads_it(tmp_path: Path) -> None:
    """TERMINAL_WIDTH (typer's console width, read when typer is imported) wins over COLUMNS."""
    env = _clean_env(TERMINAL_WIDTH="100", COLUMNS="60")
    app_run = _run(APP, ["--help"], env, tmp_path)
    assert len(app_run[0].splitlines()[0]) == 100
    assert _run(LEAN, ["--help"], env, tmp_path) == (*app_run[:3], [])


_WORDS = st.text(alphabet="abcdefghij-.…,;", min_size=1, max_size=40)
_SPACES = st.sampled_from([" ", " ", " ", "  "])
_SUMMARY = st.lists(st.tuples(_WORDS, _SPACES), min_size=1, max_size=25).map(
    lambda parts: "".join(w + s for w, s in parts).strip()
)
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=30)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    table=st.lists(st.tuples(_NAME, _SUMMARY), min_size=1, max_size=8, unique_by=lambda r: r[0]),
    columns=st.integers(help_fast.MIN_WIDTH, 260),
)
def test_any_command_table_lays_out_as_rich_does(
    monkeypatch: pytest.MonkeyPatch, table: list[tuple[str, str]], columns: int
) -> None:
    """The port is rich's rules, not a copy of today's output: other names and summaries (long
    words, double spaces, a name as long as a summary) come out alike at any width."""
    table = [(name, text) for name, text in table if name != commands.HELP[0]]
    summaries = {**dict(table), commands.HELP[0]: commands.SUMMARIES[commands.HELP[0]]}
    rows = tuple((name, "config_cmd", "paths") for name, _ in table)
    with monkeypatch.context() as patch:
        for module in (app_module, help_fast):
            patch.setattr(module, "COMMANDS", rows)
            patch.setattr(module, "SUMMARIES", summaries)
        assert _lean(["--help"], {"COLUMNS": str(columns)}) == _app(["--help"], columns)


def test_the_app_takes_its_words_from_the_command_table() -> None:
    """One source of truth: the root's help, epilog and options are commands.py's."""
    root: Any = __import__("typer").main.get_command(app)
    assert root.help == commands.ROOT_HELP and root.epilog == commands.ROOT_EPILOG
    by_name = {p.opts[0]: p for p in root.params}
    for option in commands.ROOT_OPTIONS:
        param = by_name[option.long]
        assert param.help == option.help
        assert param.opts == [option.long, *([option.short] if option.short else [])]
    assert [p.opts[0] for p in root.params] == [
        *(o.long for o in commands.ROOT_OPTIONS),
        *(row[0] for row in help_fast.TYPER_OPTIONS[:2]),  # the help option is not a param
    ]
    assert list(root.context_settings["help_option_names"]) == list(commands.HELP_OPTION_NAMES)


def test_every_text_is_plain() -> None:
    """No markup, emoji code, escape or wide character: what rich would print as it is."""
    assert all(help_fast.plain(text) for text in help_fast.texts())
    assert help_fast.plain("knowledge… (stage 2 of 4C). -c memory.write=off, $X, KEY=VALUE")


@pytest.mark.parametrize(
    "text",
    [
        "Keep [bold]this[/bold]",
        "a :smile: face",
        "back\\slash",
        "esc \x1b[2K",
        "漢字",
        "tab\t",
        " x",
    ],
)
def test_a_text_rich_would_not_print_as_it_is_goes_to_the_app(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    assert not help_fast.plain(text)
    monkeypatch.setattr(help_fast, "ROOT_HELP", text)
    out = _Pipe()
    assert help_fast.answer(["--help"], {"COLUMNS": "80"}, out) is None and out.value() == b""


# ---------------------------------------------------------------- what goes to the app

DOUBTS: list[tuple[str, list[str], dict[str, str]]] = [
    *((f"{var} set", ["--help"], {var: "1"}) for var in help_fast.DOUBT_VARS),
    ("typer's test switch", ["--help"], {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}),
    ("completion", [], {"_CRUSTACEAN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "x "}),
    ("COLUMNS not digits", ["--help"], {"COLUMNS": "wide"}),
    ("COLUMNS not ASCII digits", ["--help"], {"COLUMNS": "٨٠"}),
    ("COLUMNS too narrow", ["--help"], {"COLUMNS": str(help_fast.MIN_WIDTH - 1)}),
    ("COLUMNS too wide", ["--help"], {"COLUMNS": str(help_fast.MAX_WIDTH + 1)}),
    ("TERMINAL_WIDTH empty", ["--help"], {"TERMINAL_WIDTH": ""}),
    ("TERMINAL_WIDTH zero", ["--help"], {"TERMINAL_WIDTH": "0"}),
    ("a workspace first", ["-w", "/tmp", "--help"], {}),
    ("help twice", ["--help", "--help"], {}),
    ("help of a command", ["help", "paths"], {}),
    ("help and a separator", ["help", "--"], {}),
    ("a command's help", ["paths", "--help"], {}),
    ("version", ["--version"], {}),
    ("an unknown option", ["--helpp"], {}),
    ("a lone separator", ["--"], {}),
]


@pytest.mark.parametrize(("argv", "env"), [d[1:] for d in DOUBTS], ids=[d[0] for d in DOUBTS])
def test_what_it_is_unsure_of_goes_to_the_app(argv: list[str], env: dict[str, str]) -> None:
    assert _lean(argv, {"COLUMNS": "80", **env}) == (b"", b"", None)


@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "utf-16"])
def test_a_stdout_not_utf8_goes_to_the_app(encoding: str) -> None:
    out = _Pipe(encoding)
    assert help_fast.answer(["--help"], {"COLUMNS": "80"}, out) is None and out.value() == b""


def test_a_terminal_goes_to_the_app() -> None:
    class Tty(_Pipe):
        def isatty(self) -> bool:
            return True

    out = Tty()
    assert help_fast.answer(["--help"], {"COLUMNS": "80"}, out) is None and out.value() == b""


def test_a_translation_catalog_goes_to_the_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """typer and click translate "Options", "Usage:"… through gettext's default domain, from
    catalogs in gettext's default folder: one for the user's language, and the app answers."""
    import gettext

    folder = tmp_path / "share" / "locale"
    (folder / "de" / "LC_MESSAGES").mkdir(parents=True)
    (folder / "de" / "LC_MESSAGES" / "messages.mo").write_bytes(b"")
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path))
    monkeypatch.setattr(gettext, "_default_localedir", str(folder))
    for language, answered in (("fr", 0), ("de", None), ("de_AT.UTF-8", None), ("C", 0)):
        monkeypatch.setenv("LANGUAGE", language)
        out = _Pipe()
        assert help_fast.answer(["--help"], {"COLUMNS": "80"}, out) == answered, language
        assert bool(out.value()) is (answered is not None)


def test_another_typer_or_rich_goes_to_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    assert help_fast._versions_verified()
    for name in help_fast.VERIFIED:
        monkeypatch.setitem(help_fast.VERIFIED, name, "0.0.1")
        assert help_fast.answer(["--help"], {"COLUMNS": "80"}, _Pipe()) is None
        monkeypatch.undo()


@pytest.mark.parametrize(
    "env",
    [
        {"NO_COLOR": "1"},
        {"_TYPER_FORCE_DISABLE_TERMINAL": "1"},
        {"TERM": "dumb"},
        {"LINES": "3"},
        {"NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1", "TERM": "dumb", "LINES": "200"},
    ],
    ids=["NO_COLOR", "_TYPER_FORCE_DISABLE_TERMINAL", "TERM=dumb", "LINES", "all"],
)
def test_what_changes_nothing_on_a_pipe_is_answered_alike(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """These leave the app's bytes to a pipe unchanged (each app run is a fresh process,
    as typer reads its switches at import), so the lean path answers with them set."""
    plain = _run(APP, ["--help"], _clean_env(COLUMNS="90"), tmp_path)
    with_var = _run(APP, ["--help"], _clean_env(COLUMNS="90", **env), tmp_path)
    lean = _run(LEAN, ["--help"], _clean_env(COLUMNS="90", **env), tmp_path)
    assert plain == with_var
    assert lean == (*plain[:3], [])


# ---------------------------------------------------------------- fresh processes


@pytest.mark.parametrize("argv", FORMS, ids=IDS)
def test_the_console_script_answers_without_typer_click_or_rich(
    tmp_path: Path, argv: list[str]
) -> None:
    env = _clean_env(COLUMNS="72")
    app_run = _run(APP, argv, env, tmp_path)
    assert _run(LEAN, argv, env, tmp_path) == (*app_run[:3], [])
    assert b"paths" in app_run[0] and app_run[2] == (2 if not argv else 0)


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--help"], {"FORCE_COLOR": "1"}),
        (["--help"], {"COLUMNS": "12"}),
        (["--help"], {"PYTHONIOENCODING": "latin-1:replace"}),
        (["-w", ".", "--help"], {}),
        (["help", "paths"], {}),
        ([], {"_CRUSTACEAN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "crustacean "}),
    ],
    ids=["FORCE_COLOR", "narrow", "latin-1", "-w", "help-paths", "completion"],
)
def test_in_a_fresh_process_the_doubtful_go_to_the_app_and_print_the_same(
    tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    full = _clean_env(**{"COLUMNS": "80", **env})
    lean = _run(LEAN, argv, full, tmp_path)
    assert lean[:3] == _run(APP, argv, full, tmp_path)[:3]
    assert lean[3] is not None and "typer" in lean[3]


def _pty_of(columns: int) -> tuple[int, int]:
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    return main, side


def test_a_terminal_on_stdin_gives_its_width(tmp_path: Path) -> None:
    """`crustacean --help | less` in a 97-column terminal: rich reads the width from stdin; so
    does the lean path."""
    main, side = _pty_of(97)
    try:
        env = _clean_env()
        app_run = _run(APP, ["--help"], env, tmp_path, stdin=side)
        lean = _run(LEAN, ["--help"], env, tmp_path, stdin=side)
    finally:
        os.close(main)
        os.close(side)
    assert len(app_run[0].splitlines()[0]) == 97
    assert lean == (*app_run[:3], [])


def test_a_terminal_on_stdout_goes_to_the_app(tmp_path: Path) -> None:
    """A real terminal: rich adds colour; the app prints it."""
    main, side = _pty_of(90)
    mark = tmp_path / "loaded.json"
    child = subprocess.Popen(
        [sys.executable, "-c", LEAN, str(mark), "--help"],
        stdin=side,
        stdout=side,
        stderr=side,
        env=_clean_env(TERM="xterm-256color"),
        cwd=tmp_path,
    )
    os.close(side)
    shown = b""
    try:
        while True:  # read as it writes (a pty holds little), until the child closes it
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main)
        code = child.wait(timeout=120)
    assert code == 0 and "rich" in json.loads(mark.read_text())
    assert b"\x1b[" in shown and b"Commands" in shown


def test_the_installed_console_script_takes_the_lean_path(tmp_path: Path) -> None:
    """`.venv/bin/crustacean --help`, the entry point pip wrote: with typer hidden from it, it
    still prints the listing, so it never imported typer."""
    script = Path(sys.executable).parent / "crustacean"
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _No:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in ('typer', 'click', 'rich'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, _No())\n"
    )
    env = _clean_env(COLUMNS="80")
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, env=env, cwd=tmp_path, timeout=120
    )
    blocked = subprocess.run(
        [str(script), "--help"],
        capture_output=True,
        env={**env, "PYTHONPATH": str(blocker)},
        cwd=tmp_path,
        timeout=120,
    )
    assert (blocked.returncode, blocked.stderr) == (0, b""), blocked.stderr[-2000:]
    assert blocked.stdout == done.stdout == _app(["--help"], 80)[0]
    failing = subprocess.run(  # the blocker works: a command that needs typer fails
        [str(script), "paths"],
        capture_output=True,
        env={**env, "PYTHONPATH": str(blocker)},
        cwd=tmp_path,
        timeout=120,
    )
    assert failing.returncode != 0 and b"blocked: typer" in failing.stderr


def test_a_closed_pipe_ends_both_paths_alike(tmp_path: Path) -> None:
    """`crustacean --help | true`: nobody reads; exit 1 and nothing on stderr, as rich does."""
    got = []
    for script in (LEAN, APP):
        read, write = os.pipe()
        os.close(read)
        try:
            env = _clean_env(COLUMNS="80")
            done = _run(script, ["--help"], env, tmp_path, stdout=write, stderr=subprocess.PIPE)
        finally:
            os.close(write)
        got.append(done[1:3])
    assert got[0] == got[1] == (b"", 1)
