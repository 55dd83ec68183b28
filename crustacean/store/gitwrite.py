"""Writing a version's tree, its commit object and HEAD's move without starting a git process.

A version's `write-tree`, `commit-tree` and `update-ref` cost more than the rest of the write;
their outputs are fully specified (tree and commit objects' bytes, git's ref lock protocol and
reflog line), so they are done here, exactly as git does them, whenever the repository is a
plain one: a loose ref, SHA-1 objects, no signing, no commit encoding, no repository extensions,
no reference-transaction hook, no shared permissions. Anything else, and any surprise on the way
(a lock held, HEAD moved, an index entry not as expected), makes the caller run git itself, so
the result is always what git would have written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from crustacean.store import gitread, upkeep

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
# A name git writes into an ident as given: no "crud" it would strip or drop (ident.c).
_PLAIN_IDENT = re.compile(r"^[A-Za-z0-9_-]+(?: [A-Za-z0-9_-]+)*$")
_PLAIN_EMAIL = re.compile(r"^[A-Za-z0-9_.+-]+@[A-Za-z0-9_.-]+$")
# Environment variables that change where git reads or writes, or what a commit or reflog
# line holds (GIT_TEST_* too): with any of them set, git writes the version itself.
_ENV_DENIED = {
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_DATE",
    "GIT_QUARANTINE_PATH",
    "GIT_REF_PARANOIA",
}
# core.fsync components (git's cache.h / environment.c), as bits.
_LOOSE, _PACK, _PACK_META, _GRAPH, _INDEX, _REF = (1 << i for i in range(6))
_OBJECTS = _LOOSE | _PACK
_DERIVED = _PACK_META | _GRAPH
_FSYNC_DEFAULT = (_OBJECTS | _DERIVED) & ~_LOOSE
_FSYNC_NAMES = (
    ("loose-object", _LOOSE),
    ("pack", _PACK),
    ("pack-metadata", _PACK_META),
    ("commit-graph", _GRAPH),
    ("index", _INDEX),
    ("objects", _OBJECTS),
    ("reference", _REF),
    ("derived-metadata", _DERIVED),
    ("committed", _OBJECTS | _REF),
    ("added", _OBJECTS | _REF | _INDEX),
    ("all", _OBJECTS | _REF | _INDEX | _DERIVED),
)
_TRUE = ("true", "yes", "on", "1")
# The fault points of a version, in order (`Git.commit_paths(fault=...)`; the crash tests kill
# the process at each): the commit object written; the ref's lock written; the reflogs
# appended; the ref renamed into place (HEAD.lock not yet removed).
COMMIT_WRITTEN = ":commit-written"
REF_LOCKED = ":ref-locked"
REFLOG_WRITTEN = ":reflog-written"
REF_MOVED = ":ref-moved"
STEPS = (COMMIT_WRITTEN, REF_LOCKED, REFLOG_WRITTEN, REF_MOVED)


@dataclass(frozen=True)
class Facts:
    """What the repository's effective git config says about writing a version."""

    plain: bool  # the commit and the ref may be written here
    why: str  # why not, when not plain (for the log and the tests)
    sign: bool  # commit.gpgsign: git's commit-tree -S makes the commit
    fsync_objects: bool
    fsync_refs: bool
    compression: int
    hooks: Path  # where a reference-transaction hook would be
    plain_index: bool = False  # no split, sparse or sparse-checkout index: see `staged`
    # gc.auto, gc.autoPackLimit, maintenance.auto: git's housekeeping after a version
    upkeep: upkeep.Limits = field(default_factory=upkeep.Limits)


def fsync_components(value: str) -> int:
    """`core.fsync` as git parses it: from the platform default, `-name` removes, `name` adds,
    `none` (the whole rest of the value) clears; a name matches every component it begins."""
    current, positive, negative = _FSYNC_DEFAULT, 0, 0
    rest: str | None = value
    while rest is not None:
        rest = rest.lstrip(", \t\n\r")
        comma = rest.find(",")
        word = rest if comma < 0 else rest[:comma]
        nxt = None if comma < 0 else rest[comma + 1 :]
        if rest == "none":
            current = 0
            rest = nxt
            continue
        negated = word.startswith("-")
        word = word[1:] if negated else word
        if not word:
            break
        for name, bits in _FSYNC_NAMES:
            if name.startswith(word):
                if negated:
                    negative |= bits
                else:
                    positive |= bits
        rest = nxt
    return (current & ~negative) | positive


