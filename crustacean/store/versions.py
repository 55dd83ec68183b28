"""Versions in git, through the git CLI.

Each applied `write_context` call becomes exactly one commit built with plumbing on a private
index: HEAD's tree plus the files the call changed, nothing else. The user's staged or unstaged
edits to other files are never swept in, and their index is left as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from crustacean.errors import VersionError

EMAIL = "crustacean@localhost"
TRAILER_ACTOR = "Crustacean-Actor"
TRAILER_RUN = "Crustacean-Run"
TRAILER_CALL = "Crustacean-Call"


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


class LookUp:
    """Sentinel: find HEAD yourself."""


class Git:
    """A thin runner for the git CLI inside one workspace."""

    def __init__(self, root: Path) -> None:
        self.root = root

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

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).stdout.decode("utf-8", "replace").strip()  # type: ignore[arg-type]

    # ------------------------------------------------------------ state

    def is_repo(self) -> bool:
        if not git_available():
            return False
        proc = self.run("rev-parse", "--is-inside-work-tree", check=False)
        return proc.returncode == 0 and proc.stdout.strip() == b"true"

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

    def blob_ids(self, rev: str, paths: Sequence[str]) -> dict[str, str]:
        """Blob id of each path at `rev` (paths absent there are left out)."""
        if not paths:
            return {}
        out = self.run("ls-tree", "-z", "--full-tree", rev, "--", *paths).stdout
        ids: dict[str, str] = {}
        for entry in out.split(b"\0"):
            if entry:
                meta, _, name = entry.partition(b"\t")
                ids[name.decode("utf-8", "surrogateescape")] = meta.split()[2].decode()
        return ids

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
        parent: str | type[LookUp] | None = LookUp,
    ) -> str:
        """Commit the working-tree state of `paths` on top of HEAD; return the new commit id.

        `parent` is HEAD when the caller already knows it (saves a git call); the ref update
        still checks HEAD did not move meanwhile.
        """
        paths = sorted(set(paths))
        state = self.root / ".crustacean"
        state.mkdir(exist_ok=True)
        index = state / f"index-{uuid.uuid4().hex}"
        stamp = f"{int((now or datetime.now()).timestamp())} +0000"
        env = {
            "GIT_INDEX_FILE": str(index),
            "GIT_AUTHOR_NAME": f"crustacean {actor}",
            "GIT_AUTHOR_EMAIL": EMAIL,
            "GIT_COMMITTER_NAME": f"crustacean {actor}",
            "GIT_COMMITTER_EMAIL": EMAIL,
        }
        if now is not None:
            env |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        try:
            head = self.head() if parent is LookUp else parent
            self.run("read-tree", *([head] if head else ["--empty"]), env=env)
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
            tree = self.out("write-tree", env=env)
            body = message.strip() + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
            parent = ["-p", head] if head else []
            commit = self.out("commit-tree", tree, *parent, env=env, input=body.encode())
            self.run("update-ref", "-m", f"crustacean {actor}", "HEAD", commit, head or "0" * 40)
        finally:
            index.unlink(missing_ok=True)
        self._sync_index(paths)
        return commit

    def _sync_index(self, paths: list[str]) -> None:
        """Make the user's index agree with the new commit for our paths only (best effort)."""
        self.run(
            "update-index",
            "--add",
            "--remove",
            "-z",
            "--stdin",
            check=False,
            input=b"\0".join(p.encode("utf-8", "surrogateescape") for p in paths),
        )

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
