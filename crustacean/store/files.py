"""The store's read side: what a writer may see of a workspace, and its bytes.

The plan reads through `read_bytes`, so the dry run's overlay (`store/overlay.py`) is the view
its checks see.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crustacean.errors import PathError, WriteError
from crustacean.store.changes import sha256_hex
from crustacean.store.paths import jail
from crustacean.workspace import WRITABLE, walk

_TIER_RE = re.compile(rb"^tier:\s*['\"]?(hot|warm|cold|archive)['\"]?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modified: str
    tier: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "size": self.size, "modified": self.modified}
        if self.tier:
            out["tier"] = self.tier
        return out


@dataclass(frozen=True)
class FileContent:
    path: str
    content: str
    sha256: str


class Files:
    """Reads one workspace's files: a listing, a file's bytes, a file as text."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def list_context_files(self, prefix: str | None = None) -> list[FileInfo]:
        """Every file a writer may see, sorted; state, git and the trash are left out."""
        pre = (prefix or "").replace("\\", "/")
        while pre.startswith(("/", "./")):  # not lstrip("./"): it would eat ".gitignore"'s dot
            pre = pre[1:] if pre.startswith("/") else pre[2:]
        pre = "" if pre == "." else pre
        if ".." in pre.split("/"):
            raise PathError(f"prefix {prefix!r} uses '..'; prefixes are workspace-relative.")
        out = []
        for rel, st in walk_entries(self.root):
            if rel.startswith(pre) and stat.S_ISREG(st.st_mode):
                modified = datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds")
                out.append(FileInfo(rel, st.st_size, modified, _tier_of(self.root / rel, rel)))
        return sorted(out, key=lambda f: f.path)

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(os.path.join(self.root, path), "rb") as fh:  # no Path: called per file
                return fh.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise WriteError(f"{path} is a folder, not a file; name a file inside it.") from None
        except OSError as e:  # a symlink loop, a permission problem: refuse, never crash
            raise WriteError(f"{path} cannot be read ({e.strerror}); fix or remove it.") from None

    def read_context_file(self, path: str) -> FileContent:
        rel = jail(self.root, path)
        data = self.read_bytes(rel)
        if data is None:
            raise WriteError(f"{rel} does not exist; list_context_files shows what is there.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WriteError(
                f"{rel} is not UTF-8 text, so it cannot be read as memory; save it as UTF-8 first."
            ) from None
        return FileContent(rel, text, sha256_hex(data))

    # ------------------------------------------------------------ planning


def walk_entries(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(path, lstat) of every entry `walk(root, WRITABLE)` yields, unsorted: what a writer may
    see (`list_context_files`) are the regular files among them; symlinks and special files
    come too, for callers that must know of them (compile's file cache)."""
    for rel, entry in walk(root, WRITABLE):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:  # gone since the folder was listed
            continue
        yield rel, st


def _tier_of(full: Path, rel: str) -> str | None:
    if not rel.endswith(".md"):
        return None
    try:
        with full.open("rb") as fh:
            head = fh.read(2048)
    except OSError:
        return None
    if not head.startswith(b"---"):
        return None
    end = head.find(b"\n---", 3)
    m = _TIER_RE.search(head[: end if end > 0 else len(head)])
    return m.group(1).decode() if m else None
