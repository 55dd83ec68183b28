"""`crustacean status` and `crustacean doctor`: what the pipeline did, what it costs, what is due,
and what on this machine would stop it from running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crustacean.config import STAGES, load_config
from crustacean.errors import CrustaceanError
from crustacean.ops import cron, fleet, launchd, openclaw_jobs
from crustacean.runs import RunRecord, last_run, latest_run, list_runs
from crustacean.schedule import next_slot
from crustacean.workspace import WORKING_MEMORY, Workspace

if TYPE_CHECKING:
    from crustacean.store.apply import Applier

BOOTSTRAP_CHARS = 20_000
WARN_AT = 0.85


@dataclass(frozen=True)
class StageLine:
    stage: str
    enabled: bool
    schedule: str
    last: RunRecord | None
    next_slot: datetime | None


@dataclass
class Status:
    root: str
    stages: list[StageLine]
    totals: dict[str, dict[str, float]]
    daily_cost: list[tuple[date, float]]
    areas: dict[str, int]
    memory_md: dict[str, Any]
    tiers: dict[str, int]
    pending_proposals: int
    cron: str  # installed | not installed | unknown (why)

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.root,
            "stages": [
                {
                    "stage": s.stage,
                    "enabled": s.enabled,
                    "schedule": s.schedule,
                    "last": s.last.to_json(tool_calls=False) if s.last else None,
                    "next": s.next_slot.isoformat() if s.next_slot else None,
                }
                for s in self.stages
            ],
            "last_30_days": self.totals,
            "daily_cost": [{"day": d.isoformat(), "cost_usd": c} for d, c in self.daily_cost],
            "areas": self.areas,
            "memory_md": self.memory_md,
            "tiers": self.tiers,
            "pending_proposals": self.pending_proposals,
            "cron": self.cron,
        }


def upcoming(schedule: str, now: datetime, tz: tzinfo) -> datetime | None:
    """The stage's next slot after `now`, or None when its schedule is unreadable (status
    reports what it can; `doctor` and `tick` name the bad schedule)."""
    try:
        return next_slot(schedule, now, tz)
    except (ValueError, KeyError):
        return None


def run_totals(
    runs: list[RunRecord], now: datetime
) -> tuple[dict[str, dict[str, float]], list[tuple[date, float]]]:
    """Runs, failures, tokens and cost per stage, and cost per day, over the last 30 days."""
    since = now - timedelta(days=30)
    totals: dict[str, dict[str, float]] = {
        s: {"runs": 0, "failures": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}
        for s in STAGES
    }
    per_day: dict[date, float] = defaultdict(float)
    for r in runs:
        if r.started < since or r.stage not in totals:
            continue
        t = totals[r.stage]
        t["runs"] += 1
        t["failures"] += r.status == "failed"
        t["tokens_in"] += r.usage.total_input
        t["tokens_out"] += r.usage.output_tokens
        t["cost_usd"] = round(t["cost_usd"] + r.cost_usd, 6)
        per_day[r.started.date()] += r.cost_usd
    days = [(now - timedelta(days=i)).date() for i in range(29, -1, -1)]
    return totals, [(d, round(per_day.get(d, 0.0), 6)) for d in days]


def memory_figures(ws: Workspace) -> dict[str, Any]:
    path = ws.root / WORKING_MEMORY
    text = path.read_text("utf-8", "replace") if path.is_file() else ""
    mem = ws.settings.memory
    lines = len(text.splitlines())
    pct = max(lines / mem.working_lines, len(text) / mem.working_chars, len(text) / BOOTSTRAP_CHARS)
    state = "over" if pct > 1 else "near limit" if pct >= WARN_AT else "ok"
    return {
        "lines": lines,
        "chars": len(text),
        "line_cap": mem.working_lines,
        "char_cap": mem.working_chars,
        "bootstrap_limit": BOOTSTRAP_CHARS,
        "percent_of_tightest": round(pct * 100, 1),
        "state": state,
    }


def cron_state(ws: Workspace) -> str:
    """Whether a schedule runs `tick`: the crontab block, a LaunchAgent or a systemd timer."""
    if _scheduled_elsewhere(ws):
        return "installed"
    try:
        installed = cron.is_installed(ws, cron.read_crontab(None, offer_file=False))
        return "installed" if installed else "not installed"
    except (CrustaceanError, OSError) as e:
        return f"unknown: {str(e).splitlines()[0]}"


def workspace_status(ws: Workspace, now: datetime) -> Status:
    from crustacean.recall.memories import load_memories
    from crustacean.store import Store, proposals

    runs = list_runs(ws, limit=10_000)
    lines = []
    for stage in STAGES:
        cfg = getattr(ws.settings.stages, stage)
        last = last_run(runs, stage)
        lines.append(
            StageLine(
                stage,
                cfg.enabled,
                cfg.schedule,
                last,
                upcoming(cfg.schedule, now, ws.tz) if cfg.enabled else None,
            )
        )
    totals, daily = run_totals(runs, now)
    areas = Counter(
        f.path.split("/")[0] if "/" in f.path else "(root)" for f in Store(ws).list_context_files()
    )
    mems, _ = load_memories(ws)
    return Status(
        str(ws.root),
        lines,
        totals,
        daily,
        dict(sorted(areas.items())),
        memory_figures(ws),
        dict(Counter(m.tier for m in mems)),
        len(proposals.list_proposals(ws)),
        cron_state(ws),
    )


# ------------------------------------------------------------ doctor


@dataclass(frozen=True)
class Finding:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


@dataclass
class Doctor:
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"failed": self.failed, "checks": [f.__dict__ for f in self.findings]}


def doctor(
    root: Path,
    *,
    env: Mapping[str, str] | None = None,
    ping: bool = False,
    now: datetime | None = None,
) -> Doctor:
    """Every check a user would otherwise learn about from a silent cron job."""
    env = os.environ if env is None else env
    now = now or datetime.now(UTC)
    try:
        ws = Workspace(root, load_config(root, env))
    except CrustaceanError as e:
        return Doctor([Finding("config", "fail", str(e), "fix the file and key it names")])
    return Doctor(
        [
            Finding("config", "ok", "every config layer is valid"),
            _key_for_cron(ws, env),
            *_key_file(ws, env),
            *([_ping(ws, env)] if ping else []),
            _git(),
            _writable(ws),
            *_repository(ws),
            _leftovers(ws),
            *_cron(ws),
            _last_run(ws, now),
            _lock(ws),
            *_openclaw(ws, env),
            *_claude_memory(env),
        ]
    )


def _key_for_cron(ws: Workspace, env: Mapping[str, str]) -> Finding:
    from crustacean.config import KEY_ENV, TOKEN_ENV, URL_ENV, env_file_path, is_placeholder_key
    from crustacean.errors import ConfigError
    from crustacean.llm.client import resolve_credentials

    file = env_file_path(ws.settings, env)
    shell_only = (KEY_ENV, TOKEN_ENV, URL_ENV)
    cron_env = {k: v for k, v in env.items() if k not in shell_only}
    try:  # what a cron run would find: the env file and config, not this shell's variables
        creds = resolve_credentials(ws.settings, cron_env)
    except ConfigError:
        creds = None
    if creds is not None and is_placeholder_key(creds.key) and creds.source == str(file):
        return Finding(
            "api key for cron",
            "fail",
            f"the key in {file} is a placeholder from a guide, not a key",
            f"replace it with your key from the Anthropic console: {KEY_ENV}=sk-ant-api03-…",
        )
    if creds is not None:
        return Finding("api key for cron", "ok", f"a run under cron uses {creds.source}")
    if env.get(KEY_ENV):
        return Finding(
            "api key for cron",
            "warn",
            f"{KEY_ENV} is set in this shell only; cron does not see it",
            f"put {KEY_ENV}=... in {file} (mode 600)",
        )
    return Finding(
        "api key for cron",
        "fail",
        "no API key in the env file or the environment",
        f"put {KEY_ENV}=... in {file} (mode 600), or set llm.base_url",
    )


def _key_file(ws: Workspace, env: Mapping[str, str]) -> list[Finding]:
    """The env file cron runs read: private to its owner (the guides' mode 600), and every
    line a `KEY=VALUE` (another line is silently ignored, so a key on it is never used)."""
    from crustacean.config import env_file_lines_unread, env_file_path

    file = env_file_path(ws.settings, env)
    try:
        mode = file.stat().st_mode
        text = file.read_text("utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        return [Finding("key file", "fail", f"{file} cannot be read ({e})", "fix or remove it")]
    out = []
    if mode & 0o077:
        out.append(
            Finding(
                "key file",
                "warn",
                f"{file} can be read by other users (mode {mode & 0o777:o})",
                f"chmod 600 {file}",
            )
        )
    unread = env_file_lines_unread(text)
    if unread:
        lines = ", ".join(map(str, unread[:5])) + (" …" if unread[5:] else "")
        out.append(
            Finding(
                "key file",
                "warn",
                f"{file}: line(s) {lines} are not KEY=VALUE and are ignored",
                "write each as KEY=VALUE (`export ` and quotes are fine), or `#` it out",
            )
        )
    return out or [Finding("key file", "ok", f"{file} is private and every line is KEY=VALUE")]


def _ping(ws: Workspace, env: Mapping[str, str]) -> Finding:
    from crustacean.llm.client import ModelClient, resolve_credentials

    try:
        client = ModelClient(ws.settings, resolve_credentials(ws.settings, env))
        model = ws.settings.models.small
        client.create(
            tier_key="models.small",
            model=model,
            max_tokens=1,
            messages=[{"role": "user", "content": "ping"}],
        )
    except CrustaceanError as e:
        detail, fix = split_fix(str(e))
        return Finding("api ping", "fail", detail, fix)
    return Finding("api ping", "ok", f"{ws.settings.models.small} answered")


def _git() -> Finding:
    if shutil.which("git"):
        return Finding("git", "ok", "git is installed: every write is versioned")
    return Finding(
        "git",
        "warn",
        "git is missing: writes work but are not versioned",
        "install git, then run `crustacean init` again",
    )


def _repository(ws: Workspace) -> list[Finding]:
    """HEAD and its tree exist (one `git cat-file`, no fsck): a damaged repository fails every
    write, so doctor says so first, with the one command that recovers it."""
    from crustacean.store.versions import Git

    if not shutil.which("git") or not (ws.root / ".git").exists():
        return []
    damage = Git(ws.root).damage()
    if damage is None:
        return [Finding("repository", "ok", "HEAD and its tree are intact")]
    return [Finding("repository", "fail", *split_fix(damage))]


def _applier(ws: Workspace) -> Applier:
    from crustacean.store.apply import Applier
    from crustacean.store.files import Files
    from crustacean.store.versions import Git

    return Applier(ws, Git(ws.root), Files(ws.root).read_bytes)


def _leftovers(ws: Workspace) -> Finding:
    """What a killed write left (its journal, crustacean's own index lock, a stale ref lock):
    named before the next call repairs it, so nobody follows git's advice to delete the lock
    and commit first."""
    try:
        found = _applier(ws).leftovers()
    except CrustaceanError as e:
        return Finding("interrupted write", "warn", f"cannot tell ({e})")
    if not found:
        return Finding("interrupted write", "ok", "no write was left half done")
    return Finding(
        "interrupted write",
        "warn",
        "; ".join(found) + ": the next crustacean command repairs it",
        "run `crustacean doctor --fix` to repair it now; do not delete git's lock by hand",
    )


def doctor_fixes(root: Path) -> list[tuple[str, str]]:
    """`doctor --fix`: each repair that was needed, as (check, what was done). A damaged
    repository is recovered first (the files on disk as a new version on its last intact
    commit); then what a killed write left is repaired as the next call would (its files undone
    or kept, a version a later commit dropped made again, stale locks and temp files removed)."""
    ws = Workspace(root, load_config(root))
    done = []
    if (rebuilt := _applier(ws).rebuild_damaged()) is not None:
        commit, parent = rebuilt
        on = f"on version {parent[:12]}" if parent else "as a new first version"
        done.append(("repository", f"recorded the files on disk as version {commit[:12]} {on}"))
    applier = _applier(ws)
    had = applier.leftovers()
    undone, stray = applier.repair()
    if had or stray or undone:
        what = ["repaired an interrupted write" if had else "cleaned up after a killed write"]
        if undone:
            what.append("its unfinished files put back")
        if stray:
            what.append("removed " + ", ".join(stray[:5]) + (" …" if stray[5:] else ""))
        done.append(("interrupted write", "; ".join(what)))
    return done


def _writable(ws: Workspace) -> Finding:
    for path in (ws.root, ws.state_dir):
        if path.exists() and not os.access(path, os.W_OK):
            return Finding(
                "workspace writable",
                "fail",
                f"{path} is not writable",
                f"fix its permissions (chown/chmod {path})",
            )
    return Finding("workspace writable", "ok", f"{ws.root} is writable")


def split_fix(message: str) -> tuple[str, str]:
    """`what went wrong; what to do` → the two halves, cut at the last `; ` outside brackets.

    Error messages name their fix after a semicolon, so a finding can show it on its own line
    instead of a vague "see the message"."""
    depth, cut = 0, -1
    for i, ch in enumerate(message):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and message.startswith("; ", i):
            cut = i
    if cut < 0:
        return message, "run `crustacean doctor --ping` again once the cause above is fixed"
    return message[:cut], message[cut + 2 :].rstrip(".")


def _cron(ws: Workspace) -> list[Finding]:
    elsewhere = _scheduled_elsewhere(ws)
    if elsewhere:
        return [Finding("schedule", "ok", f"installed: {elsewhere}")]
    try:
        block = cron.block_for(ws, cron.read_crontab(None, offer_file=False))
    except (CrustaceanError, OSError) as e:
        return [
            Finding(
                "cron entry",
                "warn",
                f"cannot read the crontab ({e})",
                "install cron, or schedule `crustacean tick` another way",
            )
        ]
    if not block:
        return [
            Finding(
                "cron entry",
                "warn",
                "no crontab entry for this workspace",
                "run `crustacean cron install`",
            )
        ]
    interpreters = {
        w
        for line in block.splitlines()
        for w in line.split()
        if w.startswith("/") and "python" in Path(w).name
    }
    missing = [p for p in interpreters if not Path(p).exists()]
    old_tick = any(" tick " in f" {line} " and "--log" not in line for line in block.splitlines())
    found = [
        Finding(
            "cron entry",
            "fail" if missing else "warn" if old_tick else "ok",
            f"interpreter {missing[0]} is gone"
            if missing
            else "installed by an older release: `tick` logs every tick, unrotated"
            if old_tick
            else "installed",
            "run `crustacean cron install` again" if missing or old_tick else "",
        )
    ]
    return [*found, _daemon()]


def _scheduled_elsewhere(ws: Workspace) -> str:
    """A LaunchAgent or systemd timer for this workspace, which stand in for a crontab entry."""
    units = cron.default_unit_dir()
    for path in (
        launchd.plist_path(ws),
        units / f"{cron.unit_name(ws)}.timer",
        units / "timers.target.wants" / fleet.instance(ws),
    ):
        if path.exists():
            return str(path)
    return ""


def _daemon() -> Finding:
    if not shutil.which("pgrep"):
        return Finding("cron daemon", "warn", "cannot tell whether a cron daemon runs")
    proc = subprocess.run(["pgrep", "-x", "cron|crond"], capture_output=True, check=False)
    if proc.returncode == 0:
        return Finding("cron daemon", "ok", "a cron daemon is running")
    return Finding(
        "cron daemon", "warn", "no cron daemon is running", "start it (Debian: service cron start)"
    )


def _last_run(ws: Workspace, now: datetime) -> Finding:
    last = latest_run(ws)
    if last is None:
        return Finding(
            "last run", "warn", "no run recorded yet", "run `crustacean tick`, or install cron"
        )
    when = f"{last.stage} at {last.started:%Y-%m-%d %H:%M}"
    if last.status == "failed":
        return Finding(
            "last run",
            "fail",
            f"the last run ({when}) failed: {last.error or 'no error recorded'}",
            f"see `crustacean runs show {last.id}`, fix what it names, then `crustacean tick`",
        )
    age = now - last.started
    if age > timedelta(days=1):
        return Finding(
            "last run",
            "warn",
            f"the last run was {age.days} day(s) ago",
            "check cron: `crustacean cron show`, `crustacean doctor`",
        )
    interrupted = " (interrupted)" if last.status == "interrupted" else ""
    return Finding("last run", "ok", f"last run {when}{interrupted}")


def _lock(ws: Workspace) -> Finding:
    info = ws.state_dir / "run.lock.json"
    if not info.exists():
        return Finding("lock", "ok", "no run holds the workspace")
    try:
        pid = int(json.loads(info.read_text()).get("pid", 0))
        os.kill(pid, 0)
    except (ValueError, OSError, AttributeError):
        return Finding(
            "lock",
            "warn",
            "a stale lock note is left (its process is gone); the next run takes the lock anyway",
            f"you may delete {info}",
        )
    return Finding("lock", "ok", f"a run (pid {pid}) holds the workspace now")


def _openclaw(ws: Workspace, env: Mapping[str, str]) -> list[Finding]:
    home = Path(env.get("HOME", str(Path.home())))
    config = next(
        (
            p
            for p in (home / ".openclaw/openclaw.json", home / ".openclaw/config.json")
            if p.is_file()
        ),
        None,
    )
    if config is None:
        return []  # OpenClaw is not installed: nothing to coordinate, nothing to say
    import json5  # OpenClaw's config is JSON5: comments and trailing commas are normal

    try:
        data = json5.loads(config.read_text("utf-8"))
    except (OSError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return [
            Finding(
                "openclaw",
                "warn",
                f"{config} could not be read as JSON5 ({first})",
                "fix the file (`openclaw doctor` checks it), then run `crustacean doctor` again",
            )
        ]
    search = _memory_search(ws, data, config, home)
    if not _serves_openclaw(ws, data, home):
        # A Claude Code (or other) workspace: OpenClaw's settings are not its business
        return [search] if search.status == "ok" else []
    return [search, *_dreaming(data), *_openclaw_cron(env)]


def _serves_openclaw(ws: Workspace, data: Any, home: Path) -> bool:
    """The workspace is one of OpenClaw's agent workspaces, or collects OpenClaw transcripts."""
    if any(src.kind == "openclaw" for src in ws.settings.sources):
        return True
    default_ws, agents = _agents(data, home)
    places = [default_ws, *(a.get("workspace") for a in agents)]
    root = ws.root.resolve()
    return any(_home_path(str(p), home).resolve() == root for p in places if p)


# Claude Code loads its own auto-memory index, ~/.claude/projects/<project>/memory/MEMORY.md,
# into every session only up to these limits; past them the rest is silently not seen.
CLAUDE_MEMORY_LINES = 200
CLAUDE_MEMORY_BYTES = 25 * 1024


def _claude_memory(env: Mapping[str, str]) -> list[Finding]:
    """Warn about Claude Code MEMORY.md files past its load limit (only where Claude Code is)."""
    home = Path(env.get("HOME", str(Path.home())))
    projects = home / ".claude/projects"
    if not projects.is_dir():
        return []
    over = []
    for path in sorted(projects.glob("*/memory/MEMORY.md")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        if lines > CLAUDE_MEMORY_LINES or len(data) > CLAUDE_MEMORY_BYTES:
            over.append(f"{path} ({lines:,} lines, {len(data) / 1024:.0f} KB)")
    if not over:
        return [
            Finding(
                "claude code memory",
                "ok",
                f"Claude Code's MEMORY.md files are within its {CLAUDE_MEMORY_LINES}-line / "
                "25 KB load limit",
            )
        ]
    return [
        Finding(
            "claude code memory",
            "warn",
            f"Claude Code loads only the first {CLAUDE_MEMORY_LINES} lines / 25 KB of MEMORY.md, "
            f"and {len(over)} file(s) are past it: " + "; ".join(over[:5]),
            "keep MEMORY.md a short index: move the detail into topic files beside it, or into "
            "this workspace, where `context` and search_memory find it",
        )
    ]


def _memory_search(ws: Workspace, data: Any, config: Path, home: Path) -> Finding:
    """knowledge/ is indexed if any extraPaths entry (defaults or any agent) resolves to it, the
    way OpenClaw resolves them: `~` is home, a relative path is inside the agent's workspace."""
    default_ws, agents = _agents(data, home)
    scopes = [(_dig(data, "agents", "defaults", "memorySearch"), default_ws)]
    scopes.append((_dig(data, "memorySearch"), default_ws))
    scopes += [(a.get("memorySearch"), a.get("workspace") or default_ws) for a in agents]
    knowledge = (ws.root / "knowledge").resolve()
    for search, base in scopes:
        extra = search.get("extraPaths") if isinstance(search, dict) else None
        for entry in extra if isinstance(extra, list) else []:
            path = _home_path(str(entry), home)
            if not path.is_absolute():
                path = _home_path(str(base), home) / path
            if path.resolve() == knowledge:
                return Finding("openclaw memorySearch", "ok", "knowledge/ is indexed")
    return Finding(
        "openclaw memorySearch",
        "warn",
        "knowledge/ is not in memorySearch.extraPaths, so OpenClaw's memory_search cannot find it",
        f"add {ws.root / 'knowledge'} to agents.defaults.memorySearch.extraPaths in {config}",
    )


def _agents(data: Any, home: Path) -> tuple[str, list[dict[str, Any]]]:
    """OpenClaw's default agent workspace, and its listed agents."""
    default_ws = _dig(data, "agents", "defaults", "workspace") or str(home / ".openclaw/workspace")
    return default_ws, [a for a in _dig(data, "agents", "list") or [] if isinstance(a, dict)]


def _home_path(text: str, home: Path) -> Path:
    """`~` is the home doctor was given (tests, another user), not necessarily this process's."""
    if text == "~" or text.startswith("~/"):
        return home / text[2:]
    return Path(os.path.expandvars(text))


def _dreaming(data: Any) -> list[Finding]:
    """Dreaming (OpenClaw documents it as opt-in, off by default) also rewrites MEMORY.md: a
    warning only when the config turns it on and memory-core is not off."""
    core = _dig(data, "plugins", "entries", "memory-core")
    if isinstance(core, dict) and core.get("enabled") is False:
        return []
    if _dig(core, "config", "dreaming", "enabled") is not True:
        return []
    return [
        Finding(
            "openclaw dreaming",
            "warn",
            "OpenClaw's dreaming is on: it also rewrites MEMORY.md, beside its own DREAMS.md and "
            "memory/.dreams/, which no crustacean stage writes",
            "set plugins.entries.memory-core.config.dreaming.enabled to false, or schedule "
            "it apart from curate and compile",
        )
    ]


def _openclaw_cron(env: Mapping[str, str]) -> list[Finding]:
    """Which `openclaw cron add` form the installed OpenClaw takes (nothing if none on PATH)."""
    installed = openclaw_jobs.probe(env)
    if not installed.found:
        return []
    line = openclaw_jobs.describe(installed)
    if installed.form == openclaw_jobs.COMMAND and not installed.error:
        return [Finding("openclaw cron", "ok", line)]
    return [
        Finding(
            "openclaw cron",
            "warn",
            line,
            "update OpenClaw for command jobs, or schedule with `crustacean cron install` "
            "(crontab, launchd or systemd), which costs no model turn",
        )
    ]


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
