"""Versions in git, through the git CLI: git writes every object, ref and index.

Each applied `write_context` call becomes exactly one commit: HEAD's tree plus the files the call
changed, nothing else. Under git's own `index.lock`, a copy of the user's index takes the call's
files (`update-index`) and replaces their index before HEAD moves, so their next `git commit`
keeps the write instead of undoing it; then one `git commit --only` of those files on a scratch
copy of it makes the version (git's compare-and-swap on the HEAD it read), so the user's staged
or unstaged edits to other files are never swept in. After a version, git's own auto
maintenance runs as `git commit` runs it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO

from crustacean.errors import LockedError, RepoBusyError, VersionError
from crustacean.tree import STATE_DIR

EMAIL = "crustacean@localhost"
TRAILER_ACTOR = "Crustacean-Actor"
TRAILER_RUN = "Crustacean-Run"
TRAILER_CALL = "Crustacean-Call"
# Two races with the user's own `git gc` beside a version, where git gives up and nothing was
# written, so the same command again succeeds: git makes an object's fan-out folder, then its
# temp file, and `prune-packed` may remove the empty folder in between ("unable to create
# temporary file"); `pack-refs --prune` may delete a loose ref while a reader holds an older
# packed-refs, so `git commit` reads a stale HEAD and its compare-and-swap fails ("cannot lock
# ref 'HEAD': is at X but expected Y"). A deliberate compare-and-swap fails the same way again.
RACED = (b"unable to create temporary file", b"but expected")
RACED_TRIES = 3
PACK_FROM = 128  # files in a commit from which git stores their blobs in one pack, not loose
MAINTENANCE = ("maintenance", "run", "--auto", "--quiet")  # what `git commit` runs after a commit
# The config a version reads: the upkeep after it (`git commit` signs by commit.gpgsign itself).
SETTINGS = r"^(maintenance\.auto|gc\.pruneexpire)$"
CONFIG = ("config", "-z", "--get-regexp", SETTINGS)  # the one `git config` that reads them
INDEX_LOCK_WAIT = 10.0  # seconds a write waits for another git command to release index.lock
USER_COMMIT_WAIT = 30.0  # seconds a write waits for the user's `git commit` with its editor open
LOCK_OWNER = "index.lock.owner"  # in the state folder: the pid of the crustacean holding it
# The version's one command: no hooks (the store's versions are not the user's commits), the
# message as given, the full id in its summary line, the maintenance run by the store after it.
COMMIT_ONLY = (
    *("-c", f"core.hooksPath={os.devnull}", "-c", "core.abbrev=no"),
    *("-c", "maintenance.auto=false", "--literal-pathspecs", "commit", "--only"),
    *("--allow-empty", "--cleanup=verbatim", "--no-status", "-F", "-"),
)
ARGV_PATHS = 32_000  # bytes of paths up to which they go as arguments, not through a file
SUMMARY = re.compile(rb"\[.*? ([0-9a-f]{40}(?:[0-9a-f]{24})?)\] ")  # "[main <id>] subject"
# The git states a write must not step into: what is in the git folder, and what it means.
IN_PROGRESS = (
    ("MERGE_HEAD", "a merge"),
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase (or `git am`)"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
    ("BISECT_LOG", "a bisect"),
)
log = logging.getLogger(__name__)


def git_available() -> bool:
    return shutil.which("git") is not None


@dataclass(frozen=True)
class Version:
    """One commit as history shows it."""

    id: str
    time: datetime
    actor: str
    message: str
    files: tuple[str, ...]
    run_id: str | None

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "time": self.time.isoformat()}


@dataclass(frozen=True)
class Settings:
    """What the repository's git config says about a version and the upkeep after it."""

    maintain: bool = True  # maintenance.auto: false, and `git commit` starts none
    prune_now: bool = False  # gc.pruneExpire=now: unsafe next to the next write (git's docs)


