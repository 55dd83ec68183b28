"""Each stage's own tool: the one call through which a model hands its judgement back.

The schemas are the interface the model reads, so they live with the contract (llm/contract.py)
that generates the stage docs' tool sections from them; each stage reads its answer off them.
"""

from __future__ import annotations

from crustacean.llm.tools import ToolSpec

CATEGORIES = (
    "decision",
    "plan",
    "person",
    "preference",
    "fact",
    "reminder",
    "todo",
    "idea",
    "joke",
    "project",
    "lesson",
)


RECORD_NOTES = ToolSpec(
    "record_notes",
    "Record every concrete fact of the new conversation text that someone could ask about "
    "later, one fact per item. Call it once, with every item; an empty list is a fine answer "
    "when nothing is worth keeping. Items that cite no message, hold a credential or give an "
    "impossible `when` come back refused, each with why: call it once more with only those "
    "items, corrected.",
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "category": {"type": "string", "enum": list(CATEGORIES)},
                        "text": {
                            "type": "string",
                            "description": "One fact in one or two plain sentences; names, "
                            "titles, numbers and places exactly as they were said.",
                        },
                        "refs": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "The references (m12) of the messages it comes from.",
                        },
                        "when": {
                            "type": "string",
                            "description": "YYYY-MM-DD (or YYYY-MM-DD HH:MM) the event happened "
                            "or will happen, before or after the message, when it is not the "
                            "message's own day.",
                        },
                        "date_doubt": {
                            "type": "string",
                            "description": "Only when the date is uncertain: why, and the "
                            "candidates (e.g. 'a Friday three weeks away: 12-18 or 12-25').",
                        },
                        "conflicts": {
                            "type": "string",
                            "description": "Only when it contradicts an earlier statement: "
                            "which (e.g. 'said violin on 2026-11-03').",
                        },
                        "topic": {
                            "type": "string",
                            "description": "Two to six words naming the conversation.",
                        },
                    },
                    "required": ["category", "text", "refs"],
                },
            }
        },
        "required": ["items"],
    },
)


DIGEST_SECTIONS = ("lessons", "graduated", "contradictions", "patterns", "flagged")


RECORD_DIGEST = ToolSpec(
    "record_digest",
    "Give the digest's judgement sections: one short line per item. Call once, before finish. "
    "Code writes the digest file from these and from its own record of every operation.",
    {
        "type": "object",
        "properties": {k: {"type": "array", "items": {"type": "string"}} for k in DIGEST_SECTIONS},
    },
)


RECORD_ROUTING = ToolSpec(
    "record_routing",
    "Report what you did with entries, by id, after the write: the file you wrote each to in "
    "this run, or skip with a reason. The calls of one reply run in order, so this call may "
    "come last in the reply that holds the writes. Code rejects a destination that does not "
    "exist or was not written this run, and says which: write it and report that entry again "
    "(or it comes back next run). Entries recorded are never shown to curate again.",
    {
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "destination": {"type": "string", "description": 'A path, or "skip".'},
                        "also": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Other files you wrote this entry to in this run "
                            "(an entry about two people goes in both contact files).",
                        },
                        "reason": {"type": "string"},
                    },
                    "required": ["id", "destination"],
                },
            }
        },
        "required": ["entries"],
    },
)


RECORD_AUDIT = ToolSpec(
    "record_audit",
    'Give the audit\'s review sections. foundation: one line per foundation file ("No changes" '
    "or what you proposed); pipeline: one line per stage and the structure map; lessons: "
    "validated/updated/archived counts and notes; meta: process changes you propose; "
    "human_review: decisions only a person can make. Call once, before finish. Code writes the "
    "audit file from these, its health check and the pending proposals.",
    {
        "type": "object",
        "properties": {
            "foundation": {"type": "object", "additionalProperties": {"type": "string"}},
            "pipeline": {"type": "object", "additionalProperties": {"type": "string"}},
            "lessons": {"type": "object", "additionalProperties": {"type": ["integer", "string"]}},
            "meta": {"type": "array", "items": {"type": "string"}},
            "human_review": {"type": "array", "items": {"type": "string"}},
        },
    },
)
