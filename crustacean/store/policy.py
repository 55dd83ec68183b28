"""Who may write where: one table of (modes, path globs) per actor.

Code enforces it, whatever a prompt says, in one order: the actor's table decides first; what it
refuses is refused, unless `ASK_FIRST` lets that actor propose a content change there (calibrate
and MCP clients for the foundation files, calibrate for `memory/.system/`), which then waits in
the review queue. Curate, compile and collect cannot even propose one. A change the table allows
still asks first on a foundation file, and `memory.write = "review"` makes every model write
ask-first; `"off"` refuses model writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache

import pathspec

from crustacean.config import STAGES
from crustacean.workspace import FOUNDATION_FILES, MEMORY_SUBDIRS, SYSTEM_DIR

MODEL_ACTORS = (*STAGES, "mcp")
ACTORS = (*MODEL_ACTORS, "user")
MODES = ("create", "append", "edit", "overwrite", "delete", "move")
WRITE = frozenset({"create", "append", "edit"})

_MEMORY_HOMES = tuple(f"memory/{d}/**" for d in MEMORY_SUBDIRS)
DAILY = "{daily}/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md"

# actor -> rules; a rule is (modes, globs). "move_to" rules say where a move may land.
# `{daily}` is the configured daily-log folder (memory or memory/daily).
POLICY: dict[str, tuple[tuple[frozenset[str], tuple[str, ...]], ...]] = {
    "collect": ((frozenset({"create", "append"}), (DAILY,)),),
    "curate": ((WRITE, (*_MEMORY_HOMES, "knowledge/**", "MEMORY.md", "memory/README.md")),),
    "compile": (
        (
            WRITE,
            (
                *_MEMORY_HOMES,
                "knowledge/**",
                "MEMORY.md",
                "memory/README.md",
                "archive/digests/**",
                "archive/lessons/**",
                "archive/pruned/**",  # done items pruned from a file, moved here in one call
            ),
        ),
        (frozenset({"move", "delete"}), ("memory/**", "knowledge/**", "archive/**")),
        (frozenset({"move_to"}), ("archive/**", "knowledge/**", *_MEMORY_HOMES)),
    ),
    "calibrate": (
        (WRITE, ("archive/audits/**", "archive/lessons/**")),
        (frozenset({"move"}), ("memory/lessons/**",)),
        (frozenset({"move_to"}), ("archive/lessons/**",)),
    ),
    "mcp": (
        (frozenset({"create", "append"}), (DAILY,)),
        (
            WRITE,
            (
                "memory/notes/**",
                "memory/lessons/**",
                "memory/reminders/**",
                "memory/contacts/**",
                "memory/groups/**",
                "MEMORY.md",
            ),
        ),
    ),
}


CONTENT = WRITE | {"overwrite"}  # the modes that change what a file says

# actor -> paths where a content change the table refuses becomes a proposal instead.
ASK_FIRST: dict[str, tuple[str, ...]] = {
    "calibrate": (*FOUNDATION_FILES, SYSTEM_DIR),
    "mcp": FOUNDATION_FILES,
}


class Verdict(Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


@cache
def _spec(actor: str, mode: str, daily: str) -> pathspec.PathSpec[pathspec.Pattern]:
    globs = [
        g.replace("{daily}", daily)
        for modes, gl in POLICY.get(actor, ())
        for g in gl
        if mode in modes
    ]
    return pathspec.PathSpec.from_lines("gitignore", ["/" + g for g in globs])


def allowed(actor: str, mode: str, path: str, daily: str) -> bool:
    if actor == "user":
        return True
    return _spec(actor, mode, daily).match_file(path)


def decide(
    actor: str, mode: str, path: str, *, daily: str, write_setting: str, to: str | None = None
) -> Decision:
    """The verdict on one change, with a reason a model can act on."""
    if actor not in ACTORS:
        return Decision(Verdict.DENY, f"unknown actor {actor!r}; known: {', '.join(ACTORS)}.")
    if actor == "user":
        return Decision(Verdict.ALLOW)
    if write_setting == "off":
        return Decision(
            Verdict.DENY,
            "memory.write is off, so model writes are disabled; report what you would have "
            "written in your finish summary instead.",
        )
    content = mode in CONTENT
    in_system = any(_in_system(p) for p in (path, to or ""))
    if in_system:  # compile's move/delete rule covers memory/**, but never these
        if content and SYSTEM_DIR in ASK_FIRST.get(actor, ()):
            return Decision(
                Verdict.ASK, f"{path} is a pipeline instruction: changes need approval."
            )
        return Decision(
            Verdict.DENY,
            f"{SYSTEM_DIR}/ holds the pipeline instructions; no stage writes, moves or deletes "
            "there (a human edits them).",
        )
    if any(_dreams(p) for p in (path, to or "")):
        return Decision(Verdict.DENY, DREAMS_REASON)
    foundation = path in FOUNDATION_FILES and content
    if not allowed(actor, mode, path, daily):  # moving or deleting one is the table's call
        if foundation and path in ASK_FIRST.get(actor, ()):
            return Decision(Verdict.ASK, _FOUNDATION_ASK.format(path=path))
        if foundation:
            who = _words([_SHOWN.get(a, a) for a in ASK_FIRST])
            return Decision(
                Verdict.DENY,
                f"{path} is a foundation file; {actor} may not change it, not even as a "
                f"proposal (only {who} can propose one, for a human to approve). Leave it as is.",
            )
        return Decision(Verdict.DENY, _denial(actor, mode, path, daily))
    if mode == "move" and to is not None and not allowed(actor, "move_to", to, daily):
        return Decision(Verdict.DENY, f"{actor} may not move files to {to}.{_where(actor, daily)}")
    if foundation:
        return Decision(Verdict.ASK, _FOUNDATION_ASK.format(path=path))
    if write_setting == "review":
        return Decision(Verdict.ASK, "memory.write is review: every model write needs approval.")
    return Decision(Verdict.ALLOW)


_SHOWN = {"mcp": "MCP clients"}
_FOUNDATION_ASK = "{path} is a foundation file: changes need human approval."


# OpenClaw's dreaming owns these (docs.openclaw.ai/concepts/dreaming): its machine state, its
# diary (DREAMS.md, or an existing dreams.md) and its phase reports. compile's move/delete rule
# covers memory/**, so they are named here; no stage writes, moves or deletes them.
DREAMS_FILES = ("dreams.md",)
DREAMS_DIRS = ("memory/.dreams", "memory/dreaming")
DREAMS_REASON = (
    "DREAMS.md, memory/.dreams/ and memory/dreaming/ belong to OpenClaw's dreaming; no stage "
    "writes, moves or deletes them (leave them to OpenClaw)."
)


def _dreams(path: str) -> bool:
    """Case-insensitive, like `_in_system`: DREAMS.md and dreams.md are one file on macOS."""
    low = path.casefold()
    return low in DREAMS_FILES or any(low == d or low.startswith(d + "/") for d in DREAMS_DIRS)


def _in_system(path: str) -> bool:
    """Case-insensitive: on macOS and Windows `memory/.SYSTEM/` is the same folder."""
    low = path.casefold()
    return low == SYSTEM_DIR or low.startswith(SYSTEM_DIR + "/")


def _denial(actor: str, mode: str, path: str, daily: str) -> str:
    can = [m for m in MODES if allowed(actor, m, path, daily)]
    if can:
        hint = f"it may {_words(can)} there"
        if mode in ("delete", "overwrite") and "move" not in can:
            hint += "; nothing is ever deleted or overwritten by this stage"
        return f"{actor} may not {mode} {path}; {hint}."
    return f"{actor} may not write {path}.{_where(actor, daily)}"


def _where(actor: str, daily: str) -> str:
    places = sorted({g.replace("{daily}", daily) for _, gl in POLICY.get(actor, ()) for g in gl})
    return f" Places it may write: {', '.join(places)}." if places else ""


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def is_daily_log(path: str, daily: str) -> bool:
    """`<daily>/YYYY-MM-DD.md`: what collect appends to (hook files have a slug and are not)."""
    return bool(_spec("collect", "append", daily).match_file(path))
