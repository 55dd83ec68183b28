"""Stage 2, curate: route the last days' daily entries into their long-term homes.

Pre-pass (code): the bullets of the last `curate.days` daily logs that were not curated yet,
each with a stable id (day + normalized text, so a hand edit elsewhere in the file changes
nothing, and an edited bullet is simply a new entry), plus a compact map of the destination tree
so the model finds `memory/contacts/telegram-alice.md` instead of creating `alice.md`. Model: the
agent loop as actor `curate`, which reports each entry's fate with `record_routing`. Post-pass
(code): mark entries curated (all of them when the run finished, only the reported ones when a
budget cut it short), add every created file to its folder's README index, and record a summary.
An append whose text the target already holds is dropped by code before it reaches the store.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from crustacean import daily
from crustacean.clock import Clock
from crustacean.llm.contract import FOLDER_READMES, file_block
from crustacean.llm.loop import StageRequest
from crustacean.llm.runner import ModelSession, plan_stage
from crustacean.llm.tools import ToolOutcome, write_call
from crustacean.markdown import headings
from crustacean.recall.memories import memory_paths
from crustacean.stages.indexer import index_created, title
from crustacean.stages.skeleton import Finish, Run, Stage, StageResult
from crustacean.state import StateDB, open_state
from crustacean.store import Store
from crustacean.workspace import Workspace, stage_doc

STAGE = "curate"
MAP_LIMIT = 400
HAND_FILES = 12  # at most this many likely destinations are handed to the model with the entries
HAND_CHARS = 24_000  # ...within this many characters in all
HAND_FILE_CHARS = 6_000  # a bigger file is left for the model to read if it needs it
ALWAYS_HANDED = (*FOLDER_READMES, "MEMORY.md")
INDEX_NOTE = "(left out: code keeps this Index; the files it lists are in <existing-files>)"
_NAME_WORD = re.compile(r"[A-Za-zÀ-ÿ][\w'’-]{2,}")
# Channel prefixes of contact and group file names, and `name`: the id of a person known by no
# channel (`contacts/name-ana-lopez.md`); none of them is a name to match entries by.
_CHANNELS = frozenset({"telegram", "discord", "slack", "email", "whatsapp", "signal", "g", "name"})
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>\S.*)$")
BLOCK_LEVELS = (2, 3, 4)  # `## …` to `#### …`: the headings that start a daily log's block


@dataclass(frozen=True)
class Entry:
    id: str
    day: str
    block: str
    text: str
    line: int


def normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def entry_id(day: str, text: str) -> str:
    key = f"{day}\n{normalize(text)}".encode()
    return hashlib.sha1(key, usedforsecurity=False).hexdigest()[:12]


def parse_entries(day: str, text: str) -> list[Entry]:
    """Every bullet of a daily log, with the `### [HH:MM] topic` block it sits in."""
    entries, block = [], ""
    lines = text.splitlines()
    blocks = {h.line: h.text for h in headings(lines) if h.level in BLOCK_LEVELS}
    for n, line in enumerate(lines, 1):
        if n - 1 in blocks:
            block = blocks[n - 1]
            continue
        bullet = _BULLET.match(line)
        if bullet:
            entries.append(Entry(entry_id(day, bullet["text"]), day, block, bullet["text"], n))
    return entries


def days_to_curate(
    ws: Workspace, now: datetime, days: int, backfilled: Iterable[str] = ()
) -> list[str]:
    """The last `days` days, plus older days collect appended to since curate last finished."""
    today = ws.today(now)
    recent = [(today - timedelta(days=d)).isoformat() for d in range(days - 1, -1, -1)]
    return sorted(set(backfilled) - set(recent)) + recent


def backfilled_days(ws: Workspace, db: StateDB) -> list[str]:
    """Days of the daily logs collect wrote since the start of curate's last `ok` run (every
    one, when curate never finished), so a backfill into an old day is curated too."""
    row = db.conn.execute(
        "SELECT max(started) FROM run_records WHERE stage = ? AND status = 'ok' AND dry_run = 0",
        (STAGE,),
    ).fetchone()
    rows = db.conn.execute(
        "SELECT files_changed FROM run_records WHERE stage = 'collect' AND dry_run = 0 "
        "AND started >= ?",
        (row[0] if row and row[0] else "",),
    )
    days = {
        name[:10]
        for (files,) in rows
        for folder, _, name in (f.rpartition("/") for f in json.loads(files))
        if folder == ws.daily_dir and daily.is_log_name(name)
    }
    return sorted(days)


def uncurated(db: StateDB, day: str, text: str) -> int:
    """How many bullets of a day's log curate has not seen yet."""
    done = {r[0] for r in db.conn.execute("SELECT id FROM curated_entries")}
    return len({e.id for e in parse_entries(day, text)} - done)


