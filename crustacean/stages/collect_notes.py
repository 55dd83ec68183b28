"""The pieces collect is made of: what is new in the transcripts, chunks with message refs,
the `record_notes` request, binding cited notes to their messages, the append and the pending
batch that makes it crash-safe. `collect.py` runs them directly; `collect_batch.py` runs them
through the Message Batches API (so neither imports the other)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from crustacean import daily
from crustacean.config import SourceConfig
from crustacean.errors import UsageError
from crustacean.llm.loop import StageRequest, min_cacheable_tokens
from crustacean.llm.runner import model_for, plan_stage
from crustacean.llm.stage_tools import CATEGORIES, RECORD_NOTES
from crustacean.source_roots import source_roots
from crustacean.sources import Cursor, Message, ReadResult, cursor_before, discover, read_new
from crustacean.sources.base import mtime_of
from crustacean.sources.openclaw import is_copy
from crustacean.state import StateDB, from_db_time
from crustacean.store.changes import Change, sha256_hex
from crustacean.workspace import Workspace, stage_doc

STAGE = "collect"
LOOKBACK = timedelta(days=2)  # upstream: read the last ~2 days; the cursor saves re-reading
UNTAGGED = {"fact"}
CHUNK_CHARS = 60_000
KNOWN_DAYS_CHARS = 12_000
WHEN_SLACK = timedelta(minutes=1)  # the transcript shows times to the minute
ID_RETENTION = timedelta(days=400)  # ids of collected messages: a --since backfill skips them
_REF = re.compile(r"^\[?\s*m(\d+)\s*\]?$", re.IGNORECASE)
_LEAD = re.compile(
    r"^(?:\s*(?:[-*+•]|\d+[.)])\s+|\s*\[(?:" + "|".join(CATEGORIES) + r")\]\s*)+", re.IGNORECASE
)


# ------------------------------------------------------------ the pre-pass


@dataclass
class FileRead:
    path: Path
    kind: str
    source: str
    result: ReadResult


@dataclass
class Intake:
    """What the sources hold that was not collected yet, once per message id."""

    files: list[FileRead] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    copies: int = 0  # messages met again in another file (checkpoint, reset) this run
    waiting: int = 0  # messages already in a submitted batch
    bad_lines: int = 0
    missing_sources: list[str] = field(default_factory=list)


def select_sources(sources: list[SourceConfig], name: str | None) -> list[SourceConfig]:
    if name is None:
        return sources
    chosen = [s for s in sources if name in (s.name, s.kind, s.path)]
    if not chosen:
        if not sources:
            raise UsageError(
                f"no source named {name!r}: no sources are configured; add a [[sources]] "
                "table (kind, path) to crustacean.toml, or drop --source."
            )
        known = ", ".join(s.name or s.kind for s in sources)
        raise UsageError(f"no source named {name!r}; sources: {known}.")
    return chosen


def new_file_floor(last_run: datetime | None, now: datetime) -> datetime:
    """How far back a file without a cursor is read: the window before the last run that
    moved cursors (the first run: before now), so a gap between runs loses nothing."""
    return min(last_run or now, now) - LOOKBACK


def once_per_id(messages: Iterable[Message]) -> list[Message]:
    """One message per stable id, the live file's copy first; in time order."""
    pick: dict[str, Message] = {}
    for m in sorted(messages, key=lambda m: (is_copy(m.path), m.timestamp, m.path, m.line)):
        pick.setdefault(m.id, m)
    return sorted(pick.values(), key=lambda m: (m.timestamp, m.path, m.line))


