"""Compile's deterministic pass, planning half: pure functions, no I/O, no store.

Each planner takes plain inputs (workspace-relative posix paths, bytes, dates, `now`) and returns
what to do; `crustacean.stages.compile` applies it through the store. Keeping the decisions pure
makes every boundary testable and a rerun the same day a no-op (nothing left to plan).

Upstream COMPILE (4C) Phase 1 sweeps every `YYYY-MM-DD*.md` out of `memory/`; with daily logs in
the memory root that would also take Collect's own logs, so a daily log (`YYYY-MM-DD.md`) and a
session-memory hook file (`YYYY-MM-DD-<slug>.md`) are told apart by name, and each has its planner.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from crustacean.daily import (
    ARCHIVE_DAILY,
    DAILY_FOLDERS,
    calendar_day,
    dated_day,
    hook_day,
    log_day,
)
from crustacean.markdown import Section, count_lines, heading, split_lines, split_sections
from crustacean.workspace import FOUNDATION_FILES, WORKING_MEMORY

TOPICS_DIR = "knowledge/topics"
SLUG_MAX = 60
LIST_CAP = 30

# Today's and yesterday's logs are loaded every session and may still be written to.
MIN_AGE_DAYS = 2

# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def _folder_and_name(path: str) -> tuple[str, str]:
    """("memory/daily", "2026-01-05.md"): posix paths, whatever the host OS."""
    folder, _, name = path.rpartition("/")
    return folder, name


def _free_path(path: str, sep: str, taken: set[str]) -> str:
    """`path`, or `<stem><sep>2.md`, `<sep>3`… : never overwrite (compared case-insensitively,
    since macOS and Windows file systems are)."""
    stem = path.removesuffix(".md")
    candidate, n = path, 1
    while candidate.casefold() in taken:
        n += 1
        candidate = f"{stem}{sep}{n}.md"
    taken.add(candidate.casefold())
    return candidate


def _taken(*groups: Iterable[str]) -> set[str]:
    """Paths in use, case-folded for `_free_path`."""
    return {p.casefold() for group in groups for p in group}


# ---------------------------------------------------------------------------------------------
# Daily logs and hook files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """A whole file moved, bytes unchanged (workspace-relative posix paths, one-line reason)."""

    src: str
    dst: str
    reason: str


def _daily_logs(paths: Iterable[str], daily_dir: str) -> list[tuple[date, int, str]]:
    """(day, folder rank, path) of every daily log in either daily folder; the configured folder
    ranks first so its log keeps the plain archive name when both folders hold the same day."""
    folders = list(dict.fromkeys((daily_dir, *DAILY_FOLDERS)))
    found = []
    for path in paths:
        folder, name = _folder_and_name(path)
        if folder in folders and (day := log_day(name)):
            found.append((day, folders.index(folder), path))
    return sorted(found)


def _old_enough(day: date, today: date, after_days: int) -> int | None:
    """Age in days when it may move; None for today, yesterday, future dates (clock jumped
    backwards) and anything not strictly older than `after_days`."""
    age = (today - day).days
    return age if age > after_days and age >= MIN_AGE_DAYS else None


def _archive_dst(day: date, name: str, taken: set[str]) -> tuple[str, str]:
    """Monthly archive folder; the note says when a suffix avoided an existing file."""
    plain = f"{ARCHIVE_DAILY}/{day:%Y-%m}/{name}"
    dst = _free_path(plain, "~", taken)
    return dst, "" if dst == plain else f"; {plain} already exists"


def plan_daily_archive(
    paths: list[str], daily_dir: str, today: date, after_days: int, existing: set[str]
) -> list[Move]:
    """Daily logs strictly older than `after_days` days → `archive/daily/YYYY-MM/`.

    Both `memory/` and `memory/daily/` are scanned (a workspace may have switched), oldest day
    first; a destination in `existing`, in `paths` or planned earlier gets `~2`, `~3`.
    """
    taken = _taken(existing, paths)
    moves = []
    for day, _, path in _daily_logs(paths, daily_dir):
        age = _old_enough(day, today, after_days)
        if age is None:
            continue
        dst, note = _archive_dst(day, _folder_and_name(path)[1], taken)
        reason = f"daily log of {day} is {age} days old (archived after {after_days}){note}"
        moves.append(Move(path, dst, reason))
    return moves


def plan_hook_sweep(paths: list[str], today: date, existing: set[str]) -> list[Move]:
    """Session-memory hook files in the memory root → `archive/daily/YYYY-MM/`, same name.

    They repeat what Collect took from the transcripts. Today's and yesterday's are left (the
    agent may still be writing them). Pass the daily-archive destinations in `existing` when
    both plans are applied together.
    """
    taken = _taken(existing, paths)
    found = []
    for path in paths:
        folder, name = _folder_and_name(path)
        if folder == "memory" and (day := hook_day(name)):
            found.append((day, path))
    moves = []
    for day, path in sorted(found):
        age = _old_enough(day, today, 0)
        if age is None:
            continue
        dst, note = _archive_dst(day, _folder_and_name(path)[1], taken)
        moves.append(Move(path, dst, f"session-memory hook file of {day} ({age} days old){note}"))
    return moves


# ---------------------------------------------------------------------------------------------
# Empty and duplicate files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trash:
    """A file to move to the trash, with why ("empty file", "duplicate of <kept>")."""

    path: str
    reason: str


TRASH_ROOTS = ("memory/", "knowledge/")
INDEX_NAMES = frozenset({"readme.md", "index.md", "_index.md"})
# OpenClaw owns these (dreaming, its important-memory folder): not ours to tidy.
FOREIGN = ("memory/dreaming/", "memory/important/", "memory/context-digest.md", "memory/DREAMS.md")
_BOM = b"\xef\xbb\xbf"


def _dated_raw(path: str) -> bool:
    """A daily log or hook file: the archive planners own them (they know today; today's empty
    log is about to be appended to and must not vanish)."""
    folder, name = _folder_and_name(path)
    return folder in DAILY_FOLDERS and dated_day(name) is not None


def _trashable(path: str, protected: set[str]) -> bool:
    """Files compile may trash: memory/ and knowledge/ content, not indexes, hidden files
    (`.gitkeep` is empty on purpose, `memory/.system/` holds the pipeline), foundation files,
    daily logs or hook files, or anything the caller protects."""
    if path in protected or not path.startswith(TRASH_ROOTS) or path.startswith(FOREIGN):
        return False
    if is_hidden(path) or _dated_raw(path):
        return False
    name = path.rpartition("/")[2]
    return name.casefold() not in INDEX_NAMES and name not in (WORKING_MEMORY, *FOUNDATION_FILES)


def is_hidden(path: str) -> bool:
    """A dot file or a file in a dot folder (`.gitkeep`, `memory/.system/`)."""
    return any(part.startswith(".") for part in path.split("/"))


def is_empty(data: bytes) -> bool:
    """0 bytes, or only whitespace (a BOM included): nothing anyone could lose."""
    return not data.removeprefix(_BOM).strip()


def plan_empty_and_duplicates(files: dict[str, bytes], protected: set[str]) -> list[Trash]:
    """Empty files, and every byte-identical copy but one, → trash (sorted by path).

    A protected file is never trashed but is kept in preference when it has copies.
    """
    trash: list[Trash] = []
    groups: dict[bytes, list[str]] = {}
    for path in sorted(files):
        data = files[path]
        eligible = _trashable(path, protected)
        if eligible and is_empty(data):
            trash.append(Trash(path, "empty file"))
        elif (eligible or path in protected) and not is_empty(data):
            groups.setdefault(data, []).append(path)
    for paths in groups.values():
        trash += _duplicates(paths, protected)
    return sorted(trash, key=lambda t: t.path)


def _duplicates(paths: list[str], protected: set[str]) -> list[Trash]:
    """All copies but the kept one: a protected copy wins, then the deepest folder (most
    specific: `knowledge/topics/x.md` over `memory/x.md`), then the first path in sort order
    (dated names sort oldest first)."""
    if len(paths) < 2:
        return []
    kept = min(paths, key=lambda p: (p not in protected, -p.count("/"), p))
    return [Trash(p, f"duplicate of {kept}") for p in paths if p != kept and p not in protected]


# ---------------------------------------------------------------------------------------------
# MEMORY.md sections and caps
# ---------------------------------------------------------------------------------------------


NEVER_MOVE = (
    "Memory Structure Map",
    "Hot / Time-Sensitive",
    "Security Rules",
    "Trust Tiers",
    "Communication Guidelines",
    "Active Cron Jobs",
    "Identity & Setup",
)
_RULE = re.compile(r"\*\*(?:firm )?rule:\*\*", re.IGNORECASE)


def norm_heading(text: str) -> str:
    """Letters and digits only, case-folded: emoji, `/`, `&` and spacing do not matter."""
    return "".join(c for c in text.casefold() if c.isalnum())


_NEVER = tuple(norm_heading(name) for name in NEVER_MOVE)


def is_never_move(heading: str) -> bool:
    """True for the sections upstream never moves (the name anywhere in the heading)."""
    key = norm_heading(heading)
    return any(name in key for name in _NEVER)


@dataclass(frozen=True)
class SectionMove:
    """A section moved out of MEMORY.md: its exact lines (appended to `dst`) and the pointer line
    (with its line ending) left in its place."""

    heading: str
    dst: str
    lines: tuple[str, ...]
    pointer: str


@dataclass(frozen=True)
class CapPlan:
    """MEMORY.md after the moves, the moves in document order, and the figures for the digest."""

    new_text: str
    moves: tuple[SectionMove, ...]
    lines_before: int
    lines_after: int
    chars_before: int
    chars_after: int
    under_caps: bool


@dataclass(frozen=True)
class _Caps:
    max_lines: int
    max_chars: int

    def over(self, lines: int, chars: int) -> bool:
        """Over either cap: both must hold, the bootstrap truncates by characters."""
        return lines > self.max_lines or chars > self.max_chars

    def oversized(self, lines: int, chars: int) -> bool:
        """A `##` over half a cap: moving it whole would gut the working memory."""
        return lines > self.max_lines // 2 or chars > self.max_chars // 2


def _families(sections: list[Section]) -> dict[Section, list[Section]]:
    """Each top section (a `##`, or a `###` outside any `##`) with its `###` subsections, in
    document order; one pass, since sections come sorted by start."""
    families: dict[Section, list[Section]] = {}
    parent: Section | None = None
    for section in sections:
        if section.level == 3 and parent is not None and section.start < parent.end:
            families[parent].append(section)
        else:
            families[section] = []
            parent = section if section.level == 2 else None
    return families


def _movable(section: Section, kids: list[Section], lines: list[str]) -> bool:
    """Not a never-move heading, no never-move subsection, no **Rule:** / **Firm rule:** line."""
    if is_never_move(section.heading) or any(is_never_move(k.heading) for k in kids):
        return False
    return not any(_RULE.search(line) for line in lines[section.start : section.end])


def _units(sections: list[Section], lines: list[str], caps: _Caps, split: bool) -> list[Section]:
    """What may move: whole `##` sections (and `###` outside any `##`); a `##` that cannot move
    whole, or (with `split`) an oversized one, offers its movable `###` subsections instead."""
    units = []
    for top, kids in _families(sections).items():
        movable_kids = [k for k in kids if _movable(k, [], lines)]
        body = lines[top.start : top.end]
        oversized = caps.oversized(len(body), len("".join(body)))
        if _movable(top, kids, lines) and not (split and movable_kids and oversized):
            units.append(top)
        elif not is_never_move(top.heading):
            units += movable_kids
    return units


def slugify(heading: str) -> str:
    """A file name stem: lowercase ascii, hyphens, at most 60 characters ("section" when none)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")
    return slug[:SLUG_MAX].rstrip("-") or "section"


