"""The console script: answer a shell search or a no-op `tick` early, else run the typer app.

Kept to stdlib imports: a `search` whose every input is understood is answered by
crustacean/cli/search_fast.py, and a tick that cron runs every 15 minutes with nothing due from
memory (crustacean/ops/tick_memo.py), before typer, rich or the config schema load. Every other
command, and any search or tick that cannot be answered so, goes to `crustacean.cli.app`
unchanged (and may leave what the next one needs).
"""

from __future__ import annotations

import io
import os
import sys
from datetime import UTC, datetime

TYPE_CHECKING = False  # typing and pathlib, ~8 ms, are not needed to answer a shell search
if TYPE_CHECKING:
    from typing import Any, TextIO


class _Tee:
    """Writes through to a stream and keeps a copy, so a tick's exact output can be kept.

    Everything else (encoding, errors, fileno, isatty, buffer…) is the real stream's: click
    checks the encoding before writing to it, rich takes the fileno on a broken pipe."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)  # bytes raise here, before the real write: click probes so
        return self.inner.write(text)

    def flush(self) -> None:
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main() -> None:
    """`crustacean …`: a search answered before the app loads, a memoized no-op tick, or the
    typer app."""
    argv, env = sys.argv[1:], os.environ
    if len(argv) < 2:  # maybe the root listing, printed before typer loads (cli/help_fast.py)
        # lazy: the command table, stdlib only, tells the listing from `tick`, `paths`…
        from crustacean.cli.commands import LISTING_FORMS

        if tuple(argv) in LISTING_FORMS:
            # lazy: the lean listing's renderer, ~2 ms, is for the root listing alone
            from crustacean.cli import help_fast

            code = help_fast.answer(argv, env, sys.stdout)
            if code is not None:
                raise SystemExit(code)
    search = None
    if "search" in argv:
        # lazy: the lean search's imports, ~15 ms, are for `search` alone
        from crustacean.cli import search_fast

        try:
            search = search_fast.probe(argv, env, os.getcwd())
        except OSError:  # a vanished cwd, say: the ordinary path reports it
            search = None
        if search is not None and search.answer(sys.stdout, sys.stderr):
            return
    memo = None
    if search is None and "tick" in argv:
        # lazy: pathlib, ~4 ms, which a lean search does without
        from pathlib import Path

        # lazy: the memo's imports, ~40 ms, are for `tick` alone
        from crustacean.ops import tick_memo

        try:
            memo = tick_memo.probe(argv, env, Path.cwd(), sys.stdout.isatty())
        except OSError:
            memo = None
    if memo is not None:
        answer = memo.replay(datetime.now(UTC))
        if answer is not None:
            sys.stdout.write(answer)
            sys.stdout.flush()
            return
    # lazy: typer and the app, ~120 ms, are what a replayed tick or a lean search never loads
    from crustacean.cli.app import app

    if search is not None:
        before = search.snapshot()
        code = _run(app)
        if code in (0, None):
            search.remember(before)
        raise SystemExit(code)
    if memo is None:
        app(prog_name="crustacean")
        return
    before_tick = memo.snapshot(env)
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        code = _run(app)
    finally:
        sys.stdout, sys.stderr = out.inner, err.inner
    if code in (0, None) and not err.copy.getvalue():
        memo.store(before_tick, out.copy.getvalue(), env)
    raise SystemExit(code)


def _run(app: Any) -> Any:
    """The app's exit code (what its SystemExit carries)."""
    try:
        app(prog_name="crustacean")
    except SystemExit as e:
        return e.code
    return 0
