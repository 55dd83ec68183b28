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


def test_the_claude_code_hook_snippet_works(tmp_path: Path) -> None:
    import json

    from crustacean.ops.init import init_workspace

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

    from crustacean.ops.init import init_workspace

    server = json.loads(_blocks("json")[1])["mcpServers"]["crustacean"]
    init_workspace(tmp_path / "agent")
    args = [a.replace("~/agent", str(tmp_path / "agent")) for a in server["args"]]
    done = _run(" ".join([server["command"], *args, "--print-tools"]), tmp_path)
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)][-1] == "get_context"


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


def test_the_toml_snippets_are_valid_config(tmp_path: Path) -> None:
    import tomllib

    from crustacean.config import load_config
    from crustacean.ops.init import init_workspace

    snippets = _blocks("toml")
    assert len(snippets) >= 2
    for n, snippet in enumerate(snippets):
        tomllib.loads(snippet)
        root = tmp_path / f"ws{n}"
        init_workspace(root, detect=False)
        if "[governance]" in snippet:  # an org file: governance is read from the org layer only
            org = tmp_path / "org.toml"
            org.write_text(snippet)
            loaded = load_config(root, env={"CRUSTACEAN_ORG_CONFIG": str(org)})
            assert loaded.settings.memory.write == "review"
        else:  # the sources tables, added to a workspace's crustacean.toml
            toml = root / "crustacean.toml"
            toml.write_text(toml.read_text() + "\n" + snippet)
            assert load_config(root, env={}).settings.sources