def _topic_dst(heading: str, taken: set[str], *, commit: bool = True) -> str:
    """`knowledge/topics/<slug>.md`, suffixed `-2`, `-3`… past `existing` and earlier moves."""
    slug, n = slugify(heading), 1
    while True:
        suffix = "" if n == 1 else f"-{n}"
        path = f"{TOPICS_DIR}/{slug[: SLUG_MAX - len(suffix)].rstrip('-')}{suffix}.md"
        if path.casefold() not in taken:
            if commit:
                taken.add(path.casefold())
            return path
        n += 1


def _pointer(section: Section, lines: list[str], dst: str, today: date) -> str:
    """One line naming the destination, with the section's own line ending (CRLF stays CRLF;
    none when the section ended the file without a newline)."""
    label = " ".join(section.heading.replace("**", "").split()) or "(untitled section)"
    last = lines[section.end - 1]
    ending = "" if not last.endswith("\n") else "\r\n" if last.endswith("\r\n") else "\n"
    return f"- **{label}** → moved to `{dst}` (compile {today.isoformat()}).{ending}"


_Chosen = tuple[Section, SectionMove]


def _greedy(
    lines: list[str], units: list[Section], caps: _Caps, today: date, existing: set[str]
) -> list[_Chosen]:
    """Largest first (by lines while over the line cap, else by characters) until under both
    caps; a move that would not shrink the measure still over is never made."""
    taken = _taken(existing)
    n_lines, n_chars = count_lines("".join(lines)), len("".join(lines))
    gains = {s: _gains(s, lines, taken, today) for s in units}
    orders = {
        by_lines: sorted(units, key=lambda s: _order(gains[s], s, by_lines), reverse=True)
        for by_lines in (True, False)
    }
    done: set[Section] = set()
    cursor = {True: 0, False: 0}
    chosen: list[_Chosen] = []
    while caps.over(n_lines, n_chars):
        by_lines = n_lines > caps.max_lines
        order = orders[by_lines]
        cursor[by_lines] = _first_open(order, cursor[by_lines], done)
        if cursor[by_lines] == len(order):
            break
        best = order[cursor[by_lines]]
        if _order(gains[best], best, by_lines)[0] <= 0:
            break
        done.add(best)
        move = _move(best, lines, taken, today)
        chosen.append((best, move))
        n_lines -= len(move.lines) - 1
        n_chars -= len("".join(move.lines)) - len(move.pointer)
    return sorted(chosen, key=lambda c: c[0].start)


