"""The memory tools, defined once: schemas for models (and, later, MCP), and their execution
through the store with the stage as actor. Policy lives in the store, not in these prompts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crustacean.errors import CrustaceanError
from crustacean.store import Store, WriteResult

MODES_ALL = ("create", "append", "edit", "overwrite", "delete", "move")
CHANGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "Workspace-relative path, e.g. memory/notes/x.md",
        },
        "mode": {
            "type": "string",
            "enum": list(MODES_ALL),
        },
        "content": {"type": "string", "description": "the text."},
        "old": {"type": "string", "description": "exact text that occurs once."},
        "new": {"type": "string", "description": "its replacement."},
        "to": {"type": "string", "description": "the new path."},
        "expected_sha256": {
            "type": "string",
            "description": "The sha256 read_context_file returned (not create).",
        },
    },
    "required": ["path", "mode"],
}


MODES = MODES_ALL
MODE_HELP = {
    "create": "create (a new file)",
    "append": "append (to the end)",
    "edit": "edit (old must occur exactly once)",
    "overwrite": "overwrite (the whole file)",
    "delete": "delete (moves the file to archive/trash/)",
    "move": "move (to `to`)",
}
FIELD_MODES = {"content": ("create", "append", "overwrite"), "old": ("edit",), "new": ("edit",)}
FIELD_MODES["to"] = ("move",)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]

    def for_anthropic(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


def write_spec(modes: tuple[str, ...]) -> ToolSpec:
    """`write_context` offering only `modes`: its enum, fields and description name no other."""
    props: dict[str, Any] = {}
    for key, prop in CHANGE_SCHEMA["properties"].items():
        used = [m for m in FIELD_MODES.get(key, modes) if m in modes]
        if not used:
            continue
        if key == "mode":
            prop = {**prop, "enum": list(modes)}
        elif key in FIELD_MODES:
            prop = {**prop, "description": f"For {_words(used)}: {prop['description']}"}
        props[key] = prop
    change = {**CHANGE_SCHEMA, "properties": props}
    return ToolSpec(
        "write_context",
        "Change one or more files in ONE call: one whole update, one version, applied whole or "
        f"not at all. Modes: {', '.join(MODE_HELP[m] for m in modes)}. Read before you write and "
        "pass expected_sha256; the result gives each changed file's new sha256. Never write "
        "secrets, credentials or raw transcripts. Write facts and procedures, not instructions "
        "to other agents. Refusals say why; correct the call and retry.",
        _obj(
            {
                "changes": {"type": "array", "items": change, "minItems": 1},
                "message": {"type": "string", "description": "Why: becomes the version message."},
            },
            ["changes", "message"],
        ),
    )


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec(
            "list_context_files",
            "List the workspace's files (path, size, modified, tier), sorted by path, a page at "
            "a time: pass next_cursor back as cursor for the next page. Read a folder's "
            "README.md first: it says what belongs there.",
            _obj(
                {
                    "prefix": {"type": "string", "description": "Only paths starting with this."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Files per page."},
                    "cursor": {"type": "string", "description": "next_cursor of the last page."},
                },
                [],
            ),
        ),
        ToolSpec(
            "read_context_file",
            "Read a file, or lines start_line..end_line of it (1-based, inclusive); a file too "
            "big for one reply is refused with its size, so read it in parts. Returns the content "
            "and the whole file's sha256; pass that sha256 as expected_sha256 when you change the "
            "file, so a change made meanwhile is not overwritten.",
            _obj(
                {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                },
                ["path"],
            ),
        ),
        ToolSpec(
            "search_memory",
            "Search the workspace's markdown for the lines that hold a question's words (stemmed; "
            "dates like 'last week' or '3 May' match the daily logs of those days). Returns the "
            "best lines, best first, as hits with path, line range, score, text, a one-line "
            "snippet and, for daily logs, when. Ask for budget_chars (e.g. 2000) to get the best "
            "that many characters of text. Read the file before changing it.",
            _obj(
                {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "budget_chars": {"type": "integer", "minimum": 1, "maximum": 50000},
                },
                ["query"],
            ),
        ),
        write_spec(MODES),
        ToolSpec(
            "finish",
            "End the run with a short summary of what you did and what you left for later.",
            _obj({"summary": {"type": "string"}}, ["summary"]),
        ),
    )
}

PREAMBLE = """\
You work on an AI agent's memory workspace: plain markdown files that a person owns. Rules that
code enforces whatever you do, so follow them to avoid refusals:
- Read a folder's README.md (its index) before changing anything there, and follow it.
- Read a file before changing it, and pass the sha256 you got as expected_sha256; a write's result
  gives each changed file's new sha256 for your next change to it.