def parse_facts(root: Path, git_dir: Path, listing: bytes) -> Facts:
    """Facts from `git config -l -z` output (the last value of a key wins, as in git)."""
    values: dict[str, str] = {}
    keys: list[str] = []
    for item in listing.split(b"\0"):
        if not item:
            continue
        key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        keys.append(key)
        values[key] = value

    def why_not() -> str:
        for key in keys:
            if key.startswith("extensions."):
                return f"the repository uses {key}"
            if key.startswith("hook."):
                return f"hooks are configured ({key})"
        if values.get("core.repositoryformatversion", "0") not in ("0", "1"):
            return "an unknown repository format version"
        for key in ("i18n.commitencoding", "core.sharedrepository", "core.worktree"):
            if key in values:
                return f"{key} is set"
        if values.get("core.bare", "false").lower() in _TRUE:
            return "a bare repository"
        if values.get("core.logallrefupdates", "true").lower() not in (*_TRUE, "always"):
            return "core.logAllRefUpdates is not true"
        if values.get("core.fsyncmethod", "fsync") != "fsync":
            return "core.fsyncMethod is not fsync"
        return ""

    comps = fsync_components(values["core.fsync"]) if "core.fsync" in values else _FSYNC_DEFAULT
    if values.get("core.fsyncobjectfiles", "false").lower() in _TRUE:
        comps |= _LOOSE
    why = why_not()
    try:
        level = int(values.get("core.loosecompression", values.get("core.compression", "1")))
    except ValueError:
        why, level = why or "core.compression is not a number", 1
    if not -1 <= level <= 9:
        why, level = why or "core.compression is out of range", 1
    hooks = Path(os.path.expanduser(values.get("core.hookspath", str(git_dir / "hooks"))))
    return Facts(
        plain=not why,
        why=why,
        sign=values.get("commit.gpgsign", "false").lower() in _TRUE,
        fsync_objects=bool(comps & _LOOSE),
        fsync_refs=bool(comps & _REF),
        compression=level,
        hooks=hooks if hooks.is_absolute() else root / hooks,
        plain_index=not any(
            values.get(key, "false").lower() in _TRUE
            for key in ("core.splitindex", "index.sparse", "core.sparsecheckout")
        ),
        upkeep=upkeep.limits(listing),
    )


