"""Git's own housekeeping after a version, as `git commit` does it and plumbing never does.

`git commit` ends with `git maintenance run --auto`, which packs loose objects and merges small
packs once there are enough of them. The store writes its versions with plumbing and in Python
(gitwrite), so without this a workspace nobody runs git in by hand (cron writes every few hours,
forever) would gather loose objects and packs without bound, and every git read would slow down.

Starting a git process after every write would cost more than the write, so the check is made
here first, the way `gc --auto` decides it (git's builtin/gc.c `need_to_gc`): the loose objects
in `objects/17` against `gc.auto`/256, the local packs without a `.keep` against
`gc.autoPackLimit`, from the config the store already read (`gitwrite.Facts.upkeep`). Only when
it holds does git itself run `git maintenance run --auto --quiet`, with `--detach` or
`--no-detach` from `maintenance.autoDetach`/`gc.autoDetach` as `git commit` passes them (a git
older than 2.47 knows no such option: then its gc detaches by `gc.autoDetach` itself); git honours
the user's maintenance and gc settings and takes its own lock. It runs after the version is safe,
so its failure is logged and never fails or undoes the write.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crustacean.store import gitread

SAMPLE = "17"  # the fan-out folder git counts to estimate all loose objects (1/256 of them)
GC_AUTO = 6700  # git's defaults for gc.auto and gc.autoPackLimit
GC_AUTO_PACK_LIMIT = 50
COMMAND = ("maintenance", "run", "--auto", "--quiet")  # what `git commit` runs
USAGE = 129  # git's exit code for an option it does not know
_HEX = frozenset("0123456789abcdef")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What the repository's config says about auto maintenance (git's defaults otherwise)."""

    gc_auto: int = GC_AUTO  # gc.auto: 0 or less and gc --auto never runs
    pack_limit: int = GC_AUTO_PACK_LIMIT  # gc.autoPackLimit: 0 or less and packs never count
    auto: bool = True  # maintenance.auto: false and `git commit` runs nothing after a commit
    detach: bool = True  # maintenance.autoDetach, else gc.autoDetach: in the background
    hex_len: int = 38  # an object file's name length (SHA-1; 62 with SHA-256)
    why_not: str = ""  # a setting that keeps it from running here (unreadable, unsafe)


@dataclass(frozen=True)
class Sample:
    """What the check counted: loose objects in objects/17 (up to one past the threshold),
    and local packs without a .keep."""

    loose: int
    packs: int


def _git_int(text: str) -> int | None:
    """An integer as git's config reads one (strtoimax base 0, then a k/m/g unit)."""
    text = text.strip().lower()
    unit = text[-1:] if text[-1:] in ("k", "m", "g") else ""
    digits = text[: len(text) - len(unit)]
    sign = -1 if digits.startswith("-") else 1
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    try:
        if digits.startswith("0x"):
            number = int(digits[2:], 16)
        elif digits.startswith("0") and len(digits) > 1:
            number = int(digits[1:], 8)
        else:
            number = int(digits, 10)
    except ValueError:
        return None
    return sign * number * _UNITS[unit]


def _git_bool(value: str | None) -> bool | None:
    """A boolean as git reads one: no value is true, "" false, words, else an integer."""
    if value is None:
        return True
    word = value.strip().lower()
    if word in ("true", "yes", "on"):
        return True
    if word in ("false", "no", "off", ""):
        return False
    number = _git_int(word)
    return None if number is None else number != 0


def limits(listing: bytes) -> Limits:
    """Limits from `git config -l -z` output (the last value of a key wins, as in git)."""
    values: dict[str, str | None] = {}
    for item in listing.split(b"\0"):
        if item:
            key, sep, value = item.decode("utf-8", "surrogateescape").partition("\n")
            values[key] = value if sep else None
    why = ""
    numbers = {}
    for key, default in (("gc.auto", GC_AUTO), ("gc.autopacklimit", GC_AUTO_PACK_LIMIT)):
        raw = values.get(key, str(default))
        number = None if raw is None else _git_int(raw)
        if number is None:
            why = why or f"{key} is not a number"
        numbers[key] = default if number is None else number
    flags = {}
    for key in ("maintenance.auto", "maintenance.autodetach", "gc.autodetach"):
        flags[key] = _git_bool(values[key]) if key in values else None
        if key in values and flags[key] is None:
            why = why or f"{key} is not a boolean"
    auto = flags["maintenance.auto"] is True or "maintenance.auto" not in values
    detach = next(
        (f for f in (flags["maintenance.autodetach"], flags["gc.autodetach"]) if f is not None),
        True,
    )
    if (values.get("gc.pruneexpire") or "").strip().lower() == "now":
        # git's docs: pruning at once is unsafe next to a process writing objects; the next
        # version may be writing them while the gc runs, so that gc is the user's to start
        why = why or "gc.pruneExpire is now"
    sha256 = (values.get("extensions.objectformat") or "").lower() == "sha256"
    return Limits(
        gc_auto=numbers["gc.auto"],
        pack_limit=numbers["gc.autopacklimit"],
        auto=auto,
        detach=detach,
        hex_len=62 if sha256 else 38,
        why_not=why,
    )


