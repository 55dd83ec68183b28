"""The stage skeleton: one run of any stage, with the mechanics every stage shares.

A stage is a deterministic pre-pass, a model step (none when there is nothing to do), a
deterministic post-pass and a run record, under the workspace run lock. `Stage.run` is the one
runner, so no stage repeats the mechanics: the clock, `--plan` (pre-pass and measured request
only: nothing sent, written or recorded), the run recorder (lock, repair, record), the model
session (the store, or the dry run's overlay), the finish and the dry run's diff. A stage fills
in `prepare` (what it reads or refuses before the lock), `plan`, and `execute` (pre-pass →
model → post-pass), and returns a `StageResult`: the one result type that `tick`, `--json` and
the stage commands' one renderer read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from crustacean.clock import Clock, wall_clock
from crustacean.llm.runner import ModelSession, RunPlan
from crustacean.runs import RunRecord, RunRecorder
from crustacean.store import Store
from crustacean.store.changes import Change, sha256_hex
from crustacean.workspace import Workspace


@dataclass(kw_only=True)
class StageResult:
    """What one stage run gives back: its run record (None for a plan), the dry run's diff and
    the plan, plus each stage's own figures (its subclass). The text lines are plain strings, so
    the one renderer (cli/stages_cmd.py) only prints them and tests read them as data."""

    record: RunRecord | None = None
    diff: str | None = None
    plan: RunPlan | None = None

    @property
    def failed(self) -> bool:
        return self.record is not None and self.record.status == "failed"

    def to_json(self) -> dict[str, Any]:
        """The keys every stage shares (a run, or "plan" when none ran), then the stage's own."""
        return {
            "status": self.record.status if self.record else "plan",
            "run": self.record.to_json(tool_calls=False) if self.record else None,
            "plan": self.plan.to_json() if self.plan else None,
            "diff": self.diff,
            **self.fields(),
        }

    def fields(self) -> dict[str, Any]:
        """The stage's own JSON keys."""
        return {}

    def warnings(self) -> list[str]:
        """Lines for stderr, before anything else."""
        return []

    def head(self) -> list[str]:
        """What the stage found and did, before its plan."""
        return []

    def tail(self) -> list[str]:
        """What follows the plan, before the diff and the run's line."""
        return []

    def plan_line(self) -> str:
        """What `tick --plan` says this stage would do."""
        raise NotImplementedError


R = TypeVar("R", bound=StageResult)
B = TypeVar("B")


@dataclass(frozen=True)
class Run:
    """One run's handles, shared by a stage's pre-pass, model step and post-pass."""

    ws: Workspace
    rec: RunRecorder
    session: ModelSession
    now: datetime
    dry_run: bool

    @property
    def id(self) -> str:
        return self.rec.record.id


@dataclass(frozen=True)
class Finish(Generic[R]):
    """How a run ended: its result, and the status, summary and error its record gets.
    `diff=False` leaves the result without a diff (a run that found nothing to do)."""

    result: R
    status: str
    summary: str | None
    error: str | None = None
    diff: bool = True


class Stage(ABC, Generic[B, R]):
    """One stage of the pipeline; an instance holds the options of one call."""

    name: ClassVar[str]

    def run(
        self,
        ws: Workspace,
        *,
        dry_run: bool = False,
        plan: bool = False,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
    ) -> R:
        """Run the stage once: `plan` sends, writes and records nothing; `dry_run` writes
        nothing (the model still runs, on an overlay) and returns the diff."""
        clock = clock or wall_clock
        now = clock()
        before = self.prepare(ws, now, dry_run=dry_run)
        if plan:
            return self.plan(ws, now, before)
        with RunRecorder(
            ws, self.name, dry_run=dry_run, clock=clock, repair=Store(ws).repair
        ) as rec:
            session = ModelSession(ws, rec, self.name, dry_run=dry_run, env=env)
            end = self.execute(Run(ws, rec, session, now, dry_run), before)
            result = end.result
            result.record = rec.finish(end.status, summary=end.summary, error=end.error)
            if end.diff:
                result.diff = session.diff()
        return result

    @abstractmethod
    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> B:
        """What the stage reads or refuses before the lock (bad options raise here)."""

    @abstractmethod
    def plan(self, ws: Workspace, now: datetime, before: B) -> R:
        """The pre-pass and the measured request, with nothing sent, written or recorded."""

    @abstractmethod
    def execute(self, run: Run, before: B) -> Finish[R]:
        """Pre-pass → model → post-pass, under the lock; the skeleton records the finish."""


def report_change(store: Store, path: str, text: bytes) -> Change:
    """A stage's report (the digest, the audit) as a new file, or appended after the one an
    earlier run of the same day or month wrote."""
    current = store.read_bytes(path)
    if current is None:
        return Change(path, "create", content=text)
    return Change(path, "append", content=b"\n" + text, expected_sha256=sha256_hex(current))
