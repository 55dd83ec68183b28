"""The README's commands run, so the README cannot drift from the tool."""

from __future__ import annotations

import os
import re
import shutil
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


def test_the_main_job_command_runs(tmp_path: Path) -> None:
    """The first set-up command, after its install step (tests/test_wheel.py and
    tests/test_install_tools.py cover installing): the quickstart, with no key."""
    first = _blocks("sh")[0].strip()
    assert first.startswith(INSTALL)
    shutil.copy(REPO / "quickstart.sh", tmp_path)
    done = _run(first.removeprefix(INSTALL), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "==> tick --plan" in out and "Nothing was run or written." in out
    for stage in ("collect", "curate", "compile", "calibrate"):
        assert re.search(rf"^{stage}: .*~\$\d", out, flags=re.M), stage
    assert (tmp_path / "crustacean-sample/MEMORY.md").is_file()


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
        "review",
        "runs",
        "context",
        "search",
        "index",
        "remember",
        "tier",
    }
    for name in listed:
        assert f"`crustacean {name}" in README


def test_the_claude_code_hook_snippet_works(tmp_path: Path) -> None:
    import json

    from crustacean.init import init_workspace

    settings = json.loads(_blocks("json")[0])
    hook = settings["hooks"]["SessionStart"][0]
    assert hook["matcher"] == "startup|resume|clear|compact"
    command = hook["hooks"][0]["command"]
    init_workspace(tmp_path / "agent")
    done = _run(command.replace("~/agent", str(tmp_path / "agent")), tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart" and "SOUL.md" in out["additionalContext"]


def test_the_mcp_registration_snippet_works(tmp_path: Path) -> None:
    import json

    from crustacean.init import init_workspace

    server = json.loads(_blocks("json")[1])["mcpServers"]["crustacean"]
    init_workspace(tmp_path / "agent")
    args = [a.replace("~/agent", str(tmp_path / "agent")) for a in server["args"]]
    done = _run(" ".join([server["command"], *args, "--print-tools"]), tmp_path)
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)][-1] == "get_context"
