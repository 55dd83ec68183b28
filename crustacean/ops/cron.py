"""Scheduling entries: a marked block in a crontab, a systemd user timer, or OpenClaw commands.

The block is plain text between two marker lines naming the workspace, so installing replaces
only that block and removing deletes only it; every other byte of the crontab stays as it was.
Cron's environment is minimal (`PATH=/usr/bin:/bin`, none of the shell's variables), so each
line uses absolute paths, sets its own `PATH` and config dir inline (an assignment *line* would
leak into the user's lines below the block), and sends its output to a log file instead of mail.
The API key comes from the env file, which crustacean reads itself.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from crustacean.config import CONFIG_DIR_ENV, KEY_ENV, STAGES, env_file_path, user_config_dir
from crustacean.errors import ConfigError, CrustaceanError, UsageError
from crustacean.workspace import STATE_DIR, Workspace

CRON_PATH = "/usr/local/bin:/usr/bin:/bin"
LOG_NAME = "cron.log"
LOG_MAX_BYTES = 1_000_000  # cron.log beyond this moves to cron.log.1 (one old file is kept)
TICK_ARGS = ["tick", "--log"]  # what the schedule runs: timestamped lines, only when work was done
ENV_TEMPLATE = (
    "# crustacean reads this file on scheduled runs (cron has none of your shell's variables).\n"
    f"# Put your key on the next line and remove the '#':\n# {KEY_ENV}=sk-ant-...\n"
)
CRON_HINT = "install cron (Debian: apt-get install cron) and start it (`cron`)"


class CronError(CrustaceanError):
    """The crontab cannot be read or written, or no crontab program exists."""


@dataclass(frozen=True)
class InstallResult:
    """What `install` wrote, where, and the env file cron runs read."""

    lines: list[str]
    target: str
    env_file: Path
    created_env: bool


@dataclass(frozen=True)
class SystemdResult:
    """The user units `install_systemd` wrote and the command that enables them."""

    service: Path
    timer: Path
    enable_command: str
    env: tuple[Path, bool]  # the env file runs read, and whether this install created it


# --- markers and blocks -----------------------------------------------------------------------


def markers(ws: Workspace | Path) -> tuple[str, str]:
    """The first and last line of this workspace's block."""
    root = root_of(ws)
    return f"# >>> crustacean {root} >>>", f"# <<< crustacean {root} <<<"


def root_of(ws: Workspace | Path) -> Path:
    """The workspace's absolute path, as every scheduler names it (no line break allowed)."""
    path = ws.root if isinstance(ws, Workspace) else Path(ws)
    path = path.expanduser().absolute()
    if "\n" in str(path) or "\r" in str(path):
        raise UsageError(
            f"{path!r}: a workspace path with a line break cannot go into a crontab; "
            "move the workspace to a path without one."
        )
    return path


def _span(ws: Workspace | Path, lines: list[str]) -> tuple[int, int] | None:
    """Index of the start marker and one past the end marker, or None when absent."""
    start, end = markers(ws)
    bare = [line.rstrip("\r\n") for line in lines]
    if start not in bare:
        if end in bare:
            raise CronError(f"the crontab has `{end}` without its start line; fix it by hand.")
        return None
    first = bare.index(start)
    try:
        last = bare.index(end, first + 1)
    except ValueError:
        raise CronError(
            f"the crontab has `{start}` without its end line `{end}`; fix it by hand."
        ) from None
    return first, last + 1


def block_for(ws: Workspace | Path, text: str) -> str | None:
    """This workspace's block in `text`, markers included, or None."""
    lines = text.splitlines(keepends=True)
    span = _span(ws, lines)
    return None if span is None else "".join(lines[span[0] : span[1]])


def is_installed(ws: Workspace | Path, text: str) -> bool:
    """Whether `text` (a crontab) holds this workspace's block."""
    return block_for(ws, text) is not None


