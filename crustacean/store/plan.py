"""Planning a call: every check, and each file's new bytes, before any byte is written.

The path jail (`paths.py`), per-actor policy (`policy.py`), the file and MEMORY.md limits, the
secret refusal, the loss guard (`loss.py`) and stale `expected_sha256` all run here, against a
view of the workspace read through the store; a call that fails any of them writes nothing.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from crustacean.clock import Clock
from crustacean.errors import (
    LimitError,
    PolicyError,
    SecretError,
    StaleWriteError,
    WriteError,
)
from crustacean.secrets import find_secrets, table_start
from crustacean.state import DB_NAME, open_state
from crustacean.store import policy
from crustacean.store.changes import Change, parse_changes, sha256_hex
from crustacean.store.loss import Leftover, _lines, _numbered
from crustacean.store.paths import Jail
from crustacean.workspace import TRASH_DIR, WORKING_MEMORY, Workspace

LOSS_GUARDED = ("curate", "compile", "calibrate")  # the stages that edit files they did not write
SECRET_CONTEXT = 2_000  # bytes around a change the result scan reads, either side


class LossTally:
    """What each run has lost of each file so far: (lines when the run first changed it, lines
    lost). Kept in state.db, so the cap holds per run across Store objects; a dry run's overlay
    keeps its own in memory (`persist=False`)."""

    def __init__(self, ws: Workspace, *, persist: bool = True) -> None:
        self.ws = ws
        self.persist = persist
        self.mem: dict[tuple[str, str], tuple[int, int]] = {}

    def get(self, run_id: str, path: str) -> tuple[int, int]:
        if (run_id, path) in self.mem or not self.persist:
            return self.mem.get((run_id, path), (0, 0))
        if not (self.ws.state_dir / DB_NAME).exists():  # no run recorded a loss: read nothing
            return (0, 0)
        with open_state(self.ws) as db:
            return db.loss_of(run_id, path) or (0, 0)

    def add(self, run_id: str | None, tally: dict[str, tuple[int, int]]) -> None:
        if not run_id or not tally:
            return
        self.mem.update({(run_id, p): t for p, t in tally.items()})
        if self.persist:
            with open_state(self.ws) as db:
                db.record_loss(run_id, tally)


@dataclass
class Plan:
    """The outcome of a call, computed without touching the disk."""

    changes: list[Change]
    before: dict[str, bytes | None] = field(default_factory=dict)
    after: dict[str, bytes | None] = field(default_factory=dict)
    ask: list[str] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)  # targets holding a file's bytes unchanged
    trashed: set[str] = field(default_factory=set)  # paths whose bytes before the call are kept
    loss: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (base, lost in run)

    @property
    def touched(self) -> list[str]:
        return [p for p in self.after if self.after[p] != self.before.get(p)]


class Planner:
    """Plans the calls of one store; keeps each run's loss tally between its calls."""

    def __init__(self, ws: Workspace, clock: Clock, read_bytes: Callable[[str], bytes | None]):
        self.ws = ws
        self.root = ws.root
        self.clock = clock
        self.read_bytes = read_bytes  # the store's own: the overlay's view in a dry run
        self.loss_tally = LossTally(ws)

    def plan(
        self,
        raw_changes: object,
        *,
        actor: str,
        max_files: int | None = None,
        run_id: str | None = None,
    ) -> Plan:
        """Validate a call completely and compute each file's new bytes; write nothing."""
        changes = parse_changes(raw_changes)
        limit = self.ws.settings.store.max_files_per_call if max_files is None else max_files
        if len(changes) > limit:
            raise LimitError(
                f"{len(changes)} changes in one call; the limit is {limit} "
                "(store.max_files_per_call). Split it into several calls."
            )
        plan = Plan(changes=[])
        jailed = Jail(self.root)  # this call's folders resolved once: the next call looks again
        for ch in changes:
            ch = Change(
                **{
                    **ch.__dict__,
                    "path": jailed(ch.path),
                    "to": jailed(ch.to) if ch.to is not None else None,
                }
            )
            plan.changes.append(ch)
            self._check_policy(plan, ch, actor)
            self._apply_to_view(plan, ch)
        self._check_limits(plan)
        if actor != "user":
            self._check_working_memory(plan)
        if actor in LOSS_GUARDED:
            plan.loss = self._check_loss(plan, run_id)
        return plan

    def _check_loss(self, plan: Plan, run_id: str | None) -> dict[str, tuple[int, int]]:
        """Refuse a call that makes content disappear: old lines found nowhere in the files the
        call leaves behind (see `loss.lost_lines`). The cap is per file and per run, so many small
        edits cannot do what one large one may not. Returns the run's new tally per file."""
        cfg = self.ws.settings.compile
        rest: Leftover | None = None
        tally: dict[str, tuple[int, int]] = {}
        touched = plan.touched
        split: dict[str, list[str]] = {}

        def after(p: str) -> list[str]:
            """A file's lines as the call leaves it, split once and only when asked: a move's
            thousands of targets never are."""
            if p not in split:
                split[p] = _lines(plan.after[p] or b"")
            return split[p]

        # bytes a moved or trashed target holds whole: a file whose old bytes are one of them
        # (a move's source) loses nothing, each of its lines being verbatim in that target
        whole = {plan.after[t] for t in plan.moved}
        before: dict[str, list[tuple[int, str, str]]] = {}
        for path in touched:
            old = plan.before.get(path)
            if old is None or path in plan.moved or (plan.after[path] is None and old in whole):
                continue
            own = set(after(path))
            numbered = before[path] = _numbered(old)
            if all(x in own for _, _, x in numbered):
                continue  # the common case (appends, additions): nothing of it left the file
            if rest is None:  # built once, only for a call that drops lines somewhere
                left = [after(p) for p in touched if plan.after[p] is not None]
                added = []
                for p in touched:
                    had = {x for _, _, x in before[p]} if p in before else None
                    if had is None:
                        had = set(_lines(plan.before.get(p) or b""))
                    added.append([x for x in after(p) if x not in had])
                rest = Leftover(left, added)
            lost = [(n, raw.strip()) for n, raw, line in numbered if not rest.keeps(line)]
            if not lost:
                continue
            base, before_lost = self.loss_tally.get(run_id, path) if run_id else (0, 0)
            base = base or len(numbered)
            total = before_lost + len(lost)
            cap = max(cfg.loss_floor_lines, int(cfg.max_loss_fraction * base))
            if total > cap:
                shown = "; ".join(f"{n}: {text[:60]!r}" for n, text in lost[:3])
                more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
                earlier = f" (after {before_lost} lost earlier this run)" if before_lost else ""
                raise LimitError(
                    f"refused, nothing of this call was applied: {path} would lose "
                    f"{len(lost)} line(s){earlier}, found nowhere the call leaves behind — "
                    f"line {shown}{more}. A run may lose at most {cap} of its {base} lines "
                    f"(compile.max_loss_fraction {cfg.max_loss_fraction:g}, at least "
                    f"compile.loss_floor_lines {cfg.loss_floor_lines}). Keep the lines, or move "
                    "them to another file (e.g. under archive/pruned/) in the same call."
                )
            tally[path] = (base, total)
        return tally

    def _current(self, plan: Plan, path: str) -> bytes | None:
        if path in plan.after:
            return plan.after[path]
        if path not in plan.before:
            if os.path.isdir(os.path.join(self.root, path)):
                raise WriteError(f"{path} is a folder, not a file; name a file inside it.")
            plan.before[path] = self.read_bytes(path)
        return plan.before[path]

    def _write_setting(self, actor: str) -> str:
        """memory.write for every model; mcp.write narrows it further for the MCP server."""
        setting: str = self.ws.settings.memory.write
        if actor == "mcp" and setting != "off":
            mcp = self.ws.settings.mcp.write
            setting = {"off": "off", "ask": "review"}.get(mcp, setting)
        return setting

    def _check_policy(self, plan: Plan, ch: Change, actor: str) -> None:
        if actor == "mcp" and policy.is_daily_log(ch.path, self.ws.daily_dir):
            today = self.ws.daily_log(self.ws.today(self.clock()))
            if ch.path != today:
                raise PolicyError(
                    f"mcp may append only to today's daily log ({today}); "
                    f"{ch.path} is another day's."
                )
        decision = policy.decide(
            actor,
            ch.mode,
            ch.path,
            daily=self.ws.daily_dir,
            write_setting=self._write_setting(actor),
            to=ch.to,
        )
        if decision.verdict is policy.Verdict.DENY:
            raise PolicyError(decision.reason)
        if decision.verdict is policy.Verdict.ASK:
            plan.ask.append(decision.reason)

    def _apply_to_view(self, plan: Plan, ch: Change) -> None:
        cur = self._current(plan, ch.path)
        if ch.expected_sha256 is not None and not _edit_still_applies(ch, cur):
            disk = plan.before.get(ch.path)
            if disk is None or sha256_hex(disk) != ch.expected_sha256:
                raise StaleWriteError(
                    f"{ch.path} changed since it was read (expected_sha256 does not match); "
                    "read it again and redo the change. Nothing was written."
                )
        if ch.mode != "create" and ch.mode != "append" and cur is None:
            raise WriteError(f"{ch.mode}: {ch.path} does not exist; use create for a new file.")
        match ch.mode:
            case "create":
                if cur is not None:
                    raise WriteError(
                        f"create: {ch.path} already exists; read it, then use edit or append."
                    )
                plan.after[ch.path] = ch.content
            case "append":
                base = cur or b""
                sep = b"\n" if base and not base.endswith(b"\n") else b""
                plan.after[ch.path] = base + sep + (ch.content or b"")
            case "edit":
                assert cur is not None and ch.old is not None and ch.new is not None
                count = cur.count(ch.old) if ch.old else 0
                if count == 0:
                    raise WriteError(
                        f"edit: the old snippet does not occur in {ch.path} (0 times); "
                        "read the file and copy the snippet exactly."
                    )
                if count > 1:
                    raise WriteError(
                        f"edit: the old snippet occurs {count} times in {ch.path}; it must "
                        "occur exactly once. Quote more surrounding text so it is unique."
                    )
                plan.after[ch.path] = cur.replace(ch.old, ch.new, 1)
            case "overwrite":
                plan.after[ch.path] = ch.content
            case "delete":
                # the trash gets what the file held before this call, and what the call made
                # of it first when that differs: neither is left only in git's history
                original = None if ch.path in plan.trashed else plan.before.get(ch.path)
                plan.trashed.add(ch.path)
                for data in dict.fromkeys(d for d in (original, cur) if d is not None):
                    dest = self._trash_path(plan, ch.path)
                    plan.after[dest] = data
                    plan.moved.add(dest)
                plan.after[ch.path] = None
            case "move":
                assert ch.to is not None
                if self._current(plan, ch.to) is not None:
                    raise WriteError(f"move: {ch.to} already exists; choose another target.")
                plan.after[ch.to] = cur
                plan.after[ch.path] = None
                plan.moved.add(ch.to)

    def _trash_path(self, plan: Plan, path: str) -> str:
        day = self.ws.today(self.clock()).isoformat()
        base = f"{TRASH_DIR}/{day}/{path}"
        candidate, n = base, 1
        while self._current(plan, candidate) is not None:
            n += 1
            p = PurePosixPath(base)
            candidate = str(p.with_name(f"{p.stem}~{n}{p.suffix}"))
        return candidate

    def _check_working_memory(self, plan: Plan) -> None:
        """MEMORY.md is loaded every main session: a model may not push it over its caps."""
        data = plan.after.get(WORKING_MEMORY)
        if data is None or WORKING_MEMORY not in plan.touched:
            return
        mem = self.ws.settings.memory
        lines, chars = _size(data)
        was_lines, was_chars = _size(plan.before.get(WORKING_MEMORY) or b"")
        # each cap on its own: an edit may shrink the characters and still add hundreds of lines
        if (lines > mem.working_lines and lines > was_lines) or (
            chars > mem.working_chars and chars > was_chars
        ):
            raise LimitError(
                f"MEMORY.md would be {lines} lines / {chars:,} characters; its caps are "
                f"{mem.working_lines} lines and {mem.working_chars:,} characters "
                "(memory.working_lines, memory.working_chars). Put the detail in its own file "
                "(a contact, topic or note) and leave a one-line pointer in MEMORY.md instead."
            )

    def _check_limits(self, plan: Plan) -> None:
        cap = self.ws.settings.store.max_file_bytes
        for path, data in plan.after.items():
            if data is not None and len(data) > cap and path not in plan.moved:
                raise LimitError(
                    f"{path} would be {len(data):,} bytes; the limit is {cap:,} "
                    "(store.max_file_bytes). Split it into smaller files."
                )
        for i, ch in enumerate(plan.changes):
            for name in (ch.path, ch.to):
                if name is not None:
                    _refuse_secret(name, f"the path of changes[{i}]")
            found = find_secrets(ch.added_text().decode("utf-8", "replace"))
            if found:
                raise SecretError(
                    f"refused: line {found[0].line} of the content for {ch.path} looks like a "
                    f"credential ({found[0].kind}). Never write credentials to memory; remove it."
                )
        for path in plan.touched:  # what the file becomes: two harmless pieces can make a key
            new = plan.after[path]
            if new is not None and path not in plan.moved:
                line, kind = _new_secret(plan.before.get(path), new)
                if kind:
                    raise SecretError(
                        f"refused: line {line} of {path} as this change would leave it looks "
                        f"like a credential ({kind}). Never write credentials to memory."
                    )

    # ------------------------------------------------------------ writing


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse_secret(text: str, what: str) -> None:
    found = find_secrets(text)
    if found:
        raise SecretError(
            f"refused: {what} looks like a credential ({found[0].kind}). Never write "
            "credentials to memory; remove it."
        )


