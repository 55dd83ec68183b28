"""Shared pieces of the transcript readers: the value types, text clean-up and line streaming.

Everything a reader returns passes through `finish_text`, so secrets are redacted and sizes are
bounded in one place, whatever the format. Lines are streamed in binary and only complete lines
(ending in a newline) are ever consumed, so a line still being written is left for the next run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from crustacean.secrets import redact

MAX_TEXT = 4000
"""Longest message text returned; longer texts end in TRUNCATED."""
TRUNCATED = " …[truncated]"
TOOL_LINE_MAX = 120
"""Longest one-line summary of a tool call or tool result."""
HEAD_BYTES = 1024
"""How much of a file's start `Cursor.head_hash` covers."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is skipped (and counted bad) without ever being held whole in memory."""


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def encodable(text: str) -> str:
    """`text` with every code point UTF-8 cannot encode (a lone surrogate: half of a UTF-16
    pair a JavaScript agent cut inside an emoji, or a file name's undecodable byte) as U+FFFD,
    so no message can break the request that carries it."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def encodable_data(value: Any) -> Any:
    """`encodable` applied to every string (keys too) inside parsed JSON."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable_data(k): encodable_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable_data(v) for v in value]
    return value


@dataclass(frozen=True)
class Message:
    """One normalized transcript message, ready to be shown to the collect model. Its strings
    are made encodable here, whatever reader built it."""

    role: str
    text: str
    timestamp: datetime
    session: str
    id: str
    path: str
    line: int
    source: str
    offset: int = 0
    """Byte offset where the message's line starts (a cursor can stop just before it)."""

    def __post_init__(self) -> None:
        for name in ("role", "text", "session", "id", "path", "source"):
            value = getattr(self, name)
            if not value.isascii():
                object.__setattr__(self, name, encodable(value))


@dataclass(frozen=True)
class Cursor:
    """Where reading a file stopped, and enough about the file to notice it was replaced.

    `offset` is the byte just past the last complete line consumed; `head_hash` is the sha256
    of the first min(HEAD_BYTES, offset) bytes (consumed bytes only, so appends never change it);
    `lines` is how many lines lie before `offset` (for 1-based line numbers after a seek);
    `mtime_ns` is only used by plain files, which have no lines to resume from.
    """

    path: str
    device: int
    inode: int
    offset: int
    size: int
    head_hash: str
    lines: int = 0
    mtime_ns: int = 0


@dataclass(frozen=True)
class ReadResult:
    """What one `read_new` call found; `lines_read` counts the complete lines consumed.
    `set_aside` names the first few bad lines (line number, why), for the run record."""

    messages: tuple[Message, ...]
    cursor: Cursor
    bad_lines: int
    restarted: bool
    lines_read: int = 0
    set_aside: tuple[tuple[int, str], ...] = ()


# ---------------------------------------------------------------- text

_TAG_BLOCK = re.compile(
    r"<(tool_call|system-reminder|system)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE
)
_TAG_LONE = re.compile(r"</?(?:tool_call|system-reminder|system)\b[^>]*>", re.IGNORECASE)
_NO_REPLY = re.compile(r"\bNO_REPLY\b")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# OpenClaw prefixes channel messages with JSON envelopes ("Conversation info (untrusted
# metadata):" and friends): routing data, not something anyone said.
_META_BLOCK = re.compile(
    r"(?:Conversation info|Sender|Thread starter|Replied message|Forwarded message context|"
    r"Chat history since last reply) \(untrusted(?: metadata|,\s+for\s+context)\):[ \t]*\n"
    r"```(?:json)?[ \t]*\n.*?\n```[ \t]*(?:\n|\Z)",
    re.DOTALL,
)
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_TRAILING_WS = re.compile(r"[ \t]+\n")


def strip_noise(text: str) -> str:
    """Drop what OpenClaw's own transcript reader drops: NO_REPLY and tool-call/system tags."""
    text = _META_BLOCK.sub("", text)
    text = _TAG_BLOCK.sub("", text)
    text = _TAG_LONE.sub("", text)
    return _NO_REPLY.sub("", text)


def compact(text: str) -> str:
    """Tidy whitespace without losing line structure: the model reads these as prose."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _ANSI.sub("", text))  # terminal colours and cursor moves
    text = _TRAILING_WS.sub("\n", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def trim(text: str, limit: int, marker: str = TRUNCATED) -> str:
    """Cut `text` to at most `limit` characters, marking the cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))].rstrip() + marker


def finish_text(text: str, limit: int = MAX_TEXT) -> str:
    """Compact, redact and trim: the last step for every text a reader returns.

    The text is cut to twice the limit before redaction so a huge message costs little, yet a
    secret straddling the final cut is still whole when the redactor sees it.
    """
    return trim(redact(compact(encodable(text[: limit * 2]))), limit)


def one_line(text: str, limit: int) -> str:
    """First non-empty line of `text`, whitespace collapsed, cut to `limit` characters."""
    for line in text[: limit * 4].splitlines():
        if line.strip():
            return trim(" ".join(line.split()), limit, "…")
    return ""