def pending_entries(
    ws: Workspace, db: StateDB, store: Store, now: datetime, days: int
) -> list[Entry]:
    done = {r[0] for r in db.conn.execute("SELECT id FROM curated_entries")}
    out: list[Entry] = []
    for day in days_to_curate(ws, now, days, backfilled_days(ws, db)):
        data = store.read_bytes(daily.log_path(ws.daily_dir, day))
        if data:
            out += [
                e for e in parse_entries(day, data.decode("utf-8", "replace")) if e.id not in done
            ]
    return list({e.id: e for e in out}.values())  # the same bullet twice in a day is one entry


Routing = tuple[tuple[str, ...], str]  # an entry's destinations (or ("skip",)) and the reason
SKIP: tuple[str, ...] = ("skip",)


def mark_curated(db: StateDB, entries: Mapping[str, Routing], run_id: str, now: datetime) -> None:
    """Record each entry's fate; an entry filed in two files keeps both, comma-separated."""
    with db.transaction() as conn:
        conn.executemany(
            "INSERT OR IGNORE INTO curated_entries (id, run_id, destination, reason, curated) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                (i, run_id, ", ".join(dests), reason, now.isoformat())
                for i, (dests, reason) in entries.items()
            ],
        )


def destination_map(ws: Workspace, store: Store, labels: Mapping[str, str] | None = None) -> str:
    """Existing memory files with their name or first heading, so the model reuses them."""
    labels = destination_labels(ws, store) if labels is None else labels
    lines = [f"- {rel}" + (f" — {label}" if label else "") for rel, label in labels.items()]
    more = len(memory_paths(ws.root)) - MAP_LIMIT
    if more > 0:
        lines.append(f"- … and {more} more (use list_context_files or search_memory)")
    return "\n".join(lines) or "(no memory files yet)"


def likely_destinations(entries: list[Entry], labels: Mapping[str, str]) -> list[str]:
    """Existing files the entries most likely belong in: those whose name words or label
    (`name:` or first heading) an entry mentions, most mentioned first (pure, for tests)."""
    words: Counter[str] = Counter()
    for e in entries:
        words.update({_word_key(w) for w in _NAME_WORD.findall(e.text)})
    scored = []
    for path, label in labels.items():
        stem = path.rpartition("/")[2].removesuffix(".md")
        keys = {_word_key(w) for w in stem.split("-") if len(w) > 2 and w not in _CHANNELS}
        keys |= {_word_key(w) for w in _NAME_WORD.findall(label)}
        hits = sum(words[k] for k in keys)
        if hits:
            scored.append((-hits, path))
    return [p for _, p in sorted(scored)]


def _word_key(word: str) -> str:
    """A word as matched: case-folded, without a possessive ("Lena's" is Lena), a plural `s`
    off, so a `[lesson]` entry finds `lessons.md` and a `[reminder]` the "Admin reminders"
    file."""
    key = re.sub(r"['’]s$", "", word.casefold())
    return key.removesuffix("s") if len(key) > 3 else key


def handed_files(store: Store, entries: list[Entry], labels: Mapping[str, str]) -> str:
    """The folder READMEs, MEMORY.md and the likely destinations, with their sha256, so the
    model can write without a read turn per file. Bounded, so the prompt stays small."""
    out, used = [], 0
    picks = [*ALWAYS_HANDED, *likely_destinations(entries, labels)[:HAND_FILES]]
    for path in dict.fromkeys(picks):
        data = store.read_bytes(path)
        if data is None or len(data) > HAND_FILE_CHARS or used + len(data) > HAND_CHARS:
            continue
        used += len(data)
        note = INDEX_NOTE if path in FOLDER_READMES else None
        out.append(file_block(path, data, index_note=note))
    return "\n".join(out)


def destination_labels(ws: Workspace, store: Store) -> dict[str, str]:
    """Each existing memory file's name or first heading (what the map shows)."""
    paths = memory_paths(ws.root)[:MAP_LIMIT]
    return {rel: title(store.read_bytes(rel) or b"", rel) for rel in paths}


def build_request(
    ws: Workspace, entries: list[Entry], dest_map: str, files: str = ""
) -> StageRequest:
    listed = "\n".join(
        f"- [{e.id}] {e.day}" + (f" · {e.block}" if e.block else "") + f" · {e.text}"
        for e in entries
    )
    handed = (
        "\n\n<files>\nCode read these for you (content and sha256 as of now): write to them "
        "without reading them again.\n" + files + "\n</files>"
        if files
        else ""
    )
    prompt = (
        "Curate these daily-log entries. For each: apply the promotion test and the routing "
        "table (first match wins), append or edit the target (read it first unless it is in "
        "<files>), and report each entry's destination or skip with record_routing after the "
        "write. Call finish when every entry is handled. <existing-files> is every memory "
        "file there is (a cut list ends with '… and N more'): a path it does not list does "
        "not exist yet.\n\n"
        f"<entries>\n{listed}\n</entries>\n\n"
        f"<existing-files>\n{dest_map}\n</existing-files>" + handed
    )
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "CURATE.md"),
        prompt=prompt,
    )


