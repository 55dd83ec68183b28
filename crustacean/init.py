"""`crustacean init`: scaffold a new workspace, or adopt an existing one without touching a byte
of what is already there."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crustacean.config import WORKSPACE_FILE, SourceConfig, load_config, render_default_toml
from crustacean.errors import UsageError
from crustacean.store.changes import Change
from crustacean.store.files import Store
from crustacean.store.versions import Git, git_available
from crustacean.workspace import LAYOUT_DIRS, PIPELINE_DOCS, STATE_DIR, SYSTEM_DIR, Workspace
from crustacean.workspace import data_dir as _data_dir

GITIGNORE = (
    f"# crustacean's state (index, cursors, run log): rebuildable, not memory\n{STATE_DIR}/\n"
)

NEXT_STEPS = (
    "Set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a local Anthropic-compatible server) "
    "before running a stage.",
    "OpenClaw: knowledge/ is not indexed by memory_search unless you add it to "
    "memorySearch.extraPaths.",
    "OpenClaw: the built-in dreaming job also rewrites MEMORY.md; disable it or schedule it "
    "apart from curate and compile.",
)


@dataclass
class InitReport:
    root: Path
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    version: str | None = None
    baseline: str | None = None
    next_steps: tuple[str, ...] = NEXT_STEPS


def scaffold_files(daily_dir: str, sources: list[SourceConfig] | None = None) -> dict[str, bytes]:
    """Every file a fresh workspace starts with, by workspace-relative path."""
    files: dict[str, bytes] = {}
    templates = _data_dir("templates") / "workspace"
    for path in sorted(templates.rglob("*")):
        if path.is_file() and path.name != ".gitkeep":
            files[path.relative_to(templates).as_posix()] = path.read_bytes()
    pipeline = _data_dir("pipeline")
    for name in PIPELINE_DOCS:
        files[f"{SYSTEM_DIR}/{name}"] = (pipeline / name).read_bytes()
    files[WORKSPACE_FILE] = render_default_toml(
        {"workspace.daily_dir": daily_dir}, sources
    ).encode()
    files[".gitignore"] = GITIGNORE.encode()
    return files


def init_workspace(
    target: Path, daily_dir: str | None = None, *, detect: bool = True, home: Path | None = None
) -> InitReport:
    """Create what is missing, keep what exists, and version the result.

    A new `crustacean.toml` lists the OpenClaw and Claude Code transcript folders found in the
    home directory as collect's sources (`detect=False` leaves them out).
    """
    asked = daily_dir
    daily_dir = daily_dir or "root"
    if daily_dir not in ("root", "daily"):
        raise UsageError(f"--daily-dir must be root or daily, not {daily_dir!r}.")
    root = target.expanduser().resolve()
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

    found = _detected_sources(home or Path.home()) if detect and not has_config else []
    for src in found:
        report.notes.append(
            f"Found {src.kind} transcripts in {src.path}: added as a collect source."
        )
    changes = []
    for rel, data in scaffold_files(daily_dir, found).items():
        if (root / rel).exists():
            report.kept.append(rel)
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

    if new_repo and store.versioned:
        if had_files:
            report.baseline = git.commit_all(
                actor="user", message="crustacean init: baseline of the files already here"
            )
            report.notes.append("Committed the files that were already here as the baseline.")
    elif store.versioned:
        dirty = git.out("status", "--porcelain", "--untracked-files=normal").splitlines()
        if dirty:
            report.notes.append(
                f"{len(dirty)} path(s) had uncommitted changes; crustacean left them uncommitted."
            )
    if changes:
        result = store.write_context(
            changes,
            actor="user",
            message="crustacean init: scaffold workspace",
            max_files=len(changes),
        )
        report.version = result.version
    return report


def _detected_sources(home: Path) -> list[SourceConfig]:
    from crustacean.sources import default_sources

    return default_sources(home)


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
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text("utf-8", "replace") if exclude.exists() else ""
    if f"{STATE_DIR}/" not in current.splitlines():
        with exclude.open("a", encoding="utf-8") as fh:  # git's own file, not a workspace file
            fh.write(("" if current.endswith("\n") or not current else "\n") + f"{STATE_DIR}/\n")
    return new
