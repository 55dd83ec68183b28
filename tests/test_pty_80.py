"""Every README command whose output is a table or wrapped text, read whole off a real 80-column
pseudo-terminal: no line is wider than the screen unless it is one lone word, and no path or
`command` is ever split across lines (a path may be shortened in the middle, `memory/con…/a.md`,
never cut in two). The same command in a pipe is the reference for what the whole words are.

The workspace is the sample at a deep folder (paths longer than the screen), with a failed run
whose error names a long path, tool calls, a pending and a rejected proposal.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from crustacean.cli.output import wrap_diff_line
from crustacean.runs import short_reason

COLS = 80
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
LONG_CONFIG = "/srv/agents/ana-ferreira/quinta-das-couves/config/crustacean.toml"
LONG_NOTE = "memory/contacts/telegram-alice-the-co-op-member-who-calls-on-sundays.md"
ERROR = (
    "ModelError: the model API refused the request (HTTP 529 overloaded_error: Overloaded) "
    f"after 2 retries; the stage wrote nothing. Run `crustacean curate` again later, or set "
    f"llm.max_retries in {LONG_CONFIG}"
)

COMMANDS = [
    "status",
    "runs",
    "runs show {failed}",
    "history",
    "history -n 3",
    "show {version}",
    "review",
    "review show 1",
    "review show 2",
    "search alice calls",
    "search when did alice say to call --budget-chars 2000",
    "health",
    "doctor",
    "config show",
    "config show --redundant",
    "paths",
    "tier list",
    "tier plan",
    "tick --plan",
    "collect --plan",
    "curate --plan",
    "cron show",
]


def _env(**extra: str) -> dict[str, str]:
    drop = ("COLUMNS", "LINES", "_TYPER_FORCE_DISABLE_TERMINAL", "TERM")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "TERM": "xterm-256color", "NO_COLOR": "1", **extra}


def _drain(fds: list[int]) -> dict[int, bytes]:
    """Read every pty until its child end closes (EIO), whichever fills first."""
    got = {fd: b"" for fd in fds}
    open_fds = list(fds)
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [], 120)
        assert ready, "the command printed nothing for 120 s"
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its end of the terminal
                data = b""
            if data:
                got[fd] += data
            else:
                open_fds.remove(fd)
    return got


def on_screen(args: list[str], cwd: Path) -> tuple[str, str, int]:
    """stdout and stderr of `crustacean ARGS`, each on its own 80-column pty, read whole."""
    ptys = [pty.openpty() for _ in range(3)]
    for _, slave in ptys:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLS, 0, 0))
    (_, tin), (mout, tout), (merr, terr) = ptys
    proc = subprocess.Popen(
        [sys.executable, "-m", "crustacean", *args],
        stdin=tin,
        stdout=tout,
        stderr=terr,
        cwd=cwd,
        env=_env(),
    )
    for _, slave in ptys:
        os.close(slave)
    got = _drain([mout, merr])
    for master, _ in ptys:
        os.close(master)
    code = proc.wait(timeout=120)
    out, err = (ANSI.sub("", got[fd].decode()).replace("\r\n", "\n") for fd in (mout, merr))
    return out, err, code


def in_pipe(args: list[str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "crustacean", *args],
        cwd=cwd,
        env=_env(COLUMNS=str(COLS)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("pty80")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(base / "home"))
        mp.setenv("CRUSTACEAN_CONFIG_DIR", str(base / "userconfig"))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        root = base / ("a-folder-with-a-rather-long-name-" * 2) / "crustacean-sample"
        _populate(root)
    yield root


def _populate(root: Path) -> None:
    from crustacean.config import load_config
    from crustacean.ops.init import init_sample
    from crustacean.runs import RunRecorder
    from crustacean.store import review
    from crustacean.store.write import Store
    from crustacean.usage import Usage
    from crustacean.workspace import Workspace

    init_sample(root)
    ws = Workspace(root, load_config(root))
    with RunRecorder(ws, "curate", model="claude-sonnet-5-5") as rec:
        rec.turn()
        content = "- calls on Sundays, prefers voice notes to long messages\n"
        change = {"path": LONG_NOTE, "mode": "append", "content": content}
        stale = f"StaleWriteError: {LONG_NOTE} changed since it was read; read it again"
        rec.tool_call("write_context", {"changes": [change]}, True, stale)
        rec.add_usage(Usage(12_345, 678, 0, 0), 0.0123)
        rec.finish("failed", error=ERROR)
    store = Store(ws)
    soul = {"path": "SOUL.md", "mode": "append", "content": "- Be kind to crabs.\n"}
    note = {"path": "memory/notes/crabs-and-other-long-named-crustaceans.md", "mode": "create"}
    message = "curate: values, and a longer message that says in some detail why it is needed"
    store.write_context([soul, note | {"content": "# Crabs\n"}], actor="mcp", message=message)
    tidy = {"path": "SOUL.md", "mode": "append", "content": "- Be tidy.\n"}
    second = store.write_context([tidy], actor="mcp", message="calibrate: tidy")
    assert second.proposal == 2
    review.reject(store, 2, f"SOUL.md is mine to write; my notes go in {LONG_CONFIG}")


def _ids(root: Path) -> dict[str, str]:
    from crustacean.config import load_config
    from crustacean.runs import list_runs
    from crustacean.workspace import Workspace

    ws = Workspace(root, load_config(root))
    failed = next(r.id for r in list_runs(ws) if r.status == "failed")
    version = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD~1"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    return {"failed": failed, "version": version}


def _words(text: str) -> set[str]:
    return {w.strip(",;:()\"'[]") for w in text.split()}


def _path_like(word: str) -> bool:
    return "/" in word and re.search(r"[A-Za-z]{2}", word) is not None


def _whole(word: str, reference: set[str]) -> bool:
    """A word of the screen is a whole word of the pipe's output, or one shortened in the
    middle (`memory/con…/ada.md`: both ends real)."""
    if word in reference:
        return True
    head, cut, tail = word.partition("…")
    return bool(cut) and any(r.startswith(head) and r.endswith(tail) for r in reference)


@pytest.mark.parametrize("command", COMMANDS)
def test_nothing_is_split_at_80_columns(sample: Path, command: str) -> None:
    args = command.format(**_ids(sample)).split()
    out, err, _ = on_screen(args, sample)
    flat = in_pipe(args, sample)
    assert out.strip(), err
    reference = _words(flat)
    for line in (out + err).splitlines():
        if "Indexing" in line:  # the progress bar, repainted in place on stderr
            continue
        from rich.cells import cell_len

        words = line.split()
        header = line.startswith(("--- ", "+++ ")) and len(words) == 2  # a diff's one path
        assert cell_len(line) <= COLS or len(words) == 1 or header, line  # a lone long word
        for word in _words(line):
            if _path_like(word):
                assert _whole(word, reference), f"{word!r} is split, in: {line!r}\n{out}"
    for quoted in re.findall(r"`[^`\n]+`", flat):
        assert quoted in out + err or "…" in out, f"{quoted} is split:\n{out}"


def test_status_shows_a_short_reason_and_points_to_the_run(sample: Path) -> None:
    ids = _ids(sample)
    out, _, _ = on_screen(["status"], sample)
    row = [line for line in out.splitlines() if line.startswith("curate")]
    assert "failed: ModelError:" in row[0], out
    assert LONG_CONFIG not in out and "Overloaded) after 2 retries" not in out
    assert f"curate's last run, in full: `crustacean runs show {ids['failed']}`" in out
    shown, _, _ = on_screen(["runs", "show", ids["failed"]], sample)
    assert LONG_CONFIG in shown and "Error      ModelError: the model API" in shown
    assert " ".join(shown.split()).count(" ".join(ERROR.split())) == 1  # whole, wrapped


REASONS = [
    # (error, expected cell)
    ("", ""),
    ("TimeoutError", "TimeoutError"),
    ("ModelError: overloaded\nTraceback (most recent call last):", "ModelError: overloaded"),
    (ERROR, "ModelError: the model API refused the request (HTTP 529…"),
    ("x" * 100, "x" * 59 + "…"),
]


@pytest.mark.parametrize(("error", "expected"), REASONS)
def test_short_reason(error: str, expected: str) -> None:
    assert short_reason(error) == expected
    assert len(short_reason(error)) <= 60


DIFF_LINES = [
    # (line, width, expected)
    ("+short", 80, "+short"),
    ("+one two three four five six", 21, "+one two three four\n+  five six"),
    (
        " keep the context marker here and more",
        21,
        " keep the context\n   marker here and\n   more",
    ),
    ("+++ b/" + "x" * 90 + ".md", 40, "+++ b/" + "x" * 90 + ".md"),  # a header stays whole
    ("diff --git a/" + "z" * 20 + " b/" + "z" * 20, 40, f"diff --git a/{'z' * 20}\n  b/{'z' * 20}"),
    ("-" + "y" * 50, 30, "-" + "y" * 50),  # a lone long word too
]


@pytest.mark.parametrize(("line", "width", "expected"), DIFF_LINES)
def test_a_diff_line_wraps_between_words_and_keeps_its_marker(
    line: str, width: int, expected: str
) -> None:
    assert wrap_diff_line(line, width) == expected
