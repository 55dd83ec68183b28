"""Stage 1, collect: new transcript text in, notable items appended to the daily logs.

Pre-pass (code): read every source from its cursor (a message after a cursor is read whatever
its age; the lookback window only bounds files that have no cursor yet), keep complete lines,
keep each message once by its stable id (a checkpoint or reset copy beside the live file is the
same message), drop what earlier runs collected, redact secrets. Nothing new: no model call, the
run is `skipped`. Model: one forced `record_notes` call per chunk; every message in a chunk has
a short reference (`m12`) and every item cites the references it comes from. Post-pass (code):
session, time, day and provenance come from the cited messages, never from the model's labels;
bullets the day already has (compared as normalized text) are merged; one `write_context` call
appends; then the cursors advance, each only past what was really sent.

One budget per run: `budget.max_turns` and `budget.max_input_tokens` bound all chunks together;
a run cut short is `partial`, appends what it got and leaves the rest for the next run.

Crash safety: before the append, the batch (its message ids and new cursors) is stored as
pending; every block the append writes carries a marker with the run id. The next run finds a
pending batch and looks for its marker in the daily logs: found, the append happened and the
batch is finished; not found, the batch is dropped and its lines are read again. Either way
nothing is lost or collected twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, tzinfo
from typing import Any, ClassVar

from crustacean.clock import Clock
from crustacean.errors import CrustaceanError, UsageError
from crustacean.llm.loop import LoopOutcome
from crustacean.llm.runner import ModelSession, plan_stage
from crustacean.llm.tools import ToolOutcome
from crustacean.runs import RunRecorder
from crustacean.sources import Message
from crustacean.stages import collect_batch
from crustacean.stages.collect_notes import (
    NEAR_BUDGET,
    STAGE,
    Appended,
    BadItem,
    Bound,
    Chunk,
    Intake,
    Item,
    append_changes,
    bind_items,
    build_chunks,
    build_request,
    chunk_limit,
    collected_ids,
    cursors_after,
    direct_marker,
    earlier_items,
    finish_batch,
    first_day,
    gather,
    recover_batches,
    save_pending,
    worth_a_call,
    write_appends,
)
from crustacean.stages.skeleton import Finish, Run, Stage, StageResult
from crustacean.state import StateDB, open_state
from crustacean.workspace import Workspace

# ------------------------------------------------------------ the run


@dataclass(frozen=True)
class Progress:
    """Where a long run is, for a display (the core never prints)."""

    chunks_sent: int
    chunks_total: int
    items: int
    input_tokens: int


ProgressFn = Callable[[Progress], None]
Hold = Callable[[datetime, int, datetime, int], str | None]
"""A scheduled run's batching rule: (now, new characters, oldest new message, characters worth
a call) -> why it waits, or None to run now (`ops.tick.collect_waits`)."""


@dataclass(kw_only=True)
class CollectResult(StageResult):
    files_scanned: int
    new_messages: int
    items_by_day: dict[str, int] = field(default_factory=dict)
    appended: int = 0
    duplicates: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    unbound: int = 0
    bogus_refs: int = 0
    set_aside: int = 0
    copies: int = 0
    chunks: int = 0
    chunks_sent: int = 0
    left_for_next_run: int = 0
    waiting_in_batch: int = 0
    batch: dict[str, Any] | None = None
    near_output_budget: int = 0
    waiting: str | None = None
    bad_lines: int = 0
    missing_sources: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        return {
            "files_scanned": self.files_scanned,
            "new_messages": self.new_messages,
            "copies_skipped": self.copies,
            "chunks": self.chunks,
            "chunks_sent": self.chunks_sent,
            "left_for_next_run": self.left_for_next_run,
            "waiting_in_batch": self.waiting_in_batch,
            "items_by_day": self.items_by_day,
            "appended": self.appended,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "attributed_to_chunk_session": self.unbound,
            "bogus_refs": self.bogus_refs,
            "set_aside": self.set_aside,
            "batch": self.batch,
            "near_output_budget": self.near_output_budget,
            "waiting_for_more_text": self.waiting,
            "bad_lines": self.bad_lines,
            "missing_sources": self.missing_sources,
            "recovered": self.recovered,
        }

    def warnings(self) -> list[str]:
        return [
            f"Warning: source {path} has no transcripts (missing or empty)."
            for path in self.missing_sources
        ]

    def head(self) -> list[str]:
        bad = f", {self.bad_lines} unreadable line(s) skipped" if self.bad_lines else ""
        scanned = (
            f"Scanned {self.files_scanned} transcript file(s): {self.new_messages} new "
            f"message(s){bad}."
        )
        if self.record is None:  # a plan: its lines follow the plan
            return [scanned]
        days = [f"  {path}: {n} item(s) appended" for path, n in sorted(self.items_by_day.items())]
        return [scanned, *days, *("  " + line for line in self.fates())]

    def tail(self) -> list[str]:
        if self.record is not None:
            return []
        lines = []
        if self.left_for_next_run:
            lines.append(
                f"The run budget (budget.*) covers part of it; {self.left_for_next_run} "
                "message(s) would wait for the next run."
            )
        if self.waiting_in_batch:
            lines.append(f"{self.waiting_in_batch} message(s) wait for a batch's results.")
        return lines

    def fates(self) -> list[str]:
        """What happened to every item and message that did not simply land."""
        lines = []
        if self.duplicates:
            lines.append(f"{self.duplicates} item(s) merged as duplicates")
        for reason, n in sorted(self.rejected.items()):
            lines.append(f"{n} item(s) rejected: {reason}")
        if self.unbound:
            lines.append(f"{self.unbound} item(s) cited no message; given to their chunk's session")
        if self.set_aside:
            lines.append(
                f"{self.set_aside} item(s) set aside after one correction (kept in the run "
                "record: `crustacean runs show`)"
            )
        if self.bogus_refs:
            lines.append(f"{self.bogus_refs} reference(s) named no message of their chunk")
        if self.near_output_budget:
            lines.append(
                f"{self.near_output_budget} answer(s) came close to their output budget "
                "(max_tokens): see `crustacean runs show`"
            )
        if self.copies:
            lines.append(f"{self.copies} repeated message(s) in checkpoint/reset copies, sent once")
        batch = self.batch or {}
        if batch.get("fetched"):
            lines.append(f"appended the results of batch {batch['fetched']}")
        if batch.get("submitted"):
            lines.append(
                f"submitted batch {batch['submitted']}: {batch['requests']} request(s); "
                "a later collect or tick appends the results"
            )
        if self.waiting_in_batch:
            lines.append(f"{self.waiting_in_batch} message(s) wait for a batch's results")
        if self.left_for_next_run and self.record is not None:
            lines.append(f"{self.left_for_next_run} message(s) left for the next run")
        return lines

    def plan_line(self) -> str:
        files = f"{self.files_scanned} transcript file(s)"
        if not self.new_messages:
            return f"nothing new in {files}"
        requests = f", {self.chunks} requests" if self.chunks > 1 else ""
        return f"{self.new_messages} new message(s) in {files}{requests}"


def _intake_result(intake: Intake, recovered: list[str] | None = None) -> CollectResult:
    return CollectResult(
        files_scanned=len(intake.files),
        new_messages=len(intake.messages),
        copies=intake.copies,
        waiting_in_batch=intake.waiting,
        bad_lines=intake.bad_lines,
        missing_sources=intake.missing_sources,
        recovered=recovered or [],
    )


@dataclass(frozen=True)
class Collect(Stage[None, CollectResult]):
    """Collect's options: a backfill `since`, one `source`, a Message Batch, a progress display,
    and for a scheduled run (tick) the rule that lets a small increment wait for more text."""

    name: ClassVar[str] = STAGE
    since: datetime | None = None
    source: str | None = None
    batch: bool = False
    progress: ProgressFn | None = None
    hold: Hold | None = None

    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> None:
        if self.batch and dry_run:
            raise UsageError(
                "--batch cannot be combined with --dry-run: a batch answers later; use "
                "--plan --batch to see what it would send and cost."
            )

    def plan(self, ws: Workspace, now: datetime, before: None) -> CollectResult:
        with open_state(ws) as db:
            return _plan(ws, gather(ws, db, now, self.since, self.source), self.batch)

    def execute(self, run: Run, before: None) -> Finish[CollectResult]:
        with open_state(run.ws) as db:
            return self._execute(run, db)

    def _execute(self, run: Run, db: StateDB) -> Finish[CollectResult]:
        ws, rec, session, now, dry_run = run.ws, run.rec, run.session, run.now, run.dry_run
        recovered = [] if dry_run else recover_batches(ws, db, now)
        fetched = None if dry_run else collect_batch.fetch_ready(ws, db, session, now)
        intake = gather(ws, db, now, self.since, self.source)
        result = _intake_result(intake, recovered)
        if fetched is not None:
            result.batch = fetched.to_json()
            _count_append(result, fetched.append)
            result.rejected = dict(fetched.rejected)
        if intake.bad_lines:
            rec.log(f"skipped {intake.bad_lines} unreadable transcript line(s)")
        for f in intake.files:
            for line, why in f.result.set_aside:
                rec.set_aside("line", f"{f.path}:{line}: {why}")
        chunks = build_chunks(intake.messages, ws.tz, chunk_limit(ws))
        chunks, waits = self._held(ws, chunks, now)
        if waits is not None and not chunks:
            result.waiting = waits
            status = "ok" if fetched is not None and fetched.append.appended else "skipped"
            return Finish(result, status, f"{_summary(result)}; {waits}", diff=False)
        result.chunks = len(chunks)
        if not chunks:
            if not dry_run:
                finish_batch(db, run.id, cursors_after(intake.files, collected_ids(db)), [], now)
            status = "ok" if fetched is not None and fetched.append.appended else "skipped"
            return Finish(result, status, _summary(result), diff=False)
        if self.batch and not dry_run:
            sent = collect_batch.submit(ws, db, session, run.id, chunks, now)
            result.batch = {**(result.batch or {}), **sent.to_json()}
            result.chunks_sent = sent.chunks
            result.waiting_in_batch += sent.messages
            result.left_for_next_run = len(intake.messages) - sent.messages
            finish_batch(db, run.id, cursors_after(intake.files, collected_ids(db)), [], now)
            status = "partial" if result.left_for_next_run else "ok"
            error = _BUDGET_LEFT if result.left_for_next_run else None
            return Finish(result, status, _summary(result), error, diff=False)
        asked = _ask(ws, session, rec, chunks, self.progress)
        result.chunks_sent = asked.sent
        result.near_output_budget = asked.near_budget
        result.waiting = waits
        result.unbound = asked.unbound
        result.bogus_refs, result.set_aside = asked.bogus_refs, asked.set_aside
        result.rejected = dict(Counter(result.rejected) + asked.rejected)
        sent_ids = asked.sent_ids
        result.left_for_next_run = len(intake.messages) - len(sent_ids)
        if asked.status == "failed":
            return Finish(result, "failed", _summary(result), asked.error)
        marker = direct_marker(run.id)
        appended = append_changes(ws, session.store.read_bytes, asked.items, marker)
        _count_append(result, appended)
        done = collected_ids(db) | set(sent_ids)
        cursors = cursors_after(intake.files, done)
        if not dry_run:
            save_pending(db, run.id, marker, sent_ids, cursors, now)
        new = f"{result.appended} item(s) from {result.new_messages} new message(s)"
        write_appends(session, appended, f"collect: {new}")
        if not dry_run:
            finish_batch(db, run.id, cursors, sent_ids, now)
        return Finish(result, asked.status, _summary(result), asked.error)

    def _held(
        self, ws: Workspace, chunks: list[Chunk], now: datetime
    ) -> tuple[list[Chunk], str | None]:
        """The chunks a scheduled run sends now, and why the rest waits: a last chunk too
        small to be worth its own call waits for more text (its cursor does not move past
        it), unless it waited long enough already."""
        if self.hold is None or self.since is not None:
            return chunks, None
        worth, waits = worth_a_call(ws), None
        while chunks:
            tail = list(chunks[-1].refs.values())
            chars = sum(len(m.text) for m in tail)
            why = self.hold(now, chars, min(m.timestamp for m in tail), worth)
            if why is None:
                break
            waits = why
            chunks = chunks[:-1]
        return chunks, waits


def collect(
    ws: Workspace,
    *,
    since: datetime | None = None,
    source: str | None = None,
    dry_run: bool = False,
    plan: bool = False,
    batch: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    progress: ProgressFn | None = None,
) -> CollectResult:
    """Run collect once. `plan` makes no call and moves nothing; `dry_run` writes nothing;
    `batch` submits the chunks as one Message Batch that a later run appends."""
    return Collect(since, source, batch, progress).run(
        ws, dry_run=dry_run, plan=plan, env=env, clock=clock
    )


def _count_append(result: CollectResult, appended: Appended) -> None:
    result.appended += appended.appended
    result.duplicates += appended.duplicates
    for path, n in appended.by_day.items():
        result.items_by_day[path] = result.items_by_day.get(path, 0) + n


_BUDGET_LEFT = (
    "the run's budget (budget.max_turns, budget.max_input_tokens) ended before the last chunk; "
    "the rest waits for the next run"
)


@dataclass
class Asked:
    status: str
    error: str | None
    sent: int  # chunks whose answer was used
    sent_ids: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    unbound: int = 0
    bogus_refs: int = 0
    set_aside: int = 0
    near_budget: int = 0


_ANSWER_STANDS = ("max_turns", "max_input_tokens", "correction_failed")


class Answer:
    """One chunk's `record_notes` calls. Items that cite nothing valid or hold a credential are
    refused in a tool result naming each and why, and the model may send them again corrected
    once (the contract's one-turn recovery); the items that were fine are kept either way, and
    what is still wrong after that is `bad`, to be set aside."""

    def __init__(self, refs: dict[str, Message], tz: tzinfo, first: date | None) -> None:
        self.refs, self.tz, self.first = refs, tz, first
        self.bound = Bound()
        self.bad: list[BadItem] = []
        self.calls = 0

    def record(self, inp: dict[str, Any]) -> ToolOutcome:
        bound = bind_items(inp.get("items"), self.refs, self.tz, self.first)
        self.calls += 1
        self.bound.items += bound.items
        self.bound.rejected += bound.rejected
        self.bound.unbound += bound.unbound
        self.bound.bogus_refs += bound.bogus_refs
        self.bad = bound.bad
        if bound.bad and self.calls == 1:
            return ToolOutcome(refusal(bound.bad, len(bound.items)), True)
        return ToolOutcome("Recorded.", False, finished="recorded")


def refusal(bad: list[BadItem], kept: int) -> str:
    """The tool result that lets the model correct its bad items in one turn."""
    lines = [
        f"{kept} item(s) recorded. {len(bad)} item(s) not recorded:",
        *(f"- {b.line()}" for b in bad),
        "Call record_notes once more with only these items, corrected; an item you cannot "
        "correct, leave out.",
    ]
    return "\n".join(lines)


def _ask(
    ws: Workspace,
    session: ModelSession,
    rec: RunRecorder,
    chunks: list[Chunk],
    progress: ProgressFn | None,
) -> Asked:
    """One forced record_notes call per chunk, all under the run's one budget; stop at the
    first chunk that fails or would not fit, keeping what the chunks before it gave. A chunk
    whose answer outgrew max_tokens is sent again as two halves, so a long one cannot stall."""
    budget = ws.settings.budget
    asked = Asked("ok", None, 0)
    turns0, input0 = rec.record.turns, rec.record.usage.total_input
    queue = list(chunks)
    first = first_day(ws, (m for c in chunks for m in c.refs.values()))
    k = 0
    while k < len(queue):
        chunk = queue[k]
        req = build_request(ws, chunk, earlier_items(asked.items, chunk, ws.tz))
        left = budget._replace(
            max_turns=budget.max_turns - (rec.record.turns - turns0),
            max_input_tokens=budget.max_input_tokens - (rec.record.usage.total_input - input0),
        )
        if k and (
            left.max_turns <= 0 or plan_stage(ws, req).est_input_tokens > left.max_input_tokens
        ):
            return _stopped(asked, f"{_BUDGET_LEFT} (after {k} of {len(queue)} chunks)")
        answer = Answer(chunk.refs, ws.tz, first)
        try:
            limit = left._replace(max_input_tokens=max(1, left.max_input_tokens))
            outcome = session.run(req, {"record_notes": answer.record}, limit)
        except CrustaceanError as e:
            if answer.calls:  # the correction's request failed: the first answer stands
                rec.log(f"chunk {k + 1}: the correction was not answered ({e})")
                outcome = LoopOutcome("partial", "correction_failed", error=str(e))
            elif not asked.sent:
                raise
            else:
                return _stopped(asked, str(e))
        if outcome.last_reply_stop == "max_tokens":  # the answer may be cut: not trusted
            if len(chunk.refs) < 2:
                return _stopped(asked, "the answer for one message hit max_tokens")
            queue[k : k + 1] = _halves(chunk, ws.tz)
            rec.log(f"chunk {k + 1}: the answer hit max_tokens; sending it as two halves")
            continue
        # A budget or an error that ends the correction leaves the first answer standing.
        ended = outcome.status == "ok" or (answer.calls and outcome.stop in _ANSWER_STANDS)
        if not ended or not answer.calls:
            return _stopped(asked, outcome.error or "the model did not call record_notes")
        if outcome.usage.output_tokens >= NEAR_BUDGET * req.max_tokens:
            asked.near_budget += 1
            rec.log(
                f"chunk {k + 1}: the answer used {outcome.usage.output_tokens:,} of its "
                f"{req.max_tokens:,} output tokens (max_tokens); items may have been left out"
            )
        for bad in answer.bad:
            rec.set_aside("item", f"chunk {k + 1}, {bad.reason}", bad.text)
        asked.items += answer.bound.items
        asked.rejected += answer.bound.rejected
        asked.unbound += answer.bound.unbound
        asked.bogus_refs += answer.bound.bogus_refs
        asked.set_aside += len(answer.bad)
        asked.sent += 1
        asked.sent_ids += [m.id for m in chunk.refs.values()]
        k += 1
        if progress:
            used = rec.record.usage.total_input - input0
            progress(Progress(asked.sent, len(queue), len(asked.items), used))
    return asked


def _halves(chunk: Chunk, tz: tzinfo) -> list[Chunk]:
    """The chunk as two, with half its messages each."""
    messages = list(chunk.refs.values())
    half = len(messages) // 2
    return [build_chunks(part, tz, 10**9)[0] for part in (messages[:half], messages[half:])]


def _stopped(asked: Asked, error: str) -> Asked:
    asked.status, asked.error = ("partial" if asked.sent else "failed"), error
    return asked


def _plan(ws: Workspace, intake: Intake, batch: bool) -> CollectResult:
    """Price every chunk the run would send (half price for a batch)."""
    result = _intake_result(intake)
    chunks = build_chunks(intake.messages, ws.tz, chunk_limit(ws))
    result.chunks = len(chunks)
    if not chunks:
        return result
    plans = [plan_stage(ws, build_request(ws, c)) for c in chunks]
    factor = 0.5 if batch else 1.0
    first = plans[0]
    result.plan = replace(
        first,
        prompt_chars=sum(p.prompt_chars for p in plans),
        est_input_tokens=sum(p.est_input_tokens for p in plans),
        est_cost_first_turn=sum(p.est_cost_first_turn for p in plans) * factor,
        requests=len(plans),
    )
    budget, total = ws.settings.budget, 0
    for k, p in enumerate(plans):
        total += p.est_input_tokens
        if k and (total > budget.max_input_tokens or k >= budget.max_turns):
            result.left_for_next_run = sum(len(c.refs) for c in chunks[k:])
            break
    return result


def _summary(result: CollectResult) -> str:
    bad = f"; {result.bad_lines} unreadable line(s) skipped" if result.bad_lines else ""
    parts = []
    if result.batch and result.batch.get("fetched"):
        parts.append(f"fetched batch {result.batch['fetched']}")
    if not result.new_messages:
        parts.append(f"no new messages in {result.files_scanned} transcript file(s)")
    else:
        parts.append(f"{result.new_messages} new message(s)")
    if result.batch and result.batch.get("submitted"):
        parts.append(f"submitted batch {result.batch['submitted']}")
    parts.append(f"{result.appended} item(s) appended")
    if result.duplicates:
        parts.append(f"{result.duplicates} merged as duplicates")
    rejected = sum(result.rejected.values())
    if rejected:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(result.rejected.items()))
        parts.append(f"{rejected} rejected ({why})")
    if result.set_aside:
        parts.append(f"{result.set_aside} set aside")
    if result.left_for_next_run:
        parts.append(f"{result.left_for_next_run} message(s) left for the next run")
    return ", ".join(parts) + bad
