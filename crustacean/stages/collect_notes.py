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
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from crustacean import daily
from crustacean.config import SourceConfig
from crustacean.errors import UsageError
from crustacean.llm.loop import StageRequest, build_params, min_cacheable_tokens
from crustacean.llm.runner import ModelSession, model_for
from crustacean.llm.stage_tools import CATEGORIES, RECORD_NOTES
from crustacean.runs import one_line
from crustacean.secrets import find_secrets, redact
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
CHUNK_CHARS = 60_000  # fewer, larger requests: the fixed prefix is paid once per chunk
EARLIER_CHARS = 6_000  # the items earlier chunks of the run gave for the chunk's days
OUTPUT_PER_TOKEN = 0.6  # output budget per token of chunk text: room for one item per fact
MIN_OUTPUT, MAX_OUTPUT = 4096, 32_000
NEAR_BUDGET = 0.8  # an answer using this share of its max_tokens is logged in the run record
WORTH_A_CALL = 6  # a scheduled run waits until the new text is this many times the prefix
PLAUSIBLE_BEFORE = timedelta(days=2 * 366)  # a `when` this long before the first message is absurd
PLAUSIBLE_AFTER = timedelta(days=20 * 366)  # ... or this long after its message
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


def build_chunks(messages: list[Message], tz: tzinfo, limit: int) -> list[Chunk]:
    """Session blocks of `m12 HH:MM role: text` lines under a `-- YYYY-MM-DD Mon` line per
    day (local time), packed under `limit` characters; every chunk starts with the header of
    the session it opens with, and a session split across chunks gets its header again."""
    sessions: dict[tuple[str, str], list[Message]] = defaultdict(list)
    for m in messages:
        sessions[(m.source, m.session)].append(m)
    out: list[Chunk] = []
    lines: list[str] = []
    refs: dict[str, Message] = {}
    size, n = 0, 0
    for group in sessions.values():
        opened, day = False, None
        for m in group:
            n += 1
            local = m.timestamp.astimezone(tz)
            line = f"m{n} {local:%H:%M} {m.role}: {m.text}"
            if lines and size + len(line) + 1 > limit:
                out.append(Chunk("\n".join(lines), refs))
                lines, refs, size, opened = [], {}, 0, False
            if not opened:
                head = ("\n" if lines else "") + f"## {m.source} · session {m.session}"
                lines.append(head)
                size += len(head) + 1
                opened, day = True, None
            if local.date() != day:
                day = local.date()
                lines.append(f"-- {day.isoformat()} {day:%a}")
                size += len(lines[-1]) + 1
            lines.append(line)
            refs[f"m{n}"] = m
            size += len(line) + 1
    if lines:
        out.append(Chunk("\n".join(lines), refs))
    return out


def earlier_items(items: list[Item], chunk: Chunk, tz: tzinfo) -> str:
    """What earlier chunks of this run noted for the days this chunk's messages fall on, so
    the model does not note a fact twice and can mark a contradiction (the daily logs of
    earlier runs are not sent: their messages are never sent again, and code merges repeats)."""
    days = {m.timestamp.astimezone(tz).date() for m in chunk.refs.values()}
    by_day: dict[date, list[str]] = defaultdict(list)
    for item in items:
        said = item.when.astimezone(tz).date()
        if said in days:
            by_day[said].append(bullet(item))
    parts = [f"-- {day.isoformat()}\n" + "\n".join(by_day[day]) for day in sorted(by_day)]
    return "\n".join(parts)[-EARLIER_CHARS:]


def zone_line(tz: tzinfo, moment: datetime) -> str:
    """The workspace's zone, as the request names it (times in the text are local)."""
    local = moment.astimezone(tz)
    offset = local.strftime("%z")
    name = getattr(tz, "key", None) or local.tzname() or "UTC"
    return f"{name} (UTC{offset[:3]}:{offset[3:]})"


def output_budget(text: str) -> int:
    """max_tokens for a chunk: in proportion to its text, so a dense chunk has room for one
    item per fact (the model pays only for what it writes)."""
    return max(MIN_OUTPUT, min(MAX_OUTPUT, int(len(text) / 4 * OUTPUT_PER_TOKEN)))


