"""The one write path: `write_context`, and the read side that goes with it.

One call is one version. Every change is validated against a view of the workspace before any
byte is written; then the files are written atomically (temp file in the same folder, fsync,
rename) under a journal, and the version is committed last. A failure midway restores what the
call had written; a crash midway is undone by the next call (see `recover`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets as pyrandom
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Self

from filelock import FileLock
from filelock import Timeout as LockTimeout

from crustacean.clock import Clock, wall_clock
from crustacean.errors import (
    LimitError,
    LockedError,
    PathError,
    PolicyError,
    SecretError,
    StaleWriteError,
    WriteError,
)
from crustacean.secrets import find_secrets
from crustacean.store import policy, proposals
from crustacean.store.atomic import (
    FilesystemSync,
    atomic_write,
    fsync_dir,
    fsync_file,
    synced_temp,
    unsynced_temp,
)
from crustacean.store.changes import Change, parse_changes, sha256_hex
from crustacean.store.parallel import all_at_once, start
from crustacean.store.paths import Jail, jail
from crustacean.store.scan import guard_snapshot
from crustacean.store.versions import (
    LOCK_OWNER,
    TRAILER_ACTOR,
    TRAILER_CALL,
    TRAILER_RUN,
    Git,
    blob_id,
    clear_stale_index_lock,
)
from crustacean.workspace import NOT_GIT, TRASH_DIR, WORKING_MEMORY, WRITABLE, Workspace, walk

if TYPE_CHECKING:
    from filelock import AcquireReturnProxy

LOSS_GUARDED = ("curate", "compile", "calibrate")  # the stages that edit files they did not write
WRITE_LOCK_SECONDS = 60.0
INDEX_SYNC = ":index-sync"  # the fault point between the commit and the user's index
RENAME_LANES_FROM = 32  # files in a call from which they are renamed on several threads
SYNC_ONCE_FROM = 32  # new files in a call from which their temp files are synced at once
TEMPS_DURABLE = ":temps-durable"  # the fault point between that sync and the journal's rename
SECRET_CONTEXT = 2_000  # bytes around a change the result scan reads, either side
_TIER_RE = re.compile(rb"^tier:\s*['\"]?(hot|warm|cold|archive)['\"]?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    modified: str
    tier: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "size": self.size, "modified": self.modified}
        if self.tier:
            out["tier"] = self.tier
        return out


@dataclass(frozen=True)
class FileContent:
    path: str
    content: str
    sha256: str


@dataclass(frozen=True)
class WriteResult:
    """What a call did: a version, or a proposal id when it was ask-first."""

    files: tuple[str, ...]
    version: str | None = None
    proposal: int | None = None
    call_id: str = ""
    snapshot: str | None = None
    sha256: dict[str, str | None] = field(default_factory=dict)  # new hash; None: moved away

    def to_json(self) -> dict[str, object]:
        """The tool result models and MCP clients get: JSON, never prose."""
        if self.proposal is not None:
            return {
                "proposal": self.proposal,
                "files": list(self.files),
                "applied": False,
                "note": f"queued for review as proposal {self.proposal}; a human approves it "
                "with `crustacean review`. Nothing was written yet: do not resend it.",
            }
        return {"version": self.version, "files": list(self.files), "sha256": self.sha256}


@dataclass
class Plan:
    """The outcome of a call, computed without touching the disk."""

    changes: list[Change]
    before: dict[str, bytes | None] = field(default_factory=dict)
    after: dict[str, bytes | None] = field(default_factory=dict)
    ask: list[str] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)  # targets holding a file's bytes unchanged
    trashed: set[str] = field(default_factory=set)  # paths whose bytes before the call are kept
    loss: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (base, lost in run)

    @property
    def touched(self) -> list[str]:
        return [p for p in self.after if self.after[p] != self.before.get(p)]


def new_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + pyrandom.token_hex(3)


class Store:
    """Reads and writes one workspace."""

    def __init__(self, ws: Workspace, clock: Clock | None = None) -> None:
        self.ws = ws
        self.root = ws.root
        self.clock = clock or wall_clock
        self.git = Git(self.root)
        self._versioned: bool | None = None
        # (run id, path) -> (lines when the run first changed it, lines the run lost so far)
        self._loss_tally: dict[tuple[str | None, str], tuple[int, int]] = {}

    @property
    def versioned(self) -> bool:
        if self._versioned is None:
            self._versioned = self.git.is_repo() and self._is_top()
        return self._versioned

    def _is_top(self) -> bool:
        top = self.git.out("rev-parse", "--show-toplevel")
        return Path(top).resolve() == self.root.resolve()

    # ------------------------------------------------------------ read side

    def list_context_files(self, prefix: str | None = None) -> list[FileInfo]:
        """Every file a writer may see, sorted; state, git and the trash are left out."""
        pre = (prefix or "").replace("\\", "/")
        while pre.startswith(("/", "./")):  # not lstrip("./"): it would eat ".gitignore"'s dot
            pre = pre[1:] if pre.startswith("/") else pre[2:]
        pre = "" if pre == "." else pre
        if ".." in pre.split("/"):
            raise PathError(f"prefix {prefix!r} uses '..'; prefixes are workspace-relative.")
        out = []
        for rel, st in walk_entries(self.root):
            if rel.startswith(pre) and stat.S_ISREG(st.st_mode):
                modified = datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds")
                out.append(FileInfo(rel, st.st_size, modified, _tier_of(self.root / rel, rel)))
        return sorted(out, key=lambda f: f.path)

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(os.path.join(self.root, path), "rb") as fh:  # no Path: called per file
                return fh.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise WriteError(f"{path} is a folder, not a file; name a file inside it.") from None
        except OSError as e:  # a symlink loop, a permission problem: refuse, never crash
            raise WriteError(f"{path} cannot be read ({e.strerror}); fix or remove it.") from None

    def read_context_file(self, path: str) -> FileContent:
        rel = jail(self.root, path)
        data = self.read_bytes(rel)
        if data is None:
            raise WriteError(f"{rel} does not exist; list_context_files shows what is there.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WriteError(
                f"{rel} is not UTF-8 text, so it cannot be read as memory; save it as UTF-8 first."
            ) from None
        return FileContent(rel, text, sha256_hex(data))

    # ------------------------------------------------------------ planning

    def plan(
        self,
        raw_changes: object,
        *,
        actor: str,
        max_files: int | None = None,
        run_id: str | None = None,
    ) -> Plan:
        """Validate a call completely and compute each file's new bytes; write nothing."""
        changes = parse_changes(raw_changes)
        limit = self.ws.settings.store.max_files_per_call if max_files is None else max_files
        if len(changes) > limit:
            raise LimitError(
                f"{len(changes)} changes in one call; the limit is {limit} "
                "(store.max_files_per_call). Split it into several calls."
            )
        plan = Plan(changes=[])
        jailed = Jail(self.root)  # this call's folders resolved once: the next call looks again
        for ch in changes:
            ch = Change(
                **{
                    **ch.__dict__,
                    "path": jailed(ch.path),
                    "to": jailed(ch.to) if ch.to is not None else None,
                }
            )
            plan.changes.append(ch)
            self._check_policy(plan, ch, actor)
            self._apply_to_view(plan, ch)
        self._check_limits(plan)
        if actor != "user":
            self._check_working_memory(plan)
        if actor in LOSS_GUARDED:
            plan.loss = self._check_loss(plan, run_id)
        return plan

    def _check_loss(self, plan: Plan, run_id: str | None) -> dict[str, tuple[int, int]]:
        """Refuse a call that makes content disappear: old lines found nowhere in the files the
        call leaves behind (see `lost_lines`). The cap is per file and per run, so many small
        edits cannot do what one large one may not. Returns the run's new tally per file."""
        cfg = self.ws.settings.compile
        rest: Leftover | None = None
        tally: dict[str, tuple[int, int]] = {}
        touched = plan.touched
        after = {p: _lines(plan.after[p] or b"") for p in touched}  # each file split once
        before: dict[str, list[tuple[int, str, str]]] = {}
        for path in touched:
            old = plan.before.get(path)
            if old is None or path in plan.moved:
                continue
            own = set(after[path])
            numbered = before[path] = _numbered(old)
            if all(x in own for _, _, x in numbered):
                continue  # the common case (appends, additions): nothing of it left the file
            if rest is None:  # built once, only for a call that drops lines somewhere
                left = [after[p] for p in touched if plan.after[p] is not None]
                added = []
                for p in touched:
                    had = {x for _, _, x in before[p]} if p in before else None
                    if had is None:
                        had = set(_lines(plan.before.get(p) or b""))
                    added.append([x for x in after[p] if x not in had])
                rest = Leftover(left, added)
            lost = [(n, raw.strip()) for n, raw, line in numbered if not rest.keeps(line)]
            if not lost:
                continue
            base, before_lost = self._loss_tally.get((run_id, path), (0, 0)) if run_id else (0, 0)
            base = base or len(numbered)
            total = before_lost + len(lost)
            cap = max(cfg.loss_floor_lines, int(cfg.max_loss_fraction * base))
            if total > cap:
                shown = "; ".join(f"{n}: {text[:60]!r}" for n, text in lost[:3])
                more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
                earlier = f" (after {before_lost} lost earlier this run)" if before_lost else ""
                raise LimitError(
                    f"refused, nothing of this call was applied: {path} would lose "
                    f"{len(lost)} line(s){earlier}, found nowhere the call leaves behind — "
                    f"line {shown}{more}. A run may lose at most {cap} of its {base} lines "
                    f"(compile.max_loss_fraction {cfg.max_loss_fraction:g}, at least "
                    f"compile.loss_floor_lines {cfg.loss_floor_lines}). Keep the lines, or move "
                    "them to another file (e.g. under archive/pruned/) in the same call."
                )
            tally[path] = (base, total)
        return tally

    def _current(self, plan: Plan, path: str) -> bytes | None:
        if path in plan.after:
            return plan.after[path]
        if path not in plan.before:
            if os.path.isdir(os.path.join(self.root, path)):
                raise WriteError(f"{path} is a folder, not a file; name a file inside it.")
            plan.before[path] = self.read_bytes(path)
        return plan.before[path]

    def _write_setting(self, actor: str) -> str:
        """memory.write for every model; mcp.write narrows it further for the MCP server."""
        setting: str = self.ws.settings.memory.write
        if actor == "mcp" and setting != "off":
            mcp = self.ws.settings.mcp.write
            setting = {"off": "off", "ask": "review"}.get(mcp, setting)
        return setting

    def _check_policy(self, plan: Plan, ch: Change, actor: str) -> None:
        if actor == "mcp" and policy.is_daily_log(ch.path, self.ws.daily_dir):
            today = self.ws.daily_log(self.ws.today(self.clock()))
            if ch.path != today:
                raise PolicyError(
                    f"mcp may append only to today's daily log ({today}); "
                    f"{ch.path} is another day's."
                )
        decision = policy.decide(
            actor,
            ch.mode,
            ch.path,
            daily=self.ws.daily_dir,
            write_setting=self._write_setting(actor),
            to=ch.to,
        )
        if decision.verdict is policy.Verdict.DENY:
            raise PolicyError(decision.reason)
        if decision.verdict is policy.Verdict.ASK:
            plan.ask.append(decision.reason)

    def _apply_to_view(self, plan: Plan, ch: Change) -> None:
        cur = self._current(plan, ch.path)
        if ch.expected_sha256 is not None:
            disk = plan.before.get(ch.path)
            if disk is None or sha256_hex(disk) != ch.expected_sha256:
                raise StaleWriteError(
                    f"{ch.path} changed since it was read (expected_sha256 does not match); "
                    "read it again and redo the change. Nothing was written."
                )
        if ch.mode != "create" and ch.mode != "append" and cur is None:
            raise WriteError(f"{ch.mode}: {ch.path} does not exist; use create for a new file.")
        match ch.mode:
            case "create":
                if cur is not None:
                    raise WriteError(
                        f"create: {ch.path} already exists; read it, then use edit or append."
                    )
                plan.after[ch.path] = ch.content
            case "append":
                base = cur or b""
                sep = b"\n" if base and not base.endswith(b"\n") else b""
                plan.after[ch.path] = base + sep + (ch.content or b"")
            case "edit":
                assert cur is not None and ch.old is not None and ch.new is not None
                count = cur.count(ch.old) if ch.old else 0
                if count == 0:
                    raise WriteError(
                        f"edit: the old snippet does not occur in {ch.path} (0 times); "
                        "read the file and copy the snippet exactly."
                    )
                if count > 1:
                    raise WriteError(
                        f"edit: the old snippet occurs {count} times in {ch.path}; it must "
                        "occur exactly once. Quote more surrounding text so it is unique."
                    )
                plan.after[ch.path] = cur.replace(ch.old, ch.new, 1)
            case "overwrite":
                plan.after[ch.path] = ch.content
            case "delete":
                # the trash gets what the file held before this call, and what the call made
                # of it first when that differs: neither is left only in git's history
                original = None if ch.path in plan.trashed else plan.before.get(ch.path)
                plan.trashed.add(ch.path)
                for data in dict.fromkeys(d for d in (original, cur) if d is not None):
                    dest = self._trash_path(plan, ch.path)
                    plan.after[dest] = data
                    plan.moved.add(dest)
                plan.after[ch.path] = None
            case "move":
                assert ch.to is not None
                if self._current(plan, ch.to) is not None:
                    raise WriteError(f"move: {ch.to} already exists; choose another target.")
                plan.after[ch.to] = cur
                plan.after[ch.path] = None
                plan.moved.add(ch.to)

    def _trash_path(self, plan: Plan, path: str) -> str:
        day = self.ws.today(self.clock()).isoformat()
        base = f"{TRASH_DIR}/{day}/{path}"
        candidate, n = base, 1
        while self._current(plan, candidate) is not None:
            n += 1
            p = PurePosixPath(base)
            candidate = str(p.with_name(f"{p.stem}~{n}{p.suffix}"))
        return candidate

    def _check_working_memory(self, plan: Plan) -> None:
        """MEMORY.md is loaded every main session: a model may not push it over its caps."""
        data = plan.after.get(WORKING_MEMORY)
        if data is None or WORKING_MEMORY not in plan.touched:
            return
        mem = self.ws.settings.memory
        lines, chars = _size(data)
        was_lines, was_chars = _size(plan.before.get(WORKING_MEMORY) or b"")
        # each cap on its own: an edit may shrink the characters and still add hundreds of lines
        if (lines > mem.working_lines and lines > was_lines) or (
            chars > mem.working_chars and chars > was_chars
        ):
            raise LimitError(
                f"MEMORY.md would be {lines} lines / {chars:,} characters; its caps are "
                f"{mem.working_lines} lines and {mem.working_chars:,} characters "
                "(memory.working_lines, memory.working_chars). Put the detail in its own file "
                "(a contact, topic or note) and leave a one-line pointer in MEMORY.md instead."
            )

    def _check_limits(self, plan: Plan) -> None:
        cap = self.ws.settings.store.max_file_bytes
        for path, data in plan.after.items():
            if data is not None and len(data) > cap and path not in plan.moved:
                raise LimitError(
                    f"{path} would be {len(data):,} bytes; the limit is {cap:,} "
                    "(store.max_file_bytes). Split it into smaller files."
                )
        for i, ch in enumerate(plan.changes):
            for name in (ch.path, ch.to):
                if name is not None:
                    _refuse_secret(name, f"the path of changes[{i}]")
            found = find_secrets(ch.added_text().decode("utf-8", "replace"))
            if found:
                raise SecretError(
                    f"refused: line {found[0].line} of the content for {ch.path} looks like a "
                    f"credential ({found[0].kind}). Never write credentials to memory; remove it."
                )
        for path in plan.touched:  # what the file becomes: two harmless pieces can make a key
            new = plan.after[path]
            if new is not None and path not in plan.moved:
                line, kind = _new_secret(plan.before.get(path), new)
                if kind:
                    raise SecretError(
                        f"refused: line {line} of {path} as this change would leave it looks "
                        f"like a credential ({kind}). Never write credentials to memory."
                    )

    # ------------------------------------------------------------ writing

    def write_context(
        self,
        changes: object,
        *,
        actor: str,
        message: str,
        run_id: str | None = None,
        approved: bool = False,
        max_files: int | None = None,
    ) -> WriteResult:
        """Apply one call as one version, or queue it as a proposal when it is ask-first."""
        if not isinstance(message, str) or not message.strip():
            raise WriteError("message must say what the change is (a non-empty string).")
        if "\x00" in message or not _utf8(message):
            raise WriteError("message must be plain UTF-8 text (no NUL, no lone surrogates).")
        _refuse_secret(message, "the version message")
        call_id = new_id()
        with self._lock():
            busy = self.versioned and self.git.busy() is not None
            if not busy:  # mid-merge nothing is repaired or written; proposals still queue
                self.recover()
                if self.versioned and _head_locked(self.git.git_dir):
                    _clear_stale_ref_locks(self.root)  # a killed run's ref lock must not block
            plan = self.plan(changes, actor=actor, max_files=max_files, run_id=run_id)
            if plan.ask and not approved:
                pid = proposals.add(
                    self.ws,
                    plan.changes,
                    plan.before,
                    actor=actor,
                    message=message,
                    run_id=run_id,
                    reason=plan.ask[0],
                    now=self.clock(),
                )
                return WriteResult(files=tuple(_named(plan)), proposal=pid, call_id=call_id)
            if busy:
                self.git.refuse_if_busy()
            touched = plan.touched
            if not touched:
                return WriteResult(files=(), call_id=call_id)
            if not self.versioned:
                self._apply(plan, touched, call_id, None, None)
                self._journal_path.unlink(missing_ok=True)
                version, snapshot = None, None
            else:
                with self.git.index_locked():
                    version, snapshot = self._write_versioned(
                        plan, touched, actor, message, run_id, call_id
                    )
            self._loss_tally.update({(run_id, p): t for p, t in plan.loss.items()})
            result = WriteResult(
                files=tuple(touched),
                version=version,
                call_id=call_id,
                snapshot=snapshot,
                sha256=_hashes(plan, touched),
            )
        if version is not None:  # git's housekeeping, as `git commit` runs it
            self.git.maintain()
        return result

    def _write_versioned(
        self,
        plan: Plan,
        touched: list[str],
        actor: str,
        message: str,
        run_id: str | None,
        call_id: str,
    ) -> tuple[str, str | None]:
        """Snapshot, apply, commit, then the user's index, all under git's index lock; the
        version and the snapshot of the user's edits (if one was needed)."""
        base = self.git.head()
        snapshot = self._snapshot_dirty(plan, actor, base)
        head = snapshot or base
        settle = self._apply(plan, touched, call_id, head, base, settle_later=True)
        try:
            trailers = {TRAILER_ACTOR: actor, TRAILER_RUN: run_id or call_id, TRAILER_CALL: call_id}
            version = self.git.commit_paths(
                touched,
                actor=actor,
                message=message,
                trailers=trailers,
                parent=head,
                before_ref=settle,  # the renames are on disk before HEAD names the version
                fault=_fault_point,
            )
            settle()
        except BaseException:
            settle()
            self._restore(self._read_journal())
            if snapshot is not None:  # the user's snapshot did land: the index follows it
                with contextlib.suppress(Exception):  # never hide why the commit failed
                    self.git.sync_index(snapshot, touched)
            self._journal_path.unlink(missing_ok=True)
            raise
        _fault_point(INDEX_SYNC)
        self.git.sync_index(version, touched)  # a kill before this: recover() syncs it
        self._journal_path.unlink(missing_ok=True)
        return version, snapshot

    def _lock(self) -> FileLock:
        self.ws.state_dir.mkdir(exist_ok=True)
        return _TimedLock(self.ws.state_dir / "write.lock")

    @property
    def _journal_path(self) -> Path:
        return self.ws.state_dir / "journal.json"

    def _apply(
        self,
        plan: Plan,
        touched: list[str],
        call_id: str,
        head: str | None,
        base: str | None,
        *,
        settle_later: bool = False,
    ) -> Callable[[], None]:
        """Journal, then the files. The folders' fsyncs that make the renames durable run in
        the background with `settle_later` (the caller waits on the returned call before its
        commit), else before returning."""
        originals = {
            p: plan.before.get(p) if p in plan.before else self.read_bytes(p) for p in touched
        }
        journal = {
            "call_id": call_id,
            "head": head,  # the parent of the version (a snapshot, or HEAD as it was)
            "base": base,  # HEAD before the call
            "originals": {
                p: None if b is None else base64.b64encode(b).decode() for p, b in originals.items()
            },
            # what the call leaves on disk: a file that holds neither this nor its original
            # after a crash was edited since, and is kept
            "after": {p: _sha_or_none(plan.after[p]) for p in touched},
        }
        # The journal's and every new file's bytes go to synced temp files at once (the disk
        # commits concurrent fsyncs together; a call of many files syncs them all with one
        # syncfs once they are written); the journal is renamed into place and its
        # folder synced before any file is renamed. The folders new files need are made first
        # (an archive pass fills dozens of new month folders); a file whose folder cannot be
        # made is written in order, as _put does, and fails there.
        ready, made = _make_folders(
            {(self.root / p).parent for p in touched if plan.after[p] is not None}
        )
        early = [
            p for p in touched if plan.after[p] is not None and (self.root / p).parent in ready
        ]
        modes = {p: self._mode_for(p) for p in early}
        entry = json.dumps(journal).encode()
        # Many files: written to the page cache, then made durable at once (one syncfs), still
        # all before the journal is in place and any file is renamed (see atomic.py)
        batch = FilesystemSync.open(ready) if len(early) >= SYNC_ONCE_FROM else None
        try:
            temp = unsynced_temp if batch is not None else synced_temp
            jobs: list[Callable[[], object]] = [
                partial(synced_temp, self._journal_path, entry, None)
            ]
            jobs += [partial(temp, self.root / p, plan.after[p] or b"", modes[p]) for p in early]
            results = all_at_once(jobs, keep_going=True)
            written = [r for r in results if isinstance(r, str)]
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                _drop(written)
                raise failed[0]
            temps = {p: str(r) for p, r in zip(early, results[1:], strict=True)}
            try:
                if batch is not None:
                    _sync_batch(list(temps.values()), batch)
                    _fault_point(TEMPS_DURABLE)
                os.replace(str(results[0]), self._journal_path)
            except BaseException:
                _drop(written)
                raise
        finally:
            if batch is not None:
                batch.close()
        fsync_dir(self._journal_path.parent)
        try:
            if len(touched) < RENAME_LANES_FROM:
                for path in touched:
                    self._place(path, plan.after[path], temps)
            else:  # a rename waits on the file system's journal: many wait at once, but
                # every removal after every write, so a move's bytes are at their target
                # before they leave their source, as in the one-by-one order above
                for removing in (False, True):
                    group = [p for p in touched if (plan.after[p] is None) == removing]
                    jobs = [partial(self._place, p, plan.after[p], temps) for p in group]
                    all_at_once(jobs, stop_early=True)
        except BaseException:
            _drop(temps.values())
            self._restore(originals)
            self._journal_path.unlink(missing_ok=True)
            raise
        folders = {(self.root / p).parent for p in touched} | made
        settle = start(partial(all_at_once, [partial(fsync_dir, f) for f in folders]))
        if not settle_later:
            settle()
        return settle

    def _place(self, path: str, data: bytes | None, temps: dict[str, str]) -> None:
        """One file of a call into place: its synced temp file renamed over it, or written in
        order by _put (a delete, a file whose folder was missing). Threads may run it at once
        (each pops only its own temp, and a temp not yet renamed stays in `temps`)."""
        tmp = temps.get(path)
        if tmp is not None:
            os.replace(tmp, self.root / path)
            del temps[path]
        else:
            self._put(path, data)
        _fault_point(path)

    def _mode_for(self, path: str) -> int:
        """The mode a written file gets: its own (exec bit too), or an editor's for a new one."""
        try:
            return stat.S_IMODE(os.stat(os.path.join(self.root, path)).st_mode)
        except FileNotFoundError:
            return 0o666 & ~_umask()

    def _put(self, path: str, data: bytes | None) -> None:
        full = self.root / path
        if data is None:
            full.unlink(missing_ok=True)  # the bytes live on at the move/trash target written first
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(full, data, sync_dir=False, mode=self._mode_for(path))

    def _restore(self, originals: dict[str, bytes | None]) -> None:
        for path, data in originals.items():
            self._put(path, data)

    def _read_journal(self) -> dict[str, bytes | None]:
        data = json.loads(self._journal_path.read_bytes())
        return {p: None if b is None else base64.b64decode(b) for p, b in data["originals"].items()}

    def repair(self) -> tuple[bool, list[str]]:
        """Before a run reads anything: finish or undo a call a kill interrupted, and remove the
        temp files and stale git locks a kill left, so no run ever trusts half-written bytes."""
        with self._lock():
            stray = [p for p in _stray_temp_files(self.root)]
            for path in stray:
                (self.root / path).unlink(missing_ok=True)
            if self.versioned and self.git.busy() is not None:
                return False, stray  # the user's merge or rebase is theirs: touch nothing
            stray += _clear_stale_ref_locks(self.root)
            if self.versioned:
                lock = self.git.git_dir / "index.lock"
                if lock.exists() and clear_stale_index_lock(self.root, lock, _dead_owner(self)):
                    stray.append(".git/index.lock")
            undone = self.recover()
        return undone, stray

    def recover(self) -> bool:
        """Finish a call a crash interrupted: undo its files unless its version was committed,
        keep (and version as the user's) any file edited since the crash, and bring the user's
        index in line with HEAD for the call's files. True when something was undone."""
        if not self._journal_path.exists():
            return False
        try:
            data = json.loads(self._journal_path.read_bytes())
            originals = self._read_journal()
        except (OSError, ValueError, KeyError):
            self._journal_path.unlink(missing_ok=True)  # torn before any file was touched
            return False
        if self.versioned and self.git.busy() is not None:
            return False  # left for after the user's merge or rebase
        base = data.get("base", data.get("head"))
        committed = False
        if self.versioned and self.git.head() not in (None, data.get("head")):
            committed = self.git.committed_call(data["call_id"], data.get("head"))
        after: dict[str, str | None] = data.get("after", {})
        undone, edited = False, []
        for path, original in originals.items():
            disk = self.read_bytes(path)
            if path in after and _sha_or_none(disk) != after[path]:
                if disk != original:
                    edited.append(path)  # changed since the crash: never overwritten
            elif not committed and disk != original:
                self._put(path, original)
                undone = True
        _drop(str(t) for t in _call_temps(self.root, originals))  # files it had not renamed yet
        if self.versioned:
            with self.git.index_locked():
                head = self.git.head()
                if edited and head is not None:
                    head = self.git.commit_paths(
                        edited,
                        actor="user",
                        message="snapshot of edits made after an interrupted write",
                        trailers={TRAILER_ACTOR: "user"},
                        parent=head,
                    )
                if head is not None and head != base:  # HEAD moved: the index must follow
                    self.git.sync_index(head, list(originals))
        self._journal_path.unlink(missing_ok=True)
        return undone

    def _snapshot_dirty(self, plan: Plan, actor: str, head: str | None) -> str | None:
        """Commit the user's uncommitted edits to files this call replaces, so none is lost."""
        if head is None:
            return None
        touched = set(plan.touched)  # a property that compares every file: once, not per file
        existing = [p for p, b in plan.before.items() if b is not None and p in touched]
        head_ids = self.git.blob_ids(head, existing)
        dirty = [p for p in existing if head_ids.get(p) != _git_blob_id(plan.before[p] or b"")]
        if not dirty:
            return None
        guard_snapshot(
            {p: plan.before[p] or b"" for p in dirty}, self.ws.settings.store.max_snapshot_bytes
        )
        return self.git.commit_paths(
            dirty,
            actor="user",
            message=f"snapshot of uncommitted edits before a {actor} write",
            trailers={TRAILER_ACTOR: "user"},
            parent=head,
        )


