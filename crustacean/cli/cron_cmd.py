"""`crustacean cron install | show | remove`: schedule the pipeline (cron, systemd, OpenClaw)."""

from pathlib import Path
from typing import Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, print_json, say, state, warn
from crustacean.cli.output import verbatim
from crustacean.config import KEY_ENV
from crustacean.errors import UsageError
from crustacean.ops import cron
from crustacean.workspace import Workspace

cron_app = typer.Typer(
    cls=CrustaceanGroup,
    help="Schedule the pipeline: a crontab block (default), a systemd user timer, or OpenClaw.",
    no_args_is_help=True,
)

CrontabFile = Annotated[
    Path | None,
    typer.Option(
        "--crontab-file",
        help="Edit this crontab file instead of the user crontab (`crontab -l` / `crontab -`).",
        show_default=False,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
UnitDir = Annotated[
    Path | None,
    typer.Option(
        "--unit-dir",
        help="With --systemd: folder of the user units (default ~/.config/systemd/user).",
        show_default=False,
    ),
]


@cron_app.command("install")
def install_cmd(
    ctx: typer.Context,
    per_stage: Annotated[
        bool,
        typer.Option("--per-stage", help="One line per enabled stage, on its own schedule."),
    ] = False,
    every: Annotated[
        int | None,
        typer.Option(
            "--every",
            metavar="MINUTES",
            help="Run `tick` every this many minutes (1-59). Default 15.",
            show_default=False,
        ),
    ] = None,
    crontab_file: CrontabFile = None,
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Write a systemd user timer + service instead.")
    ] = False,
    unit_dir: UnitDir = None,
    openclaw: Annotated[
        bool,
        typer.Option("--openclaw", help="Print `openclaw cron add` commands; write nothing."),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Install (or replace) this workspace's schedule; other crontab lines stay untouched."""
    _check_flags(per_stage, every, crontab_file, systemd, unit_dir, openclaw)
    ws = state(ctx).open()
    if openclaw:
        _print_openclaw(ws, as_json)
    elif systemd:
        _install_systemd(ws, 15 if every is None else every, unit_dir, as_json)
    else:
        _install_cron(ws, per_stage, 15 if every is None else every, crontab_file, as_json)


def _check_flags(
    per_stage: bool,
    every: int | None,
    crontab_file: Path | None,
    systemd: bool,
    unit_dir: Path | None,
    openclaw: bool,
) -> None:
    """Refuse combinations that would silently ignore a flag."""
    if systemd and openclaw:
        raise UsageError("--systemd and --openclaw exclude each other; pick one.")
    if (systemd or openclaw) and crontab_file is not None:
        raise UsageError("--crontab-file is for cron only; drop it with --systemd or --openclaw.")
    if unit_dir is not None and not systemd:
        raise UsageError("--unit-dir goes with --systemd; add --systemd or drop --unit-dir.")
    if per_stage and systemd:
        raise UsageError("--systemd installs one `tick` timer; drop --per-stage.")
    if every is not None and (per_stage or openclaw):
        raise UsageError(
            "--every sets the `tick` interval; --per-stage and --openclaw use each stage's "
            "stages.<name>.schedule instead. Drop --every."
        )


def _install_cron(
    ws: Workspace, per_stage: bool, every: int, crontab_file: Path | None, as_json: bool
) -> None:
    result = cron.install(ws, per_stage=per_stage, every=every, crontab_file=crontab_file)
    start, _ = cron.markers(ws)
    if as_json:
        print_json(
            {
                "kind": "cron",
                "target": result.target,
                "lines": result.lines,
                "log": str(ws.logs_dir / cron.LOG_NAME),
                "env_file": str(result.env_file),
                "created_env_file": result.created_env,
            }
        )
        return
    say(f"Installed {len(result.lines)} cron line(s) into {result.target}, in the block")
    say(f"`{start}`:")
    for line in result.lines:
        verbatim(f"  {line}")
    say(f"Output goes to {ws.logs_dir / cron.LOG_NAME}.")
    _env_note(result.env_file, result.created_env)
    if per_stage and ws.settings.workspace.timezone:
        warn(
            f"Note: cron reads the schedules in the system time zone, not workspace.timezone "
            f"({ws.settings.workspace.timezone})."
        )


def _install_systemd(ws: Workspace, every: int, unit_dir: Path | None, as_json: bool) -> None:
    result = cron.install_systemd(ws, every=every, unit_dir=unit_dir)
    if as_json:
        print_json(
            {
                "kind": "systemd",
                "service": str(result.service),
                "timer": str(result.timer),
                "enable_command": result.enable_command,
                "env_file": str(result.env_file),
                "created_env_file": result.created_env,
            }
        )
        return
    say(f"Wrote {result.service}")
    say(f"Wrote {result.timer}")
    say("Enable the timer (Persistent=true catches up a run missed while asleep) with:")
    verbatim(f"  {result.enable_command}")
    _env_note(result.env_file, result.created_env)


def _print_openclaw(ws: Workspace, as_json: bool) -> None:
    if as_json:
        commands = cron.openclaw_commands(ws)
        print_json(
            {"kind": "openclaw", "commands": commands, "env_file": str(cron.env_file_for(ws))}
        )
        return
    say("# Add these jobs to OpenClaw's scheduler (nothing was written):")
    for line in cron.openclaw_commands(ws):
        verbatim(line)
    say(f"# The runs read {KEY_ENV} from {cron.env_file_for(ws)} unless it is in their env.")


def _env_note(env_file: Path, created: bool) -> None:
    if created:
        say(f"Created {env_file} (mode 0600): put {KEY_ENV}=... in it; scheduled runs read it.")
    else:
        say(f"Scheduled runs read {KEY_ENV} from {env_file} (left as it was).")


@cron_app.command("show")
def show_cmd(ctx: typer.Context, crontab_file: CrontabFile = None, as_json: AsJson = False) -> None:
    """Print this workspace's crontab block, or say that cron is not installed for it."""
    ws = state(ctx).open()
    block = cron.block_for(ws, cron.read_crontab(crontab_file))
    if as_json:
        lines = cron.block_commands(block) if block is not None else []
        print_json({"installed": block is not None, "block": block, "commands": lines})
        return
    if block is None:
        say(f"cron is not installed for {ws.root}")
        return
    verbatim(block.rstrip("\n"))


@cron_app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    crontab_file: CrontabFile = None,
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Remove the systemd user timer + service instead.")
    ] = False,
    unit_dir: UnitDir = None,
    as_json: AsJson = False,
) -> None:
    """Remove only this workspace's block (or units); everything else stays byte-identical."""
    if unit_dir is not None and not systemd:
        raise UsageError("--unit-dir goes with --systemd; add --systemd or drop --unit-dir.")
    ws = state(ctx).open()
    if systemd:
        gone = cron.remove_systemd(ws, unit_dir=unit_dir)
        if as_json:
            print_json({"kind": "systemd", "removed": [str(p) for p in gone]})
        else:
            _say_removed_units(ws, gone)
        return
    removed = cron.remove(ws, crontab_file=crontab_file)
    if as_json:
        print_json({"kind": "cron", "removed": removed, "target": cron.target_name(crontab_file)})
    else:
        _say_removed_block(ws, removed, crontab_file)


def _say_removed_block(ws: Workspace, removed: bool, crontab_file: Path | None) -> None:
    if removed:
        say(f"Removed the crustacean block for {ws.root} from {cron.target_name(crontab_file)}.")
    else:
        say(f"cron is not installed for {ws.root}; nothing to remove.")


def _say_removed_units(ws: Workspace, gone: list[Path]) -> None:
    for path in gone:
        say(f"Removed {path}")
    if not gone:
        say(f"No units for {ws.root}; nothing to remove.")
        return
    say("Stop a running timer with:")
    verbatim(f"  systemctl --user stop {cron.unit_name(ws)}.timer; systemctl --user daemon-reload")
