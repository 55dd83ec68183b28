"""Applying a planned call: the journal, the files, the version, and undoing a killed call.

The journal (the files' bytes before the call) is durable before any file is renamed into place;
a failure midway restores what the call had written, and a kill midway is undone by the next
call (`Applier.recover`). The version is committed last (`Applied.commit`); a commit that fails
puts every file back.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from filelock import FileLock
from filelock import Timeout as LockTimeout

from crustacean.errors import LockedError
from crustacean.store.atomic import (
    FilesystemSync,
    atomic_write,
    fsync_dir,
    fsync_file,
    synced_temp,
    unsynced_temp,
)
from crustacean.store.changes import sha256_hex
from crustacean.store.parallel import all_at_once, start
from crustacean.store.plan import Plan
from crustacean.store.scan import guard_snapshot
from crustacean.store.versions import (
    LOCK_OWNER,
    TRAILER_ACTOR,
    TRAILER_CALL,
    TRAILER_RUN,
    Git,
    Settings,
    blob_id,
    clear_stale_index_lock,
    lock_owner_alive,
    users_commit,
)
from crustacean.tree import is_temp
from crustacean.workspace import NOT_GIT, OWN_STATE, Skip, Workspace, walk

if TYPE_CHECKING:
    from filelock import AcquireReturnProxy

WRITE_LOCK_SECONDS = 60.0
INDEX_SYNC = ":index-sync"  # the fault point between the user's index and the version's commit
HEAD_MOVED = ":head-moved"  # the fault point between the version's commit and the journal's end
SNAPSHOT_MADE = ":snapshot-made"  # the fault point after the user's edits' snapshot version
RENAME_LANES_FROM = 4  # files in a call from which they are renamed on several threads
SYNC_ONCE_FROM = 32  # new files in a call from which their temp files are synced at once
TEMPS_DURABLE = ":temps-durable"  # the fault point between that sync and the journal's rename


class Applier:
    """Applies one store's planned calls and repairs what a killed call left."""

    def __init__(self, ws: Workspace, git: Git, read_bytes: Callable[[str], bytes | None]):
        self.ws = ws
        self.root = ws.root
        self.git = git
        self.read_bytes = read_bytes
        self._versioned: bool | None = None

    @property
    def versioned(self) -> bool:
        if self._versioned is None:
            self._versioned = self.git.is_repo() and self._is_top()
            if self._versioned:
                _exclude_temps(self.git)
        return self._versioned

    def _is_top(self) -> bool:
        top = self.git.out("rev-parse", "--show-toplevel")
        return Path(top).resolve() == self.root.resolve()

    # ------------------------------------------------------------ one call

    @contextlib.contextmanager
    def opened(self) -> Iterator[bool]:
        """The store's write lock, held for one call, after any killed call was undone and a
        stale ref lock cleared; True when the user's merge or rebase is under way (then
        nothing is repaired, and only a proposal may be queued)."""
        with self._lock():
            busy = self.versioned and self.git.busy() is not None
            if self.versioned and not busy:
                _wait_for_users_commit(self.git)
            if not busy:  # mid-merge nothing is repaired or written; proposals still queue
                self.recover()
                self.sweep_dead_temps()
                if self.versioned and _head_locked(self.git):
                    _clear_stale_ref_locks(self.git)  # a killed run's ref lock must not block
            yield busy

    def apply(self, plan: Plan, touched: list[str], call_id: str, actor: str) -> Applied:
        """The call's files in place under its journal, after a snapshot of the user's own
        edits to them when versioned; `Applied.commit` then makes the version. Git's index
        lock is held from the snapshot until the commit has brought the user's index along."""
        sha256 = {p: _sha_or_none(plan.after[p]) for p in touched}
        held = contextlib.ExitStack()
        if not self.versioned:
            self._apply(plan, touched, call_id, None, None, sha256)
            return Applied(self, plan, touched, call_id, sha256, None, None, lambda: None, held)
        held.enter_context(self.git.index_locked())
        with contextlib.ExitStack() as failing:
            failing.push(held)  # released here only when the call fails before its commit
            kept = set(touched)
            existing = [p for p, b in plan.before.items() if b is not None and p in kept]
            base, head_ids = self.git.head_blobs(existing)  # one git process for both
            snapshot = self._snapshot_dirty(plan, actor, base, existing, head_ids)
            if snapshot is not None:
                _fault_point(SNAPSHOT_MADE)
            head = snapshot or base
            settings = self.git.start_settings()  # git reads its config while the disk works
            failing.callback(settings)
            settle = self._apply(plan, touched, call_id, head, base, sha256, settle_later=True)
            failing.pop_all()
        applied = Applied(self, plan, touched, call_id, sha256, head, snapshot, settle, held)
        applied.tracked, applied.settings = tuple(head_ids), settings
        return applied

    def _lock(self) -> FileLock:
        self.ws.state_dir.mkdir(exist_ok=True)
        return _TimedLock(self.ws.state_dir / "write.lock")

    @property
    def journal_path(self) -> Path:
        return self.ws.state_dir / "journal.json"

    def _apply(
        self,
        plan: Plan,
        touched: list[str],
        call_id: str,
        head: str | None,
        base: str | None,
        sha256: dict[str, str | None],
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
            "after": sha256,
        }
        # The journal's and every new file's bytes go to synced temp files at once (the disk
        # commits concurrent fsyncs together; a call of many files syncs them all with one
        # syncfs once they are written); the journal is renamed into place and its folder
        # synced before any file is renamed (beside the files' fsyncs: a file's temp is not the
        # file, and a kill then leaves the journal to undo nothing and the temps to sweep).
        # The folders new files need are made first (an archive pass fills dozens of new month
        # folders); a file whose folder cannot be made is written in order, as _put does, and
        # fails there.
        ready, made = _make_folders(
            {(self.root / p).parent for p in touched if plan.after[p] is not None}
        )
        early = [
            p for p in touched if plan.after[p] is not None and (self.root / p).parent in ready
        ]
        modes = _modes(self.root, early)
        entry = json.dumps(journal).encode()
        # Many files: written to the page cache, then made durable at once (one syncfs), still
        # all before the journal is in place and any file is renamed (see atomic.py)
        batch = FilesystemSync.open(ready) if len(early) >= SYNC_ONCE_FROM else None
        try:
            temp = unsynced_temp if batch is not None else synced_temp
            jobs: list[Callable[[], object]] = [
                partial(synced_temp, self.journal_path, entry, None)
                if batch is not None
                else partial(self._place_journal, entry)
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
                    os.replace(str(results[0]), self.journal_path)
                    fsync_dir(self.journal_path.parent)
            except BaseException:
                _drop(written)
                raise
        finally:
            if batch is not None:
                batch.close()
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
            self.restore(originals)
            self.journal_path.unlink(missing_ok=True)
            raise
        folders = {(self.root / p).parent for p in touched} | made
        settle = start(partial(all_at_once, [partial(fsync_dir, f) for f in folders]))
        if not settle_later:
            settle()
        return settle

    def _place_journal(self, entry: bytes) -> str:
        """The journal durable in place (its bytes, its name); returns its path (removed with
        the temps when another file of the call cannot be written)."""
        os.replace(synced_temp(self.journal_path, entry, None), self.journal_path)
        fsync_dir(self.journal_path.parent)
        return str(self.journal_path)

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
        """One file's mode as `_modes` gives it, for a file written alone (`_put`)."""
        return _modes(self.root, [path])[path]

    def _put(self, path: str, data: bytes | None) -> None:
        full = self.root / path
        if data is None:
            full.unlink(missing_ok=True)  # the bytes live on at the move/trash target written first
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(full, data, sync_dir=False, mode=self._mode_for(path))

    def restore(self, originals: dict[str, bytes | None]) -> None:
        for path, data in originals.items():
            self._put(path, data)

    def read_journal(self) -> dict[str, bytes | None]:
        data = json.loads(self.journal_path.read_bytes())
        return {p: None if b is None else base64.b64decode(b) for p, b in data["originals"].items()}

    def sweep_dead_temps(self) -> list[str]:
        """Every write, under the store's lock: remove the temp files of killed calls, cheaply.
        Only a call holding this lock writes temp files, so any temp there now is a dead
        call's. A call's journal temp is written with its files' temps, before its journal
        (`_apply`): one listing of the state folder finds a kill before the journal (then one
        walk removes that call's temps; a kill after it is `recover`'s), and the copies of
        git's index `sync_index` stages on. Nothing found: no walk at all."""
        try:
            names = os.listdir(self.ws.state_dir)
        except OSError:
            return []
        journal = f".{self.journal_path.name}."
        dead = [n for n in names if is_temp(n) and n.startswith((journal, "index-"))]
        for name in dead:
            (self.ws.state_dir / name).unlink(missing_ok=True)
        if not any(n.startswith(journal) for n in dead):
            return [f"{self.ws.state_dir.name}/{n}" for n in dead]
        stray = _stray_temp_files(self.root, _CALL_TEMPS)
        for path in stray:
            (self.root / path).unlink(missing_ok=True)
        return stray + [f"{self.ws.state_dir.name}/{n}" for n in dead]

    def rebuild_damaged(self) -> tuple[str, str | None] | None:
        """`doctor --fix`: a repository whose HEAD lost its objects gets the files on disk as a
        new version on its last intact commit (`Git.record_disk`), under the store's lock;
        None when nothing is damaged."""
        with self._lock():
            if not self.versioned or self.git.damage() is None:
                return None
            return self.git.record_disk(
                actor="user", message="the files on disk, recorded after the repository lost HEAD"
            )

    def repair(self) -> tuple[bool, list[str]]:
        """Before a run reads anything: finish or undo a call a kill interrupted, and remove the
        temp files and stale git locks a kill left, so no run ever trusts half-written bytes."""
        with self._lock():
            stray = [p for p in _stray_temp_files(self.root)]
            for path in stray:
                (self.root / path).unlink(missing_ok=True)
            if self.versioned and self.git.busy() is not None:
                return False, stray  # the user's merge or rebase is theirs: touch nothing
            if self.versioned:
                stray += _clear_stale_ref_locks(self.git)
                lock = self.git.git_dir / "index.lock"
                if lock.exists() and clear_stale_index_lock(self.root, lock, _dead_owner(self)):
                    stray.append(_shown(self.git, lock))
            undone = self.recover()
        return undone, stray

    def leftovers(self) -> list[str]:
        """What a killed call left for the next call to repair, for doctor to name first: its
        journal, crustacean's own stale index lock, ref locks no process holds. Read only."""
        found = []
        if self.journal_path.exists():
            found.append(f"an interrupted write ({self.ws.state_dir.name}/journal.json)")
        if not self.versioned:
            return found
        lock = self.git.git_dir / "index.lock"
        owner = _dead_owner(self)
        if lock.exists() and owner is not None and not lock_owner_alive(self.root, lock, owner):
            found.append(f"crustacean's own stale {_shown(self.git, lock)} (pid {owner} is gone)")
        found += [
            f"a stale {_shown(self.git, p)} that no running process holds"
            for p in ref_locks(self.git)
            if not lock_owner_alive(self.root, p, None, unknown_is_stale=True)
        ]
        return found

    def recover(self) -> bool:
        """Finish a call a crash interrupted: undo its files unless its version was committed
        (or HEAD holds them: the user committed the index that had taken them), keep (and
        version as the user's) any file edited since the crash, version again what a later
        commit dropped from a committed call (the user deleted git's stale index lock and
        committed), and bring the user's index in line with HEAD for the call's files. True
        when something was undone."""
        if not self.journal_path.exists():
            return False
        try:
            data = json.loads(self.journal_path.read_bytes())
            originals = self.read_journal()
        except (OSError, ValueError, KeyError):
            self.journal_path.unlink(missing_ok=True)  # torn before any file was touched
            return False
        if self.versioned and self.git.busy() is not None:
            return False  # left for after the user's merge or rebase
        version, at_head = None, {}
        now = self.git.head() if self.versioned else None
        moved = now not in (None, data.get("head"))
        if moved:
            version = self.git.committed_call(data["call_id"], data.get("head"))
            at_head = self.git.blob_ids("HEAD", list(originals))
        after: dict[str, str | None] = data.get("after", {})
        undone, edited, dropped = False, [], []
        for path, original in originals.items():
            disk = self.read_bytes(path)
            held = moved and at_head.get(path) == (None if disk is None else _git_blob_id(disk))
            if path in after and _sha_or_none(disk) != after[path]:
                if disk != original:
                    edited.append(path)  # changed since the crash: never overwritten
            elif version is not None:
                if not held and disk != original:
                    dropped.append(path)  # committed, then dropped by a later commit
            elif disk != original and not held:
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
                    )
                if dropped and head is not None and version is not None:
                    head = self._restore_dropped(dropped, version, data["call_id"])
                if head is not None:  # the index as HEAD: a kill may leave it either side
                    self.git.sync_index(head, list(originals))
        self.journal_path.unlink(missing_ok=True)
        return undone

    def _restore_dropped(self, paths: list[str], version: tuple[str, str], call_id: str) -> str:
        """A committed call's files that a later commit took out of HEAD (their index had not
        followed the version yet), as a new version by the call's actor, with a log line."""
        author, subject = version
        actor = author.removeprefix("crustacean ")
        log.warning("a commit dropped %s of an interrupted write; versioned again", paths)
        return self.git.commit_paths(
            paths,
            actor=actor,
            message=f"restore what a later commit dropped: {subject}"[:200],
            trailers={TRAILER_ACTOR: actor, TRAILER_CALL: call_id},
        )

    def _snapshot_dirty(
        self,
        plan: Plan,
        actor: str,
        head: str | None,
        existing: list[str],
        head_ids: dict[str, str],
    ) -> str | None:
        """Commit the user's uncommitted edits to files this call replaces (`existing`, whose
        ids at `head` are `head_ids`), so none is lost."""
        if head is None:
            return None
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
        )


