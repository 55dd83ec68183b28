"""What an agent loads at the start of a conversation.

The loading table of seed 004, the tiers of seed 002 and the caps of seed 000:

- `main` loads MEMORY.md first; every context: SOUL.md, IDENTITY.md, USER.md, today's and
  yesterday's daily logs; `dm:NAME` adds the person's contact file, `group:NAME` the group's;
- what loads is `loadable`: HTML comments (a template's notes to the human) and the empty
  headings and list items they leave are taken out; with a topic, a foundation file that is
  still init's template (`untouched`) is listed, not loaded: nothing in it is about the user;
- memories: hot always; warm when relevant to the topic; cold only when highly relevant;
  archive never. Lessons are presented as settled rulings;
- caps: `max_entries` memories, newest first, then `budget_chars` over the memory section.
  Foundation files and daily logs have their own budget (`context.foundation_chars`).
  `--budget-chars` asked for (CLI, hook, MCP) bounds the whole output instead, headings and
  notes included: the foundation first (at most half of it with a topic, so the topic's lines
  have room), memories and found lines in what is left, then fitted as a hook is (`within`).
- anything cut is listed (counts per folder and the first few paths, so the list stays small on
  10,000 memories), so the agent never assumes its memory is complete, with how to find the rest.
- `--format claude-hook` fits the whole output under `context.hook_chars`: Claude Code saves a
  longer hook output to a file and shows the model a ~2 KB preview of it. MEMORY.md goes first
  and whole when it fits, then the foundation files, then hot memories (`Context._fitted`).

With a topic, the search engine ranks every line of the workspace for it (search.py: stemmed
words, stop words out, dates matched against daily logs). A memory's relevance is the share of
the topic's words its best line holds, with its heading and file name: `RELEVANT` (0.5) or more
for warm, `HIGHLY_RELEVANT` (0.8) or more for cold. A picked memory longer than `LONG_CHARS`
loads its best lines for the topic (up to `WINDOW_CHARS`), not the whole file. What is left of
`budget_chars` then goes to the topic's best lines in the daily logs and knowledge/ that did not
load whole, as "found for the topic": one entry a file, its windows under one heading
(`_packed`), filling a whole budget as printed (`_fill`). Without a topic, only hot memories load.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from crustacean.documents import Document, DocumentSkipped, read_document
from crustacean.errors import UsageError
from crustacean.markdown import code_lines, heading
from crustacean.recall.memories import MemoryDoc
from crustacean.recall.memory_index import load_memories
from crustacean.workspace import WORKING_MEMORY, Workspace

if TYPE_CHECKING:
    from crustacean.recall.search import Hit, Ranking

RELEVANT = 0.5
HIGHLY_RELEVANT = 0.8
LONG_CHARS = 2000
WINDOW_CHARS = 1200
EVERY_SESSION = ("SOUL.md", "IDENTITY.md", "USER.md")
FOR_FORMS = ("main", "dm:NAME", "group:NAME", "cron")
RULINGS = (
    "These are settled rulings recorded from past corrections. Do not re-raise or re-argue "
    "them. If the code or facts in front of you contradict one, say so plainly instead of "
    "ignoring it."
)
HEADS = {  # each section's heading, in the order they print
    "foundation": "Foundation and recent days",
    "person": "Who this is with",
    "found": "Found for the topic (best lines of daily logs and knowledge)",
    "lesson": "Settled rulings (memory/lessons/)",
    "memory": "Memories",
}
UNTOUCHED = "init's template, unchanged"
FILL_SLACK = 200  # a whole budget's found lines stop asking for more within this of its end
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP_WORDS = (
    "the and for with that this from what when where which who how are was were you your "
    "about into have has had not but all any can will our out its his her they them"
)
_STOP = frozenset(_STOP_WORDS.split())
FIND_THE_REST = (
    "Find the rest with the MCP tool `search_memory` (then `read_context_file`), "
    "or `crustacean search WORDS` in a shell."
)
MAX_FOLDERS = 8  # folders named in the "Not loaded" list; the rest are counted together
WHOLE_OVERHEAD = 1000  # headings, notes and the "Not loaded" list, within a whole budget


@dataclass(frozen=True)
class Audience:
    kind: str  # main | dm | group | cron
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind


def parse_for(value: str, called: str = "--for") -> Audience:
    """`main`, `dm:NAME`, `group:NAME` or `cron`; anything else names the valid forms (and the
    option or argument as its caller calls it: `--for`, or the MCP tool's `audience`)."""
    kind, sep, name = value.partition(":")
    if (kind in ("main", "cron") and not sep) or (kind in ("dm", "group") and name.strip()):
        return Audience(kind, name.strip() or None)
    raise UsageError(f"unknown {called} {value!r}; use one of: {', '.join(FOR_FORMS)}.")


@dataclass(frozen=True)
class Caps:
    max_entries: int
    budget_chars: int
    foundation_chars: int
    listed_paths: int = 5  # context.not_loaded_paths
    whole: bool = False  # budget_chars bounds the whole output (asked for), not the memories


@dataclass(frozen=True)
class Entry:
    path: str
    section: str  # foundation | person | found | lesson | memory
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
    listed_paths: int = 5  # context.not_loaded_paths: paths named per folder and reason

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
            "not_loaded": [{"path": p, "why": w} for p, w in self._listed_not_loaded()],
            "not_loaded_count": len(self.not_loaded),
            "problems": [{"path": p, "why": w} for p, w in self.problems],
        }

    def to_markdown(self) -> str:
        about = f" about {self.topic!r}" if self.topic else ""
        out = [f"# Memory context ({self.audience}{about})\n"]
        sections = (
            ("foundation", None),
            ("person", None),
            ("found", None),
            ("lesson", RULINGS),
            ("memory", None),
        )
        for section, preamble in sections:
            chosen = [e for e in self.entries if e.section == section]
            if not chosen:
                continue
            out.append(f"## {HEADS[section]}\n")
            if preamble:
                out.append(f"> {preamble}\n")
            out += map(_rendered, chosen)
        out.append("## Not loaded\n" if self.not_loaded else "## More memory\n")
        if self.not_loaded:
            out.append(
                "This context is not your whole memory. Not loaded: "
                + not_loaded_summary(self.not_loaded, self.listed_paths)
                + ".\n"
            )
        out.append(FIND_THE_REST + "\n")
        return "\n".join(out)

    def _listed_not_loaded(self) -> list[tuple[str, str]]:
        """The first `listed_paths` cut paths of each folder and reason (for JSON)."""
        seen: dict[tuple[str, str], int] = {}
        out = []
        for path, why in self.not_loaded:
            key = (path.rpartition("/")[0], why)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= self.listed_paths:
                out.append((path, why))
        return out

    def within(self, limit: int) -> Context:
        """This context fitted so that its markdown, headings and notes included, is at most
        `limit` characters (`--budget-chars`): entries kept most needed first, as in a hook;
        itself when it fits already (`assemble` fills a whole budget to the character)."""
        if len(self.to_markdown()) <= limit:
            return self
        budget = limit
        fitted = self
        for _ in range(6):
            fitted = self._fitted(budget, limit, "budget_chars")
            over = len(fitted.to_markdown()) - limit
            if over <= 0:
                return fitted
            budget -= over + 100
        return fitted

    def to_claude_hook(self, limit: int = 9500) -> str:
        """The JSON a Claude Code SessionStart hook prints (REFERENCE.md §3.2), at most `limit`
        characters in all: entries go in whole, most needed first (`_hook_rank`), while they
        fit; the first foundation file that does not is cut at a line, the rest are left out,
        and the end says what was left out and how to find it."""
        import json  # lazy: only the hook prints JSON here; `context --for main` never needs it

        budget = limit
        for _ in range(6):
            out = json.dumps(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "SessionStart",
                        "additionalContext": self._fitted(budget, limit).to_markdown(),
                    }
                },
                ensure_ascii=False,
            )
            if len(out) <= limit:
                return out
            budget -= len(out) - limit + 100  # JSON escapes (\n, quotes) took the difference
        return out

    def _fitted(self, budget: int, limit: int, cap: str = "context.hook_chars") -> Context:
        """This context with entries cut or left out so its markdown is at most `budget`.

        Entries go in whole, in `_hook_rank` order, while they fit. MEMORY.md, first, is cut
        at a line when it does not fit whole, to what is left after who the agent and the
        user are (SOUL.md, IDENTITY.md, USER.md); otherwise the first foundation file that
        does not fit is cut into what is left at the end. The rest is named as left out."""
        why = f"over {cap} {limit}"
        every = sorted(self.entries, key=_hook_rank)
        worst = replace(
            self,
            entries=(),
            not_loaded=self.not_loaded + tuple((e.path, why) for e in every),
        )
        room = budget - len(worst.to_markdown()) - 200  # section headings and the preamble
        who = sum(_hook_size(e) for e in every if _hook_rank(e) == 1)
        kept: list[Entry] = []
        deferred: list[Entry] = []
        left: list[tuple[str, str]] = []
        cut = f"cut to fit {cap} {limit}"
        for e in every:
            size = _hook_size(e)
            if size <= room:
                kept.append(e)
                room -= size
            elif e.path == WORKING_MEMORY and e.section == "foundation" and room - who >= 600:
                kept.append(replace(e, text=_cut(e.text, room - who - len(e.path) - 120, e.path)))
                left.append((e.path, cut))
                room = who
            else:
                deferred.append(e)
        for e in deferred:  # the head of the first foundation file that did not fit
            if e.section == "foundation" and room >= 600 and not left:
                kept.append(replace(e, text=_cut(e.text, room - len(e.path) - 120, e.path)))
                left.append((e.path, cut))
                room = 0
            else:
                left.append((e.path, why))
        place = {e.path: i for i, e in enumerate(self.entries)}
        kept.sort(key=lambda e: place[e.path])
        return replace(self, entries=tuple(kept), not_loaded=tuple(left) + self.not_loaded)


