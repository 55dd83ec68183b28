"""`crustacean cron install | show | remove` against crontab files, systemd units and OpenClaw.

No test touches a real crontab except the opt-in `cron_daemon` one (CRUSTACEAN_TEST_CRON=1).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from crustacean.cli.app import root as root_callback
from crustacean.cli.common import CrustaceanGroup
from crustacean.cli.cron_cmd import cron_app
from crustacean.config import load_config
from crustacean.errors import ConfigError, UsageError
from crustacean.ops import cron
from crustacean.ops.init import init_workspace
from crustacean.workspace import Workspace

cron_daemon = pytest.mark.cron_daemon

USER_LINES = (
    "# my own jobs, keep them exactly\n"
    "SHELL=/bin/bash\n"
    "MAILTO=me@example.com\n"
    "0 1 * * *   /home/me/backup.sh   --all   \n"
    "\n"
    "@reboot   echo hi  % not a newline here\n"
)
TAIL = "*/5 * * * * /usr/bin/true # after the block\n"


def cli(ws: Workspace, *args: str, code: int = 0, sets: tuple[str, ...] = ()) -> Result:
    """`crustacean -w WS [-c K=V …] cron …` through the real root callback and the sub-app."""
    app = typer.Typer(cls=CrustaceanGroup)
    app.callback()(root_callback)
    app.add_typer(cron_app, name="cron")
    argv = ["-w", str(ws.root), *(f"-c{pair}" for pair in sets), "cron", *args]
    result = CliRunner().invoke(app, argv, prog_name="crustacean")
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def with_config(ws: Workspace, *pairs: str) -> Workspace:
    """The workspace with `-c KEY=VALUE` overrides applied."""
    return Workspace(ws.root, load_config(ws.root, overrides=list(pairs)))


@pytest.fixture
def tab(tmp_path: Path) -> Path:
    path = tmp_path / "crontab"
    path.write_bytes(USER_LINES.encode())
    return path


def without_block(ws: Workspace, text: str) -> str:
    block = cron.block_for(ws, text)
    assert block is not None
    return text.replace(block, "", 1)


# --- crontab file: install, reinstall, show, remove ------------------------------------------


def test_user_lines_stay_byte_identical_across_install_reinstall_remove(
    ws: Workspace, tab: Path
) -> None:
    cli(ws, "install", "--crontab-file", str(tab))
    assert without_block(ws, tab.read_text()) == USER_LINES
    tab.write_text(tab.read_text() + TAIL)  # the user adds a line below the block
    original = USER_LINES + TAIL
    cli(ws, "install", "--per-stage", "--crontab-file", str(tab))
    assert without_block(ws, tab.read_text()) == original
    assert tab.read_text().endswith(TAIL)  # the block was replaced in place
    cli(ws, "remove", "--crontab-file", str(tab))
    assert tab.read_bytes() == original.encode()


def test_install_twice_gives_one_block(ws: Workspace, tab: Path) -> None:
    cli(ws, "install", "--crontab-file", str(tab))
    first = tab.read_text()
    cli(ws, "install", "--crontab-file", str(tab))
    text = tab.read_text()
    assert text == first
    start, end = cron.markers(ws)
    assert text.count(start) == 1 and text.count(end) == 1


def test_default_line_runs_tick_with_absolute_paths(ws: Workspace, tab: Path) -> None:
    out = cli(ws, "install", "--crontab-file", str(tab)).stdout
    block = cron.block_for(ws, tab.read_text())
    assert block is not None
    (line,) = cron.block_commands(block)
    assert block.splitlines()[1].startswith("*/15 * * * * cd ")
    words = shlex.split(line)
    assert words[:2] == ["cd", str(ws.root)]
    python = words[words.index("-m") - 1]
    assert Path(python).is_absolute() and python == str(Path(sys.executable).absolute())
    assert words[words.index("-m") :] == [
        "-m",
        "crustacean",
        "-w",
        str(ws.root),
        "tick",
        "--log",
        ">>",
        str(ws.root / ".crustacean/logs/cron.log"),
        "2>&1",
    ]
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in words
    assert "MAILTO" not in block and "\nSHELL=" not in block  # nothing leaks to other lines
    assert "Installed 1 cron line(s)" in out and str(ws.root / ".crustacean/logs") in out


def test_every_sets_the_tick_interval(ws: Workspace, tab: Path) -> None:
    cli(ws, "install", "--every", "5", "--crontab-file", str(tab))
    assert "\n*/5 * * * * cd " in tab.read_text()
    cli(ws, "install", "--every", "1", "--crontab-file", str(tab))
    assert "\n* * * * * cd " in tab.read_text()
    before = tab.read_bytes()
    for bad in ("0", "60"):
        result = cli(ws, "install", "--every", bad, "--crontab-file", str(tab), code=2)
        assert "--every" in result.stderr
    assert tab.read_bytes() == before


def test_per_stage_uses_each_enabled_stage_schedule(ws: Workspace, tab: Path) -> None:
    sets = (
        "stages.collect.schedule=7 */3 * * *",
        "stages.compile.enabled=false",
        "stages.calibrate.schedule=15 6 2 * *",
    )
    cli(ws, "install", "--per-stage", "--crontab-file", str(tab), sets=sets)
    block = cron.block_for(ws, tab.read_text())
    assert block is not None
    lines = block.splitlines()[1:-1]
    assert [line.split(" cd ")[0] for line in lines] == ["7 */3 * * *", "30 3 * * *", "15 6 2 * *"]
    python = str(Path(sys.executable).absolute())
    for line, stage in zip(lines, ("collect", "curate", "calibrate"), strict=True):
        assert f"{python} -m crustacean -w {ws.root} {stage} >> {ws.root}/" in line


def test_per_stage_with_no_stage_enabled_is_a_usage_error(ws: Workspace, tab: Path) -> None:
    names = ("collect", "curate", "compile", "calibrate")
    sets = tuple(f"stages.{n}.enabled=false" for n in names)
    cli(ws, "install", "--per-stage", "--crontab-file", str(tab), code=2, sets=sets)
    assert tab.read_text() == USER_LINES


@pytest.mark.parametrize(
    "flag", ["stages.curate.schedule=0 0 9 * * *", "stages.collect.schedule=61 * * * *"]
)
def test_invalid_schedule_exits_2_and_leaves_the_crontab(
    ws: Workspace, tab: Path, flag: str
) -> None:
    result = cli(ws, "install", "--crontab-file", str(tab), code=2, sets=(flag,))
    assert result.stderr.startswith("Error: ") and "stages." in result.stderr
    assert tab.read_bytes() == USER_LINES.encode()


@pytest.mark.parametrize(
    "expr",
    ["0 0 9 * * *", "* * * *", "61 * * * *", "0 3 * * * %", "@reboot", "@daily", "every day", ""],
)
def test_validate_schedule_rejects(expr: str) -> None:
    with pytest.raises(ConfigError, match="5-field cron expression"):
        cron.validate_schedule(expr, "stages.x.schedule")


@pytest.mark.parametrize("expr", ["0 3 * * *", "*/15 9-17 * * mon-fri", "0  4 * * 0"])
def test_validate_schedule_accepts(expr: str) -> None:
    assert cron.validate_schedule(expr, "x") == " ".join(expr.split())


def test_show_and_remove(ws: Workspace, tab: Path) -> None:
    out = cli(ws, "show", "--crontab-file", str(tab)).stdout
    assert out == f"cron is not installed for {ws.root}\n"
    out = cli(ws, "remove", "--crontab-file", str(tab)).stdout
    assert "nothing to remove" in out
    assert tab.read_bytes() == USER_LINES.encode()
    cli(ws, "install", "--crontab-file", str(tab))
    out = cli(ws, "show", "--crontab-file", str(tab)).stdout
    assert out == cron.block_for(ws, tab.read_text())
    assert cron.is_installed(ws, tab.read_text())
    assert "Removed" in cli(ws, "remove", "--crontab-file", str(tab)).stdout
    assert not cron.is_installed(ws, tab.read_text())
    assert tab.read_bytes() == USER_LINES.encode()


def test_missing_crontab_file_is_created_and_read_as_empty(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "new" / "tab"
    path.parent.mkdir()
    assert cron.read_crontab(path) == ""
    assert not cron.remove(ws, crontab_file=path)
    result = cron.install(ws, crontab_file=path)
    assert path.read_text() == cron.block_for(ws, path.read_text())
    assert result.target == str(path) and len(result.lines) == 1


def test_two_workspaces_share_a_crontab(ws: Workspace, tab: Path, tmp_path: Path) -> None:
    init_workspace(tmp_path / "other")
    other = Workspace(tmp_path / "other", load_config(tmp_path / "other"))
    cron.install(ws, crontab_file=tab)
    cron.install(other, crontab_file=tab, per_stage=True)
    assert cron.remove(ws, crontab_file=tab)
    text = tab.read_text()
    assert not cron.is_installed(ws, text) and cron.is_installed(other, text)
    assert without_block(other, text) == USER_LINES


def test_unterminated_last_line_gets_its_newline(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "tab"
    path.write_text("0 1 * * * /bin/true")  # cron would ignore this line without a newline
    cron.install(ws, crontab_file=path)
    assert path.read_text().startswith("0 1 * * * /bin/true\n# >>> crustacean ")
    cron.remove(ws, crontab_file=path)
    assert path.read_text() == "0 1 * * * /bin/true\n"


def test_half_a_block_is_refused_not_guessed(ws: Workspace, tab: Path) -> None:
    start, _ = cron.markers(ws)
    tab.write_text(USER_LINES + start + "\n* * * * * something\n")
    before = tab.read_bytes()
    result = cli(ws, "install", "--crontab-file", str(tab), code=1)
    assert "without its end line" in result.stderr
    cli(ws, "remove", "--crontab-file", str(tab), code=1)
    assert tab.read_bytes() == before


def test_crlf_and_non_utf8_bytes_survive(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "tab"
    original = b"0 1 * * * /bin/caf\xe9\r\n# note\r\n"
    path.write_bytes(original)
    cron.install(ws, crontab_file=path)
    cron.remove(ws, crontab_file=path)
    assert path.read_bytes() == original


# --- the line as cron runs it ------------------------------------------------------------------


def test_line_runs_under_a_minimal_cron_environment(tmp_path: Path) -> None:
    """sh -c with cron's bare env: the interpreter gets the args, cwd, PATH and config dir."""
    root = tmp_path / "my ws %1"
    init_workspace(root)
    ws = Workspace(root, load_config(root))
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\necho "args=$*"\necho "cwd=$(pwd)"\necho "path=$PATH"\n'
        'echo "cfg=$CRUSTACEAN_CONFIG_DIR"\necho oops >&2\n'
    )
    fake.chmod(0o755)
    (line,) = cron.cron_lines(ws, python=str(fake))
    ws.logs_dir.mkdir(parents=True)  # install makes it
    assert "\\%1" in line  # cron turns a bare % into a line break
    command = line.split(None, 5)[5].replace("\\%", "%")  # what cron hands the shell
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/sh"}
    subprocess.run(["/bin/sh", "-c", command], env=env, check=True, timeout=10)
    log = (root / ".crustacean/logs/cron.log").read_text().splitlines()
    assert log == [
        f"args=-m crustacean -w {root} tick --log",
        f"cwd={root}",
        "path=/usr/local/bin:/usr/bin:/bin",
        f"cfg={tmp_path / 'userconfig'}",
        "oops",
    ]


