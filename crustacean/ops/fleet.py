"""Many workspaces on a scheduler that already exists: systemd template units and a Kubernetes
CronJob. Nothing is shared between workspaces but the machine (or the cluster): each tick takes
its own workspace's lock, reads its own state folder and calls the model with its own key.

- `crustacean-tick@.service` / `.timer`: one template pair, one instance per workspace (the
  instance name is the workspace path, escaped as `systemd-escape --path` does). The timer is
  `Persistent=true` (a run missed while the host was down happens at boot) with
  `RandomizedDelaySec` plus `FixedRandomDelay=true`, so a thousand instances start spread over
  half the interval, each at its own steady offset, instead of in the same second.
- The CronJob runs `tick` in a pod: `concurrencyPolicy: Forbid` keeps a second pod from starting
  while one runs, and the workspace lock is the second guard (a tick finding it held exits 75).
  The API key comes from a Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crustacean.config import KEY_ENV
from crustacean.ops.cron import (
    TICK_ARGS,
    default_unit_dir,
    enabled_stages,
    every_schedule,
    prepare_runs,
    root_of,
    run_argv,
    service_unit,
    unit_name,
)
from crustacean.workspace import STATE_DIR, Workspace

TEMPLATE = "crustacean-tick@"
SECRET = "crustacean-anthropic"  # the Secret the CronJob reads the API key from (key: KEY_ENV)
CLAIM = "crustacean-workspaces"  # the volume claim that holds the workspaces, one folder each
MOUNT = "/workspaces"


def escape_path(path: str | Path) -> str:
    """`systemd-escape --path`: slashes become `-`, and every byte but ASCII letters, digits,
    `:`, `_` and a non-leading `.` becomes `\\xNN`."""
    text = "/".join(p for p in str(path).split("/") if p)
    if not text:
        return "-"
    out = []
    for i, byte in enumerate(text.encode()):
        ch = chr(byte)
        keep = ch.isascii() and (ch.isalnum() or ch in ":_" or (ch == "." and i > 0))
        out.append("-" if ch == "/" else ch if keep else f"\\x{byte:02x}")
    return "".join(out)


def instance(ws: Workspace | Path) -> str:
    """`crustacean-tick@<escaped path>.timer`: this workspace's instance of the template."""
    return f"{TEMPLATE}{escape_path(root_of(ws))}.timer"


def template_units(ws: Workspace, *, every: int = 15) -> dict[str, str]:
    """`{filename: text}` of the template service and timer (`%I` is the workspace path)."""
    every_schedule(every)
    enabled_stages(ws)
    argv = [*run_argv(ws, TICK_ARGS)[:4], "%I", *TICK_ARGS]
    service = service_unit("%I", "%I", argv, f"%I/{STATE_DIR}/logs/cron.log", keep="%I")
    timer = (
        f"[Unit]\nDescription=crustacean tick every {every} min for %I\n\n"
        f"[Timer]\nOnCalendar=*:0/{every}\nPersistent=true\n"
        f"RandomizedDelaySec={every * 30}\nFixedRandomDelay=true\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    return {f"{TEMPLATE}.service": service, f"{TEMPLATE}.timer": timer}


@dataclass(frozen=True)
class TemplateResult:
    service: Path
    timer: Path
    instance: str
    enable_command: str
    env: tuple[Path, bool]  # as cron.SystemdResult's


def install_template(
    ws: Workspace, *, every: int = 15, unit_dir: Path | None = None
) -> TemplateResult:
    """Write (or replace) the template pair; the caller enables this workspace's instance."""
    folder = (unit_dir or default_unit_dir()).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    for filename, text in template_units(ws, every=every).items():
        (folder / filename).write_text(text, "utf-8")
    name = instance(ws)
    enable = f"systemctl --user daemon-reload && systemctl --user enable --now '{name}'"
    service, timer = folder / f"{TEMPLATE}.service", folder / f"{TEMPLATE}.timer"
    return TemplateResult(service, timer, name, enable, prepare_runs(ws))


def remove_template(ws: Workspace | Path, *, unit_dir: Path | None = None) -> list[Path]:
    """Delete this workspace's `enable` link; the template pair too once no instance is left."""
    folder = unit_dir or default_unit_dir()
    wants = folder / "timers.target.wants"
    gone = []
    link = wants / instance(ws)
    if link.is_symlink() or link.exists():
        link.unlink()
        gone.append(link)
    if not any(wants.glob(f"{TEMPLATE}*.timer")):
        for path in (folder / f"{TEMPLATE}.timer", folder / f"{TEMPLATE}.service"):
            if path.exists():
                path.unlink()
                gone.append(path)
    return gone


def cronjob(ws: Workspace, *, image: str, every: int = 15, claim: str = CLAIM) -> dict[str, Any]:
    """A batch/v1 CronJob running this workspace's `tick`; the workspace is the folder of its
    name on the claim (`/workspaces/<name>` in the pod)."""
    schedule = every_schedule(every)
    enabled_stages(ws)
    root = f"{MOUNT}/{root_of(ws).name}"
    secret = {"secretKeyRef": {"name": SECRET, "key": KEY_ENV}}
    container = {
        "name": "tick",
        "image": image,
        "command": ["crustacean", "-w", root, *TICK_ARGS],
        "workingDir": root,
        "env": [{"name": KEY_ENV, "valueFrom": secret}],
        "volumeMounts": [{"name": "workspaces", "mountPath": MOUNT}],
    }
    pod = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "workspaces", "persistentVolumeClaim": {"claimName": claim}}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": unit_name(ws), "labels": {"app.kubernetes.io/name": "crustacean"}},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": every * 30,  # later than that, the next tick catches up
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}},
        },
    }


def cronjob_yaml(ws: Workspace, *, image: str, every: int = 15, claim: str = CLAIM) -> str:
    """The manifest as YAML, headed by how to apply it and create its Secret."""
    import yaml

    root = root_of(ws)
    head = (
        f"# crustacean tick for {root.name} (copy {root} to {claim}:/{root.name}).\n"
        f"# kubectl create secret generic {SECRET} --from-literal={KEY_ENV}=sk-ant-...\n"
        "# kubectl apply -f this-file.yaml\n"
    )
    return head + yaml.safe_dump(
        cronjob(ws, image=image, every=every, claim=claim), sort_keys=False
    )
