"""The path jail: every path a writer names becomes a clean, workspace-relative POSIX path, or
is refused. Nothing outside the workspace, nothing in `.git/` or `.crustacean/`.

`Jail` is the same check for the many paths of one call (a compile pass names thousands): the
workspace's real path and each folder's are resolved once per `Jail`, which a writer makes
afresh for every call, so a symlink swapped in between two calls is seen by the second.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath, PurePosixPath

from crustacean.errors import PathError
from crustacean.tree import STATE_DIR

PROTECTED_TOP = (".git", STATE_DIR)
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 200  # the file system allows 255; the store's temp names need the rest


def jail(root: Path, raw: object) -> str:
    """Return `raw` as a normalized relative path inside `root`, or raise `PathError`.

    Symlinks are resolved: one that leads outside the workspace (or into a protected folder) is
    refused; one that stays inside is followed, so the write lands on the real file.
    """
    return Jail(root)(raw)


class Jail:
    """`jail` for the paths of one call, each folder resolved once (see the module's doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root: str | None = None
        self._folders: dict[str, str | None] = {}  # folder -> its real path, when a real folder

    def __call__(self, raw: object) -> str:
        rel = _clean(raw)
        target, plain = self._target(rel)
        if not plain and os.path.islink(target):  # realpath gave up: the link reaches no place
            raise PathError(f"path {raw!r} leads into a symlink loop; remove the link.")
        resolved = _inside(self.real_root, target)
        if resolved is None:
            raise PathError(
                f"path {raw!r} leads outside the workspace through a symlink; write the real file."
            )
        if resolved == ".":
            raise PathError(
                f"path {raw!r} names the workspace root; give a file path such as notes.md."
            )
        _refuse_protected(resolved.split("/"), raw)
        return resolved

    @property
    def real_root(self) -> str:
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root)
        return self._real_root

    def _target(self, rel: str) -> tuple[str, bool]:
        """`realpath(real_root/rel)`, and whether it is known to be no symlink: the folder's
        real path (cached) and the name on it when that name is no symlink there (else, and on
        any doubt, the full realpath)."""
        folder, _, name = rel.rpartition("/")
        base = self._folder(folder)
        if base is not None:
            full = os.path.join(base, name)
            try:
                if not stat.S_ISLNK(os.lstat(full).st_mode):
                    return full, True
            except FileNotFoundError:
                return full, True  # a new file in a real folder: realpath adds its name as is
            except OSError:
                pass
        return os.path.realpath(os.path.join(self.real_root, rel)), False

    def _folder(self, folder: str) -> str | None:
        """The folder's real path while it is a real folder (None: a missing one, a loop)."""
        if folder not in self._folders:
            real = os.path.realpath(os.path.join(self.real_root, folder)) if folder else None
            real = real or self.real_root
            self._folders[folder] = real if os.path.isdir(real) else None
        return self._folders[folder]


def _clean(raw: object) -> str:
    """`raw` checked and normalized, before any symlink is looked at."""
    if not isinstance(raw, str) or not raw.strip():
        raise PathError(f"path must be a non-empty string, got {raw!r}.")
    if "\x00" in raw:
        raise PathError(f"path {raw!r} contains a NUL character; use a plain file name.")
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathError(f"path is longer than {MAX_PATH_BYTES} bytes; use a shorter name.")
    text = raw.replace("\\", "/")
    if text.startswith("/") or PurePosixPath(text).is_absolute() or _has_drive(text):
        raise PathError(f"path {raw!r} is absolute; give a path relative to the workspace root.")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathError(f"path {raw!r} uses '..'; paths must stay inside the workspace.")
    if not parts:
        raise PathError(
            f"path {raw!r} names the workspace root; give a file path such as notes.md."
        )
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise PathError(
                f"a name in {raw!r} is longer than {MAX_NAME_BYTES} bytes; use a shorter name."
            )
    _refuse_protected(parts, raw)
    return "/".join(parts)


def _has_drive(text: str) -> bool:
    return len(text) >= 2 and text[1] == ":" and text[0].isalpha()


def _refuse_protected(parts: list[str], raw: object) -> None:
    if parts[0] in PROTECTED_TOP or parts[0].casefold() == STATE_DIR:  # same folder on macOS
        raise PathError(
            f"path {raw!r} is inside {parts[0]}/, which crustacean never writes; "
            "choose a path outside it."
        )
    if any(_is_git_name(p) for p in parts):
        raise PathError(
            f"path {raw!r} has a .git folder in it; git refuses to version such paths, so "
            "crustacean never writes them. Choose another name."
        )


def _is_git_name(part: str) -> bool:
    """`.git` as git itself sees it (any case, NTFS trailing dots/spaces, 8.3 and stream names)."""
    low = part.lower()
    return low.rstrip(". ") in (".git", "git~1") or low.startswith(".git:")


def _inside(real_root: str, target: str) -> str | None:
    """`target` relative to `real_root` as a POSIX path ("." for the root itself), or None when
    it is not inside; both are real paths as realpath gives them (absolute, normalized)."""
    if os.sep != "/":
        try:
            return PurePath(target).relative_to(real_root).as_posix()
        except ValueError:
            return None
    if target == real_root:
        return "."
    prefix = real_root if real_root.endswith("/") else real_root + "/"
    return target[len(prefix) :] if target.startswith(prefix) else None
