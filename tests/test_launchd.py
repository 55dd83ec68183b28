"""`cron install --launchd` / `cron remove --launchd`: a LaunchAgent in the test's HOME, read back
with plistlib. launchctl is never run; the printed line is checked instead."""

from __future__ import annotations

import json
import plistlib
import sys
from pathlib import Path

import pytest
from test_cron import cli

from crustacean.ops import cron, launchd
from crustacean.workspace import Workspace

# launchd.plist(5): a job needs Label and Program or ProgramArguments; these are the keys the
# agent uses, each with the type launchd reads it as.
KEY_TYPES = {
    "Label": str,
    "ProgramArguments": list,
    "WorkingDirectory": str,
    "EnvironmentVariables": dict,
    "StartCalendarInterval": list,
    "StandardOutPath": str,
    "StandardErrorPath": str,
    "ProcessType": str,
}


def agents(tmp_path: Path) -> Path:
    return tmp_path / "home" / "Library" / "LaunchAgents"


def test_install_writes_one_agent_that_round_trips(ws: Workspace, tmp_path: Path) -> None:
    out = cli(ws, "install", "--launchd", "--every", "20").stdout
    (path,) = agents(tmp_path).iterdir()
    assert path.name == f"{cron.unit_name(ws)}.plist"
    keys = plistlib.loads(path.read_bytes())
    assert plistlib.loads(plistlib.dumps(keys)) == keys
    assert {k: type(v) for k, v in keys.items()} == KEY_TYPES
    assert keys["Label"] == cron.unit_name(ws)
    python = str(Path(sys.executable).absolute())
    argv = [python, "-m", "crustacean", "-w", str(ws.root), "tick", "--log"]
    assert keys["ProgramArguments"] == argv
    assert keys["StartCalendarInterval"] == [{"Minute": 0}, {"Minute": 20}, {"Minute": 40}]
    assert keys["EnvironmentVariables"] == {
        "PATH": cron.CRON_PATH,
        "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "userconfig"),
    }
    assert keys["WorkingDirectory"] == str(ws.root)
    assert keys["StandardOutPath"] == keys["StandardErrorPath"] == str(ws.logs_dir / "cron.log")
    assert ws.logs_dir.is_dir() and (tmp_path / "userconfig" / "env").is_file()
    assert f"launchctl bootstrap gui/$(id -u) {path}" in out
    assert f"launchctl bootout gui/$(id -u)/{cron.unit_name(ws)} 2>/dev/null;" in out


def test_the_agent_runs_what_the_crontab_line_runs(ws: Workspace) -> None:
    keys = launchd.agent(ws)
    line = cron.cron_lines(ws)[0]
    assert " ".join(keys["ProgramArguments"]) in line
    for name, value in keys["EnvironmentVariables"].items():
        assert f"{name}={value}" in line
    assert len(keys["StartCalendarInterval"]) == 4  # */15


def test_reinstall_replaces_and_remove_leaves_nothing(ws: Workspace, tmp_path: Path) -> None:
    cli(ws, "install", "--launchd")
    cli(ws, "install", "--launchd", "--every", "30")
    (path,) = agents(tmp_path).iterdir()
    assert len(plistlib.loads(path.read_bytes())["StartCalendarInterval"]) == 2
    out = cli(ws, "remove", "--launchd").stdout
    assert (
        f"Removed {path}" in out and f"launchctl bootout gui/$(id -u)/{cron.unit_name(ws)}" in out
    )
    assert list(agents(tmp_path).iterdir()) == []
    assert "nothing to remove" in cli(ws, "remove", "--launchd").stdout


def test_json(ws: Workspace) -> None:
    made = json.loads(cli(ws, "install", "--launchd", "--json").stdout)
    assert made["kind"] == "launchd" and Path(made["plist"]).is_file()
    gone = json.loads(cli(ws, "remove", "--launchd", "--json").stdout)
    assert gone["removed"] == [made["plist"]] and not Path(made["plist"]).exists()


@pytest.mark.parametrize(
    ("platform", "flags", "options", "kind"),
    [
        ("darwin", [], cron.Options(), "launchd"),
        ("linux", [], cron.Options(), "cron"),
        ("darwin", ["cron"], cron.Options(), "cron"),
        ("linux", ["launchd"], cron.Options(), "launchd"),
        ("darwin", [], cron.Options(per_stage=True), "cron"),  # cron-only options pick cron
        ("darwin", [], cron.Options(crontab_file=Path("t")), "cron"),
    ],
)
def test_launchd_is_the_default_on_macos(
    platform: str, flags: list[str], options: cron.Options, kind: str
) -> None:
    assert cron.pick_kind(flags, options, platform) == kind


@pytest.mark.parametrize(
    "args",
    [
        ("--launchd", "--systemd"),
        ("--launchd", "--per-stage"),
        ("--launchd", "--unit-dir", "x"),
        ("--launchd", "--crontab-file", "x"),
        ("--crontab", "--launchd"),
        ("--launchd", "--every", "0"),
        ("--launchd", "--every", "60"),
    ],
)
def test_conflicting_flags_are_usage_errors(
    ws: Workspace, tmp_path: Path, args: tuple[str, ...]
) -> None:
    err = cli(ws, "install", *args, code=2).stderr
    assert err.startswith("Error: ") and err.count("\n") == 1
    assert not agents(tmp_path).exists()


def test_doctor_and_status_see_the_launch_agent(ws: Workspace, tmp_path: Path) -> None:
    from crustacean.ops.status import cron_state, doctor

    env = {"HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "empty")}
    before = {f.name: f for f in doctor(ws.root, env=env).findings}
    assert "schedule" not in before
    launchd.install_launchd(ws)
    found = {f.name: f for f in doctor(ws.root, env=env).findings}
    assert found["schedule"].status == "ok"
    assert str(launchd.plist_path(ws)) in found["schedule"].detail
    assert "cron entry" not in found and "cron daemon" not in found
    assert cron_state(ws) == "installed"
