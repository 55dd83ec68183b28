"""What may go into git history: a check run before every commit of files crustacean did not
write itself (init's baseline of an adopted folder, a snapshot of the user's uncommitted edits).

Once committed, a key or a 5 MB binary stays in history for good, so such files are left out
(init) or the write that would snapshot them is refused (store), and the user decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from crustacean.errors import LimitError, SecretError
from crustacean.secrets import find_secrets

# Files that hold credentials whatever their content looks like to the text scan.
_CREDENTIAL_NAME = re.compile(
    r"(?i)^(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|.+\.(?:pem|key|p12|pfx|ppk|jks|keystore|kdbx)"
    r"|\.netrc|_netrc|\.pgpass|\.git-credentials|credentials(?:\.json)?|\.npmrc|\.pypirc)$"
)
_BINARY_PROBE = 8192
BLOCK_START = (
    "# >>> crustacean: left out of git (credentials or large files); see `crustacean init`"
)
BLOCK_END = "# <<< crustacean"


@dataclass(frozen=True)
class LeftOut:
    """A file kept out of history, and why in words that never hold the secret itself."""

    path: str
    reason: str
    kind: str  # credential | size


def check_file(path: str, data: bytes, max_bytes: int, size: int | None = None) -> LeftOut | None:
    """Why `path` with these bytes must not be committed, or None when it may (pure). `size`
    lets a caller skip reading a file already known to be too big."""
    name = path.rsplit("/", 1)[-1]
    size = len(data) if size is None else size
    if _CREDENTIAL_NAME.match(name):
        return LeftOut(path, "a credential file by its name", "credential")
    if size > max_bytes:
        return LeftOut(
            path, f"{_size(size)}, over store.max_snapshot_bytes ({_size(max_bytes)})", "size"
        )
    if b"\0" in data[:_BINARY_PROBE]:
        return None  # a small binary: no text to scan
    found = find_secrets(data.decode("utf-8", "replace"))
    if found:
        return LeftOut(
            path, f"looks like a credential ({found[0].kind}, line {found[0].line})", "credential"
        )
    return None


def guard_snapshot(contents: Mapping[str, bytes], max_bytes: int) -> None:
    """Refuse to commit the user's uncommitted edits when one holds a credential or is too big:
    the write waits, nothing is committed, and the user's file stays as it is."""
    for path, data in contents.items():
        bad = check_file(path, data, max_bytes)
        if bad is None:
            continue
        what = (
            f"refused: {path} has uncommitted edits that crustacean would have to commit first, "
            f"and it is {bad.reason}."
        )
        if bad.kind == "credential":
            raise SecretError(
                f"{what} Take it out of the file (or commit it yourself), then retry."
            )
        raise LimitError(f"{what} Move the file out of the workspace (or commit it yourself).")


def _size(n: int) -> str:
    return f"{n / 1048576:.1f} MB" if n >= 1048576 else f"{n / 1024:.0f} KB"


def _escape(path: str) -> str:
    """A path as one literal, anchored .gitignore pattern."""
    return "/" + re.sub(r"([*?\[\]\\!# ])", r"\\\1", path)


def with_left_out_block(current: str, paths: list[str]) -> str:
    """`current` .gitignore text with crustacean's marked block listing `paths` (replacing an
    earlier block, keeping every other line as the user wrote it)."""
    lines = current.splitlines()
    if BLOCK_START in lines and BLOCK_END in lines[lines.index(BLOCK_START) :]:
        start = lines.index(BLOCK_START)
        end = lines.index(BLOCK_END, start)
        kept = [p for p in lines[start + 1 : end] if p.strip()]
        lines = lines[:start] + lines[end + 1 :]
    else:
        kept = []
    block = [BLOCK_START, *dict.fromkeys([*kept, *map(_escape, paths)]), BLOCK_END]
    head = "\n".join(lines).rstrip("\n")
    return (head + "\n\n" if head else "") + "\n".join(block) + "\n"
