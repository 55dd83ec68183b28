"""User-side memory operations: `remember` a ruling, and the manual tier override.

`remember` writes through the store as actor `user` (a version that can be rolled back); the
tier override is kept in state.db, outside the file, so no tier is ever written into a file's
text by code (a `tier:` the person wrote in the frontmatter is theirs, and wins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from crustacean.documents import DocumentSkipped, new_document, read_document
from crustacean.errors import UsageError
from crustacean.recall.memories import MemoryDoc, is_memory_path, load_memories
from crustacean.state import open_state
from crustacean.store import Store, WriteResult
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.paths import jail
from crustacean.tiers import (
    TIERS,
    Recalls,
    Rules,
    StoredTier,
    TierDecision,
    next_tier,
    plan_tiers,
)
from crustacean.workspace import Workspace

SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")


def lesson_path(name: str) -> str:
    """Where `remember NAME` writes: one file per ruling, named by its slug."""
    return f"memory/lessons/{name}.md"


def remember(
    ws: Workspace, name: str, text: str, *, source: str | None, tier: str | None, now: datetime
) -> WriteResult:
    """Write `memory/lessons/NAME.md`; the same NAME replaces it (the old one stays in history)."""
    if not SLUG.match(name):
        raise UsageError(
            f"NAME {name!r} is not a safe slug: use lower-case letters, digits, '-' or '_' "
            "(up to 80, starting with a letter or digit), e.g. no-barrel-files."
        )
    if not text.strip():
        raise UsageError("TEXT is empty; say what the memory is.")
    if tier is not None and tier not in TIERS:
        raise UsageError(f"--tier must be one of {', '.join(TIERS)}, not {tier!r}.")
    meta: dict[str, object] = {"name": name}
    if source:
        meta["source"] = source
    meta["recorded"] = ws.today(now)
    if tier:
        meta |= {"tier": tier, "tier_set": ws.today(now)}
    path = lesson_path(name)
    content = new_document(meta, text).encode()
    store = Store(ws, lambda: now)  # the caller's time dates what the store writes
    current = store.read_bytes(path)
    if current is None:
        change = Change(path, "create", content=content)
    else:
        change = Change(path, "overwrite", content=content, expected_sha256=sha256_hex(current))
    return store.write_context([change], actor="user", message=f"remember {name}")


def set_tier(ws: Workspace, path: str, tier: str, now: datetime) -> StoredTier:
    """The manual override, kept in state.db from today (the file is not touched); refused
    when the file's own frontmatter names a tier, since that line is the person's to edit."""
    if tier not in TIERS:
        raise UsageError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}.")
    rel = jail(ws.root, path)
    if not is_memory_path(rel) or not (ws.root / rel).is_file():
        raise UsageError(f"{rel} is not a memory file; `crustacean tier list` shows the memories.")
    doc = read_document(ws.root, rel)
    if doc.tier is not None:
        raise UsageError(
            f"{rel} names its own tier in its frontmatter (tier: {doc.tier}), and that line "
            "wins; edit or remove it by hand, then run this again if you still want an override."
        )
    day = ws.today(now)
    stored = StoredTier(tier, True, datetime(day.year, day.month, day.day, tzinfo=UTC))
    with open_state(ws) as db:
        db.set_tiers({rel: stored}, "user", now)
    return stored


@dataclass(frozen=True)
class TierRow:
    path: str
    tier: str
    how: str  # manual (since DATE) | frontmatter | default
    recalls: Recalls

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "tier": self.tier,
            "how": self.how,
            "uses": self.recalls.uses,
            "last_recalled": self.recalls.last_recalled,
        }


def tier_rows(
    ws: Workspace, only: str | None = None
) -> tuple[list[TierRow], list[tuple[str, str]]]:
    """Every memory (or those in tier `only`) with its tier, why, and its recall counts; and
    the files that could not be read, as (path, why)."""
    mems, problems = load_memories(ws)
    with open_state(ws) as db:
        recalls = db.recalls()
    rows = [TierRow(m.path, m.tier, _how(m), recalls.get(m.path, Recalls())) for m in mems]
    return [r for r in rows if only is None or r.tier == only], problems


def memory_tier(ws: Workspace, path: str, now: datetime) -> tuple[TierRow, TierDecision] | None:
    """One memory's row and what the lifecycle would do with it now, without loading the rest
    (the UI's file page); None when `path` is not a readable memory."""
    rel = jail(ws.root, path)
    if not is_memory_path(rel) or not (ws.root / rel).is_file():
        return None
    try:
        doc = read_document(ws.root, rel)
    except DocumentSkipped:
        return None
    with open_state(ws) as db:
        recalls = db.recalls_of(rel)
        stored = db.stored_tiers().get(rel)
    mem = MemoryDoc(doc, datetime.fromtimestamp((ws.root / rel).stat().st_mtime, UTC), stored)
    rules = Rules.from_config(ws.settings.tiers)
    decision = next_tier(mem.as_memory(), recalls, now, rules)
    return TierRow(rel, mem.tier, _how(mem), recalls), decision


def _how(mem: MemoryDoc) -> str:
    if mem.pinned:
        return "its own frontmatter (the lifecycle leaves it)"
    if mem.manual and mem.stored is not None and mem.stored.tier_set is not None:
        return f"manual since {mem.stored.tier_set.date()}"
    return "lifecycle" if mem.stored is not None else "default for its folder"


def tier_plan(ws: Workspace, now: datetime) -> list[TierDecision]:
    """What the lifecycle would change now (compile applies it)."""
    mems, _ = load_memories(ws)
    with open_state(ws) as db:
        recalls = db.recalls()
    rules = Rules.from_config(ws.settings.tiers)
    return [d for d in plan_tiers([m.as_memory() for m in mems], recalls, now, rules) if d.changed]
