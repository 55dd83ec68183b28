"""The store: the only code that writes workspace files (DESIGN.md §4).

Names are exported lazily, so importing a light submodule (such as `secrets`) does not load
the whole write layer at start-up.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Change": "crustacean.store.changes",
    "sha256_hex": "crustacean.store.changes",
    "FileContent": "crustacean.store.files",
    "FileInfo": "crustacean.store.files",
    "Store": "crustacean.store.files",
    "WriteResult": "crustacean.store.files",
    "write_context": "crustacean.store.files",
    "proposals": "crustacean.store.proposals",
    "history": "crustacean.store.history",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = import_module(_EXPORTS[name])
        return module if module.__name__.endswith("." + name) else getattr(module, name)
    raise AttributeError(f"module 'crustacean.store' has no attribute {name!r}")