def due(sample: Sample, limits: Limits) -> str:
    """Why git's auto maintenance would do work now ("" when it would not): gc --auto's rule,
    too many packs first, else too many loose objects in the sample."""
    if not limits.auto or limits.why_not or limits.gc_auto <= 0:
        return ""
    if limits.pack_limit > 0 and sample.packs > limits.pack_limit:
        return f"{sample.packs} packs, over gc.autoPackLimit {limits.pack_limit}"
    if sample.loose > -(-limits.gc_auto // 256):
        return f"about {sample.loose * 256} loose objects, over gc.auto {limits.gc_auto}"
    return ""


def sample(objects: Path, limits: Limits) -> Sample:
    """Count what `due` needs, with two folder listings: loose objects in objects/17 (stopping
    one past the threshold) and the local packs git would load (an .idx with its .pack),
    those with a .keep left out."""
    cap = -(-max(limits.gc_auto, 0) // 256) + 1
    loose = 0
    try:
        with os.scandir(objects / SAMPLE) as entries:
            for entry in entries:
                name = entry.name
                if len(name) == limits.hex_len and _HEX.issuperset(name):
                    loose += 1
                    if loose >= cap:
                        break
    except OSError:
        pass
    try:
        names = set(os.listdir(objects / "pack"))
    except OSError:
        names = set()
    packs = 0
    for name in names:
        if name.endswith(".idx"):
            base = name[:-4]
            if f"{base}.pack" in names and f"{base}.keep" not in names:
                packs += 1
    return Sample(loose=loose, packs=packs)


def after_commit(root: Path, config: Callable[[], Limits], busy: Callable[[], str | None]) -> str:
    """Run git's auto maintenance when `due` says it has work, as `git commit` would after its
    commit, with the limits `config` reads; never raises. Returns what happened ("" when
    nothing ran), for the log and the tests.

    A repository whose objects are not plain `.git/objects` (a linked worktree, git variables
    that move it) is git's to judge: it runs as after every `git commit`. Nothing runs while
    the user's merge or rebase is in progress (`busy`); the next version checks again."""
    try:
        limits = config()
        if not limits.auto:
            return ""
        git_dir = gitread.plain_git_dir(root)
        if git_dir is None:
            why = "git decides (not a plain repository)"
        else:
            why = due(sample(git_dir / "objects", limits), limits)
        if not why:
            return ""
        what = busy()
        if what is not None:
            log.debug("git's housekeeping waits: %s is in progress", what)
            return ""
        return _run(root, why, limits.detach)
    except Exception as err:  # housekeeping after a version that is safe: never its failure
        log.warning(
            "git's housekeeping after a version could not start (%s); the version is kept", err
        )
        return ""


def _run(root: Path, why: str, detach: bool) -> str:
    """`git maintenance run --auto --quiet --[no-]detach` in the workspace, waited for as
    `git commit` waits (detached, git returns once the work moved to the background); again
    without the option when this git does not know it."""
    log.debug("git's housekeeping runs: %s", why)
    code, lines = _git(root, [*COMMAND, "--detach" if detach else "--no-detach"])
    if code == USAGE and any("detach" in line for line in lines):
        code, lines = _git(root, list(COMMAND))
    if code == 0:
        return f"ran: {why}"
    said = [x.strip() for x in lines if x.startswith(("fatal:", "error:"))] or [
        x.strip() for x in lines if x.strip()
    ]
    detail = said[0] if said else f"exit code {code}"
    log.warning(
        "git's housekeeping after a version failed (%s); the version is kept. Run "
        "`git maintenance run --auto` in %s to see why.",
        detail,
        root,
    )
    return f"failed: {detail}"


def _git(root: Path, args: list[str]) -> tuple[int, list[str]]:
    """Run git in `root`; its exit code and stderr lines. Stderr goes to a file, not a pipe, so
    a detached child that keeps it open can never keep this waiting."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.run(
            ["git", *args],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            check=False,
        )
        err.seek(0)
        return proc.returncode, err.read().decode("utf-8", "replace").splitlines()
