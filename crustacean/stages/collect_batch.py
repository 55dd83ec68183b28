"""`collect --batch`: a backlog's chunks as one Message Batch (half price, results within 24 h).

Submitting stores the batch id with every chunk's references (message id, session, time,
source, path) in the state database. Until its results are appended, those messages are neither
sent again nor passed by a cursor, so an expired or lost batch costs a resend, never a message.
Every later collect run (and so `tick`) asks whether open batches ended and appends their items
through the same pending-marker protocol as a direct run: a crash between the append and the
bookkeeping neither loses nor repeats anything. A chunk whose request errored, expired or gave
no usable answer is released, and the next run sends it again.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crustacean.errors import CrustaceanError
from crustacean.llm.loop import build_params
from crustacean.llm.runner import ModelSession, plan_stage
from crustacean.llm.stage_tools import RECORD_NOTES
from crustacean.sources import Message
from crustacean.stages.collect_notes import (
    Appended,
    Chunk,
    Item,
    append_changes,
    bind_items,
    build_request,
    finish_batch,
    save_pending,
    write_appends,
)
from crustacean.state import StateDB
from crustacean.usage import cost, usage_of
from crustacean.workspace import Workspace

BATCH_DISCOUNT = 0.5  # the Batches API bills every token at half price


@dataclass(frozen=True)
class Submitted:
    batch_id: str
    chunks: int
    messages: int
    est_input_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {
            "submitted": self.batch_id,
            "requests": self.chunks,
            "messages": self.messages,
            "est_input_tokens": self.est_input_tokens,
        }


@dataclass
class Fetched:
    fetched: list[str] = field(default_factory=list)
    still_waiting: list[str] = field(default_factory=list)
    released_chunks: int = 0
    append: Appended = field(default_factory=lambda: Appended([], 0, 0, {}))
    rejected: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "fetched": ", ".join(self.fetched) or None,
            "still_waiting": self.still_waiting,
            "released_chunks": self.released_chunks,
        }


def _ref_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "session": m.session,
        "source": m.source,
        "path": m.path,
        "ts": m.timestamp.isoformat(),
    }


def _ref_message(data: dict[str, Any]) -> Message:
    """Enough of a message to bind items to it (its text was sent, not stored)."""
    when = datetime.fromisoformat(data["ts"])
    return Message("", "", when, data["session"], data["id"], data["path"], 0, data["source"])


def submit(
    ws: Workspace,
    db: StateDB,
    session: ModelSession,
    run_id: str,
    chunks: list[Chunk],
    now: datetime,
) -> Submitted:
    """Submit the chunks that fit the run's budget as one batch and record it."""
    budget = ws.settings.budget
    requests, chosen, tokens = [], {}, 0
    for k, chunk in enumerate(chunks):
        req = build_request(ws, chunk)  # a batch's chunks are answered at once: none sees another
        est = plan_stage(ws, req).est_input_tokens
        if k and (tokens + est > budget.max_input_tokens or k >= budget.max_turns):
            break
        tokens += est
        custom_id = f"chunk-{k + 1}"
        params = build_params(req, session.model, [{"role": "user", "content": req.prompt}])
        requests.append({"custom_id": custom_id, "params": params})
        chosen[custom_id] = {ref: _ref_json(m) for ref, m in chunk.refs.items()}
    client = session.client()
    batch = client.batch(
        "create", requests=requests, model=session.model, tier_key=session.tier_key
    )
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO collect_sent_batches (batch_id, run_id, created, payload) "
            "VALUES (?, ?, ?, ?)",
            (batch.id, run_id, now.isoformat(), json.dumps({"chunks": chosen})),
        )
    messages = sum(len(refs) for refs in chosen.values())
    session.rec.log(
        f"submitted batch {batch.id}: {len(requests)} request(s), {messages} message(s)"
    )
    return Submitted(batch.id, len(requests), messages, tokens)


def fetch_ready(ws: Workspace, db: StateDB, session: ModelSession, now: datetime) -> Fetched | None:
    """Append the items of every open batch that has ended; None when none is open."""
    rows = db.conn.execute("SELECT batch_id, payload FROM collect_sent_batches").fetchall()
    if not rows:
        return None
    out = Fetched()
    for batch_id, payload in rows:
        try:
            ended = _results(session, batch_id)
        except CrustaceanError as e:
            session.rec.log(f"batch {batch_id}: {e}; asking again next run")
            out.still_waiting.append(batch_id)
            continue
        if ended is None:
            out.still_waiting.append(batch_id)
            continue
        _append_batch(ws, db, session, batch_id, json.loads(payload)["chunks"], ended, now, out)
        out.fetched.append(batch_id)
    return out


def _results(session: ModelSession, batch_id: str) -> list[Any] | None:
    """The results of an ended batch; [] for one the API no longer has (every chunk is then
    released); None while it is still processing."""
    client, model, tier = session.client(), session.model, session.tier_key
    batch = client.batch("retrieve", batch_id, model=model, tier_key=tier)
    if batch is None:
        session.rec.log(f"batch {batch_id} is gone from the API; its messages are sent again")
        return []
    if batch.processing_status != "ended":
        return None
    return client.batch("results", batch_id, model=model, tier_key=tier) or []


def _append_batch(
    ws: Workspace,
    db: StateDB,
    session: ModelSession,
    batch_id: str,
    chunks: dict[str, dict[str, dict[str, Any]]],
    results: list[Any],
    now: datetime,
    out: Fetched,
) -> None:
    rec = session.rec
    items: list[Item] = []
    done: list[str] = []
    answered = {r.custom_id: r.result for r in results}
    for custom_id, refs_json in chunks.items():
        refs = {ref: _ref_message(data) for ref, data in refs_json.items()}
        raw = _notes(rec, answered.get(custom_id), session)
        bound = bind_items(raw, refs, ws.tz) if raw is not None else None
        if bound is None:
            out.released_chunks += 1  # not marked collected: the next run sends it again
            rec.log(f"batch {batch_id} {custom_id}: no record_notes answer; released")
            continue
        for bad in bound.bad:  # a batch has no conversation to correct them in
            rec.set_aside("item", f"batch {batch_id} {custom_id}, {bad.reason}", bad.text)
        items += bound.items
        out.rejected += bound.rejected
        done += [m.id for m in refs.values()]
    marker = f"run={rec.record.id} batch={batch_id} session="
    appended = append_changes(ws, session.store.read_bytes, items, marker)
    key = f"{rec.record.id}:{batch_id}"
    save_pending(db, key, marker, done, [], now, batch_id=batch_id)
    write_appends(session, appended, f"collect: {appended.appended} item(s) from batch {batch_id}")
    finish_batch(db, key, [], done, now, batch_id=batch_id)
    out.append.changes += appended.changes
    out.append.appended += appended.appended
    out.append.duplicates += appended.duplicates
    for path, n in appended.by_day.items():
        out.append.by_day[path] = out.append.by_day.get(path, 0) + n


def _notes(rec: Any, result: Any, session: ModelSession) -> object | None:
    """The items of one batch result (its usage billed at half price), or None."""
    if result is None or getattr(result, "type", "") != "succeeded":
        return None
    message = result.message
    used = usage_of(message.usage)
    price = getattr(session.ws.settings.prices, session.tier)
    rec.add_usage(used, cost(used, price) * BATCH_DISCOUNT)
    if message.stop_reason == "max_tokens":
        return None  # the answer may be cut: released, the next run sends it directly
    for block in message.content:
        if getattr(block, "type", "") == "tool_use" and block.name == RECORD_NOTES.name:
            data = block.input if isinstance(block.input, dict) else {}
            return data.get("items")
    return None
