"""OpenClaw session transcripts: `agents/<agentId>/sessions/<sessionId>.jsonl` and friends.

A file is a session header line, then tree entries; only `message` entries (wrapped as
`{"type":"message","message":{...}}` or written bare as `{"role":...}`) are conversation.
What counts as conversation follows OpenClaw's own transcript reader: slash commands,
NO_REPLY and heartbeat polls are noise, and whole cron/heartbeat sessions are automation talking
to itself, so they are skipped. Session facts (header, first user message) live at the top of
the file, so they are sniffed from a bounded head even when reading resumes deep inside it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from crustacean.sources.base import (
    Message,
    block_texts,
    decode_json_line,
    finish_text,
    head_lines,
    mtime_of,
    parse_time,
    sha1_id,
    strip_noise,
    tool_call_line,
    tool_result_line,
)

SNIFF_BYTES = 64 * 1024
"""How much of the top is searched for the header and the first user message."""
SESSIONS_INDEX_MAX = 32 * 1024 * 1024
"""A bigger sessions.json is not read for cron keys (the other signals still apply)."""
_TOPIC = re.compile(r"-topic-[^.]+$")
_AUTOMATION = ("cron:", "heartbeat")
_HEARTBEAT_OK = re.compile(r"^\s*HEARTBEAT_OK\b|\bHEARTBEAT_OK\s*$")
_AUTOMATION_PROMPT = re.compile(r"\b(?:HEARTBEAT_OK|NO_REPLY)\b|\[OpenClaw heartbeat poll\]")
_TOOL_BLOCKS = ("toolCall", "tool_use", "toolUse")


_CHECKPOINT = re.compile(r"\.checkpoint\.[^.]+(?=\.jsonl)")
_COPY_MARKS = (".checkpoint.", ".jsonl.reset.", ".jsonl.deleted.", ".jsonl.bak")


def canonical_name(path: Path) -> str:
    """`<id>.jsonl` for the live file and its copies beside it (`<id>.jsonl.reset.<ts>`,
    `<id>.checkpoint.<uuid>.jsonl`): a copy keeps the session and the message ids."""
    name = _CHECKPOINT.sub("", path.name)
    return name[: name.index(".jsonl") + len(".jsonl")] if ".jsonl" in name else name


def is_copy(path: str | Path) -> bool:
    """A checkpoint, reset or deleted copy rather than the live transcript."""
    name = Path(path).name
    return any(mark in name for mark in _COPY_MARKS)


def source_label(path: Path) -> str:
    """`openclaw:<agentId>` from `.../agents/<agentId>/sessions/...`."""
    parts = path.parts
    if "agents" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("agents")
        if i + 1 < len(parts) - 1:
            return f"openclaw:{parts[i + 1]}"
    parent = path.parent
    agent = parent.parent.name if parent.name == "sessions" else parent.name
    return f"openclaw:{agent or 'default'}"


def message_of(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(message, envelope) of a wrapped or bare message line; None for other records."""
    if record.get("type") == "message" and isinstance(record.get("message"), dict):
        return record["message"], record
    if isinstance(record.get("role"), str):
        return record, record
    return None


@dataclass(frozen=True)
class SessionInfo:
    """What the head of a transcript says about the whole session."""

    session: str
    automated: bool
    started: datetime | None