class Applied:
    """A call whose files are in place, waiting for its version."""

    def __init__(
        self,
        applier: Applier,
        plan: Plan,
        touched: list[str],
        call_id: str,
        sha256: dict[str, str | None],  # each touched file's new hash; None: gone
        head: str | None,
        snapshot: str | None,
        settle: Callable[[], None],
        held: contextlib.ExitStack,
    ) -> None:
        self.applier, self.git = applier, applier.git
        self.plan, self.touched, self.call_id, self.sha256 = plan, touched, call_id, sha256
        self.head, self.snapshot, self.settle, self.held = head, snapshot, settle, held
        self.tracked: tuple[str, ...] = ()  # the files of the call HEAD has
        self.settings: Callable[[], Settings] = Settings  # the config, once git has read it
        self.upkeep: Callable[[], str] = lambda: ""  # git's maintenance, once HEAD moved

    def commit(self, actor: str, message: str, run_id: str | None) -> str | None:
        """The version (None when the workspace is not versioned), then the user's index,
        and git's index lock released. A failure puts back every file the call had written."""
        with self.held:
            try:
                return self._commit(actor, message, run_id)
            finally:
                self.git.settings = self.settings()  # git's config read ends, failure or not

    def _commit(self, actor: str, message: str, run_id: str | None) -> str | None:
        if not self.applier.versioned:
            self.applier.journal_path.unlink(missing_ok=True)
            return None
        touched, call_id, settle = self.touched, self.call_id, self.settle
        index_was: list[bytes | None] = []  # the user's index before it took the version
        try:
            # The user's index holds the version's files and their renames are on disk before
            # HEAD names them: a kill never leaves HEAD ahead of the index, whose next
            # `git commit` (after git's advice to delete a stale lock) would drop the version.
            before, staged = self.git.staged_index(touched, self.tracked, place=True)
            index_was.append(before)
            settle()  # the folders' fsyncs ran while git staged
            _fault_point(INDEX_SYNC)
            trailers = {TRAILER_ACTOR: actor, TRAILER_RUN: run_id or call_id, TRAILER_CALL: call_id}
            version = self.git.commit_paths(
                touched, actor=actor, message=message, trailers=trailers, staged=staged
            )
        except BaseException:
            settle()
            self.applier.restore(self.applier.read_journal())
            with contextlib.suppress(Exception):  # never hide why the commit failed
                self._index_back(index_was, touched)
            self.applier.journal_path.unlink(missing_ok=True)
            raise
        _fault_point(HEAD_MOVED)
        self.git.settings = self.settings()
        self.upkeep = self.git.start_maintenance()  # once HEAD names the version, as git commit
        self.applier.journal_path.unlink(missing_ok=True)
        return version

    def _index_back(self, index_was: list[bytes | None], touched: list[str]) -> None:
        """After a failed version: the user's index as it was, or following the snapshot of
        their edits, which did land (git's lock is taken again if another git has it not)."""
        if not index_was and self.snapshot is None:
            return
        with self.git.index_locked():  # still held (re-entrant), or taken by another git
            if self.snapshot is not None:
                self.git.sync_index(self.snapshot, touched)
            else:
                self.git.put_index(index_was[0])