def _new_secret(old: bytes | None, new: bytes) -> tuple[int, str | None]:
    """A credential the change creates in the file (line, kind), or (0, None).

    Only the changed span and SECRET_CONTEXT bytes around it are read, in the file before and
    after: one already there (the user's own) is not new, an edit splicing two pieces is. Every
    detector but the PEM block sees one line at a time, and the lines outside the changed ones
    are the same before and after, so without a PEM marker nearby the changed lines suffice."""
    old = old or b""
    start = common_prefix(old, new)
    tail = common_prefix(old[start:][::-1], new[start:][::-1]) if old else 0
    lo = new.rfind(b"\n", 0, max(start - SECRET_CONTEXT, 0)) + 1
    new_hi = _line_end(new, len(new) - tail + SECRET_CONTEXT)
    old_hi = _line_end(old, len(old) - tail + SECRET_CONTEXT)
    if b"-----BEGIN" not in new[lo:new_hi] and b"-----BEGIN" not in old[lo:old_hi]:
        # a tier line in a 3 KB note: that line is scanned, not the whole note twice
        lo = table_start(new, start)  # a table row is judged by its header line
        new_hi = _line_end(new, len(new) - tail)
        old_hi = _line_end(old, len(old) - tail)
    before = Counter(f.kind for f in find_secrets(old[lo:old_hi].decode("utf-8", "replace")))
    for f in find_secrets(new[lo:new_hi].decode("utf-8", "replace")):
        if before[f.kind] > 0:
            before[f.kind] -= 1
            continue
        return new.count(b"\n", 0, lo) + f.line, f.kind
    return 0, None


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix: spans halved until they differ, compared at C speed (a byte
    at a time in Python costs a second over a compile's thousands of small files)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; the prefix ends at or before hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _line_end(data: bytes, at: int) -> int:
    end = data.find(b"\n", min(max(at, 0), len(data)))
    return len(data) if end < 0 else end


def _size(data: bytes) -> tuple[int, int]:
    """(lines, characters) of a text as the MEMORY.md caps count them."""
    text = data.decode("utf-8", "replace")
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1), len(text)


def check_message(message: object) -> None:
    """A version message says what the change is, in plain text, and holds no credential."""
    if not isinstance(message, str) or not message.strip():
        raise WriteError("message must say what the change is (a non-empty string).")
    if "\x00" in message or not _utf8(message):
        raise WriteError("message must be plain UTF-8 text (no NUL, no lone surrogates).")
    _refuse_secret(message, "the version message")


def _edit_still_applies(ch: Change, cur: bytes | None) -> bool:
    """An edit whose old snippet occurs exactly once in the file as it is now is applied even
    when its expected_sha256 is of an older version: the snippet proves the writer saw the text
    it changes, so a content change and its MEMORY.md pointer can go in one turn of parallel
    calls, each with the sha256 the model was handed. Every other mode needs the current sha."""
    return ch.mode == "edit" and cur is not None and bool(ch.old) and cur.count(ch.old or b"") == 1
