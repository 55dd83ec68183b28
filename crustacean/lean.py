"""Two stdlib pieces without their imports, for the shell's lean search (cli/search_fast.py).

A search from the shell is one process per query, and each millisecond of imports is paid on
every one (~70 ms in all, against grep's ~80):

- `NamedTuple`, without typing (~3 ms): the modules the lean search imports declare their
  records as usual; mypy reads `typing.NamedTuple` (under TYPE_CHECKING), the interpreter this,
  which builds the same `collections.namedtuple` class typing would (fields and defaults from
  the annotations; methods, properties and the docstring copied onto it):

      TYPE_CHECKING = False
      if TYPE_CHECKING:
          from typing import NamedTuple
      else:
          from crustacean.lean import NamedTuple

- `blake2b`, without hashlib (~3 ms: it loads OpenSSL's bindings first).
"""

from __future__ import annotations

from collections import namedtuple

try:
    from _blake2 import blake2b
except ImportError:  # an interpreter built without the builtin BLAKE2
    from hashlib import blake2b

__all__ = ["NamedTuple", "blake2b"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_KEPT_OUT = frozenset({"__annotations__", "__dict__", "__weakref__", "__module__", "__qualname__"})


_namedtuple: Callable[..., type] = namedtuple  # called with names known only at run time


class _Builder(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> type:
        if not bases:  # NamedTuple itself
            return super().__new__(mcls, name, bases, ns)
        annotations: dict[str, Any] = ns.get("__annotations__", {})
        fields = list(annotations)
        defaults = [ns[f] for f in fields if f in ns]
        cls = _namedtuple(name, fields, defaults=defaults, module=ns["__module__"])
        cls.__qualname__ = ns.get("__qualname__", name)
        cls.__annotations__ = annotations
        for key, value in ns.items():
            if key not in _KEPT_OUT and key not in annotations:
                setattr(cls, key, value)
        return cls


class NamedTuple(metaclass=_Builder):
    """Base of a record class; replaced by a namedtuple class at the class statement."""
