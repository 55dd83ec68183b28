"""The memory tools, defined once: schemas for models (and, later, MCP), and their execution
through the store with the stage as actor. Policy lives in the store, not in these prompts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crustacean.errors import CrustaceanError
from crustacean.store import Store, WriteResult
from crustacean.store.policy import MODES

SHA256 = "^[0-9a-fA-F]{64}$"
CHANGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "The file, relative to the workspace root, e.g. memory/notes/tea.md "
            "(no leading /, no ..).",
        },
        "mode": {
            "type": "string",
            "enum": list(MODES),
            "description": "What to do to the file.",
        },
        "content": {"type": "string", "description": "The text to write (markdown)."},
        "old": {
            "type": "string",
            "minLength": 1,
            "description": "Exact text that occurs exactly once in the file.",
        },
        "new": {"type": "string", "description": "The text that replaces old."},
        "to": {
            "type": "string",
            "minLength": 1,
            "description": "The new path, relative to the workspace root.",
        },
        "expected_sha256": {
            "type": "string",
            "pattern": SHA256,
            "description": "The sha256 read_context_file (or your last write) gave for this "
            "file: the change is refused if the file changed since. Not for create.",
        },
    },
    "required": ["path", "mode"],
    "additionalProperties": False,
}

MODE_HELP = {
    "create": "create (a new file; needs content)",
    "append": "append (adds content at the end; needs content)",
    "edit": "edit (replaces old, which must occur exactly once, with new; needs old and new)",
    "overwrite": "overwrite (the whole file; needs content)",
    "delete": "delete (moves the file to archive/trash/)",
    "move": "move (to the path `to`; needs to)",
}
FIELD_MODES = {"content": ("create", "append", "overwrite"), "old": ("edit",), "new": ("edit",)}
FIELD_MODES |= {"to": ("move",), "expected_sha256": tuple(m for m in MODES if m != "create")}


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
            help_ = "; ".join(MODE_HELP[m] for m in modes)
            prop = {**prop, "enum": list(modes), "description": f"What to do: {help_}."}
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
                "changes": {
                    "type": "array",
                    "items": change,
                    "minItems": 1,
                    "maxItems": 100,
                    "description": "The changes, applied together as one version.",
                },
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Why: one line that becomes the version message.",
                },
            },
            ["changes", "message"],
        ),
    )


def _words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _int(low: int, high: int | None, description: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "minimum": low, "description": description}
    return out | ({"maximum": high} if high is not None else {})


LIST_LIMIT = 100  # context.list_limit's default; the MCP server puts the configured one


def list_spec(most: int = LIST_LIMIT) -> ToolSpec:
    """`list_context_files`, its `limit` bounded by `context.list_limit`."""
    return ToolSpec(
        "list_context_files",
        "List the workspace's files (path, size, modified, and tier for memory files: hot, "
        "warm, cold or archive), sorted by path, a page at a time: pass next_cursor back as "
        "cursor, with the same prefix, for the next page. Read a folder's README.md first: it "
        "says what belongs there.",
        _obj(
            {
                "prefix": {
                    "type": "string",
                    "description": "Only paths starting with this, e.g. memory/notes/.",
                },
                "limit": _int(1, most, f"Files per page (default and most: {most})."),
                "cursor": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The next_cursor the previous page returned; omit it for the "
                    "first page.",
                },
            },
            [],
        ),
    )


TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        list_spec(),
        ToolSpec(
            "read_context_file",
            "Read a file, or lines start_line..end_line of it (1-based, inclusive); a file too "
            "big for one reply is refused with its size, so read it in parts. Returns the content "
            "and the whole file's sha256; pass that sha256 as expected_sha256 when you change the "
            "file, so a change made meanwhile is not overwritten.",
            _obj(
                {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The file, relative to the workspace root, e.g. MEMORY.md.",
                    },
                    "start_line": _int(1, None, "First line to read (1-based); omit for line 1."),
                    "end_line": _int(
                        1, None, "Last line to read (inclusive); omit for the end of the file."
                    ),
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
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The question or words to look for.",
                    },
                    "limit": _int(1, 50, "At most this many hits (default 10)."),
                    "budget_chars": _int(
                        1, 50_000, "Instead of limit: the best hits up to this many characters."
                    ),
                },
                ["query"],
            ),
        ),
        write_spec(MODES),
        ToolSpec(
            "finish",
            "End the run with a short summary of what you did and what you left for later.",
            _obj(
                {
                    "summary": {
                        "type": "string",
                        "minLength": 1,
                        "description": "What you did, and what you left for later.",
                    }
                },
                ["summary"],
            ),
        ),
    )
}


def get_context_spec(budget_most: int = 50_000) -> ToolSpec:
    """`get_context` (MCP only): what `crustacean context` prints."""
    return ToolSpec(
        "get_context",
        "The memory an agent should load now, as markdown: MEMORY.md (main only), the "
        "foundation files, today's and yesterday's daily logs, and the memories the tiers and "
        "caps allow, ending with what was left out and how to find it. A topic also loads the "
        "warm and cold memories relevant to it.",
        _obj(
            {
                "audience": {
                    "type": "string",
                    "pattern": AUDIENCE_PATTERN,
                    "description": "Who the context is for: main (the direct chat with your "
                    "human, the default), dm:NAME (a person), group:NAME (a group) or cron.",
                },
                "topic": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What the conversation is about, e.g. garden-api bookings.",
                },
                "budget_chars": _int(
                    1,
                    budget_most,
                    "Characters of memories to load at most (default memory.budget_chars).",
                ),
            },
            [],
        ),
    )


AUDIENCE_PATTERN = "^(main|cron|dm:.+|group:.+)$"
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "array": (list,),
    "object": (dict,),
}
_NAMES = {"string": "a string", "integer": "an integer", "array": "a list", "object": "an object"}


def check_input(spec: ToolSpec, raw: object) -> dict[str, Any]:
    """`raw` checked against `spec.input_schema` (the subset these specs use: types, enums,
    bounds, lengths, patterns, required and unknown fields), or a ToolInputError of one line in
    the tool's own words, naming the field. A null optional field counts as left out."""
    if not isinstance(raw, dict):
        raise ToolInputError(f"{spec.name} takes a JSON object of arguments.")
    _check(spec.input_schema, raw, "", spec.name)
    return {k: v for k, v in raw.items() if v is not None}


