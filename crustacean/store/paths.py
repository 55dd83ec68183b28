"""The path jail: every path a writer names becomes a clean, workspace-relative POSIX path, or
is refused. Nothing outside the workspace, nothing in `.git/` or `.crustacean/`.

Names must also be safe for a person to read and for git on every system to check out:
crustacean escapes odd characters on output, but `ls`, editors and other agents do not, so
control characters, bidirectional controls and other invisible (default-ignorable) code points
are refused, naming the character; so are the names git refuses on macOS and Windows
(`.git` spelled with an invisible character, the reserved device names, a trailing dot or
space).

`Jail` is the same check for the many paths of one call (a compile pass names thousands): the
workspace's real path and each folder's are resolved once per `Jail`, which a writer makes
afresh for every call, so a symlink swapped in between two calls is seen by the second.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
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
    _refuse_unreadable(parts, raw)
    return "/".join(parts)


# Code points a name must not hold, as (first, last, what): C0/C1 controls, the bidirectional
# controls, and the rest of Unicode's Default_Ignorable_Code_Point set (zero-width characters,
# variation selectors, tags, fillers), plus line separators and lone surrogates. Git's own
# `.git` check on HFS+ skips a subset of these (utf8.c), so `.git` + U+200C is a second `.git`.
_BAD_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0000, 0x001F, "a control character"),
    (0x007F, 0x009F, "a control character"),
    (0x061C, 0x061C, "a bidirectional control"),
    (0x200E, 0x200F, "a bidirectional control"),
    (0x202A, 0x202E, "a bidirectional control"),
    (0x2066, 0x2069, "a bidirectional control"),
    (0x00AD, 0x00AD, "an invisible character"),
    (0x034F, 0x034F, "an invisible character"),
    (0x115F, 0x1160, "an invisible character"),
    (0x17B4, 0x17B5, "an invisible character"),
    (0x180B, 0x180F, "an invisible character"),
    (0x200B, 0x200D, "an invisible character"),
    (0x2028, 0x2029, "a line separator"),
    (0x2060, 0x2065, "an invisible character"),
    (0x206A, 0x206F, "an invisible character"),
    (0x3164, 0x3164, "an invisible character"),
    (0xD800, 0xDFFF, "a lone surrogate"),
    (0xFE00, 0xFE0F, "an invisible character"),
    (0xFEFF, 0xFEFF, "an invisible character"),
    (0xFFA0, 0xFFA0, "an invisible character"),
    (0xFFF0, 0xFFFB, "an invisible character"),
    (0x1BCA0, 0x1BCA3, "an invisible character"),
    (0x1D173, 0x1D17A, "an invisible character"),
    (0xE0000, 0xE0FFF, "an invisible character"),
)
_BAD_CHAR = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b, _ in _BAD_RANGES) + "]")
_CONTROL_NAMES = {0x09: "TAB", 0x0A: "LINE FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE"}
# Windows' device names, with or without an extension (`nul.txt` is the device too).
_RESERVED = re.compile(r"(?i)(?:con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)")


def _refuse_unreadable(parts: list[str], raw: str) -> None:
    """Refuse names a person cannot read as written, or git on macOS/Windows cannot check out."""
    bad = _BAD_CHAR.search(raw)
    if bad:
        code = ord(bad[0])
        what = next(w for a, b, w in _BAD_RANGES if a <= code <= b)
        name = _CONTROL_NAMES.get(code) or unicodedata.name(bad[0], "")
        shown = f"U+{code:04X} {name}".rstrip()
        raise PathError(
            f"path {raw!r} has {what} ({shown}) in it: ls, editors and other agents would show "
            "the name wrongly or not at all. Use visible characters only."
        )
    for part in parts:
        if _RESERVED.fullmatch(part.split(".")[0].rstrip(" ")):
            raise PathError(
                f"path {raw!r} uses {part!r}, a name Windows reserves for a device (CON, PRN, "
                "AUX, NUL, COM1-9, LPT1-9): git cannot check it out there. Choose another name."
            )
        if part.endswith((".", " ")):
            raise PathError(
                f"path {raw!r} has a name ending in a dot or a space ({part!r}): Windows drops "
                "it, so git cannot check the file out there. Remove the trailing character."
            )


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
