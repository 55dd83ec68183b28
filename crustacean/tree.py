"""Walking the workspace: one walker, and every caller's skip rule beside it.

crustacean.workspace re-exports all of this.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from array import array

STATE_DIR = ".crustacean"
TRASH_DIR = "archive/trash"
OWN_STATE = frozenset({".git", STATE_DIR})  # git's and crustacean's own folders, at the top
TOOL_CACHES = frozenset({"node_modules", ".venv", "__pycache__"})
# The temp files a killed write leaves: atomic_write's mkstemp names next to a file, and the
# copy of git's index `sync_index` stages on in the state folder. No walk shows them (half of a
# call that never happened); only the sweep that removes them asks for them (`Skip.temps`).
TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$|^index-[0-9a-f]{32}(\.lock)?$")


def is_temp(name: str) -> bool:
    """Whether a file's name is a killed write's temp file (see TEMP_NAME)."""
    return (name.endswith(".tmp") or name.startswith("index-")) and bool(TEMP_NAME.match(name))


class Skip(NamedTuple):
    """Which folders a walk leaves out (a folder left out is not entered at all)."""

    hidden: bool = False  # any folder whose name starts with "."
    names: frozenset[str] = frozenset()  # folders of these names, at any depth
    top: frozenset[str] = frozenset()  # folders of these names at the top of the walk
    paths: frozenset[str] = frozenset()  # these workspace-relative folders
    temps: bool = False  # yield killed writes' temp files too (only their sweep wants them)

    def leaves_out(self, rel_dir: str, name: str) -> bool:
        return (
            (self.hidden and name.startswith("."))
            or name in self.names
            or (not rel_dir and name in self.top)
            or rel_dir + name in self.paths
        )


# What a writer may see: everything but git, crustacean's state and the trash (the store).
WRITABLE = Skip(top=OWN_STATE, paths=frozenset({TRASH_DIR}))
# What is indexed and recalled: no hidden folder (.git, .crustacean, .system) and no trash.
RECALLED = Skip(hidden=True, paths=frozenset({TRASH_DIR}))
# Memory homes: no hidden folder below them (search: RECALLED; the trash is not a home).
MEMORY_HOMES = Skip(hidden=True)
# What health checks: every file but git's, crustacean's and tool caches, at any depth.
CHECKED = Skip(names=OWN_STATE | TOOL_CACHES)
# Where a killed write may have left a temp file: everywhere but .git, temp files included.
NOT_GIT = Skip(top=frozenset({".git"}), temps=True)


def walk(
    root: Path | str,
    skip: Skip,
    under: str = "",
    problems: list[tuple[str, str]] | None = None,
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """(workspace-relative posix path, entry) of everything below `root/under` that is not a
    folder walked into: files, symlinks (a symlinked folder is never entered) and the rest.

    Callers pick from the entries (`entry.is_file(follow_symlinks=False)` for regular files
    only). A folder that cannot be read is skipped, and named in `problems` when given; a
    killed write's temp file is never yielded unless `skip.temps` asks for it."""
    start = f"{under.strip('/')}/" if under.strip("/") else ""
    stack = [(start, os.path.join(root, start) if start else str(root))]
    while stack:
        rel_dir, full = stack.pop()
        try:
            with os.scandir(full) as it:
                entries = list(it)
        except OSError as e:
            if problems is not None:
                problems.append((rel_dir or ".", f"folder cannot be read: {e.strerror}"))
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not skip.leaves_out(rel_dir, entry.name):
                    stack.append((f"{rel_dir}{entry.name}/", entry.path))
            elif not skip.temps and is_temp(entry.name):
                continue
            elif entry.is_file(follow_symlinks=False) or not (why := unreadable(entry)):
                yield rel_dir + entry.name, entry
            elif problems is not None:
                problems.append((rel_dir + entry.name, why))


def unreadable(entry: os.DirEntry[str]) -> str:
    """Why an entry that is neither a folder nor a regular file is left out ("" when it is
    not): reading a FIFO waits forever for a writer, and a symlink loop raises ELOOP on every
    open or stat. A symlink to a file or folder, or to nothing (a dangling link), is kept: its
    callers decide."""
    if entry.is_symlink():
        try:
            mode = os.stat(entry.path).st_mode
        except OSError as e:
            return "a symlink loop; skipped" if e.errno == errno.ELOOP else ""
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return ""
        return f"a symlink to {_kind(mode)}; skipped"
    try:
        return f"{_kind(entry.stat(follow_symlinks=False).st_mode)}; skipped"
    except OSError:
        return ""  # gone since the folder was read


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


_BY_FD = os.scandir in os.supports_fd
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def stat_markdown(
    root: Path | str, skip: Skip, problems: list[tuple[str, str]]
) -> tuple[list[str], list[os.stat_result]]:
    """The workspace-relative posix path and the stat of every regular `*.md` file `walk`
    would give, in `walk`'s order, with the folders that could not be read named in `problems`.

    The freshness check of search stats every file (an in-place write changes only the file),
    so this is its cost: each folder is opened once and its files are stat'ed relative to it,
    so the kernel resolves one name per file rather than its whole path (with the loop kept
    tight, ~13% less time on 10,000 files here). Where that is not offered, paths, as `walk`."""
    paths: list[str] = []
    stats: list[os.stat_result] = []
    if not _BY_FD:
        for rel, entry in walk(root, skip, problems=problems):
            if entry.name[-3:].lower() == ".md" and entry.is_file(follow_symlinks=False):
                paths.append(rel)
                stats.append(entry.stat(follow_symlinks=False))  # a symlink is not a file
        return paths, stats
    add_path, add_stat, lstat, leaves_out = paths.append, stats.append, os.lstat, skip.leaves_out
    stack = [("", str(root))]
    while stack:
        rel_dir, full = stack.pop()
        try:
            fd = os.open(full, _DIR_FLAGS)
        except OSError as e:
            problems.append((rel_dir or ".", f"folder cannot be read: {e.strerror}"))
            continue
        try:
            try:
                with os.scandir(fd) as it:
                    entries = list(it)
            except OSError as e:
                problems.append((rel_dir or ".", f"folder cannot be read: {e.strerror}"))
                continue
            for entry in entries:
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not leaves_out(rel_dir, name):
                        stack.append((f"{rel_dir}{name}/", os.path.join(full, name)))
                elif name[-3:].lower() == ".md" and entry.is_file(follow_symlinks=False):
                    add_stat(lstat(name, dir_fd=fd))  # a symlink is not a file
                    add_path(rel_dir + name)
        finally:
            os.close(fd)
    return paths, stats


def mark_of(paths: list[str], numbers: array[int]) -> int:
    """The paths hashed as one text and the sizes and mtimes as one array (formatting a line
    per file was most of the check's own time): the search index's mark of the disk
    (recall/search_read.py), and the memory index's of the memory files (memory_index.py)."""
    text = "\0".join(paths).encode("utf-8", "surrogateescape")
    h = blake2b(len(text).to_bytes(8, "big"), digest_size=8)  # where the numbers start
    h.update(text)
    h.update(numbers.tobytes())
    return int.from_bytes(h.digest(), "big", signed=True)
