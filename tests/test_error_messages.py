"""Error messages are deliberate: each says what was wrong and what to do, in one or two lines.

Two snapshots pin them, so changing a message is a visible, reviewed change:

- tests/snapshots/error_messages.txt: every `raise <X>Error(...)` in crustacean/, found with `ast`
  and listed as `file::function ExcName: <message source>` (no line numbers, so moving code does
  not churn it; a message held in a module constant is shown with its value).
- tests/snapshots/cli_errors.txt: the exact stderr and exit code of representative real errors
  run through the CLI (temporary paths, pids and times normalised).

After changing, adding or removing a message, update both and review the diff before committing:

    CRUSTACEAN_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_error_messages.py
    git diff tests/snapshots/
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shlex
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crustacean.cli.app import app
from crustacean.runs import RunLock
from crustacean.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE_ENV = "CRUSTACEAN_UPDATE_SNAPSHOTS"
UPDATE_HINT = f"{UPDATE_ENV}=1 .venv/bin/pytest tests/test_error_messages.py"


def assert_snapshot(name: str, text: str) -> None:
    """Compare with tests/snapshots/NAME, or rewrite it when CRUSTACEAN_UPDATE_SNAPSHOTS=1."""
    path = SNAPSHOTS / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, "utf-8")
        return
    old = path.read_text("utf-8") if path.is_file() else ""
    if old != text:
        diff = "".join(
            difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), f"{name} (committed)", f"{name} (now)"
            )
        )
        pytest.fail(
            f"tests/snapshots/{name} differs from the code. If the change is intended, run\n"
            f"  {UPDATE_HINT}\nand commit the snapshot.\n{diff}",
            pytrace=False,
        )


# ---------------------------------------------------------------- static: every raise


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level string constants, so `raise VersionError(NOT_VERSIONED)` shows its text."""
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
    return out


class _Raises(ast.NodeVisitor):
    def __init__(self, rel: str, source: str, constants: dict[str, str]) -> None:
        self.rel, self.source, self.constants = rel, source, constants
        self.scope: list[str] = []
        self.found: list[str] = []

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Raise(self, node: ast.Raise) -> None:
        call = node.exc
        if isinstance(call, ast.Call):
            func = call.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name.endswith("Error"):
                args = []
                for arg in [*call.args, *(k.value for k in call.keywords)]:
                    text = ast.get_source_segment(self.source, arg) or ""
                    text = " ".join(text.split())  # one line, whatever the source wrapping
                    if isinstance(arg, ast.Name) and arg.id in self.constants:
                        text += f" = {self.constants[arg.id]!r}"
                    args.append(text)
                where = ".".join(self.scope) or "<module>"
                self.found.append(f"{self.rel}::{where} {name}: {', '.join(args)}")
        self.generic_visit(node)


def raised_messages(package: Path = REPO / "crustacean") -> list[str]:
    """Every `raise <X>Error(...)` in a package, in file order, one line each."""
    lines = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text("utf-8")
        tree = ast.parse(source)
        rel = path.relative_to(package.parent).as_posix()
        visitor = _Raises(rel, source, _constants(tree))
        visitor.visit(tree)
        lines += visitor.found
    return lines


def test_every_raised_message_is_in_the_snapshot() -> None:
    lines = raised_messages()
    assert len(lines) > 100  # the walk really found the code
    header = [
        "# Every `raise <X>Error(...)` in crustacean/: file::function ExcName: message source.",
        f"# Generated by tests/test_error_messages.py; update with: {UPDATE_HINT}",
    ]
    assert_snapshot("error_messages.txt", "\n".join([*header, *lines]) + "\n")


def test_the_extractor_sees_functions_methods_constants_and_wrapped_strings(
    tmp_path: Path,
) -> None:
    pkg = tmp_path / "crustacean"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        'HINT = "run `x` first."\n'
        "class A:\n"
        "    def f(self):\n"
        "        def inner():\n"
        '            raise UsageError(\n                f"bad {x}; "\n                "fix it."\n'
        "            )\n"
        "        raise VersionError(HINT) from None\n"
        "def g():\n"
        "    raise typer.Exit(1)\n"
    )
    assert raised_messages(pkg) == [
        """crustacean/m.py::A.f.inner UsageError: f"bad {x}; " "fix it.\"""",
        "crustacean/m.py::A.f VersionError: HINT = 'run `x` first.'",
    ]


# ---------------------------------------------------------------- runtime: real errors


@dataclass
class Case:
    """One error provoked through the CLI: its name, arguments and exit code."""

    name: str
    args: list[str]
    code: int
    setup: Callable[[Workspace], None] = field(default=lambda ws: None)
    in_workspace: bool = True
    hold_lock: bool = False


def _bad_config_file(ws: Workspace) -> None:
    path = ws.root / "crustacean.toml"
    path.write_text(path.read_text().replace('# write = "direct"', 'write = "sometimes"', 1))


