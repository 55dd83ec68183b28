"""Plain notes (`.md`, `.txt`): each file is one message, dated by its mtime.

Notes are edited in place rather than appended to, so there is no line cursor: the whole note is
read again when its size, mtime or first KB changed, and its id (a hash of path and content)
changes with it, so an edit is collected as a new message and an untouched note never is.
Only the first PREFIX_BYTES are kept in memory; the rest is hashed in chunks.
"""

from __future__ import annotations

import codecs
import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from crustacean.documents import read_front
from crustacean.sources import base
from crustacean.sources.base import Cursor, Message, ReadResult, finish_text, head_hash

PREFIX_BYTES = 256 * 1024
CHUNK = 1024 * 1024


def source_label(path: Path) -> str:
    """`plain:<folder>`: the folder a note sits in."""
    return f"plain:{path.parent.name or 'notes'}"


def strip_frontmatter(text: str) -> str:
    """Drop a leading frontmatter block: it is metadata, not something the user said. A block
    that is no YAML mapping (two `---` rules around a line of prose) is kept: it is text."""
    return text[read_front(text).end :]


def read_plain(path: Path, cursor: Cursor | None, *, since: datetime | None) -> ReadResult:
    """Read a note whole when it changed since `cursor`, else return nothing."""
    with base.open_binary(path) as fh:
        st = os.fstat(fh.fileno())
        head = head_hash(fh, st.st_size)
        size = st.st_size
        new_cursor = Cursor(str(path), st.st_dev, st.st_ino, size, size, head, 0, st.st_mtime_ns)
        if cursor is not None and _unchanged(cursor, new_cursor):
            return ReadResult((), cursor, 0, False, 0)
        prefix, digest, truncated = _read(fh, str(path))
    text, bad = _decode(prefix, truncated)
    when = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
    body = strip_frontmatter(text).strip() if text is not None else ""
    messages: tuple[Message, ...] = ()
    if body and (since is None or when >= since):
        message = Message(
            "user", finish_text(body), when, path.stem, digest, str(path), 1, source_label(path)
        )
        messages = (message,)
    why = ((1, "binary, not text" if text is None else "bad UTF-8, replaced"),) if bad else ()
    lines = 1 if st.st_size else 0
    return ReadResult(messages, new_cursor, bad, cursor is not None, lines, why)


def _unchanged(old: Cursor, new: Cursor) -> bool:
    """Same file, same size and first KB, and (when known) the same mtime."""
    same_file = all(
        getattr(old, k) == getattr(new, k) for k in ("device", "inode", "size", "head_hash")
    )
    return same_file and (old.mtime_ns == 0 or old.mtime_ns == new.mtime_ns)


def _read(fh: BinaryIO, path: str) -> tuple[bytes, str, bool]:
    """(first PREFIX_BYTES, sha1 of path + whole content, whether the prefix was cut)."""
    digest = hashlib.sha1(path.encode("utf-8", "surrogateescape") + b"\0")
    prefix = b""
    fh.seek(0)
    while chunk := fh.read(CHUNK):
        digest.update(chunk)
        if len(prefix) < PREFIX_BYTES:
            prefix += chunk[: PREFIX_BYTES - len(prefix)]
    truncated = fh.tell() > len(prefix)
    return prefix, digest.hexdigest(), truncated


def _decode(prefix: bytes, truncated: bool) -> tuple[str | None, int]:
    """(text, bad count): binary files give no text; bad UTF-8 is replaced and counted."""
    if b"\0" in prefix:
        return None, 1
    try:
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        return decoder.decode(prefix, final=not truncated), 0
    except UnicodeDecodeError:
        return prefix.decode("utf-8", errors="replace"), 1
