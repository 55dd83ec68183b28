"""Reading git's own files (refs, loose objects) without starting a process.

Every version asks git what HEAD is and which blobs a few paths hold; a `git` process for each
costs more than the write itself. What the store just wrote is always a loose ref and loose
objects, which are plain files in a documented format, so those questions are answered here.
Anything unusual (a packed object, a linked worktree, environment overrides, replace refs, an
unborn branch) returns None and the caller asks git, so the answer is always git's.
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

# Variables that make git look somewhere else than `<root>/.git` for refs or objects.
_ENV_OVERRIDES = (
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_REPLACE_REF_BASE",
)
_HEX = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_FILE_MODES = (b"100644", b"100755", b"120000")  # what a path of a workspace file can be

Entry = tuple[bytes, str]  # (mode as ls-tree prints it, object id)


def plain_git_dir(root: Path) -> Path | None:
    """`<root>/.git` when git itself would read refs and objects there and nothing replaces
    objects; None otherwise (then only git may answer)."""
    if any(name in os.environ for name in _ENV_OVERRIDES):
        return None
    git_dir = root / ".git"
    if not git_dir.is_dir() or (git_dir / "refs" / "replace").is_dir():
        return None
    try:
        packed = (git_dir / "packed-refs").read_bytes()
    except FileNotFoundError:
        packed = b""
    except OSError:
        return None
    return None if b" refs/replace/" in packed else git_dir


def read_head(git_dir: Path) -> str | None:
    """The commit HEAD names, read as git reads it (loose ref first, then packed-refs); None
    when it cannot be told this way (unborn branch, detached HEAD, a symref chain...)."""
    try:
        head = (git_dir / "HEAD").read_bytes().strip()
    except OSError:
        return None
    if not head.startswith(b"ref: refs/heads/"):
        return None
    return read_ref(git_dir, head[5:].decode("utf-8", "surrogateescape"))


def read_ref(git_dir: Path, ref: str) -> str | None:
    """The object id a ref holds (its loose file first, then packed-refs), or None when it has
    none this way tells: what HEAD names, and what the store checks under the ref's lock."""
    value: bytes | None
    try:
        value = (git_dir / ref).read_bytes().strip()
    except FileNotFoundError:
        value = _packed_ref(git_dir, ref.encode("utf-8", "surrogateescape"))
    except OSError:
        return None
    return value.decode() if value and _HEX.match(value) else None


def _packed_ref(git_dir: Path, ref: bytes) -> bytes | None:
    try:
        packed = (git_dir / "packed-refs").read_bytes()
    except OSError:
        return None
    for line in packed.splitlines():
        oid, _, name = line.partition(b" ")
        if name == ref:
            return oid
    return None


def tree_entries(git_dir: Path, rev: str, paths: Sequence[str]) -> dict[str, Entry] | None:
    """`(mode, id)` of each path in commit `rev`, paths absent there left out, as
    `git ls-tree --full-tree rev -- paths` lists files; None when an object is not loose or
    an entry is not a plain file (git answers those)."""
    if not _HEX.match(rev.encode()):
        return None
    raw_len = len(rev) // 2
    commit = _loose(git_dir, rev, b"commit")
    if commit is None or not commit.startswith(b"tree "):
        return None
    root = commit[5 : commit.find(b"\n")].decode()
    trees: dict[str, dict[bytes, Entry] | None] = {}  # folder -> its entries (None: no folder)

    def listing(folder: str) -> dict[bytes, Entry] | None:
        if folder not in trees:
            if folder == "":
                oid: str | None = root
            else:
                parent, _, name = folder.rpartition("/")
                above = listing(parent)
                entry = (
                    None if above is None else above.get(name.encode("utf-8", "surrogateescape"))
                )
                oid = entry[1] if entry is not None and entry[0] == b"40000" else None
            trees[folder] = None if oid is None else _tree(git_dir, oid, raw_len)
        return trees[folder]

    found: dict[str, Entry] = {}
    try:
        for path in paths:
            folder, _, name = path.rpartition("/")
            entries = listing(folder)
            entry = (
                None if entries is None else entries.get(name.encode("utf-8", "surrogateescape"))
            )
            if entry is None:
                continue
            if entry[0] not in _FILE_MODES:
                return None  # a folder or a submodule there: git says what ls-tree shows
            found[path] = entry
    except (_NotLoose, ValueError):
        return None
    return found


class _NotLoose(Exception):
    """An object lives in a pack (or is missing): only git can read it."""


