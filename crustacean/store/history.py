"""History and rollback. Rollback never rewrites history: it writes the old bytes back as a new
version through `write_context`, so a rollback can itself be rolled back."""

from __future__ import annotations

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


def show(store: Store, version: str) -> str:
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    return store.git.show(version)


def rollback_changes(store: Store, version: str, paths: list[str]) -> tuple[str, list[Change]]:
    """The changes that bring `paths` (default: all that differ) back to `version`."""
    if not store.versioned:
        raise VersionError(NOT_VERSIONED)
    target = store.git.resolve(version)
    head = store.git.head()
    if paths:
        rels = [jail(store.root, p) for p in paths]
        missing = [p for p in rels if store.git.file_at(target, p) is None]
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
    changes = []
    for rel in rels:
        old = store.git.file_at(target, rel)
        now = store.read_bytes(rel)
        if old == now:
            continue
        if old is None:
            changes.append(Change(rel, "delete", expected_sha256=sha256_hex(now or b"")))
        elif now is None:
            changes.append(Change(rel, "create", content=old))
        else:
            changes.append(Change(rel, "overwrite", content=old, expected_sha256=sha256_hex(now)))
    return target, changes


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
