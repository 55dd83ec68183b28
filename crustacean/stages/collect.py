"""Stage 1, collect: new transcript text in, notable items appended to the daily logs.

Pre-pass (code): read every source from its cursor, keep complete new lines only, drop messages
already collected (by stable id), redact secrets. Nothing new: no model call, the run is
`skipped`. Model: one forced `record_notes` call per chunk of text. Post-pass (code): group items
by the day they happened (workspace time zone) and session, drop bullets the day already has,
append with provenance in one `write_context` call, then advance the cursors.

Crash safety: before the append, the batch (its message ids and new cursors) is stored as
pending; every block the append writes carries the run id. The next run finds a pending batch and
looks for its run id in the daily logs: found, the append happened and the batch is finished;
not found, the batch is dropped and its lines are read again. Either way nothing is lost or
collected twice.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from crustacean.config import SourceConfig
from crustacean.errors import UsageError
from crustacean.llm.loop import StageRequest
from crustacean.llm.runner import ModelSession, Plan, plan_stage, run_fields
from crustacean.llm.tools import ToolOutcome, ToolSpec
from crustacean.runs import RunRecord, RunRecorder
from crustacean.sources import Cursor, Message, ReadResult, discover, read_new
from crustacean.state import StateDB, open_state
from crustacean.store.changes import Change, sha256_hex
from crustacean.workspace import Workspace, stage_doc

STAGE = "collect"
LOOKBACK = timedelta(days=2)  # upstream: read the last ~2 days; the cursor saves re-reading
CATEGORIES = (
    "decision",
    "plan",
    "person",
    "preference",
    "fact",
    "reminder",
    "todo",
    "idea",
    "joke",
    "project",
)
UNTAGGED = {"fact"}
CHUNK_CHARS = 60_000
KNOWN_DAYS_CHARS = 12_000
FUTURE_SLACK = timedelta(minutes=5)
_HOOK_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}(-.+)?\.md$")

RECORD_NOTES = ToolSpec(
    "record_notes",
    "Record the notable items of the new conversation text. Call it once, with every item; "
    "an empty list is a fine answer when nothing is worth keeping.",
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "category": {"type": "string", "enum": list(CATEGORIES)},
                        "text": {"type": "string", "description": "One or two plain sentences."},
                        "when": {
                            "type": "string",
                            "description": "The [YYYY-MM-DD HH:MM] of the message it is from.",
                        },
                        "session": {"type": "string", "description": "The session id it is from."},
                        "topic": {
                            "type": "string",
                            "description": "Two to six words naming the conversation.",
                        },
                    },
                    "required": ["category", "text", "when", "session"],
                },
            }
        },
        "required": ["items"],
    },
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
    """What the sources hold that was not collected yet."""

    files: list[FileRead] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    bad_lines: int = 0
    missing_sources: list[str] = field(default_factory=list)

    @property
    def cursors(self) -> list[Cursor]:
        return [f.result.cursor for f in self.files]


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


def gather(
    ws: Workspace,
    db: StateDB,
    since: datetime,
    source: str | None = None,
    rescan: bool = False,
) -> Intake:
    """Read every configured source from its cursor; keep new, uncollected, recent messages.

    `rescan` (an explicit `--since`) reads every file from its start, since a cursor also moved
    past lines that were too old for an earlier run's window; ids keep anything from repeating."""
    intake = Intake()
    cursors = {} if rescan else load_cursors(db)
    seen = collected_ids(db)
    for src in select_sources(ws.settings.sources, source):
        found = discover(src, base=ws.root)
        if not found:
            intake.missing_sources.append(src.path)
        for path, kind in found:
            if kind == "unknown" or _is_workspace_log(ws, path):
                continue
            result = read_new(path, kind, cursors.get(str(path)), since=since)
            intake.files.append(FileRead(path, kind, src.name or src.kind, result))
            intake.bad_lines += result.bad_lines
            intake.messages += [m for m in result.messages if m.id not in seen]
    intake.messages.sort(key=lambda m: (m.timestamp, m.path, m.line))
    return intake


def _is_workspace_log(ws: Workspace, path: Path) -> bool:
    """Daily logs and session-memory hook files are never read as transcripts."""
    try:
        rel = path.resolve().relative_to(ws.root.resolve())
    except ValueError:
        return False
    return rel.parts[:1] == ("memory",) and bool(_HOOK_FILE.match(rel.name))


# ------------------------------------------------------------ state: cursors, ids, batches


def load_cursors(db: StateDB) -> dict[str, Cursor]:
    rows = db.conn.execute(
        "SELECT path, device, inode, offset, size, head_hash, lines, mtime_ns FROM collect_cursors"
    ).fetchall()
    return {r[0]: Cursor(*r) for r in rows}