def _first_open(order: list[Section], start: int, done: set[Section]) -> int:
    """Index of the first section from `start` on that has not moved yet (keeps the loop linear)."""
    while start < len(order) and order[start] in done:
        start += 1
    return start


def _move(section: Section, lines: list[str], taken: set[str], today: date) -> SectionMove:
    """The section's exact lines, its destination (now taken) and its pointer."""
    dst = _topic_dst(section.heading, taken)
    body = tuple(lines[section.start : section.end])
    return SectionMove(section.heading, dst, body, _pointer(section, lines, dst, today))


def _gains(section: Section, lines: list[str], taken: set[str], today: date) -> tuple[int, int]:
    """Lines and characters a move would save, its pointer line counted (the suffix a collision
    with an earlier move may add is left out: a few characters)."""
    body = lines[section.start : section.end]
    pointer = _pointer(section, lines, _topic_dst(section.heading, taken, commit=False), today)
    return len(body) - 1, len("".join(body)) - len(pointer)


def _order(gains: tuple[int, int], section: Section, by_lines: bool) -> tuple[int, int, int]:
    """The measure that is over first, the other second, the earlier section on ties."""
    first, second = gains if by_lines else gains[::-1]
    return first, second, -section.start


def _rewrite(lines: list[str], chosen: list[_Chosen]) -> str:
    """MEMORY.md with each moved section replaced by its pointer."""
    out: list[str] = []
    i = 0
    for section, move in chosen:
        out += lines[i : section.start]
        out.append(move.pointer)
        i = section.end
    return "".join(out + lines[i:])


