"""User-side memory operations: `remember` a ruling, and the manual tier override.

Both write through the store as actor `user`, so each is a version that can be rolled back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from crustacean.documents import DocumentSkipped, new_document, read_document, set_meta
from crustacean.errors import UsageError
from crustacean.recall.memories import MemoryDoc, is_memory_path, load_memories
from crustacean.state import open_state
from crustacean.store import Store, WriteResult
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.paths import jail
from crustacean.tiers import TIERS, Recalls, Rules, TierDecision, next_tier, plan_tiers
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


def set_tier(ws: Workspace, path: str, tier: str, now: datetime) -> WriteResult:
    """The manual override: `tier` and `tier_set` in the file's frontmatter."""
    if tier not in TIERS:
        raise UsageError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}.")
    store = Store(ws, lambda: now)  # the caller's time dates what the store writes
    rel = jail(ws.root, path)
    if not (ws.root / rel).is_file():
        raise UsageError(f"{rel} does not exist; `crustacean tier list` shows the memories.")
    doc = read_document(ws.root, rel)
    if doc.warning:
        raise UsageError(f"{rel} has unreadable frontmatter ({doc.warning}); fix it by hand first.")
    new = set_meta(doc, {"tier": tier, "tier_set": ws.today(now)})
    disk = store.read_bytes(rel) or b""
    change = Change(rel, "overwrite", content=new.encode(), expected_sha256=sha256_hex(disk))
    return store.write_context([change], actor="user", message=f"tier {rel} {tier}")


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
    mem = MemoryDoc(doc, datetime.fromtimestamp((ws.root / rel).stat().st_mtime, UTC))
    with open_state(ws) as db:
        recalls = db.recalls_of(rel)
    rules = Rules.from_config(ws.settings.tiers)
    decision = next_tier(mem.as_memory(), recalls, now, rules)
    return TierRow(rel, mem.tier, _how(mem), recalls), decision


def _how(mem: MemoryDoc) -> str:
    if mem.manual:
        return f"manual since {mem.doc.tier_set}"
    return "frontmatter" if mem.doc.tier else "default for its folder"


def tier_plan(ws: Workspace, now: datetime) -> list[TierDecision]:
    """What the lifecycle would change now (compile applies it)."""
    mems, _ = load_memories(ws)
    with open_state(ws) as db:
        recalls = db.recalls()
    rules = Rules.from_config(ws.settings.tiers)
    return [d for d in plan_tiers([m.as_memory() for m in mems], recalls, now, rules) if d.changed]
