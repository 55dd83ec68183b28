"""The store: the only code that writes workspace files (DESIGN.md §4)."""

from crustacean.store.changes import Change, sha256_hex
from crustacean.store.files import FileContent, FileInfo, Store, WriteResult, write_context

__all__ = [
    "Change",
    "FileContent",
    "FileInfo",
    "Store",
    "WriteResult",
    "sha256_hex",
    "write_context",
]
