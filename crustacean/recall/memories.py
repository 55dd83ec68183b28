"""Which files are memories, and reading them all without letting one bad file stop the rest."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crustacean.documents import Document, DocumentSkipped, read_document
from crustacean.state import open_state
from crustacean.tiers import Memory, StoredTier, default_tier, with_stored
from crustacean.workspace import MEMORY_HOMES, MEMORY_SUBDIRS, Workspace, walk

MEMORY_ROOTS = (*(f"memory/{d}" for d in MEMORY_SUBDIRS), "knowledge")
INDEX_NAMES = {"README.md", "INDEX.md"}


@dataclass(frozen=True)
class MemoryDoc:
    """A memory file with what tiers and caps need to know about it: its tier is the one its
    own frontmatter names (a person's word), else the one kept in state.db, else its folder's."""

    doc: Document
    mtime: datetime
    stored: StoredTier | None = None

    @property
    def path(self) -> str:
        return self.doc.path

    @property
    def tier(self) -> str:
        return self.doc.tier or (self.stored.tier if self.stored else default_tier(self.path))

    @property
    def pinned(self) -> bool:
        """The file names its own tier: the lifecycle leaves it alone."""
        return self.doc.tier is not None

    @property
    def manual(self) -> bool:
        """A `tier set` override kept in state.db (and not shadowed by the file's own tier)."""
        return not self.pinned and self.stored is not None and self.stored.manual

    @property
    def recorded(self) -> datetime:
        """When it was recorded (frontmatter), else when the file last changed."""
        rec = self.doc.recorded
        return datetime(rec.year, rec.month, rec.day, tzinfo=UTC) if rec else self.mtime

    @property
    def size(self) -> int:
        """Characters of its body, what the context budget counts."""
        return len(self.doc.body)

    def as_memory(self) -> Memory:
        """What the file says (its own tier pins it), then what state.db keeps."""
        own = Memory(self.path, self.tier if self.pinned else default_tier(self.path), False,
                     self.recorded, pinned=self.pinned)  # fmt: skip
        return with_stored(own, self.stored)


def memory_paths(root: Path) -> list[str]:
    """Every markdown memory file (memory homes and knowledge/), index files excluded."""
    return sorted(
        rel
        for top in MEMORY_ROOTS
        for rel, entry in walk(root, MEMORY_HOMES, top)
        if entry.name.endswith(".md") and entry.name not in INDEX_NAMES and not entry.is_dir()
    )


def read_memory(
    ws: Workspace, rel: str, stored: StoredTier | None = None, data: bytes | None = None
) -> tuple[MemoryDoc | None, str | None]:
    """One memory file: (the memory or None when it cannot be used, its problem or None);
    `stored` is its tier in state.db, if any; `data` its bytes, when read already."""
    try:
        doc = read_document(ws.root, rel, data=data)
    except DocumentSkipped as e:
        return None, e.reason
    if not doc.body.strip():
        return None, "empty"
    mtime = datetime.fromtimestamp((ws.root / rel).stat().st_mtime, UTC)
    return MemoryDoc(doc, mtime, stored), doc.warning  # a warning: still loaded, as body only


def is_memory_path(rel: str) -> bool:
    """Whether `memory_paths` would list `rel` (checked without walking the workspace)."""
    parts = rel.split("/")
    if not rel.endswith(".md") or parts[-1] in INDEX_NAMES:
        return False
    if any(p.startswith(".") for p in parts[:-1]):
        return False
    return any(rel.startswith(top + "/") for top in MEMORY_ROOTS)


def load_memories(ws: Workspace) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
    """All readable memories, and the files with problems and why (never an exception)."""
    with open_state(ws) as db:
        stored = db.stored_tiers()
    docs, problems = [], []
    for rel in memory_paths(ws.root):
        mem, problem = read_memory(ws, rel, stored.get(rel))
        if problem:
            problems.append((rel, problem))
        if mem is not None:
            docs.append(mem)
    return docs, problems
