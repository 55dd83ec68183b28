"""The health check by code: is the pipeline running, and is the workspace in shape?

Each check is a small function over plain data (pure where it can be) returning a `Check` with a
status (ok / warn / fail), a one-line summary with the figures, one line per finding and
machine-readable figures. `check_workspace` gathers the data from a workspace and runs them all;
a bad file or a check that breaks becomes a finding, never an exception. Secrets are reported by
path, kind and line, never by value.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from crustacean.config import STAGES
from crustacean.daily import dated_day, log_day
from crustacean.documents import MAX_DOC_BYTES, DocumentSkipped, read_document
from crustacean.folder_index import index_span, is_indexed
from crustacean.markdown import count_lines, heading, link_targets, split_lines, split_sections
from crustacean.runs import RunRecord, counts_as_last, error_line, list_runs
from crustacean.schedule import expected_slots, slot_at_or_after
from crustacean.secrets import find_secrets
from crustacean.stages.compile_plan import (
    INDEX_NAMES,
    OLD_LESSON_DAYS,
    is_hidden,
    norm_heading,
    plan_empty_and_duplicates,
    recorded_day,
)
from crustacean.store.proposals import Proposal, list_proposals
from crustacean.usage import KINDS
from crustacean.workspace import CHECKED, FOUNDATION_FILES, WORKING_MEMORY, Workspace, walk

STATUSES = ("ok", "warn", "fail")
WINDOW = timedelta(days=30)
DUE_GRACE = timedelta(hours=1)
STOPPED_AFTER = 3  # this many latest due slots of a stage all missed: the stage has stopped
BOOTSTRAP_LIMIT = 20_000  # OpenClaw's bootstrap per-file character limit
WARN_SHARE = 0.85
OLD_PROPOSAL_DAYS = 14
NOISE_SHORT = 20
DETAIL_LIMIT = 20


@dataclass(frozen=True)
class Check:
    """One health item: its status, a one-line summary, one line per finding, and figures."""

    name: str
    status: str
    summary: str
    details: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "details": list(self.details)}


@dataclass(frozen=True)
class Health:
    """Every check of one health run."""

    checks: tuple[Check, ...]

    @property
    def status(self) -> str:
        """The worst status of the checks (ok when there are none)."""
        return worst(c.status for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "checks": [c.to_json() for c in self.checks]}

    def to_markdown(self) -> str:
        """A `## Pipeline Health` block: one bullet per check, its details indented below."""
        counts = Counter(c.status for c in self.checks)
        out = [
            "## Pipeline Health",
            "",
            f"Overall: **{self.status}** ({counts['ok']} ok, {counts['warn']} warn, "
            f"{counts['fail']} fail)",
            "",
        ]
        for c in self.checks:
            out.append(f"- **{c.name}** ({c.status}): {c.summary}")
            out += [f"  - {line}" for line in c.details]
        return "\n".join(out) + "\n"


def worst(statuses: Any) -> str:
    """The worst of some statuses: fail over warn over ok."""
    return max(statuses, key=STATUSES.index, default="ok")


def _capped(lines: list[str], limit: int = DETAIL_LIMIT) -> tuple[str, ...]:
    """At most `limit` lines, then one saying how many more there are."""
    if len(lines) <= limit:
        return tuple(lines)
    return (*lines[:limit], f"… and {len(lines) - limit} more")


def _stamp(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


# ---------------------------------------------------------------------------- cadence


def _stage_cadence(
    schedule: str, starts: list[datetime], start: datetime, now: datetime, tz: tzinfo
) -> tuple[int, list[datetime], int]:
    """How many slots of one stage were due, which had no run between them and the next slot,
    and how many of the latest due slots in a row were missed."""
    slots = expected_slots(schedule, start, now, tz)
    bounds = [*slots[1:], slot_at_or_after(schedule, now, tz)]
    missed, expected, tail = [], 0, 0
    for slot, nxt in zip(slots, bounds, strict=False):
        if now < min(nxt, slot + DUE_GRACE):
            continue  # not due yet: its run may still be coming
        expected += 1
        if any(slot <= s < nxt for s in starts):
            tail = 0
        else:
            missed.append(slot)
            tail += 1
    return expected, missed, tail


def cadence(
    schedules: Mapping[str, str],
    enabled: Mapping[str, bool],
    runs: list[RunRecord],
    now: datetime,
    *,
    tz: tzinfo = UTC,
) -> Check:
    """Missed schedule slots and failed runs of each enabled stage over the last 30 days.

    A slot is missed when no run of its stage (any status, dry runs excepted) started between it
    and the next slot. Only slots after the first-ever run of any stage count.
    Fail when a stage's latest run failed or its last 3 due slots were all missed; warn on any
    other miss or failure.
    """
    real = [r for r in runs if counts_as_last(r)]  # runs.last_run's notion, for every stage
    if not real:
        return Check("cadence", "warn", "no runs recorded yet", figures={"runs": 0})
    start = max(now - WINDOW, min(r.started for r in real))
    figures: dict[str, Any] = {"window_days": WINDOW.days, "since": start.isoformat()}
    missed: list[tuple[datetime, str]] = []
    failures: list[str] = []
    stopped: list[str] = []
    for stage, schedule in schedules.items():
        if not enabled.get(stage, True):
            figures[stage] = {"enabled": False}
            continue
        mine = sorted((r for r in real if r.stage == stage), key=lambda r: r.started)
        expected, gaps, tail = _stage_cadence(schedule, [r.started for r in mine], start, now, tz)
        recent = [r for r in mine if r.started >= start]
        failed = [r for r in recent if r.status == "failed"]
        missed += [(slot, stage) for slot in gaps]
        failures += [
            f"{stage} failed {_stamp(r.started)} ({r.id}): {r.error or '—'}" for r in failed
        ]
        if (mine and mine[-1].status == "failed") or tail >= STOPPED_AFTER:
            stopped.append(stage)
        figures[stage] = {
            "enabled": True,
            "schedule": schedule,
            "expected": expected,
            "missed": len(gaps),
            "runs": len(recent),
            "failed": len(failed),
            "last_run": mine[-1].started.isoformat() if mine else None,
            "last_status": mine[-1].status if mine else None,
        }
    return _cadence_check(missed, failures, stopped, figures)


def _cadence_check(
    missed: list[tuple[datetime, str]],
    failures: list[str],
    stopped: list[str],
    figures: dict[str, Any],
) -> Check:
    figures |= {"missed": len(missed), "failed": len(failures), "stopped": stopped}
    status = "fail" if stopped else "warn" if missed or failures else "ok"
    summary = f"{len(missed)} missed run(s), {len(failures)} failed run(s) in {WINDOW.days} days"
    if stopped:
        summary += f"; not working: {', '.join(stopped)}"
    lines = [f"{stage} missed its {_stamp(slot)} slot" for slot, stage in sorted(missed)[::-1]]
    return Check("cadence", status, summary, _capped(lines, 10) + _capped(failures[::-1]), figures)


# ---------------------------------------------------------------------------- cost


def cost(runs: list[RunRecord], now: datetime) -> Check:
    """Tokens by kind and estimated dollars per stage over the last 30 days (dry runs cost too)."""
    recent = [r for r in runs if now - WINDOW <= r.started <= now]
    stages: dict[str, dict[str, Any]] = {}
    for r in recent:
        row = stages.setdefault(r.stage, {"runs": 0, "cost_usd": 0.0, **dict.fromkeys(KINDS, 0)})
        row["runs"] += 1
        row["cost_usd"] += r.cost_usd
        for kind in KINDS:
            row[kind] += getattr(r.usage, kind)
    total = {k: sum(s[k] for s in stages.values()) for k in ("runs", "cost_usd", *KINDS)}
    order = sorted(stages, key=lambda s: (STAGES.index(s) if s in STAGES else len(STAGES), s))
    details = [
        f"{s}: {v['runs']} run(s), ${v['cost_usd']:.4f}; input {v['input_tokens']:,}, output "
        f"{v['output_tokens']:,}, cache read {v['cache_read_tokens']:,}, cache write "
        f"{v['cache_write_tokens']:,}"
        for s in order
        for v in [stages[s]]
    ]
    summary = f"${total['cost_usd']:.4f} over {total['runs']} run(s) in {WINDOW.days} days"
    figures = {"window_days": WINDOW.days, "total": total, "stages": {s: stages[s] for s in order}}
    return Check("cost", "ok", summary, tuple(details), figures)


# ---------------------------------------------------------------------------- daily logs


_BULLET = re.compile(r"^\s*[-*+]\s+(.*\S)")


def _content_lines(text: str) -> list[str]:
    """Lines that say something: not blank, not headings, not frontmatter fences or comments."""
    return [
        line
        for line in text.splitlines()
        if line.strip() and heading(line) is None and not line.lstrip().startswith(("---", "<!--"))
    ]


def is_noise(text: str) -> bool:
    """Mostly duplicate or very short (< 20 characters) bullets, among at least 4."""
    bullets = [m.group(1) for line in text.splitlines() if (m := _BULLET.match(line))]
    if len(bullets) < 4:
        return False
    seen: set[str] = set()
    bad = 0
    for bullet in bullets:
        key = " ".join(bullet.casefold().split())
        bad += key in seen or len(key) < NOISE_SHORT
        seen.add(key)
    return bad * 2 > len(bullets)


def daily_logs(logs: Mapping[date, str], today: date, days: int = 30) -> Check:
    """Missing, empty and noisy logs of the last `days` full days, and the last 10 logs' sizes.

    Days before the first log ever are not missing (a new workspace has no past).
    """
    if not logs:
        return Check("daily_logs", "warn", "no daily logs yet", figures={"logs": 0})
    first = max(min(logs), today - timedelta(days=days))
    window = [first + timedelta(days=n) for n in range((today - first).days)]
    missing = [d for d in window if d not in logs]
    empty = [d for d in window if d in logs and not _content_lines(logs[d])]
    noisy = [d for d in window if d in logs and d not in empty and is_noise(logs[d])]
    last = sorted(logs)[-10:]
    figures = {
        "days": len(window),
        "missing": [d.isoformat() for d in missing],
        "empty": [d.isoformat() for d in empty],
        "noisy": [d.isoformat() for d in noisy],
        "last_sizes": {d.isoformat(): len(logs[d].encode("utf-8")) for d in last},
    }
    summary = (
        f"{len(window) - len(missing)}/{len(window)} days logged; {len(missing)} missing, "
        f"{len(empty)} empty, {len(noisy)} noisy"
    )
    kinds = (("missing", missing), ("empty", empty), ("noisy (short or repeated bullets)", noisy))
    details = [f"{kind}: {date_ranges(days)}" for kind, days in kinds if days]
    status = "warn" if missing or empty or noisy else "ok"
    return Check("daily_logs", status, summary, _capped(details), figures)


def date_ranges(days: list[date]) -> str:
    """Days as one compact line: runs of consecutive days as `first..last` (a month of
    missing logs is one range, not 30 lines a reader or a model has to count)."""
    runs: list[list[date]] = []
    for day in sorted(set(days)):
        if runs and day - runs[-1][-1] == timedelta(days=1):
            runs[-1].append(day)
        else:
            runs.append([day])
    return ", ".join(
        r[0].isoformat() if len(r) == 1 else f"{r[0].isoformat()}..{r[-1].isoformat()}"
        for r in runs
    )


# ---------------------------------------------------------------------------- MEMORY.md


def memory_md(text: str | None, lines_cap: int, chars_cap: int) -> Check:
    """Size against the caps: warn at 85 % of a cap or of OpenClaw's 20,000-char bootstrap
    limit, fail when over a cap (or over the bootstrap limit)."""
    if text is None:
        return Check("memory_md", "warn", "MEMORY.md is missing")
    lines, chars = count_lines(text), len(text)
    shares = {
        "lines_pct": lines / lines_cap * 100,
        "chars_pct": chars / chars_cap * 100,
        "bootstrap_pct": chars / BOOTSTRAP_LIMIT * 100,
    }
    figures = {
        "lines": lines,
        "chars": chars,
        "lines_cap": lines_cap,
        "chars_cap": chars_cap,
        "bootstrap_limit": BOOTSTRAP_LIMIT,
        **{k: round(v, 1) for k, v in shares.items()},
    }
    top = max(shares.values())
    status = "fail" if top > 100 else "warn" if top >= WARN_SHARE * 100 else "ok"
    summary = (
        f"{lines}/{lines_cap} lines ({shares['lines_pct']:.0f} %), {chars:,}/{chars_cap:,} chars "
        f"({shares['chars_pct']:.0f} %), {shares['bootstrap_pct']:.0f} % of the "
        f"{BOOTSTRAP_LIMIT:,}-char bootstrap limit"
    )
    return Check("memory_md", status, summary, figures=figures)


# ---------------------------------------------------------------------------- structure map


_TICKED = re.compile(r"`([^`\n]+)`")
_PLACEHOLDER = re.compile(r"[<>*{}\s]|YYYY|://")


def map_section(memory_text: str) -> str | None:
    """The text of MEMORY.md's `## … Memory Structure Map` section, or None."""
    lines = split_lines(memory_text)
    for sec in split_sections(memory_text):
        if sec.level == 2 and "memorystructuremap" in norm_heading(sec.heading):
            return "".join(lines[sec.start + 1 : sec.end])
    return None


