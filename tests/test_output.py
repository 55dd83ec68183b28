"""Output that adapts to where it goes: whole lines in a pipe, fitted tables and word-wrapped
lines in a terminal (a real pseudo-terminal at 80 and 120 columns), NO_COLOR, --quiet, progress.

The subprocess tests run the installed CLI the way a user does: through `sh -c '… | grep …'`, and
in a pty whose window size is set with TIOCSWINSZ, with COLUMNS unset so rich asks the terminal.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from conftest import run_cli
from crustacean.cli.output import Col, plan_columns, shorten_middle, wrap
from crustacean.ops.init import init_sample
from crustacean.runs import RunRecorder
from crustacean.usage import Usage
from crustacean.workspace import Workspace

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# ---------------------------------------------------------------- the pure rules

WRAP_CASES = [
    # (text, width, expected lines)
    ("short line", 80, ["short line"]),
    ("one two three four", 9, ["one two", "  three", "  four"]),
    ("  - run `crustacean tick --plan` now", 20,
     ["  - run", "    `crustacean tick --plan`", "    now"]),
    ("  ok  doctor:  two  spaces stay", 16, ["  ok  doctor:", "    two  spaces", "    stay"]),
    ("see /a/very/long/path/that/does/not/fit.md here", 12,
     ["see", "  /a/very/long/path/that/does/not/fit.md", "  here"]),
    ("a\nb c d", 3, ["a", "b c", "  d"]),
    ("piped text is never wrapped " * 10, None, ["piped text is never wrapped " * 10]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "width", "expected"), WRAP_CASES)
def test_wrap_breaks_only_between_words(text: str, width: int | None, expected: list[str]) -> None:
    assert wrap(text, width) == expected


KEY, PATH, NOTE = Col("id"), Col("path", shrink=10, path=True), Col("note", drop=1)
PLAN_CASES = [
    # (natural widths, columns, width, planned widths)
    ([10, 30, 8], [KEY, PATH, NOTE], None, [10, 30, 8]),  # a pipe: everything whole
    ([10, 30, 8], [KEY, PATH, NOTE], 120, [10, 30, 8]),  # fits
    ([10, 30, 8], [KEY, PATH, NOTE], 40, [10, 18, 8]),  # the path gives way first
    ([10, 30, 8], [KEY, PATH, NOTE], 24, [10, 12, None]),  # then the low-value column goes
    ([10, 30, 8], [KEY, PATH, NOTE], 5, [10, 10, None]),  # key columns never shrink or go
    ([4, 4, 4, 4], [KEY, Col("a", drop=1), Col("b", drop=2), KEY], 16, [4, 4, None, 4]),
]


@pytest.mark.parametrize(("natural", "cols", "width", "expected"), PLAN_CASES)
def test_plan_columns(
    natural: list[int], cols: list[Col], width: int | None, expected: list[int | None]
) -> None:
    assert plan_columns(natural, cols, width) == expected


def test_shorten_middle_keeps_both_ends() -> None:
    path = "memory/contacts/ana-ferreira-quinta-das-couves.md"
    short = shorten_middle(path, 24)
    assert len(short) == 24 and "…" in short
    head, tail = short.split("…")
    assert path.startswith(head) and path.endswith(tail) and tail.endswith(".md")
    assert shorten_middle("short.md", 24) == "short.md"


# ---------------------------------------------------------------- subprocess helpers


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "LINES", "_TYPER_FORCE_DISABLE_TERMINAL", "TERM", "NO_COLOR")
    }
    return {**env, "TERM": "xterm-256color", **extra}


def piped(*args: str, cwd: Path, shell_tail: str = "", **extra: str) -> str:
    """Run `crustacean ARGS` with stdout a pipe (COLUMNS=80 set, as a terminal would)."""
    command = " ".join([f"'{sys.executable}' -m crustacean", *(f"'{a}'" for a in args), shell_tail])
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=_env(COLUMNS="80", NO_COLOR="1", **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def in_terminal(*args: str, cols: int, cwd: Path, color: bool = False, code: int = 0) -> str:
    """Run `crustacean ARGS` in a pseudo-terminal `cols` wide; stdout and stderr both go there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = _env() if color else _env(NO_COLOR="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "crustacean", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end of the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == code, b"".join(chunks).decode()
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def _cells(line: str) -> int:
    from rich.cells import cell_len

    return cell_len(ANSI.sub("", line))


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """The sample workspace, deep enough that its paths are longer than 80 columns."""
    root = tmp_path / ("a-folder-with-a-rather-long-name-" * 2) / "crustacean-sample"
    init_sample(root)
    return root


# ---------------------------------------------------------------- pipes


def test_paths_piped_to_grep_keep_the_whole_path(sample: Path) -> None:
    out = piped("paths", cwd=sample, shell_tail="| grep proposals")
    proposals = sample / ".crustacean" / "proposals"
    assert len(str(proposals)) > 80
    assert out.splitlines() == [f"{'proposals:':<24}{proposals}"]
    keys = json.loads(piped("paths", "--json", cwd=sample))
    assert keys["proposals"] == str(proposals) and keys["workspace"] == str(sample)
    assert all(re.fullmatch(r"[a-z_]+", k) for k in keys)
    assert json.loads(in_terminal("paths", "--json", cols=40, cwd=sample)) == keys  # unwrapped


def test_init_hints_stay_on_one_line_in_a_pipe(tmp_path: Path) -> None:
    out = piped("init", "--sample", str(tmp_path / "s"), cwd=tmp_path)
    step = next(line for line in out.splitlines() if "tick --plan" in line)
    assert step.endswith("with no model call: crustacean tick --plan")
    assert all(line.strip() for line in out.splitlines()[-3:])  # each step whole on its line


def test_compile_dry_run_diff_is_intact_in_a_pipe(sample: Path) -> None:
    out = piped("compile", "--dry-run", "--no-model", cwd=sample)
    assert "+++ b/archive/daily/" in out
    lines = set(out.splitlines())
    moved = [p for p in (sample / "memory").glob("20*.md") if f"{p.name} →" in out]
    assert moved, out
    text = moved[0].read_text().splitlines()
    assert max(map(len, text)) > 100
    for line in text:
        assert f"+{line}" in lines  # every line whole, however long
    assert moved[0].is_file()  # a dry run: nothing moved on disk


# ---------------------------------------------------------------- terminals


def _recorded_run(root: Path) -> str:
    from crustacean.config import load_config
    from crustacean.workspace import Workspace

    ws = Workspace(root, load_config(root))
    with RunRecorder(ws, "calibrate", model="claude-sonnet-5-5") as rec:
        rec.turn()
        rec.add_usage(Usage(1_234_567, 12_345, 5, 7), 12.3456)
        rec.wrote(["MEMORY.md"], "0123456789abcdef", None)
        rec.finish("partial", summary="stopped at the budget")
    return rec.record.id


@pytest.mark.parametrize("cols", [80, 120])
def test_runs_keeps_its_key_columns_in_a_terminal(sample: Path, cols: int) -> None:
    run_id = _recorded_run(sample)
    out = in_terminal("runs", cols=cols, cwd=sample)
    lines = out.splitlines()
    assert all(_cells(line) <= cols for line in lines), out
    header = lines[0]
    for column in ("id", "stage", "status", "model", "tokens in/out", "cost"):
        assert column in header, out
    row = next(line for line in lines if run_id in line)
    for cell in ("calibrate", "partial", "sonnet-5-5", "1.23M/12.3k", "$12.3456"):
        assert cell in row, out
    if cols == 120:
        assert "started (UTC)" in header and "duration" in header and "turns" in header


@pytest.mark.parametrize("cols", [80, 120])
def test_history_and_tier_list_keep_ids_and_paths_whole_or_shortened(
    sample: Path, cols: int
) -> None:
    from crustacean.store.versions import Git

    ids = Git(sample).out("log", "--format=%h", "--abbrev=12").split()
    files = set(Git(sample).out("ls-files").split())
    for args in (["history"], ["tier", "list"]):
        out = in_terminal(*args, cols=cols, cwd=sample)
        assert all(_cells(line) <= cols for line in out.splitlines()), out
        for token in re.findall(r"\S*…\S*", out):  # a shortened path: both ends are real
            head, tail = token.split("…", 1)
            assert any(f.startswith(head) and f.endswith(tail) for f in files), (token, out)
        named = re.findall(r"[\w./-]+\.md\b", out)
        assert named and all(n in files or any(f.endswith(n) for f in files) for n in named)
    out = in_terminal("history", cols=cols, cwd=sample)
    assert all(i in out for i in ids[:3]) and "time (UTC)" in out


@pytest.mark.parametrize("cols", [80, 120])
@pytest.mark.parametrize("args", [["tick", "--plan"], ["doctor"], ["health"], ["paths"]])
def test_long_lines_wrap_between_words_in_a_terminal(
    sample: Path, cols: int, args: list[str]
) -> None:
    """The same words in the same order as in a pipe: only spaces became line breaks, so no
    word, path or `command` is cut."""
    flat = subprocess.run(
        [sys.executable, "-m", "crustacean", *args],
        cwd=sample,
        env=_env(NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = in_terminal(*args, cols=cols, cwd=sample, code=flat.returncode)
    assert shown.split() == (flat.stdout + flat.stderr).split()
    for line in shown.splitlines():
        assert _cells(line) <= cols or " " not in line.strip(), line  # only a lone long unit
    for command in re.findall(r"`[^`]+`", flat.stdout):
        assert command in shown, command


def test_no_color_and_colour_in_a_terminal(sample: Path) -> None:
    from crustacean.store.versions import Git

    version = Git(sample).out("rev-parse", "HEAD").strip()
    assert "\x1b[" not in in_terminal("show", version, cols=100, cwd=sample)
    assert "\x1b[" in in_terminal("show", version, cols=100, cwd=sample, color=True)


def test_progress_only_on_a_terminal_and_never_with_json(sample: Path) -> None:
    assert "Indexing" in ANSI.sub("", in_terminal("index", cols=100, cwd=sample))
    piped_run = subprocess.run(
        [sys.executable, "-m", "crustacean", "index"],
        cwd=sample,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Indexing" not in piped_run.stderr and "\x1b" not in piped_run.stderr
    out = in_terminal("index", "--json", cols=100, cwd=sample)
    assert "Indexing" not in out and json.loads(ANSI.sub("", out))["indexed"] > 10


def test_progress_helper_stays_silent_off_a_terminal() -> None:
    from crustacean.cli.output import progress

    with progress("work") as report:
        assert report is None  # tests run with stderr captured: no terminal


# ---------------------------------------------------------------- quiet, help, completion


def test_quiet_keeps_only_errors_and_json(copied_ws: Workspace) -> None:
    root = copied_ws.root
    assert run_cli("-q", "-w", str(root), "remember", "tea", "Ana likes tea.").stdout == ""
    data = json.loads(run_cli("-q", "-w", str(root), "remember", "tea", "Green.", "--json").stdout)
    assert data["path"] == "memory/lessons/tea.md" and len(data["version"]) == 40
    failed = run_cli("-q", "-w", str(root), "show", "nosuch", code=2)
    assert failed.stderr.startswith("Error: unknown version 'nosuch'")


def test_search_takes_its_words_without_quotes(sample: Path) -> None:
    quoted = run_cli("-w", str(sample), "search", "test database", "--json").stdout
    bare = run_cli("-w", str(sample), "search", "test", "database", "--json").stdout
    assert json.loads(bare) == json.loads(quoted) and json.loads(bare)


def test_help_command_and_completion() -> None:
    assert "Usage: crustacean review approve" in run_cli("help", "review", "approve").stdout
    assert "Commands" in run_cli("help").stdout
    failed = run_cli("help", "healt", code=2)
    assert failed.stderr.startswith("Error: No command `healt`. Commands here: init, collect,")
    assert run_cli("help", "runs", "nosuch", code=2).stderr == (
        "Error: No command `runs nosuch`. Commands here: show.\n"
    )
    # --show-completion names no shell: typer detects the one it runs in from the process's
    # parents. In-process, that is whatever started pytest (none, under some runners), so the
    # real command runs under bash, as a user's terminal would start it.
    shown = subprocess.run(
        ["bash", "-c", '"$0" -m crustacean --show-completion; :', sys.executable],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "_CRUSTACEAN_COMPLETE" in shown.stdout and "complete " in shown.stdout


def test_flags_show_as_flags_in_every_help() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs/cli.md").read_text()
    assert "<bool>" not in text and "--install-completion" in text


# ---------------------------------------------------------------- --json on every result


def test_json_results_have_stable_keys(copied_ws: Workspace) -> None:
    root = copied_ws.root
    w = ["-w", str(root)]
    made = json.loads(run_cli(*w, "remember", "tea", "Ana likes tea.", "--json").stdout)
    assert set(made) == {"path", "version", "files", "sha256"}
    shown = json.loads(run_cli(*w, "show", made["version"], "--json").stdout)
    assert set(shown) == {"version", "show"} and shown["version"] == made["version"]
    assert "Ana likes tea." in shown["show"]
    tier = json.loads(run_cli(*w, "tier", "set", "memory/lessons/tea.md", "hot", "--json").stdout)
    assert set(tier) == {"path", "tier", "kept_in"} and tier["tier"] == "hot"  # no file written
    first = json.loads(run_cli(*w, "history", "--json").stdout)[-1]["id"]
    back = json.loads(run_cli(*w, "rollback", first, "--json").stdout)
    assert set(back) == {"version", "files", "sha256", "restored_from"}
    assert "memory/lessons/tea.md" in back["files"]


def test_review_show_approve_and_reject_json(ws: Workspace) -> None:
    from test_store_policy import SOUL_EDIT, propose

    w = ["-w", str(ws.root)]
    pid = propose(ws)
    shown = json.loads(run_cli(*w, "review", "show", str(pid), "--json").stdout)
    assert {"id", "status", "paths", "diff", "message", "reason"} <= set(shown)
    assert shown["paths"][0] == "SOUL.md" and "+++ b/SOUL.md" in shown["diff"]
    done = json.loads(run_cli(*w, "review", "approve", str(pid), "--json").stdout)
    assert done["id"] == pid and done["status"] == "approved"
    assert done["files"] == shown["paths"] and len(done["version"]) == 40
    other = propose(ws, [SOUL_EDIT])
    dropped = json.loads(run_cli(*w, "review", "reject", str(other), "--json").stdout)
    assert dropped == {"id": other, "status": "rejected", "reason": ""}


def test_history_of_a_file_without_versions_says_so(copied_ws: Workspace) -> None:
    root = copied_ws.root
    (root / "notes.md").write_text("x\n")
    out = run_cli("-w", str(root), "history", "notes.md").stdout
    assert out.startswith("No version changed notes.md; `crustacean history` lists")


def test_times_are_in_the_workspace_zone(copied_ws: Workspace) -> None:
    root = copied_ws.root
    w = ["-w", str(root), "-c", "workspace.timezone=Asia/Tokyo"]
    assert "time (Asia/Tokyo)" in run_cli(*w, "history").stdout
    out = run_cli(*w, "tick", "--dry-run").stdout
    assert "JST" in out and "UTC" not in out
    assert "Stages (times in Asia/Tokyo)" in run_cli(*w, "status").stdout
