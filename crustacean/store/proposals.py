"""The ask-first review queue: proposals stored, listed, read (approving is `review.py`).

An ask-first call is stored whole under `.crustacean/proposals/`, with the sha256 of every file
it would change as it was when proposed, so approving can tell a file that changed meanwhile.
The queue needs only the workspace, so the write path can queue without a cycle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from crustacean.errors import ProposalError
from crustacean.store.atomic import atomic_write
from crustacean.store.changes import Change, sha256_hex
from crustacean.workspace import Workspace


@dataclass(frozen=True)
class Proposal:
    id: int
    created: str
    actor: str
    message: str
    reason: str
    run_id: str | None
    changes: tuple[Change, ...]
    reads: dict[str, str | None]  # path -> sha256 when proposed (None: did not exist)
    status: str = "pending"
    note: str = ""

    @property
    def paths(self) -> list[str]:
        return list(dict.fromkeys(c.path for c in self.changes))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": self.created,
            "actor": self.actor,
            "message": self.message,
            "reason": self.reason,
            "run_id": self.run_id,
            "status": self.status,
            "note": self.note,
            "changes": [c.to_json() for c in self.changes],
            "reads": self.reads,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Proposal:
        return cls(
            id=d["id"],
            created=d["created"],
            actor=d["actor"],
            message=d["message"],
            reason=d.get("reason", ""),
            run_id=d.get("run_id"),
            status=d["status"],
            note=d.get("note", ""),
            changes=tuple(Change.from_json(c) for c in d["changes"]),
            reads=d["reads"],
        )


def _dir(ws: Workspace) -> Path:
    return ws.state_dir / "proposals"


def _file(ws: Workspace, pid: int) -> Path:
    return _dir(ws) / f"{pid:06d}.json"


def save(ws: Workspace, prop: Proposal) -> None:
    _dir(ws).mkdir(parents=True, exist_ok=True)
    atomic_write(_file(ws, prop.id), json.dumps(prop.to_json(), indent=1).encode())


def add(
    ws: Workspace,
    changes: Sequence[Change],
    before: Mapping[str, bytes | None],
    *,
    actor: str,
    message: str,
    run_id: str | None,
    reason: str,
    now: datetime,
) -> int:
    """Queue a planned call (its changes and the files as they were); called by `write_context`
    under its lock."""
    folder = _dir(ws)
    folder.mkdir(parents=True, exist_ok=True)
    ids = [int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()]
    pid = max(ids, default=0) + 1
    reads = {p: (None if b is None else sha256_hex(b)) for p, b in before.items()}
    created = now.isoformat(timespec="seconds")
    save(ws, Proposal(pid, created, actor, message, reason, run_id, tuple(changes), reads))
    return pid


def list_proposals(ws: Workspace, status: str | None = "pending") -> list[Proposal]:
    folder = _dir(ws)
    if not folder.is_dir():
        return []
    props = [Proposal.from_json(json.loads(p.read_bytes())) for p in sorted(folder.glob("*.json"))]
    return [p for p in props if status is None or p.status == status]


def get(ws: Workspace, pid: int) -> Proposal:
    path = _file(ws, pid)
    if not path.is_file():
        raise ProposalError(f"no proposal {pid}; `crustacean review` lists the pending ones.")
    return Proposal.from_json(json.loads(path.read_bytes()))


@dataclass(frozen=True)
class Approval:
    """A human's yes to one pending proposal, made by `review.approve` (the CLI's and the local
    page's approve). A write honours it only for exactly that proposal's changes by its actor:
    no caller can make its own call approved by saying so."""

    proposal: int


def approves(
    ws: Workspace, approval: Approval | None, actor: str, changes: Sequence[Change]
) -> bool:
    """Whether `approval` covers this call: its proposal is pending, by `actor`, with these
    changes (the expected hashes approving pins on aside). A mismatch raises: approving must
    never queue a new proposal nor apply another change."""
    if approval is None:
        return False
    prop = get(ws, approval.proposal)
    if prop.status == "pending" and prop.actor == actor and _bare(changes) == _bare(prop.changes):
        return True
    raise ProposalError(
        f"proposal {approval.proposal} is not this change (or no longer pending); "
        "`crustacean review` lists the pending ones."
    )


def _bare(changes: Sequence[Change]) -> list[Change]:
    return [Change(**{**c.__dict__, "expected_sha256": None}) for c in changes]


def replace(prop: Proposal, **kw: Any) -> Proposal:
    return Proposal(**{**prop.__dict__, **kw})
