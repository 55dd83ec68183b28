"""OpenClaw's own scheduler: `openclaw cron add` lines that cost no model turn and post nothing.

OpenClaw's isolated `cron add` jobs announce a summary to the user's chat unless `--no-deliver`
keeps them internal, and an agent-turn job pays a model turn of the user's agent to run a command.
Newer OpenClaw versions run *command jobs* (`--command-argv`, `--command-cwd`): the Gateway runs
the argv itself, with no agent or model run. So the form follows what the installed OpenClaw's
`openclaw cron add --help` lists: command jobs where it has `--command-argv`, else quiet
agent-turn jobs. Every flag printed here is one OpenClaw documents; the record of them, with
where each came from, is tests/fixtures/openclaw_cron_add.json.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crustacean.config import CONFIG_DIR_ENV, STAGES
from crustacean.ops.cron import config_dir, enabled_stages, run_argv, unit_name
from crustacean.workspace import Workspace

PROBE_TIMEOUT = 20.0  # seconds for `openclaw … --help` (a Node start-up); doctor must not hang
COMMAND, AGENT = "command", "agent"
LIST_LINE = "openclaw cron list --all"


@dataclass(frozen=True)
class Installed:
    """What the installed OpenClaw's `cron add` takes; `found` False when none is on PATH."""

    found: bool
    version: str = ""
    flags: frozenset[str] = field(default_factory=frozenset)
    error: str = ""

    @property
    def form(self) -> str:
        """Command jobs unless this OpenClaw's `cron add --help` was read and lacks them."""
        readable = self.found and not self.error
        return AGENT if readable and "--command-argv" not in self.flags else COMMAND

    def takes(self, flag: str) -> bool:
        return not self.found or bool(self.error) or flag in self.flags


def help_flags(text: str) -> frozenset[str]:
    """The long options a commander `--help` text lists (`--command-argv <json>` → the name)."""
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def probe(env: Mapping[str, str]) -> Installed:
    """Ask the `openclaw` on env's PATH for its version and `cron add` options."""
    program = shutil.which("openclaw", path=env.get("PATH", ""))
    if program is None:
        return Installed(False)
    try:
        version = _run([program, "--version"], env).strip().splitlines()
        helptext = _run([program, "cron", "add", "--help"], env)
    except (OSError, subprocess.SubprocessError) as e:
        return Installed(True, error=str(e).splitlines()[0] if str(e) else type(e).__name__)
    flags, first = help_flags(helptext), _version(version[0] if version else "")
    if "--cron" not in flags:
        return Installed(True, first, flags, "`openclaw cron add --help` lists no --cron option")
    return Installed(True, first, flags)


def _version(line: str) -> str:
    """`OpenClaw 2026.6.5 (abc1234) — a tagline` → `2026.6.5`; any other line as it is."""
    found = re.search(r"\b\d{4}\.\d+\.\d+(?:[-.][0-9A-Za-z.]+)?", line)
    return found.group(0) if found else line.strip()


def _run(argv: list[str], env: Mapping[str, str]) -> str:
    done = subprocess.run(
        argv, env=dict(env), capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=True
    )
    return done.stdout + done.stderr


def job_name(ws: Workspace | Path, stage: str) -> str:
    """`crustacean-<hash>-collect`: one stable name per workspace and stage."""
    return f"{unit_name(ws)}-{stage}"


def declaration_key(ws: Workspace | Path, stage: str) -> str:
    """OpenClaw's idempotent identity: re-adding the same key updates the job in place."""
    return f"crustacean:{unit_name(ws)[len('crustacean-') :]}:{stage}"


def zone(ws: Workspace) -> str:
    """The workspace's IANA zone (workspace.timezone, else the system's), for `--tz`."""
    return ws.settings.workspace.timezone or str(getattr(ws.tz, "key", "") or ws.tz)


def add_lines(ws: Workspace, installed: Installed) -> list[str]:
    """One `openclaw cron add …` per enabled stage, on that stage's schedule; writes nothing."""
    out = []
    for stage, expr in enabled_stages(ws):
        words = ["openclaw", "cron", "add", "--name", job_name(ws, stage)]
        if installed.takes("--declaration-key"):
            words += ["--declaration-key", declaration_key(ws, stage)]
        words += ["--description", f"crustacean {stage} for {ws.root}"]
        words += ["--cron", expr, "--tz", zone(ws)]
        argv = run_argv(ws, [stage])
        setting = f"{CONFIG_DIR_ENV}={config_dir()}"
        if installed.form == COMMAND and installed.takes("--command-env"):
            words += ["--command-argv", json.dumps(argv), "--command-cwd", str(ws.root)]
            words += ["--command-env", setting]
        elif installed.form == COMMAND:  # the config folder through env(1) instead
            words += ["--command-argv", json.dumps(["/usr/bin/env", setting, *argv])]
            words += ["--command-cwd", str(ws.root)]
        else:
            words += ["--session", "isolated", "--message", _message(argv)]
            words += ["--light-context"] if installed.takes("--light-context") else []
        out.append(shlex.join([*words, "--no-deliver"]))
    return out


def _message(argv: list[str]) -> str:
    """An agent turn's whole task: run one command, reply with the silent token."""
    env = f"{CONFIG_DIR_ENV}={shlex.quote(str(config_dir()))}"
    return (
        f"Run exactly this shell command and nothing else: {env} {shlex.join(argv)} "
        "Then reply only NO_REPLY."
    )


def remove_lines(ws: Workspace) -> list[str]:
    """`openclaw cron rm` takes a job id, which only `cron list` knows: one line per job name."""
    return [
        f"openclaw cron rm <job-id>  # the id `{LIST_LINE}` shows for {job_name(ws, stage)}"
        for stage in STAGES  # a stage disabled since its job was added still has one
    ]


def describe(installed: Installed) -> str:
    """One line on the form, as doctor and `cron install --openclaw` say it."""
    name = f"OpenClaw {installed.version}".strip() if installed.version else "OpenClaw"
    if not installed.found:
        return (
            "no `openclaw` on PATH: these are command jobs, as current OpenClaw runs them; with an "
            "older one, run this again where `openclaw` is on PATH"
        )
    if installed.error:
        return f"cannot read `openclaw cron add --help` ({installed.error}); assuming command jobs"
    if installed.form == COMMAND:
        return f"{name} runs command jobs: no agent or model turn, and nothing is posted to chat"
    return (
        f"{name} has no command jobs (no --command-argv): each run is one isolated agent turn "
        "(a model call of your agent), kept out of your chat by --no-deliver"
    )