def _hook_size(e: Entry) -> int:
    return len(e.path) + len(e.text) + 12  # with its `### path` heading


def _hook_rank(e: Entry) -> int:
    """What a hook keeps first when not everything fits: the working memory (MEMORY.md), who
    the agent and the user are, who this is with, the recent days, the settled rulings, the
    other memories, and lines found for a topic."""
    if e.section == "foundation":
        return 0 if e.path == WORKING_MEMORY else 1 if e.path in EVERY_SESSION else 3
    return {"person": 2, "lesson": 4, "memory": 5}.get(e.section, 6)


def _cut(text: str, room: int, path: str) -> str:
    """The head of `text` that fits `room`, ended at a line (at a section's end when one
    ends in its last third), saying where the rest is."""
    head = text[: max(room, 0)]
    head = head[: head.rfind("\n")] if "\n" in head else head
    section = head.rfind("\n\n#")
    if section > len(head) * 2 // 3:
        head = head[:section]
    return f"{head.rstrip()}\n\n[… cut to fit; the rest: read_context_file {path}]"


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


_EMPTY_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s*$")


def loadable(text: str) -> str:
    """`text` as an agent should load it: HTML comments (a template's instructions to the
    human) out, then list items and headings left with nothing in them, and runs of blank
    lines made one (pure). Code blocks are kept as they are (markdown.code_lines)."""
    if "<!--" in text:  # comments out of each run of lines outside fenced code
        raw = text.split("\n")
        runs: list[tuple[bool, list[str]]] = []
        for line, fenced in zip(raw, code_lines(raw), strict=True):
            if runs and runs[-1][0] == fenced:
                runs[-1][1].append(line)
            else:
                runs.append((fenced, [line]))
        text = "\n".join(
            "\n".join(run) if fenced else _COMMENT.sub("", "\n".join(run)) for fenced, run in runs
        )
    split = text.splitlines()
    lines: list[tuple[str, int]] = []  # (line, heading level or 0); fenced lines are level 0
    for line, fenced in zip(split, code_lines(split), strict=True):
        if not fenced:
            if _EMPTY_ITEM.match(line) or (not line.strip() and lines and not lines[-1][0]):
                continue
            if not line.strip():
                line = ""
        head = heading(line) if not fenced else None
        lines.append((line.rstrip() if not fenced else line, head[0] if head else 0))
    out: list[str] = []  # built backwards: a heading with nothing below it before the next
    after: int | None = None  # heading of its level or higher goes; `after` is the level of
    for line, level in reversed(lines):  # the nearest line below with text (0: not a heading)
        if level and (after is None or 0 < after <= level):
            while out and not out[-1]:
                out.pop()
            continue
        out.append(line)
        if line:
            after = level
    text = "\n".join(reversed(out)).strip()
    return text + "\n" if text else ""