def collected_ids(db: StateDB) -> set[str]:
    return {r[0] for r in db.conn.execute("SELECT id FROM collect_ids")}


def save_pending(db: StateDB, run_id: str, intake: Intake, now: datetime) -> None:
    payload = {
        "ids": [m.id for m in intake.messages],
        "cursors": [c.__dict__ for c in intake.cursors],
    }
    with db.transaction() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO collect_batches (run_id, created, payload) VALUES (?, ?, ?)",
            (run_id, now.isoformat(), json.dumps(payload)),
        )


def finish_batch(
    db: StateDB, run_id: str, cursors: Iterable[Cursor], ids: Iterable[str], now: datetime
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
        conn.execute("DELETE FROM collect_batches WHERE run_id = ?", (run_id,))
        conn.execute(
            "DELETE FROM collect_ids WHERE collected < ?", ((now - timedelta(days=60)).isoformat(),)
        )


def recover_batches(ws: Workspace, db: StateDB, now: datetime) -> list[str]:
    """Finish batches whose append landed before a crash; drop the others."""
    done = []
    for run_id, payload in db.conn.execute("SELECT run_id, payload FROM collect_batches"):
        data = json.loads(payload)
        if _appended(ws, run_id):
            finish_batch(db, run_id, [Cursor(**c) for c in data["cursors"]], data["ids"], now)
            done.append(run_id)
        else:
            with db.transaction() as conn:
                conn.execute("DELETE FROM collect_batches WHERE run_id = ?", (run_id,))
    return done


def _appended(ws: Workspace, run_id: str) -> bool:
    marker = f"run={run_id} ".encode()
    folder = ws.root / ws.daily_dir
    return any(marker in p.read_bytes() for p in folder.glob("????-??-??.md") if p.is_file())


# ------------------------------------------------------------ the model step


def transcript_text(messages: list[Message], tz: tzinfo) -> list[str]:
    """Compact text per session block: times, roles, no JSON noise."""
    blocks: dict[tuple[str, str], list[str]] = defaultdict(list)
    heads: dict[tuple[str, str], str] = {}
    for m in messages:
        key = (m.source, m.session)
        heads[key] = f"## {m.source} · session {m.session} ({m.path})"
        stamp = m.timestamp.astimezone(tz).strftime("%Y-%m-%d %H:%M")
        blocks[key].append(f"[{stamp}] {m.role}: {m.text}")
    return [heads[k] + "\n" + "\n".join(lines) for k, lines in blocks.items()]


def chunks(blocks: list[str], limit: int) -> list[str]:
    """Pack session blocks into chunks under `limit` characters (a huge block is split)."""
    out: list[str] = []
    current = ""
    for block in blocks:
        while len(block) > limit:
            out.append(block[:limit])
            block = block[limit:]
        if current and len(current) + len(block) + 2 > limit:
            out.append(current)
            current = ""
        current = f"{current}\n\n{block}" if current else block
    if current:
        out.append(current)
    return out


def known_days(ws: Workspace, store_read: Callable[[str], bytes | None], now: datetime) -> str:
    today = ws.today(now)
    parts = []
    for day in (today - timedelta(days=1), today):
        data = store_read(ws.daily_log(day))
        if data:
            parts.append(f"### {ws.daily_log(day)}\n" + data.decode("utf-8", "replace"))
    text = "\n\n".join(parts)
    return text[-KNOWN_DAYS_CHARS:]


def build_request(ws: Workspace, chunk: str, known: str) -> StageRequest:
    prompt = (
        "New conversation text since the last run follows. Record what is worth remembering "
        "with one call to record_notes. Skip anything already in the daily logs shown after it.\n\n"
        f"<transcripts>\n{chunk}\n</transcripts>\n\n"
        f"<already-in-daily-logs>\n{known or '(nothing yet)'}\n</already-in-daily-logs>"
    )
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "COLLECT.md"),
        prompt=prompt,
        tools=(),
        extra_tools=(RECORD_NOTES,),
        tool_choice={"type": "tool", "name": RECORD_NOTES.name},
        max_tokens=4096,
    )


@dataclass(frozen=True)
class Item:
    category: str
    text: str
    when: datetime
    session: str
    topic: str


def parse_items(
    raw: object, messages: list[Message], now: datetime, tz: tzinfo
) -> tuple[list[Item], int]:
    """Validate the model's items; malformed ones are dropped and counted, never trusted."""
    if not isinstance(raw, list):
        return [], 1
    latest = {m.session: m.timestamp for m in messages}
    sessions = set(latest)
    items, dropped = [], 0
    for entry in raw:
        item = _item(entry, latest, sessions, now, tz)
        if item is None:
            dropped += 1
        else:
            items.append(item)
    return items, dropped


