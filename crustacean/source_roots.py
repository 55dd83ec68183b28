"""Where the configured transcript sources live, as folders: what collect names provenance
relative to, and what the listing a model or an agent sees leaves out (a transcript kept under
the workspace, as the sample's `transcripts/` is, is raw material, never memory)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from crustacean.config import SourceConfig

_WILD = frozenset("*?[")


def source_roots(root: Path, sources: Iterable[SourceConfig]) -> list[str]:
    """Each source's folder up to its first wildcard, absolute and posix (`~` and `$VAR`
    expanded; a relative path is relative to the workspace, as collect reads it)."""
    out = []
    for src in sources:
        found = Path(os.path.expandvars(src.path)).expanduser()
        parts = (found if found.is_absolute() else root / found).as_posix().split("/")
        fixed = next((i for i, x in enumerate(parts) if _WILD & set(x)), len(parts))
        out.append("/".join(parts[:fixed]).rstrip("/"))
    return [r for r in out if r]


def inside_roots(root: Path, sources: Iterable[SourceConfig]) -> tuple[str, ...]:
    """The sources' folders that lie inside the workspace, as workspace-relative prefixes
    ending in `/`."""
    base = root.as_posix().rstrip("/") + "/"
    return tuple(r[len(base) :] + "/" for r in source_roots(root, sources) if r.startswith(base))
