"""Stage 3, compile: weekly archival, tiers, MEMORY.md caps, then the model's judgement, then a
digest assembled by code from what was actually done.

Deterministic pass (code; one version per kind of operation, actor `compile`): archive old daily
logs, sweep session-memory hook files, trash empty files and duplicates, apply the tier lifecycle
with its reasons, bring MEMORY.md under its caps by moving whole sections byte for byte with a
pointer left behind. Then the model (skipped with `--no-model`, and when a full compile already
ran today) gets the candidates code found: promotion, graduation, patterns, due reminders, old
lessons. The digest lists every operation; the store's loss guard refuses a model write that
drops lines without moving them.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, ClassVar

from crustacean.clock import Clock
from crustacean.llm.contract import file_block
from crustacean.llm.loop import StageRequest
from crustacean.llm.runner import ModelSession, plan_stage
from crustacean.llm.stage_tools import DIGEST_SECTIONS
from crustacean.llm.tools import ToolOutcome, write_call
from crustacean.recall.memories import memory_paths
from crustacean.runs import last_runs
from crustacean.stages import compile_skip
from crustacean.stages.compile_inputs import CachedInputs, ReadInputs
from crustacean.stages.compile_plan import (
    Move,
    find_candidates,
    is_empty,
    owner_names,
    plan_daily_archive,
    plan_empty_and_duplicates,
    plan_hook_sweep,
    plan_memory_caps,
)
from crustacean.stages.curate import backfilled_days, uncurated
from crustacean.stages.indexer import index_created
from crustacean.stages.skeleton import Finish, Run, Stage, StageResult, report_change
from crustacean.state import open_state
from crustacean.store import Store
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.overlay import OverlayStore
from crustacean.tiers import Rules, StoredTier, next_change, plan_tiers
from crustacean.workspace import FOUNDATION_FILES, WORKING_MEMORY, Progress, Workspace, stage_doc

STAGE = "compile"


@dataclass
class Ops:
    """What this run did, for the digest and the result."""

    archived: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # old logs kept: curate has not seen them
    swept: list[str] = field(default_factory=list)
    trashed: list[str] = field(default_factory=list)
    tiers: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    model_changes: list[str] = field(default_factory=list)
    sections: dict[str, list[str]] = field(default_factory=dict)
    versions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)  # Index lines code added for new files
    memory_caps: str = ""
    tiers_hold_until: datetime | None = None  # when the tier rules could next decide otherwise

    @property
    def changed_anything(self) -> bool:
        return any(
            (self.archived, self.swept, self.trashed, self.tiers, self.promoted, self.model_changes)
        )


def _apply(
    store: Store,
    changes: list[Change],
    message: str,
    run_id: str,
    ops: Ops,
    inputs: ReadInputs | None = None,
) -> None:
    if not changes:
        return
    if inputs is not None:  # whatever the call does, the next listing must look again
        inputs.stale()
    result = store.write_context(
        changes, actor=STAGE, message=message, run_id=run_id, max_files=len(changes)
    )
    if inputs is not None:
        inputs.wrote(result.files)
    seen = set(ops.files)
    ops.files += [f for f in dict.fromkeys(result.files) if f not in seen]
    if result.version:
        ops.versions.append(result.version)


DETERMINISTIC_STEPS = 5  # archive, sweep, trash, tiers, caps: what `progress` counts


def deterministic_pass(
    ws: Workspace,
    store: Store,
    run_id: str,
    now: datetime,
    progress: Progress | None = None,
    inputs: ReadInputs | None = None,
) -> Ops:
    """Every mechanical step, each its own version; safe to rerun (nothing left to do).

    `progress(done, DETERMINISTIC_STEPS)` hears of each finished step (the first run over years
    of daily logs takes a while). `inputs` is where the files are read from: afresh through
    `store` by default, or from compile's cache of them (stages/compile_inputs.py)."""
    report = progress or (lambda done, total: None)
    src = inputs or ReadInputs(ws, store)
    ops = Ops()
    today = ws.today(now)
    paths = src.paths()
    existing = set(paths)
    moves = plan_daily_archive(
        paths, ws.daily_dir, today, ws.settings.archive.daily_after_days, existing
    )
    moves, ops.held = hold_uncurated(ws, store, moves)
    ops.archived = _move(store, moves, f"archive {len(moves)} daily log(s)", run_id, ops, src)
    report(1, DETERMINISTIC_STEPS)
    existing |= {m.dst for m in moves}
    paths = src.paths()  # listed again only after a step wrote
    sweeps = plan_hook_sweep(paths, today, existing)
    what = f"sweep {len(sweeps)} session-memory hook file(s)"
    ops.swept = _move(store, sweeps, what, run_id, ops, src)
    report(2, DETERMINISTIC_STEPS)
    _trash_step(store, run_id, ops, src)
    report(3, DETERMINISTIC_STEPS)
    _tier_step(ws, store, run_id, now, ops, src)
    report(4, DETERMINISTIC_STEPS)
    _caps_step(ws, store, run_id, today, ops, src)
    report(5, DETERMINISTIC_STEPS)
    return ops