# The names of a call's temp files (atomic.py's `.<name>.<8 characters>.tmp`, see
# tree.TEMP_NAME) as a line of the repository's own exclude file: a kill leaves some until the
# next call removes them, and meanwhile `git status` and `git add -A` never see them.
TEMP_EXCLUDE = ".*.????????.tmp"


def _exclude_temps(git: Git) -> None:
    """`info/exclude` (the repository's own ignore file, never committed) names the temp files
    once; an exclude file that cannot be read or written is left as it is."""
    exclude = git.common_dir / "info" / "exclude"
    try:
        text = exclude.read_text("utf-8") if exclude.exists() else ""
        if TEMP_EXCLUDE in text.splitlines():
            return
        exclude.parent.mkdir(exist_ok=True)
        lead = "" if not text or text.endswith("\n") else "\n"
        with exclude.open("a", encoding="utf-8") as fh:
            fh.write(f"{lead}# crustacean: temp files a killed write leaves\n{TEMP_EXCLUDE}\n")
    except (OSError, UnicodeDecodeError) as e:
        log.warning("could not name crustacean's temp files in %s (%s)", exclude, e)


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
            if name.endswith(".tmp") and name[:-12] in prefixes and is_temp(name):
                found.append(folder / name)
    return found


# Where a call's own temp files go: its files' folders (the trash too), never git's or state.
_CALL_TEMPS = Skip(top=OWN_STATE, temps=True)


