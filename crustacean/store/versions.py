"""Versions in git, through the git CLI.

Each applied `write_context` call becomes exactly one commit: HEAD's tree plus the files the call
changed, nothing else, built with plumbing on a copy of the user's index or a private one (in a
plain repository the tree, commit and ref are written by gitwrite exactly as git writes them).
The user's staged or unstaged edits to other files are never swept in. The user's own index is
updated for the call's files under git's own `index.lock`, so their next `git commit` keeps the
write instead of undoing it.
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import stat
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from crustacean.errors import LockedError, RepoBusyError, VersionError
from crustacean.store import gitread, gitwrite
from crustacean.tree import STATE_DIR

EMAIL = "crustacean@localhost"
TRAILER_ACTOR = "Crustacean-Actor"
TRAILER_RUN = "Crustacean-Run"
TRAILER_CALL = "Crustacean-Call"
PACK_FROM = 128  # files in a commit from which their blobs go into one pack (over fast-import's
# default unpackLimit, 100, below which it writes loose objects anyway)
INDEX_LOCK_WAIT = 10.0  # seconds a write waits for another git command to release index.lock
LOCK_OWNER = "index.lock.owner"  # in the state folder: the pid of the crustacean holding it
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


def _unrecorded(err: OSError) -> VersionError:
    return VersionError(
        f"the version could not be recorded ({err.strerror or err}: {err.filename}), so the "
        "write was undone. Run `git status` in the workspace to see why."
    )


def _lone_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _no_fault(step: str) -> None:
    """No fault injected: the default of `commit_paths(fault=...)`."""


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


class LookUp(enum.Enum):
    """Sentinel: find HEAD yourself (an enum member, so `is` narrows it away for the checker)."""

    HEAD = "look up HEAD"


class Git:
    """A thin runner for the git CLI inside one workspace."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._git_dir: Path | None = None
        self._index_fd: int | None = None  # set while this object holds index.lock
        self._config: gitwrite.ConfigCache | None = None

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: bytes | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
        proc = subprocess.run(
            ["git", *args],
            cwd=self.root,
            env=full_env,
            input=input,
            capture_output=True,
            check=False,
        )
        if check and proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise VersionError(
                f"git {args[0]} failed: {detail[-1] if detail else proc.returncode}. "
                "Run `git status` in the workspace to see why."
            )
        return proc

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

    @property
    def git_dir(self) -> Path:
        """The repository's git folder (`.git`, or where a `.git` file points)."""
        if self._git_dir is None:
            dot = self.root / ".git"
            self._git_dir = (
                dot if dot.is_dir() else Path(self.out("rev-parse", "--absolute-git-dir"))
            )
        return self._git_dir

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
        git_dir = gitread.plain_git_dir(self.root)
        fast = gitread.read_head(git_dir) if git_dir is not None else None
        if fast is not None:  # the update-ref of a commit still checks HEAD did not move
            return fast
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

    def blob_ids(self, rev: str, paths: Sequence[str]) -> dict[str, str]:
        """Blob id of each path at `rev` (paths absent there are left out)."""
        return {p: sha for p, (_, sha) in self.tree_entries(rev, list(paths)).items()}

    def tree_entries(self, rev: str, paths: list[str]) -> dict[str, tuple[bytes, str]]:
        """`(mode, id)` of each path in commit `rev`, as `git ls-tree` lists them; read from
        the object files when they are loose (what the store just wrote is)."""
        if not paths:
            return {}
        git_dir = gitread.plain_git_dir(self.root)
        if git_dir is not None:
            fast = gitread.tree_entries(git_dir, rev, paths)
            if fast is not None:
                return fast
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
        parent: str | LookUp | None = LookUp.HEAD,
        reuse_index: Path | None = None,
        expect: Mapping[str, str | None] | None = None,
        before_ref: Callable[[], None] | None = None,
        fault: Callable[[str], None] | None = None,
    ) -> str:
        """Commit the working-tree state of `paths` on top of HEAD; return the new commit id.

        `parent` is HEAD when the caller already knows it (saves a git call); the ref update
        still checks HEAD did not move meanwhile. `reuse_index` is a private copy of the
        user's index and `expect` each path's new blob id (None: removed): the tree is built
        on that copy when it proves to be the parent's tree with exactly `expect` applied, and
        the copy then holds the version, ready to become the user's index (no `read-tree`, no
        second `update-index`). Otherwise the copy is deleted, and the tree is built from the
        parent's tree on a fresh private index as always. `before_ref` runs just before HEAD
        moves (the caller's files become durable meanwhile); `fault` is called at each step
        of the commit and the ref update (the crash tests kill the process there).

        In a plain repository the tree (see `_reused_tree`), the commit object and the ref
        update (HEAD.lock, the branch's lock, the reflogs) are written here exactly as git
        writes them (gitwrite); anything unusual, or a surprise under the locks, and git's
        `write-tree`/`commit-tree`/`update-ref` do it.
        """
        paths = sorted(set(paths))
        env = {
            "GIT_AUTHOR_NAME": f"crustacean {actor}",
            "GIT_AUTHOR_EMAIL": EMAIL,
            "GIT_COMMITTER_NAME": f"crustacean {actor}",
            "GIT_COMMITTER_EMAIL": EMAIL,
        }
        if now is not None:
            stamp = f"{int(now.timestamp())} +0000"
            env |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        head = self.head() if parent is LookUp.HEAD else parent
        tree = None
        if reuse_index is not None:
            tree = self._reused_tree(reuse_index, paths, head, expect or {})
        if tree is None:
            index = self.root / STATE_DIR / f"index-{uuid.uuid4().hex}"
            index.parent.mkdir(exist_ok=True)
            try:
                on = {"GIT_INDEX_FILE": str(index)}
                self.run("read-tree", *([head] if head else ["--empty"]), env=on)
                tree = self._write_tree(index, paths)
            finally:
                index.unlink(missing_ok=True)
        body = message.strip() + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
        step = fault or _no_fault
        reflog = f"crustacean {actor}"
        facts = self.facts()
        fast = self._fast_dir(facts, head, env, body, now)
        ident = gitwrite.env_ident(
            env, gitwrite.stamp(None if now is None else int(now.timestamp()))
        )
        if fast is not None and head is not None and not facts.sign:
            text = gitwrite.commit_bytes(tree, [head], ident, body.encode())
            try:
                commit = gitwrite.write_object(fast, b"commit", text, facts)
            except OSError as err:
                raise _unrecorded(err) from err
        else:
            parents = ["-p", head] if head else []
            sign = ["-S"] if facts.sign else []  # commit-tree ignores commit.gpgsign
            commit = self.out("commit-tree", tree, *parents, *sign, env=env, input=body.encode())
        step(gitwrite.COMMIT_WRITTEN)
        if before_ref is not None:
            before_ref()
        if fast is not None and head is not None:
            try:
                gitwrite.update_head(fast, commit, head, ident, reflog, facts, step)
                return commit
            except gitwrite.Fallback as why:
                log.debug("git moves HEAD itself: %s", why)
            except OSError as err:
                raise _unrecorded(err) from err
        ref_env = {k: v for k, v in env.items() if k.startswith("GIT_COMMITTER_")}
        self.run("update-ref", "-m", reflog, "HEAD", commit, head or "0" * 40, env=ref_env)
        return commit

    def facts(self) -> gitwrite.Facts:
        """The effective git config's say on writing versions, re-read when it changes."""
        if self._config is None:
            self._config = gitwrite.ConfigCache(self.root, self.git_dir)
        return self._config.facts(self.run)

    def _fast_dir(
        self,
        facts: gitwrite.Facts,
        head: str | None,
        env: Mapping[str, str],
        body: str,
        now: datetime | None,
    ) -> Path | None:
        """The git folder when this commit and its ref update can be written without git
        (see gitwrite); None when anything about them is unusual."""
        git_dir = gitread.plain_git_dir(self.root)
        if git_dir is None or head is None or len(head) != 40:
            return None
        why = gitwrite.unusual(git_dir, facts)
        if not why and not gitwrite.plain_ident(env["GIT_COMMITTER_NAME"], EMAIL):
            why = "an actor name git would rewrite"
        if not why and ("\0" in body or _lone_surrogate(body)):
            why = "a message that is not plain UTF-8"
        if not why and now is not None and now.timestamp() < 0:
            why = "a date before 1970"
        if why:
            log.debug("git writes this version itself: %s", why)
            return None
        return git_dir

    def _write_tree(self, index: Path, paths: list[str]) -> str:
        """Stage the working-tree state of `paths` into `index` and write its tree."""
        env = {"GIT_INDEX_FILE": str(index)}
        self._stage_all(env, paths)
        return self.out("write-tree", env=env)

    def _stage_all(self, env: dict[str, str], paths: list[str]) -> None:
        """Stage the working-tree state of `paths`: many as one pack, the rest one by one."""
        if len(paths) >= PACK_FROM:
            paths = self._stage_packed(env, paths)
        if paths:
            self._stage(env, paths)

    def _stage(self, env: dict[str, str], paths: list[str]) -> None:
        """`git update-index --add --remove`: git hashes each file and writes it loose."""
        added = self.run(
            "update-index",
            "--add",
            "--remove",
            "-z",
            "--stdin",
            env=env,
            input=b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths),
        )
        if b"Ignoring path" in added.stderr:  # git skips some names with exit code 0
            detail = added.stderr.decode("utf-8", "replace").strip().splitlines()[0]
            raise VersionError(f"git cannot version this change ({detail}); rename the file.")

    def _stage_packed(self, env: dict[str, str], paths: list[str]) -> list[str]:
        """Stage the plain files among many paths as one pack: `git fast-import` writes every
        blob into one file (a loose object is a file, a folder entry and a rename each), then
        one `update-index --index-info` names them. Only where git stores the bytes as they
        are: a regular, non-executable file whose id `git hash-object` (filters, attributes
        and line endings applied) agrees with. The paths left to `_stage` are returned."""
        if self.run("config", "--bool", "core.filemode", check=False).stdout.strip() == b"false":
            return paths  # git keeps an index entry's mode then: only update-index knows it
        plain: dict[str, bytes] = {}
        for p in paths:
            full = self.root / p
            try:
                st = full.lstat()
                if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o111:
                    plain[p] = full.read_bytes()
            except OSError:
                continue
        if len(plain) < PACK_FROM:
            return paths
        names = list(plain)
        listed = b"".join(n.encode("utf-8", "surrogateescape") + b"\n" for n in names)
        if any("\n" in n for n in names):
            return paths  # hash-object reads one path a line
        theirs = self.run("hash-object", "--stdin-paths", input=listed).stdout.split()
        ids = {n: gitread.blob_id(plain[n], "0" * 40) for n in names}
        same = [n for n, t in zip(names, theirs, strict=True) if t.decode() == ids[n]]
        stream = b"".join(b"blob\ndata %d\n%s\n" % (len(plain[n]), plain[n]) for n in same)
        self.run("fast-import", "--quiet", "--depth=0", "--done", input=stream + b"done\n")
        info = b"".join(
            b"100644 %s\t%s\0" % (ids[n].encode(), n.encode("utf-8", "surrogateescape"))
            for n in same
        )
        self.run("update-index", "-z", "--index-info", env=env, input=info)
        staged = set(same)
        return [p for p in paths if p not in staged]

    def _reused_tree(
        self, index: Path, paths: list[str], head: str | None, expect: Mapping[str, str | None]
    ) -> str | None:
        """The version's tree, staged on the user's index copy, when the copy then holds
        exactly `expect` for the call's paths: built here from `head`'s tree (gitwrite), or
        else written by git from the copy when that proves to be `head`'s tree with `expect`
        applied. Either way nothing the user staged, skipped or marked assume-unchanged
        changes what the version holds. None (and the copy deleted) when that is not shown."""
        git_dir = gitread.plain_git_dir(self.root)
        tree = None
        if head is not None and git_dir is not None and set(expect) == set(paths):
            try:
                self._stage_all({"GIT_INDEX_FILE": str(index)}, paths)
                tree = self._tree_here(git_dir, index, head, expect)
                if tree is None:
                    tree = self.out("write-tree", env={"GIT_INDEX_FILE": str(index)})
            except VersionError:
                tree = None  # e.g. an unmerged entry elsewhere in their index: build from HEAD
            if tree is not None and not gitread.tree_is(git_dir, head, tree, expect):
                tree = None
        if tree is None:
            index.unlink(missing_ok=True)
        return tree

    def _tree_here(
        self, git_dir: Path, index: Path, head: str, expect: Mapping[str, str | None]
    ) -> str | None:
        """`head`'s tree with the call's entries as `update-index` staged them in `index`,
        written here when they are exactly `expect`; None when git's write-tree must say."""
        facts = self.facts()
        if not facts.plain_index or len(head) != 40 or gitwrite.unusual(git_dir, facts):
            return None
        try:
            modes = gitwrite.staged(index.read_bytes(), expect)
            if modes is None:
                return None
            changes = {
                p: None if blob is None or modes[p] is None else (modes[p] or b"", blob)
                for p, blob in expect.items()
            }
            return gitwrite.tree_with(git_dir, head, changes, facts)
        except (gitread.NotHere, OSError) as why:
            log.debug("git writes the tree itself: %s", why)
            return None

    def signs_commits(self) -> bool:
        """`commit.gpgsign`, honoured as `git commit` would (plumbing ignores it on purpose)."""
        return self.facts().sign

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

    def index_copy(self) -> Path | None:
        """A private copy of the user's index for `commit_paths(reuse_index=...)`, or None
        when they have none. Needs index_locked() held, so no git command replaces the index
        meanwhile. A hard link where the filesystem allows: git never writes an index in place
        (it writes a lock file and renames it), so the user's index is never changed through it."""
        if self._index_fd is None or self._index_fd < 0:
            raise RuntimeError("index_copy needs index_locked() held")
        index = self.git_dir / "index"
        tmp = self.root / STATE_DIR / f"index-{uuid.uuid4().hex}"
        try:
            os.link(index, tmp)
        except FileNotFoundError:
            return None
        except OSError:  # no hard links here: a byte copy
            try:
                shutil.copyfile(index, tmp)
            except FileNotFoundError:
                return None
        return tmp

    def install_index(self, copy: Path) -> None:
        """Make `copy` (built by `commit_paths(reuse_index=copy)`) the user's index: renamed
        over it while git's lock is held, then the lock is given back."""
        if self._index_fd is None or self._index_fd < 0:
            raise RuntimeError("install_index needs index_locked() held")
        try:
            os.replace(copy, self.git_dir / "index")  # git wrote it, with git's own permissions
        except OSError:  # another filesystem than .git: its bytes go through git's lock file
            try:
                data = copy.read_bytes()
            finally:
                copy.unlink(missing_ok=True)
            self._replace_index(data)
            return
        copy.unlink(missing_ok=True)  # gone unless it was still a link to the index itself
        self._index_fd, fd = -1, self._index_fd
        os.close(fd)
        (self.git_dir / "index.lock").unlink(missing_ok=True)

    def sync_index(self, commit: str, paths: Iterable[str]) -> None:
        """Make the user's index hold `commit`'s version of `paths` (every other entry, their
        staged work included, stays as it was), then commit git's lock over the index."""
        if self._index_fd is None or self._index_fd < 0:
            raise RuntimeError("sync_index needs index_locked() held")
        paths = sorted(set(paths))
        index = self.git_dir / "index"
        tmp = self.root / STATE_DIR / f"index-{uuid.uuid4().hex}"
        env = {"GIT_INDEX_FILE": str(tmp)}
        try:
            if index.is_file():
                shutil.copyfile(index, tmp)
            else:  # no index yet: start from the commit, not from empty (all would be "deleted")
                self.run("read-tree", commit, env=env)
            have = self.tree_entries(commit, paths)
            info = b"".join(
                (b"%s %s" % (have[p][0], have[p][1].encode()) if p in have else b"0 " + b"0" * 40)
                + b"\t"
                + p.encode("utf-8", "surrogateescape")
                + b"\0"
                for p in paths
            )
            self.run("update-index", "-z", "--index-info", env=env, input=info)
            data = tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        self._replace_index(data)

    def _replace_index(self, data: bytes) -> None:
        """Write the user's new index into git's lock and rename it over the index (git's own
        protocol), which also releases the lock. Callers hold index_locked()."""
        self._index_fd, fd = -1, self._index_fd  # closed here; the rename below releases it
        with os.fdopen(fd, "wb") as fh:  # no fsync, as git does for its index: HEAD rebuilds it
            fh.write(data)
        os.replace(self.git_dir / "index.lock", self.git_dir / "index")

    def committed_call(self, call_id: str, base: str | None) -> bool:
        """Whether a version of call `call_id` landed after `base` (commits on top included)."""
        span = [f"{base}..HEAD"] if base else ["HEAD"]
        proc = self.run(
            "log", "--format=%H", "-n1", "--fixed-strings", f"--grep={call_id}", *span, check=False
        )
        return proc.returncode == 0 and bool(proc.stdout.strip())

    def commit_all(self, *, actor: str, message: str) -> str | None:
        """The baseline commit of a brand-new repository (init only)."""
        env = {
            "GIT_AUTHOR_NAME": f"crustacean {actor}",
            "GIT_AUTHOR_EMAIL": EMAIL,
            "GIT_COMMITTER_NAME": f"crustacean {actor}",
            "GIT_COMMITTER_EMAIL": EMAIL,
        }
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

    def message_of(self, rev: str) -> str:
        return self.out("log", "-1", "--format=%B", rev)


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


def clear_stale_index_lock(root: Path, lock: Path, owner: int | None = None) -> bool:
    """Remove `lock` when no live process owns it, with a log line; True when it is gone."""
    if not lock.exists():
        return True
    if _lock_owner_alive(root, lock, owner):
        return False
    lock.unlink(missing_ok=True)
    log.warning("removed a stale %s: no running process owns it (a killed git left it)", lock)
    return True


def _lock_owner_alive(root: Path, lock: Path, owner: int | None) -> bool:
    """git writes no pid into its locks, so look for an owner: the crustacean that last took
    it, any process with the lock open, or a git process working in this workspace (git runs
    from the top of the work tree). Without /proc nothing can be told, so only a lock a dead
    crustacean left counts as stale."""
    me = os.getpid()
    if owner is not None and owner != me and _pid_alive(owner):
        return True
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return owner is None or owner == me
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