def build_request(ws: Workspace, chunk: Chunk, earlier: str = "") -> StageRequest:
    first = min((m.timestamp for m in chunk.refs.values()), default=datetime.now(UTC))
    noted = (
        f"\n\n<noted-earlier-this-run>\n{earlier}\n</noted-earlier-this-run>\n"
        "These came from earlier text of this run: do not note them again; mark a new item "
        "that contradicts one in `conflicts`."
        if earlier
        else ""
    )
    prompt = (
        "New conversation text since the last run follows, one message a line "
        f"(`m12 09:01 user: …`), in the workspace's zone, {zone_line(ws.tz, first)}. Record "
        "every concrete fact worth remembering with one call to record_notes, one fact per "
        "item, each citing its messages.\n\n"
        f"<transcripts>\n{chunk.text}\n</transcripts>{noted}"
    )
    model = model_for(ws, STAGE)[0]
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "COLLECT.md"),
        prompt=prompt,
        tools=(),
        extra_tools=(RECORD_NOTES,),
        tool_choice={"type": "tool", "name": RECORD_NOTES.name},
        max_tokens=output_budget(chunk.text),
        cache_prompt=False,  # each chunk is sent once: only the stable prefix is worth caching
        min_cache_tokens=min_cacheable_tokens(model),
    )


def prefix_chars(ws: Workspace) -> int:
    """The characters every request repeats: preamble, COLLECT.md and the tool's schema."""
    params = build_params(build_request(ws, Chunk("", {})), "", [])
    return len(params["system"][0]["text"]) + len(json.dumps(params["tools"]))


def worth_a_call(ws: Workspace) -> int:
    """How much new text a scheduled run waits for: the prefix is then a small share."""
    return WORTH_A_CALL * prefix_chars(ws)


def first_day(ws: Workspace, messages: Iterable[Message]) -> date | None:
    """The workspace's first message: its oldest daily log or the oldest message at hand."""
    days = [d for p in (ws.root / ws.daily_dir).glob("*.md") if (d := daily.log_day(p.name))]
    days += [m.timestamp.astimezone(ws.tz).date() for m in messages]
    return min(days, default=None)


def chunk_limit(ws: Workspace) -> int:
    return max(4_000, min(CHUNK_CHARS, ws.settings.budget.max_input_tokens * 4 // 3))


# ------------------------------------------------------------ binding items to messages


@dataclass(frozen=True)
class Item:
    """One note: filed under the day and time it was said (`when`, its first cited message);
    `event` is the day it happened when that is another day."""

    category: str
    text: str
    when: datetime
    session: str
    source: str
    path: str
    topic: str
    event: date | None = None
    date_doubt: str = ""
    conflicts: str = ""


@dataclass(frozen=True)
class BadItem:
    """An item of the model's answer that cannot land as it is: its number in the answer, its
    text and why; the model is told (and may correct it once), then it is set aside."""

    n: int
    text: str
    reason: str

    def line(self) -> str:
        return f"item {self.n} ({one_line(redact(self.text), 80)!r}): {self.reason}"


@dataclass
class Bound:
    """What one chunk's answer gave: items bound to messages, and what was refused and why."""

    items: list[Item] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    unbound: int = 0  # cited nothing valid; given to the chunk's only session
    bad: list[BadItem] = field(default_factory=list)
    bogus_refs: int = 0  # references naming no message of the chunk (next to valid ones too)


def clean_text(text: str) -> str:
    """The item text without bullets or category tags the model may have copied."""
    return " ".join(_LEAD.sub("", text).split())[:500]


def normalize(text: str) -> str:
    """What two bullets must share to be the same item: no tags, bullets, case or spacing."""
    return clean_text(text).casefold().rstrip(" .!;:")


def parse_when(value: object, tz: tzinfo) -> datetime | None:
    """A time the model gave: `Z` and offsets are instants; a bare time (or a bare date, at
    midnight) is workspace time."""
    if not isinstance(value, str):
        return None
    text = re.sub(r"^m\d+\s+", "", value.strip().strip("[]").strip())
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)).astimezone(UTC)


