"""What a remembered answer depended on: the workspace as it would be found, and files' bytes.

Stdlib only: a memoized no-op tick (ops/tick_memo.py) and the shell's lean search
(cli/search_fast.py) run this before typer, rich or the config schema load, to tell whether
the answer they remember still holds. Each keeps its own record; these are the parts they share.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

WORKSPACE_ENV = "CRUSTACEAN_WORKSPACE"  # as crustacean.workspace (not imported: it is heavy)
WORKSPACE_FILE = "crustacean.toml"
STATE_DB = Path(".crustacean") / "state.db"


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


def locate(explicit: str | None, env: Mapping[str, str], cwd: Path) -> Path | None:
    """The workspace `workspace.find_workspace` would pick, or None where it would fail."""
    named = explicit if explicit is not None else env.get(WORKSPACE_ENV) or None
    if named is not None:
        path = Path(named).expanduser().resolve()
        return path if (path / WORKSPACE_FILE).is_file() else None
    start = cwd.resolve()
    return next((f for f in (start, *start.parents) if (f / WORKSPACE_FILE).is_file()), None)


def digest(paths: Sequence[str]) -> str:
    """One hash of the bytes of each file (a missing one counts as missing)."""
    h = hashlib.sha256()
    for name in paths:
        try:
            data = Path(name).read_bytes()
        except OSError:
            data = b"\0missing"
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()