def tool_call_line(name: str, args: Any) -> str:
    """`[tool write memory/2026-02-06.md]`: the tool and its most telling argument."""
    label = " ".join(str(name or "?").split()) or "?"
    arg = main_argument(args)
    body = f"{label} {arg}" if arg else label
    return "[tool " + trim(redact(body), TOOL_LINE_MAX - 7, "…") + "]"


def tool_result_line(name: str, text: str, is_error: bool) -> str:
    """`[tool result write: ok]`; empty when the result says nothing (the caller drops it)."""
    first = one_line(text, TOOL_LINE_MAX)
    if not first and not is_error:
        return ""
    status = "error: " + first if is_error else first
    label = " ".join(str(name).split()) if name else ""
    head = f"tool result {label}: " if label else "tool result: "
    return "[" + trim(redact(head + status.rstrip()), TOOL_LINE_MAX - 2, "…") + "]"


_ARG_KEYS = (
    "path",
    "file_path",
    "filePath",
    "notebook_path",
    "command",
    "cmd",
    "url",
    "query",
    "pattern",
    "description",
    "prompt",
    "name",
)


def main_argument(args: Any) -> str:
    """The argument that best says what a tool call did (a path, a command, a query)."""
    if isinstance(args, str):
        return one_line(args, TOOL_LINE_MAX)
    if not isinstance(args, dict):
        return ""
    for key in _ARG_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value, TOOL_LINE_MAX)
    for value in args.values():
        if isinstance(value, str) and value.strip():
            return one_line(value, TOOL_LINE_MAX)
    return ""


def block_texts(content: Any, kinds: tuple[str, ...] = ("text",)) -> str:
    """Text of a message `content`: a string, or the `text` of its blocks of the given kinds.

    Images become `[image]` so "here is a photo" still reads right; thinking and tool blocks
    are never included.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in kinds and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "image":
                parts.append("[image]")
    return "\n".join(parts)


# ---------------------------------------------------------------- ids and time


def sha1_id(*parts: str) -> str:
    """A stable id for a record that has none of its own."""
    return hashlib.sha1("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def parse_time(value: Any) -> datetime | None:
    """An ISO string or epoch number (ms when large, else s) as an aware UTC datetime."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            seconds = value / 1000 if abs(value) > 1e11 else value
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str) and value.strip():
            parsed = datetime.fromisoformat(value.strip())
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def as_utc(value: datetime) -> datetime:
    """Treat a naive datetime as UTC (the CLI passes `--since` as the user typed it)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def mtime_of(path: Path) -> datetime:
    """A file's mtime as aware UTC, the fallback time of records that carry none."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return datetime.now(UTC)


# ---------------------------------------------------------------- streaming


def open_binary(path: Path) -> BinaryIO:
    """Open a transcript for reading; one seam, so tests can count the bytes a read touches."""
    return open(path, "rb")


def head_hash(fh: BinaryIO, length: int) -> str:
    """sha256 of the first `length` bytes (at most HEAD_BYTES); leaves the position at 0."""
    fh.seek(0)
    digest = hashlib.sha256(fh.read(min(length, HEAD_BYTES))).hexdigest()
    fh.seek(0)
    return digest


def complete_lines(fh: BinaryIO, offset: int) -> Iterator[tuple[int, bytes | None]]:
    """Yield (end offset, line) for each complete line from the current position.

    The line comes without its newline; it is None for a line longer than MAX_LINE_BYTES,
    which is skipped in chunks. A trailing line without a newline is not yielded.
    """
    pos = offset
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw.endswith(b"\n"):
            if len(raw) < MAX_LINE_BYTES:
                return  # end of file, or a line still being written
            skipped = _skip_rest_of_line(fh)
            if skipped < 0:
                return
            pos += len(raw) + skipped
            yield pos, None
            continue
        pos += len(raw)
        yield pos, raw.rstrip(b"\r\n")


def _skip_rest_of_line(fh: BinaryIO) -> int:
    """Read past the rest of an oversized line; -1 when it has no newline yet."""
    skipped = 0
    while True:
        chunk = fh.readline(MAX_LINE_BYTES)
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped
        if len(chunk) < MAX_LINE_BYTES:
            return -1


def head_lines(fh: BinaryIO, limit: int) -> list[bytes]:
    """The complete, non-blank lines within the first `limit` bytes.

    A sniff must stay bounded however long the file or its first lines are.
    """
    fh.seek(0)
    block = fh.read(limit)
    fh.seek(0)
    lines = block.split(b"\n")[:-1]  # the last piece has no newline (or is empty)
    return [line.rstrip(b"\r") for line in lines if line.strip()]


def decode_json_line(raw: bytes) -> Any:
    """Parse one line; raises ValueError for bad JSON or absurd nesting.

    An undecodable byte becomes U+FFFD: one bad byte must not cost the whole message; so does
    an escaped lone surrogate (`"\\ud83d"`), which json.loads would keep as one."""
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    return encodable_data(data) if _SURROGATE_ESCAPE.search(raw) else data
