"""`cron install --openclaw` against a fake `openclaw` on PATH, and every printed flag against
the recorded copy of OpenClaw's documented `cron` options (tests/fixtures/openclaw_cron.json)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cron import cli

from crustacean.ops import openclaw_jobs
from crustacean.ops.openclaw_jobs import AGENT, COMMAND, Installed
from crustacean.ops.status import doctor
from crustacean.workspace import Workspace

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "openclaw_cron.json").read_text())
ADD = FIXTURE["cron add"]
OLD = ("--declaration-key", "--light-context", *FIXTURE["command jobs need"])  # a 2026.3 one


def fake_openclaw(folder: Path, version: str, drop: tuple[str, ...] = (), code: int = 0) -> Path:
    """An `openclaw` script whose `cron add --help` lists the fixture's options (minus `drop`),
    laid out as commander prints them; it records every call it gets."""
    folder.mkdir(parents=True, exist_ok=True)
    options = "\n".join(f"  {flag} {text}" for flag, text in ADD.items() if flag not in drop)
    helptext = (
        f"Usage: openclaw cron add [options] [scheduleOrName] [message]\n\nOptions:\n{options}"
    )
    (folder / "help.txt").write_text(helptext + "\n  -h, --help  display help for command\n")
    script = folder / "openclaw"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{folder}/calls"\n'
        f'[ "$1" = --version ] && {{ echo "OpenClaw {version} (abc1234)"; exit {code}; }}\n'
        f'cat "{folder}/help.txt"; exit {code}\n'
    )
    script.chmod(0o755)
    return folder


def use(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")


def printed(out: str) -> list[list[str]]:
    return [
        shlex.split(line, comments=True)
        for line in out.splitlines()
        if line.startswith("openclaw ")
    ]


def flags(words: list[str]) -> list[str]:
    return [w for w in words if w.startswith("--")]


@pytest.mark.parametrize("drop", [(), OLD], ids=["command-jobs", "agent-turns"])
def test_every_printed_flag_is_a_documented_openclaw_option(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drop: tuple[str, ...]
) -> None:
    use(monkeypatch, fake_openclaw(tmp_path / "bin", "2026.7.1", drop))
    added = printed(cli(ws, "install", "--openclaw").stdout)
    removal = printed(cli(ws, "remove", "--openclaw").stdout)
    assert len(added) == 4 and len(removal) == 5
    for words in added:
        assert words[:3] == ["openclaw", "cron", "add"]
        assert set(flags(words)) <= set(ADD) - set(drop), words
    assert removal[0] == ["openclaw", "cron", "list", "--all"]
    assert set(flags(removal[0])) <= set(FIXTURE["cron list"])
    for words in removal[1:]:
        assert words[:4] == ["openclaw", "cron", "rm", "<job-id>"] and not flags(words)


def test_command_jobs_run_the_exact_argv_quietly(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, fake_openclaw(tmp_path / "bin", "2026.7.1"))
    sets = ("workspace.timezone=America/Los_Angeles",)
    out = cli(ws, "install", "--openclaw", sets=sets).stdout
    assert out.startswith("# OpenClaw 2026.7.1 runs command jobs: no agent or model")
    jobs = printed(out)
    stages = ["collect", "curate", "compile", "calibrate"]
    python = str(Path(sys.executable).absolute())
    for words, stage in zip(jobs, stages, strict=True):
        opt = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        argv = [python, "-m", "crustacean", "-w", str(ws.root), stage]
        assert json.loads(opt["--command-argv"]) == argv
        assert opt["--command-cwd"] == str(ws.root) and opt["--tz"] == "America/Los_Angeles"
        assert opt["--command-env"] == f"CRUSTACEAN_CONFIG_DIR={tmp_path / 'userconfig'}"
        assert opt["--name"] == openclaw_jobs.job_name(ws, stage)
        assert opt["--declaration-key"] == openclaw_jobs.declaration_key(ws, stage)
        assert words[-1] == "--no-deliver"
        assert not {"--announce", "--message", "--session", "--channel"} & set(words)
    assert len({tuple(j) for j in jobs}) == 4
    assert cli(ws, "install", "--openclaw", sets=sets).stdout == out  # a rerun: the same jobs
    assert "updates the same jobs (their --declaration-key)" in out
    calls = (tmp_path / "bin/calls").read_text().splitlines()
    assert calls[:2] == ["--version", "cron add --help"]  # asked, never told to add anything


def test_without_command_env_the_config_folder_goes_through_env(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, fake_openclaw(tmp_path / "bin", "2026.5.0", ("--command-env",)))
    for words in printed(cli(ws, "install", "--openclaw").stdout):
        argv = json.loads(words[words.index("--command-argv") + 1])
        assert argv[:2] == ["/usr/bin/env", f"CRUSTACEAN_CONFIG_DIR={tmp_path / 'userconfig'}"]
        assert "--command-env" not in words


def test_an_older_openclaw_gets_quiet_agent_turns(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, fake_openclaw(tmp_path / "bin", "2026.3.2", OLD))
    out = cli(ws, "install", "--openclaw").stdout
    assert "OpenClaw 2026.3.2 has no command jobs" in out
    assert "adding them again duplicates them" in out
    for words in printed(out):
        assert words[words.index("--session") + 1] == "isolated"
        message = words[words.index("--message") + 1]
        assert message.startswith("Run exactly this shell command and nothing else: ")
        assert message.endswith(" Then reply only NO_REPLY.") and str(ws.root) in message
        assert words[-1] == "--no-deliver" and "--declaration-key" not in words
    plan = json.loads(cli(ws, "install", "--openclaw", "--json").stdout)
    assert plan["form"] == AGENT and plan["replaces_on_rerun"] is False
    assert plan["openclaw_version"] == "2026.3.2"


def test_without_openclaw_on_path_the_current_form_is_printed(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, tmp_path / "empty")
    plan = json.loads(cli(ws, "install", "--openclaw", "--json").stdout)
    assert plan["form"] == COMMAND and plan["openclaw_version"] is None
    assert all("--command-argv" in c and "--declaration-key" in c for c in plan["commands"])


@pytest.mark.parametrize(
    ("installed", "form", "declares"),
    [
        (Installed(False), COMMAND, True),
        (Installed(True, "x", frozenset({"--cron", "--command-argv"})), COMMAND, False),
        (Installed(True, "x", frozenset({"--cron", "--message"})), AGENT, False),
        (Installed(True, "x", frozenset({"--cron", "--declaration-key"})), AGENT, True),
        (Installed(True, error="timed out"), COMMAND, True),
    ],
)
def test_the_form_follows_the_options_openclaw_lists(
    installed: Installed, form: str, declares: bool
) -> None:
    assert installed.form == form and installed.takes("--declaration-key") is declares


def test_help_flags_reads_commander_help() -> None:
    text = "  --command-argv <json>  argv as JSON\n  --no-deliver  Disable delivery (e.g. --x)\n"
    assert openclaw_jobs.help_flags(text) == {"--command-argv", "--no-deliver", "--x"}


# --- doctor -----------------------------------------------------------------------------------


def openclaw_home(tmp_path: Path, ws: Workspace, dreaming: Any = None) -> Path:
    """~/.openclaw/openclaw.json naming `ws` as the agent's workspace."""
    home = tmp_path / "home"
    (home / ".openclaw").mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"agents": {"defaults": {"workspace": str(ws.root)}}}
    if dreaming is not None:
        config["plugins"] = {"entries": {"memory-core": {"config": {"dreaming": dreaming}}}}
    (home / ".openclaw/openclaw.json").write_text(json.dumps(config))
    return home