def gather(
    ws: Workspace,
    db: StateDB,
    now: datetime,
    since: datetime | None = None,
    source: str | None = None,
) -> Intake:
    """Read every configured source from its cursor; keep each new, uncollected message once.

    `since` (an explicit `--since`) reads every file from its start, since a cursor also moved
    past lines older than an earlier run's window; ids keep anything from repeating."""
    intake = Intake()
    cursors = {} if since is not None else load_cursors(db)
    floor = since if since is not None else new_file_floor(last_cursor_run(db), now)
    for src in select_sources(ws.settings.sources, source):
        found = discover(src, base=ws.root)
        if not found:
            intake.missing_sources.append(src.path)
        for path, kind in found:
            if kind == "unknown" or _is_workspace_log(ws, path):
                continue
            cursor = cursors.get(str(path))
            if cursor is None and mtime_of(path) < floor:
                continue  # untouched since before the window: nothing in it is due
            result = read_new(path, kind, cursor, since=floor if cursor is None else None)
            intake.files.append(FileRead(path, kind, src.name or src.kind, result))
            intake.bad_lines += result.bad_lines
    everything = [m for f in intake.files for m in f.result.messages]
    unique = once_per_id(everything)
    intake.copies = len(everything) - len(unique)
    seen, waiting = collected_ids(db), waiting_ids(db)
    intake.waiting = sum(1 for m in unique if m.id in waiting and m.id not in seen)
    intake.messages = [m for m in unique if m.id not in seen and m.id not in waiting]
    return intake


def _is_workspace_log(ws: Workspace, path: Path) -> bool:
    """Daily logs and session-memory hook files are never read as transcripts."""
    try:
        rel = path.resolve().relative_to(ws.root.resolve())
    except ValueError:
        return False
    return rel.parts[:1] == ("memory",) and daily.is_dated_name(rel.name)


def cursors_after(files: Iterable[FileRead], done: set[str]) -> list[Cursor]:
    """Each file's cursor, moved only past messages that are collected (`done`).

    A file whose messages were not all sent stops just before the first one that was not, so
    the next run reads it again from there, whatever its age; a note (no lines) gets a cursor
    that matches no file, so it is read whole again."""
    out = []
    for f in files:
        pending = [m for m in f.result.messages if m.id not in done]
        if not pending:
            out.append(f.result.cursor)
        elif f.kind == "plain":
            out.append(replace(f.result.cursor, size=-1))  # matches no file: read it again
        else:
            try:
                out.append(cursor_before(f.result.cursor, min(pending, key=lambda m: m.offset)))
            except OSError:
                continue  # gone since it was read: the old cursor stays
    return out


# ------------------------------------------------------------ state: cursors, ids, batches


def load_cursors(db: StateDB) -> dict[str, Cursor]:
    rows = db.conn.execute(
        "SELECT path, device, inode, offset, size, head_hash, lines, mtime_ns FROM collect_cursors"
    ).fetchall()
    return {r[0]: Cursor(*r) for r in rows}


def collected_ids(db: StateDB) -> set[str]:
    return {r[0] for r in db.conn.execute("SELECT id FROM collect_ids")}


def waiting_ids(db: StateDB) -> set[str]:
    """Ids of messages sent in a batch whose results were not appended yet."""
    out: set[str] = set()
    for (payload,) in db.conn.execute("SELECT payload FROM collect_sent_batches"):
        for refs in json.loads(payload)["chunks"].values():
            out.update(r["id"] for r in refs.values())
    return out


def last_cursor_run(db: StateDB) -> datetime | None:
    """Start of the latest real collect run that moved cursors."""
    row = db.conn.execute(
        "SELECT max(started) FROM run_records WHERE stage = ? AND dry_run = 0 "
        "AND status IN ('ok', 'partial', 'skipped')",
        (STAGE,),
    ).fetchone()
    return from_db_time(row[0]) if row else None


def save_pending(
    db: StateDB,
    key: str,
    marker: str,
    ids: Iterable[str],
    cursors: Iterable[Cursor],
    now: datetime,
    batch_id: str | None = None,
) -> None:
    payload = {
        "ids": list(ids),
        "cursors": [c.__dict__ for c in cursors],
        "marker": marker,
        "batch_id": batch_id,
    }
    with db.transaction() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO collect_batches (run_id, created, payload) VALUES (?, ?, ?)",
            (key, now.isoformat(), json.dumps(payload)),
        )


