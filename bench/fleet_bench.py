"""Benchmark a fleet on one machine: N tiny workspaces, each ticked as its scheduler ticks it.

Run: `.venv/bin/python bench/fleet_bench.py [--sizes 10,100,1000] [--sample 10]`.

For each N, N workspaces are made (one `init`, detect off, with an ok run of every stage just now
so nothing is due, then copied N times: what `init` writes is the same for each). SAMPLE of them,
spread over the fleet, get a no-op `crustacean -w WS tick --log` as a fresh process, exactly the
argv every scheduler runs (cron, launchd, the systemd template, the CronJob), interleaved with
SAMPLE runs of `python -c 'import typer'` (the baseline: the least any typer CLI pays). Reported:
a no-op tick's CPU (user + system, of the child, from getrusage) per workspace, per workspace
per day at 96 ticks (every 15 minutes), and for the whole fleet per day; and the fleet's state
files (every file under each workspace's `.crustacean/`, counted after the ticks). Nothing is
shared between workspaces, so CPU per workspace should stay flat as N grows and state files grow
N times one workspace's.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import count, data_size, isolate, row
from crustacean.config import STAGES, load_config
from crustacean.ops.init import init_workspace
from crustacean.runs import RunRecorder
from crustacean.workspace import STATE_DIR, Workspace

TICKS_PER_DAY = 96  # `tick` every 15 minutes, the default of every scheduler crustacean installs


def template(folder: Path) -> Path:
    """One tiny workspace where every stage has just run ok, so a tick finds nothing due."""
    root = folder / "template"
    init_workspace(root, detect=False)
    ws = Workspace(root, load_config(root))
    now = datetime.now(UTC)
    for stage in STAGES:
        with RunRecorder(ws, stage, clock=lambda: now) as rec:
            rec.finish("ok", summary="bench: just ran, so nothing is due")
    return root


def fleet(folder: Path, source: Path, n: int) -> list[Path]:
    """N copies of the template, each its own folder (and its own git repository)."""
    roots = [folder / f"ws-{i:04d}" for i in range(n)]
    for root in roots:
        shutil.copytree(source, root, symlinks=True)
    return roots


def cpu_of(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) the child used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def state_files(roots: list[Path]) -> int:
    return sum(1 for root in roots for p in (root / STATE_DIR).rglob("*") if p.is_file())


def measure(
    n: int, sample: int, source: Path, folder: Path, env: dict[str, str]
) -> dict[str, float]:
    roots = fleet(folder / f"n{n}", source, n)
    picked = roots[:: max(1, n // sample)][:sample]
    first, ticks, base = [], [], []
    for root in picked:
        argv = [sys.executable, "-m", "crustacean", "-w", str(root), "tick", "--log"]
        first.append(cpu_of(argv, env))  # a workspace's first tick
        ticks.append(cpu_of(argv, env))  # the tick a scheduler runs all day
        base.append(cpu_of([sys.executable, "-c", "import typer"], env))
    files, ticked = state_files(roots), state_files(picked) / len(picked)
    shutil.rmtree(folder / f"n{n}")
    return {
        "first": statistics.median(first),
        "tick": statistics.median(ticks),
        "typer": statistics.median(base),
        "files": files,
        "per_ws_files": files / n,
        "ticked": ticked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="fleet sizes, comma-separated")
    parser.add_argument("--sample", type=int, default=10, help="workspaces ticked per size")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        isolate(tmp)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        source = template(tmp)
        data_size(
            f"{', '.join(f'{n:,}' for n in sizes)} tiny workspaces, {args.sample} ticked each"
        )
        print(
            f"# fleet bench: {platform.python_implementation()} {platform.python_version()}, "
            f"{count(args.sample, 'workspace')} ticked per size (medians); "
            "baseline python -c 'import typer'"
        )
        print(
            "| N | 1st tick CPU ms | no-op tick CPU ms | `import typer` ms | ratio | "
            "CPU s per workspace per day | fleet CPU min per day | state files | per workspace |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            got = measure(n, args.sample, source, tmp, env)
            ratio = got["tick"] / got["typer"]
            per_day = got["tick"] * TICKS_PER_DAY
            ms = {k: got[k] * 1000 for k in ("first", "tick", "typer")}
            print(
                f"| {n:,} | {ms['first']:.0f} | {ms['tick']:.0f} | {ms['typer']:.0f} | "
                f"{ratio:.2f}x | {per_day:.1f} | {per_day * n / 60:.1f} | "
                f"{got['files']:,.0f} | {got['per_ws_files']:.1f} |"
            )
            row(
                f"no-op tick CPU per workspace, N={n:,}",
                got["tick"] * 1000,
                baseline=got["typer"] * 1000,
                baseline_name="python -c 'import typer'",
            )
            row(
                f"fleet state files, N={n:,}",
                got["files"],
                unit="files",
                note=f"{got['per_ws_files']:.1f} per workspace",
            )
        print(
            f"# state files: counted in every workspace after the ticks (a ticked one has "
            f"{got['ticked']:.1f}); CPU per day: {TICKS_PER_DAY} ticks"
        )


if __name__ == "__main__":
    main()