def request_for(ws: Workspace, store: Store, entries: list[Entry]) -> StageRequest:
    labels = destination_labels(ws, store)
    return build_request(
        ws, entries, destination_map(ws, store, labels), handed_files(store, entries, labels)
    )


def dedup_appends(store: Store, raw: object) -> tuple[object, list[str]]:
    """Drop appends whose text the target already holds (after whitespace normalization)."""
    if not isinstance(raw, list):
        return raw, []
    kept, dropped = [], []
    for change in raw:
        if (
            isinstance(change, dict)
            and change.get("mode") == "append"
            and isinstance(change.get("content"), str)
            and isinstance(change.get("path"), str)
        ):
            try:
                current = store.read_bytes(change["path"])
            except Exception:  # a bad path is the store's to refuse, with its own words
                current = None
            if current and normalize(change["content"]) in normalize(
                current.decode("utf-8", "replace")
            ):
                dropped.append(change["path"])
                continue
        kept.append(change)
    return kept, dropped


@dataclass(kw_only=True)
class CurateResult(StageResult):
    entries: int
    routed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    unreported: int = 0
    indexed: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        return {
            k: getattr(self, k) for k in ("entries", "routed", "skipped", "unreported", "indexed")
        }

    def head(self) -> list[str]:
        return [f"{self.entries} uncurated daily entr{'y' if self.entries == 1 else 'ies'}."]

    def tail(self) -> list[str]:
        return [
            *(f"  routed {n} to {dest}" for dest, n in sorted(self.routed.items())),
            *(f"  skipped {n}: {why}" for why, n in sorted(self.skipped.items())),
            *(f"  indexed {line}" for line in self.indexed),
        ]

    def plan_line(self) -> str:
        return f"{self.entries} uncurated daily entr{'y' if self.entries == 1 else 'ies'}"


@dataclass(frozen=True)
class Curate(Stage[int, CurateResult]):
    """Curate's option: how many days back (`curate.days` when None)."""

    name: ClassVar[str] = STAGE
    days: int | None = None

    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> int:
        return self.days or ws.settings.curate.days

    def plan(self, ws: Workspace, now: datetime, before: int) -> CurateResult:
        store = Store(ws)
        with open_state(ws) as db:
            entries = pending_entries(ws, db, store, now, before)
        result = CurateResult(entries=len(entries))
        if entries:
            result.plan = plan_stage(ws, request_for(ws, store, entries))
        return result

    def execute(self, run: Run, before: int) -> Finish[CurateResult]:
        with open_state(run.ws) as db:
            return _execute(run, db, before)


def _execute(run: Run, db: StateDB, days: int) -> Finish[CurateResult]:
    ws, session, now, dry_run = run.ws, run.session, run.now, run.dry_run
    entries = pending_entries(ws, db, session.store, now, days)
    result = CurateResult(entries=len(entries))
    if not entries:
        return Finish(result, "skipped", "no uncurated daily entries", diff=False)
    before = set(memory_paths(ws.root)) if not dry_run else set()
    reported: dict[str, Routing] = {}
    landed: set[str] = set()
    held: set[str] = set()  # reports code rejected: those entries stay for the next run
    outcome = session.run(
        request_for(ws, session.store, entries),
        _handlers(session, run.id, reported, landed, {e.id for e in entries}, held),
    )
    known = {e.id for e in entries}
    # Code checks the model's report: an entry counts as routed only if something really
    # landed in its destination this run; otherwise it stays uncurated and comes back.
    unlanded = {
        i for i, (dests, _) in reported.items() if dests != SKIP and not set(dests) <= landed
    }
    unlanded |= held - set(reported)
    reported = {i: v for i, v in reported.items() if i in known and i not in unlanded}
    if outcome.status == "ok":
        for e in entries:
            if e.id not in unlanded:
                reported.setdefault(e.id, (SKIP, "not routed by the model"))
    _tally(result, reported, len(entries))
    if not dry_run:
        mark_curated(db, reported, run.id, now)
        created = sorted(set(memory_paths(ws.root)) - before)
        result.indexed = index_created(session.store, created, STAGE, run.id)
        if result.indexed:
            run.rec.wrote(["memory/README.md", "knowledge/README.md"], None, None)
    return Finish(result, outcome.status, _summary(result), outcome.error)