def _item(
    entry: object, latest: Mapping[str, datetime], sessions: set[str], now: datetime, tz: tzinfo
) -> Item | None:
    if not isinstance(entry, dict):
        return None
    cat, text, session = entry.get("category"), entry.get("text"), entry.get("session")
    if cat not in CATEGORIES or not isinstance(text, str) or not text.strip():
        return None
    if session not in sessions:
        if len(sessions) != 1:
            return None
        session = next(iter(sessions))
    when = _when(entry.get("when"), tz)
    if when is None or when > now + FUTURE_SLACK:
        when = latest[session]  # a missing, garbled or future time: the session's last message
    topic = entry.get("topic") if isinstance(entry.get("topic"), str) else ""
    clean = " ".join(text.split())[:500]
    return Item(cat, clean, when, session, " ".join(str(topic).split())[:60])


def _when(value: object, tz: tzinfo) -> datetime | None:
    if not isinstance(value, str):
        return None
    text = value.strip().strip("[]")
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"):
        try:
            return (
                datetime.strptime(text[:19] if "S" in fmt else text[:16], fmt)
                .replace(tzinfo=tz)
                .astimezone(UTC)
            )
        except ValueError:
            continue
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)).astimezone(UTC)


# ------------------------------------------------------------ the post-pass


def render_blocks(
    items: list[Item], messages: list[Message], run_id: str, tz: tzinfo
) -> dict[str, list[tuple[str, list[str]]]]:
    """day (YYYY-MM-DD) -> [(block header with provenance, bullets)], sessions in time order."""
    paths = {m.session: (m.source, m.path) for m in messages}
    grouped: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for item in sorted(items, key=lambda i: i.when):
        grouped[(item.when.astimezone(tz).date().isoformat(), item.session)].append(item)
    days: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for (day, session), group in grouped.items():
        source, path = paths.get(session, ("", ""))
        hhmm = group[0].when.astimezone(tz).strftime("%H:%M")
        topic = next((i.topic for i in group if i.topic), "") or f"{source} session"
        header = (
            f"### [{hhmm}] {topic}\n<!-- collect run={run_id} session={session} source={path} -->"
        )
        bullets = [
            f"- [{i.category}] {i.text}" if i.category not in UNTAGGED else f"- {i.text}"
            for i in group
        ]
        days[day].append((header, bullets))
    return days


def append_changes(
    ws: Workspace, read: Callable[[str], bytes | None], days: dict[str, list[tuple[str, list[str]]]]
) -> tuple[list[Change], int]:
    """One append per day file; bullets the file already has are dropped (exact match)."""
    changes, dupes = [], 0
    for day in sorted(days):
        path = f"{ws.daily_dir}/{day}.md"
        current = read(path)
        have = set((current or b"").decode("utf-8", "replace").splitlines())
        text = []
        for header, bullets in days[day]:
            fresh = [b for b in dict.fromkeys(bullets) if b not in have]
            dupes += len(bullets) - len(fresh)
            if fresh:
                text.append(header + "\n\n" + "\n".join(fresh) + "\n")
        if not text:
            continue
        lead = "" if not current or current.endswith(b"\n\n") else "\n"
        if current is None:
            lead = f"# {day}\n\n"
        body = (lead + "\n".join(text)).encode()
        sha = sha256_hex(current) if current is not None else None
        changes.append(Change(path, "append", content=body, expected_sha256=sha))
    return changes, dupes


# ------------------------------------------------------------ the run


@dataclass
class CollectResult:
    record: RunRecord | None
    files_scanned: int
    new_messages: int
    items_by_day: dict[str, int]
    dropped_items: int
    duplicates: int
    bad_lines: int
    missing_sources: list[str]
    diff: str | None = None
    plan: Plan | None = None
    recovered: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            **run_fields(self.record, self.plan, self.diff),
            "files_scanned": self.files_scanned,
            "new_messages": self.new_messages,
            "items_by_day": self.items_by_day,
            "dropped_items": self.dropped_items,
            "duplicates": self.duplicates,
            "bad_lines": self.bad_lines,
            "missing_sources": self.missing_sources,
            "recovered": self.recovered,
        }

    def plan_line(self) -> str:
        """What `tick --plan` says this stage would do."""
        files = f"{self.files_scanned} transcript file(s)"
        if not self.new_messages:
            return f"nothing new in {files}"
        return f"{self.new_messages} new message(s) in {files}"


