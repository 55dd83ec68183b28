"""The change model: what one `write_context` call asks for, parsed and checked for shape.

Tool input from a model or an MCP client arrives as JSON; every shape error becomes a
`WriteError` whose words let the caller correct itself.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from crustacean.errors import WriteError
from crustacean.store.policy import MODES

FIELDS = {
    "create": ("content",),
    "append": ("content",),
    "overwrite": ("content",),
    "edit": ("old", "new"),
    "delete": (),
    "move": ("to",),
}
KNOWN_KEYS = {"path", "mode", "content", "old", "new", "to", "expected_sha256"}


def sha256_hex(data: bytes) -> str:
    """The hashing contract: sha256 over the file's exact bytes on disk, lower-case hex.

    No newline normalization, no decoding: a file read, hashed, and passed back as
    `expected_sha256` matches only if not one byte changed.
    """
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Change:
    """One change. Text fields are bytes here so internal callers can move any file."""

    path: str
    mode: str
    content: bytes | None = None
    old: bytes | None = None
    new: bytes | None = None
    to: str | None = None
    expected_sha256: str | None = None

    def added_text(self) -> bytes:
        """What this change brings in, the part the secret guard reads."""
        return (self.content or b"") + (self.new or b"")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if value is None:
                continue
            if isinstance(value, bytes):
                try:
                    out[key] = value.decode("utf-8")
                except UnicodeDecodeError:
                    out[key + "_b64"] = base64.b64encode(value).decode()
            else:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        """Inverse of `to_json` (for stored proposals)."""
        kw: dict[str, Any] = {}
        for key, value in data.items():
            if key.endswith("_b64"):
                kw[key[:-4]] = base64.b64decode(value)
            elif key in ("content", "old", "new"):
                kw[key] = value.encode("utf-8")
            else:
                kw[key] = value
        return cls(**kw)


def parse_changes(raw: object) -> list[Change]:
    """Turn tool input into changes, or say exactly which field is wrong."""
    if not isinstance(raw, list) or not raw:
        raise WriteError("changes must be a non-empty list of {path, mode, ...} objects.")
    return [parse_change(item, i) for i, item in enumerate(raw)]


def parse_change(item: object, i: int = 0) -> Change:
    where = f"changes[{i}]"
    if isinstance(item, Change):
        return item
    if not isinstance(item, dict):
        raise WriteError(f"{where} must be an object with path and mode.")
    unknown = sorted(set(item) - KNOWN_KEYS)
    if unknown:
        raise WriteError(f"{where} has unknown field {unknown[0]!r}; fields: {sorted(KNOWN_KEYS)}.")
    mode = item.get("mode")
    if mode not in MODES:
        raise WriteError(f"{where}.mode must be one of {', '.join(MODES)}; got {mode!r}.")
    path = item.get("path")
    if not isinstance(path, str):
        raise WriteError(f"{where}.path must be a string.")
    kw: dict[str, Any] = {"path": path, "mode": mode}
    for key in FIELDS[mode]:
        value = item.get(key)
        if not isinstance(value, str):
            raise WriteError(f"{where}: mode {mode} needs {key!r} as a string.")
        kw[key] = value if key == "to" else _text(value, f"{where}.{key}")
    sha = item.get("expected_sha256")
    if sha is not None:
        if not isinstance(sha, str) or len(sha) != 64:
            raise WriteError(
                f"{where}.expected_sha256 must be the 64-hex sha256 read_context_file gave."
            )
        if mode == "create":
            raise WriteError(f"{where}: create takes no expected_sha256 (the file must not exist).")
        kw["expected_sha256"] = sha.lower()
    return Change(**kw)


def _text(value: str, where: str) -> bytes:
    """UTF-8 bytes of tool text; lone surrogates and NUL are refused, not mangled."""
    if "\x00" in value:
        raise WriteError(f"{where} contains a NUL character; memory files are plain text.")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise WriteError(f"{where} is not valid UTF-8 text (it has a lone surrogate).") from None


def unified_diff(files: Iterable[tuple[str, bytes | None, bytes | None]]) -> str:
    """One unified diff for (path, old, new) triples; None is a file that does not exist."""
    out: list[str] = []
    for path, old, new in files:
        if old == new:
            continue
        out.extend(
            difflib.unified_diff(
                _lines(old),
                _lines(new),
                fromfile=f"a/{path}" if old is not None else "/dev/null",
                tofile=f"b/{path}" if new is not None else "/dev/null",
            )
        )
    return "".join(out)


def _lines(data: bytes | None) -> list[str]:
    return [] if data is None else data.decode("utf-8", "replace").splitlines(keepends=True)