def _stray_temp_files(root: Path, skip: Skip = NOT_GIT) -> list[str]:
    return [rel for rel, entry in walk(root, skip) if is_temp(entry.name) and not entry.is_dir()]


def _wait_for_users_commit(git: Git) -> None:
    """A version moved HEAD under the user's `git commit` whose editor was open, and their
    commit failed ("cannot lock ref 'HEAD'") when they saved the message. So a write waits for
    it (the user is typing, not gone), and past USER_COMMIT_WAIT fails naming it instead."""
    import time

    from crustacean.store import versions

    pid = users_commit(git.root, git.git_dir)
    if pid is None:
        return
    log.warning("waiting for your `git commit` (pid %d): its editor is open", pid)
    deadline = time.monotonic() + versions.USER_COMMIT_WAIT
    while (pid := users_commit(git.root, git.git_dir)) is not None:
        if time.monotonic() >= deadline:
            raise LockedError(
                f"your `git commit` (pid {pid}) in {git.root} is waiting for its message in an "
                f"editor; a version now would make it fail. Save or close the editor, then "
                "try again; nothing was written."
            )
        time.sleep(0.1)


def _head_locked(git: Git) -> bool:
    """The locks a commit's `update-ref HEAD` needs (HEAD's in the worktree's git folder, the
    branch's where the refs live); two stats, cheap enough for every write."""
    try:
        ref = (git.git_dir / "HEAD").read_text("utf-8").removeprefix("ref: ").strip()
    except OSError:
        return False
    if (git.git_dir / "HEAD.lock").exists():
        return True
    return (git.git_dir / f"{ref}.lock").exists() or (git.common_dir / f"{ref}.lock").exists()