def _plan(
    text: str, caps: _Caps, today: date, existing: set[str], split: bool
) -> tuple[str, list[_Chosen]]:
    """One attempt: the new text and the moves, with oversized `##` split or kept whole."""
    lines = split_lines(text)
    sections = split_sections(text)
    chosen = _greedy(lines, _units(sections, lines, caps, split), caps, today, existing)
    return _rewrite(lines, chosen), chosen


def _rank(caps: _Caps, text: str) -> tuple[bool, int, int]:
    """Better plan first: under the caps, then fewer lines, then fewer characters."""
    lines, chars = count_lines(text), len(text)
    return caps.over(lines, chars), lines, chars


def plan_memory_caps(
    text: str, max_lines: int, max_chars: int, today: date, existing: set[str]
) -> CapPlan:
    """Bring MEMORY.md under its line and character caps by moving whole sections, byte for byte,
    to `knowledge/topics/<slug>.md`, a pointer line left in each one's place.

    Never-move sections and any section holding a **Rule:** / **Firm rule:** line stay. Oversized
    `##` sections give up their `###` subsections first (the `##` keeps its place as an index);
    when that cannot reach the caps, whole `##` sections are tried instead.
    """
    caps = _Caps(max_lines, max_chars)
    before = (count_lines(text), len(text))
    new_text, chosen = text, list[_Chosen]()
    if caps.over(*before):
        new_text, chosen = _plan(text, caps, today, existing, split=True)
        if caps.over(count_lines(new_text), len(new_text)):
            whole = _plan(text, caps, today, existing, split=False)
            new_text, chosen = min((new_text, chosen), whole, key=lambda p: _rank(caps, p[0]))
    after = (count_lines(new_text), len(new_text))
    return CapPlan(
        new_text=new_text,
        moves=tuple(move for _, move in chosen),
        lines_before=before[0],
        lines_after=after[0],
        chars_before=before[1],
        chars_after=after[1],
        under_caps=not caps.over(*after),
    )


