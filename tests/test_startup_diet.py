"""Start-up keeps its diet: what the quick commands and the root listing never import, and a root
listing built from the summaries that is byte for byte the one built from the commands."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from crustacean.cli import lazy, output
from crustacean.cli.app import COMMANDS, HELP, SUMMARIES, app
from crustacean.workspace import Workspace

# Imported at exit by the child; argv after the file name is the command line.
_CHILD = (
    "import atexit, json, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['crustacean', *sys.argv[2:]]\n"
    "from crustacean.cli.entry import main\n"
    "main()\n"
)
HEAVY = {"yaml", "frontmatter", "rich", "pydantic", "crustacean.frontyaml"}


def modules_after(
    argv: list[str], cwd: Path, tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The child's result and every module it had imported when it exited."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == (2 if not argv and env is None else 0), done.stderr[-2000:]
    return done, set(json.loads(out.read_text()))


@pytest.mark.parametrize(
    "argv",
    [["paths"], ["context", "--for", "main"], ["context", "--format", "claude-hook"]],
    ids=["paths", "context", "hook"],
)
def test_the_quick_commands_load_no_heavy_module(
    ws: Workspace, tmp_path: Path, argv: list[str]
) -> None:
    """Output to a pipe: rich is not needed to print plain lines, YAML not to read a workspace
    whose files have no frontmatter, pydantic not to coerce plain parameters."""
    done, loaded = modules_after(argv, ws.root, tmp_path)
    assert done.stdout
    assert "typer" in loaded and not loaded & HEAVY, loaded & HEAVY


@pytest.mark.parametrize(
    "argv", [["--help"], [], ["help"], ["-h"]], ids=["--help", "bare", "help", "-h"]
)
def test_the_root_listing_imports_no_command_module(
    ws: Workspace, tmp_path: Path, argv: list[str]
) -> None:
    done, loaded = modules_after(argv, ws.root, tmp_path)
    assert "paths" in done.stdout and "runs" in done.stdout
    commands = {f"crustacean.cli.{module}" for _, module, _ in (*COMMANDS, HELP)}
    commands -= {"crustacean.cli.help_cmd"} if argv == ["help"] else set()
    cores = {m for m in loaded if m.split(".")[1:2] in (["recall"], ["store"], ["stages"])}
    assert not loaded & commands and not cores, (loaded & commands) | cores


def test_tab_completion_with_no_prefix_imports_no_command_module(
    ws: Workspace, tmp_path: Path
) -> None:
    env = {**os.environ, "_CRUSTACEAN_COMPLETE": "complete_zsh"}
    env["_TYPER_COMPLETE_ARGS"] = "crustacean "
    done, loaded = modules_after([], ws.root, tmp_path, env=env)
    assert '"paths":"Print every location' in done.stdout
    assert not loaded & {f"crustacean.cli.{module}" for _, module, _ in (*COMMANDS, HELP)}


def test_the_quick_commands_modules_keep_their_annotations_evaluated() -> None:
    """typer reads each built command's signature twice; string annotations (`from __future__
    import annotations`) are compiled and evaluated on every read, ~1 ms a command a run."""
    import importlib

    for name in ("app", "help_cmd", "config_cmd", "context_cmd", "search_cmd", "tick_cmd"):
        module = importlib.import_module(f"crustacean.cli.{name}")
        assert not hasattr(module, "annotations"), name


# ---------------------------------------------------------------- the listing, old way and new


def _help(argv: list[str], columns: int) -> str:
    result = CliRunner().invoke(app, argv, prog_name="crustacean", env={"COLUMNS": str(columns)})
    return f"{result.exit_code}\n{result.output}"


def _completions(incomplete: str) -> list[tuple[str, str | None]]:
    root = typer.main.get_command(app)
    ctx = root.make_context("crustacean", [], resilient_parsing=True)
    return [(item.value, item.help) for item in root.shell_complete(ctx, incomplete)]


@pytest.mark.parametrize("columns", [60, 80, 200])
@pytest.mark.parametrize("argv", [["--help"], [], ["help"]], ids=["--help", "bare", "help"])
def test_the_root_listing_is_the_one_built_from_every_command(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], columns: int
) -> None:
    new = _help(argv, columns)
    completions = [_completions(prefix) for prefix in ("", "c", "r")]
    monkeypatch.setattr(lazy.LazyCommands, "listing", lambda self: contextlib.nullcontext())
    assert new == _help(argv, columns)  # built the old way: every command imported and built
    assert completions == [_completions(prefix) for prefix in ("", "c", "r")]


def test_each_summary_is_the_first_paragraph_of_its_commands_help() -> None:
    root: Any = typer.main.get_command(app)
    assert list(SUMMARIES) == [name for name, _, _ in COMMANDS] + ["help"]
    for name, summary in SUMMARIES.items():
        built = root.commands[name]
        assert inspect.cleandoc(built.help or "").split("\n\n")[0] == summary, name
        assert not built.short_help and not built.deprecated and not built.hidden, name
        assert not getattr(built, "rich_help_panel", None), name


# ---------------------------------------------------------------- plain text without rich

LINES = [
    "workspace:              /tmp/ws",
    "",
    "a [bold]tag[/bold] kept",
    "an emoji code :smile: here",
    "a colon: then : another",
    "tab\there",
    "cr\rhere",
    "bell\x07 vt\x0b ff\x0c bs\x08",
    "unicode … ünï cødé 漢字",
    "two\nlines",
    "x" * 300,
    "trailing spaces   ",
]
KWARGS: list[dict[str, Any]] = [
    {"markup": False, "highlight": False, "soft_wrap": True},
    {"markup": False, "soft_wrap": True},
    {"markup": False},
    {},
    {"soft_wrap": False},
    {"style": "bold"},
]


class _Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.mark.parametrize("kwargs", KWARGS, ids=[",".join(k) or "none" for k in KWARGS])
@pytest.mark.parametrize("stderr", [False, True], ids=["stdout", "stderr"])
def test_plain_printing_writes_what_rich_would(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], stderr: bool
) -> None:
    """The lazy console's own path (no rich) and rich's Console print the same bytes to a pipe,
    whichever text and options; what the plain path cannot be sure of goes to rich."""
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)
    for text in LINES:
        outs = []
        for make in (True, False):  # False: a console with its rich Console already made
            pipe = _Pipe()
            monkeypatch.setattr(sys, "stderr" if stderr else "stdout", pipe)
            console = output._LazyConsole(stderr=stderr)
            if not make:
                console._get()
            console.print(text, **kwargs)
            outs.append(pipe.getvalue())
            if make and text.startswith("workspace:") and kwargs.get("markup") is False:
                assert console._real is None  # the plain path, rich never made
        assert outs[0] == outs[1], (text, kwargs)
