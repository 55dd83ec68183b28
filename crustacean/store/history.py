"""History and rollback. Rollback never rewrites history: it writes the old bytes back as a new
version through `write_context`, so a rollback can itself be rolled back."""

from __future__ import annotations

from dataclasses import dataclass

from crustacean.errors import VersionError
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.paths import jail
from crustacean.store.versions import Version
from crustacean.store.write import Store, WriteResult
from crustacean.workspace import TRASH_DIR

NOT_VERSIONED = (
    "versioning is off: this workspace is not a git repository (or git is missing). "
    "Install git and run `crustacean init` to turn it on."
)


def history(store: Store, path: str | None = None, limit: int = 20) -> list[Version]:
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    rel = jail(store.root, path) if path else None
    return store.git.log(rel, limit)


@dataclass(frozen=True)
class Listing:
    """Versions newest first; `any_version` tells an empty list for one file from a workspace
    with no versions at all."""

    versions: list[Version]
    any_version: bool


def listing(store: Store, path: str | None = None, limit: int = 20) -> Listing:
    """`crustacean history`: the versions (of `path`), and whether the workspace has any."""
    versions = history(store, path, limit)
    return Listing(versions, bool(versions) or bool(path and history(store, None, 1)))


def show(store: Store, version: str) -> str:
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    return store.git.show(version)


@dataclass(frozen=True)
class Shown:
    """One version: its full id and `git show`'s text (who, why, the diff)."""

    version: str
    text: str


def show_version(store: Store, version: str) -> Shown:
    text = show(store, version)
    return Shown(store.git.resolve(version), text)


def rollback_changes(store: Store, version: str, paths: list[str]) -> tuple[str, list[Change]]:
    """The changes that bring `paths` (default: all that differ) back to `version`."""
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    target = store.git.resolve(version)
    head = store.git.head()
    if paths:
        rels = [jail(store.root, p) for p in paths]
        missing = [p for p, old in store.git.files_at(target, rels).items() if old is None]
        if missing:
            raise VersionError(
                f"{missing[0]} did not exist at version {target[:12]}, so there is nothing to "
                "restore; `crustacean history PATH` shows the versions that have it."
            )
    else:
        rels = [
            p
            for p in store.git.changed_between(target, head or target)
            if not p.startswith(TRASH_DIR + "/")
        ]
    return target, _restoring(store, target, rels)


def _restoring(store: Store, rev: str, rels: list[str]) -> list[Change]:
    """The changes that put each of `rels` back as it was at `rev` (a file missing then goes
    to the trash), pinned to the bytes there now; a file that already matches is left out."""
    changes = []
    for rel, old in store.git.files_at(rev, rels).items():
        now = store.read_bytes(rel)
        if old == now:
            continue
        if old is None:
            changes.append(Change(rel, "delete", expected_sha256=sha256_hex(now or b"")))
        elif now is None:
            changes.append(Change(rel, "create", content=old))
        else:
            changes.append(Change(rel, "overwrite", content=old, expected_sha256=sha256_hex(now)))
    return changes


@dataclass(frozen=True)
class UndoPlan:
    """What undoing one version writes: its files (or one of them) back as they were just
    before it, at its parent; `later` names those a later version changed too, whose later
    changes the undo takes back as well."""

    version: str
    parent: str
    changes: list[Change]
    later: list[str]


def undo_changes(store: Store, version: str, path: str | None = None) -> UndoPlan:
    """The plan of `crustacean undo VERSION [PATH]`; refused for the first version (nothing
    was before it) and for a PATH the version did not change."""
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    target = store.git.resolve(version)
    parent = parent_of(store, target)
    if parent is None:
        raise VersionError(
            f"version {target[:12]} is the workspace's first version; there is nothing before "
            "it to go back to. `crustacean rollback` restores files to a version instead."
        )
    files = [
        p for p in store.git.changed_between(parent, target) if not p.startswith(TRASH_DIR + "/")
    ]
    if path is not None:
        rel = jail(store.root, path)
        if rel not in files:
            raise VersionError(
                f"version {target[:12]} did not change {rel}; `crustacean show {target[:12]}` "
                "lists the files it changed."
            )
        files = [rel]
    head = store.git.head() or target
    since = set(store.git.changed_between(target, head)) if head != target else set()
    return UndoPlan(target, parent, _restoring(store, parent, files), sorted(since & set(files)))


def parent_of(store: Store, version: str) -> str | None:
    """The version just before `version`; None for the first."""
    try:
        return store.git.resolve(f"{store.git.resolve(version)}~1")
    except VersionError:
        return None


def previous_version(store: Store, version: str, path: str, reach: int = 200) -> str | None:
    """The last version before `version` that changed `path`, among the `reach` newest
    versions of that file (None: it had none, or it is further back)."""
    target = store.git.resolve(version)
    ids = [v.id for v in store.git.log(jail(store.root, path), reach)]
    return ids[ids.index(target) + 1] if target in ids[:-1] else None


def undo(store: Store, version: str, path: str | None = None) -> tuple[UndoPlan, WriteResult]:
    """Undo one version (or one file of it) as a new version, through `write_context` like a
    rollback: the same lock, stale-file and policy refusals, and it can be undone in turn."""
    plan = undo_changes(store, version, path)
    if not plan.changes:
        return plan, WriteResult(files=())
    what = path if path is not None else f"{len(plan.changes)} file(s)"
    result = store.write_context(
        plan.changes,
        actor="user",
        message=f"undo {what} of version {plan.version[:12]}",
        max_files=len(plan.changes),
    )
    return plan, result


def rollback(store: Store, version: str, paths: list[str] | None = None) -> WriteResult:
    target, changes = rollback_changes(store, version, paths or [])
    if not changes:
        return WriteResult(files=())
    what = ", ".join(paths) if paths else f"{len(changes)} file(s)"
    return store.write_context(
        changes,
        actor="user",
        message=f"rollback {what} to version {target[:12]}",
        max_files=len(changes),
    )