def map_entries(section: str) -> list[str]:
    """Backticked workspace paths in the map (with a `/`; placeholders like `YYYY` skipped)."""
    found = (t.strip() for t in _TICKED.findall(section))
    return list(dict.fromkeys(t for t in found if "/" in t and not _PLACEHOLDER.search(t)))


def _norm_path(path: str) -> str:
    return path.strip().removeprefix("./").rstrip("/")


def structure_map(
    memory_text: str | None, top_level: list[str], exists: Callable[[str], bool]
) -> Check:
    """Dead entries (listed, not on disk) and orphans (on disk in `top_level`, not listed).

    `top_level` holds workspace paths, folders ending in `/`; `exists` answers for a listed path.
    """
    section = map_section(memory_text) if memory_text is not None else None
    if section is None:
        return Check("structure_map", "warn", "MEMORY.md has no Memory Structure Map section")
    entries = map_entries(section)
    dead = [e for e in entries if not exists(_norm_path(e))]
    listed = {_norm_path(e) for e in entries}
    orphans = [p for p in top_level if _norm_path(p) not in listed]
    details = [f"dead entry: {e}" for e in dead] + [f"orphan: {p}" for p in orphans]
    summary = f"{len(entries)} entries; {len(dead)} dead, {len(orphans)} orphan(s)"
    figures = {"entries": len(entries), "dead": dead, "orphans": orphans}
    return Check(
        "structure_map", "warn" if dead or orphans else "ok", summary, _capped(details), figures
    )