# ---------------------------------------------------------------------------------------------
# Candidates for the model pass
# ---------------------------------------------------------------------------------------------

PROMOTE_LINES = 10
PROMOTE_MENTIONS = 5
GRADUATE_DAYS = 14
PATTERN_MENTIONS = 3
PATTERN_DAYS = 7
OLD_LESSON_DAYS = 183

# Capitalized words that start sentences or label fields rather than name anything.
_STOP_TEXT = """
    a an the and or but nor if when then than this that these those it its we you he she they i me
    my our your his her their them us in on at to for of from with by as is are was were be been not
    no yes do does did use used see also all any some each every new old next last after before
    during today yesterday tomorrow now here there what why how who where which while so too very
    just still again please thanks ok okay note notes todo fixme rule firm learned context status
    source date moved done keep never always only can will would should must may might added
    updated weekly daily monthly mon tue wed thu fri sat sun monday tuesday wednesday thursday
    friday saturday sunday jan feb mar apr jun jul aug sep sept oct nov dec january february march
    april june july august september october november december let lets one two first second
"""
_STOP = frozenset(_STOP_TEXT.split())
_WORD = r"[A-ZÀ-ÖØ-Þ][\w'’-]*"
_PHRASE = re.compile(rf"(?<![\w'’-]){_WORD}(?: {_WORD})*")
_TAG = re.compile(r"(?<![\w\]])\[([A-Za-z][\w-]{0,39})\](?![(\[:])")
# Collect's category tags (`[decision]`…) and checkboxes are labels, not subjects
_TAG_STOP = frozenset(
    {"decision", "plan", "person", "preference", "fact", "reminder", "todo", "idea", "joke"}
    | {"project", "personality", "x", "X"}
)
_BULLET = re.compile(r"^[-*+]\s+|^\d+[.)]\s+")
_LEAD = re.compile(
    r"^(?:\[[ xX]\]\s*)?(?:\[[A-Za-z][\w-]*\]\s*)?(?:\*\*)?(?:due:?\s*)?(?:\*\*)?"
    r"(\d{4})-(\d{2})-(\d{2})(?!\d)",
    re.IGNORECASE,
)
_PAREN = re.compile(r"\([^()]*\)")
_NOISE = re.compile(r"`[^`\n]*`|\b[a-z][a-z0-9+.-]*://\S+|\]\([^)\s]*\)")
_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_DONE = re.compile(r"^\s*[-*+]\s*\[[xX]\]|\b(?:done|completed|cancell?ed)\b|✅", re.IGNORECASE)
_RECORDED = re.compile(r"\b(?:recorded|learned)\b[*_:\s\[]*(\d{4})-(\d{2})-(\d{2})", re.I)


