"""Many workspaces on an existing scheduler: the systemd template units (written into the test's
HOME, read back, enabled by hand the way `systemctl enable` links them, removed) and the
Kubernetes CronJob (checked against the batch/v1 fields it uses)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_cron import cli
from test_readme import _run as run_script

from crustacean.config import load_config
from crustacean.ops import fleet
from crustacean.ops.init import init_workspace
from crustacean.workspace import Workspace


def units(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".config" / "systemd" / "user"


def enable(folder: Path, name: str) -> None:
    """What `systemctl --user enable` makes for an instance: a link to the template."""
    wants = folder / "timers.target.wants"
    wants.mkdir(exist_ok=True)
    (wants / name).symlink_to(folder / f"{fleet.TEMPLATE}.timer")


def sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
            out[current] = []
        elif line:
            out[current].append(line)
    return out


def test_template_units_land_in_the_user_unit_dir(ws: Workspace, tmp_path: Path) -> None:
    out = cli(ws, "install", "--systemd", "--template", "--every", "10").stdout
    folder = units(tmp_path)
    service = sections((folder / "crustacean-tick@.service").read_text())
    timer = sections((folder / "crustacean-tick@.timer").read_text())
    python = Path(sys.executable).absolute()
    assert f"ExecStart={python} -m crustacean -w %I tick --log" in service["Service"]
    assert "WorkingDirectory=%I" in service["Service"] and "Type=oneshot" in service["Service"]
    assert "StandardOutput=append:%I/.crustacean/logs/cron.log" in service["Service"]
    assert f"Environment=CRUSTACEAN_CONFIG_DIR={tmp_path / 'userconfig'}" in service["Service"]
    assert timer["Timer"] == [
        "OnCalendar=*:0/10",
        "Persistent=true",
        "RandomizedDelaySec=300",
        "FixedRandomDelay=true",
    ]
    assert timer["Install"] == ["WantedBy=timers.target"]
    name = fleet.instance(ws)
    assert name == f"crustacean-tick@{fleet.escape_path(ws.root)}.timer"
    assert f"systemctl --user enable --now '{name}'" in out


def test_remove_takes_the_instance_then_the_template_with_the_last_one(
    ws: Workspace, tmp_path: Path
) -> None:
    other_root = tmp_path / "other ws"
    init_workspace(other_root, detect=False)
    other = Workspace(other_root, load_config(other_root))
    folder = units(tmp_path)
    for w in (ws, other):
        cli(w, "install", "--systemd", "--template")
        enable(folder, fleet.instance(w))
    out = cli(ws, "remove", "--systemd", "--template").stdout
    assert f"systemctl --user stop '{fleet.instance(ws)}'" in out
    assert (folder / "crustacean-tick@.timer").is_file()  # the other workspace still uses it
    cli(other, "remove", "--systemd", "--template")
    assert not any(folder.rglob("crustacean-*"))


@pytest.mark.parametrize(
    ("path", "escaped"),
    [  # systemd-escape(1) --path
        ("/", "-"),
        ("/tmp/waldi/foobar/", "tmp-waldi-foobar"),
        ("/srv/agents/ana-ws", "srv-agents-ana\\x2dws"),
        ("/home/me/my ws", "home-me-my\\x20ws"),
        ("/home/me/.openclaw/workspace", "home-me-.openclaw-workspace"),
        ("/.hidden", "\\x2ehidden"),
        ("/a//b", "a-b"),
        ("/é", "\\xc3\\xa9"),
    ],
)
def test_escape_path_is_systemd_escape(path: str, escaped: str) -> None:
    assert fleet.escape_path(path) == escaped


# --- Kubernetes -------------------------------------------------------------------------------

# The batch/v1 CronJob fields the manifest uses, with their API types (Kubernetes API reference:
# CronJobSpec, JobSpec, PodSpec, Container, EnvVar, SecretKeySelector, VolumeMount, Volume).
SCHEMA: dict[str, Any] = {
    "apiVersion": str,
    "kind": str,
    "metadata": {"name": str, "labels": {"app.kubernetes.io/name": str}},
    "spec": {
        "schedule": str,
        "concurrencyPolicy": ("Allow", "Forbid", "Replace"),
        "startingDeadlineSeconds": int,
        "successfulJobsHistoryLimit": int,
        "failedJobsHistoryLimit": int,
        "jobTemplate": {
            "spec": {
                "backoffLimit": int,
                "template": {
                    "spec": {
                        "restartPolicy": ("Never", "OnFailure"),  # a Job's pods may not Always
                        "containers": [
                            {
                                "name": str,
                                "image": str,
                                "command": [str],
                                "workingDir": str,
                                "env": [
                                    {
                                        "name": str,
                                        "valueFrom": {"secretKeyRef": {"name": str, "key": str}},
                                    }
                                ],
                                "volumeMounts": [{"name": str, "mountPath": str}],
                            }
                        ],
                        "volumes": [{"name": str, "persistentVolumeClaim": {"claimName": str}}],
                    }
                },
            }
        },
    },
}


def conforms(value: Any, shape: Any, where: str = "") -> list[str]:
    """Every place `value` strays from `shape`: unknown keys, wrong types, values off an enum."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [f"{where}: not a mapping"]
        wrong = [f"{where}.{k}: not a field we checked" for k in value if k not in shape]
        return wrong + [e for k in value if k in shape for e in conforms(value[k], shape[k], k)]
    if isinstance(shape, list):
        if not isinstance(value, list) or not value:
            return [f"{where}: not a non-empty list"]
        return [e for item in value for e in conforms(item, shape[0], where)]
    if isinstance(shape, tuple):
        return [] if value in shape else [f"{where}: {value!r} not one of {shape}"]
    ok = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
    return [] if ok else [f"{where}: {value!r} is not {shape.__name__}"]