def _move(
    store: Store, moves: list[Move], what: str, run_id: str, ops: Ops, inputs: ReadInputs
) -> list[str]:
    """Whole files moved in one version; the digest's line for each."""
    _apply(
        store,
        [Change(m.src, "move", to=m.dst) for m in moves],
        f"compile: {what}",
        run_id,
        ops,
        inputs,
    )
    return [f"{m.src} → {m.dst}" for m in moves]


def hold_uncurated(ws: Workspace, store: Store, moves: list[Move]) -> tuple[list[Move], list[str]]:
    """Keep out of the archive a daily log collect appended to since curate last finished (a
    backfill into an old day) while it has entries curate has not seen, and say so. Logs
    collect did not touch are archived as before; with curate disabled, nothing is held."""
    if not ws.settings.stages.curate.enabled or not moves:
        return moves, []
    kept, held = [], []
    with open_state(ws) as db:
        touched = set(backfilled_days(ws, db))
        for move in moves:
            day = move.src.rsplit("/", 1)[-1].removesuffix(".md")
            data = (store.read_bytes(move.src) or b"") if day in touched else b""
            n = uncurated(db, day, data.decode("utf-8", "replace")) if data else 0
            if n:
                held.append(
                    f"{move.src}: {n} uncurated entr{'y' if n == 1 else 'ies'} from a collect "
                    "backfill; archived once curate has seen them"
                )
            else:
                kept.append(move)
    return kept, held


def _trash_step(store: Store, run_id: str, ops: Ops, inputs: ReadInputs) -> None:
    files = inputs.trash_files()
    protected = {WORKING_MEMORY, *FOUNDATION_FILES}
    # A file with bytes of its own (not empty, no copy) is never trashed nor kept over a copy:
    # the planner need not see the thousands of those.
    copies = Counter(data for data, _ in files.values())
    shared = {p: d for p, (d, _) in files.items() if copies[d] > 1 or is_empty(d)}
    trash = plan_empty_and_duplicates(shared, protected)
    _apply(
        store,
        [Change(t.path, "delete", expected_sha256=files[t.path][1]) for t in trash],
        f"compile: trash {len(trash)} empty or duplicate file(s)",
        run_id,
        ops,
        inputs,
    )
    ops.trashed = [f"{t.path} ({t.reason})" for t in trash]


def _tier_step(
    ws: Workspace, store: Store, run_id: str, now: datetime, ops: Ops, inputs: ReadInputs
) -> None:
    """The lifecycle's decisions, kept in state.db: no byte of a memory file changes (a tier
    the file names itself is the person's, and the lifecycle leaves that memory alone). A plan
    or dry run (an overlay store) keeps nothing."""
    memories = inputs.memories()
    with open_state(ws) as db:
        recalls = db.recalls()
    rules = Rules.from_config(ws.settings.tiers)
    decisions = [d for d in plan_tiers(memories, recalls, now, rules) if d.changed]
    ops.tiers_hold_until = next_change(memories, recalls, now, rules)
    ops.tiers = [f"{d.path}: {d.reason}" for d in decisions]
    if decisions and not isinstance(store, OverlayStore):
        with open_state(ws) as db:
            db.set_tiers({d.path: StoredTier(d.next) for d in decisions}, STAGE, now)
        inputs.retiered()


