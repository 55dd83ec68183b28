"""macOS scheduling: one LaunchAgent per workspace in ~/Library/LaunchAgents, built with plistlib.

cron on macOS skips the runs a sleeping Mac missed and needs Full Disk Access for some folders;
launchd starts a `StartCalendarInterval` job when the Mac wakes (several missed intervals
coalesce into one start), and `tick` then runs each stage whose slot passed, once. The agent runs
the same argv, environment and log as the crontab line. Nothing here runs `launchctl`: install
returns the `bootstrap` line for the user to run.
"""

from __future__ import annotations

import os
import plistlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crustacean.ops.cron import (
    TICK_ARGS,
    enabled_stages,
    every_schedule,
    log_path,
    prepare_runs,
    root_of,
    run_argv,
    run_env,
    unit_name,
)
from crustacean.workspace import Workspace

DOMAIN = "gui/$(id -u)"  # the logged-in user's launchd domain, as the user's shell spells it


@dataclass(frozen=True)
class LaunchdResult:
    """The plist `install_launchd` wrote and the line that loads it."""

    plist: Path
    label: str
    bootstrap_command: str
    env: tuple[Path, bool]  # as cron.SystemdResult's


def plist_path(ws: Workspace | Path) -> Path:
    """The agent's plist, named by its label: the systemd units' name for this workspace."""
    return Path.home() / "Library" / "LaunchAgents" / f"{unit_name(ws)}.plist"


def agent(ws: Workspace, *, every: int = 15) -> dict[str, Any]:
    """The LaunchAgent's keys: `tick` at every `every`-th minute of the hour, like `*/N`."""
    every_schedule(every)  # same range check as cron
    enabled_stages(ws)  # and the same schedule validation
    log = str(log_path(ws))
    return {
        "Label": unit_name(ws),
        "ProgramArguments": run_argv(ws, TICK_ARGS),
        "WorkingDirectory": str(root_of(ws)),
        "EnvironmentVariables": run_env(),
        "StartCalendarInterval": [{"Minute": m} for m in range(0, 60, every)],
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "ProcessType": "Background",
    }


def bootstrap_command(path: Path, name: str) -> str:
    """Unload an older copy (ignored when none is loaded), then load this one."""
    return (
        f"launchctl bootout {DOMAIN}/{name} 2>/dev/null; "
        f"launchctl bootstrap {DOMAIN} {shlex.quote(str(path))}"
    )


def bootout_command(ws: Workspace | Path) -> str:
    return f"launchctl bootout {DOMAIN}/{unit_name(ws)}"


def install_launchd(ws: Workspace, *, every: int = 15) -> LaunchdResult:
    """Write (or replace) this workspace's plist; the caller loads it with `launchctl`."""
    keys = agent(ws, every=every)
    path = plist_path(ws)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(plistlib.dumps(keys))
    os.replace(tmp, path)
    env = prepare_runs(ws)  # launchd does not create the log's folder
    return LaunchdResult(path, unit_name(ws), bootstrap_command(path, unit_name(ws)), env)


def remove_launchd(ws: Workspace | Path) -> list[Path]:
    """Delete this workspace's plist; return it if it existed."""
    path = plist_path(ws)
    if not path.exists():
        return []
    path.unlink()
    return [path]