def _is_stop(word: str) -> bool:
    """A function word, also with an apostrophe ending (`It's`, `I'm`), or a lone letter."""
    base = re.split(r"['’]", word, maxsplit=1)[0]
    return len(base) < 2 or base.casefold() in _STOP or word.casefold() in _STOP


def _trim(phrase: str) -> str:
    """A capitalized run without stop words at its ends or possessives (`The Falcon's` →
    `Falcon`), so one name is counted as one."""
    words = [re.sub(r"['’]s$", "", w).strip("'’-") for w in phrase.split(" ")]
    while words and _is_stop(words[0]):
        words.pop(0)
    while words and _is_stop(words[-1]):
        words.pop()
    return " ".join(words)


def mentions(
    text: str, *, tags: bool = False, owners: frozenset[str] = frozenset()
) -> Counter[str]:
    """Capitalized words and phrases (and, with `tags`, `[tags]` that are not Collect's
    categories), each occurrence counted; code spans and URLs are skipped so paths and links do
    not count as names, and the owner's and agent's own names (`owners`, casefolded) are not
    entities of their own memory."""
    clean = _NOISE.sub(" ", text)
    found: Counter[str] = Counter()
    for match in _PHRASE.finditer(clean):
        if (name := _trim(match.group(0))) and name.casefold() not in owners:
            found[name] += 1
    if tags:
        found.update(f"[{t}]" for t in _TAG.findall(clean) if t.casefold() not in _TAG_STOP)
    return found


def _dates(text: str) -> list[date]:
    """Every real calendar date in the text, in order (`2026-02-30` is not one)."""
    return [d for y, m, dd in _DATE.findall(text) if (d := calendar_day(y, m, dd))]


def _age_days(now: datetime, then: datetime) -> int:
    """Whole days from `then` to `now`; a naive datetime is taken as UTC when the other is not."""
    if (now.tzinfo is None) != (then.tzinfo is None):
        now, then = (n if n.tzinfo else n.replace(tzinfo=UTC) for n in (now, then))
    return (now - then) // timedelta(days=1)


def _text(data: bytes) -> str:
    """File bytes as text; a stray bad byte must not hide a whole file from the candidates."""
    return data.decode("utf-8", "replace")


def _content_file(path: str, *folders: str) -> bool:
    """A markdown file in one of `folders`, not its index or a hidden file."""
    name = path.rpartition("/")[2]
    return (
        path.startswith(folders)
        and path.endswith(".md")
        and name.casefold() not in INDEX_NAMES
        and not is_hidden(path)
    )


