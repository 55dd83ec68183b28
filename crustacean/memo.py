"""What a remembered answer depended on: the workspace as it would be found, and files' bytes.

Stdlib only, and not even pathlib or hashlib (with what they import, ~7 ms of a shell search's
start-up): a memoized no-op tick (ops/tick_memo.py) and the shell's lean search
(cli/search_fast.py) run this before typer, rich or the config schema load, to tell whether
the answer they remember still holds. Each keeps its own record; these are the parts they share.
"""

from __future__ import annotations

import os

from crustacean.lean import blake2b
from crustacean.tree import STATE_DIR

TYPE_CHECKING = False  # typing's import alone is ~3 ms of a lean search
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

WORKSPACE_ENV = "CRUSTACEAN_WORKSPACE"  # as crustacean.workspace (not imported: it is heavy)
WORKSPACE_FILE = "crustacean.toml"
STATE_DB = os.path.join(STATE_DIR, "state.db")


def before_command(argv: Sequence[str], command: str) -> tuple[str | None, int] | None:
    """(the -w/--workspace value or None, the command's index) when nothing but one workspace
    option comes before `command`; else None, and the app parses the arguments."""
    workspace, i = None, 0
    while i < len(argv) and argv[i] != command:
        arg = argv[i]
        if arg in ("-w", "--workspace") and i + 1 < len(argv) and workspace is None:
            workspace, i = argv[i + 1], i + 2
        elif arg.startswith("--workspace=") and workspace is None:
            workspace, i = arg.split("=", 1)[1], i + 1
        else:
            return None
    return None if i == len(argv) else (workspace, i)


def _holds_config(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, WORKSPACE_FILE))


def locate(explicit: str | None, env: Mapping[str, str], cwd: str | os.PathLike[str]) -> str | None:
    """The workspace `workspace.find_workspace` would pick (its `Path.resolve()`d root, as a
    string), or None where it would fail."""
    named = explicit if explicit is not None else env.get(WORKSPACE_ENV) or None
    if named is not None:
        path = os.path.realpath(os.path.expanduser(named))
        return path if _holds_config(path) else None
    folder = os.path.realpath(cwd)
    while True:
        if _holds_config(folder):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def hexdigest(data: bytes) -> str:
    """A 256-bit hex digest of `data`, for memo keys."""
    return blake2b(data, digest_size=32).hexdigest()


def digest(paths: Sequence[str]) -> str:
    """One hash of the bytes of each file (a missing one counts as missing)."""
    h = blake2b(digest_size=32)
    for name in paths:
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError:
            data = b"\0missing"
        h.update(name.encode() + b"\0" + blake2b(data, digest_size=32).digest())
    return h.hexdigest()