def folder_indexes(readmes: Mapping[str, str], files: list[str], daily_dir: str) -> Check:
    """Orphans: files below a folder README that no README above them lists under `## Index`
    (code adds each file curate creates there; a hand-made file is listed by hand or by
    calibrate's proposal). Daily logs and session hook files are found by date, never listed."""
    indexed = {
        folder: text
        for path, text in readmes.items()
        if index_span(text.split("\n")) is not None
        for folder in [path.rpartition("/")[0]]
    }
    orphans = []
    for rel in files:
        parent, _, name = rel.rpartition("/")
        if _is_index(rel) or is_hidden(rel) or not rel.endswith(".md"):
            continue
        if parent == daily_dir and dated_day(name) is not None:
            continue
        above = [f for f in indexed if rel.startswith(f + "/")]
        if above and not any(is_indexed(indexed[f], rel[len(f) + 1 :]) for f in above):
            orphans.append(rel)
    summary = f"{len(orphans)} orphan(s) in {len(indexed)} folder Index(es)"
    figures = {"indexes": sorted(indexed), "orphans": orphans}
    details = [f"orphan: {p}" for p in orphans]
    return Check("orphans", "warn" if orphans else "ok", summary, _capped(details), figures)


# ---------------------------------------------------------------------------- links


def links(
    files: Mapping[str, str], exists: Callable[[str], bool], pointers: frozenset[str] = frozenset()
) -> Check:
    """Broken markdown links (and MEMORY.md pointers, for the paths in `pointers`): each link
    whose target exists neither relative to the file's folder nor to the workspace root."""
    broken = []
    for path in sorted(files):
        folder = PurePosixPath(path).parent
        for n, target in link_targets(files[path], path in pointers):
            if not target:
                continue  # a pure anchor or query
            here = os.path.normpath(str(folder / target))
            if not (exists(here) or exists(os.path.normpath(target.lstrip("/")))):
                broken.append(f"{path}:{n} → {target}")
    summary = f"{len(broken)} broken link(s) in {len(files)} file(s)"
    figures = {"files": len(files), "broken": len(broken)}
    return Check("links", "warn" if broken else "ok", summary, _capped(broken), figures)


