"""The ask-first review queue.

An ask-first call is stored whole under `.crustacean/proposals/`, with the sha256 of every file
it would change as it was when proposed. Approving applies it through `write_context` with those
hashes, so a file that changed meanwhile makes the approval stale instead of clobbering it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crustacean.errors import ProposalError, StaleWriteError
from crustacean.store.changes import Change, sha256_hex, unified_diff

if TYPE_CHECKING:
    from crustacean.store.write import Plan, Store, WriteResult


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


def _dir(store: Store) -> Path:
    return store.ws.state_dir / "proposals"


def _file(store: Store, pid: int) -> Path:
    return _dir(store) / f"{pid:06d}.json"


def _save(store: Store, prop: Proposal) -> None:
    from crustacean.store.write import atomic_write

    _dir(store).mkdir(parents=True, exist_ok=True)
    atomic_write(_file(store, prop.id), json.dumps(prop.to_json(), indent=1).encode())


def add(
    store: Store, plan: Plan, *, actor: str, message: str, run_id: str | None, reason: str
) -> int:
    """Queue a planned call; called by `write_context` under its lock."""
    folder = _dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    ids = [int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()]
    pid = max(ids, default=0) + 1
    reads = {p: (None if b is None else sha256_hex(b)) for p, b in plan.before.items()}
    created = datetime.now(UTC).isoformat(timespec="seconds")
    _save(store, Proposal(pid, created, actor, message, reason, run_id, tuple(plan.changes), reads))
    return pid


def list_proposals(store: Store, status: str | None = "pending") -> list[Proposal]:
    folder = _dir(store)
    if not folder.is_dir():
        return []
    props = [Proposal.from_json(json.loads(p.read_bytes())) for p in sorted(folder.glob("*.json"))]
    return [p for p in props if status is None or p.status == status]


def get(store: Store, pid: int) -> Proposal:
    path = _file(store, pid)
    if not path.is_file():
        raise ProposalError(f"no proposal {pid}; `crustacean review` lists the pending ones.")
    return Proposal.from_json(json.loads(path.read_bytes()))


def _pending(store: Store, pid: int) -> Proposal:
    prop = get(store, pid)
    if prop.status != "pending":
        raise ProposalError(f"proposal {pid} is already {prop.status}; nothing to do.")
    return prop


def diff(store: Store, pid: int) -> str:
    """A unified diff of what approving would change, against the files as they are now."""
    prop = get(store, pid)
    plan = store.plan(list(prop.changes), actor="user", max_files=len(prop.changes))
    return unified_diff((p, plan.before.get(p), plan.after[p]) for p in plan.touched)


def approve(store: Store, pid: int) -> WriteResult:
    """Apply a proposal as it was proposed; stale files refuse it and keep it pending."""
    prop = _pending(store, pid)
    appeared = [p for p, sha in prop.reads.items() if sha is None and store.read_bytes(p)]
    if appeared:
        raise StaleWriteError(
            f"proposal {pid} is stale: {appeared[0]} did not exist when it was proposed and does "
            f"now. It stays pending; reject it with `crustacean review reject {pid}`."
        )
    pinned = []
    for ch in prop.changes:
        sha = prop.reads.get(ch.path)
        if ch.mode != "create" and ch.expected_sha256 is None and sha is not None:
            ch = Change(**{**ch.__dict__, "expected_sha256": sha})
        pinned.append(ch)
    try:
        result = store.write_context(
            pinned,
            actor=prop.actor,
            message=f"{prop.message} (proposal {pid}, approved)",
            run_id=prop.run_id,
            approved=True,
            max_files=len(pinned),
        )
    except StaleWriteError:
        raise StaleWriteError(
            f"proposal {pid} is stale: a file it changes was edited after it was proposed. "
            f"It stays pending; reject it with `crustacean review reject {pid}`."
        ) from None
    _save(store, _replace(prop, status="approved", note=result.version or ""))
    return result


def reject(store: Store, pid: int, reason: str = "") -> Proposal:
    prop = _replace(_pending(store, pid), status="rejected", note=reason)
    _save(store, prop)
    return prop


def _replace(prop: Proposal, **kw: Any) -> Proposal:
    return Proposal(**{**prop.__dict__, **kw})