def _check(schema: dict[str, Any], value: object, where: str, tool: str) -> None:
    kind = schema.get("type")
    ok = kind is None or (
        isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))
    )
    if not ok:
        got = "null" if value is None else type(value).__name__
        raise ToolInputError(f"{where} must be {_NAMES[str(kind)]}, not {got}.")
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        unknown = sorted(set(value) - set(props))
        if unknown and schema.get("additionalProperties") is False:
            what = f"{tool} has" if not where else f"{where} has"
            raise ToolInputError(
                f"{what} no argument {unknown[0]!r}; it takes {', '.join(props) or 'none'}."
            )
        for key in schema.get("required", []):
            if value.get(key) is None:
                raise ToolInputError(f"{_at(where, key)} is required.")
        for key, sub in props.items():
            if value.get(key) is not None:
                _check(sub, value[key], _at(where, key), tool)
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", 10**9):
            most = schema.get("maxItems")
            raise ToolInputError(
                f"{where} must hold from {schema.get('minItems', 0)} to {most} items, "
                f"not {len(value)}."
            )
        for i, item in enumerate(value):
            _check(schema.get("items", {}), item, f"{where}[{i}]", tool)
    elif isinstance(value, int):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            span = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
            raise ToolInputError(f"{where} must be {span}, not {value:,}.")
    elif isinstance(value, str):
        if "enum" in schema and value not in schema["enum"]:
            raise ToolInputError(
                f"{where} must be one of {', '.join(schema['enum'])}, not {value!r}."
            )
        if len(value) < schema.get("minLength", 0):
            raise ToolInputError(f"{where} must not be empty.")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise ToolInputError(f"{where} {value[:80]!r} is not valid: {schema['description']}")


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


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