def curate(
    ws: Workspace,
    *,
    days: int | None = None,
    dry_run: bool = False,
    plan: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> CurateResult:
    """Run curate once; `plan` makes no call, `dry_run` writes and marks nothing."""
    return Curate(days).run(ws, dry_run=dry_run, plan=plan, env=env, clock=clock)


def _handlers(
    session: ModelSession,
    run_id: str,
    reported: dict[str, Routing],
    landed: set[str],
    known: set[str],
    held: set[str],
) -> dict[str, Callable[..., ToolOutcome]]:
    def record_routing(inp: dict[str, Any]) -> ToolOutcome:
        items = inp.get("entries")
        if not isinstance(items, list):
            return ToolOutcome("Error: entries must be a list of {id, destination, reason}.", True)
        recorded, rejected = [], []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                rejected.append({"entry": item, "why": "not an {id, destination} object"})
                continue
            reason = item.get("reason")
            reason = reason if isinstance(reason, str) else ""
            dests = destinations(item)
            why = "; ".join(
                dict.fromkeys(
                    w
                    for d in dests
                    if (
                        w := routing_problem(item["id"], d, known, landed, session.store.read_bytes)
                    )
                )
            )
            if why:
                rejected.append({"id": item["id"], "destination": ", ".join(dests), "why": why})
                held.add(item["id"])
                continue
            reported[item["id"]] = (dests, reason)
            held.discard(item["id"])
            recorded.append(item["id"])
        body: dict[str, Any] = {"recorded": recorded, "rejected": rejected}
        if rejected:
            body["note"] = (
                "rejected entries were not recorded: write each one to its destination first "
                "(or report it as skip), then report it again."
            )
        return ToolOutcome(json.dumps(body), bool(rejected))

    def write_context(inp: dict[str, Any]) -> ToolOutcome:
        changes, dropped = dedup_appends(session.store, inp.get("changes"))
        landed.update(dropped)  # the text is already in that file: the entry has its home
        extra = (
            {"dropped": dropped, "note": "dropped appends whose text is already there"}
            if dropped
            else {}
        )
        if isinstance(changes, list) and not changes:
            return ToolOutcome(json.dumps({"files": [], **extra}), False)
        out = write_call(session.store, STAGE, run_id, {**inp, "changes": changes})
        if out.write is not None and not out.is_error:
            landed.update(out.write.files)
        if extra and out.write is not None:  # the result stays one JSON object
            out = ToolOutcome(json.dumps({**out.write.to_json(), **extra}), False, out.write)
        return out

    return {"record_routing": record_routing, "write_context": write_context}


def destinations(item: Mapping[str, Any]) -> tuple[str, ...]:
    """A reported routing's files: `destination`, then any `also` (an entry about two people
    is filed in both contact files), each once; `("skip",)` when it was skipped (pure)."""
    first = str(item.get("destination") or "skip").strip().removeprefix("./")
    if first == "skip":
        return SKIP
    also = item.get("also")
    extra = [str(p).strip().removeprefix("./") for p in also] if isinstance(also, list) else []
    return tuple(dict.fromkeys(p for p in [first, *extra] if p and p != "skip"))


def routing_problem(
    entry: str,
    dest: str,
    known: set[str],
    landed: set[str],
    read: Callable[[str], bytes | None],
) -> str:
    """Why a reported routing cannot be recorded ("" when it can): unknown entry, or a
    destination that does not exist or that this run did not write."""
    if entry not in known:
        return "no such entry id in this run's entries"
    if dest == "skip":
        return ""
    try:
        exists = read(dest) is not None
    except Exception:  # a folder, a bad path: the destination is not a file
        exists = False
    if not exists:
        return f"{dest} does not exist"
    if dest not in landed:
        return f"{dest} was not written in this run"
    return ""


def _tally(result: CurateResult, reported: Mapping[str, Routing], total: int) -> None:
    routed = Counter(d for ds, _ in reported.values() if ds != SKIP for d in ds)
    skipped = Counter(r or "no reason" for ds, r in reported.values() if ds == SKIP)
    result.routed, result.skipped = dict(routed), dict(skipped)
    result.unreported = total - len(reported)


def _summary(result: CurateResult) -> str:
    routed = ", ".join(f"{d} ({n})" for d, n in sorted(result.routed.items())) or "nothing"
    skipped = "; ".join(f"{why} ({n})" for why, n in sorted(result.skipped.items())) or "none"
    left = f"; {result.unreported} left for next time" if result.unreported else ""
    return f"{result.entries} entries: routed to {routed}; skipped: {skipped}{left}"