def event_day(value: object, said: datetime, tz: tzinfo, first: date | None) -> date | str | None:
    """The day an item's `when` names (None: none given, or the message's own day), or why it
    is refused: only a date that is no date, or one outside any plausible range (years before
    the workspace's first message, or decades after the message) is; past and future are both
    fine (pure)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    when = parse_when(value, tz)
    shown = one_line(str(value), 30)
    if when is None:
        return f"its when {shown!r} is not a date; give YYYY-MM-DD (or YYYY-MM-DD HH:MM)"
    day, own = when.astimezone(tz).date(), said.astimezone(tz).date()
    floor = min(first or own, own) - PLAUSIBLE_BEFORE
    if day < floor:
        return (
            f"its when {day} is years before this workspace's first message "
            f"({first or own}); leave when out and say the date in the text"
        )
    if day > own + PLAUSIBLE_AFTER:
        return f"its when {day} is decades after its message ({own}); check the year"
    return None if day == own else day


def cited_and_bogus(value: object, refs: Mapping[str, Message]) -> tuple[list[Message], list[str]]:
    """The chunk's messages an item names (`m12`, `[m12]`, or a comma list), and the names
    that name none of them."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list):
        return [], [] if value is None else [str(value)[:40]]
    out, bogus = [], []
    for name in names:
        match = _REF.match(str(name).strip()) if isinstance(name, str | int) else None
        ref = f"m{match.group(1)}" if match else ""
        if ref not in refs:
            bogus.append(str(name).strip()[:40])
        elif refs[ref] not in out:
            out.append(refs[ref])
    return out, bogus


def bind_items(
    raw: object, refs: Mapping[str, Message], tz: tzinfo, first: date | None = None
) -> Bound:
    """Validate the model's items and bind each to the messages it cites (pure). An item that
    cites no message of a chunk of several sessions, holds a credential or gives an absurd
    `when` (before `first`, the workspace's first day, by years) is `bad`: the rest still
    land."""
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
        sources, bogus = cited_and_bogus(entry.get("refs"), refs)
        bound.bogus_refs += len(bogus)
        found = find_secrets(clean_text(text))
        if found:
            kinds = ", ".join(sorted({f.kind for f in found}))
            why = f"its text holds a credential ({kinds}); give it again without the value"
            bound.bad.append(BadItem(n, text, why))
            continue
        if not sources:
            if len(sessions) != 1:
                what = f"its refs ({', '.join(bogus)}) name" if bogus else "it cites"
                why = (
                    f"{what} no message of this text, which holds {len(sessions)} sessions, "
                    "so its session is unknown; give the [mN] references of the messages it "
                    "comes from"
                )
                bound.bad.append(BadItem(n, text, why))
                continue
            sources = sorted(refs.values(), key=lambda m: m.timestamp)
            bound.unbound += 1
        said = min(sources, key=lambda m: m.timestamp)
        event = event_day(entry.get("when"), said.timestamp, tz, first)
        if isinstance(event, str):
            bound.bad.append(BadItem(n, text, event))
            continue
        bound.items.append(_item(entry, category, text, said, event))
    return bound


def _short(value: object, limit: int) -> str:
    return " ".join(value.split())[:limit] if isinstance(value, str) else ""


def _item(
    entry: dict[str, Any], category: str, text: str, said: Message, event: date | None
) -> Item:
    """Filed under the day and time of its first cited message: when it was said."""
    return Item(
        category,
        clean_text(text),
        said.timestamp,
        said.session,
        said.source,
        said.path,
        _short(entry.get("topic"), 60),
        event,
        clean_text(_short(entry.get("date_doubt"), 160)),
        clean_text(_short(entry.get("conflicts"), 160)),
    )


# ------------------------------------------------------------ the post-pass


@dataclass
class Appended:
    changes: list[Change]
    appended: int
    duplicates: int
    by_day: dict[str, int]


def bullet(item: Item) -> str:
    """The log line: its text carries the event's day when that is another day than the one
    it was said on, and the markers curate and compile read: `(date uncertain: …)`,
    `(conflicts with: …)`."""
    text = item.text
    if item.event is not None and item.event.isoformat() not in text:
        text += f" (on {item.event.isoformat()})"
    if item.date_doubt:
        text += f" (date uncertain: {item.date_doubt})"
    if item.conflicts:
        text += f" (conflicts with: {item.conflicts})"
    return f"- {text}" if item.category in UNTAGGED else f"- [{item.category}] {text}"


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
                key = normalize(bullet(item))
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


def write_appends(session: ModelSession, appended: Appended, message: str) -> None:
    """The day files' appends as one version, noted in the run record."""
    if appended.changes:
        changes, rec = appended.changes, session.rec
        written = session.store.write_context(
            changes, actor=STAGE, message=message, run_id=rec.record.id, max_files=len(changes)
        )
        rec.wrote(list(written.files), written.version, written.proposal)


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