def finish_batch(
    db: StateDB,
    key: str,
    cursors: Iterable[Cursor],
    ids: Iterable[str],
    now: datetime,
    batch_id: str | None = None,
) -> None:
    """Advance cursors and remember ids, in one transaction, after the append is committed."""
    with db.transaction() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO collect_cursors (path, device, inode, offset, size, "
            "head_hash, lines, mtime_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (c.path, c.device, c.inode, c.offset, c.size, c.head_hash, c.lines, c.mtime_ns)
                for c in cursors
            ],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO collect_ids (id, collected) VALUES (?, ?)",
            [(i, now.isoformat()) for i in ids],
        )
        conn.execute("DELETE FROM collect_batches WHERE run_id = ?", (key,))
        if batch_id is not None:
            conn.execute("DELETE FROM collect_sent_batches WHERE batch_id = ?", (batch_id,))
        conn.execute(
            "DELETE FROM collect_ids WHERE collected < ?", ((now - ID_RETENTION).isoformat(),)
        )


def recover_batches(ws: Workspace, db: StateDB, now: datetime) -> list[str]:
    """Finish batches whose append landed before a crash; drop the others."""
    done = []
    for key, payload in db.conn.execute("SELECT run_id, payload FROM collect_batches").fetchall():
        data = json.loads(payload)
        marker = data.get("marker") or f"run={key} "
        if _appended(ws, marker):
            cursors = [Cursor(**c) for c in data["cursors"]]
            finish_batch(db, key, cursors, data["ids"], now, data.get("batch_id"))
            done.append(key)
        else:
            with db.transaction() as conn:
                conn.execute("DELETE FROM collect_batches WHERE run_id = ?", (key,))
    return done


def _appended(ws: Workspace, marker: str) -> bool:
    needle = marker.encode()
    folder = ws.root / ws.daily_dir
    return any(
        needle in p.read_bytes()
        for p in folder.glob("*.md")
        if daily.is_log_name(p.name) and p.is_file()
    )


def direct_marker(run_id: str) -> str:
    return f"run={run_id} session="


# ------------------------------------------------------------ the request


@dataclass(frozen=True)
class Chunk:
    """One request's transcript text and the messages its references stand for."""

    text: str
    refs: dict[str, Message]

    @property
    def sessions(self) -> set[str]:
        return {m.session for m in self.refs.values()}


def _head(m: Message) -> str:
    return f"## {m.source} · session {m.session}"


def build_chunks(messages: list[Message], tz: tzinfo, limit: int) -> list[Chunk]:
    """Session blocks of `[m12 YYYY-MM-DD HH:MM] role: text` lines, packed under `limit`
    characters; every chunk starts with the header of the session it opens with, and a
    session split across chunks gets its header again."""
    sessions: dict[tuple[str, str], list[Message]] = defaultdict(list)
    for m in messages:
        sessions[(m.source, m.session)].append(m)
    out: list[Chunk] = []
    lines: list[str] = []
    refs: dict[str, Message] = {}
    size, n = 0, 0
    for group in sessions.values():
        opened = False
        for m in group:
            n += 1
            stamp = m.timestamp.astimezone(tz).strftime("%Y-%m-%d %H:%M")
            line = f"[m{n} {stamp}] {m.role}: {m.text}"
            if lines and size + len(line) + 1 > limit:
                out.append(Chunk("\n".join(lines), refs))
                lines, refs, size, opened = [], {}, 0, False
            if not opened:
                head = ("\n" if lines else "") + _head(m)
                lines.append(head)
                size += len(head) + 1
                opened = True
            lines.append(line)
            refs[f"m{n}"] = m
            size += len(line) + 1
    if lines:
        out.append(Chunk("\n".join(lines), refs))
    return out


