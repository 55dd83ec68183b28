"""Durable file replacement: temp file in the same folder, fsync, rename, fsync the folder; and
for a call of many files, their temp files made durable at once (one syncfs).

Its own module because both the write path and the proposal queue need it, and neither may
import the other.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


def atomic_write(
    path: Path, data: bytes, *, sync_dir: bool = True, mode: int | None = None
) -> None:
    """Temp file in the same folder, fsync, rename: a reader sees the old bytes or the new.
    The temp file is private (0600) unless `mode` says what the file should have."""
    tmp = synced_temp(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def synced_temp(path: Path, data: bytes, mode: int | None) -> str:
    """`data` in a new temp file next to `path`, on disk (fsync); its name. The write path
    syncs a call's files at once this way, and renames them once its journal is in place."""
    return _temp(path, data, mode, sync=True)


def unsynced_temp(path: Path, data: bytes, mode: int | None) -> str:
    """`data` in a new temp file next to `path`, in the page cache only: the caller makes a
    batch of them durable at once (`FilesystemSync`) before any is renamed."""
    return _temp(path, data, mode, sync=False)


def _temp(path: Path, data: bytes, mode: int | None, *, sync: bool) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def fsync_file(path: str) -> None:
    """An already written file onto the disk (its own errors raised, unlike syncfs')."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FilesystemSync:
    """Every dirty page of the filesystems holding some folders onto the disk, one syncfs(2)
    call each: thousands of small files become durable for about the price of one fsync (each
    fsync is a journal commit of its own; the disk commits concurrent ones together, but far
    from all of them). Opened before the files are written: syncfs reports the writeback errors
    of its filesystem since its descriptor was opened (Linux 5.8+), so an error while the kernel
    writes a file back early is reported too."""

    def __init__(self, fds: list[int], syncfs: Callable[[int], int]) -> None:
        self._fds, self._syncfs = fds, syncfs

    @classmethod
    def open(cls, folders: Iterable[Path]) -> FilesystemSync | None:
        """One descriptor per filesystem among `folders`; None where syncfs is not available
        (off Linux) or a folder cannot be opened: the caller then fsyncs each file."""
        syncfs = _syncfs()
        if syncfs is None:
            return None
        fds: dict[int, int] = {}
        try:
            for folder in folders:
                fd = os.open(folder, os.O_RDONLY)
                dev = os.fstat(fd).st_dev
                if dev in fds:
                    os.close(fd)
                else:
                    fds[dev] = fd
        except OSError:
            for fd in fds.values():
                os.close(fd)
            return None
        return cls(list(fds.values()), syncfs)

    def sync(self) -> bool:
        """True when every filesystem synced without an error; False: the caller must fsync
        each file (fsync says which file's data did not reach the disk, syncfs only that some
        data of the filesystem did not)."""
        return all(self._syncfs(fd) == 0 for fd in self._fds)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


_SYNCFS: list[Callable[[int], int] | None] = []


def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs, looked up once; None off Linux (macOS, Windows), without ctypes, or before
    Linux 5.8 (whose syncfs reports no writeback error: the files are then fsynced one by one)."""
    if not _SYNCFS:
        found = None
        if sys.platform.startswith("linux") and _kernel() >= (5, 8):
            try:
                import ctypes  # only here: a few ms of import that one-file writes never need

                found = ctypes.CDLL(None, use_errno=True).syncfs
                found.argtypes, found.restype = [ctypes.c_int], ctypes.c_int
            except (ImportError, OSError, AttributeError):
                found = None
        _SYNCFS.append(found)
    return _SYNCFS[0]


def _kernel() -> tuple[int, int]:
    """The running kernel's (major, minor); (0, 0) when its release string does not say."""
    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