def untouched(rel: str, text: str) -> bool:
    """Whether a foundation file's `text` is init's template for `rel` still (every line a
    line of it, search's rule for scaffold text): it holds nothing about the user yet."""
    from crustacean.recall.search import template_lines

    template = template_lines(rel)
    return bool(template) and all(
        not line.strip() or line.strip() in template for line in text.split("\n")
    )


def not_loaded_summary(items: Iterable[tuple[str, str]], per_folder: int) -> str:
    """What was cut, bounded whatever its number: per folder a count for each reason and the
    first `per_folder` names (newest first, as the caps cut them), at most MAX_FOLDERS folders."""
    groups: dict[str, dict[str, list[str]]] = {}
    for path, why in items:  # ~1,800 on 10,000 memories: no empty dict or list made per item
        folder, _, name = path.rpartition("/")
        reasons = groups.get(folder)
        if reasons is None:
            groups[folder] = {why: [name]}
        elif (names := reasons.get(why)) is None:
            reasons[why] = [name]
        else:
            names.append(name)
    ranked = sorted(groups.items(), key=lambda kv: -sum(map(len, kv[1].values())))
    parts = []
    for folder, reasons in ranked[:MAX_FOLDERS]:
        described = []
        for why, names in reasons.items():
            shown = ", ".join(names[:per_folder]) + (", …" if len(names) > per_folder else "")
            count = f"{len(names):,} " if folder else ""
            described.append(f"{count}{why}: {shown}" if folder else f"{shown} ({why})")
        parts.append(f"{folder}/ ({'; '.join(described)})" if folder else "; ".join(described))
    rest = ranked[MAX_FOLDERS:]
    if rest:
        n = sum(len(names) for _, reasons in rest for names in reasons.values())
        parts.append(f"and {n:,} more in {len(rest):,} other folders")
    return "; ".join(parts)


