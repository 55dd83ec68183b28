"""Workspace layout, discovery and the packaged data (pipeline docs, scaffold)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import date, datetime, tzinfo
from functools import cached_property
from pathlib import Path
from typing import Final

from crustacean import daily
from crustacean.config import (
    ORG_ENV,
    WORKSPACE_FILE,
    LoadedConfig,
    Settings,
    default_env_file,
    env_file_path,
    load_config,
    user_config_file,
)
from crustacean.errors import ConfigError, WorkspaceNotFoundError

# The one walker and its skip rules live in crustacean/tree.py (stdlib only); re-exported.
from crustacean.tree import CHECKED as CHECKED
from crustacean.tree import MEMORY_HOMES as MEMORY_HOMES
from crustacean.tree import NOT_GIT as NOT_GIT
from crustacean.tree import OWN_STATE as OWN_STATE
from crustacean.tree import RECALLED as RECALLED
from crustacean.tree import STATE_DIR as STATE_DIR
from crustacean.tree import TOOL_CACHES as TOOL_CACHES
from crustacean.tree import TRASH_DIR as TRASH_DIR
from crustacean.tree import WRITABLE as WRITABLE
from crustacean.tree import Skip as Skip
from crustacean.tree import walk as walk

WORKSPACE_ENV = "CRUSTACEAN_WORKSPACE"

# How a core function reports long work: `progress(done, total)` after each item. The core never
# draws anything; the CLI turns the calls into a bar on a terminal (cli/output.py `progress`).
Progress = Callable[[int, int], None]

FOUNDATION_FILES = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "TOOLS.md")
WORKING_MEMORY = "MEMORY.md"
PIPELINE_DOCS = ("HOW-IT-WORKS.md", "COLLECT.md", "CURATE.md", "COMPILE.md", "CALIBRATE.md")
SYSTEM_DIR = "memory/.system"

MEMORY_SUBDIRS = ("contacts", "groups", "lessons", "reminders", "goals", "ideas", "lists", "notes")
KNOWLEDGE_SUBDIRS = ("topics", "research", "procedures", "notes")
ARCHIVE_SUBDIRS = ("daily", "lessons", "digests", "audits", "trash")
ARTIFACT_SUBDIRS = ("images", "diagrams", "exports")

LAYOUT_DIRS: tuple[str, ...] = (
    "memory",
    SYSTEM_DIR,
    *(f"memory/{d}" for d in MEMORY_SUBDIRS),
    "knowledge",
    *(f"knowledge/{d}" for d in KNOWLEDGE_SUBDIRS),
    "archive",
    *(f"archive/{d}" for d in ARCHIVE_SUBDIRS),
    "projects",
    "artifacts",
    *(f"artifacts/{d}" for d in ARTIFACT_SUBDIRS),
)


def data_dir(name: str) -> Path:
    """Packaged data (`pipeline`, `templates`): in the wheel, or beside the package."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_data" / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"crustacean's packaged {name}/ folder is missing; reinstall crustacean."
    )