def _caps_step(
    ws: Workspace, store: Store, run_id: str, today: date, ops: Ops, inputs: ReadInputs
) -> None:
    current = store.read_bytes(WORKING_MEMORY)
    if current is None:
        return
    mem = ws.settings.memory
    paths = set(inputs.paths())
    plan = plan_memory_caps(
        current.decode("utf-8"), mem.working_lines, mem.working_chars, today, paths
    )
    if not plan.moves:
        return
    changes = [
        Change(
            WORKING_MEMORY,
            "edit",
            old=current,
            new=plan.new_text.encode(),
            expected_sha256=sha256_hex(current),
        )
    ]
    for move in plan.moves:
        body = "".join(move.lines).encode()
        changes.append(Change(move.dst, "append", content=body))
    _apply(
        store,
        changes,
        f"compile: MEMORY.md {plan.lines_before}→{plan.lines_after} lines, "
        f"{len(plan.moves)} section(s) moved",
        run_id,
        ops,
        inputs,
    )
    ops.promoted = [f"{m.heading} → {m.dst}" for m in plan.moves]
    ops.memory_caps = (
        f"{plan.lines_before}→{plan.lines_after} lines, {plan.chars_before:,}→"
        f"{plan.chars_after:,} characters"
        + ("" if plan.under_caps else "; still over its caps: see flagged")
    )


def candidates_prompt(ws: Workspace, store: Store, now: datetime) -> str:
    def text(path: str) -> str:
        return (store.read_bytes(path) or b"").decode("utf-8", "replace")

    today = ws.today(now)
    files = {}
    for path in (f.path for f in store.list_context_files()):
        if path.startswith(("memory/", "knowledge/")) and path.endswith(".md"):
            try:
                mtime = datetime.fromtimestamp(os.stat(ws.root / path).st_mtime, UTC)
            except FileNotFoundError:  # written by this run's pass, only in memory (dry run, plan)
                mtime = now
            files[path] = (store.read_bytes(path) or b"", mtime)
    week = (today - timedelta(days=d) for d in range(7))
    logs = {day: log for day in week if (log := text(ws.daily_log(day)))}
    owners = owner_names(text("USER.md"), text("IDENTITY.md"))
    return find_candidates(text(WORKING_MEMORY), files, logs, today, now, owners).to_prompt()


WEEK_CHARS = 40_000  # the week's logs handed with their text; past this, by path and sha256


def handed_files(ws: Workspace, store: Store, now: datetime) -> str:
    """The past week's daily logs and MEMORY.md, each with its sha256 (COMPILE.md's input):
    lessons and patterns are read off the logs, promotion edits MEMORY.md."""
    today, used, logs = ws.today(now), 0, []
    for d in range(7):
        path = ws.daily_log(today - timedelta(days=d))
        data = store.read_bytes(path)
        if data is None:
            continue
        room = max(WEEK_CHARS - used, 0)
        logs.append(file_block(path, data, room))
        used += min(len(data), room)
    memory = store.read_bytes(WORKING_MEMORY)
    return (
        "<daily-logs>\n" + ("\n".join(logs) or "(no daily log this week)") + "\n</daily-logs>\n\n"
        "<working-memory>\n"
        + (file_block(WORKING_MEMORY, memory) if memory is not None else "(no MEMORY.md)")
        + "\n</working-memory>"
    )