def collect(
    ws: Workspace,
    *,
    since: datetime | None = None,
    source: str | None = None,
    dry_run: bool = False,
    plan: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> CollectResult:
    """Run collect once. `plan` makes no call and moves nothing; `dry_run` writes nothing."""
    clock = clock or (lambda: datetime.now(UTC))
    now = clock()
    floor = since or now - LOOKBACK
    if plan:
        with open_state(ws) as db:
            intake = gather(ws, db, floor, source, rescan=since is not None)
        return _plan(ws, intake, now)
    with RunRecorder(ws, STAGE, dry_run=dry_run, now=clock) as rec, open_state(ws) as db:
        recovered = [] if dry_run else recover_batches(ws, db, now)
        intake = gather(ws, db, floor, source, rescan=since is not None)
        result = CollectResult(
            None,
            len(intake.files),
            len(intake.messages),
            {},
            0,
            0,
            intake.bad_lines,
            intake.missing_sources,
            recovered=recovered,
        )
        if intake.bad_lines:
            rec.log(f"skipped {intake.bad_lines} unreadable transcript line(s)")
        if not intake.messages:
            if not dry_run:
                finish_batch(db, rec.record.id, intake.cursors, [], now)
            result.record = rec.finish("skipped", summary=_summary(result))
            return result
        session = ModelSession(ws, rec, STAGE, dry_run=dry_run, env=env)
        items, status, error = _ask(ws, session, intake, now)
        result.dropped_items = items[1]
        days = render_blocks(items[0], intake.messages, rec.record.id, ws.tz)
        changes, result.duplicates = append_changes(ws, session.store.read_bytes, days)
        result.items_by_day = {
            f"{ws.daily_dir}/{d}.md": sum(len(b) for _, b in blocks) for d, blocks in days.items()
        }
        if status == "ok" and not dry_run:
            save_pending(db, rec.record.id, intake, now)
        if changes and status == "ok":
            written = session.store.write_context(
                changes,
                actor=STAGE,
                message=_message(result),
                run_id=rec.record.id,
                max_files=len(changes),
            )
            rec.wrote(list(written.files), written.version, written.proposal)
        if status == "ok" and not dry_run:
            finish_batch(db, rec.record.id, intake.cursors, [m.id for m in intake.messages], now)
        result.record = rec.finish(status, summary=_summary(result), error=error)
        result.diff = session.diff()
    return result


def _ask(
    ws: Workspace, session: ModelSession, intake: Intake, now: datetime
) -> tuple[tuple[list[Item], int], str, str | None]:
    """One forced record_notes call per chunk; stop at the first chunk that fails."""
    items: list[Item] = []
    dropped = 0
    known = known_days(ws, session.store.read_bytes, now)
    for chunk in chunks(transcript_text(intake.messages, ws.tz), _chunk_limit(ws)):
        got: list[Any] = []

        def record(inp: dict[str, Any], got: list[Any] = got) -> ToolOutcome:
            got.append(inp.get("items"))
            return ToolOutcome("Recorded.", False, finished="recorded")

        outcome = session.run(build_request(ws, chunk, known), {"record_notes": record})
        if outcome.status != "ok" or not got:
            return (
                (items, dropped),
                "partial" if items else "failed",
                (outcome.error or "the model did not call record_notes"),
            )
        parsed, bad = parse_items(got[-1], intake.messages, now, ws.tz)
        items += parsed
        dropped += bad
    return (items, dropped), "ok", None


def _chunk_limit(ws: Workspace) -> int:
    return max(4_000, min(CHUNK_CHARS, ws.settings.budget.max_input_tokens * 4 // 3))


def _plan(ws: Workspace, intake: Intake, now: datetime) -> CollectResult:
    result = CollectResult(
        None,
        len(intake.files),
        len(intake.messages),
        {},
        0,
        0,
        intake.bad_lines,
        intake.missing_sources,
    )
    if intake.messages:
        blocks = chunks(transcript_text(intake.messages, ws.tz), _chunk_limit(ws))
        from crustacean.store import Store

        result.plan = plan_stage(
            ws, build_request(ws, blocks[0], known_days(ws, Store(ws).read_bytes, now))
        )
    return result


def _message(result: CollectResult) -> str:
    n = sum(result.items_by_day.values())
    return f"collect: {n} item(s) from {result.new_messages} new message(s)"


def _summary(result: CollectResult) -> str:
    bad = f"; {result.bad_lines} unreadable line(s) skipped" if result.bad_lines else ""
    if not result.new_messages:
        return f"no new messages in {result.files_scanned} transcript file(s){bad}"
    items = sum(result.items_by_day.values())
    return f"{result.new_messages} new message(s), {items} item(s) appended{bad}"