def _stat_key(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


class ConfigCache:
    """The effective config, read with one `git config` per change of any file it came from
    (or could come from), of the environment, or of HEAD (an `includeIf.onbranch` reads it)."""

    def __init__(self, root: Path, git_dir: Path) -> None:
        self.root, self.git_dir = root, git_dir
        self._key: object = None
        self._facts: Facts | None = None
        self._origins: list[Path] = []

    def _candidates(self) -> list[Path]:
        home = Path(os.environ.get("HOME", "/nonexistent"))
        xdg = Path(os.environ.get("XDG_CONFIG_HOME", str(home / ".config")))
        found = [
            self.git_dir / "config",
            self.git_dir / "config.worktree",
            self.git_dir / "HEAD",
            home / ".gitconfig",
            xdg / "git" / "config",
            Path(os.environ.get("GIT_CONFIG_SYSTEM", "/etc/gitconfig")),
        ]
        if "GIT_CONFIG_GLOBAL" in os.environ:
            found.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
        return found + self._origins

    def _current_key(self) -> object:
        env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_")))
        files = tuple((str(p), _stat_key(p)) for p in self._candidates())
        return env, files, os.environ.get("HOME"), os.environ.get("XDG_CONFIG_HOME")

    def facts(self, run: Callable[..., subprocess.CompletedProcess[bytes]]) -> Facts:
        key = self._current_key()
        if self._facts is None or key != self._key:
            proc = run("config", "-l", "-z", "--show-origin", check=False)
            listing, origins = _split_origins(proc.stdout, self.root)
            self._origins = origins
            self._facts = parse_facts(self.root, self.git_dir, listing)
            if proc.returncode != 0:  # a broken config file: git's own commands say so
                self._facts = replace(self._facts, plain=False, why="git cannot read its config")
            self._key = self._current_key()  # with the files the listing named
        return self._facts


def _split_origins(out: bytes, root: Path) -> tuple[bytes, list[Path]]:
    """`--show-origin -z` prints `file:PATH\\0key\\nvalue\\0` pairs: the listing, and every file
    it came from or names as an include (a relative PATH is from the work tree's top, where
    git runs; an include's relative path is from the file that names it)."""
    items = out.split(b"\0")
    listing, watched = [], set()
    for origin, entry in zip(items[0::2], items[1::2], strict=False):
        listing.append(entry)
        if not origin.startswith(b"file:"):
            continue
        source = root / os.fsdecode(origin[5:])
        watched.add(source)
        key, _, value = os.fsdecode(entry).partition("\n")
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            target = Path(os.path.expanduser(value))
            watched.add(target if target.is_absolute() else source.parent / target)
    return b"\0".join(listing), sorted(watched)


def unusual(git_dir: Path, facts: Facts) -> str:
    """Why this repository's state (not its config) needs git itself; "" when it does not."""
    if not facts.plain:
        return facts.why
    for var in os.environ:
        if var in _ENV_DENIED or var.startswith("GIT_TEST_"):
            return f"{var} is set"
    for name, what in (
        ("info/grafts", "grafts"),
        ("reftable", "the reftable ref format"),
        ("commondir", "a linked worktree"),
    ):
        if (git_dir / name).exists():
            return what
    if (facts.hooks / "reference-transaction").exists():
        return "a reference-transaction hook"
    return ""


def plain_ident(name: str, email: str) -> bool:
    """Whether git would write this name and email into an ident unchanged."""
    return bool(_PLAIN_IDENT.match(name) and _PLAIN_EMAIL.match(email))


def stamp(now: int | None) -> str:
    """`<seconds> <±hhmm>` as git writes a date: the given time in UTC, or the clock in the
    local zone (ident.c's datestamp; local_tzoffset rounds to minutes)."""
    if now is not None:
        return f"{now} +0000"
    seconds = int(time.time())
    offset = time.localtime(seconds).tm_gmtoff
    minutes = abs(offset) // 60
    return f"{seconds} {'-' if offset < 0 else '+'}{minutes // 60:02d}{minutes % 60:02d}"


def commit_bytes(tree: str, parents: list[str], ident: str, message: bytes) -> bytes:
    """A commit object's body as `git commit-tree` writes it (no encoding header, no signature)."""
    lines = [f"tree {tree}\n", *(f"parent {p}\n" for p in parents)]
    lines += [f"author {ident}\n", f"committer {ident}\n", "\n"]
    return "".join(lines).encode() + message


def write_object(git_dir: Path, kind: bytes, body: bytes, facts: Facts) -> str:
    """Store a loose object as git does: a 0444 temp file in its fan-out folder, deflated,
    fsynced when core.fsync says so, then linked to its name (an existing one is kept)."""
    data = b"%s %d\0" % (kind, len(body)) + body
    oid = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    folder = f"{git_dir}/objects/{oid[:2]}"
    final = f"{folder}/{oid[2:]}"
    if os.path.exists(final):
        try:  # git freshens it, so no prune takes it meanwhile
            os.utime(final)
            return oid
        except OSError:  # a prune took it since (or it is not ours to touch): written anew,
            pass  # as git does when its freshen fails
    tmp = f"{folder}/tmp_obj_{os.urandom(4).hex()}"
    fd = _new_temp(folder, tmp)
    try:
        try:
            packed = memoryview(zlib.compress(data, facts.compression))
            while packed:  # a short write is possible in principle: all of it, or an error
                packed = packed[os.write(fd, packed) :]
            if facts.fsync_objects:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this filesystem: git renames instead
            os.rename(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return oid


FAN_OUT_TRIES = 8  # a gc removing the emptied folder each time would have to win them all


def _new_temp(folder: str, tmp: str) -> int:
    """The object's temp file, created in its fan-out folder. The folder may be new, or a
    gc's prune-packed may remove it, emptied, between our mkdir and our create (the user's
    own `git gc`, or the upkeep after the last version): made again and tried again, as git's
    create_tmpfile does."""
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC
    for _ in range(FAN_OUT_TRIES - 1):
        try:
            return os.open(tmp, flags, 0o444)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
    return os.open(tmp, flags, 0o444)


class Fallback(Exception):
    """This ref update needs git itself (a lock held, HEAD moved, an odd ref); nothing changed."""


def update_head(
    git_dir: Path,
    new: str,
    old: str,
    ident: str,
    message: str,
    facts: Facts,
    fault: Callable[[str], None],
) -> None:
    """`git update-ref -m MESSAGE HEAD NEW OLD` for HEAD on a branch with a loose or packed ref,
    in git's order: HEAD.lock and the branch's lock created exclusively, the branch checked to
    be OLD under its lock, NEW written to the lock (fsynced when core.fsync hardens references),
    the reflog lines appended to logs/HEAD then the branch's log, the lock renamed over the ref,
    the locks removed. Raises Fallback, with nothing changed, when git must do it."""
    try:
        head = (git_dir / "HEAD").read_bytes()
    except OSError as err:
        raise Fallback("HEAD cannot be read") from err
    ref = head[5:-1].decode("utf-8", "surrogateescape")
    if not head.startswith(b"ref: refs/heads/") or not head.endswith(b"\n") or "\n" in ref:
        raise Fallback("HEAD is not a plain branch")
    if not (_HEX40.match(new) and _HEX40.match(old)):
        raise Fallback("not a SHA-1 update")
    held: list[Path] = []
    try:
        for lock in (git_dir / "HEAD.lock", git_dir / f"{ref}.lock"):
            try:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o666))
            except OSError as err:  # held by another git (or a D/F clash): git waits and says
                raise Fallback(f"{lock.name} cannot be taken") from err
            held.append(lock)
        if (git_dir / "HEAD").read_bytes() != head:
            raise Fallback("HEAD changed")
        if gitread.read_ref(git_dir, ref) != old:
            raise Fallback("the branch moved")  # git's own error names both ids
        ref_lock = held[1]
        with open(ref_lock, "wb") as fh:
            fh.write(f"{new}\n".encode())
            fh.flush()
            if facts.fsync_refs:
                os.fsync(fh.fileno())
        fault(REF_LOCKED)
        line = f"{old} {new} {ident}\t{message}\n".encode()
        for log_name in ("HEAD", ref):
            _append_reflog(git_dir / "logs" / log_name, line, facts.fsync_refs)
        fault(REFLOG_WRITTEN)
        os.rename(ref_lock, git_dir / ref)
        held.remove(ref_lock)
        fault(REF_MOVED)
    finally:
        for lock in held:  # a lock left behind is cleared by the next write, as git's would be
            with contextlib.suppress(OSError):
                lock.unlink(missing_ok=True)