def _rendered(e: Entry) -> str:
    """An entry as `to_markdown` prints it: its `### heading`, then its text."""
    return f"### {_heading(e)}\n\n{e.text.strip()}\n"


def _heading(e: Entry) -> str:
    """`path (tier)`; a topic's found lines name their lines and `[HH:MM]` heading."""
    if e.section == "found":
        return f"{e.title} ({e.why})" if e.why else e.title
    return f"{e.path} ({e.tier})" if e.tier else e.path


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


def newest(mem: MemoryDoc) -> tuple[datetime, str]:
    """The order memories load in, newest first (reversed): recorded, then path."""
    return mem.recorded, mem.path


def choose(
    mems: Iterable[MemoryDoc],
    topic: str | None,
    caps: Caps,
    shares: Mapping[str, float] | None = None,
    texts: Mapping[str, str] | None = None,
    ordered: bool = False,
) -> tuple[list[tuple[MemoryDoc, str]], list[tuple[str, str]]]:
    """Pick memories by tier and relevance, newest first, within both caps (pure).

    `shares` (path: relevance from the search ranking) replaces the word-share relevance;
    `texts` (path: best lines) stands for a long memory's body in the budget. `ordered`: `mems`
    come newest first already (`Reader.candidates`), so what it picks is not sorted again."""
    topic_words = words(topic or "")
    picked: list[tuple[MemoryDoc, str, float]] = []  # the reason is worded for those kept
    cut: list[tuple[str, str]] = []
    over = f"over memory.max_entries {caps.max_entries}"
    tail: list[tuple[str, str]] = []  # ordered: what is picked after max_entries, cut as met
    full = caps.max_entries if ordered else -1
    for mem in mems:
        tier = mem.tier
        if tier == "hot":
            if len(picked) == full:
                tail.append((mem.path, over))
            else:
                picked.append((mem, tier, 1.0))
            continue
        if tier == "archive":
            continue  # never loaded, and not news to anyone
        if shares is not None:
            score, asked = shares.get(mem.path, 0.0), True
        else:
            score, asked = relevance(topic_words, mem), bool(topic_words)
        need = RELEVANT if tier == "warm" else HIGHLY_RELEVANT
        if asked and score >= need:
            if len(picked) == full:
                tail.append((mem.path, over))
            else:
                picked.append((mem, tier, score))
    if not ordered:
        picked.sort(key=lambda pair: newest(pair[0]), reverse=True)
    kept, used = [], 0
    budget_cut = f"over memory.budget_chars {caps.budget_chars}"
    for mem, tier, score in picked[: caps.max_entries]:  # `texts` (lazy): only what it must
        best = texts.get(mem.path) if texts is not None else None  # no len(): lazy
        size = mem.size if best is None else len(best)
        if used + size > caps.budget_chars:
            cut.append((mem.path, budget_cut))
        else:
            kept.append((mem, "hot" if tier == "hot" else f"{tier}, relevance {score:.2f}"))
            used += size
    cut += [(mem.path, over) for mem, _, _ in picked[caps.max_entries :]]
    return kept, cut + tail