def build_request(ws: Workspace, ops: Ops, candidates: str, handed: str = "") -> StageRequest:
    done = (
        "\n".join(
            f"- {line}"
            for line in (*ops.archived, *ops.swept, *ops.trashed, *ops.tiers, *ops.promoted)
        )
        or "- nothing"
    )
    prompt = (
        "Code has done this week's mechanical pass:\n<done>\n" + done + "\n</done>\n\n"
        "Now do the judgement phases of COMPILE.md on these candidates: entity promotion (a "
        "few at most), staleness pruning (when unsure, flag it for Calibrate), lesson "
        "extraction, graduation to knowledge/ with a pointer left behind, contradictions "
        "(fresher wins), patterns. Then call record_digest with your sections, then finish.\n\n"
        f"<candidates>\n{candidates or '(none found by code)'}\n</candidates>"
        + (f"\n\n{handed}" if handed else "")
    )
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "COMPILE.md"),
        prompt=prompt,
    )


def _handlers(session: ModelSession, run_id: str, ops: Ops) -> dict[str, Callable[..., Any]]:
    def record_digest(inp: dict[str, Any]) -> ToolOutcome:
        for key in DIGEST_SECTIONS:
            items = inp.get(key)
            if isinstance(items, list):
                ops.sections[key] = [" ".join(str(i).split())[:300] for i in items][:50]
        return ToolOutcome("Digest sections recorded.", False)

    def write_context(inp: dict[str, Any]) -> ToolOutcome:
        out = write_call(session.store, STAGE, run_id, inp)
        if out.write is not None and out.write.version and isinstance(inp.get("changes"), list):
            for ch in inp["changes"]:
                if isinstance(ch, dict):
                    target = f" → {ch['to']}" if ch.get("to") else ""
                    ops.model_changes.append(f"{ch.get('mode')} {ch.get('path')}{target}")
        return out

    return {"record_digest": record_digest, "write_context": write_context}


def digest_text(ws: Workspace, ops: Ops, now: datetime, record_id: str) -> str:
    today = ws.today(now)
    start = today - timedelta(days=6)
    week_logs = [
        d for d in range(7) if (ws.root / ws.daily_log(today - timedelta(days=d))).is_file()
    ]
    moved = [c for c in ops.model_changes if c.startswith(("delete", "move"))]
    # a prune by moving: the cut (an edit) and its append to archive/pruned/ in one call
    cut = [c for c in ops.model_changes if c.startswith("append archive/pruned/")]
    cut_from = {c.removeprefix("append archive/pruned/") for c in cut}
    cut += [c for c in ops.model_changes if c.startswith("edit ") and c[5:] in cut_from]
    prunes = moved + [f"{c[5:]} → archive/pruned/{c[5:]}" for c in cut if c.startswith("edit ")]
    pruned = prunes + ops.trashed
    edits = [c for c in ops.model_changes if c.endswith(f" {WORKING_MEMORY}")]
    memory_line = "; ".join(
        x for x in (ops.memory_caps, f"{len(edits)} change(s) by the model" if edits else "") if x
    )

    def lines(items: list[str], cap: int = 200) -> str:
        """Long lists are cut (the version messages and `crustacean history` hold them all)."""
        shown = [f"- {i}" for i in items[:cap]]
        if len(items) > cap:
            shown.append(f"- … and {len(items) - cap} more (see `crustacean history`)")
        return "\n".join(shown) if shown else "- none"

    return "\n".join(
        [
            f"# Weekly Digest — {start.isoformat()} to {today.isoformat()}",
            "",
            "## Activity Summary",
            f"- Daily files processed: {len(week_logs)}",
            f"- Daily logs archived: {len(ops.archived)}; hook files swept: {len(ops.swept)}",
            "",
            "## File Operations",
            f"- Files archived: {len(ops.archived) + len(ops.swept)}",
            lines(ops.archived + ops.swept),
            f"- Kept out of the archive until curated: {len(ops.held)}",
            lines(ops.held),
            f"- Entities promoted: {len(ops.promoted)}",
            lines(ops.promoted),
            f"- Content pruned: {len(pruned)}",
            lines(pruned),
            f"- Tier changes: {len(ops.tiers)}",
            lines(ops.tiers),
            f"- MEMORY.md: {memory_line or 'within its caps, unchanged'}",
            f"- Other changes by the model: {len(ops.model_changes) - len(moved) - len(cut)}",
            lines([c for c in ops.model_changes if c not in moved and c not in cut]),
            "",
            *(
                f"## {title}\n{lines(ops.sections.get(key, []))}\n"
                for key, title in _TITLES.items()
            ),
            "---",
            f"*Compiled: {now.astimezone(ws.tz).isoformat(timespec='minutes')} (run {record_id})*",
            "",
        ]
    )