def _append_reflog(path: Path, line: bytes, fsync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_APPEND | os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        os.write(fd, line)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def env_ident(env: Mapping[str, str], stamp_text: str) -> str:
    """The ident git builds from GIT_COMMITTER_NAME/EMAIL and a date."""
    return f"{env['GIT_COMMITTER_NAME']} <{env['GIT_COMMITTER_EMAIL']}> {stamp_text}"


# ------------------------------------------------------------ the tree, without write-tree

_REGULAR = (0o100644, 0o100755)


def staged(index: bytes, paths: Mapping[str, str | None]) -> dict[str, bytes | None] | None:
    """Read the call's entries back from the bytes of an index file `git update-index` just
    wrote: the mode of each path, for a path that holds its expected blob at stage 0 with no
    extended flags, or None for a path expected gone that has no entry. None when any path is
    otherwise, or the index is not version 2 or 3 (then git's write-tree decides).

    Entries are found by their NUL-terminated name: a hit counts as an entry when the 16-bit
    flags before it give that name's length (62 bytes back, or 64 with the extended-flags bit
    set), so every real entry is found, and a chance hit elsewhere (a hash, another extension)
    can only make the answer None, never a wrong one: a kept entry must also hold its blob."""
    if len(index) < 12 or index[:4] != b"DIRC" or index[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return None
    modes: dict[str, bytes | None] = {}
    for path, blob in paths.items():
        name = path.encode("utf-8", "surrogateescape")
        if not name or len(name) >= 0xFFF:
            return None
        found = []
        at = index.find(name + b"\0", 12)
        while at >= 0:
            for back, extended in ((62, 0), (64, 0x4000)):
                start = at - back
                if start >= 12:
                    flags = int.from_bytes(index[start + 60 : start + 62], "big")
                    if flags & 0xFFF == len(name) and flags & 0x4000 == extended:
                        found.append((start, flags))
            at = index.find(name + b"\0", at + 1)
        if blob is None:
            if found:
                return None
            modes[path] = None
            continue
        if len(found) != 1:
            return None
        start, flags = found[0]
        mode = int.from_bytes(index[start + 24 : start + 28], "big")
        oid = index[start + 40 : start + 60].hex()
        if flags & 0x7000 or mode not in _REGULAR or oid != blob:  # stage, extended flags
            return None
        modes[path] = b"%o" % mode
    return modes


def tree_with(
    git_dir: Path, parent: str, changes: Mapping[str, tuple[bytes, str] | None], facts: Facts
) -> str:
    """Commit `parent`'s tree with `changes` applied (path -> (mode, blob), or None: gone),
    written as loose tree objects the way `git write-tree` writes them: only the folders on
    the changed paths are rebuilt, a folder left empty goes, entries sorted as git sorts them
    (a folder's name as if it ended in "/"). Raises gitread.NotHere when git must build it (a
    tree not loose, a path through a file, a file where a folder or a link is)."""
    want = {tuple(p.encode("utf-8", "surrogateescape").split(b"/")): v for p, v in changes.items()}
    return _folder(git_dir, gitread.root_tree(git_dir, parent), want, facts, top=True) or ""


def _folder(
    git_dir: Path,
    oid: str | None,
    want: dict[tuple[bytes, ...], tuple[bytes, str] | None],
    facts: Facts,
    top: bool = False,
) -> str | None:
    entries = dict(gitread.listing(git_dir, oid)) if oid is not None else {}
    files = {k[0]: v for k, v in want.items() if len(k) == 1}
    below: dict[bytes, dict[tuple[bytes, ...], tuple[bytes, str] | None]] = {}
    for k, v in want.items():
        if len(k) > 1:
            below.setdefault(k[0], {})[k[1:]] = v
    if files.keys() & below.keys() or any(not n or n in (b".", b"..") for n in [*files, *below]):
        raise gitread.NotHere("an odd path")
    for name, new in files.items():
        old = entries.get(name)
        if old is not None and old[0] not in (b"100644", b"100755"):
            raise gitread.NotHere("a file replaces a folder, a link or a submodule")
        if new is None:
            entries.pop(name, None)
        else:
            entries[name] = new
    for name, sub in below.items():
        old = entries.get(name)
        if old is not None and old[0] != b"40000":
            raise gitread.NotHere("a folder replaces a file")
        tree = _folder(git_dir, None if old is None else old[1], sub, facts)
        if tree is None:
            entries.pop(name, None)
        else:
            entries[name] = (b"40000", tree)
    if not entries and not top:
        return None
    order = sorted(entries, key=lambda n: n + b"/" if entries[n][0] == b"40000" else n)
    body = b"".join(entries[n][0] + b" " + n + b"\0" + bytes.fromhex(entries[n][1]) for n in order)
    return write_object(git_dir, b"tree", body, facts)