def test_the_cronjob_yaml_uses_only_fields_of_the_schema(ws: Workspace) -> None:
    out = cli(ws, "install", "--kubernetes", "--image", "registry.example/crustacean:1.4").stdout
    manifest = yaml.safe_load(out)
    assert conforms(manifest, SCHEMA) == []
    spec = manifest["spec"]
    assert manifest["apiVersion"] == "batch/v1" and manifest["kind"] == "CronJob"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["schedule"] == "*/15 * * * *"
    assert 0 < spec["startingDeadlineSeconds"] < 15 * 60  # a start later than that is skipped
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["crustacean", "-w", "/workspaces/ws", "tick", "--log"]
    assert container["env"] == [
        {
            "name": "ANTHROPIC_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": fleet.SECRET, "key": "ANTHROPIC_API_KEY"}},
        }
    ]
    assert "value" not in json.dumps(container["env"]).replace("valueFrom", "")  # no key inline
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == fleet.CLAIM
    assert out.startswith("# crustacean tick for ws")


def test_the_cronjob_json_names_its_claim_and_interval(ws: Workspace) -> None:
    args = ("--kubernetes", "--image", "i", "--claim", "team-ws", "--every", "5", "--json")
    made = json.loads(cli(ws, "install", *args).stdout)
    spec = made["manifest"]["spec"]
    assert spec["schedule"] == "*/5 * * * *" and spec["startingDeadlineSeconds"] == 150
    volumes = spec["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["persistentVolumeClaim"]["claimName"] == "team-ws"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--kubernetes",), "--kubernetes needs --image IMAGE"),
        (("--image", "x"), "--image goes with --kubernetes"),
        (("--kubernetes", "--image", "x", "--per-stage"), "--per-stage goes with"),
        (("--systemd", "--template", "--kubernetes", "--image", "x"), "exclude each other"),
        (("--template",), "--template goes with --systemd"),
    ],
)
def test_wrong_combinations_are_usage_errors(
    ws: Workspace, tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    err = cli(ws, "install", *args, code=2).stderr
    assert err.startswith("Error: ") and words in err
    assert not units(tmp_path).exists()


# --- docs/fleet.md ----------------------------------------------------------------------------

FLEET_MD = Path(__file__).resolve().parents[1] / "docs" / "fleet.md"


def test_the_fleet_doc_commands_run_in_a_sandbox(tmp_path: Path) -> None:
    """Every `$ ` line of docs/fleet.md, in order, in bash, with HOME in tmp_path (so the user
    units land there) and no key: then the files it promises are there."""
    text = FLEET_MD.read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    commands = [line[2:] for block in blocks for line in block.splitlines() if line[:2] == "$ "]
    assert len(commands) >= 5
    outputs = []
    for command in commands:  # the autouse fixture put HOME and the config folder in tmp_path
        done = run_script(command, tmp_path)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs.append(done.stdout)
    installs = outputs[commands.index(next(c for c in commands if "--template;" in c))]
    assert installs.count("Enable this workspace's instance") == 2
    assert "enable --now 'crustacean-tick@" in installs
    assert not any(units(tmp_path).rglob("crustacean-*"))  # the remove loop took them all
    ana = yaml.safe_load((tmp_path / "ana-cronjob.yaml").read_text())
    assert ana["spec"]["concurrencyPolicy"] == "Forbid"
    ben = json.loads((tmp_path / "ben-cronjob.json").read_text())["manifest"]
    assert ben["spec"]["schedule"] == "*/10 * * * *"