def stage_doc(root: Path | None, name: str) -> str:
    """A stage's instructions: the workspace's own copy (users tune it), else the packaged one."""
    if name not in PIPELINE_DOCS:
        raise ValueError(f"unknown pipeline doc {name!r}")
    if root is not None:
        try:
            return (root / SYSTEM_DIR / name).read_text("utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            pass
    return (data_dir("pipeline") / name).read_text("utf-8")


def find_workspace(
    explicit: Path | None, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Path:
    """`--workspace`, then `CRUSTACEAN_WORKSPACE`, then walk up from the cwd to crustacean.toml."""
    env = os.environ if env is None else env
    if explicit is not None:
        return _checked(Path(explicit), "--workspace")
    if env.get(WORKSPACE_ENV):
        return _checked(Path(env[WORKSPACE_ENV]), WORKSPACE_ENV)
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / WORKSPACE_FILE).is_file():
            return folder
    raise WorkspaceNotFoundError(
        f"no crustacean workspace in {start} or above it. Run `crustacean init` to make one here, "
        f"or pass --workspace DIR (or set {WORKSPACE_ENV})."
    )


def _checked(path: Path, via: str) -> Path:
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise WorkspaceNotFoundError(
            f"{via} names {path}, which is not a folder; give a workspace folder, "
            f"or run `crustacean init {path}` to make one."
        )
    if not (path / WORKSPACE_FILE).is_file():
        raise WorkspaceNotFoundError(
            f"{via} names {path}, which is not a crustacean workspace (no {WORKSPACE_FILE}). "
            f"Run `crustacean init {path}` first."
        )
    return path


class Workspace:
    """A located workspace and its effective config. A plain class, not a frozen dataclass
    (~0.5 ms of generated code at every command's import); `Final` keeps both fields fixed,
    and no caller compares two workspaces."""

    def __init__(self, root: Path, config: LoadedConfig) -> None:
        self.root: Final = root
        self.config: Final = config

    def __repr__(self) -> str:
        return f"Workspace(root={self.root!r}, config={self.config!r})"

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def daily_dir(self) -> str:
        return daily.folder(self.settings.workspace.daily_dir)

    def daily_log(self, day: date) -> str:
        """Workspace-relative path of the daily log of `day`."""
        return daily.log_path(self.daily_dir, day)

    @cached_property
    def tz(self) -> tzinfo:
        return resolve_timezone(self.settings.workspace.timezone)

    def today(self, now: datetime) -> date:
        """What 'today' is for daily logs: `now` seen in the workspace's zone.

        With no zone configured that is the system's local time, which the C library tells
        without resolving the zone by name (tzlocal's imports and lookups were a fifth of the
        start-up of a context hook or a search); `tz` is resolved by what needs the zone."""
        if not self.settings.workspace.timezone and "tz" not in self.__dict__:
            return now.astimezone().date()
        return now.astimezone(self.tz).date()


def resolve_timezone(name: str) -> tzinfo:
    """The configured zone, or the system's when empty (what cron and the user see)."""
    from zoneinfo import ZoneInfo

    if name:
        return ZoneInfo(name)
    try:
        from tzlocal import get_localzone

        return get_localzone()
    except Exception as e:  # tzlocal raises several kinds on broken systems
        raise ConfigError(
            f"cannot tell the system time zone ({e}); set workspace.timezone in crustacean.toml."
        ) from None


def open_workspace(
    explicit: Path | None,
    overrides: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Workspace:
    """Locate the workspace and load its layered config."""
    root = find_workspace(explicit, env, cwd)
    return Workspace(root, load_config(root, env, overrides))


def locations(
    explicit: Path | None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    overrides: list[str] | None = None,
) -> list[tuple[str, str, str]]:
    """Every place crustacean reads or writes, for `crustacean paths`: (key, label, where).

    The snake_case key is what `paths --json` prints; it stays the same when a label is reworded.
    """
    env = os.environ if env is None else env
    try:
        root: Path | None = find_workspace(explicit, env, cwd)
    except WorkspaceNotFoundError:
        if explicit is not None or env.get(WORKSPACE_ENV):
            raise
        root = None
    rows = [("workspace", "workspace", str(root) if root else "(none here; run `crustacean init`)")]
    env_file = default_env_file(env)
    if root:
        env_file = env_file_path(load_config(root, env, overrides).settings, env)
        state = root / STATE_DIR
        rows += [
            ("workspace_config", "workspace config", str(root / WORKSPACE_FILE)),
            ("state_dir", "state dir", str(state)),
            ("logs", "logs", str(state / "logs")),
            ("proposals", "proposals", str(state / "proposals")),
            ("pipeline_docs", "pipeline docs", str(root / SYSTEM_DIR)),
        ]
    rows += [
        ("user_config", "user config", str(user_config_file(env))),
        ("env_file", "env file (API key)", str(env_file)),
        ("org_config", "org config", env.get(ORG_ENV) or f"(not set; ${ORG_ENV})"),
        ("packaged_pipeline_docs", "packaged pipeline docs", str(data_dir("pipeline"))),
    ]
    return rows


def load_for(
    explicit: Path | None,
    overrides: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LoadedConfig:
    """The config of the workspace here, or of no workspace when there is none."""
    env = os.environ if env is None else env
    try:
        root: Path | None = find_workspace(explicit, env, cwd)
    except WorkspaceNotFoundError:
        if explicit is not None or env.get(WORKSPACE_ENV):
            raise
        root = None
    return load_config(root, env, overrides)