def blob_id(data: bytes, like: str) -> str:
    """The id git gives `data` as a blob, in the hash of the repository `like` comes from: how
    the store tells the user's bytes from HEAD's without a git process per file."""
    algo = hashlib.sha1 if len(like) == 40 else hashlib.sha256
    return algo(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _subcommand(args: Sequence[str]) -> str:
    """The git command `args` run, past any `-c key=value` before it (for messages)."""
    words = iter(args)
    for word in words:
        if word in ("-c", "-C"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return "git"


class Git:
    """A thin runner for the git CLI inside one workspace."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._git_dir: Path | None = None
        self._index_fd: int | None = None  # set while this object holds index.lock
        self.settings = Settings()  # as the last version read them

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        for _ in range(RACED_TRIES):
            proc = subprocess.run(
                ["git", *args],
                cwd=self.root,
                env=_env(env),
                input=input,
                capture_output=True,
                check=False,
            )
            if proc.returncode == 0 or not any(why in proc.stderr for why in RACED):
                break
        if check and proc.returncode != 0:
            if (damage := self.damage()) is not None:  # only on failure: no cost otherwise
                raise VersionError(damage)
            said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            # the cause: git's first error (a signer's, before "failed to write commit object")
            detail = [x for x in said if x.startswith("error:")][:1] or said[-1:]
            raise VersionError(
                f"git {_subcommand(args)} failed: {detail[-1] if detail else proc.returncode}. "
                "Run `git status` in the workspace to see why."
            )
        return proc

    def start(
        self, args: Sequence[str], *, stdout: int, stderr: int | IO[bytes]
    ) -> subprocess.Popen[bytes]:
        """A git command started in the background (no input), for the caller to wait on."""
        return subprocess.Popen(
            ["git", *args],
            cwd=self.root,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )

    def out(self, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
        return self.run(*args, env=env, input=input).stdout.decode("utf-8", "replace").strip()

    # ------------------------------------------------------------ state

    def is_repo(self) -> bool:
        """True for a usable repository, False for a folder with none; a repository git refuses
        (another owner, a broken `.git`) is an error, so writes never go unversioned silently."""
        has_git = (self.root / ".git").exists()
        if not git_available():
            if has_git:
                raise VersionError(
                    f"{self.root} is a git repository but git is not installed, so no version "
                    "can be made. Install git and run the command again; nothing was written."
                )
            return False
        proc = self.run("rev-parse", "--is-inside-work-tree", check=False)
        if proc.returncode == 0 and proc.stdout.strip() == b"true":
            return True
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        if any("dubious ownership" in line for line in detail):
            raise VersionError(
                f"git refuses the repository in {self.root}: it is owned by another user "
                "(git says 'dubious ownership'), so no version can be made and nothing was "
                f"written. If you trust it, run `git config --global --add safe.directory "
                f"{self.root}`."
            )
        if has_git:
            raise VersionError(
                f"git cannot use the repository in {self.root} "
                f"({detail[0] if detail else 'no reason given'}), so no version can be made and "
                "nothing was written. Run `git status` there to see why."
            )
        return False

    def damage(self) -> str | None:
        """What is broken when HEAD names a commit whose commit or tree object is missing (a
        `git gc --prune=now` next to a write, a disk fault), with the way out; None when HEAD
        and its tree exist or there is no version yet. One `git cat-file`: cheap enough for
        doctor, and run by a git command that failed."""
        if self.run("cat-file", "-e", "HEAD^{tree}", check=False).returncode == 0:
            return None
        head = self.run("rev-parse", "-q", "--verify", "HEAD", check=False)
        if head.returncode != 0:
            return None  # no version yet (an unborn branch), not damage
        sha = head.stdout.decode().strip()
        return (
            f"the workspace's git repository is damaged: HEAD names version {sha[:12]}, whose "
            "objects are missing (a `git gc --prune=now` next to a write?). The files on disk "
            "are intact; run `crustacean doctor --fix` to record them as a new version on the "
            "last intact one."
        )

    def last_intact(self) -> str | None:
        """The newest commit whose tree git can read whole: HEAD's first-parent chain, then
        the reflog's entries (read only), newest first."""
        chain = self.run("rev-list", "--first-parent", "HEAD", check=False).stdout.split()
        try:
            logged = (self.git_dir / "logs" / "HEAD").read_bytes().splitlines()
        except OSError:
            logged = []
        reflog = [line.split()[1] for line in reversed(logged) if len(line.split()) > 1]
        for sha in dict.fromkeys(c.decode() for c in [*chain, *reflog]):
            if set(sha) == {"0"}:
                continue
            check = self.run("ls-tree", "-r", "--full-tree", sha, check=False)
            if check.returncode == 0:
                return sha
        return None

    def record_disk(self, *, actor: str, message: str) -> tuple[str, str | None]:
        """Every file on disk git would track (its ignore rules, as `git add -A`) as one new
        version on the last intact commit, HEAD moved to it and the user's index read from
        it: how a damaged repository recovers losing nothing the disk holds. Returns the new
        commit and its parent (None: no intact commit, a new root)."""
        parent = self.last_intact()
        env = ident(actor)
        tmp = self._scratch()
        index = {**env, "GIT_INDEX_FILE": str(tmp)}
        try:
            self.run("read-tree", *([parent] if parent else ["--empty"]), env=index)
            self.run("add", "-A", env=index)
            tree = self.out("write-tree", env=index)
        finally:
            tmp.unlink(missing_ok=True)
        parents = ["-p", parent] if parent else []
        commit = self.out("commit-tree", tree, *parents, env=env, input=message.encode())
        self.run("update-ref", "-m", f"crustacean {actor}", "HEAD", commit, env=env)
        self.run("read-tree", commit)  # the user's index names only objects that exist
        return commit, parent

    @property
    def git_dir(self) -> Path:
        """The repository's git folder (`.git`, or where a `.git` file points)."""
        if self._git_dir is None:
            dot = self.root / ".git"
            self._git_dir = (
                dot if dot.is_dir() else Path(self.out("rev-parse", "--absolute-git-dir"))
            )
        return self._git_dir

    @property
    def common_dir(self) -> Path:
        """Where the refs live: the git folder, or for a linked worktree (`git worktree add`)
        the main repository's, which its `.git` file names through git."""
        if (self.root / ".git").is_dir():
            return self.git_dir
        return Path(self.out("rev-parse", "--path-format=absolute", "--git-common-dir"))

    def busy(self) -> str | None:
        """What is in progress that a write must not step into (a merge, a rebase...) or a
        detached HEAD; None when the repository is on a branch with nothing in progress."""
        for name, what in IN_PROGRESS:
            if (self.git_dir / name).exists():
                return what
        try:
            head = (self.git_dir / "HEAD").read_text("utf-8")
        except OSError:
            return None
        return None if head.startswith("ref: ") else "a detached HEAD"

    def refuse_if_busy(self) -> None:
        what = self.busy()
        if what == "a detached HEAD":
            raise RepoBusyError(
                "refused: HEAD is detached (no branch is checked out), so a version would be "
                "lost on the next checkout. Check out a branch (`git switch main`) and run it "
                "again; nothing was written."
            )
        if what is not None:
            raise RepoBusyError(
                f"refused: the workspace's git repository is in the middle of {what}, and a "
                "write now would be mixed into it. Finish or abort it (`git status` says how), "
                "then run it again; nothing was written."
            )

    def head(self) -> str | None:
        proc = self.run("rev-parse", "--verify", "-q", "HEAD", check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def resolve(self, rev: str) -> str:
        """A full commit id for `rev`, or a clear error."""
        if rev.startswith("-"):
            raise VersionError(f"unknown version {rev!r}; see `crustacean history` for ids.")
        proc = self.run("rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False)
        if proc.returncode != 0:
            raise VersionError(f"unknown version {rev!r}; see `crustacean history` for ids.")
        return proc.stdout.decode().strip()

    def head_blobs(self, paths: Sequence[str]) -> tuple[str | None, dict[str, str]]:
        """HEAD's commit id (None: no version yet) and the object id of each path in it
        (absent paths left out), from one `git cat-file --batch-check`: what a write needs
        before its journal, without a second git process. Should another tool move HEAD after
        this read (git's porcelain cannot: the store holds git's index lock), the version is
        built on the HEAD `git commit` finds, never over it."""
        if any("\n" in p for p in paths):  # the batch is line-based: ask git the longer way
            head = self.head()
            return head, self.blob_ids(head, paths) if head else {}
        asked = "".join(f"HEAD:{p}\n" for p in paths)
        out = self.run(
            "cat-file",
            "--batch-check=%(objectname) %(objecttype)",
            input=("HEAD\n" + asked).encode("utf-8", "surrogateescape"),
        ).stdout.split(b"\n")
        head, *ids = (line.split(b" ")[0].decode() for line in out[: len(paths) + 1])
        if out[0].endswith(b" missing"):  # an unborn branch: no version yet
            return None, {}
        if any(line.endswith(b" missing") for line in out[1 : len(paths) + 1]):
            # a file on disk git has no version of (rare), or HEAD's tree is unreadable: only
            # `ls-tree` tells them apart, failing on damage
            return head, self.blob_ids(head, paths)
        return head, dict(zip(paths, ids, strict=True))

    def blob_ids(self, rev: str, paths: Sequence[str]) -> dict[str, str]:
        """Blob id of each path at `rev` (paths absent there are left out)."""
        return {p: sha for p, (_, sha) in self.tree_entries(rev, list(paths)).items()}

    def tree_entries(self, rev: str, paths: list[str]) -> dict[str, tuple[bytes, str]]:
        """`(mode, id)` of each path in commit `rev`, as `git ls-tree` lists them."""
        if not paths:
            return {}
        out = self.run("ls-tree", "-z", "--full-tree", rev, "--", *paths).stdout
        entries: dict[str, tuple[bytes, str]] = {}
        for entry in out.split(b"\0"):
            if entry:
                meta, _, name = entry.partition(b"\t")
                mode, _, sha = meta.split()
                entries[name.decode("utf-8", "surrogateescape")] = (mode, sha.decode())
        return entries

    def file_at(self, rev: str, path: str) -> bytes | None:
        proc = self.run("cat-file", "blob", f"{rev}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def files_at(self, rev: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """Each path's bytes at commit `rev` (None: absent there), from one `git cat-file
        --batch`: a rollback of 600 files read them one process each, 2 s a page."""
        if not paths:
            return {}
        if any("\n" in p for p in paths):  # the batch is line-based: ask git the longer way
            return {p: self.file_at(rev, p) for p in paths}
        asked = "".join(f"{rev}:{p}\n" for p in paths).encode("utf-8", "surrogateescape")
        out = self.run("cat-file", "--batch", input=asked).stdout
        found: dict[str, bytes | None] = {}
        at = 0
        for path in paths:
            end = out.index(b"\n", at)
            header = out[at:end].split(b" ")
            at = end + 1
            if header[-1] == b"missing":
                found[path] = None
                continue
            size = int(header[2])  # "<id> <type> <size>", then the content and a newline
            found[path] = out[at : at + size] if header[1] == b"blob" else None  # a folder: none
            at += size + 1
        return found

    def changed_between(self, old: str, new: str) -> list[str]:
        out = self.run("diff", "--name-only", "-z", "--no-renames", old, new, "--").stdout
        return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]

    # ------------------------------------------------------------ writing

    def init(self) -> None:
        self.run("init", "-q")

    def commit_paths(
        self,
        paths: Iterable[str],
        *,
        actor: str,
        message: str,
        trailers: dict[str, str],
        now: datetime | None = None,
        staged: bytes | None = None,
    ) -> str:
        """Commit the working-tree state of `paths` on top of HEAD; return the new commit id.

        One `git commit --only` makes the version: HEAD's tree with just `paths` changed (the
        user's other staged or unstaged work never swept in), the commit, and HEAD moved with
        git's own compare-and-swap on the HEAD it read, so a commit another tool made meanwhile
        is built on, never overwritten or reverted. It runs on a scratch copy of `staged` (an
        index with every path staged: the user's index with the call, `staged_index`; else a
        new index of just `paths`), with hooks off and git's auto maintenance left to the caller
        (`start_maintenance`).
        """
        listed = sorted(set(paths))
        return self._commit_only(listed, staged, actor, ident(actor, now), message, trailers)

    def _commit_only(
        self,
        paths: list[str],
        staged: bytes | None,
        actor: str,
        env: dict[str, str],
        message: str,
        trailers: dict[str, str],
    ) -> str:
        """`git commit --only` of `paths` on a scratch copy of the index `staged`: what
        `commit_paths` runs. The message goes in verbatim on stdin, the paths as arguments (or
        through a file when many); the new id is read from git's summary (`core.abbrev=no`)."""
        scratch = self._scratch()
        listed = _nul(paths)
        pathspec = self._scratch() if len(listed) > ARGV_PATHS else None
        body = message.strip() + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
        try:
            if staged is None:  # a new index of just `paths`: no flag of the user's on them
                self._stage({"GIT_INDEX_FILE": str(scratch)}, paths)
            else:
                scratch.write_bytes(staged)
            if pathspec is not None:
                pathspec.write_bytes(listed)
            said = self.run(
                *COMMIT_ONLY,
                *([f"--pathspec-from-file={pathspec}", "--pathspec-file-nul"] if pathspec else []),
                *(["--", *paths] if pathspec is None else []),
                env={
                    **env,
                    "GIT_INDEX_FILE": str(scratch),
                    "GIT_REFLOG_ACTION": f"crustacean {actor}",
                },
                input=body.encode(),
            ).stdout
        finally:
            scratch.unlink(missing_ok=True)
            if pathspec is not None:
                pathspec.unlink(missing_ok=True)
            scratch.with_name(scratch.name + ".lock").unlink(missing_ok=True)
        found = SUMMARY.match(said)
        return found.group(1).decode() if found else self.out("rev-parse", "HEAD")

    def staged_index(
        self, paths: Iterable[str], tracked: Iterable[str] = (), *, place: bool = False
    ) -> tuple[bytes | None, bytes]:
        """The user's index as it is (None: there is none) and a copy of it with `paths` staged
        from the working tree: the index the user's next `git commit` should start from once a
        version holds `paths`, and the one that version is made from. Only the entries of
        `paths` change; their staged work on other files stays. The files of `paths` in HEAD
        (`tracked`) that are still on disk go through `git add --renormalize --sparse`, which
        stages them even where the user marked them assume-unchanged or skip-worktree (plain
        `update-index` keeps the old entry there, or drops it); new and deleted files through
        `update-index --add --remove`. No index yet: HEAD's entries first (from empty, every
        other file would look deleted). With `place` the staged copy is renamed over the
        user's index while git's lock stays held (the lock's holder may replace the index:
        git's own protocol), so no other git stages or commits before HEAD names the version;
        callers hold index_locked()."""
        index = self.git_dir / "index"
        tmp = self._scratch()
        env = {"GIT_INDEX_FILE": str(tmp)}
        before = None
        try:
            try:
                before = index.read_bytes()
                tmp.write_bytes(before)
            except FileNotFoundError:
                if (head := self.head()) is not None:
                    self.run("read-tree", head, env=env)
            listed, known = sorted(set(paths)), set(tracked)
            kept = [p for p in listed if p in known and os.path.lexists(self.root / p)]
            if kept:
                self._renormalize(env, kept)
            if rest := [p for p in listed if p not in set(kept)]:
                self._stage(env, rest)
            staged = tmp.read_bytes()
            if place:  # no fsync, as git does for its index: HEAD rebuilds it
                os.replace(tmp, index)
            return before, staged
        finally:
            tmp.unlink(missing_ok=True)

    def _scratch(self) -> Path:
        """A new name for a scratch file in the state folder (a killed write's are swept)."""
        folder = self.root / STATE_DIR
        folder.mkdir(exist_ok=True)
        return folder / f"index-{uuid.uuid4().hex}"

    def _renormalize(self, env: dict[str, str], paths: list[str]) -> None:
        """`git add --renormalize --sparse -f` of tracked files: git hashes each one again as
        `git add` would, whatever its stat data or flags say."""
        add = ("--literal-pathspecs", "add", "--renormalize", "--sparse", "-f")
        self._hash(env, paths, *add, "--pathspec-from-file=-", "--pathspec-file-nul")

    def _stage(self, env: dict[str, str], paths: list[str]) -> None:
        """`git update-index --add --remove`: git hashes each file as `git add` would (filters,
        modes, links)."""
        added = self._hash(env, paths, "update-index", "--add", "--remove", "-z", "--stdin")
        if b"Ignoring path" in added.stderr:  # git skips some names with exit code 0
            detail = added.stderr.decode("utf-8", "replace").strip().splitlines()[0]
            raise VersionError(f"git cannot version this change ({detail}); rename the file.")

    def _hash(
        self, env: dict[str, str], paths: list[str], *args: str
    ) -> subprocess.CompletedProcess[bytes]:
        """A git command that stages `paths` (given on stdin, NUL-separated). From PACK_FROM
        files a bigFileThreshold of one byte makes git stream every blob it stores unchanged
        into one pack, not a loose object each (one file, a folder entry and a rename apiece,
        then gc's work)."""
        many = ["-c", "core.bigFileThreshold=1"] if len(paths) >= PACK_FROM else []
        return self.run(*many, *args, env=env, input=_nul(paths))

    def read_settings(self) -> Settings:
        """The config a version needs, in one `git config` (it may change between versions);
        a flag that is set is read back typed by git, so git's own boolean rules apply."""
        proc = self.run(*CONFIG, check=False)
        return self._settings(proc.returncode, proc.stdout)

    def start_settings(self) -> Callable[[], Settings]:
        """`read_settings`, started now: a version starts it before its files' fsyncs, so git
        reads its config while the disk works, and takes the answer for the maintenance after
        it (the returned call waits for it and keeps the answer: call it on failure too). A
        config git cannot read fails `git commit` before this matters; read after the version,
        it turns the maintenance off, with a log line, rather than fail a version that landed."""
        reading = self.start(CONFIG, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        answer: list[Settings] = []

        def done() -> Settings:
            if not answer:
                said, _ = reading.communicate()
                try:
                    answer.append(self._settings(reading.returncode, said))
                except VersionError as why:
                    log.warning("git's housekeeping after a version is off: %s", why)
                    answer.append(Settings(maintain=False))
            return answer[0]

        return done

    def _settings(self, code: int, said: bytes) -> Settings:
        """`read_settings` from what its `git config` returned and said."""
        if code > 1:  # 1: none set; more: git cannot read its config, and says why
            self.run("config", "--list")
        found: dict[str, str] = {}
        for item in said.split(b"\0"):
            if item:
                key, _, value = item.decode("utf-8", "replace").partition("\n")
                found[key] = value

        def flag(key: str, default: bool) -> bool:
            return default if key not in found else self.out("config", "--bool", key) == "true"

        return Settings(
            maintain=flag("maintenance.auto", True),
            prune_now=found.get("gc.pruneexpire", "").strip().lower() == "now",
        )

    def maintain(self) -> str:
        """After a version, `git maintenance run --auto --quiet`, as `git commit` runs it: git
        decides whether anything is due, takes its own lock, and detaches a gc by its
        `gc.autoDetach` (on unless the user turned it off), so the next write never waits on
        it. Nothing runs when the config turns it off, while the user's merge or rebase is in
        progress, or with `gc.pruneExpire=now` (a prune then may take the next version's new
        objects). Never raises: the version is safe already. Returns what happened, for the
        log and the tests."""
        return self.start_maintenance()()

    def start_maintenance(self) -> Callable[[], str]:
        """`maintain`, started now: the store starts it once HEAD names the version, so it runs
        beside the user's index update, and waits on the returned call once its write lock
        is released."""
        if not self.settings.maintain or self.settings.prune_now or self.busy() is not None:
            return lambda: ""
        try:  # stderr to a file, not a pipe: a detached gc that keeps it open never holds us
            err = tempfile.TemporaryFile()  # noqa: SIM115  # closed by _maintained, later
            try:
                proc = self.start(MAINTENANCE, stdout=subprocess.DEVNULL, stderr=err)
            except BaseException:
                err.close()
                raise
        except OSError as why:
            log.warning("git's housekeeping after a version could not start (%s); kept", why)
            return lambda: ""
        return partial(self._maintained, proc, err)

    def _maintained(self, proc: subprocess.Popen[bytes], err: IO[bytes]) -> str:
        """Wait for the maintenance `start_maintenance` started; what happened."""
        with err:
            code = proc.wait()
            err.seek(0)
            said = err.read().decode("utf-8", "replace").strip().splitlines()
        if code == 0:
            return "ran"
        why_lines = [x for x in said if x.startswith(("error:", "fatal:"))] or said[-1:]
        detail = why_lines[0] if why_lines else f"exit code {code}"
        log.warning(
            "git's housekeeping after a version failed (%s); the version is kept. Run "
            "`git maintenance run --auto` in %s to see why.",
            detail,
            self.root,
        )
        return f"failed: {detail}"

    # ------------------------------------------------------------ the user's index

    @contextmanager
    def index_locked(self, wait: float | None = None) -> Iterator[None]:
        """Hold git's own `index.lock` (git's protocol: whoever creates it may replace the
        index). Waits for another git command to finish, clears a lock whose owner is gone,
        and fails naming the lock when a live one stays. Re-entrant on this object."""
        if self._index_fd is not None:
            yield
            return
        lock = self.git_dir / "index.lock"
        owner = self.root / STATE_DIR / LOCK_OWNER
        owner.parent.mkdir(exist_ok=True)
        previous = _owner_pid(owner)  # a crustacean killed while holding the lock names itself
        owner.write_text(str(os.getpid()))
        limit = INDEX_LOCK_WAIT if wait is None else wait
        deadline = time.monotonic() + limit
        next_check = 0.0
        while self._index_fd is None:
            try:
                self._index_fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            except FileExistsError:
                if time.monotonic() >= next_check:  # a /proc walk: at most once a second
                    next_check = time.monotonic() + 1.0
                    if clear_stale_index_lock(self.root, lock, previous):
                        continue
                if time.monotonic() >= deadline:
                    owner.unlink(missing_ok=True)
                    raise LockedError(
                        f"git's index lock {lock} is held by another git command (an editor's "
                        f"git plugin, a running `git status`?); waited {limit:g} s. Try again "
                        "when it finishes; if no git command is running, delete that file. "
                        "Nothing was written."
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fd, self._index_fd = self._index_fd, None
            if fd is not None and fd >= 0:  # not committed by sync_index: give the lock back
                os.close(fd)
                lock.unlink(missing_ok=True)
            owner.unlink(missing_ok=True)

    def sync_index(self, commit: str, paths: Iterable[str]) -> bytes | None:
        """Make the user's index hold `commit`'s version of `paths` (every other entry, their
        staged work included, stays as it was), then commit git's lock over the index: how a
        repair or a failed version leaves the index agreeing with HEAD. Returns the index as it
        was (None: none)."""
        if self._index_fd is None or self._index_fd < 0:
            raise RuntimeError("sync_index needs index_locked() held")
        index = self.git_dir / "index"
        tmp = self._scratch()
        env = {"GIT_INDEX_FILE": str(tmp)}
        before = None
        try:
            if index.is_file():
                before = index.read_bytes()
                tmp.write_bytes(before)
            else:  # no index yet: start from the commit, not from empty (all would be "deleted")
                self.run("read-tree", commit, env=env)
            listed = _nul(set(paths))
            self.run(
                "--literal-pathspecs",
                "reset",
                "-q",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
                commit,
                env=env,
                input=listed,
            )
            data = tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        self.put_index(data)
        return before

    def put_index(self, data: bytes | None) -> None:
        """Write the user's new index into git's lock and rename it over the index (git's own
        protocol), which also releases the lock (None: no index). Callers hold index_locked()."""
        if self._index_fd is None or self._index_fd < 0:
            raise RuntimeError("put_index needs index_locked() held")
        self._index_fd, fd = -1, self._index_fd  # closed here; the rename below releases it
        lock = self.git_dir / "index.lock"
        with os.fdopen(fd, "wb") as fh:  # no fsync, as git does for its index: HEAD rebuilds it
            fh.write(data or b"")
        if data is None:
            (self.git_dir / "index").unlink(missing_ok=True)
            lock.unlink()
        else:
            os.replace(lock, self.git_dir / "index")

    def committed_call(self, call_id: str, base: str | None) -> tuple[str, str] | None:
        """The author and subject of call `call_id`'s version if it landed after `base`
        (commits on top included), else None."""
        span = [f"{base}..HEAD"] if base else ["HEAD"]
        proc = self.run(
            "log",
            "--format=%an%x00%s",
            "-n1",
            "--fixed-strings",
            f"--grep={call_id}",
            *span,
            check=False,
        )
        author, sep, subject = proc.stdout.decode("utf-8", "replace").strip().partition("\0")
        return (author, subject) if proc.returncode == 0 and sep else None

    def commit_all(self, *, actor: str, message: str) -> str | None:
        """The baseline commit of a brand-new repository (init only)."""
        env = ident(actor)
        self.run("add", "-A", env=env)
        proc = self.run("commit", "-q", "--no-verify", "--allow-empty", "-m", message, env=env)
        return self.head() if proc.returncode == 0 else None

    # ------------------------------------------------------------ reading history

    def log(self, path: str | None, limit: int) -> list[Version]:
        sep, start = "\x1f", "\x1e"
        fmt = start + sep.join(
            ["%H", "%at", "%an", "%s", f"%(trailers:key={TRAILER_RUN},valueonly)"]
        )
        args = ["log", f"-n{limit}", f"--format={fmt}", "--name-only", "-z", "--no-renames"]
        proc = self.run(*args, *(["--", path] if path else []), check=False)
        if proc.returncode != 0:
            if (damage := self.damage()) is not None:
                raise VersionError(damage)
            return []  # an empty repository has no history yet
        versions = []
        for chunk in proc.stdout.decode("utf-8", "surrogateescape").split(start):
            head, _, names = chunk.partition("\0")
            fields = head.split(sep)
            if len(fields) < 5:
                continue
            sha, ts, author, subject, run = fields[:5]
            files = tuple(n.strip("\n") for n in names.split("\0") if n.strip("\n"))
            actor = (
                author.removeprefix("crustacean ") if author.startswith("crustacean ") else author
            )
            versions.append(
                Version(
                    id=sha,
                    time=datetime.fromtimestamp(int(ts)).astimezone(),
                    actor=actor,
                    message=subject,
                    files=files,
                    run_id=run.strip() or None,
                )
            )
        return versions

    def show(self, rev: str) -> str:
        return self.out("show", "--stat", "--patch", "--format=fuller", self.resolve(rev))


def ident(actor: str, now: datetime | None = None) -> dict[str, str]:
    """The author and committer a version by `actor` gets, set by the store itself, so a
    version needs no git identity of the host and no host name."""
    env = {
        "GIT_AUTHOR_NAME": f"crustacean {actor}",
        "GIT_AUTHOR_EMAIL": EMAIL,
        "GIT_COMMITTER_NAME": f"crustacean {actor}",
        "GIT_COMMITTER_EMAIL": EMAIL,
    }
    if now is not None:
        stamp = f"{int(now.timestamp())} +0000"
        env |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return env


def _nul(paths: Iterable[str]) -> bytes:
    """Paths as git reads them with `-z` or `--pathspec-file-nul`."""
    return b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths)


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every git command here runs in: no prompt, messages untranslated."""
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(extra or {})}


def users_commit(root: Path, git_dir: Path) -> int | None:
    """The pid of a `git commit` running in this workspace whose message is not written yet
    (its editor is open; git holds no lock meanwhile, and fails if HEAD moves under it), or
    None. Cheap unless one may be running: git writes COMMIT_EDITMSG before the editor
    opens and HEAD's reflog after the commit, so only a message newer than the reflog
    makes a /proc walk (the same time stamp is the store's own version: the file system's
    clock ticks coarser than one `git commit`)."""
    try:
        started = (git_dir / "COMMIT_EDITMSG").stat().st_mtime_ns
    except OSError:
        return None
    try:
        if (git_dir / "logs" / "HEAD").stat().st_mtime_ns >= started:
            return None
    except OSError:
        pass
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    real_root = os.path.realpath(root)
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            if not argv or os.path.basename(argv[0]) != b"git":
                continue
            if _subcommand([a.decode("utf-8", "replace") for a in argv[1:]]) != "commit":
                continue
            cwd = os.readlink(os.path.join(entry.path, "cwd"))
        except OSError:
            continue
        if cwd == real_root or cwd.startswith(real_root + os.sep):
            return int(entry.name)
    return None


def _owner_pid(owner: Path) -> int | None:
    try:
        return int(owner.read_text().strip())
    except (OSError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clear_stale_index_lock(
    root: Path, lock: Path, owner: int | None = None, *, unknown_is_stale: bool = False
) -> bool:
    """Remove `lock` when no live process owns it, with a log line; True when it is gone.
    `unknown_is_stale`: without /proc to tell, the lock is stale (a ref lock, waited on)."""
    if not lock.exists():
        return True
    if lock_owner_alive(root, lock, owner, unknown_is_stale=unknown_is_stale):
        return False
    lock.unlink(missing_ok=True)
    log.warning("removed a stale %s: no running process owns it (a killed git left it)", lock)
    return True


def lock_owner_alive(
    root: Path, lock: Path, owner: int | None, *, unknown_is_stale: bool = False
) -> bool:
    """git writes no pid into its locks, so look for an owner: the crustacean that last took
    it, any process with the lock open, or a git process working in this workspace (git runs
    from the top of the work tree). Without /proc nothing can be told, so only a lock a dead
    crustacean left counts as stale."""
    me = os.getpid()
    if owner is not None and owner != me and _pid_alive(owner):
        return True
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return not unknown_is_stale and (owner is None or owner == me)
    real_root = os.path.realpath(root)
    target = os.path.realpath(lock)
    for entry in os.scandir(proc):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            comm = Path(entry.path, "comm").read_text().strip()
            if comm.startswith("git"):
                cwd = os.readlink(os.path.join(entry.path, "cwd"))
                if cwd == real_root or cwd.startswith(real_root + os.sep):
                    return True
            for fd in os.scandir(os.path.join(entry.path, "fd")):
                if os.readlink(fd.path) == target:
                    return True
        except OSError:
            continue
    return False