# ---------------------------------------------------------------------------- frontmatter


def frontmatter(problems: list[str], checked: int) -> Check:
    """Files whose frontmatter (or whole text) could not be read, one warning line each."""
    summary = f"{len(problems)} of {checked} file(s) with unreadable frontmatter"
    figures = {"files": checked, "unreadable": len(problems)}
    return Check("frontmatter", "warn" if problems else "ok", summary, _capped(problems), figures)


# ---------------------------------------------------------------------------- duplicates


def duplicates(files: Mapping[str, bytes]) -> Check:
    """Byte-identical copies under memory/ and knowledge/, by compile's own planner."""
    planned = plan_empty_and_duplicates(dict(files), {WORKING_MEMORY, *FOUNDATION_FILES})
    pairs = [
        f"{t.path} = {t.reason.removeprefix('duplicate of ')}"
        for t in planned
        if t.reason.startswith("duplicate of ")
    ]
    empty = [t.path for t in planned if t.reason == "empty file"]
    summary = f"{len(pairs)} duplicate file(s) among {len(files)}"
    figures = {"files": len(files), "duplicates": len(pairs), "empty": empty}
    return Check("duplicates", "warn" if pairs else "ok", summary, _capped(pairs), figures)


# ---------------------------------------------------------------------------- lessons