@dataclass(frozen=True)
class Candidates:
    """What the model should look at; every item is one line, the subject first, why after."""

    promotion: tuple[str, ...] = ()
    graduation: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    reminders_due: tuple[str, ...] = ()  # past their date, not marked done: flag them
    reminders_done: tuple[str, ...] = ()  # past their date and marked done: safe to prune
    old_lessons: tuple[str, ...] = ()

    def to_prompt(self) -> str:
        """A compact markdown block ("" when there is nothing), each list capped at 30 items."""
        parts = [_block(title, items) for title, items in self._titled() if items]
        return "\n\n".join(["## Candidates found by code", *parts]) + "\n" if parts else ""

    def _titled(self) -> list[tuple[str, tuple[str, ...]]]:
        """Each list with a title that tells the model the threshold behind it."""
        week = f"the last {PATTERN_DAYS} days' logs"
        return [
            (
                f"Promotion (MEMORY.md sections over {PROMOTE_LINES} lines, "
                f"entities mentioned {PROMOTE_MENTIONS}+ times)",
                self.promotion,
            ),
            (f"Graduation (notes and lessons unchanged {GRADUATE_DAYS}+ days)", self.graduation),
            (f"Patterns (mentioned {PATTERN_MENTIONS}+ times in {week})", self.patterns),
            ("Reminders done and past their date (safe to prune)", self.reminders_done),
            ("Reminders past due and not marked done (flag them, never prune)", self.reminders_due),
            (f"Lessons older than {OLD_LESSON_DAYS} days", self.old_lessons),
        ]


def _block(title: str, items: tuple[str, ...]) -> str:
    """One titled list, capped so a neglected workspace cannot flood the model's context."""
    shown = [f"- {item}" for item in items[:LIST_CAP]]
    if len(items) > LIST_CAP:
        shown.append(f"- … and {len(items) - LIST_CAP} more")
    return "\n".join([f"### {title}", *shown])


def _promotion(memory_md: str, owners: frozenset[str] = frozenset()) -> list[str]:
    """Long sections (never-move ones excluded: they stay by design), then frequent entities."""
    items = [
        f"{s.heading} ({s.end - s.start} lines)"
        for s in split_sections(memory_md)
        if s.end - s.start > PROMOTE_LINES and not is_never_move(s.heading)
    ]
    counts = mentions(memory_md, owners=owners)
    frequent = sorted((n for n in counts.items() if n[1] >= PROMOTE_MENTIONS), key=_by_count)
    return items + [f"{name} ({n} mentions)" for name, n in frequent]


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    """Most mentioned first, then by name, so the order is stable between runs."""
    return -item[1], item[0]


def _graduation(files: Mapping[str, tuple[bytes, datetime]], now: datetime) -> list[str]:
    """Notes and lessons stable 14+ days by mtime (a future mtime is never stable)."""
    items = []
    for path in sorted(files):
        if _content_file(path, "memory/notes/", "memory/lessons/"):
            age = _age_days(now, files[path][1])
            if age >= GRADUATE_DAYS:
                items.append(f"{path} (unchanged {age} days)")
    return items


def _patterns(
    daily_logs: Mapping[date, str], today: date, owners: frozenset[str] = frozenset()
) -> list[str]:
    """Subjects of this week's logs (today and the 6 days before; future-dated logs ignored)."""
    counts: Counter[str] = Counter()
    days: dict[str, set[date]] = {}
    for day, text in daily_logs.items():
        if 0 <= (today - day).days < PATTERN_DAYS:
            found = mentions(text, tags=True, owners=owners)
            counts.update(found)
            for name in found:
                days.setdefault(name, set()).add(day)
    frequent = sorted((n for n in counts.items() if n[1] >= PATTERN_MENTIONS), key=_by_count)
    return [f"{name} ({n} mentions on {len(days[name])} days)" for name, n in frequent]


def due_date(line: str) -> date | None:
    """A reminder's due date: one list item, its leading ISO date (after a checkbox, a tag or
    "Due"); else the latest date outside parentheses, so provenance such as "(moved from
    2026-11-30)" or "(daily log 2026-03-16)" is never read as the due date."""
    item = _BULLET.sub("", line.strip(), count=1)
    if (lead := _LEAD.match(item)) and (day := calendar_day(*lead.groups())):
        return day
    dates = _dates(_PAREN.sub(" ", item))
    return max(dates) if dates else None