def block_commands(block: str) -> list[str]:
    """The command part of each schedule line of a block (for checks such as doctor's)."""
    out = []
    for line in block.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 1 if line.startswith("@") else 5)
        out.append(fields[-1])
    return out


def replace_block(ws: Workspace | Path, text: str, body: list[str] | None) -> str:
    """`text` with this workspace's block set to `body` lines (None removes it)."""
    lines = text.splitlines(keepends=True)
    span = _span(ws, lines)
    new = [] if body is None else [f"{line}\n" for line in (markers(ws)[0], *body, markers(ws)[1])]
    if span is not None:
        return "".join(lines[: span[0]] + new + lines[span[1] :])
    if not new:
        return text
    sep = "\n" if text and not text.endswith("\n") else ""  # cron ignores an unterminated line
    return text + sep + "".join(new)


# --- schedules and lines ----------------------------------------------------------------------


def validate_schedule(expr: str, where: str) -> str:
    """A 5-field expression, as config requires; croniter would read a 6th field as seconds."""
    from croniter import croniter

    expr = " ".join(expr.split())
    if len(expr.split()) != 5 or "%" in expr or not croniter.is_valid(expr):
        raise ConfigError(
            f"{where} = {expr!r} is not a valid 5-field cron expression "
            "(minute hour day month weekday, no `%`); fix it in crustacean.toml."
        )
    return expr


def every_schedule(every: int) -> str:
    """`*/N * * * *` for 1 ≤ N ≤ 59 (`* * * * *` for 1)."""
    if not 1 <= every <= 59:
        raise UsageError(f"--every {every}: give a number of minutes from 1 to 59.")
    return "* * * * *" if every == 1 else f"*/{every} * * * *"


def _q(value: str | Path) -> str:
    """Shell-quoted, with cron's `%` (a line break in a command) escaped."""
    return shlex.quote(str(value)).replace("%", "\\%")


def log_path(ws: Workspace | Path) -> Path:
    """Where every scheduler sends a run's output: the state folder's cron.log (tick rotates it)."""
    return root_of(ws) / STATE_DIR / "logs" / LOG_NAME


def config_dir() -> Path:
    """The config folder scheduled runs are told (the env file lives there by default)."""
    return user_config_dir().expanduser().absolute()


def run_argv(ws: Workspace | Path, args: list[str], python: str = sys.executable) -> list[str]:
    """`<python> -m crustacean -w <root> <args>`: absolute, so no scheduler's PATH matters."""
    return [str(Path(python).absolute()), "-m", "crustacean", "-w", str(root_of(ws)), *args]


def run_env() -> dict[str, str]:
    """The environment every scheduled run gets, whichever scheduler starts it."""
    return {"PATH": CRON_PATH, CONFIG_DIR_ENV: str(config_dir())}


def command(ws: Workspace | Path, args: list[str], python: str) -> str:
    """The shell command of one line: absolute paths, own PATH, output appended to the log."""
    root = root_of(ws)
    run = " ".join(_q(a) for a in run_argv(ws, args, python))
    env = " ".join(f"{k}={_q(v)}" for k, v in run_env().items())
    return f"cd {_q(root)} && {env} {run} >> {_q(log_path(ws))} 2>&1"


def enabled_stages(ws: Workspace) -> list[tuple[str, str]]:
    """(stage, validated schedule) of each enabled stage, in pipeline order."""
    out = []
    for name in STAGES:
        stage = getattr(ws.settings.stages, name)
        if stage.enabled:
            out.append((name, validate_schedule(stage.schedule, f"stages.{name}.schedule")))
    return out


def cron_lines(
    ws: Workspace, *, per_stage: bool = False, every: int = 15, python: str = sys.executable
) -> list[str]:
    """The schedule lines of the block (no markers); validates every schedule first."""
    python = str(Path(python).absolute())
    stages = enabled_stages(ws)  # validated even for the tick line: tick reads them too
    if not per_stage:
        return [f"{every_schedule(every)} {command(ws, TICK_ARGS, python)}"]
    if not stages:
        raise UsageError(
            "no stage is enabled, so there is nothing to schedule; set "
            "stages.<name>.enabled = true in crustacean.toml."
        )
    return [f"{expr} {command(ws, [name], python)}" for name, expr in stages]