_TITLES = {  # the model's record_digest sections, under the digest's headings
    "lessons": "Lessons Extracted",
    "graduated": "Content Graduated",
    "contradictions": "Contradictions Resolved",
    "patterns": "Patterns Noted",
    "flagged": "Flagged for Calibrate",
}


def write_digest(ws: Workspace, store: Store, ops: Ops, now: datetime, run_id: str) -> str:
    path = f"archive/digests/{ws.today(now).isoformat()}-weekly.md"
    text = digest_text(ws, ops, now, run_id).encode()
    _apply(store, [report_change(store, path, text)], f"compile: weekly digest {path}", run_id, ops)
    return path


_RESULT_OPS = ("archived", "held", "swept", "trashed", "tiers", "promoted", "model_changes")


@dataclass(kw_only=True)
class CompileResult(StageResult):
    ops: Ops
    digest: str | None = None
    model: str = "ran"

    def fields(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "digest": self.digest,
            **{k: getattr(self.ops, k) for k in (*_RESULT_OPS, "versions")},
        }

    def head(self) -> list[str]:
        ops, lines = self.ops, []
        if self.record is None:
            nothing = "" if ops.changed_anything else " nothing to archive, sweep, trash or move"
            lines.append(f"Plan: the deterministic pass would do this (nothing written):{nothing}")
        labels = ("archived", "not archived", "swept", "trashed", "tier", "moved section", "model")
        for label, key in zip(labels, _RESULT_OPS, strict=True):
            lines += [f"  {label}: {item}" for item in getattr(ops, key)]
        digest = f" Digest: {self.digest}." if self.digest else ""
        return [*lines, f"Model pass: {self.model}.{digest}"]

    def plan_line(self) -> str:
        ops = self.ops
        return (
            f"archive {len(ops.archived)} daily log(s), sweep {len(ops.swept)} hook file(s), "
            f"trash {len(ops.trashed)}, {len(ops.tiers)} tier change(s), "
            f"{len(ops.promoted)} MEMORY.md section(s) moved; model pass {self.model}"
        )


@dataclass(frozen=True)
class Compile(Stage[bool, CompileResult]):
    """Compile's options: `no_model` (the deterministic pass only) and a progress display.
    Before the lock it asks whether a full compile already ran today (then the model rests)."""

    name: ClassVar[str] = STAGE
    no_model: bool = False
    progress: Progress | None = None

    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> bool:
        return _compiled_today(ws, now)

    def plan(self, ws: Workspace, now: datetime, before: bool) -> CompileResult:
        return _plan(ws, now, self.no_model, before, self.progress)

    def execute(self, run: Run, before: bool) -> Finish[CompileResult]:
        ws, session, now, rec = run.ws, run.session, run.now, run.rec
        ops, cached = _pass_unless_unchanged(
            ws, session.store, run.id, now, run.dry_run, self.progress
        )
        status, error, model = "ok", None, "ran"
        if self.no_model:
            model = "skipped (--no-model)"
        elif before:
            model = "skipped (a full compile already ran today)"
        else:
            before_files = set(memory_paths(ws.root))
            outcome = session.run(
                build_request(
                    ws,
                    ops,
                    candidates_prompt(ws, session.store, now),
                    handed_files(ws, session.store, now),
                ),
                _handlers(session, run.id, ops),
            )
            status, error = outcome.status, outcome.error
            if not run.dry_run:
                created = sorted(set(memory_paths(ws.root)) - before_files)
                ops.indexed = index_created(session.store, created, STAGE, run.id)
        digest = None
        if ops.changed_anything or model == "ran":
            digest = write_digest(ws, session.store, ops, now, run.id)
        if cached is not None:  # after the pass: the model's writes (unknown), or the digest's
            after = None if model == "ran" else [digest] if digest is not None else []
            _keep_cache(ws, cached, now, ops, after)
        for version in ops.versions:
            rec.wrote([], version, None)
        rec.wrote(ops.files, None, None)
        summary = (
            f"archived {len(ops.archived)}"
            + (f" (held {len(ops.held)} with uncurated entries)" if ops.held else "")
            + f", swept {len(ops.swept)}, trashed "
            f"{len(ops.trashed)}, {len(ops.tiers)} tier change(s), {len(ops.promoted)} "
            f"section(s) moved; model {model}"
        )
        worked = ops.changed_anything or model == "ran"
        result = CompileResult(ops=ops, digest=digest, model=model)
        return Finish(result, status if worked else "skipped", summary, error)