_DONE_WORDS = re.compile(r"\b(?:done|completed|finished)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Reminder:
    """One dated list item of a reminders file: where it is, when it is due, whether it is done."""

    line: int
    text: str
    due: date
    done: bool


def reminder_items(text: str) -> list[Reminder]:
    """Every dated item, in each form people write: `- [ ] date — …` open and `- [x] date — …`
    done, `- date — … (done date)`, `✅`, and any item under a `## Done` (or Completed) heading."""
    found, done_section = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if (head := heading(line)) is not None:
            done_section = bool(_DONE_WORDS.search(head[1]))
            continue
        if not _BULLET.match(line) or (due := due_date(line)) is None:
            continue
        found.append(Reminder(n, line.strip(), due, done_section or bool(_DONE.search(line))))
    return found


def _reminders(
    files: Mapping[str, tuple[bytes, datetime]], today: date, *, done: bool
) -> list[str]:
    """Past-date items that are done (`done`: safe to prune) or still open (to flag); a file
    with no dated item is due by the date in its name."""
    found = []
    for path in sorted(files):
        if not _content_file(path, "memory/reminders/"):
            continue
        text = _text(files[path][0])
        items = reminder_items(text)
        found += [
            f"{path}:{r.line}: {r.text[:120]} (due {r.due})"
            for r in items
            if r.due < today and r.done == done
        ]
        named = _dates(path.rpartition("/")[2])
        if not items and named and named[0] < today and bool(_DONE.search(text)) == done:
            found.append(f"{path} (due {named[0]})")
    return found


def recorded_day(text: str) -> date | None:
    """The day a lesson's `recorded:`/`**Learned:**` says, when it is a real date."""
    match = _RECORDED.search(text)
    return calendar_day(*match.groups()) if match else None


def _lesson_date(text: str) -> tuple[date, str] | None:
    """When a lesson was recorded: `recorded:`/`**Learned:**`, else the first date in it."""
    if day := recorded_day(text):
        return day, "recorded"
    dates = _dates(text)
    return (dates[0], "first date") if dates else None


def _old_lessons(
    files: Mapping[str, tuple[bytes, datetime]], today: date, now: datetime
) -> list[str]:
    """By `recorded:`/`**Learned:**`, else the first date in the text, else the mtime."""
    items = []
    for path in sorted(files):
        if not _content_file(path, "memory/lessons/"):
            continue
        data, mtime = files[path]
        found = _lesson_date(_text(data))
        if found:
            age, why = (today - found[0]).days, f"{found[1]} {found[0]}"
        else:
            age, why = _age_days(now, mtime), f"unchanged since {mtime.date()}"
        if age > OLD_LESSON_DAYS:
            items.append(f"{path} ({why}, {age} days ago)")
    return items


_NAME_LINE = re.compile(
    r"^\s*[-*]?\s*\*\*(?:name|what to call them):\*\*(?P<v>.*)$", re.IGNORECASE | re.MULTILINE
)


def owner_names(*foundation: str) -> frozenset[str]:
    """The names in USER.md's and IDENTITY.md's `**Name:**` / `**What to call them:**` lines,
    each whole and each word of it, casefolded (comments and blanks ignored)."""
    names: set[str] = set()
    for text in foundation:
        for match in _NAME_LINE.finditer(text):
            value = re.sub(r"<!--.*?-->", "", match["v"]).strip(" *_.")
            if value:
                names.add(value.casefold())
                names.update(w.casefold() for w in value.split() if len(w) > 1)
    return frozenset(names)


def find_candidates(
    memory_md: str,
    files: dict[str, tuple[bytes, datetime]],
    daily_logs: dict[date, str],
    today: date,
    now: datetime,
    owners: frozenset[str] = frozenset(),
) -> Candidates:
    """Everything the model pass should consider, found by code so the model only judges.

    `files` maps workspace paths to (bytes, mtime); `daily_logs` maps days to their log's text;
    `owners` are the owner's and the agent's names (casefolded), which are never candidates.
    """
    return Candidates(
        promotion=tuple(_promotion(memory_md, owners)),
        graduation=tuple(_graduation(files, now)),
        patterns=tuple(_patterns(daily_logs, today, owners)),
        reminders_due=tuple(_reminders(files, today, done=False)),
        reminders_done=tuple(_reminders(files, today, done=True)),
        old_lessons=tuple(_old_lessons(files, today, now)),
    )