def ref_locks(git: Git) -> list[Path]:
    """The ref locks there are now: HEAD's (a linked worktree's own) and the branches'."""
    found = [git.git_dir / "HEAD.lock", *git.common_dir.glob("refs/**/*.lock")]
    return [p for p in dict.fromkeys(found) if p.is_file()]


def _clear_stale_ref_locks(git: Git, wait: float = 2.0) -> list[str]:
    """A kill during `git update-ref` leaves `HEAD.lock`/`refs/**.lock`, and git then refuses
    every commit. A ref update lasts milliseconds, so a lock still there after `wait` seconds
    (while we hold the store's write lock) that no running process owns is stale."""
    import time

    locks = ref_locks(git)
    deadline = time.monotonic() + wait
    while locks and time.monotonic() < deadline:
        time.sleep(0.1)
        locks = [p for p in locks if p.is_file()]
    gone = [p for p in locks if clear_stale_index_lock(git.root, p, unknown_is_stale=True)]
    return [_shown(git, p) for p in gone]


def _shown(git: Git, path: Path) -> str:
    """A path in git's folders as the user finds it: from the workspace, else as it is."""
    try:
        return path.relative_to(git.root).as_posix()
    except ValueError:
        return str(path)


def _dead_owner(store: Applier) -> int | None:
    """The pid a killed crustacean left in the index lock's owner file, if any."""
    try:
        return int((store.ws.state_dir / LOCK_OWNER).read_text().strip())
    except (OSError, ValueError):
        return None


def _sha_or_none(data: bytes | None) -> str | None:
    return None if data is None else sha256_hex(data)


def _modes(root: Path, paths: list[str]) -> dict[str, int]:
    """The mode each written file gets: its own (exec bit too), or an editor's for a new one
    (the umask read once for the call, not once per new file: an archive pass makes 1,000)."""
    modes: dict[str, int] = {}
    new: int | None = None
    for path in paths:
        try:
            modes[path] = stat.S_IMODE(os.stat(os.path.join(root, path)).st_mode)
        except FileNotFoundError:
            if new is None:
                new = 0o666 & ~_umask()
            modes[path] = new
    return modes


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


def _git_blob_id(data: bytes) -> str:
    return blob_id(data, "0" * 40)


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
log = logging.getLogger(__name__)


def _fault_point(path: str) -> None:
    """Tests set `_FAULT_HOOK` to fail between two files of one call."""
    if _FAULT_HOOK is not None:
        _FAULT_HOOK(path)