def lesson_items(path: str, text: str) -> list[tuple[str, str]]:
    """(label, text) of each lesson in a file: its `##` sections, else the whole file."""
    lines = split_lines(text)
    secs = [s for s in split_sections(text) if s.level == 2]
    if not secs:
        return [(path, text)]
    return [(f"{path} § {s.heading}", "".join(lines[s.start : s.end])) for s in secs]


def lessons(files: Mapping[str, tuple[str, datetime]], now: datetime) -> Check:
    """How many lessons (files, and `##` sections in them) and which are older than 183 days,
    dated by `recorded:`/`Learned:`, else the file's mtime."""
    today = now.astimezone(UTC).date()
    items, old = 0, []
    for path in sorted(files):
        text, mtime = files[path]
        for label, body in lesson_items(path, text):
            items += 1
            day = recorded_day(body) or mtime.astimezone(UTC).date()
            if (age := (today - day).days) > OLD_LESSON_DAYS:
                old.append(f"{label} ({day}, {age} days old)")
    summary = f"{items} lesson(s) in {len(files)} file(s); {len(old)} older than 6 months"
    figures = {"files": len(files), "lessons": items, "old": len(old)}
    return Check("lessons", "warn" if old else "ok", summary, _capped(old), figures)


# ---------------------------------------------------------------------------- proposals