def _foundation_paths(ws: Workspace, audience: Audience, now: datetime) -> list[tuple[str, str]]:
    today = ws.today(now)
    paths = [(WORKING_MEMORY, "main session")] if audience.kind == "main" else []
    paths += [(p, "every session") for p in EVERY_SESSION]
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


class Reader:
    """Where a context reads the workspace: each read fresh, as a CLI process makes it once.
    A long-lived server keeps what it read between calls instead (session.py)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    @contextmanager
    def ranking(self, topic: str, now: datetime) -> Iterator[Ranking]:
        """The search ranking of every line for the topic, the index refreshed first."""
        from crustacean.recall.search import SearchIndex

        with SearchIndex(self.ws) as index:
            yield index.ranking(topic, now)

    def memories(self, ranking: Ranking | None) -> tuple[list[MemoryDoc], list[tuple[str, str]]]:
        """The memories a context may pick (every one but the archived with a topic), and the
        problems of every memory file (memory_index.py)."""
        scanned = ranking.index.scanned if ranking is not None else None
        return load_memories(self.ws, bodies=False, topic=ranking is not None, scanned=scanned)

    def document(self, rel: str) -> Document:
        """A foundation file, one bad byte read as U+FFFD (`DocumentSkipped` when unusable)."""
        return read_document(self.ws.root, rel, lenient=True)

    def body(self, mem: MemoryDoc) -> Document:
        """The document of a memory the context loads."""
        return mem.doc

    def loaded(self, text: str) -> str:
        """`loadable(text)`."""
        return loadable(text)

    def record(self, paths: list[str], now: datetime) -> None:
        """A recall of each memory the context loaded."""
        from crustacean.state import open_state

        with open_state(self.ws) as db:
            db.record_recalls(paths, now, "context")

    def long_paths(self, mems: list[MemoryDoc]) -> AbstractSet[str]:
        """The paths of the memories over LONG_CHARS: a topic loads their best lines."""
        return {m.path for m in mems if m.size > LONG_CHARS}

    def candidates(self, mems: list[MemoryDoc], shares: Mapping[str, float]) -> list[MemoryDoc]:
        """The memories a topic can pick, newest first (`newest`): hot ones, and the others
        whose share is at least RELEVANT (`choose` drops the rest, and any below it), so
        10,000 memories are not weighed one by one."""
        found = [m for m in mems if shares.get(m.path, 0.0) >= RELEVANT or m.tier == "hot"]
        return sorted(found, key=newest, reverse=True)


def assemble(
    ws: Workspace,
    audience: Audience,
    topic: str | None,
    caps: Caps,
    now: datetime,
    reader: Reader | None = None,
) -> Context:
    """Read the workspace and build the context; no side effects (the caller records recalls)
    but the search index's refresh."""
    reader = reader if reader is not None else Reader(ws)
    if topic and topic.strip():
        with reader.ranking(topic, now) as ranking:
            return _assemble(ws, audience, topic, caps, now, ranking, reader)
    return _assemble(ws, audience, topic, caps, now, None, reader)