def sniff_session(path: Path, fh: BinaryIO) -> SessionInfo:
    """Read the header and first user message from the first SNIFF_BYTES of the file."""
    header: dict[str, Any] = {}
    first_user = ""
    for raw in head_lines(fh, SNIFF_BYTES):
        try:
            record = decode_json_line(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "session" and not header:
            header = record
            continue
        found = message_of(record)
        if found and found[0].get("role") == "user":
            first_user = block_texts(found[0].get("content")).strip()
            break
    session = _session_id(path, header)
    automated = first_user.startswith("[cron:") or _names_automation(path, header, session)
    return SessionInfo(session, automated, parse_time(header.get("timestamp")))


def _session_id(path: Path, header: dict[str, Any]) -> str:
    """Header id, else the file name (`<id>` or `<id>-topic-<n>`); a `-topic-<n>` file is its
    own session."""
    from_name = canonical_name(path).removesuffix(".jsonl")
    base = header.get("id")
    if not isinstance(base, str) or not base.strip():
        return from_name
    topic = _TOPIC.search(from_name)
    if topic and not base.endswith(topic.group()):
        return base + topic.group()
    return base


def _names_automation(path: Path, header: dict[str, Any], session: str) -> bool:
    """True when the header, file name or session index marks a cron/heartbeat session."""
    names = [path.name, session]
    names += [v for k, v in header.items() if k in _NAME_KEYS and isinstance(v, str)]
    names += session_keys(path.parent).get(session.split("-topic-")[0], [])
    return any(mark in name.lower() for name in names for mark in _AUTOMATION)


_NAME_KEYS = ("id", "key", "sessionKey", "label", "displayName", "kind")


def session_keys(sessions_dir: Path) -> dict[str, list[str]]:
    """sessionId -> [sessionKey, label...] from the agent's sessions.json, if there is one."""
    index = sessions_dir / "sessions.json"
    try:
        st = index.stat()
    except OSError:
        return {}
    if st.st_size > SESSIONS_INDEX_MAX:
        return {}
    return _read_index(str(index), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=32)
def _read_index(index: str, mtime_ns: int, size: int) -> dict[str, list[str]]:
    """Parse sessions.json once per version of the file (mtime and size are the cache key)."""
    try:
        with open(index, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return {}
    out: dict[str, list[str]] = {}
    if not isinstance(data, dict):
        return out
    for key, entry in data.items():
        if isinstance(entry, dict) and isinstance(entry.get("sessionId"), str):
            labels = [str(entry.get(k, "")) for k in ("label", "displayName", "origin")]
            out.setdefault(entry["sessionId"], []).extend([str(key), *labels])
    return out


class OpenClawParser:
    """Turns the lines of one OpenClaw transcript into messages."""

    def __init__(self, path: Path, fh: BinaryIO) -> None:
        self.path = str(path)
        self.name = canonical_name(path)
        self.source = source_label(path)
        self.info = sniff_session(path, fh)
        self.last_time = self.info.started or mtime_of(path)
        self.since: datetime | None = None  # older messages are skipped before any text work

    def parse(self, record: Any, raw: bytes, line: int) -> list[Message] | None:
        """Messages of one parsed line; [] for non-message records, None for a wrong shape."""
        if not isinstance(record, dict):
            return None
        found = message_of(record)
        if found is None:
            return [] if isinstance(record.get("type"), str) else None
        message, envelope = found
        role = message.get("role")
        if not isinstance(role, str):
            return None
        when = parse_time(envelope.get("timestamp")) or parse_time(message.get("timestamp"))
        self.last_time = when = when or self.last_time
        if self.info.automated or (self.since is not None and when < self.since):
            return []
        base_id = self._id(envelope, raw)
        if role == "user":
            return self._user(message, when, base_id, line)
        if role == "assistant":
            return self._assistant(message, when, base_id, line)
        if role in ("toolResult", "tool"):
            return self._tool_result(message, when, base_id, line)
        return []

    def _id(self, envelope: dict[str, Any], raw: bytes) -> str:
        """`<session>/<entry id>` (entry ids are short and only unique per session)."""
        own = envelope.get("id")
        if isinstance(own, str | int) and str(own).strip():
            return f"{self.info.session}/{own}"
        return sha1_id(self.name, self.info.session, raw.decode("utf-8", "replace"))

    def _make(self, role: str, text: str, when: datetime, msg_id: str, line: int) -> Message:
        return Message(role, text, when, self.info.session, msg_id, self.path, line, self.source)

    def _user(self, message: dict[str, Any], when: datetime, mid: str, line: int) -> list[Message]:
        raw_text = block_texts(message.get("content"))
        if _AUTOMATION_PROMPT.search(raw_text):
            return []  # a heartbeat poll or memory-flush prompt: it asks for the bare token
        text = strip_noise(raw_text).strip()
        if not text or text.startswith("/"):
            return []  # nothing left, or a slash command
        return [self._make("user", finish_text(text), when, mid, line)]

    def _assistant(
        self, message: dict[str, Any], when: datetime, mid: str, line: int
    ) -> list[Message]:
        content = message.get("content")
        text = _HEARTBEAT_OK.sub("", strip_noise(block_texts(content))).strip()
        out = [self._make("assistant", finish_text(text), when, mid, line)] if text else []
        blocks = content if isinstance(content, list) else []
        calls = [b for b in blocks if isinstance(b, dict) and b.get("type") in _TOOL_BLOCKS]
        for k, call in enumerate(calls, start=1):
            args = call.get("arguments", call.get("input"))
            summary = tool_call_line(str(call.get("name") or "?"), args)
            out.append(self._make("tool", summary, when, f"{mid}#{k}", line))
        return out

    def _tool_result(
        self, message: dict[str, Any], when: datetime, mid: str, line: int
    ) -> list[Message]:
        name = message.get("toolName") or message.get("name") or ""
        text = block_texts(message.get("content"))
        summary = tool_result_line(str(name), text, message.get("isError") is True)
        return [self._make("tool", summary, when, mid, line)] if summary else []