def proposals(pending: list[Proposal], now: datetime) -> Check:
    """Pending proposals older than 14 days, each with the command that shows it."""
    stale = []
    for p in pending:
        created = datetime.fromisoformat(p.created)
        created = created if created.tzinfo else created.replace(tzinfo=UTC)
        if (age := (now - created).days) > OLD_PROPOSAL_DAYS:
            stale.append(
                f"#{p.id} ({p.actor}, {age} days): {p.message} — `crustacean review show {p.id}`"
            )
    summary = f"{len(pending)} pending, {len(stale)} older than {OLD_PROPOSAL_DAYS} days"
    figures = {"pending": len(pending), "stale": len(stale)}
    return Check("proposals", "warn" if stale else "ok", summary, _capped(stale), figures)


# ---------------------------------------------------------------------------- security


def security(texts: Mapping[str, str]) -> Check:
    """Credential-looking values in any text file: path, kind and line, never the value."""
    found = [
        f"{path}: {f.kind} (line {f.line})"
        for path in sorted(texts)
        for f in find_secrets(texts[path])
    ]
    summary = f"{len(found)} secret(s) found in {len(texts)} text file(s)"
    figures = {"files": len(texts), "secrets": len(found)}
    return Check("security", "fail" if found else "ok", summary, _capped(found), figures)


# ---------------------------------------------------------------------------- gathering


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # a symlink to a folder is not a file
    except OSError:
        return False