# --- env file ----------------------------------------------------------------------------------


def test_env_file_created_0600_with_a_template(ws: Workspace, tab: Path, tmp_path: Path) -> None:
    out = cli(ws, "install", "--crontab-file", str(tab)).stdout
    env_file = tmp_path / "userconfig" / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert "# ANTHROPIC_API_KEY=" in env_file.read_text()
    assert f"Created {env_file} (mode 0600)" in out
    from crustacean.config import read_env_file

    assert read_env_file(env_file) == {}  # the template sets nothing


def test_env_file_is_never_overwritten(ws: Workspace, tab: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "userconfig" / "env"
    env_file.parent.mkdir()
    env_file.write_text("ANTHROPIC_API_KEY=sk-ant-mine\n")
    env_file.chmod(0o640)
    result = cron.install(ws, crontab_file=tab)
    assert not result.created_env and result.env_file == env_file
    assert env_file.read_text() == "ANTHROPIC_API_KEY=sk-ant-mine\n"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640
    assert "left as it was" in cli(ws, "install", "--crontab-file", str(tab)).stdout


def test_configured_env_file_is_the_one_created(ws: Workspace, tab: Path, tmp_path: Path) -> None:
    target = tmp_path / "secrets" / "crustacean.env"
    ws = with_config(ws, f"llm.env_file={target}")
    result = cron.install(ws, crontab_file=tab)
    assert result.created_env and result.env_file == target
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


# --- no crontab program ------------------------------------------------------------------------


def test_no_crontab_program_prints_the_lines_to_paste(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = cli(ws, "install", code=1)
    assert result.stderr.startswith("Error: no `crontab` program")
    assert "install cron (Debian: apt-get install cron)" in result.stderr
    (line,) = cron.cron_lines(ws)
    assert line in result.stderr and cron.markers(ws)[0] in result.stderr
    assert (tmp_path / "userconfig" / "env").is_file()  # the pasted lines need it
    for args in (("show",), ("remove",)):
        assert "apt-get install cron" in cli(ws, *args, code=1).stderr


def test_fake_crontab_program_is_driven_with_l_and_dash(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --crontab-file: `crontab -l` reads (no crontab yet = empty), `crontab -` writes."""
    bin_dir, store = tmp_path / "fakebin", tmp_path / "stored"
    bin_dir.mkdir()
    script = bin_dir / "crontab"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -l ]; then [ -f "{store}" ] || {{ echo "no crontab for me" >&2; exit 1; }}; '
        f'cat "{store}"; elif [ "$1" = - ]; then cat > "{store}"; else exit 2; fi\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert cron.read_crontab(None) == ""
    store.write_text(USER_LINES)
    result = cron.install(ws)
    assert result.target == "the user crontab (crontab -l)"
    assert cron.is_installed(ws, store.read_text())
    assert cron.remove(ws)
    assert store.read_text() == USER_LINES


# --- systemd and OpenClaw ----------------------------------------------------------------------


def test_systemd_writes_a_persistent_timer_and_service(ws: Workspace, tmp_path: Path) -> None:
    units = tmp_path / "units"
    out = cli(ws, "install", "--systemd", "--every", "10", "--unit-dir", str(units)).stdout
    name = cron.unit_name(ws)
    service = (units / f"{name}.service").read_text()
    timer = (units / f"{name}.timer").read_text()
    assert "OnCalendar=*:0/10\n" in timer and "Persistent=true\n" in timer
    assert f"Unit={name}.service\n" in timer and "WantedBy=timers.target" in timer
    python = Path(sys.executable).absolute()
    assert f"ExecStart={python} -m crustacean -w {ws.root} tick --log\n" in service
    assert "Type=oneshot" in service and f"WorkingDirectory={ws.root}\n" in service
    assert f"StandardOutput=append:{ws.root}/.crustacean/logs/cron.log" in service
    assert f"systemctl --user enable --now {name}.timer" in out
    assert (tmp_path / "userconfig" / "env").is_file()
    wants = units / "timers.target.wants"
    wants.mkdir()
    (wants / f"{name}.timer").symlink_to(units / f"{name}.timer")  # what `enable` makes
    out = cli(ws, "remove", "--systemd", "--unit-dir", str(units)).stdout
    assert out.count("Removed") == 3 and not any(units.rglob("crustacean-*"))


def test_systemd_default_timer_is_every_15_minutes(ws: Workspace, tmp_path: Path) -> None:
    result = cron.install_systemd(ws, unit_dir=tmp_path / "u")
    assert "OnCalendar=*:0/15\n" in result.timer.read_text()
    assert cron.unit_name(ws) == cron.unit_name(ws.root)


def test_openclaw_prints_one_command_per_stage_and_writes_nothing(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path / 'nobin'}:/usr/bin:/bin")  # no openclaw here
    sets = ("workspace.timezone=Europe/Berlin", "stages.curate.enabled=false")
    before = sorted(p for p in tmp_path.rglob("*"))
    out = cli(ws, "install", "--openclaw", sets=sets).stdout
    assert sorted(p for p in tmp_path.rglob("*")) == before
    commands = [shlex.split(x) for x in out.splitlines() if x.startswith("openclaw ")]
    name = cron.unit_name(ws)
    assert [c[c.index("--name") + 1] for c in commands] == [
        f"{name}-collect",
        f"{name}-compile",
        f"{name}-calibrate",
    ]
    assert [c[c.index("--cron") + 1] for c in commands] == ["0 */2 * * *", "0 4 * * 0", "0 5 1 * *"]
    for words, stage in zip(commands, ("collect", "compile", "calibrate"), strict=True):
        assert words[:3] == ["openclaw", "cron", "add"]
        assert words[words.index("--tz") + 1] == "Europe/Berlin"
        argv = json.loads(words[words.index("--command-argv") + 1])
        python = str(Path(sys.executable).absolute())
        assert argv == [python, "-m", "crustacean", "-w", str(ws.root), stage]
        assert words[-1] == "--no-deliver" and "--announce" not in words


@pytest.mark.parametrize(
    "args",
    [
        ("--systemd", "--per-stage"),
        ("--systemd", "--crontab-file", "x"),
        ("--unit-dir", "x"),
        ("--per-stage", "--every", "5"),
        ("--openclaw", "--every", "5"),
    ],
)
def test_conflicting_flags_are_usage_errors(ws: Workspace, args: tuple[str, ...]) -> None:
    assert cli(ws, "install", *args, code=2).stderr.startswith("Error: ")


def test_api_errors_are_typed(ws: Workspace) -> None:
    with pytest.raises(UsageError):
        cron.every_schedule(0)
    with pytest.raises(UsageError):
        cron.markers(Path("/tmp/a\nb"))


# --- opt-in: a real cron daemon ----------------------------------------------------------------


def _cron_daemon_reason() -> str | None:
    """Why the real-daemon test cannot run here, or None."""
    if os.environ.get("CRUSTACEAN_TEST_CRON") != "1":
        return (
            "set CRUSTACEAN_TEST_CRON=1 to run against a real cron daemon (it edits root's crontab)"
        )
    if not Path("/usr/sbin/cron").exists() or shutil.which("crontab") is None:
        return "no /usr/sbin/cron or crontab program (Debian: apt-get install cron)"
    if subprocess.run(["pgrep", "-x", "cron"], capture_output=True, check=False).returncode != 0:
        return "the cron daemon is not running (start it with `cron` as root)"
    return None


@cron_daemon
def test_real_cron_daemon_runs_the_installed_entry(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = _cron_daemon_reason()
    if reason:
        pytest.skip(reason)
    tmp_path.chmod(0o755)
    # --verbose: a tick with nothing due logs its line too, so the log shows that tick ran
    monkeypatch.setattr(cron, "TICK_ARGS", [*cron.TICK_ARGS, "--verbose"])
    cron.install(ws, every=1)  # the real user crontab, via `crontab -l` / `crontab -`
    try:
        log = ws.root / ".crustacean" / "logs" / "cron.log"
        # cron fires once a minute: wait for the line it writes, with a generous safety net
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (log.exists() and log.stat().st_size):
            time.sleep(2)
        assert log.exists() and log.stat().st_size, "cron did not run the entry within 5 min"
        text = log.read_text()
        assert "Traceback" not in text and "No such command" not in text, text
    finally:
        assert cron.remove(ws)
    assert not cron.is_installed(ws, cron.read_crontab(None))


def test_rotate_log_keeps_one_old_file_and_the_open_append_handle_working(
    tmp_path: Path,
) -> None:
    """The shell that runs the cron line holds the log open for appending (`>>`): after the
    rotation its writes land at the start of the emptied log, not in the old file."""
    log = tmp_path / "cron.log"
    log.write_text("a" * 50)
    assert not cron.rotate_log(log, max_bytes=100)
    with log.open("a") as shell_side:
        log.write_text("b" * 150)
        assert cron.rotate_log(log, max_bytes=100)
        shell_side.write("after\n")
    assert log.read_text() == "after\n"
    assert (tmp_path / "cron.log.1").read_text() == "b" * 150
    assert not cron.rotate_log(tmp_path / "missing.log")


def test_status_and_doctor_hints_do_not_offer_crontab_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crustacean.ops.status import cron_state, doctor

    monkeypatch.setattr(cron, "crontab_program", lambda: None)
    state = cron_state(ws)
    assert state.endswith("and start it (`cron`).") and "--crontab-file" not in state
    found = [f for f in doctor(ws.root).findings if f.name == "cron entry"]
    assert found and "--crontab-file" not in found[0].detail + found[0].fix
    with pytest.raises(cron.CronError, match="or pass --crontab-file PATH"):
        cron.read_crontab(None)  # cron show/install/remove have the option, so they offer it


def test_cron_commands_report_json(ws: Workspace, tab: Path, tmp_path: Path) -> None:
    made = json.loads(cli(ws, "install", "--crontab-file", str(tab), "--json").stdout)
    assert made["kind"] == "cron" and len(made["lines"]) == 1 and "tick --log" in made["lines"][0]
    assert made["log"] == str(ws.logs_dir / cron.LOG_NAME)
    shown = json.loads(cli(ws, "show", "--crontab-file", str(tab), "--json").stdout)
    assert shown["installed"] and shown["commands"][0].endswith("2>&1")
    gone = json.loads(cli(ws, "remove", "--crontab-file", str(tab), "--json").stdout)
    assert gone["removed"] is True and tab.read_text() == USER_LINES
    units = tmp_path / "units"
    made = json.loads(cli(ws, "install", "--systemd", "--unit-dir", str(units), "--json").stdout)
    assert made["kind"] == "systemd" and Path(made["timer"]).is_file()
    gone = json.loads(cli(ws, "remove", "--systemd", "--unit-dir", str(units), "--json").stdout)
    assert made["timer"] in gone["removed"]
    plan = json.loads(cli(ws, "install", "--openclaw", "--json").stdout)
    assert plan["kind"] == "openclaw" and plan["commands"][0].startswith("openclaw cron add")