def compile_workspace(
    ws: Workspace,
    *,
    dry_run: bool = False,
    no_model: bool = False,
    plan: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    progress: Progress | None = None,
) -> CompileResult:
    """Run compile once: deterministic pass, model pass, digest.

    `plan` runs the deterministic pass in memory (nothing written, no run recorded) and measures
    the model pass's first request without sending it. `progress` hears of the deterministic
    pass's steps."""
    return Compile(no_model, progress).run(ws, dry_run=dry_run, plan=plan, env=env, clock=clock)


def _pass_unless_unchanged(
    ws: Workspace,
    store: Store,
    run_id: str,
    now: datetime,
    dry_run: bool,
    progress: Progress | None = None,
) -> tuple[Ops, tuple[CachedInputs, compile_skip.PassCheck] | None]:
    """The deterministic pass over compile's file cache, or nothing when its inputs are those
    of a run that left nothing to do and no day or tier threshold has come since
    (stages/compile_skip.py); with the cache to keep when the pass ran."""
    if dry_run:  # a dry run writes no state, so it neither uses nor keeps a fingerprint
        return deterministic_pass(ws, store, run_id, now, progress), None
    inputs = CachedInputs(ws, store)
    found = compile_skip.check(ws, now, inputs)
    if found.nothing_to_do:
        return Ops(), None
    return deterministic_pass(ws, store, run_id, now, progress, inputs), (inputs, found)


def _keep_cache(
    ws: Workspace,
    cached: tuple[CachedInputs, compile_skip.PassCheck],
    now: datetime,
    ops: Ops,
    after: list[str] | None,
) -> None:
    """Keep the file cache as this run leaves the workspace, and the fingerprint when the pass
    found nothing to do and nothing was written after it (a pass that changed something, or
    was followed by the model's writes, vouches for nothing). `after`: the files written
    since the pass (the digest), None when not known (the model wrote)."""
    inputs, found = cached
    wrote = after is None or bool(after)
    if wrote:  # the model or the digest: look at the files again, all or those written
        inputs.stale()
        if after is not None:
            inputs.wrote(after)
    inputs.settle()  # the files this run wrote are read now, not by the next run
    until = None
    if not wrote and not ops.changed_anything and not ops.held:  # a held log: curate may come
        until = compile_skip.next_midnight(ws, now)
        if ops.tiers_hold_until is not None:
            until = min(until, ops.tiers_hold_until)
    compile_skip.keep(ws, found, now, until, inputs)


def _plan(
    ws: Workspace, now: datetime, no_model: bool, already: bool, progress: Progress | None
) -> CompileResult:
    store = OverlayStore(ws, lambda: now)
    ops = deterministic_pass(ws, store, "plan", now, progress)
    if no_model or already:
        why = "--no-model" if no_model else "a full compile already ran today"
        return CompileResult(ops=ops, model=f"skipped ({why})")
    request = build_request(
        ws, ops, candidates_prompt(ws, store, now), handed_files(ws, store, now)
    )
    return CompileResult(ops=ops, model="would run", plan=plan_stage(ws, request))


def _compiled_today(ws: Workspace, now: datetime) -> bool:
    last = last_runs(ws).get(STAGE)
    return bool(
        last
        and last.status == "ok"
        and "model ran" in (last.summary or "")
        and ws.today(last.started) == ws.today(now)
    )