def _read_text(root: Path, rel: str) -> str | None:
    """The file as text, or None when it is binary, not UTF-8, too big or unreadable."""
    try:
        with (root / rel).open("rb") as handle:
            data = handle.read(MAX_DOC_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_DOC_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass
class _Files:
    """The workspace's files, read once for every check."""

    root: Path
    paths: list[str]
    texts: dict[str, str]
    skipped: list[str]

    @classmethod
    def read(cls, root: Path) -> _Files:
        problems: list[tuple[str, str]] = []  # what the walker leaves out: FIFOs, symlink loops
        # every file as a posix path, skipping git, crustacean state and tool caches
        paths = sorted(rel for rel, e in walk(root, CHECKED, problems=problems) if not _is_dir(e))
        texts = {p: t for p in paths if (t := _read_text(root, p)) is not None}
        return cls(root, paths, texts, [f"{rel}: {why}" for rel, why in problems])

    def exists(self, rel: str) -> bool:
        return not rel.startswith("..") and (self.root / rel).exists()

    def under(self, *tops: str) -> list[str]:
        return [p for p in self.paths if p.startswith(tops)]

    def mtime(self, rel: str) -> datetime:
        return datetime.fromtimestamp((self.root / rel).stat().st_mtime, UTC)


def _is_index(path: str) -> bool:
    return PurePosixPath(path).name.casefold() in INDEX_NAMES


def _top_level(root: Path, daily_dir: str) -> list[str]:
    """Folders directly under memory/ and knowledge/, and their loose files (indexes, hidden
    files, daily logs and session hook files left out: the map covers those by pattern)."""
    out = []
    for top in ("memory", "knowledge"):
        base = root / top
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            rel = f"{top}/{entry.name}"
            if entry.name.startswith(".") or rel == daily_dir:
                continue
            if entry.is_dir():
                out.append(rel + "/")
            elif entry.is_file() and not (_is_index(rel) or dated_day(entry.name) is not None):
                out.append(rel)  # a FIFO or a symlink loop is named by the frontmatter check
    return out


def _daily_texts(files: _Files, daily_dir: str) -> dict[date, str]:
    """Daily logs by day: in the daily folder and already archived under archive/daily/."""
    logs: dict[date, str] = {}
    for path in files.under(f"{daily_dir}/", "archive/daily/"):
        name = PurePosixPath(path).name
        inside = path.count("/") == daily_dir.count("/") + 1 or path.startswith("archive/")
        if inside and (day := log_day(name)):
            logs[day] = files.texts.get(path, "")
    return logs


def _frontmatter_problems(files: _Files, md: list[str]) -> tuple[list[str], int]:
    paths = md + [p for p in (WORKING_MEMORY, *FOUNDATION_FILES) if p in files.paths]
    problems = []
    for rel in paths:
        try:
            doc = read_document(files.root, rel)
        except DocumentSkipped as e:
            problems.append(f"{rel}: {e.reason}")
            continue
        if doc.warning:
            problems.append(doc.warning)
    return [*files.skipped, *problems], len(paths) + len(files.skipped)


def _guarded(name: str, run: Callable[[], Check]) -> Check:
    """Run one check; a crash becomes a warn item naming the error, never an exception."""
    try:
        return run()
    except Exception as e:  # a health check must report, not die, on anything odd
        return Check(name, "warn", f"could not run this check ({error_line(e)})")


def check_workspace(ws: Workspace, now: datetime) -> Health:
    """Run every check on the workspace; never raises on bad files."""
    files = _Files.read(ws.root)
    settings = ws.settings
    stages = {s: getattr(settings.stages, s) for s in STAGES}
    memory_text = files.texts.get(WORKING_MEMORY)
    runs = cache(lambda: list_runs(ws, limit=1_000_000))  # a broken state.db fails 2 checks
    md = [p for p in files.under("memory/", "knowledge/") if p.endswith(".md") and not is_hidden(p)]
    link_files = {p: files.texts[p] for p in [*md, WORKING_MEMORY] if p in files.texts}
    lesson_paths = [
        p for p in files.under("memory/lessons/") if p.endswith(".md") and not _is_index(p)
    ]
    content = files.under("memory/", "knowledge/")
    readmes = {p: files.texts.get(p, "") for p in content if _is_index(p)}

    def cadence_() -> Check:
        return cadence(
            {s: c.schedule for s, c in stages.items()},
            {s: c.enabled for s, c in stages.items()},
            runs(),
            now,
            tz=ws.tz,
        )

    checks = [
        ("cadence", cadence_),
        ("cost", lambda: cost(runs(), now)),
        ("daily_logs", lambda: daily_logs(_daily_texts(files, ws.daily_dir), ws.today(now))),
        (
            "memory_md",
            lambda: memory_md(
                memory_text, settings.memory.working_lines, settings.memory.working_chars
            ),
        ),
        (
            "structure_map",
            lambda: structure_map(memory_text, _top_level(ws.root, ws.daily_dir), files.exists),
        ),
        ("orphans", lambda: folder_indexes(readmes, content, ws.daily_dir)),
        ("links", lambda: links(link_files, files.exists, frozenset({WORKING_MEMORY}))),
        ("frontmatter", lambda: frontmatter(*_frontmatter_problems(files, md))),
        (
            "duplicates",
            lambda: duplicates({p: (ws.root / p).read_bytes() for p in content}),
        ),
        (
            "lessons",
            lambda: lessons(
                {p: (files.texts.get(p, ""), files.mtime(p)) for p in lesson_paths}, now
            ),
        ),
        ("proposals", lambda: proposals(list_proposals(ws), now)),
        ("security", lambda: security(files.texts)),
    ]
    return Health(tuple(_guarded(name, fn) for name, fn in checks))