_WORD = re.compile(r"\w+")


def _norm(line: str) -> str:
    return " ".join(line.split()).casefold()


# casefold maps no character to or from whitespace or a line break (checked over every code
# point), so a whole text folded once splits into the same lines as each line folded: `_norm`
# of each line, at a fraction of the calls (a compile pass splits thousands of files).


def _lines(data: bytes) -> list[str]:
    """The normalized (see `_norm`) lines of a text that are not blank."""
    folded = data.decode("utf-8", "replace").casefold().splitlines()
    return [line for x in folded if (line := " ".join(x.split()))]


def _numbered(data: bytes) -> list[tuple[int, str, str]]:
    """(line number, line, normalized line) of each line that is not blank."""
    text = data.decode("utf-8", "replace")
    raws, folded = text.splitlines(), text.casefold().splitlines()
    return [
        (n, raw, line)
        for n, (raw, x) in enumerate(zip(raws, folded, strict=True), 1)
        if (line := " ".join(x.split()))
    ]


class Leftover:
    """What a call leaves behind, built once per call (a compile pass may touch 1,000 files):
    every line it keeps, the text and words of the lines it adds. Words are drawn from one pool
    for the whole call, each used once, so junk or one reworded line cannot vouch for many."""

    def __init__(self, left: list[list[str]], added: list[list[str]]) -> None:
        """`left`: each file's normalized lines (see `_lines`), as `added` is."""
        self.kept = {x for lines in left for x in lines}
        lines = [x for group in added for x in group]
        self.added = "\n".join(lines)
        self.pool: dict[str, int] = {}
        for line in lines:
            for w in _WORD.findall(_norm(line)):
                self.pool[w] = self.pool.get(w, 0) + 1

    def keeps(self, line: str) -> bool:
        """Still there (verbatim, reworded, or merged into an added line)."""
        if line in self.kept:
            return True
        words = _WORD.findall(line)
        found = [w for w in words if self.pool.get(w, 0) > 0]
        if words and len(found) * 2 > len(words):
            for w in found:
                self.pool[w] -= 1
            return True
        return len(line) >= 12 and line in self.added