def known_days(ws: Workspace, read: Callable[[str], bytes | None], chunk: Chunk) -> str:
    """The daily logs of the (latest two) days the chunk's messages fall on."""
    days = sorted({m.timestamp.astimezone(ws.tz).date() for m in chunk.refs.values()})[-2:]
    parts = []
    for day in days:
        data = read(ws.daily_log(day))
        if data:
            parts.append(f"### {ws.daily_log(day)}\n" + data.decode("utf-8", "replace"))
    return "\n\n".join(parts)[-KNOWN_DAYS_CHARS:]


def build_request(ws: Workspace, chunk: str, known: str) -> StageRequest:
    prompt = (
        "New conversation text since the last run follows. Every message starts with its "
        "reference, like [m12 2026-11-30 09:01]. Record what is worth remembering with one call "
        "to record_notes; give each item the references of the messages it comes from. Skip "
        "anything already in the daily logs shown after it.\n\n"
        f"<transcripts>\n{chunk}\n</transcripts>\n\n"
        f"<already-in-daily-logs>\n{known or '(nothing yet)'}\n</already-in-daily-logs>"
    )
    model = model_for(ws, STAGE)[0]
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "COLLECT.md"),
        prompt=prompt,
        tools=(),
        extra_tools=(RECORD_NOTES,),
        tool_choice={"type": "tool", "name": RECORD_NOTES.name},
        max_tokens=4096,
        cache_prompt=False,  # each chunk is sent once: only the stable prefix is worth caching
        min_cache_tokens=min_cacheable_tokens(model),
    )


def chunk_limit(ws: Workspace) -> int:
    return max(4_000, min(CHUNK_CHARS, ws.settings.budget.max_input_tokens * 4 // 3))


def estimate_tokens(ws: Workspace, req: StageRequest) -> int:
    return plan_stage(ws, req).est_input_tokens


# ------------------------------------------------------------ binding items to messages


@dataclass(frozen=True)
class Item:
    category: str
    text: str
    when: datetime
    session: str
    source: str
    path: str
    topic: str


@dataclass
class Bound:
    """What one chunk's answer gave: items bound to messages, and what was refused and why."""

    items: list[Item] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    unbound: int = 0  # cited nothing valid; given to the chunk's only session
    fatal: str | None = None


def clean_text(text: str) -> str:
    """The item text without bullets or category tags the model may have copied."""
    return " ".join(_LEAD.sub("", text).split())[:500]


def normalize(text: str) -> str:
    """What two bullets must share to be the same item: no tags, bullets, case or spacing."""
    return clean_text(text).casefold().rstrip(" .!;:")


def parse_when(value: object, tz: tzinfo) -> datetime | None:
    """A time the model gave: `Z` and offsets are instants; a bare time is workspace time."""
    if not isinstance(value, str):
        return None
    text = re.sub(r"^m\d+\s+", "", value.strip().strip("[]").strip())
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)).astimezone(UTC)


def cited(value: object, refs: Mapping[str, Message]) -> list[Message]:
    """The chunk's messages an item names (`m12`, `[m12]`, or a comma list)."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list):
        return []
    out = []
    for name in names:
        match = _REF.match(str(name).strip()) if isinstance(name, str | int) else None
        ref = f"m{match.group(1)}" if match else ""
        if ref in refs and refs[ref] not in out:
            out.append(refs[ref])
    return out


def bind_items(raw: object, refs: Mapping[str, Message], tz: tzinfo) -> Bound:
    """Validate the model's items and bind each to the messages it cites (pure)."""
    bound = Bound()
    if not isinstance(raw, list):
        bound.rejected["items was not a list"] += 1
        return bound
    sessions = {m.session for m in refs.values()}
    for n, entry in enumerate(raw, 1):
        if not isinstance(entry, dict):
            bound.rejected["not an object"] += 1
            continue
        category, text = entry.get("category"), entry.get("text")
        if category not in CATEGORIES:
            bound.rejected["unknown category"] += 1
            continue
        if not isinstance(text, str) or not clean_text(text):
            bound.rejected["no text"] += 1
            continue
        sources = cited(entry.get("refs"), refs)
        if not sources:
            if len(sessions) != 1:
                bound.fatal = (
                    f"item {n} cites no message of its chunk, which holds {len(sessions)} "
                    "sessions, so its session is unknown"
                )
                return bound
            sources = sorted(refs.values(), key=lambda m: m.timestamp)
            bound.unbound += 1
        bound.items.append(_item(entry, category, text, sources, tz))
    return bound


