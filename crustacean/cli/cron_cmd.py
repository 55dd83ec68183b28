"""`crustacean cron install | show | remove`: schedule the pipeline (cron, launchd, systemd,
OpenClaw, Kubernetes)."""

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, print_json, say, state, warn
from crustacean.cli.output import verbatim
from crustacean.config import KEY_ENV, env_file_path
from crustacean.ops import cron, fleet, launchd, openclaw_jobs
from crustacean.workspace import Workspace

cron_app = typer.Typer(
    cls=CrustaceanGroup,
    help="Schedule the pipeline: crontab, launchd (macOS), systemd, OpenClaw or Kubernetes.",
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


Crontab = Annotated[
    bool,
    typer.Option("--crontab", help="A crontab block (the default except on macOS)."),
]
Launchd = Annotated[
    bool,
    typer.Option(
        "--launchd", help="A LaunchAgent in ~/Library/LaunchAgents (the default on macOS)."
    ),
]
Template = Annotated[
    bool,
    typer.Option(
        "--template",
        help="With --systemd: the crustacean-tick@.service/.timer template, one instance per "
        "workspace (for a fleet; see docs/fleet.md).",
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
    crontab: Crontab = False,
    launchd: Launchd = False,
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Write a systemd user timer + service instead.")
    ] = False,
    template: Template = False,
    unit_dir: UnitDir = None,
    openclaw: Annotated[
        bool,
        typer.Option(
            "--openclaw",
            help="Print `openclaw cron add` lines for OpenClaw's scheduler (quiet command "
            "jobs, or agent turns where OpenClaw has none); write nothing.",
        ),
    ] = False,
    kubernetes: Annotated[
        bool,
        typer.Option(
            "--kubernetes", help="Print a Kubernetes CronJob manifest (YAML); write nothing."
        ),
    ] = False,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            metavar="IMAGE",
            help="With --kubernetes: the image with crustacean in it.",
            show_default=False,
        ),
    ] = None,
    claim: Annotated[
        str | None,
        typer.Option(
            "--claim",
            metavar="NAME",
            help=f"With --kubernetes: the volume claim holding the workspaces (default "
            f"{fleet.CLAIM}).",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Install (or replace) this workspace's schedule; other crontab lines stay untouched."""
    opts = cron.Options(per_stage, every, crontab_file, unit_dir, template, image, claim)
    flags = (crontab, launchd, systemd, openclaw, kubernetes)
    kind = cron.pick_kind([k for k, on in zip(cron.KINDS, flags, strict=True) if on], opts)
    _INSTALL[kind](state(ctx).open(), opts, as_json)


def _install_cron(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    every = 15 if opts.every is None else opts.every
    result = cron.install(ws, per_stage=opts.per_stage, every=every, crontab_file=opts.crontab_file)
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
    if opts.per_stage and ws.settings.workspace.timezone:
        warn(
            f"Note: cron reads the schedules in the system time zone, not workspace.timezone "
            f"({ws.settings.workspace.timezone})."
        )


def _install_systemd(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    every = 15 if opts.every is None else opts.every
    if opts.template:
        t = fleet.install_template(ws, every=every, unit_dir=opts.unit_dir)
        fields = {"kind": "systemd-template", "service": str(t.service), "timer": str(t.timer)}
        fields |= {"instance": t.instance, "enable_command": t.enable_command}
        lead = "Enable this workspace's instance (each workspace is one instance) with:"
        _say_written(as_json, fields, [t.service, t.timer], lead, t.enable_command, t.env)
        return
    r = cron.install_systemd(ws, every=every, unit_dir=opts.unit_dir)
    fields = {"kind": "systemd", "service": str(r.service), "timer": str(r.timer)}
    fields |= {"enable_command": r.enable_command}
    lead = "Enable the timer (Persistent=true catches up a run missed while asleep) with:"
    _say_written(as_json, fields, [r.service, r.timer], lead, r.enable_command, r.env)


def _install_launchd(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    r = launchd.install_launchd(ws, every=15 if opts.every is None else opts.every)
    fields = {"kind": "launchd", "plist": str(r.plist), "label": r.label}
    fields |= {"bootstrap_command": r.bootstrap_command}
    lead = "Load it (a tick missed while the Mac slept runs when it wakes) with:"
    _say_written(as_json, fields, [r.plist], lead, r.bootstrap_command, r.env)


def _say_written(
    as_json: bool,
    fields: Mapping[str, object],
    wrote: list[Path],
    lead: str,
    command: str,
    env: tuple[Path, bool],
) -> None:
    """What an install wrote and the line that turns it on, then the env file runs read."""
    if as_json:
        print_json(dict(fields, env_file=str(env[0]), created_env_file=env[1]))
        return
    for path in wrote:
        say(f"Wrote {path}")
    say(lead)
    verbatim(f"  {command}")
    _env_note(*env)


def _print_openclaw(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    installed = openclaw_jobs.probe(os.environ)
    add = openclaw_jobs.add_lines(ws, installed)
    replaces = installed.takes("--declaration-key")  # adding again updates, not duplicates
    if as_json:
        print_json(
            {
                "kind": "openclaw",
                "form": installed.form,
                "openclaw_version": installed.version or None,
                "commands": add,
                "replaces_on_rerun": replaces,
                "list_command": openclaw_jobs.LIST_LINE,
                "env_file": str(env_file_path(ws.settings)),
            }
        )
        return
    say(f"# {openclaw_jobs.describe(installed)}.")
    say("# Add these jobs to OpenClaw's scheduler (nothing was written):")
    for line in add:
        verbatim(line)
    if replaces:
        say("# Adding them again updates the same jobs (their --declaration-key).")
    else:
        say("# This OpenClaw has no --declaration-key, so adding them again duplicates them:")
        say("# remove the old ones first (`crustacean cron remove --openclaw` prints how).")
    say(f"# See them with `{openclaw_jobs.LIST_LINE}`.")
    say(f"# The runs read {KEY_ENV} from {env_file_path(ws.settings)} unless it is in their env.")


def _print_kubernetes(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    every = 15 if opts.every is None else opts.every
    image, claim = opts.image or "", opts.claim or fleet.CLAIM
    if as_json:
        manifest = fleet.cronjob(ws, image=image, every=every, claim=claim)
        print_json({"kind": "kubernetes", "manifest": manifest})
        return
    verbatim(fleet.cronjob_yaml(ws, image=image, every=every, claim=claim).rstrip("\n"))


_INSTALL: dict[str, Callable[[Workspace, cron.Options, bool], None]] = {
    "cron": _install_cron,
    "launchd": _install_launchd,
    "systemd": _install_systemd,
    "openclaw": _print_openclaw,
    "kubernetes": _print_kubernetes,
}


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
    crontab: Crontab = False,
    launchd: Launchd = False,
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Remove the systemd user timer + service instead.")
    ] = False,
    template: Template = False,
    unit_dir: UnitDir = None,
    openclaw: Annotated[
        bool,
        typer.Option("--openclaw", help="Print the `openclaw cron` lines that remove its jobs."),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Remove only this workspace's block (or LaunchAgent, units); all else stays as it was."""
    opts = cron.Options(crontab_file=crontab_file, unit_dir=unit_dir, template=template)
    flags = (crontab, launchd, systemd, openclaw)
    kind = cron.pick_kind([k for k, on in zip(cron.KINDS, flags, strict=False) if on], opts)
    _REMOVE[kind](state(ctx).open(), opts, as_json)


def _remove_cron(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    removed = cron.remove(ws, crontab_file=opts.crontab_file)
    target = cron.target_name(opts.crontab_file)
    if as_json:
        print_json({"kind": "cron", "removed": removed, "target": target})
    elif removed:
        say(f"Removed the crustacean block for {ws.root} from {target}.")
    else:
        say(f"cron is not installed for {ws.root}; nothing to remove.")


def _remove_systemd(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    if opts.template:
        gone = fleet.remove_template(ws, unit_dir=opts.unit_dir)
        stop = f"systemctl --user stop '{fleet.instance(ws)}'; systemctl --user daemon-reload"
    else:
        gone = cron.remove_systemd(ws, unit_dir=opts.unit_dir)
        stop = f"systemctl --user stop {cron.unit_name(ws)}.timer; systemctl --user daemon-reload"
    kind = "systemd-template" if opts.template else "systemd"
    _say_removed(ws, kind, gone, "Stop a running timer with:", stop, as_json)


def _remove_launchd(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    gone = launchd.remove_launchd(ws)
    unload = launchd.bootout_command(ws)
    _say_removed(ws, "launchd", gone, "Unload it with:", unload, as_json)


def _say_removed(
    ws: Workspace, kind: str, gone: list[Path], lead: str, command: str, as_json: bool
) -> None:
    if as_json:
        print_json({"kind": kind, "removed": [str(p) for p in gone], "stop_command": command})
        return
    for path in gone:
        say(f"Removed {path}")
    if not gone:
        say(f"No {kind} files for {ws.root}; nothing to remove.")
        return
    say(lead)
    verbatim(f"  {command}")


def _print_openclaw_removal(ws: Workspace, opts: cron.Options, as_json: bool) -> None:
    lines = openclaw_jobs.remove_lines(ws)
    if as_json:
        print_json({"kind": "openclaw", "list_command": openclaw_jobs.LIST_LINE, "commands": lines})
        return
    say("# OpenClaw removes a job by its id; list them, then remove each crustacean one:")
    verbatim(openclaw_jobs.LIST_LINE)
    for line in lines:
        verbatim(line)


_REMOVE: dict[str, Callable[[Workspace, cron.Options, bool], None]] = {
    "cron": _remove_cron,
    "launchd": _remove_launchd,
    "systemd": _remove_systemd,
    "openclaw": _print_openclaw_removal,
}