@pytest.mark.parametrize(
    ("drop", "code", "status", "words"),
    [
        ((), 0, "ok", "OpenClaw 2026.7.1 runs command jobs"),
        (OLD, 0, "warn", "has no command jobs (no --command-argv)"),
        ((), 3, "warn", "cannot read `openclaw cron add --help`"),
    ],
)
def test_doctor_says_which_form_the_installed_openclaw_takes(
    ws: Workspace, tmp_path: Path, drop: tuple[str, ...], code: int, status: str, words: str
) -> None:
    folder = fake_openclaw(tmp_path / "bin", "2026.7.1", drop, code)
    home = openclaw_home(tmp_path, ws)
    env = {"HOME": str(home), "PATH": f"{folder}:/usr/bin:/bin", "CRUSTACEAN_CONFIG_DIR": "/x"}
    found = next(f for f in doctor(ws.root, env=env).findings if f.name == "openclaw cron")
    assert found.status == status and words in found.detail
    assert (found.fix == "") is (status == "ok")


def test_doctor_says_nothing_of_openclaw_cron_without_openclaw(
    ws: Workspace, tmp_path: Path
) -> None:
    home = openclaw_home(tmp_path, ws)
    env = {"HOME": str(home), "PATH": str(tmp_path / "empty"), "CRUSTACEAN_CONFIG_DIR": "/x"}
    assert "openclaw cron" not in {f.name for f in doctor(ws.root, env=env).findings}
