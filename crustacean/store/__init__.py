"""The store: the only code that writes workspace files (DESIGN.md §4).

The write path is `Store.write_context` (`store/write.py`, the face): it plans a call
(`store/plan.py`, the loss guard's text rules in `store/loss.py`), applies it under a journal
(`store/apply.py`) and commits it. The read side is `store/files.py`. Code outside the package
imports these public names from here; modules inside it import from each other directly.
"""

from crustacean.store.files import FileContent, FileInfo, Files, walk_entries
from crustacean.store.plan import Plan, common_prefix
from crustacean.store.write import Store, WriteResult

__all__ = [
    "FileContent",
    "FileInfo",
    "Files",
    "Plan",
    "Store",
    "WriteResult",
    "common_prefix",
    "walk_entries",
]