def _loose(git_dir: Path, oid: str, kind: bytes) -> bytes | None:
    try:
        raw = (git_dir / "objects" / oid[:2] / oid[2:]).read_bytes()
        data = zlib.decompress(raw)
    except (OSError, zlib.error):
        return None
    header, sep, body = data.partition(b"\0")
    if not sep or header != kind + b" " + str(len(body)).encode():
        return None
    return body


def _parse_tree(body: bytes, raw_len: int) -> dict[bytes, Entry]:
    """A tree object's entries: `<octal mode> <name>\\0<raw id>`, repeated."""
    out: dict[bytes, Entry] = {}
    i, end = 0, len(body)
    while i < end:
        space = body.index(b" ", i)
        nul = body.index(b"\0", space)
        oid = body[nul + 1 : nul + 1 + raw_len]
        if len(oid) != raw_len:
            raise ValueError("truncated tree")
        out[body[space + 1 : nul]] = (body[i:space], oid.hex())
        i = nul + 1 + raw_len
    return out


def blob_id(data: bytes, like: str) -> str:
    """The id git gives `data` as a blob, in the hash of the repository `like` comes from."""
    algo = hashlib.sha1 if len(like) == 40 else hashlib.sha256
    return algo(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def tree_is(git_dir: Path, parent: str, tree: str, expect: Mapping[str, str | None]) -> bool:
    """Whether `tree` is commit `parent`'s tree with exactly `expect` applied: each path a
    plain file holding that blob with the mode it had (100644 when new), or gone when None,
    and every other entry the same. False too when that cannot be read here (a packed
    object): the caller then builds the tree from `parent` itself."""
    commit = _loose(git_dir, parent, b"commit") if _HEX.match(parent.encode()) else None
    if commit is None or not commit.startswith(b"tree "):
        return False
    want = {tuple(p.encode("utf-8", "surrogateescape").split(b"/")): v for p, v in expect.items()}
    try:
        return _same_but(git_dir, commit[5 : commit.find(b"\n")].decode(), tree, want)
    except (_NotLoose, ValueError):
        return False


def _same_but(
    git_dir: Path, old: str | None, new: str | None, expect: dict[tuple[bytes, ...], str | None]
) -> bool:
    """One folder of `tree_is`: only the names `expect` reaches are opened, the rest compared
    by id."""
    raw_len = len(old or new or "0" * 40) // 2
    was_all = {} if old is None else _tree(git_dir, old, raw_len)
    now_all = {} if new is None else _tree(git_dir, new, raw_len)
    files = {k[0]: v for k, v in expect.items() if len(k) == 1}
    below: dict[bytes, dict[tuple[bytes, ...], str | None]] = {}
    for k, v in expect.items():
        if len(k) > 1:
            below.setdefault(k[0], {})[k[1:]] = v
    if files.keys() & below.keys():
        return False  # a path that is a file and a folder in one call: git decides
    for name in was_all.keys() | now_all.keys() | files.keys() | below.keys():
        was, now = was_all.get(name), now_all.get(name)
        if name in files:
            blob = files[name]
            if was is not None and was[0] not in (b"100644", b"100755"):
                return False
            if now != (None if blob is None else ((was or (b"100644", ""))[0], blob)):
                return False
        elif name in below:
            if any(e is not None and e[0] != b"40000" for e in (was, now)):
                return False
            if not _same_but(git_dir, was and was[1], now and now[1], below[name]):
                return False
        elif was != now:
            return False
    return True


def _tree(git_dir: Path, oid: str, raw_len: int) -> dict[bytes, Entry]:
    body = _loose(git_dir, oid, b"tree")
    if body is None:
        raise _NotLoose
    return _parse_tree(body, raw_len)


class NotHere(Exception):
    """What git must answer: an object not loose (or missing), or a tree of an odd shape."""


def listing(git_dir: Path, tree: str) -> dict[bytes, Entry]:
    """A loose tree's entries, name -> (mode, id); raises NotHere when it is not loose."""
    try:
        return _tree(git_dir, tree, len(tree) // 2)
    except (_NotLoose, ValueError) as err:
        raise NotHere(tree) from err


def root_tree(git_dir: Path, commit: str) -> str:
    """The tree of a loose commit; raises NotHere when it is not loose."""
    body = _loose(git_dir, commit, b"commit") if _HEX.match(commit.encode()) else None
    if body is None or not body.startswith(b"tree "):
        raise NotHere(commit)
    return body[5 : body.find(b"\n")].decode()
