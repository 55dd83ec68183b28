"""Finding transcripts: which files a `[[sources]]` entry covers, and what format each is.

Discovery walks the tree once per run, prunes hidden folders (`.git`, `.obsidian`...), follows
symlinked folders but never visits the same folder twice (so a link loop ends), and, for the two
transcript formats, prefers files under `sessions/` (OpenClaw) or `projects/` (Claude Code) when
the tree has any: pointed at `~/.openclaw` or `~/.claude`, it then skips cron run logs and
`history.jsonl`, which are JSONL but not conversations.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pathspec

from crustacean.config import SourceConfig
from crustacean.sources.base import decode_json_line, head_lines

_WILDCARD = re.compile(r"[*?\[]")
TRANSCRIPT_GLOBS = ("**/*.jsonl", "**/*.jsonl.reset.*")
DEFAULT_GLOBS: dict[str, tuple[str, ...]] = {
    "openclaw": TRANSCRIPT_GLOBS,
    "claude_code": ("**/*.jsonl",),
    "plain": ("**/*.md", "**/*.txt"),
    "auto": TRANSCRIPT_GLOBS,
}
PREFERRED_DIR = {"openclaw": "sessions", "claude_code": "projects"}
PLAIN_SUFFIXES = (".md", ".markdown", ".txt")
SNIFF_LINES = 20
SNIFF_BYTES = 256 * 1024
_OPENCLAW_TYPES = frozenset(
    {"session", "model_change", "thinking_level_change", "compaction", "branch_summary"}
    | {"custom", "custom_message"}
)
_CLAUDE_TYPES = frozenset({"summary", "file-history-snapshot", "queue-operation"})
_CLAUDE_KEYS = ("sessionId", "uuid", "parentUuid")


def expand(path: str, home: Path | None = None, base: Path | None = None) -> Path:
    """`~` means `home` when given (tests, `init` for another user), else the real home.

    A relative path is relative to `base` (the workspace), not to wherever cron happens to start
    the process, so a workspace that carries its own transcripts can be moved."""
    if home is not None and (path == "~" or path.startswith("~/")):
        return home / path[2:]
    found = Path(os.path.expandvars(path)).expanduser()
    return base / found if base is not None and not found.is_absolute() else found


def discover(
    source: SourceConfig, home: Path | None = None, base: Path | None = None
) -> list[tuple[Path, str]]:
    """Sorted (path, kind) of every transcript a source covers; [] when its path is missing.

    With kind "auto", each file's kind comes from `detect_kind`, and undetectable files are
    left out (they are looked at again next run, when they may have content).
    """
    root = expand(source.path, home, base)
    if _WILDCARD.search(str(root)):  # `~/.openclaw/agents/*/sessions`: every folder it matches
        hits = {
            hit
            for match in sorted(glob.glob(str(root)))
            for hit in discover(source._replace(path=match), home, base)
        }
        return sorted(hits)
    if root.is_file():
        kind = detect_kind(root) if source.kind == "auto" else source.kind
        return [(root, kind)] if kind != "unknown" else []
    if not root.is_dir():
        return []
    patterns = [p.strip() for p in source.glob.split(",") if p.strip()]  # a, b: several globs
    patterns = patterns or list(DEFAULT_GLOBS[source.kind])
    spec = pathspec.PathSpec.from_lines("gitignore", patterns)
    files = [p for p in walk(root) if spec.match_file(p.relative_to(root).as_posix())]
    if not source.glob and (folder := PREFERRED_DIR.get(source.kind)):
        files = [p for p in files if folder in p.parent.parts] or files  # when there are any
    if source.kind != "auto":
        return [(p, source.kind) for p in sorted(files)]
    found = [(p, detect_kind(p)) for p in sorted(files)]
    return [(p, kind) for p, kind in found if kind != "unknown"]


def walk(root: Path) -> Iterator[Path]:
    """Every file under root, hidden folders pruned, each real folder visited once."""
    seen: set[tuple[int, int]] = set()
    for folder, dirs, names in os.walk(root, followlinks=True):
        try:
            st = os.stat(folder)
        except OSError:
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder, name)
            if not name.startswith(".") and path.is_file():
                yield path


def detect_kind(path: Path) -> str:
    """ "openclaw", "claude_code", "plain" or "unknown", by name and then by content.

    Only complete lines are sniffed (the first few decisive ones), so a file being written is
    judged on what is final.
    """
    name = path.name.lower()
    if name.endswith(PLAIN_SUFFIXES):
        return "plain"
    if not (name.endswith(".jsonl") or ".jsonl.reset." in name):
        return "unknown"
    try:
        with open(path, "rb") as fh:
            return _sniff(fh)
    except OSError:
        return "unknown"


def _sniff(fh: BinaryIO) -> str:
    """Kind of the first decisive JSON line within the first SNIFF_BYTES."""
    for raw in head_lines(fh, SNIFF_BYTES)[:SNIFF_LINES]:
        try:
            kind = classify(decode_json_line(raw))
        except ValueError:
            continue
        if kind:
            return kind
    return "unknown"


def classify(record: Any) -> str | None:
    """Which format one parsed line belongs to, if it says."""
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind in _CLAUDE_TYPES or (isinstance(kind, str) and any(k in record for k in _CLAUDE_KEYS)):
        return "claude_code"  # every Claude Code record has a `type`; cron run logs do not
    if kind in _OPENCLAW_TYPES:
        return "openclaw"
    message = record.get("message")
    if kind == "message" and isinstance(message, dict) and "role" in message:
        return "openclaw"
    if isinstance(record.get("role"), str) and "content" in record:
        return "openclaw"
    return None


def default_sources(home: Path, workspace: Path | None = None) -> list[SourceConfig]:
    """The sources `init` offers: the OpenClaw and Claude Code folders that exist.

    An OpenClaw workspace (one under `~/.openclaw`) gets only OpenClaw's transcripts: coding
    sessions would fill the agent's memory with someone else's work."""
    found: list[SourceConfig] = []
    if (home / ".openclaw" / "agents").is_dir():
        found.append(SourceConfig(kind="openclaw", path="~/.openclaw/agents"))
    in_openclaw = workspace is not None and workspace.is_relative_to(home / ".openclaw")
    if (home / ".claude" / "projects").is_dir() and not in_openclaw:
        found.append(SourceConfig(kind="claude_code", path="~/.claude/projects"))
    return found
