"""Transcript sources for collect: find transcripts, and read what is new in each.

One reader per format (OpenClaw, Claude Code, plain notes) turns a file into normalized
`Message`s with stable ids, redacted and trimmed text, and aware UTC times. `read_new` resumes
from a `Cursor` so a run costs O(new bytes); a rotated or truncated file restarts from 0 and the
stable ids let the caller drop what it already has.
"""

from crustacean.sources.base import Cursor, Message, ReadResult
from crustacean.sources.discovery import default_sources, detect_kind, discover
from crustacean.sources.reader import KINDS, cursor_before, read_new

__all__ = [
    "KINDS",
    "Cursor",
    "Message",
    "ReadResult",
    "cursor_before",
    "default_sources",
    "detect_kind",
    "discover",
    "read_new",
]
