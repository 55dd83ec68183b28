"""What an agent loads at the start of a conversation.

The loading table of seed 004, the tiers of seed 002 and the caps of seed 000:

- every context: SOUL.md, IDENTITY.md, USER.md, today's and yesterday's daily logs;
- `main` adds MEMORY.md, `dm:NAME` the person's contact file, `group:NAME` the group's file;
- memories: hot always; warm when relevant to the topic; cold only when highly relevant;
  archive never. Lessons are presented as settled rulings;
- caps: `max_entries` memories, newest first, then `budget_chars` over the memory section.
  Foundation files and daily logs have their own budget (`context.foundation_chars`).
- anything cut is listed by path, so the agent never assumes its memory is complete.

Relevance is the share of the topic's words (3+ letters, stop words dropped) found in the
memory's path, name and body: `RELEVANT` (0.5) or more for warm, `HIGHLY_RELEVANT` (0.8) or more
for cold. Without a topic, only hot memories load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from crustacean.documents import DocumentSkipped, read_document
from crustacean.errors import UsageError
from crustacean.memories import MemoryDoc
from crustacean.memory_index import load_memories
from crustacean.workspace import WORKING_MEMORY, Workspace

RELEVANT = 0.5
HIGHLY_RELEVANT = 0.8
EVERY_SESSION = ("SOUL.md", "IDENTITY.md", "USER.md")
FOR_FORMS = ("main", "dm:NAME", "group:NAME", "cron")
RULINGS = (
    "These are settled rulings recorded from past corrections. Do not re-raise or re-argue "
    "them. If the code or facts in front of you contradict one, say so plainly instead of "
    "ignoring it."
)
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP_WORDS = (
    "the and for with that this from what when where which who how are was were you your "
    "about into have has had not but all any can will our out its his her they them"
)
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Audience:
    kind: str  # main | dm | group | cron
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind


def parse_for(value: str) -> Audience:
    """`main`, `dm:NAME`, `group:NAME` or `cron`; anything else names the valid forms."""
    kind, sep, name = value.partition(":")
    if (kind in ("main", "cron") and not sep) or (kind in ("dm", "group") and name.strip()):
        return Audience(kind, name.strip() or None)
    raise UsageError(f"unknown --for {value!r}; use one of: {', '.join(FOR_FORMS)}.")


@dataclass(frozen=True)
class Caps:
    max_entries: int
    budget_chars: int
    foundation_chars: int


@dataclass(frozen=True)
class Entry:
    path: str
    section: str  # foundation | person | lesson | memory
    title: str
    text: str
    why: str
    tier: str | None = None


@dataclass(frozen=True)
class Context:
    audience: Audience
    topic: str | None
    entries: tuple[Entry, ...]
    not_loaded: tuple[tuple[str, str], ...]
    problems: tuple[tuple[str, str], ...]

    @property
    def memory_paths(self) -> list[str]:
        return [e.path for e in self.entries if e.section in ("person", "lesson", "memory")]

    def to_json(self) -> dict[str, object]:
        return {
            "for": str(self.audience),
            "topic": self.topic,
            "entries": [
                {
                    "path": e.path,
                    "section": e.section,
                    "tier": e.tier,
                    "why": e.why,
                    "chars": len(e.text),
                    "text": e.text,
                }
                for e in self.entries
            ],
            "not_loaded": [{"path": p, "why": w} for p, w in self.not_loaded],
            "problems": [{"path": p, "why": w} for p, w in self.problems],
        }

    def to_markdown(self) -> str:
        about = f" about {self.topic!r}" if self.topic else ""
        out = [f"# Memory context ({self.audience}{about})\n"]
        sections = (("foundation", None), ("person", None), ("lesson", RULINGS), ("memory", None))
        heads = {
            "foundation": "Foundation and recent days",
            "person": "Who this is with",
            "lesson": "Settled rulings (memory/lessons/)",
            "memory": "Memories",
        }
        for section, preamble in sections:
            chosen = [e for e in self.entries if e.section == section]
            if not chosen:
                continue
            out.append(f"## {heads[section]}\n")
            if preamble:
                out.append(f"> {preamble}\n")
            for e in chosen:
                tag = f" ({e.tier})" if e.tier else ""
                out.append(f"### {e.path}{tag}\n\n{e.text.strip()}\n")
        if self.not_loaded:
            out.append("## Not loaded\n")
            out.append(
                "This context is not your whole memory. Not loaded: "
                + "; ".join(f"{p} ({w})" for p, w in self.not_loaded)
                + ".\n"
            )
        return "\n".join(out)

    def to_claude_hook(self) -> str:
        """The JSON a Claude Code SessionStart hook prints (REFERENCE.md §3.2)."""
        return json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": self.to_markdown(),
                }
            }
        )


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _STOP


def relevance(topic_words: set[str], mem: MemoryDoc) -> float:
    """Share of the topic's words found in the memory's path, name and body (0 to 1)."""
    if not topic_words:
        return 0.0
    hay = f"{mem.path} {mem.doc.name} {mem.doc.body}".lower()
    if not any(w in hay for w in topic_words):
        return 0.0  # a substring test is cheap; most memories fail it and skip tokenizing
    return len(topic_words & set(_WORD.findall(hay))) / len(topic_words)


def choose(
    mems: Iterable[MemoryDoc], topic: str | None, caps: Caps
) -> tuple[list[tuple[MemoryDoc, str]], list[tuple[str, str]]]:
    """Pick memories by tier and relevance, newest first, within both caps (pure)."""
    topic_words = words(topic or "")
    picked, cut = [], []
    for mem in mems:
        tier = mem.tier
        if tier == "hot":
            picked.append((mem, "hot"))
            continue
        if tier == "archive":
            continue  # never loaded, and not news to anyone
        score = relevance(topic_words, mem)
        need = RELEVANT if tier == "warm" else HIGHLY_RELEVANT
        if topic_words and score >= need:
            picked.append((mem, f"{tier}, relevance {score:.2f}"))
    picked.sort(key=lambda pair: (pair[0].recorded, pair[0].path), reverse=True)
    kept, used = [], 0
    for i, (mem, why) in enumerate(picked):
        size = mem.size
        if i >= caps.max_entries:
            cut.append((mem.path, f"over memory.max_entries {caps.max_entries}"))
        elif used + size > caps.budget_chars:
            cut.append((mem.path, f"over memory.budget_chars {caps.budget_chars}"))
        else:
            kept.append((mem, why))
            used += size
    return kept, cut


def _foundation_paths(ws: Workspace, audience: Audience, now: datetime) -> list[tuple[str, str]]:
    today = ws.today(now)
    paths = [(p, "every session") for p in EVERY_SESSION]
    if audience.kind == "main":
        paths.append((WORKING_MEMORY, "main session"))
    paths += [
        (ws.daily_log(today), "today"),
        (ws.daily_log(today - timedelta(days=1)), "yesterday"),
    ]
    return paths


def _person_file(mems: list[MemoryDoc], audience: Audience) -> MemoryDoc | None:
    """The contact (dm) or group file whose name matches: `<channel>-<id>`, `-g-<name>`, or name."""
    if audience.kind not in ("dm", "group") or not audience.name:
        return None
    folder = "memory/contacts/" if audience.kind == "dm" else "memory/groups/"
    want = audience.name.lower()
    for mem in mems:
        if not mem.path.startswith(folder):
            continue
        stem = mem.path.rsplit("/", 1)[-1].removesuffix(".md").lower()
        if want in (stem, mem.doc.name.lower()) or stem.endswith(f"-{want}"):
            return mem
    return None


def assemble(
    ws: Workspace, audience: Audience, topic: str | None, caps: Caps, now: datetime
) -> Context:
    """Read the workspace and build the context; no side effects (the caller records recalls)."""
    entries: list[Entry] = []
    not_loaded: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    used = 0
    for rel, why in _foundation_paths(ws, audience, now):
        if not (ws.root / rel).is_file():
            continue  # a missing file is normal (no log yet today); nothing to load
        try:
            doc = read_document(ws.root, rel)
        except DocumentSkipped as e:
            problems.append((rel, e.reason))
            continue
        if not doc.text.strip():
            continue
        if used + len(doc.text) > caps.foundation_chars:
            not_loaded.append((rel, f"over context.foundation_chars {caps.foundation_chars}"))
            continue
        used += len(doc.text)
        entries.append(Entry(rel, "foundation", rel, doc.text, why))
    mems, bad = load_memories(ws, bodies=bool(words(topic or "")))  # topic-less: the index
    problems += bad
    person = _person_file(mems, audience)
    if person is not None:
        entries.append(
            Entry(
                person.path, "person", person.doc.name, person.doc.body, str(audience), person.tier
            )
        )
    elif audience.kind in ("dm", "group"):
        not_loaded.append((f"{audience.kind}:{audience.name}", "no matching file"))
    rest = [m for m in mems if m is not person]
    kept, cut = choose(rest, topic, caps)
    for mem, why in kept:
        section = "lesson" if mem.path.startswith("memory/lessons/") else "memory"
        entries.append(Entry(mem.path, section, mem.doc.name, mem.doc.body, why, mem.tier))
    return Context(audience, topic, tuple(entries), tuple(not_loaded + cut), tuple(problems))


@dataclass
class ContextRequest:
    """The options of `crustacean context`, validated once."""

    audience: str = "main"
    topic: str | None = None
    max_entries: int | None = None
    budget_chars: int | None = None

    def caps(self, ws: Workspace) -> Caps:
        s = ws.settings
        for name in ("max_entries", "budget_chars"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1, not {value}.")
        return Caps(
            self.max_entries or s.memory.max_entries,
            self.budget_chars or s.memory.budget_chars,
            s.context.foundation_chars,
        )


def build_context(ws: Workspace, request: ContextRequest, now: datetime) -> Context:
    """Assemble a context and record a recall for every memory it loaded."""
    from crustacean.state import open_state

    ctx = assemble(ws, parse_for(request.audience), request.topic, request.caps(ws), now)
    if ctx.memory_paths:
        with open_state(ws) as db:
            db.record_recalls(ctx.memory_paths, now, "context")
    return ctx
