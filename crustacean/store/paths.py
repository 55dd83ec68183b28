"""The path jail: every path a writer names becomes a clean, workspace-relative POSIX path, or
is refused. Nothing outside the workspace, nothing in `.git/` or `.crustacean/`."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from crustacean.errors import PathError

PROTECTED_TOP = (".git", ".crustacean")
MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 200  # the file system allows 255; the store's temp names need the rest


def jail(root: Path, raw: object) -> str:
    """Return `raw` as a normalized relative path inside `root`, or raise `PathError`.

    Symlinks are resolved: one that leads outside the workspace (or into a protected folder) is
    refused; one that stays inside is followed, so the write lands on the real file.
    """
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
    rel = "/".join(parts)
    return _follow_links(root, rel, raw)


def _has_drive(text: str) -> bool:
    return len(text) >= 2 and text[1] == ":" and text[0].isalpha()


def _refuse_protected(parts: list[str], raw: str) -> None:
    if parts[0] in PROTECTED_TOP or parts[0].casefold() == ".crustacean":  # same folder on macOS
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


def _follow_links(root: Path, rel: str, raw: str) -> str:
    """Resolve symlinks on the way; the result must still be inside `root`."""
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / rel))
    if target.is_symlink():  # realpath gave up: the link never reaches a real place
        raise PathError(f"path {raw!r} leads into a symlink loop; remove the link.")
    try:
        resolved = target.relative_to(real_root).as_posix()
    except ValueError:
        raise PathError(
            f"path {raw!r} leads outside the workspace through a symlink; write the real file."
        ) from None
    if resolved == ".":
        raise PathError(
            f"path {raw!r} names the workspace root; give a file path such as notes.md."
        )
    _refuse_protected(resolved.split("/"), raw)
    return resolved
