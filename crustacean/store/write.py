"""The one write path: `Store.write_context`, the face over the store's modules.

One call is one version: the face opens the call (the store's lock, any killed call undone:
`apply.py`), plans it (every check and each file's new bytes, nothing written: `plan.py`),
applies it (journal, then the files: `apply.py`) and commits it (`Applied.commit`), once each.
The read side is `files.py`; a dry run's store is `overlay.py`.
"""

from __future__ import annotations

import contextlib
import secrets as pyrandom
from dataclasses import dataclass, field
from datetime import UTC, datetime

from crustacean.clock import Clock, wall_clock
from crustacean.store import proposals
from crustacean.store.apply import Applier
from crustacean.store.files import Files
from crustacean.store.plan import Plan, Planner, check_message
from crustacean.store.versions import Git
from crustacean.workspace import Workspace


@dataclass(frozen=True)
class WriteResult:
    """What a call did: a version, or a proposal id when it was ask-first."""

    files: tuple[str, ...]
    version: str | None = None
    proposal: int | None = None
    call_id: str = ""
    snapshot: str | None = None
    sha256: dict[str, str | None] = field(default_factory=dict)  # new hash; None: moved away

    def to_json(self) -> dict[str, object]:
        """The tool result models and MCP clients get: JSON, never prose."""
        if self.proposal is not None:
            return {
                "proposal": self.proposal,
                "files": list(self.files),
                "applied": False,
                "note": f"queued for review as proposal {self.proposal}; a human approves it "
                "with `crustacean review`. Nothing was written yet: do not resend it.",
            }
        return {"version": self.version, "files": list(self.files), "sha256": self.sha256}


def new_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + pyrandom.token_hex(3)


class Store(Files):
    """Reads and writes one workspace."""

    def __init__(self, ws: Workspace, clock: Clock | None = None) -> None:
        super().__init__(ws.root)
        self.clock = clock or wall_clock
        self.git = Git(self.root)
        self._planner = Planner(ws, self.clock, self.read_bytes)
        self._applier = Applier(ws, self.git, self.read_bytes)
        self._loss_tally = self._planner.loss_tally
        self.plan = self._planner.plan  # validate a call, compute each file's new bytes: no write
        self.ws = ws

    @property
    def ws(self) -> Workspace:
        return self._ws

    @ws.setter
    def ws(self, ws: Workspace) -> None:
        """A workspace re-read (the MCP server's settings, changed meanwhile) holds from the
        next call on, for the plan's checks and the apply's limits alike."""
        self._ws = self._planner.ws = self._applier.ws = ws

    @property
    def versioned(self) -> bool:
        return self._applier.versioned

    def write_context(
        self,
        changes: object,
        *,
        actor: str,
        message: str,
        run_id: str | None = None,
        approval: proposals.Approval | None = None,
        max_files: int | None = None,
    ) -> WriteResult:
        """Apply one call as one version, or queue it as a proposal when it is ask-first."""
        check_message(message)
        call_id = new_id()
        with contextlib.ExitStack() as after, self._applier.opened() as busy:
            plan = self.plan(changes, actor=actor, max_files=max_files, run_id=run_id)
            if plan.ask and not proposals.approves(self.ws, approval, actor, plan.changes):
                pid = proposals.add(
                    self.ws,
                    plan.changes,
                    plan.before,
                    actor=actor,
                    message=message,
                    run_id=run_id,
                    reason=plan.ask[0],
                    now=self.clock(),
                )
                return WriteResult(files=tuple(_named(plan)), proposal=pid, call_id=call_id)
            if busy:
                self.git.refuse_if_busy()
            touched = plan.touched
            if not touched:
                return WriteResult(files=(), call_id=call_id)
            applied = self._applier.apply(plan, touched, call_id, actor)
            version = applied.commit(actor, message, run_id)
            after.callback(applied.upkeep)  # waited on once the store's lock is released
            if plan.loss:  # a run's losses so far, kept once the version holds them
                self._loss_tally.add(run_id, plan.loss)
            result = WriteResult(
                files=tuple(touched),
                version=version,
                call_id=call_id,
                snapshot=applied.snapshot,
                sha256=applied.sha256,
            )
        return result

    def repair(self) -> tuple[bool, list[str]]:
        """Before a run reads anything: finish or undo a call a kill interrupted, and remove the
        temp files and stale git locks a kill left (see `Applier.repair`)."""
        return self._applier.repair()

    def recover(self) -> bool:
        """Finish a call a crash interrupted (see `Applier.recover`); True when something was
        undone."""
        return self._applier.recover()


def _named(plan: Plan) -> list[str]:
    names = [c.path for c in plan.changes] + [c.to for c in plan.changes if c.to]
    return list(dict.fromkeys(names))