def _unknown_key(ws: Workspace) -> None:
    (ws.root / "crustacean.toml").write_text("[memory]\nwrites = 'off'\n")


def _uncurated_entry(ws: Workspace) -> None:
    day = ws.today(datetime.now(UTC))
    (ws.root / ws.daily_log(day)).write_text(f"# {day}\n\n- Met Bob; he prefers email.\n")


SECRET = "ANTHROPIC_API_KEY=sk-ant-api03-" + "abcdefghij" * 5
TELEGRAM = "the bot token is 7012345678:" + "AAE" + "k3Jd9sLq2Wm8Xn5Bv7Cz1Rt4Yp6qW9eR"

CASES = [
    Case("bad config value in a file", ["config", "show"], 2, _bad_config_file),
    Case("unknown key in a file", ["config", "show"], 2, _unknown_key),
    Case("bad -c value", ["-c", "memory.max_entries=zero", "config", "show"], 2),
    Case("-c without =", ["-c", "memory.write", "config", "show"], 2),
    Case("unknown command", ["nosuch"], 2),
    Case("missing workspace", ["history"], 2, in_workspace=False),
    Case("bad option", ["history", "--bogus"], 2),
    Case("option typo", ["history", "--jsn"], 2),
    Case("bad option value", ["history", "-n", "abc"], 2),
    Case("missing argument", ["show"], 2),
    Case("bad choice", ["context", "--format", "xml"], 2),
    Case("unknown --for", ["context", "--for", "everyone"], 2),
    Case("unknown version for show", ["show", "deadbeef"], 2),
    Case("unknown proposal", ["review", "approve", "99"], 2),
    Case("unknown run", ["runs", "show", "nope"], 2),
    Case("conflicting flags", ["cron", "install", "--systemd", "--openclaw"], 2),
    Case("unknown source", ["collect", "--source", "nope"], 2),
    Case("empty search", ["search", " "], 2),
    Case("lock held", ["collect"], 75, hold_lock=True),
    Case("no API key", ["curate"], 2, _uncurated_entry),
    Case("bad write: a secret", ["remember", "api-key", SECRET], 1),
    Case("bad write: a Telegram bot token", ["remember", "bot", TELEGRAM], 1),
    Case("init in a folder holding the home folder", ["init"], 2, in_workspace=False),
    Case("bad write: unsafe name", ["remember", "Bad Name", "text"], 2),
    Case("bad write: no such memory", ["tier", "set", "memory/notes/nope.md", "hot"], 2),
]


def _normalise(text: str, tmp: Path) -> str:
    for path in sorted({str(tmp.resolve()), str(tmp)}, key=len, reverse=True):
        text = text.replace(path, "<tmp>")
    return re.sub(r"pid \d+, stage (\w+), since [\d-]+ [\d:]+ UTC", r"pid <pid>, stage \1", text)


def _run(case: Case, ws: Workspace, tmp_path: Path) -> tuple[int, str, str]:
    """Run one case; the workspace config is restored after it, so cases do not leak."""
    config = ws.root / "crustacean.toml"
    saved = config.read_bytes()
    case.setup(ws)
    args = ["-w", str(ws.root), *case.args] if case.in_workspace else case.args
    try:
        with RunLock(ws, "curate", "20261130T080000-test") if case.hold_lock else nullcontext():
            result = CliRunner().invoke(app, args, prog_name="crustacean")
    finally:
        config.write_bytes(saved)
    return result.exit_code, _normalise(result.stderr, tmp_path), result.output


def test_real_errors_are_short_and_pinned(ws: Workspace, tmp_path: Path) -> None:
    shown = ["# stderr of real errors; see tests/test_error_messages.py", ""]
    problems = []
    for case in CASES:
        code, stderr, output = _run(case, ws, tmp_path)
        lines = stderr.splitlines()
        if code != case.code:
            problems.append(f"{case.name}: exit {code}, expected {case.code}: {output!r}")
        if not 1 <= len(lines) <= 2 or not lines[0].startswith("Error: "):
            problems.append(f"{case.name}: not one or two lines starting with 'Error: ': {lines}")
        if "Traceback" in output or "╭" in stderr:
            problems.append(f"{case.name}: a traceback or a rich panel: {output!r}")
        shown += [f"## {case.name}: {shlex.join(['crustacean', *case.args])}  (exit {code})"]
        shown += [*lines, ""]
    assert not problems, "\n".join(problems)
    assert_snapshot("cli_errors.txt", "\n".join(shown))


def test_no_args_still_prints_help(ws: Workspace) -> None:
    """The usage-error boundary leaves typer's no-argument help (exit 2) alone."""
    result = CliRunner().invoke(app, ["cron"], prog_name="crustacean")
    assert result.exit_code == 2 and "install" in result.stdout and result.stderr == ""