# --- the log ----------------------------------------------------------------------------------


def rotate_log(path: Path, max_bytes: int = LOG_MAX_BYTES) -> bool:
    """Keep the cron log bounded: past `max_bytes`, its text moves to `<name>.1` (replacing the
    older one) and the log starts empty. True if it rotated.

    The log is copied and then truncated in place rather than renamed, because the shell that
    runs the scheduled line already holds it open for appending (`>> cron.log 2>&1`); a rename
    would send this run's output to the old file."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    old = path.with_name(path.name + ".1")
    tmp = path.with_name(path.name + ".1.tmp")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, old)
    with path.open("r+b") as fh:
        fh.truncate(0)
    return True


# --- env file ---------------------------------------------------------------------------------


def ensure_env_file(path: Path) -> bool:
    """Create the env file (mode 0600, a commented template) if missing; True if created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(ENV_TEMPLATE)
    os.chmod(path, 0o600)  # the umask may have narrowed it further, never widened it
    return True


def prepare_runs(ws: Workspace) -> tuple[Path, bool]:
    """What every scheduled run needs besides its entry: the env file it reads (`llm.env_file`,
    else the default; created if missing, True then) and the log's folder."""
    env_file = env_file_path(ws.settings)
    created = ensure_env_file(env_file)
    ws.logs_dir.mkdir(parents=True, exist_ok=True)
    return env_file, created


# --- reading and writing crontabs -------------------------------------------------------------


def crontab_program() -> str | None:
    """The `crontab` program on PATH, or None."""
    return shutil.which("crontab")


def read_crontab(crontab_file: Path | None, *, offer_file: bool = True) -> str:
    """A crontab file's text ("" if missing), or the user's crontab (`crontab -l`).

    `offer_file=False` is for commands without a --crontab-file option (status, doctor): their
    errors must not suggest it."""
    instead = ", or pass --crontab-file PATH to use a file instead" if offer_file else ""
    if crontab_file is not None:
        try:
            return Path(crontab_file).read_bytes().decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            return ""
        except OSError as e:
            raise CronError(
                f"{crontab_file}: cannot read it ({e.strerror}); check its path and permissions."
            ) from None
    program = crontab_program()
    if program is None:
        raise CronError(f"no `crontab` program; {CRON_HINT}{instead}.")
    done = subprocess.run([program, "-l"], capture_output=True, check=False)
    if done.returncode != 0:
        if b"no crontab" in done.stderr.lower():
            return ""
        raise CronError(f"`crontab -l` failed: {_stderr(done)}. Fix what it says{instead}.")
    return done.stdout.decode("utf-8", "surrogateescape")


def write_crontab(crontab_file: Path | None, text: str) -> None:
    """Write a crontab file, or the user's crontab (`crontab -`)."""
    data = text.encode("utf-8", "surrogateescape")
    if crontab_file is not None:
        try:
            Path(crontab_file).write_bytes(data)
        except OSError as e:
            raise CronError(
                f"{crontab_file}: cannot write it ({e.strerror}); check that its folder exists "
                "and is writable."
            ) from None
        return
    program = crontab_program()
    if program is None:
        raise CronError(f"no `crontab` program; {CRON_HINT}.")
    done = subprocess.run([program, "-"], input=data, capture_output=True, check=False)
    if done.returncode != 0:
        raise CronError(
            f"`crontab -` refused the new crontab: {_stderr(done)}. Your crontab is unchanged; "
            "check it with `crontab -l`, or pass --crontab-file PATH."
        )


def _stderr(done: subprocess.CompletedProcess[bytes]) -> str:
    """The program's complaint on one line, so the error stays short."""
    lines = done.stderr.decode("utf-8", "replace").split("\n")
    return " / ".join(x.strip() for x in lines if x.strip()) or f"exit {done.returncode}"


