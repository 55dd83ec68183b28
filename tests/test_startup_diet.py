"""Start-up decides early: a no-op tick returns before the stages and the model SDK load, and a
command's annotations are evaluated once (typer reads each signature twice)."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer

from crustacean.cli import output
from crustacean.cli.app import COMMANDS, app
from crustacean.config import STAGES
from crustacean.runs import RunRecorder
from crustacean.workspace import Workspace

# Writes the modules imported at exit to argv[1]; argv after it is the command line.
_CHILD = (
    "import atexit, json, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['crustacean', *sys.argv[2:]]\n"
    "from crustacean.cli.app import main\n"
    "main()\n"
)


def modules_after(
    argv: list[str], cwd: Path, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The child's result and every module it had imported when it exited."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, set(json.loads(out.read_text()))


def test_a_no_op_tick_decides_before_loading_the_stages(ws: Workspace, tmp_path: Path) -> None:
    """Every stage just ran: the tick says so, and neither a stage nor the SDK loaded; the
    next tick reads the slots the first recorded and does not load croniter either."""
    toml = ws.root / "crustacean.toml"
    text = re.sub(r'(?m)^(# )?timezone = ""', 'timezone = "UTC"', toml.read_text(), count=1)
    toml.write_text(text)
    for stage in STAGES:  # now, not earlier: the stages' own slots are on the minute
        with RunRecorder(ws, stage, clock=lambda: datetime.now(UTC)) as rec:
            rec.finish("ok", summary="test: just ran")
    done, loaded = modules_after(["tick"], ws.root, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("not due (next slot") == len(STAGES), done.stdout
    assert not {m for m in loaded if m.startswith(("anthropic", "crustacean.stages."))}
    again, loaded = modules_after(["tick"], ws.root, tmp_path)
    assert again.stdout == done.stdout, again.stderr[-2000:]
    assert not {m for m in loaded if m.startswith(("anthropic", "crustacean.stages.", "croniter"))}


def test_each_summary_is_the_first_paragraph_of_its_commands_help() -> None:
    """The root listing shows COMMANDS' summaries without importing a command: each is what
    the command's own help begins with, so the two cannot drift apart."""
    root: Any = typer.main.get_command(app)
    ctx = root.make_context("crustacean", [], resilient_parsing=True)
    for name, _, summary in COMMANDS:
        built = root.get_command(ctx, name)
        assert inspect.cleandoc(built.help or "").split("\n\n")[0] == summary, name
        assert not built.short_help and not built.deprecated and not built.hidden, name
        assert not getattr(built, "rich_help_panel", None), name


def test_the_root_listing_imports_no_command_module(ws: Workspace, tmp_path: Path) -> None:
    done, loaded = modules_after(["--help"], ws.root, tmp_path)
    assert "paths" in done.stdout and "runs" in done.stdout
    modules = {f"crustacean.cli.{where.split(':')[0]}" for _, where, _ in COMMANDS}
    assert not loaded & modules, loaded & modules


def test_the_hook_without_a_topic_imports_no_search_code(ws: Workspace, tmp_path: Path) -> None:
    """The SessionStart hook (no topic) ranks nothing: the search index and its query parser
    stay unloaded (the memory index's sweep mark comes from tree.py)."""
    done, loaded = modules_after(["context", "--format", "claude-hook"], ws.root, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert not {m for m in loaded if m.startswith(("crustacean.recall.search", "croniter"))}


def test_the_command_modules_keep_their_annotations_evaluated() -> None:
    """typer reads each built command's signature twice; string annotations (`from __future__
    import annotations`) are compiled and evaluated on every read."""
    for name in ("app", "help_cmd", "config_cmd", "context_cmd", "search_cmd", "tick_cmd"):
        module = importlib.import_module(f"crustacean.cli.{name}")
        assert not hasattr(module, "annotations"), name


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