def _item(
    entry: dict[str, Any], category: str, text: str, sources: list[Message], tz: tzinfo
) -> Item:
    first = min(sources, key=lambda m: m.timestamp)
    last = max(m.timestamp for m in sources)
    when = parse_when(entry.get("when"), tz)
    if when is None or not first.timestamp - WHEN_SLACK <= when <= last + WHEN_SLACK:
        when = first.timestamp  # a time outside the cited messages is not trusted
    topic = entry.get("topic") if isinstance(entry.get("topic"), str) else ""
    return Item(
        category,
        clean_text(text),
        when,
        first.session,
        first.source,
        first.path,
        " ".join(str(topic).split())[:60],
    )


# ------------------------------------------------------------ the post-pass


@dataclass
class Appended:
    changes: list[Change]
    appended: int
    duplicates: int
    by_day: dict[str, int]


def bullet(item: Item) -> str:
    return f"- {item.text}" if item.category in UNTAGGED else f"- [{item.category}] {item.text}"


def append_changes(
    ws: Workspace,
    read: Callable[[str], bytes | None],
    items: list[Item],
    marker: str,
) -> Appended:
    """One append per day file, blocks by session in time order; an item whose normalized text
    the day (or this run) already has is merged into it, not written again."""
    grouped: dict[str, dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
    for item in sorted(items, key=lambda i: i.when):
        grouped[item.when.astimezone(ws.tz).date().isoformat()][item.session].append(item)
    out = Appended([], 0, 0, {})
    for day in sorted(grouped):
        path = daily.log_path(ws.daily_dir, day)
        current = read(path)
        have = {normalize(line) for line in (current or b"").decode("utf-8", "replace").split("\n")}
        text = []
        for session, group in grouped[day].items():
            fresh = []
            for item in group:
                key = normalize(item.text)
                if key in have:
                    out.duplicates += 1
                    continue
                have.add(key)
                fresh.append(item)
            if fresh:
                text.append(_block(ws, session, fresh, marker) + "\n")
        if not text:
            continue
        count = sum(block.count("\n- ") for block in text)
        out.appended += count
        out.by_day[path] = count
        lead = "" if not current or current.endswith(b"\n\n") else "\n"
        if current is None:
            lead = f"# {day}\n\n"
        body = (lead + "\n".join(text)).encode()
        sha = sha256_hex(current) if current is not None else None
        out.changes.append(Change(path, "append", content=body, expected_sha256=sha))
    return out


def _block(ws: Workspace, session: str, group: list[Item], marker: str) -> str:
    hhmm = group[0].when.astimezone(ws.tz).strftime("%H:%M")
    topic = next((i.topic for i in group if i.topic), "") or f"{group[0].source} session"
    where = provenance(group[0].path, session, source_roots(ws.root, ws.settings.sources))
    header = f"### [{hhmm}] {topic}\n<!-- collect {marker}{session}{where} -->"
    return header + "\n\n" + "\n".join(bullet(i) for i in group)


def provenance(path: str, session: str, roots: list[str]) -> str:
    """The block's ` source=…` relative to its source's root ("" when the file is just
    `<session>.jsonl`: the session id says it all), never the transcript's absolute path, which
    is noise in a file the agent loads every session (pure, for tests)."""
    posix = path.replace("\\", "/")
    inside = [r for r in roots if r and posix.startswith(r.rstrip("/") + "/")]
    rel = posix[len(max(inside, key=len).rstrip("/")) + 1 :] if inside else posix.rpartition("/")[2]
    return "" if rel.rpartition("/")[2].rsplit(".", 1)[0] == session else f" source={rel}"
