"""Stage 4, calibrate: the monthly step back.

Code runs the health check; the model (actor `calibrate`) reviews the foundation files, samples
recent curate routings, validates lessons (outdated ones move to `archive/lessons/`) and reviews
the pipeline. It may write only `archive/audits/**` and `archive/lessons/**`; anything it wants
changed in a foundation file or `memory/.system/` becomes a proposal for `crustacean review`.
Code writes the audit `archive/audits/YYYY-MM-calibrate.md`: health from code, review from the
model, and "Human Review Needed" listing every proposal with the command to see it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from crustacean.clock import Clock
from crustacean.llm.contract import file_block
from crustacean.llm.loop import StageRequest
from crustacean.llm.runner import ModelSession, plan_stage
from crustacean.llm.tools import ToolOutcome, write_call
from crustacean.stages.health import Health, check_workspace
from crustacean.stages.skeleton import Finish, Run, Stage, StageResult, report_change
from crustacean.state import open_state
from crustacean.store import Store, proposals
from crustacean.workspace import FOUNDATION_FILES, Workspace, stage_doc

STAGE = "calibrate"
FOUNDATION_CHARS = 6_000
AUDIT_KEYS = ("foundation", "pipeline", "lessons", "meta", "human_review")


@dataclass
class Review:
    audit: dict[str, Any] = field(default_factory=dict)
    archived_lessons: list[str] = field(default_factory=list)


def recent_routings(ws: Workspace, n: int = 5) -> list[str]:
    """The latest routing of each of curate's last `n` runs (one run alone is no sample),
    those with a reason first within a run."""
    with open_state(ws) as db:
        rows = db.conn.execute(
            "SELECT id, destination, reason, max(curated) FROM ("
            "  SELECT id, destination, reason, curated, run_id FROM curated_entries "
            "  WHERE destination != 'skip' ORDER BY reason = '', curated DESC"
            ") GROUP BY run_id ORDER BY max(curated) DESC LIMIT ?",
            (n,),
        ).fetchall()
    return [f"[{r[0]}] → {r[1]} ({r[2] or 'no reason'}; {r[3][:10]})" for r in rows]


LESSON_CHARS = 30_000  # the lessons handed with their text; past this, by path and sha256


def lesson_blocks(ws: Workspace, store_read: Callable[[str], bytes | None]) -> str:
    """Every lesson file with its text and sha256 (calibrate judges them), bounded."""
    out, used = [], 0
    for name in sorted(f.name for f in (ws.root / "memory/lessons").glob("*.md")):
        path = f"memory/lessons/{name}"
        data = store_read(path)
        if data is not None:
            room = max(LESSON_CHARS - used, 0)
            out.append(file_block(path, data, room))
            used += min(len(data), room)
    return "\n".join(out) or "(no lessons yet)"


def build_request(
    ws: Workspace, health: Health, store_read: Callable[[str], bytes | None]
) -> StageRequest:
    foundation = []
    for name in FOUNDATION_FILES:
        data = store_read(name)
        foundation.append(
            file_block(name, data, FOUNDATION_CHARS) if data is not None else f"{name}: (missing)"
        )
    lessons = lesson_blocks(ws, store_read)
    routings = "\n".join(f"- {r}" for r in recent_routings(ws)) or "- (no routings yet)"
    prompt = (
        "Run this month's calibration (CALIBRATE.md). Code's health check is below; review the "
        "foundation files against the last month's daily logs and lessons (read them with your "
        "tools), check the sampled curate routings, validate the lessons (move outdated ones to "
        "archive/lessons/), and review the pipeline. Changes to foundation files or "
        "memory/.system/ go through write_context and become proposals. Then call record_audit "
        "and finish.\n\n"
        f"<health>\n{health.to_markdown()}\n</health>\n\n"
        f"<foundation>\n" + "\n".join(foundation) + "\n</foundation>\n\n"
        f"<lessons>\n{lessons}\n</lessons>\n\n"
        f"<recent-curate-routings>\n{routings}\n</recent-curate-routings>"
    )
    return StageRequest(
        stage=STAGE,
        system_doc=stage_doc(ws.root, "CALIBRATE.md"),
        prompt=prompt,
    )


def _handlers(session: ModelSession, run_id: str, review: Review) -> dict[str, Any]:
    def record_audit(inp: dict[str, Any]) -> ToolOutcome:
        review.audit = {k: inp[k] for k in AUDIT_KEYS if k in inp}
        return ToolOutcome("Audit sections recorded.", False)

    def write_context(inp: dict[str, Any]) -> ToolOutcome:
        out = write_call(session.store, STAGE, run_id, inp)
        if (
            out.write is not None
            and out.write.proposal is None
            and isinstance(inp.get("changes"), list)
        ):
            for ch in inp["changes"]:
                if isinstance(ch, dict) and str(ch.get("to", "")).startswith("archive/lessons/"):
                    review.archived_lessons.append(str(ch.get("path")))
        return out

    return {"record_audit": record_audit, "write_context": write_context}


def audit_text(
    ws: Workspace,
    now: datetime,
    health: Health,
    review: Review,
    new_proposals: list[int],
    pending: list[proposals.Proposal],
) -> str:
    audit = review.audit
    found, pipeline = _object(audit.get("foundation")), _object(audit.get("pipeline"))
    lessons = _object(audit.get("lessons"))
    by_id = {p.id: p for p in pending}
    out = [f"# Monthly Calibrate — {now.astimezone(ws.tz):%B %Y}", "", "## Foundation Files"]
    for name in FOUNDATION_FILES:
        mine = [p for p in new_proposals if p in by_id and name in by_id[p].paths]
        note = str(found.get(name, "not reviewed"))
        if mine:
            note += f" (proposal {', '.join(map(str, mine))})"
        out.append(f"- [{'x' if not mine else ' '}] {name} — {note}")
    out += ["", health.to_markdown().strip()]  # its own `## Pipeline Health` heading
    out += ["", "The model's review:"] + [f"- {k}: {v}" for k, v in pipeline.items()]
    if not pipeline:
        out.pop()
    archived = len(review.archived_lessons)
    out += [
        "",
        "## Lessons",
        f"- Validated: {lessons.get('validated', 0)}",
        f"- Updated: {lessons.get('updated', 0)}",
        f"- Archived: {archived}",
    ]
    out += [f"  - {p} → archive/lessons/" for p in review.archived_lessons]
    out += [f"- {k.capitalize()}: {v}" for k, v in lessons.items() if k not in _COUNTED]
    meta = audit.get("meta")
    meta = [str(m) for m in meta] if isinstance(meta, list) else []
    out += ["", "## Meta", "Process changes proposed:"] + [f"- {m}" for m in meta or ["none"]]
    out += ["", "## Human Review Needed"]
    human = [
        f"- [ ] proposal {p.id} ({p.actor}, {', '.join(p.paths)}): {p.message} — "
        f"`crustacean review show {p.id}`"
        for p in pending
    ]
    human += [
        f"- [ ] {item}" for item in (audit.get("human_review") or []) if isinstance(item, str)
    ]
    out += human or ["- nothing"]
    out += ["", f"*Calibrated: {now.astimezone(ws.tz).isoformat(timespec='minutes')}*", ""]
    return "\n".join(out)


_COUNTED = ("validated", "updated", "archived")  # the Lessons counts, written above as figures


def _object(value: object) -> dict[str, Any]:
    """A section of the model's audit, or an empty one when it sent something else."""
    return value if isinstance(value, dict) else {}


