"""`crustacean init`: scaffold a new workspace, or adopt an existing one without touching a byte
of what is already there."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from crustacean.config import (
    WORKSPACE_FILE,
    SourceConfig,
    SourceKind,
    load_config,
    render_workspace_toml,
)
from crustacean.errors import UsageError
from crustacean.ops.system_docs import upgrade_docs
from crustacean.store import Store
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.scan import LeftOut, check_file, with_left_out_block
from crustacean.store.versions import Git, git_available
from crustacean.workspace import (
    FOUNDATION_FILES,
    LAYOUT_DIRS,
    PIPELINE_DOCS,
    STATE_DIR,
    SYSTEM_DIR,
    Workspace,
)
from crustacean.workspace import data_dir as _data_dir

GITIGNORE = (
    f"# crustacean's state (index, cursors, run log): rebuildable, not memory\n{STATE_DIR}/\n"
)

NEXT_STEPS = (
    "Set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a local Anthropic-compatible server) "
    "before running a stage.",
)
OPENCLAW_STEPS = (  # only where OpenClaw is installed
    "OpenClaw: knowledge/ is not indexed by memory_search unless you add it to "
    "memorySearch.extraPaths.",
    "OpenClaw: the built-in dreaming job also rewrites MEMORY.md; disable it or schedule it "
    "apart from curate and compile.",
)
SOURCE_PATHS: dict[SourceKind, str] = {
    "openclaw": "~/.openclaw/agents",
    "claude_code": "~/.claude/projects",
}
# What an agent loads into every session: an adopted folder gets none of these templates, or
# their placeholders would be loaded as if the user had written them.
LOADED_TEMPLATES = (*FOUNDATION_FILES, "MEMORY.md")


@dataclass
class InitReport:
    root: Path
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    version: str | None = None
    baseline: str | None = None
    notes: list[str] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    next_steps: tuple[str, ...] = NEXT_STEPS

    def to_json(self) -> dict[str, object]:
        """Every field, in order (a left-out file's kind stays out: its reason says it)."""
        left_out = [{"path": i.path, "reason": i.reason} for i in self.left_out]
        plain = {"root": str(self.root), "left_out": left_out, "next_steps": list(self.next_steps)}
        return self.__dict__ | plain


def scaffold_files(
    daily_dir: str, sources: list[SourceConfig] | None = None, *, adopted: bool = False
) -> dict[str, bytes]:
    """Every file a fresh workspace starts with, by workspace-relative path (an adopted one
    gets no template an agent would load)."""
    files: dict[str, bytes] = {}
    templates = _data_dir("templates") / "workspace"
    for path in sorted(templates.rglob("*")):
        rel = path.relative_to(templates).as_posix()
        if adopted and rel in LOADED_TEMPLATES:
            continue
        if path.is_file() and path.name != ".gitkeep":
            files[path.relative_to(templates).as_posix()] = path.read_bytes()
    pipeline = _data_dir("pipeline")
    for name in PIPELINE_DOCS:
        files[f"{SYSTEM_DIR}/{name}"] = (pipeline / name).read_bytes()
    files[WORKSPACE_FILE] = render_workspace_toml(
        {"workspace.daily_dir": daily_dir}, sources
    ).encode()
    files[".gitignore"] = GITIGNORE.encode()
    return files


def refuse_home(root: Path, home: Path) -> None:
    """A workspace is versioned whole, so the home folder (keys, caches, everything) or a folder
    above it is never one; say how to name a folder of its own instead."""
    home = home.expanduser().resolve()
    if root == home or home.is_relative_to(root):
        where = "is your home folder" if root == home else "holds your home folder"
        raise UsageError(
            f"{root} {where}; a workspace is versioned whole, so it needs a folder of its own. "
            "Name one, e.g. `crustacean init ~/agent`, or cd into the agent's folder first."
        )


def init_workspace(
    target: Path | None,
    daily_dir: str | None = None,
    *,
    detect: bool = True,
    home: Path | None = None,
    sources: list[SourceConfig] | None = None,
) -> InitReport:
    """Create what is missing, keep what exists, and version the result.

    A new `crustacean.toml` lists the OpenClaw and Claude Code transcript folders found in the
    home directory as collect's sources (`detect=False` leaves them out), or `sources` if given.
    `target=None` is the current folder, refused when it is the home folder or above it.
    """
    asked = daily_dir
    daily_dir = daily_dir or "root"
    if daily_dir not in ("root", "daily"):
        raise UsageError(f"--daily-dir must be root or daily, not {daily_dir!r}.")
    root = (target or Path.cwd()).expanduser().resolve()
    refuse_home(root, home or Path.home())
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is a file; give a folder for the workspace.")
    root.mkdir(parents=True, exist_ok=True)
    had_files = any(p.is_file() for p in root.rglob("*") if not {".git", STATE_DIR} & set(p.parts))
    report = InitReport(root)
    git = Git(root)
    new_repo = _ensure_repo(git, root, report)

    has_config = (root / WORKSPACE_FILE).is_file()
    ws = Workspace(root, load_config(root if has_config else None))
    store = Store(ws)
    if has_config:
        daily_dir = ws.settings.workspace.daily_dir
    dirs = list(LAYOUT_DIRS)
    if daily_dir == "daily":
        dirs.append("memory/daily")
    for rel in dirs:
        (report.kept if (root / rel).is_dir() else report.created).append(rel + "/")
        (root / rel).mkdir(parents=True, exist_ok=True)

    had_gitignore = (root / ".gitignore").exists()
    if new_repo and store.versioned:
        if had_files:
            report.left_out = _leave_out(git, store)
            report.baseline = git.commit_all(
                actor="user", message="crustacean init: baseline of the files already here"
            )
            report.notes.append("Committed the files that were already here as the baseline.")
        (root / PENDING).unlink(missing_ok=True)
    elif store.versioned:
        dirty = git.out("status", "--porcelain", "--untracked-files=normal").splitlines()
        if dirty:
            report.notes.append(
                f"{len(dirty)} path(s) had uncommitted changes; crustacean left them uncommitted."
            )
    found = sources or []
    if sources and has_config:
        added = _added_sources(root, ws, sources)
        if added:
            store.write_context(added, actor="user", message="crustacean init: add sources")
            report.notes.append(f"Added the --source table(s) to {WORKSPACE_FILE}.")
    if sources is None and detect and not has_config:
        found = offered_sources(root, home)
        if len({src.kind for src in found}) > 1:
            report.notes.append(_which_platform(found))
            found = []
        for src in found:
            report.notes.append(
                f"Found {src.kind} transcripts in {src.path}: added as a collect source."
            )
    if had_files:
        skipped = [p for p in LOADED_TEMPLATES if not (root / p).exists()]
        if skipped:
            report.notes.append(
                f"Adopted an existing folder, so no {', '.join(skipped)} template was added: an "
                "agent would load its placeholders as memory. Write your own where you want one."
            )
    if (home or Path.home()).joinpath(".openclaw").is_dir():
        report.next_steps = NEXT_STEPS + OPENCLAW_STEPS
    changes = []
    for rel, data in scaffold_files(daily_dir, found, adopted=had_files).items():
        if (root / rel).exists():
            ours = rel == ".gitignore" and not had_gitignore  # made by _leave_out just now
            (report.created if ours else report.kept).append(rel)
        else:
            report.created.append(rel)
            changes.append(Change(rel, "create", content=data))
    if has_config and asked:
        report.notes.append(f"{WORKSPACE_FILE} exists, so --daily-dir was not written to it.")
    gitignore = root / ".gitignore"
    if ".gitignore" in report.kept and STATE_DIR not in gitignore.read_text("utf-8", "replace"):
        report.notes.append(
            f".gitignore was kept as it is; {STATE_DIR}/ is excluded in .git/info/exclude instead."
        )

    if changes:
        result = store.write_context(
            changes,
            actor="user",
            message="crustacean init: scaffold workspace",
            max_files=len(changes),
        )
        report.version = result.version
    if any(f"{SYSTEM_DIR}/{name}" in report.kept for name in PIPELINE_DOCS):
        docs = upgrade_docs(store)  # an existing workspace gets the fixed instructions
        report.notes += docs.notes()
        report.version = docs.version or report.version
    return report


def _leave_out(git: Git, store: Store) -> list[LeftOut]:
    """Before the baseline commit: find what `git add -A` would add that must never enter
    history (credentials, files over store.max_snapshot_bytes) and list it in .gitignore's
    crustacean block, written through the store like every other workspace write."""
    limit = store.ws.settings.store.max_snapshot_bytes
    raw = git.out("ls-files", "--others", "--exclude-standard", "-z")
    left: list[LeftOut] = []
    for rel in sorted(p for p in raw.split("\0") if p):
        full = store.root / rel
        if full.is_symlink() or not full.is_file():
            continue
        size = full.stat().st_size
        data = full.read_bytes() if size <= limit else b""
        bad = check_file(rel, data, limit, size=size)
        if bad is not None:
            left.append(bad)
    if left:
        current = store.read_bytes(".gitignore")
        text = with_left_out_block(
            GITIGNORE if current is None else current.decode("utf-8", "replace"),
            [b.path for b in left],
        )
        store.write_context(
            [_put(".gitignore", text.encode(), current)],
            actor="user",
            message="crustacean init: leave credentials and large files out of git",
            max_files=1,
        )
    return left


def _put(rel: str, data: bytes, current: bytes | None) -> Change:
    """`rel` created, or overwritten over the `current` bytes it has now."""
    if current is None:
        return Change(rel, "create", content=data)
    return Change(rel, "overwrite", content=data, expected_sha256=sha256_hex(current))


def offered_sources(target: Path | None, home: Path | None = None) -> list[SourceConfig]:
    """The transcript folders installed in `home` that suit a workspace at `target` (an
    OpenClaw workspace gets OpenClaw's only); more than one platform is the user's choice."""
    from crustacean.sources import default_sources

    root = (target or Path.cwd()).expanduser().resolve()
    return default_sources((home or Path.home()).resolve(), root)


def sources_named(kinds: list[str]) -> list[SourceConfig]:
    """`--source KIND` as collect sources at each platform's own folder."""
    bad = [k for k in kinds if k not in SOURCE_PATHS]
    if bad:
        raise UsageError(
            f"unknown --source {bad[0]!r}; use {' or '.join(SOURCE_PATHS)} "
            "(give it twice for both)."
        )
    known: dict[str, SourceConfig] = {
        k: SourceConfig(kind=k, path=p) for k, p in SOURCE_PATHS.items()
    }
    return [known[kind] for kind in dict.fromkeys(kinds)]  # in the order given, once each


def _which_platform(found: list[SourceConfig]) -> str:
    where = " and ".join(f"{s.kind} in {s.path}" for s in found)
    return (
        f"Found transcripts of more than one agent ({where}); added none, since a workspace "
        "serves one agent. Add the one it is for to crustacean.toml as a [[sources]] table "
        '(kind = "claude_code", path = "~/.claude/projects", for example), or run init '
        "again in a new folder with --source KIND."
    )


def _added_sources(root: Path, ws: Workspace, sources: list[SourceConfig]) -> list[Change]:
    """`init --source KIND` on a workspace that has a config: the append that adds the
    sources it lacks as [[sources]] tables, or a refusal naming the table to paste when the
    file cannot take one (its `sources` are written another way)."""
    have = {(s.kind, s.path) for s in ws.settings.sources}
    missing = [s for s in sources if (s.kind, s.path) not in have]
    if not missing:
        return []
    table = "\n".join(f'[[sources]]\nkind = "{s.kind}"\npath = "{s.path}"\n' for s in missing)
    path = root / WORKSPACE_FILE
    current = path.read_bytes()
    body = ("" if current.endswith(b"\n") or not current else "\n") + "\n" + table
    try:  # an inline `sources = [...]` cannot take a [[sources]] table after it
        tomllib.loads((current + body.encode()).decode("utf-8"))
    except ValueError:  # TOMLDecodeError and UnicodeDecodeError both
        raise UsageError(
            f"{WORKSPACE_FILE} exists and cannot take a [[sources]] table as it is; add this "
            f"to it by hand:\n{table}"
        ) from None
    return [
        Change(WORKSPACE_FILE, "append", content=body.encode(), expected_sha256=sha256_hex(current))
    ]


PENDING = f"{STATE_DIR}/init-baseline-pending"
"""Made with the repository, removed once the baseline is committed: a rerun finishes it."""


def _ensure_repo(git: Git, root: Path, report: InitReport) -> bool:
    """Make `root` a git repository of its own; say so when git is missing."""
    if not git_available():
        report.notes.append(
            "git was not found: the workspace works, but unversioned. "
            "Install git and run `crustacean init` again to turn versions on."
        )
        return False
    new = False
    if not git.is_repo() or Path(git.out("rev-parse", "--show-toplevel")).resolve() != root:
        if git.is_repo():
            report.notes.append("The folder was inside another git repository; it now has its own.")
        git.init()
        new = True
    elif git.head() is None and (root / PENDING).exists():
        # Our own init stopped (a Ctrl-C during the adoption of a big folder) before its
        # baseline: treated as new again, so the files already here are committed as the
        # baseline the docs promise can be restored. A user's own empty repository is not.
        new = True
    if new:
        (root / PENDING).parent.mkdir(parents=True, exist_ok=True)
        (root / PENDING).touch()
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text("utf-8", "replace") if exclude.exists() else ""
    if f"{STATE_DIR}/" not in current.splitlines():
        with exclude.open("a", encoding="utf-8") as fh:  # git's own file, not a workspace file
            fh.write(("" if current.endswith("\n") or not current else "\n") + f"{STATE_DIR}/\n")
    return new


# ------------------------------------------------------------------------- the sample

SAMPLE_SOURCES = [
    SourceConfig(kind="openclaw", path="transcripts/openclaw/agents", name="openclaw"),
    SourceConfig(kind="claude_code", path="transcripts/claude/projects", name="claude-code"),
]
SAMPLE_NEXT_STEPS = (
    "See what the pipeline would do and cost, with no model call: crustacean tick --plan",
    "Look around: crustacean status, crustacean search garden, crustacean context --for main",
    "With ANTHROPIC_API_KEY set, run one stage for real: crustacean collect (then curate, "
    "compile, calibrate); crustacean history shows every version and rollback undoes one.",
)
_DAY = re.compile(r"\{\{DAY-(\d+)\}\}")
_AGO = re.compile(r"\{\{AGO (\d+)h(\d+)m\}\}")


def render_sample(text: str, today: date, now: datetime) -> str:
    """Dates in the sample are relative, so it always looks a few days old: `{{DAY-N}}` is the
    date N days before today, `{{AGO 30h05m}}` a UTC transcript time that long before now."""

    def ago(m: re.Match[str]) -> str:
        moment = now.astimezone(UTC) - timedelta(hours=int(m[1]), minutes=int(m[2]))
        return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    text = _DAY.sub(lambda m: (today - timedelta(days=int(m[1]))).isoformat(), text)
    return _AGO.sub(ago, text)


def sample_files(today: date, now: datetime) -> dict[str, bytes]:
    """The sample's files by workspace path: its memories, and its transcripts under
    `transcripts/` (the sample's configured collect sources)."""
    root = _data_dir("templates") / "sample"
    files: dict[str, bytes] = {}
    for part, prefix in (("workspace", ""), ("transcripts", "transcripts/")):
        base = root / part
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.name != ".gitkeep":
                rel = render_sample(prefix + path.relative_to(base).as_posix(), today, now)
                files[rel] = render_sample(path.read_text("utf-8"), today, now).encode()
    return files


def _sample_group(path: str) -> str:
    """Sample files are committed in a few versions, so `history` has something to show."""
    if path.startswith("transcripts/"):
        return "transcripts the sample's collect reads"
    if path.startswith(("memory/contacts/", "memory/lessons/")):
        return "contacts and lessons"
    if path.startswith(("knowledge/", "archive/")):
        return "knowledge and an earlier digest"
    if path.startswith("memory/") and not path.startswith("memory/."):
        return "daily logs, reminders and goals"
    return "working memory and the user"


def init_sample(target: Path, now: datetime | None = None) -> InitReport:
    """A demo workspace with a few weeks of memory and two days of transcripts to collect.

    It goes into a new or empty folder only: a sample mixed into a real workspace would be
    memory the user never wrote."""
    root = target.expanduser().resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(
            f"{root} is not an empty folder; --sample makes a new demo workspace, so give a "
            "folder that does not exist yet (e.g. `crustacean init --sample crustacean-sample`)."
        )
    report = init_workspace(root, detect=False, sources=SAMPLE_SOURCES)
    ws = Workspace(root, load_config(root))
    now = now or datetime.now(UTC)
    store = Store(ws)
    groups: dict[str, list[Change]] = {}
    for rel, data in sample_files(ws.today(now), now).items():
        change = _put(rel, data, store.read_bytes(rel))
        groups.setdefault(_sample_group(rel), []).append(change)
    for what, changes in groups.items():
        written = store.write_context(
            changes, actor="user", message=f"sample: {what}", max_files=len(changes)
        )
        report.created += [f for f in written.files if f not in report.created]
        report.version = written.version or report.version
    report.notes.append(
        "This is a sample: its memories and transcripts are made up. Delete the folder when done."
    )
    report.next_steps = SAMPLE_NEXT_STEPS
    return report


# ---------------------------------------------------------------- `crustacean init`, as asked

# Asked which sources to collect when both platforms are installed (a person at a terminal).
Chooser = Callable[[list[SourceConfig]], list[SourceConfig]]


@dataclass(frozen=True)
class InitRequest:
    """`crustacean init`'s flags; contradictory ones are refused when made, before any work."""

    directory: Path | None = None
    daily_dir: str | None = None
    detect: bool = True
    sources: tuple[str, ...] = ()  # --source KIND, as given
    sample: bool = False

    def __post_init__(self) -> None:
        if self.sample and (self.daily_dir or self.sources):
            raise UsageError("--sample uses its own layout and sources; drop --daily-dir/--source.")
        if self.sources and not self.detect:
            raise UsageError(
                "--source names the sources to add and --no-detect adds none; pick one."
            )


def initialize(request: InitRequest, choose: Chooser | None = None) -> InitReport:
    """A sample, or a workspace created or adopted; `choose` (when given) picks the sources
    when transcripts of both platforms are found and no --source names them."""
    chosen = sources_named(list(request.sources)) if request.sources else None
    if chosen is None and choose is not None and request.detect and not request.sample:
        offered = offered_sources(request.directory)
        if len({s.kind for s in offered}) > 1:
            chosen = choose(offered)
    if request.sample:
        return init_sample(request.directory or Path("."))
    try:
        return init_workspace(
            request.directory, request.daily_dir, detect=request.detect, sources=chosen
        )
    except KeyboardInterrupt as e:
        e.add_note("init stopped part way; run the same `crustacean init` again to finish it.")
        raise