def lost_lines(
    old: bytes, left: list[bytes] | Leftover, added: list[list[str]] | None = None
) -> list[tuple[int, str]]:
    """The old file's lines (number, text) that a call makes disappear: found in no file the
    call leaves behind (moved targets and the archive included), and not reworded: most of
    their words do not reappear in the lines the call added."""
    rest = left if isinstance(left, Leftover) else Leftover([_lines(d) for d in left], added or [])
    lost = []
    for n, raw in enumerate(old.decode("utf-8", "replace").splitlines(), 1):
        line = _norm(raw)
        if line and not rest.keeps(line):
            lost.append((n, raw.strip()))
    return lost


def walk_entries(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(path, lstat) of every entry `walk(root, WRITABLE)` yields, unsorted: what a writer may
    see (`list_context_files`) are the regular files among them; symlinks and special files
    come too, for callers that must know of them (compile's file cache)."""
    for rel, entry in walk(root, WRITABLE):
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:  # gone since the folder was listed
            continue
        yield rel, st


_TEMP_NAME = re.compile(
    r"^\..+\.[a-z0-9_]{8}\.tmp$"  # atomic_write's mkstemp names
    r"|^index-[0-9a-f]{32}(\.lock)?$"  # the private git index of a killed commit
)


def _call_temps(root: Path, paths: Iterable[str]) -> list[Path]:
    """The synced temp files a killed call left next to its own files (see `_apply`)."""
    by_folder: dict[Path, set[str]] = {}
    for path in paths:
        full = root / path
        by_folder.setdefault(full.parent, set()).add(f".{full.name[:200]}.")
    found = []
    for folder, prefixes in by_folder.items():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".tmp") and name[:-12] in prefixes and _TEMP_NAME.match(name):
                found.append(folder / name)
    return found


def _stray_temp_files(root: Path) -> list[str]:
    return [
        rel
        for rel, entry in walk(root, NOT_GIT)
        if _TEMP_NAME.match(entry.name) and not entry.is_dir()
    ]


def _head_locked(git_dir: Path) -> bool:
    """The locks a commit's `update-ref HEAD` needs; two stats, cheap enough for every write."""
    head = git_dir / "HEAD"
    try:
        ref = head.read_text("utf-8").removeprefix("ref: ").strip()
    except OSError:
        return False
    return (git_dir / "HEAD.lock").exists() or (git_dir / f"{ref}.lock").exists()


def _clear_stale_ref_locks(root: Path, wait: float = 2.0) -> list[str]:
    """A kill during `git update-ref` leaves `HEAD.lock`/`refs/**.lock`, and git then refuses
    every commit. A ref update lasts milliseconds, so a lock still there after `wait` seconds
    (while we hold the store's write lock) is stale."""
    import time

    git_dir = root / ".git"
    if not git_dir.is_dir():
        return []
    locks = [p for p in (git_dir / "HEAD.lock", *git_dir.glob("refs/**/*.lock")) if p.is_file()]
    deadline = time.monotonic() + wait
    while locks and time.monotonic() < deadline:
        time.sleep(0.1)
        locks = [p for p in locks if p.is_file()]
    for lock in locks:
        lock.unlink(missing_ok=True)
    return [p.relative_to(root).as_posix() for p in locks]


def _dead_owner(store: Store) -> int | None:
    """The pid a killed crustacean left in the index lock's owner file, if any."""
    try:
        return int((store.ws.state_dir / LOCK_OWNER).read_text().strip())
    except (OSError, ValueError):
        return None


def _refuse_secret(text: str, what: str) -> None:
    found = find_secrets(text)
    if found:
        raise SecretError(
            f"refused: {what} looks like a credential ({found[0].kind}). Never write "
            "credentials to memory; remove it."
        )


def _new_secret(old: bytes | None, new: bytes) -> tuple[int, str | None]:
    """A credential the change creates in the file (line, kind), or (0, None).

    Only the changed span and SECRET_CONTEXT bytes around it are read, in the file before and
    after: one already there (the user's own) is not new, an edit splicing two pieces is. Every
    detector but the PEM block sees one line at a time, and the lines outside the changed ones
    are the same before and after, so without a PEM marker nearby the changed lines suffice."""
    old = old or b""
    start = common_prefix(old, new)
    tail = common_prefix(old[start:][::-1], new[start:][::-1]) if old else 0
    lo = new.rfind(b"\n", 0, max(start - SECRET_CONTEXT, 0)) + 1
    new_hi = _line_end(new, len(new) - tail + SECRET_CONTEXT)
    old_hi = _line_end(old, len(old) - tail + SECRET_CONTEXT)
    if b"-----BEGIN" not in new[lo:new_hi] and b"-----BEGIN" not in old[lo:old_hi]:
        # a tier line in a 3 KB note: that line is scanned, not the whole note twice
        lo = new.rfind(b"\n", 0, start) + 1
        new_hi = _line_end(new, len(new) - tail)
        old_hi = _line_end(old, len(old) - tail)
    before = Counter(f.kind for f in find_secrets(old[lo:old_hi].decode("utf-8", "replace")))
    for f in find_secrets(new[lo:new_hi].decode("utf-8", "replace")):
        if before[f.kind] > 0:
            before[f.kind] -= 1
            continue
        return new.count(b"\n", 0, lo) + f.line, f.kind
    return 0, None


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix: spans halved until they differ, compared at C speed (a byte
    at a time in Python costs a second over a compile's thousands of small files)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; the prefix ends at or before hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _line_end(data: bytes, at: int) -> int:
    end = data.find(b"\n", min(max(at, 0), len(data)))
    return len(data) if end < 0 else end


def _size(data: bytes) -> tuple[int, int]:
    """(lines, characters) of a text as the MEMORY.md caps count them."""
    text = data.decode("utf-8", "replace")
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1), len(text)


def _sha_or_none(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def _umask() -> int:
    """The process umask, read without changing it where /proc allows (threads may write)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _hashes(plan: Plan, touched: list[str]) -> dict[str, str | None]:
    """Each changed file's new sha256, so the next change to it needs no second read."""
    return {p: None if plan.after[p] is None else sha256_hex(plan.after[p] or b"") for p in touched}


def _named(plan: Plan) -> list[str]:
    names = [c.path for c in plan.changes] + [c.to for c in plan.changes if c.to]
    return list(dict.fromkeys(names))


def _git_blob_id(data: bytes) -> str:
    return blob_id(data, "0" * 40)


def _tier_of(full: Path, rel: str) -> str | None:
    if not rel.endswith(".md"):
        return None
    try:
        with full.open("rb") as fh:
            head = fh.read(2048)
    except OSError:
        return None
    if not head.startswith(b"---"):
        return None
    end = head.find(b"\n---", 3)
    m = _TIER_RE.search(head[: end if end > 0 else len(head)])
    return m.group(1).decode() if m else None


def _make_folders(folders: set[Path]) -> tuple[set[Path], set[Path]]:
    """Make each missing folder (with its parents): the folders that are there now, and the
    folders that gained an entry (a new subfolder), whose fsync makes that entry durable."""
    ready, made = set(), set()
    for folder in folders:
        missing = []
        up = folder
        while not up.is_dir():
            missing.append(up)
            if up.parent == up:
                break
            up = up.parent
        if missing:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError:  # a file where a folder should be: _put says so in order
                continue
            made |= {m.parent for m in missing}
        ready.add(folder)
    return ready, made


def _sync_batch(temps: list[str], batch: FilesystemSync) -> None:
    """The temp files of a call onto the disk: one syncfs per filesystem, or, when that fails
    (it cannot say which file's data was lost), an fsync of each file, raising its error."""
    if not batch.sync():
        all_at_once([partial(fsync_file, t) for t in temps])


def _drop(temps: Iterable[str]) -> None:
    for tmp in list(temps):
        Path(tmp).unlink(missing_ok=True)


class _TimedLock(FileLock):
    """The store's write lock: writers queue briefly, then fail with a clear error."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path), timeout=WRITE_LOCK_SECONDS)

    def acquire(self, *args: Any, **kwargs: Any) -> AcquireReturnProxy[Self]:
        try:
            return super().acquire(*args, **kwargs)
        except LockTimeout:
            raise LockedError(
                "another crustacean writer held the workspace for over a minute; try again."
            ) from None


_FAULT_HOOK: Callable[[str], None] | None = None


def _fault_point(path: str) -> None:
    """Tests set `_FAULT_HOOK` to fail between two files of one call."""
    if _FAULT_HOOK is not None:
        _FAULT_HOOK(path)
