"""What each page shows, built from the results of the CLI's own core functions.

Nothing here decides anything about the workspace: history, diffs, rollbacks, proposals, runs,
tiers and search all come from the functions the CLI calls. These helpers only page, group and
label those results, and each is a pure function of plain data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from crustacean.config import STAGES
from crustacean.recall.memories import is_memory_path
from crustacean.store import FileInfo
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.versions import TRAILER_CALL, TRAILER_RUN, Version
from crustacean.tiers import default_tier
from crustacean.workspace import FOUNDATION_FILES

T = TypeVar("T")
MAX_DIFF_LINES = 2000  # one page of diff; a bigger one is cut, with a link per file
MAX_LISTED_FILES = 150
MAX_TEXT_CHARS = 150_000  # of a rendered file, or of one page of its raw lines
LINES_PER_PAGE = 1000


@dataclass(frozen=True)
class Paged(Generic[T]):
    """One page of a longer list; `more` says whether a next page exists."""

    items: list[T]
    page: int
    more: bool

    @property
    def prev(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next(self) -> int | None:
        return self.page + 1 if self.more else None


def page_of(items: Sequence[T], page: int, size: int) -> Paged[T]:
    """Page `page` (1-based) of `items`; `items` may hold one extra to tell there is more."""
    start = (page - 1) * size
    return Paged(list(items[start : start + size]), page, len(items) > start + size)


def page_number(raw: str | None) -> int:
    try:
        return max(1, int(raw or 1))
    except ValueError:
        return 1


@dataclass(frozen=True)
class Badge:
    kind: str  # agent | user | snapshot | rollback | approved
    label: str


def badge(actor: str, message: str) -> Badge:
    """How a version is labelled: agent writes by stage, user snapshots, rollbacks."""
    if message.startswith("rollback "):
        return Badge("rollback", "rollback")
    if message.startswith("snapshot of uncommitted edits"):
        return Badge("snapshot", "user snapshot")
    if "(proposal " in message and message.endswith(", approved)"):
        return Badge("approved", f"approved · {actor}")
    if actor in STAGES or actor == "mcp":
        return Badge("agent", f"agent write · {actor}")
    return Badge("user", actor or "user")


def files_label(files: Sequence[str]) -> str:
    """The file a call changed, or how many it changed."""
    return files[0] if len(files) == 1 else f"{len(files)} files"


@dataclass
class DiffFile:
    path: str
    old: str | None  # None: the file was created
    new: str | None  # None: the file was deleted
    lines: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    added: int = 0
    removed: int = 0


@dataclass
class ShownVersion:
    """`crustacean show`'s text, split into header, message and one diff per file."""

    id: str
    author: str
    actor: str
    date: str
    message: list[str]
    files: list[DiffFile]
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def time(self) -> datetime | None:
        """The commit date git printed (`Wed Dec 2 00:44:32 2026 +0000`, English whatever the
        locale), so the page can show it in the one format of every other time."""
        try:
            return datetime.strptime(self.date, "%a %b %d %H:%M:%S %Y %z")
        except ValueError:
            return None

    @property
    def run_id(self) -> str | None:
        """The run that wrote it; a call outside any run names only itself."""
        run = self.trailers.get(TRAILER_RUN)
        return run if run and run != self.trailers.get(TRAILER_CALL) else None


def parse_show(text: str) -> ShownVersion:
    """Split `git show --stat --patch --format=fuller` output (what `history.show` returns)."""
    head, files = [], []
    current: DiffFile | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            current = DiffFile(path="", old=None, new=None)
            files.append(current)
        elif current is None:
            head.append(line)
        else:
            _diff_line(current, line)
    vid = next((x.split()[1] for x in head if x.startswith("commit ")), "")
    author = next((x.split(":", 1)[1].strip() for x in head if x.startswith("Author:")), "")
    when = next((x.split(":", 1)[1].strip() for x in head if x.startswith("CommitDate:")), "")
    body = [x[4:] for x in head if x.startswith("    ")]
    trailers = dict(x.split(": ", 1) for x in body if x.startswith("Crustacean-") and ": " in x)
    message = [x for x in body if not (x.startswith("Crustacean-") and ": " in x)]
    while message and not message[-1].strip():
        message.pop()
    name = author.split("<")[0].strip()
    actor = name.removeprefix("crustacean ") if name.startswith("crustacean ") else name
    return ShownVersion(vid, author, actor, when, message, files, trailers)


def _diff_line(f: DiffFile, line: str) -> None:
    if line.startswith("--- ") and not f.lines:
        f.old = None if line[4:] == "/dev/null" else line[4:].removeprefix("a/")
    elif line.startswith("+++ ") and not f.lines:
        f.new = None if line[4:] == "/dev/null" else line[4:].removeprefix("b/")
        f.path = f.new or f.old or ""
    elif line.startswith("@@"):
        f.lines.append(("hunk", line))
    elif line.startswith("+") and f.path:
        f.lines.append(("add", line))
        f.added += 1
    elif line.startswith("-") and f.path:
        f.lines.append(("del", line))
        f.removed += 1
    elif line.startswith(" ") and f.path:
        f.lines.append(("ctx", line))
    elif line.startswith("Binary files"):
        f.lines.append(("meta", line))
        f.path = f.path or line.split(" and ")[-1].removeprefix("b/").removesuffix(" differ")
    elif not f.path and line.startswith(("new file", "deleted file", "index ", "similarity")):
        pass
    elif line.startswith("\\"):
        f.lines.append(("meta", line))


def parse_unified(text: str) -> list[DiffFile]:
    """A `unified_diff` text (proposals, rollback previews) split per file."""
    files: list[DiffFile] = []
    current: DiffFile | None = None
    for line in text.splitlines():
        if line.startswith("--- ") and (current is None or current.lines or current.path):
            current = DiffFile(path="", old=None, new=None)
            files.append(current)
        if current is not None:
            _diff_line(current, line)
    return files


