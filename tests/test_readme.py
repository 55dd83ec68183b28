"""The README's commands run, so the README cannot drift from the tool (its JSON and TOML
snippets are checked with the guides' in tests/test_docs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BIN = Path(sys.executable).parent
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q . && "


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        env.pop(var, None)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_main_job_command_is_the_quickstart() -> None:
    """The first set-up command, after its install step (tests/test_wheel.py and
    tests/test_install_tools.py cover installing): the quickstart, which
    tests/test_quickstart.py runs with no key and checks step by step."""
    first = _blocks("sh")[0].strip()
    assert first == INSTALL + 'PATH="$PWD/.venv/bin:$PATH" sh quickstart.sh'


def test_the_test_command_is_what_ci_runs() -> None:
    second = _blocks("sh")[1].strip()
    ci = (REPO / ".ci/run").read_text()
    assert second in ci


def test_the_tour_runs_in_order(tmp_path: Path) -> None:
    tour = _blocks("console")[0]
    commands = [line[2:] for line in tour.splitlines() if line.startswith("$ ")]
    assert len(commands) >= 8
    done = _run("\n".join(commands), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "snapshot of uncommitted edits" in done.stdout
    assert "rollback MEMORY.md to version" in done.stdout
    assert "- an edit I regret" not in (tmp_path / "my-agent/MEMORY.md").read_text()


def test_every_command_in_the_table_exists() -> None:
    from typer.testing import CliRunner

    from crustacean.cli.app import app

    rows = re.findall(r"^\| `crustacean ([a-z ]+?)(?: [A-Z\[\-].*?)?` \|", README, flags=re.M)
    assert len(rows) >= 9
    for row in rows:
        result = CliRunner().invoke(app, [*row.split(), "--help"], prog_name="crustacean")
        assert result.exit_code == 0, row


def test_help_lists_only_commands_that_work() -> None:
    from typer.testing import CliRunner

    from crustacean.cli.app import app

    out = CliRunner().invoke(app, ["--help"], prog_name="crustacean").stdout
    listed = set(re.findall(r"^│ (\w[\w-]*)\s", out, flags=re.M))
    assert listed == {
        "help",
        "init",
        "collect",
        "curate",
        "compile",
        "calibrate",
        "health",
        "status",
        "doctor",
        "tick",
        "cron",
        "mcp",
        "config",
        "paths",
        "history",
        "show",
        "rollback",
        "undo",
        "review",
        "runs",
        "context",
        "search",
        "index",
        "remember",
        "tier",
        "ui",
    }
    for name in listed:
        assert f"`crustacean {name}" in README


def test_the_schedule_block_runs_against_a_stand_in_crontab(tmp_path: Path) -> None:
    """`cron install` etc. as the README shows them, with a fake `crontab` first on PATH so the
    real crontab is never touched."""
    from test_docs import CRONTAB

    from crustacean.ops.init import init_workspace

    block = next(b for b in _blocks("sh") if b.startswith("crustacean cron install"))
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    init_workspace(tmp_path / "agent", detect=False)
    fake = tmp_path / "bin/crontab"
    fake.parent.mkdir()
    fake.write_text(CRONTAB)
    fake.chmod(0o755)
    script = f'export PATH="{fake.parent}:$PATH" FAKE_CRONTAB="{tmp_path / "tab"}"\n'
    script += "cd agent\n" + "\n".join(f"{c} || [ $? -eq 1 ]" for c in commands)
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crustacean" in (tmp_path / "tab").read_text() and " tick" in done.stdout
