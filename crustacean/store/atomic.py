"""Durable file replacement: temp file in the same folder, fsync, rename, fsync the folder.

Its own module because both the write path and the proposal queue need it, and neither may
import the other.
"""

from __future__ import annotations

import os
import tempfile
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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


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