def _assemble(
    ws: Workspace,
    audience: Audience,
    topic: str | None,
    caps: Caps,
    now: datetime,
    ranking: Ranking | None,
    reader: Reader,
) -> Context:
    entries: list[Entry] = []
    not_loaded: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    used = 0
    room = caps.foundation_chars
    if caps.whole and topic:  # a topic asked within a whole budget: half of it is the topic's
        room = min(room, caps.budget_chars // 2)
    for rel, why in _foundation_paths(ws, audience, now):
        if not (ws.root / rel).is_file():
            continue  # a missing file is normal (no log yet today); nothing to load
        try:
            doc = reader.document(rel)  # one bad byte hides nothing
        except DocumentSkipped as e:
            problems.append((rel, e.reason))
            continue
        text = reader.loaded(doc.text)
        if not text:
            continue  # a template never filled in: only comments and empty headings
        if topic and untouched(rel, doc.text):
            not_loaded.append((rel, UNTOUCHED))  # nothing about the user: the topic's room
            continue
        if used + len(text) > room:
            cap = "context.foundation_chars" if room == caps.foundation_chars else "half the budget"
            not_loaded.append((rel, f"over {cap} {room}"))
            continue
        used += len(text)
        entries.append(Entry(rel, "foundation", rel, text, why))
    limit = caps.budget_chars if caps.whole else None
    if caps.whole:  # what the foundation took is not left for memories and found lines
        caps = replace(caps, budget_chars=max(caps.budget_chars - used - WHOLE_OVERHEAD, 0))
    mems, bad = reader.memories(ranking)
    problems += bad
    person = _person_file(mems, audience)
    if person is not None:
        doc = reader.body(person)
        entries.append(
            Entry(
                person.path, "person", doc.name, reader.loaded(doc.body), str(audience), person.tier
            )
        )
    elif audience.kind in ("dm", "group"):
        not_loaded.append((f"{audience.kind}:{audience.name}", "no matching file"))
    shares = texts = None
    if ranking is not None:
        shares = ranking.best_shares()
        rest = [m for m in reader.candidates(mems, shares) if m is not person]
        long = reader.long_paths(mems)  # every memory in `shares` is a candidate
        texts = _BestLines(ranking, long - {person.path} if person else long, shares)
    else:
        rest = [m for m in mems if m is not person]
    kept, cut = choose(rest, topic, caps, shares, texts, ordered=ranking is not None)
    spent = 0
    for mem, why in kept:
        section = "lesson" if mem.path.startswith("memory/lessons/") else "memory"
        doc = reader.body(mem)
        best = texts.get(mem.path) if texts is not None else None
        why += ", best lines for the topic" if best is not None else ""
        text = reader.loaded(best if best is not None else doc.body)
        entries.append(Entry(mem.path, section, doc.name, text, why, mem.tier))
        spent += len(text)
    ctx = Context(
        audience, topic, tuple(entries), tuple(not_loaded + cut), tuple(problems), caps.listed_paths
    )
    if ranking is None:
        return ctx
    loaded = {e.path for e in entries}
    if limit is None:
        return replace(
            ctx, entries=ctx.entries + tuple(_found(ranking, loaded, caps.budget_chars - spent))
        )
    room = limit - len(ctx.to_markdown()) - len(f"## {HEADS['found']}\n") - 1  # the printed rest
    return replace(ctx, entries=ctx.entries + tuple(_found(ranking, loaded, room, room)))


class _BestLines(Mapping[str, str]):
    """A long memory's best windows for the topic, to load instead of the whole file: worked
    out on first lookup, since `choose` needs them only for the memories within max_entries
    (each costs the search index a few queries) and a memory's body is never read for it."""

    def __init__(self, ranking: Ranking, long: AbstractSet[str], shares: Mapping[str, float]):
        """`long`: the paths of the memories it may pick that are over LONG_CHARS."""
        self._long = dict.fromkeys(  # the relevant ones over LONG_CHARS: the only ones it holds
            path for path, share in shares.items() if share >= RELEVANT and path in long
        )
        self._ranking = ranking
        self._done: dict[str, str | None] = {}

    def __getitem__(self, path: str) -> str:
        if path not in self._done:
            hits = self._ranking.file_hits(path, WINDOW_CHARS) if path in self._long else []
            ordered = sorted(hits, key=_line)
            self._done[path] = "\n…\n".join(h.text for h in ordered) if hits else None
        found = self._done[path]
        if found is None:
            raise KeyError(path)
        return found

    def __iter__(self) -> Iterator[str]:
        return (path for path in self._long if path in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _line(hit: Hit) -> int:
    return hit.start_line


@functools.lru_cache(maxsize=1 << 15)
def _findable(path: str) -> bool:
    """A daily log or a file of knowledge/ (asked of ~1,000 paths per topic, kept per path)."""
    from crustacean.recall.search import log_day

    return path.startswith("knowledge/") or log_day(path) is not None


def _found(ranking: Ranking, loaded: set[str], budget: int, room: int | None = None) -> list[Entry]:
    """The topic's best lines in daily logs and knowledge/ not loaded yet, within `budget`
    characters of lines and, when `room` is given, `room` characters as printed (headings
    included): one entry a file (`_packed`), the files in the order of their best lines."""
    if budget <= 0:
        return []

    def keep(path: str) -> bool:
        return path not in loaded and _findable(path)

    if room is None:
        return _packed(ranking.hits(keep, budget))  # best first: the budget read only in part
    hits = ranking.hits(keep, budget, budget)  # packed, more than MAX_HITS windows may fit
    for _ in range(3):  # headings took part of `room`: ask for more lines while they fit
        fitted, used = _fill(hits, room)
        if room - used < FILL_SLACK or len(hits) == len(fitted):
            break
        budget += room - used
        more = ranking.hits(keep, budget, budget)
        if len(more) == len(hits):
            break
        hits = more
    return _packed(fitted)


def _fill(hits: list[Hit], room: int) -> tuple[list[Hit], int]:
    """The best hits whose packed entries print within `room` characters, and their size: a
    window that does not fit is left out, a smaller one after it may fit."""
    by_file: dict[str, list[Hit]] = {}
    sizes: dict[str, int] = {}
    used = 0
    for h in hits:
        mine = [*by_file.get(h.path, []), h]
        size = len(_rendered(_packed(mine)[0])) + 1  # + the newline joining it to the next
        if used - sizes.get(h.path, 0) + size > room:
            continue
        used += size - sizes.get(h.path, 0)
        by_file[h.path], sizes[h.path] = mine, size
    return [h for mine in by_file.values() for h in mine], used


def _packed(hits: list[Hit]) -> list[Entry]:
    """One entry per file for its windows, in line order, joined by a `…` line (touching ones
    made one), named `path#L3-L5, L9 (19:05)` as search names a window: one heading a file,
    not one a window, so the budget holds lines, not headings. Files in `hits`'s order."""
    by_file: dict[str, list[Hit]] = {}
    for h in hits:
        by_file.setdefault(h.path, []).append(h)
    out = []
    for path, mine in by_file.items():
        spans: list[tuple[int, int, str, list[str]]] = []  # first, last line, [HH:MM], texts
        for h in sorted(mine, key=_line):
            at = h.when.split()[-1] if h.when and " " in h.when else ""
            if spans and spans[-1][1] + 1 == h.start_line and spans[-1][2] == at:
                first, _, at, texts = spans.pop()
                spans.append((first, h.end_line, at, [*texts, h.text]))
            else:
                spans.append((h.start_line, h.end_line, at, [h.text]))
        times = {at for _, _, at, _ in spans}
        named = []
        for k, (first, last, at, _) in enumerate(spans):
            lines = f"L{first}" + (f"-L{last}" if last > first else "")
            if len(times) > 1 and at and (k + 1 == len(spans) or spans[k + 1][2] != at):
                lines += f" ({at})"  # several sessions: each run of windows says its time
            named.append(lines)
        why = next(iter(times)) if len(times) == 1 else ""
        text = "\n…\n".join("\n".join(t.strip("\n") for t in texts) for *_, texts in spans)
        out.append(Entry(path, "found", f"{path}#{', '.join(named)}", text, why))
    return out


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
            s.context.not_loaded_paths,
            whole=self.budget_chars is not None,
        )


def build_context(
    ws: Workspace,
    request: ContextRequest,
    now: datetime,
    for_name: str = "--for",
    reader: Reader | None = None,
) -> Context:
    """Assemble a context and record a recall for every memory it loaded; `reader` reads the
    workspace (default: everything fresh)."""
    reader = reader if reader is not None else Reader(ws)
    audience = parse_for(request.audience, for_name)
    ctx = assemble(ws, audience, request.topic, request.caps(ws), now, reader)
    if request.budget_chars is not None:
        ctx = ctx.within(request.budget_chars)
    if ctx.memory_paths:
        reader.record(ctx.memory_paths, now)
    return ctx
