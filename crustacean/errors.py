"""One error family. The CLI translates it once into `Error: …` and an exit code.

Every message says what was wrong and how to fix it, in one or two lines, and never echoes a
secret value.
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C


class CrustaceanError(Exception):
    """Base of every error the user is meant to read."""

    exit_code = EXIT_FAILED


class ConfigError(CrustaceanError):
    """A config file, key, value or flag is wrong."""

    exit_code = EXIT_USAGE


class UsageError(CrustaceanError):
    """A command was called with arguments that cannot work."""

    exit_code = EXIT_USAGE


class WorkspaceNotFoundError(CrustaceanError):
    """No workspace could be located."""

    exit_code = EXIT_USAGE


class LockedError(CrustaceanError):
    """Another run holds the workspace lock."""

    exit_code = EXIT_LOCKED


class WriteError(CrustaceanError):
    """A `write_context` call was refused; nothing of the call was applied."""


class StaleWriteError(WriteError):
    """A file changed since it was read (`expected_sha256` mismatch)."""


class PathError(WriteError):
    """A path escapes the workspace or names a protected place."""


class LimitError(WriteError):
    """A size or count limit was exceeded."""


class SecretError(WriteError):
    """Content looks like a credential."""


class PolicyError(WriteError):
    """The actor may not make this change."""


class RepoBusyError(WriteError):
    """The git repository is mid-merge, mid-rebase (…) or on a detached HEAD."""

    exit_code = EXIT_USAGE


class VersionError(CrustaceanError):
    """A version id is unknown, or versioning cannot do what was asked."""

    exit_code = EXIT_USAGE


class ProposalError(CrustaceanError):
    """A proposal id is unknown or cannot be applied."""

    exit_code = EXIT_USAGE


class SearchQueryError(CrustaceanError):
    """A search query is empty, or (with --raw) not valid FTS5 syntax."""

    exit_code = EXIT_USAGE


class ModelError(CrustaceanError):
    """A model call failed (after retries); the run stops with nothing half-written."""


class NoSpaceError(CrustaceanError):
    """The disk holding the workspace is full. Every write is whole or not at all, so a write
    refused this way left nothing behind."""


NO_SPACE = "no space left on the device holding the workspace"
_FULL = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL = 13  # sqlite3.SQLITE_FULL: "database or disk is full"


def no_space(exc: BaseException) -> NoSpaceError | None:
    """The family's error for a full disk (an OSError ENOSPC or EDQUOT from a write, or SQLite's
    SQLITE_FULL), saying what was written: nothing, or what a note on `exc` names."""
    full = isinstance(exc, OSError) and exc.errno in _FULL
    full = full or getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL
    if not full:
        return None
    notes = getattr(exc, "__notes__", None)
    wrote = notes[-1].rstrip(".") if notes else "nothing was written"
    return NoSpaceError(f"{NO_SPACE}; {wrote}. Free some space there, then run it again.")


def interrupted_line(exc: BaseException) -> str:
    """What a Ctrl-C says: nothing was written, or what a note on `exc` names."""
    notes = getattr(exc, "__notes__", None)
    return "Interrupted; " + (notes[-1] if notes else "nothing was written.")