def target_name(crontab_file: Path | None) -> str:
    return str(crontab_file) if crontab_file is not None else "the user crontab (crontab -l)"


# --- install and remove -----------------------------------------------------------------------


def install(
    ws: Workspace,
    *,
    per_stage: bool = False,
    every: int = 15,
    crontab_file: Path | None = None,
    python: str = sys.executable,
) -> InstallResult:
    """Write (or replace) this workspace's block; create the env file if missing."""
    lines = cron_lines(ws, per_stage=per_stage, every=every, python=python)
    if crontab_file is None and crontab_program() is None:
        env_file = env_file_path(ws.settings)
        ensure_env_file(env_file)
        raise CronError(_paste_message(ws, lines, env_file))
    text = read_crontab(crontab_file)
    new = replace_block(ws, text, lines)
    env_file, created = prepare_runs(ws)
    if new != text:
        write_crontab(crontab_file, new)
    return InstallResult(lines, target_name(crontab_file), env_file, created)


def _paste_message(ws: Workspace, lines: list[str], env_file: Path) -> str:
    start, end = markers(ws)
    body = "\n".join(f"  {line}" for line in (start, *lines, end))
    return (
        f"no `crontab` program, so nothing was installed. To use cron, {CRON_HINT}, "
        f"then rerun this command, or paste these lines into `crontab -e`:\n{body}\n"
        f"Scheduled runs read {KEY_ENV} from {env_file}. "
        "(Or use --systemd for a systemd user timer, or --crontab-file PATH.)"
    )


def remove(ws: Workspace | Path, *, crontab_file: Path | None = None) -> bool:
    """Remove this workspace's block; True if there was one."""
    text = read_crontab(crontab_file)
    if not is_installed(ws, text):
        return False
    write_crontab(crontab_file, replace_block(ws, text, None))
    return True


# --- systemd ----------------------------------------------------------------------------------


def unit_name(ws: Workspace | Path) -> str:
    """`crustacean-<hash>`: one unit pair per workspace path."""
    return "crustacean-" + hashlib.sha256(str(root_of(ws)).encode()).hexdigest()[:10]


