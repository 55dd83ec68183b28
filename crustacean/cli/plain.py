"""Workspace text as a terminal may show it: output.py escapes every printed line through this."""

from __future__ import annotations

import re

# C0 (but tab and newline), DEL, C1 and the bidi overrides: each can rewrite what a terminal
# shows (`\x1b[2K` erases a line, `\r` overwrites it, U+202E reverses it).
_CONTROL = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # compiled on first use
)


def safe(text: str) -> str:
    """Every control character visible as an escape. Every line, table cell and diff printed
    goes through it (a pipe often ends in a terminal)."""
    return re.sub(_CONTROL, lambda m: repr(m[0])[1:-1], text)