def clip(files: list[DiffFile], budget: int = MAX_DIFF_LINES) -> tuple[list[DiffFile], bool]:
    """Keep at most `budget` diff lines over all files (the rest are named, not shown)."""
    out, cut = [], False
    for f in files:
        if budget <= 0:
            cut = True
            out.append(DiffFile(f.path, f.old, f.new, [], f.added, f.removed))
            continue
        if len(f.lines) > budget:
            cut = True
        out.append(DiffFile(f.path, f.old, f.new, f.lines[:budget], f.added, f.removed))
        budget -= len(f.lines)
    return out, cut


@dataclass(frozen=True)
class FolderCount:
    """What a whole-workspace rollback does in one top-level folder."""

    folder: str
    restore: int = 0
    bring_back: int = 0
    trash: int = 0

    @property
    def total(self) -> int:
        return self.restore + self.bring_back + self.trash


ROOT_FOLDER = "(root)"  # files at the top of the workspace, as `crustacean status` names them


def top_folder(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else ROOT_FOLDER


def by_folder(changes: Iterable[Change]) -> list[FolderCount]:
    """Counts per top-level folder, folders in name order and `(root)` first: a confirmation
    of 2,500 files reads as a few rows (the file list is one link away)."""
    counts: dict[str, dict[str, int]] = {}
    for ch in changes:
        folder = top_folder(ch.path)
        kind = {"delete": "trash", "create": "bring_back"}.get(ch.mode, "restore")
        row = counts.setdefault(folder, {})
        row[kind] = row.get(kind, 0) + 1
    order = sorted(counts, key=lambda f: (f != ROOT_FOLDER, f))
    return [FolderCount(f, **counts[f]) for f in order]


def foundation_marks(changes: Iterable[Change]) -> list[str]:
    """'deletes SOUL.md', 'replaces USER.md': what a reviewer must not miss on a card."""
    verbs = {"delete": "deletes", "overwrite": "replaces", "move": "moves away"}
    marks = []
    for ch in changes:
        if ch.path in FOUNDATION_FILES and ch.mode in verbs:
            marks.append(f"{verbs[ch.mode]} {ch.path}")
        if ch.to in FOUNDATION_FILES:
            marks.append(f"replaces {ch.to} (moved onto it)")
    return marks


def change_digest(target: str, changes: Iterable[Change]) -> str:
    """What a rollback confirmation showed; a different digest at submit means it is stale."""
    h = hashlib.sha256(target.encode())
    for ch in changes:
        h.update(f"\0{ch.path}\0{ch.mode}\0{ch.expected_sha256}\0".encode())
        h.update(sha256_hex(ch.content or b"").encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Entry:
    """One row of a folder listing: a subfolder (with a count) or a file."""

    name: str
    path: str
    folder: bool
    count: int = 0
    size: int = 0
    tier: str | None = None
    tier_default: bool = False  # no tier in its frontmatter: its folder's default


def folder_entries(folder: str, infos: Iterable[FileInfo]) -> list[Entry]:
    """The immediate children of `folder` among `list_context_files` results, folders first."""
    prefix = f"{folder}/" if folder else ""
    folders: dict[str, int] = {}
    files = []
    for info in infos:
        if not info.path.startswith(prefix):
            continue
        name, sep, _ = info.path[len(prefix) :].partition("/")
        if sep:
            folders[name] = folders.get(name, 0) + 1
        elif info.tier or not is_memory_path(info.path):
            files.append(Entry(name, info.path, False, size=info.size, tier=info.tier))
        else:
            tier = default_tier(info.path)
            files.append(
                Entry(name, info.path, False, size=info.size, tier=tier, tier_default=True)
            )
    dirs = [Entry(n, prefix + n, True, count=c) for n, c in sorted(folders.items())]
    return dirs + files


def breadcrumbs(path: str) -> list[tuple[str, str]]:
    """(name, folder path) from the root down to `path`."""
    parts = [p for p in path.split("/") if p]
    return [(p, "/".join(parts[: i + 1])) for i, p in enumerate(parts)]


def version_rows(versions: Sequence[Version]) -> list[dict[str, object]]:
    return [
        {"v": v, "badge": badge(v.actor, v.message), "files_label": files_label(v.files)}
        for v in versions
    ]


@dataclass(frozen=True)
class RawPage:
    """One page of a file's raw lines; `first` is the number of the first line shown."""

    lines: list[str]
    first: int
    page: Paged[str]
    cut: bool  # a line on this page was too long and is shown shortened


def raw_page(text: str, page: int) -> RawPage:
    """Page `page` of the lines of a file, each page at most about `MAX_TEXT_CHARS` long."""
    lines = text.splitlines()
    size = LINES_PER_PAGE
    pages = max(1, -(-len(lines) // size))
    paged = page_of(lines, min(page, pages), size)
    budget, shown, cut = MAX_TEXT_CHARS, [], False
    for line in paged.items:
        if len(line) > budget:
            line, cut = line[: max(budget, 200)] + " …", True
        budget -= len(line)
        shown.append(line)
    return RawPage(shown, (paged.page - 1) * size + 1, paged, cut)


def page_of_line(line: int) -> int:
    return (line - 1) // LINES_PER_PAGE + 1


def line_range(raw: str | None) -> tuple[int, int] | None:
    """`12-15` (or `12`) from a search hit's link."""
    if not raw:
        return None
    first, _, last = raw.partition("-")
    try:
        a = int(first)
        b = int(last) if last else a
    except ValueError:
        return None
    return (a, b) if 0 < a <= b else None