def default_unit_dir() -> Path:
    """`$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_quote(value: str | Path, keep: str = "") -> str:
    """A systemd word: double-quoted when needed, `%` escaped (it starts a specifier) but in
    the specifier `keep` put there on purpose (fleet's `%I`)."""
    text = str(value).replace("%", "%%")
    text = text.replace(f"%{keep}", keep) if keep else text
    if any(c in text for c in " \t\"'\\;$"):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def service_unit(what: str, cwd: str, argv: list[str], log: str, keep: str = "") -> str:
    """The oneshot user service that runs `argv` in `cwd` with every run's environment, its
    output appended to `log` (`what`, `cwd` and `log` as systemd reads them already)."""
    return (
        f"[Unit]\nDescription=crustacean tick for {what}\n\n[Service]\nType=oneshot\n"
        f"WorkingDirectory={cwd}\n"
        + "".join(f"Environment={unit_quote(f'{k}={v}', keep)}\n" for k, v in run_env().items())
        + f"ExecStart={' '.join(unit_quote(a, keep) for a in argv)}\n"
        f"StandardOutput=append:{log}\nStandardError=append:{log}\n"
    )


def systemd_units(ws: Workspace, *, every: int = 15) -> dict[str, str]:
    """`{filename: text}` of the service (runs tick once) and its timer."""
    every_schedule(every)  # same range check as cron
    enabled_stages(ws)
    root, name = root_of(ws), unit_name(ws)
    log = str(log_path(ws)).replace("%", "%%")
    argv = run_argv(ws, TICK_ARGS)
    service = service_unit(str(root).replace("%", "%%"), unit_quote(root), argv, log)
    timer = (
        f"[Unit]\nDescription=crustacean tick every {every} min for "
        f"{str(root).replace('%', '%%')}\n\n"
        f"[Timer]\nOnCalendar=*:0/{every}\nPersistent=true\nUnit={name}.service\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    return {f"{name}.service": service, f"{name}.timer": timer}


def install_systemd(
    ws: Workspace, *, every: int = 15, unit_dir: Path | None = None
) -> SystemdResult:
    """Write the user service and timer (replacing older ones); the caller enables them."""
    units = systemd_units(ws, every=every)
    folder = (unit_dir or default_unit_dir()).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    for filename, text in units.items():
        (folder / filename).write_text(text, "utf-8")
    name = unit_name(ws)
    return SystemdResult(
        folder / f"{name}.service",
        folder / f"{name}.timer",
        f"systemctl --user daemon-reload && systemctl --user enable --now {name}.timer",
        prepare_runs(ws),
    )


def remove_systemd(ws: Workspace | Path, *, unit_dir: Path | None = None) -> list[Path]:
    """Delete this workspace's unit files and `enable` link; return the ones that existed."""
    folder = unit_dir or default_unit_dir()
    name = unit_name(ws)
    paths = [folder / f"{name}.timer", folder / f"{name}.service"]
    paths.append(folder / "timers.target.wants" / f"{name}.timer")
    gone = []
    for path in paths:
        if path.is_symlink() or path.exists():
            path.unlink()
            gone.append(path)
    return gone


# --- which scheduler -------------------------------------------------------------------------

KINDS = ("cron", "launchd", "systemd", "openclaw", "kubernetes")


@dataclass(frozen=True)
class Options:
    """The `cron install` options that only some schedulers take, to refuse a silent ignore."""

    per_stage: bool = False
    every: int | None = None
    crontab_file: Path | None = None
    unit_dir: Path | None = None
    template: bool = False
    image: str | None = None
    claim: str | None = None


_ONLY = {  # option -> (the schedulers that take it, how the user names it)
    "per_stage": (("cron",), "--per-stage"),
    "crontab_file": (("cron",), "--crontab-file"),
    "unit_dir": (("systemd",), "--unit-dir"),
    "template": (("systemd",), "--template"),
    "image": (("kubernetes",), "--image"),
    "claim": (("kubernetes",), "--claim"),
}


def check_options(kind: str, opts: Options) -> None:
    """UsageError for an option the chosen scheduler would ignore."""
    for field, (kinds, flag) in _ONLY.items():
        if getattr(opts, field) not in (None, False) and kind not in kinds:
            goes = " or ".join(flag_of(k) for k in kinds)
            raise UsageError(f"{flag} goes with {goes}, not {flag_of(kind)}; drop {flag}.")
    if opts.every is not None and (opts.per_stage or kind == "openclaw"):
        raise UsageError(
            "--every sets the `tick` interval; --per-stage and --openclaw use each stage's "
            "stages.<name>.schedule instead. Drop --every."
        )
    if kind == "kubernetes" and not opts.image:
        raise UsageError(
            "--kubernetes needs --image IMAGE: an image with crustacean installed "
            "(docs/fleet.md shows one)."
        )


def pick_kind(chosen: list[str], opts: Options, platform: str = sys.platform) -> str:
    """The one scheduler the flags name, else cron for cron-only options, else the platform's;
    then the options are checked against it."""
    if len(chosen) > 1:
        flags = " and ".join(flag_of(k) for k in chosen)
        raise UsageError(f"{flags} exclude each other; pick one.")
    cron_only = opts.crontab_file is not None or opts.per_stage
    # A bare install / remove uses a LaunchAgent on macOS, else cron (macOS cron skips the runs a
    # sleeping Mac missed and needs Full Disk Access for some folders).
    default = "launchd" if platform == "darwin" else "cron"
    kind = chosen[0] if chosen else "cron" if cron_only else default
    check_options(kind, opts)
    return kind


def flag_of(kind: str) -> str:
    """The flag that picks a scheduler (cron's is `--crontab`)."""
    return "--crontab" if kind == "cron" else f"--{kind}"
