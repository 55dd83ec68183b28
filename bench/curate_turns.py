"""Curate's turns on the sample with a model played by hand (issue 34, item 7: at most 4).

`run` makes the sample workspace (`init --sample`'s files, rendered at a fixed `now`), then runs
collect and curate through the real SDK against the fake Messages API in relay mode
(tests/fakeapi.py): each request is written to `<label>/<stage>/NNN.request.json` and the one
playing the model writes `NNN.response.json` beside it. The clock is fixed for the whole run, so
tests/test_curate_turn_runs.py replays the recorded answers (no model) and gets the same
workspace, the same turns and the same routing.

    python -m bench.curate_turns run --label after     # record a run (answer every request)
    python -m bench.curate_turns                       # turns and routing of every recorded run
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakeapi import FakeAnthropic, relay_reply

from bench.common import isolate
from crustacean.config import load_config
from crustacean.ops.init import init_sample
from crustacean.stages.collect import collect
from crustacean.stages.curate import curate
from crustacean.workspace import Workspace

RUNS = REPO / "bench" / "curate_turn_runs"
OVERRIDES = [
    "workspace.timezone=UTC",
    "llm.timeout_seconds=86400",  # the one playing the model may take minutes
    "llm.max_retries=0",
]


def workspace(root: Path, url: str) -> tuple[Workspace, dict[str, str]]:
    """The sample workspace at `root`, its model calls sent to `url`."""
    env = {"ANTHROPIC_API_KEY": "relay-key", "ANTHROPIC_BASE_URL": url}
    return Workspace(root, load_config(root, env=env, overrides=OVERRIDES)), env


@contextmanager
def relayed(folder: Path) -> Iterator[FakeAnthropic]:
    """A fake API answering from `folder`, printing each request file as it appears."""
    folder.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def announce() -> None:
        seen: set[str] = set()
        while not stop.wait(0.5):
            for path in sorted(folder.glob("*.request.json")):
                if path.name not in seen:
                    seen.add(path.name)
                    print(f"waiting for {path.with_name(path.name.replace('request', 'response'))}")
                    sys.stdout.flush()

    with FakeAnthropic(relay_dir=folder) as fake:
        threading.Thread(target=announce, daemon=True).start()
        try:
            yield fake
        finally:
            stop.set()


def recorded_answers(folder: Path) -> list[dict[str, Any]]:
    """A stage's recorded answers, in order, each made a whole Messages API response."""
    return [
        relay_reply(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(folder.glob("*.response.json"))
    ]


def replay(target: Path, root: Path, fake: FakeAnthropic) -> dict[str, Any]:
    """Rerun a recorded run with no model: the sample rendered at the run's `now`, each stage
    answered by its recorded answers through `fake` (a scripted FakeAnthropic)."""
    now = datetime.fromisoformat(json.loads((target / "run.json").read_text())["now"])
    init_sample(root, now)
    result: dict[str, Any] = {"now": now.isoformat()}
    for stage in ("collect", "curate"):
        fake.enqueue(*recorded_answers(target / stage))
        ws, env = workspace(root, fake.url)
        got = _run_stage(stage, ws, env, now)
        result[stage] = {"status": got.record.status, "turns": got.record.turns}
        result[stage] |= got.fields() if stage == "curate" else {}
    return result


def _run_stage(stage: str, ws: Workspace, env: dict[str, str], now: datetime) -> Any:
    if stage == "collect":
        return collect(ws, env=env, clock=lambda: now)
    return curate(ws, env=env, clock=lambda: now)


def cmd_run(label: str, now: datetime) -> dict[str, Any]:
    target = RUNS / label
    if target.exists() and any(target.iterdir()):
        raise SystemExit(f"{target} is recorded already; choose another --label")
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "sample"
        init_sample(root, now)
        result: dict[str, Any] = {"now": now.isoformat()}
        for stage in ("collect", "curate"):
            with relayed(target / stage) as fake:
                ws, env = workspace(root, fake.url)
                got = _run_stage(stage, ws, env, now)
                result[stage] = {"status": got.record.status, "turns": got.record.turns}
                result[stage] |= got.fields() if stage == "curate" else {}
        (target / "run.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def report(runs: Path = RUNS) -> str:
    lines = ["| run | curate turns | entries | routed | skipped | unreported |", "|---" * 6 + "|"]
    for path in sorted(runs.glob("*/run.json")):
        cur = json.loads(path.read_text())["curate"]
        lines.append(
            f"| {path.parent.name} | {cur['turns']} | {cur['entries']} | "
            f"{sum(cur['routed'].values())} | {sum(cur['skipped'].values())} | "
            f"{cur['unreported']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step")
    run = sub.add_parser("run", help="collect + curate on the sample through the relay")
    run.add_argument("--label", required=True)
    run.add_argument("--now", help="ISO time the run's clock stands at (default: now, UTC)")
    args = parser.parse_args(argv)
    if args.step == "run":
        now = (
            datetime.fromisoformat(args.now)
            if args.now
            else datetime.now(UTC).replace(second=0, microsecond=0)
        )
        print(json.dumps(cmd_run(args.label, now), indent=1))
    else:
        print(report())


if __name__ == "__main__":
    main()