@dataclass(kw_only=True)
class CalibrateResult(StageResult):
    health: Health
    audit: str | None = None
    proposals: list[int] = field(default_factory=list)
    archived_lessons: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        return {
            "health": self.health.to_json(),
            "audit": self.audit,
            "proposals": self.proposals,
            "archived_lessons": self.archived_lessons,
        }

    def head(self) -> list[str]:
        audit = f" Audit: {self.audit}." if self.audit else ""
        return [
            f"Health: {self.health.status}.{audit}",
            *(f"  proposal {pid}: see `crustacean review show {pid}`" for pid in self.proposals),
            *(f"  archived lesson {path}" for path in self.archived_lessons),
        ]

    def plan_line(self) -> str:
        return f"health {self.health.status}; the model reviews foundation and lessons"


@dataclass(frozen=True)
class Calibrate(Stage[Health, CalibrateResult]):
    """Calibrate has no options; its health check runs before the lock, so the run it starts
    is not among the runs the check reads."""

    name: ClassVar[str] = STAGE

    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> Health:
        return check_workspace(ws, now)

    def plan(self, ws: Workspace, now: datetime, before: Health) -> CalibrateResult:
        request = build_request(ws, before, Store(ws).read_bytes)
        return CalibrateResult(health=before, plan=plan_stage(ws, request))

    def execute(self, run: Run, before: Health) -> Finish[CalibrateResult]:
        ws, session, now, health = run.ws, run.session, run.now, before
        review = Review()
        outcome = session.run(
            build_request(ws, health, session.store.read_bytes),
            _handlers(session, run.id, review),
        )
        new = list(run.rec.record.proposals)
        pending = proposals.list_proposals(session.store.ws) if not run.dry_run else []
        if not run.dry_run:  # the audit shows the workspace as the review left it
            health = check_workspace(ws, now)
        path = f"archive/audits/{now.astimezone(ws.tz):%Y-%m}-calibrate.md"
        text = audit_text(ws, now, health, review, new, pending).encode()
        change = report_change(session.store, path, text)
        written = session.store.write_context(
            [change], actor=STAGE, message=f"calibrate: audit {path}", run_id=run.id
        )
        run.rec.wrote(list(written.files), written.version, None)
        summary = (
            f"health {health.status}; {len(new)} proposal(s); "
            f"{len(review.archived_lessons)} lesson(s) archived"
        )
        result = CalibrateResult(
            health=health, audit=path, proposals=new, archived_lessons=review.archived_lessons
        )
        return Finish(result, outcome.status, summary, outcome.error)


def calibrate(
    ws: Workspace,
    *,
    dry_run: bool = False,
    plan: bool = False,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> CalibrateResult:
    """Run calibrate once: health by code, review by the model, audit by code.

    `plan` runs the health check and measures the review's first request; nothing is sent,
    written or recorded."""
    return Calibrate().run(ws, dry_run=dry_run, plan=plan, env=env, clock=clock)