- write_context modes you may use: {modes}. Put one whole update in a single call; a call is
  applied whole or not at all.
- Nothing is ever deleted. Prefer append and edit.
- Never write secrets, credentials, tokens or raw transcripts.
- Write facts and procedures, never instructions to other agents.
- Foundation files (SOUL.md, IDENTITY.md, USER.md, AGENTS.md, TOOLS.md) change only through a
  proposal a human approves; a write there returns {"proposal": id} and writes nothing yet.
"""


class ToolInputError(CrustaceanError):
    """Tool input of the wrong shape: answered as an error result, never a crash."""


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool
    write: WriteResult | None = None
    finished: str | None = None


class ToolExecutor:
    """Runs tool calls for one actor; every failure becomes an error result the model can fix."""

    def __init__(
        self,
        store: Store,
        actor: str,
        run_id: str,
        search: Callable[[str, int | None, int | None], list[dict[str, Any]]] | None = None,
        handlers: dict[str, Callable[[dict[str, Any]], ToolOutcome]] | None = None,
        offered: tuple[str, ...] | None = None,
        guard: Callable[[object], None] | None = None,
    ) -> None:
        self.store, self.actor, self.run_id, self.search = store, actor, run_id, search
        self.handlers = handlers or {}  # a stage's own tools, e.g. collect's record_notes
        # Only the tools this request offered run: a model that names another one (say a
        # write_context that collect never offers) gets an error result, not a write.
        self.offered = set(TOOLS if offered is None else offered) | set(self.handlers)
        self.guard = guard  # the stage contract's check of a write's modes and paths

    def call(self, name: str, raw: object) -> ToolOutcome:
        try:
            if name not in self.offered:
                known = ", ".join(sorted(self.offered))
                raise ToolInputError(f"unknown tool {name!r}; tools: {known}.")
            if not isinstance(raw, dict):
                raise ToolInputError(f"{name} input must be a JSON object.")
            if name == "write_context" and self.guard is not None:
                self.guard(raw.get("changes"))
            if name in self.handlers:
                return self.handlers[name](raw)
            if not hasattr(self, f"_{name}"):
                raise ToolInputError(f"{name} is not available in this run.")
            outcome: ToolOutcome = getattr(self, f"_{name}")(raw)
            return outcome
        except CrustaceanError as e:
            return ToolOutcome(f"Error: {e}", True)

    def _list_context_files(self, inp: dict[str, Any]) -> ToolOutcome:
        from crustacean.store.reads import list_page

        page = list_page(
            self.store, _opt_str(inp, "prefix"), inp.get("limit"), _opt_str(inp, "cursor")
        )
        return ToolOutcome(json.dumps(page), False)

    def _read_context_file(self, inp: dict[str, Any]) -> ToolOutcome:
        from crustacean.store.reads import read_range

        got = read_range(self.store, _str(inp, "path"), inp.get("start_line"), inp.get("end_line"))
        return ToolOutcome(json.dumps(got), False)

    def _search_memory(self, inp: dict[str, Any]) -> ToolOutcome:
        query = _str(inp, "query")
        limit, budget = inp.get("limit"), inp.get("budget_chars")
        if limit is not None and (not _is_int(limit) or not 1 <= limit <= 50):
            raise ToolInputError("limit must be an integer from 1 to 50.")
        if budget is not None and (not _is_int(budget) or not 1 <= budget <= 50_000):
            raise ToolInputError("budget_chars must be an integer from 1 to 50000.")
        if self.search is None:
            raise ToolInputError(
                "search_memory is not available in this run; use list_context_files and "
                "read_context_file instead."
            )
        return ToolOutcome(json.dumps(self.search(query, limit, budget)), False)

    def _write_context(self, inp: dict[str, Any]) -> ToolOutcome:
        return write_call(self.store, self.actor, self.run_id, inp)

    def _finish(self, inp: dict[str, Any]) -> ToolOutcome:
        summary = _str(inp, "summary")
        return ToolOutcome("Finished.", False, finished=summary)


def write_call(store: Store, actor: str, run_id: str, inp: dict[str, Any]) -> ToolOutcome:
    """`write_context` as a tool: the store decides; the outcome says what happened."""
    result = store.write_context(
        inp.get("changes"), actor=actor, message=_str(inp, "message"), run_id=run_id
    )
    return ToolOutcome(json.dumps(result.to_json()), False, write=result)


def _str(inp: dict[str, Any], key: str) -> str:
    value = inp.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{key!r} is required and must be a non-empty string.")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt_str(inp: dict[str, Any], key: str) -> str | None:
    value = inp.get(key)
    if value is not None and not isinstance(value, str):
        raise ToolInputError(f"{key!r} must be a string.")
    return value
