"""Approving and rejecting ask-first proposals (the queue itself is `proposals.py`).

Approving applies a proposal through `write_context` with the hashes it was proposed against, so
a file that changed meanwhile makes the approval stale instead of clobbering it.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from crustacean.errors import CrustaceanError, ProposalError, StaleWriteError
from crustacean.store.changes import Change, unified_diff
from crustacean.store.proposals import Approval, Proposal, get, replace, save
from crustacean.store.write import Store, WriteResult


def _pending(store: Store, pid: int) -> Proposal:
    prop = get(store.ws, pid)
    if prop.status != "pending":
        raise ProposalError(f"proposal {pid} is already {prop.status}; nothing to do.")
    return prop


def diff(store: Store, pid: int) -> str:
    """A unified diff of what approving would change, against the files as they are now."""
    prop = get(store.ws, pid)
    plan = store.plan(list(prop.changes), actor="user", max_files=len(prop.changes))
    return unified_diff((p, plan.before.get(p), plan.after[p]) for p in plan.touched)


@dataclass(frozen=True)
class Inspection:
    """One proposal, a diff and what the diff is: for a pending one what approving would apply
    now, for a rejected one what it would have changed (against the files now), for an
    approved one the version it became."""

    proposal: Proposal
    diff: str | None
    diff_of: str = ""

    def to_json(self) -> dict[str, object]:
        return self.proposal.to_json() | {
            "paths": self.proposal.paths,
            "diff": self.diff,
            "diff_of": self.diff_of,
        }


def examine(store: Store, pid: int) -> Inspection:
    """`review show`: the proposal and the diff that says most about it now."""
    prop = get(store.ws, pid)
    if prop.status == "pending":
        return Inspection(prop, diff(store, pid), "what approving would change now")
    if prop.status == "approved" and prop.note and store.versioned:
        try:
            return Inspection(prop, store.git.show(prop.note), f"version {prop.note[:12]}")
        except CrustaceanError:
            return Inspection(prop, None, f"version {prop.note[:12]} is no longer in history")
    try:
        return Inspection(prop, diff(store, pid), "what it would have changed, against now")
    except CrustaceanError:
        return Inspection(prop, None, "its changes no longer apply to the files as they are now")


def local_user(where: str) -> str:
    """Who approves from this machine: the login name, and where (`on the command line`, `in
    the review page`): a version then says who let a proposal through."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment or the password database
        name = "a local user"
    return f"{name} {where}"


def approve(store: Store, pid: int, approver: str = "") -> WriteResult:
    """Apply a proposal as it was proposed; stale files refuse it and keep it pending. The
    version's message says who approved it (`Approved by …` below its subject)."""
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
            message=f"{prop.message} (proposal {pid}, approved)"
            + (f"\n\nApproved by {' '.join(approver.split())}." if approver.strip() else ""),
            run_id=prop.run_id,
            approval=Approval(pid),
            max_files=len(pinned),
        )
    except StaleWriteError:
        raise StaleWriteError(
            f"proposal {pid} is stale: a file it changes was edited after it was proposed. "
            f"It stays pending; reject it with `crustacean review reject {pid}`."
        ) from None
    save(store.ws, replace(prop, status="approved", note=result.version or ""))
    return result


def reject(store: Store, pid: int, reason: str = "") -> Proposal:
    prop = replace(_pending(store, pid), status="rejected", note=reason)
    save(store.ws, prop)
    return prop
