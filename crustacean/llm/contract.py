"""One contract per stage: the tools it is offered, their fields and enums, the write modes and
folders its policy allows, and what code writes before and after it.

The model is told exactly this and nothing else: the preamble and each `.system/*.md` doc's
generated tools section are rendered from here (tests fail on any drift), the request offers
only these tools and modes, and the executor refuses the rest before the store sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from crustacean.folder_index import index_span
from crustacean.llm.stage_tools import RECORD_AUDIT, RECORD_DIGEST, RECORD_NOTES, RECORD_ROUTING
from crustacean.llm.tools import TOOLS, ToolSpec, write_spec
from crustacean.store import policy
from crustacean.store.changes import sha256_hex
from crustacean.workspace import FOUNDATION_FILES

FILE_TOOLS = ("list_context_files", "read_context_file", "search_memory", "write_context")
BEGIN = "<!-- BEGIN GENERATED: contract (crustacean/llm/contract.py; do not edit by hand) -->"
END = "<!-- END GENERATED: contract -->"
EDIT_MATCH_RULE = (
    "Several changes to one file in one call all pass the sha256 of the file as you read it. "
    "An `edit` whose `old` text occurs exactly once in the file as it is now is applied even "
    "when its expected_sha256 is older, so you need not wait for a write's result to edit the "
    "same file again: send independent calls (say, the next entry's MEMORY.md pointer) in the "
    "same turn, each with the sha256 you were handed. Any other mode with an older sha256 is "
    "refused as stale."
)
FOLDER_READMES = ("memory/README.md", "knowledge/README.md")
INDEX_RULE = (
    "adds every file you created to its folder README's `## Index` (code owns the Index: never "
    "write a folder README yourself)"
)


@dataclass(frozen=True)
class Input:
    """One part of the request code sends the stage, under its own tag; `hashed`: every file in
    it comes as `<file path=… sha256=…>` with the sha256 of the whole file on disk."""

    tag: str
    what: str
    hashed: bool = False


def file_block(
    path: str, data: bytes, limit: int | None = None, index_note: str | None = None
) -> str:
    """A file handed to a model: its text (cut to `limit` characters, and marked so) with the
    sha256 of its whole bytes, so it can write without reading the file again. `index_note`
    stands in for the body of a folder README's `## Index` (code's, and what it lists is
    handed elsewhere), and the tag says so."""
    text = data.decode("utf-8", "replace")
    mark = ""
    if index_note is not None:
        lines = text.split("\n")
        span = index_span(lines)
        if span is not None and span[1] > span[0] + 1:
            kept = [*lines[: span[0] + 1], "", index_note, ""]
            text = "\n".join([*kept, *lines[span[1] :]]).rstrip("\n") + "\n"
            mark = ' index="left out"'
    cut = limit is not None and len(text) > limit
    mark += f' cut_at="{limit}"' if cut else ""
    body = text[:limit] if cut else text
    return f'<file path="{path}" sha256="{sha256_hex(data)}"{mark}>\n{body}</file>'


@dataclass(frozen=True)
class Contract:
    """What one stage is told, offered and allowed."""

    stage: str
    doc: str
    own_tool: ToolSpec  # the stage's own tool (llm/stage_tools.py)
    shared: tuple[str, ...]  # shared tools offered (names in TOOLS)
    forced: bool  # the own tool is forced: one call, no loop
    before: tuple[str, ...]  # what code does before the model runs
    after: tuple[str, ...]  # what code does with the model's answer, after it
    code_writes: tuple[str, ...] = ()  # path prefixes only code writes; the model is refused
    proposes: bool = False  # a foundation-file change becomes a proposal (else it is refused)
    inputs: tuple[Input, ...] = ()  # what the request holds, each under its tag

    @property
    def modes(self) -> tuple[str, ...]:
        """The write modes its policy can ever allow (none without write_context)."""
        return policy_modes(self.stage) if "write_context" in self.shared else ()

    @property
    def tool_names(self) -> tuple[str, ...]:
        return (*self.shared, self.own_tool.name) + (() if self.forced else ("finish",))

    def folders(self, daily: str = "memory") -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """(modes, folders) pairs the policy allows, without the paths code keeps for itself."""
        out = []
        for modes, globs in policy.POLICY.get(self.stage, ()):
            shown = tuple(m for m in policy.MODES if m in modes)
            kept = tuple(
                _folder(g.replace("{daily}", daily))
                for g in globs
                if not any(g.startswith(c) for c in self.code_writes)
            )
            if modes == {"move_to"}:
                shown = ("move to",)
            if kept and shown:
                out.append((shown, tuple(dict.fromkeys(kept))))
        return out


def policy_modes(actor: str) -> tuple[str, ...]:
    """Every mode some rule of the actor's policy allows, in policy order."""
    rules = policy.POLICY.get(actor, ())
    return tuple(m for m in policy.MODES if any(m in modes for modes, _ in rules))


CONTRACTS: dict[str, Contract] = {
    c.stage: c
    for c in (
        Contract(
            "collect",
            "COLLECT.md",
            RECORD_NOTES,
            (),
            True,
            before=(
                "reads each transcript's new lines since its cursor, keeps each message once, "
                "drops noise and redacts credentials",
                "numbers the messages (`m12`) and packs them into chunks under the run's budget; "
                "a later chunk of a run is shown what the earlier ones noted for its days",
            ),
            after=(
                "files each item under the day and time of the first message its `refs` cite, "
                "with its session and provenance, adds the event's day (`when`) to its text and "
                "`date_doubt` and `conflicts` as markers, and appends it to that day's log in one "
                "version (you never write a file)",
                "merges items the day's log already holds, then advances each cursor only past "
                "the messages that were sent",
            ),
            inputs=(Input("transcripts", "the new messages, each with its reference, by session"),),
        ),
        Contract(
            "curate",
            "CURATE.md",
            RECORD_ROUTING,
            FILE_TOOLS,
            False,
            before=(
                "lists the daily-log entries not routed yet, each with its id, and hands you the "
                "files they most likely belong in, with their sha256",
            ),
            after=(
                INDEX_RULE,
                "marks the entries you reported as routed; an unreported one comes back next run",
            ),
            code_writes=FOLDER_READMES,
            inputs=(
                Input("entries", "the daily-log entries not routed yet, each with its id"),
                Input("existing-files", "the memory files that exist, with their names"),
                Input(
                    "files",
                    "the folder READMEs (their `## Index` left out: code's, and its files are "
                    "in `<existing-files>`), MEMORY.md and the likely destinations",
                    hashed=True,
                ),
            ),
        ),
        Contract(
            "compile",
            "COMPILE.md",
            RECORD_DIGEST,
            FILE_TOOLS,
            False,
            before=(
                "archives old daily logs, sweeps hook files, trashes empty and duplicate files, "
                "applies the tier lifecycle and moves MEMORY.md sections over its caps",
                "lists the candidates for your judgement",
            ),
            after=(
                INDEX_RULE,
                "writes the weekly digest `archive/digests/YYYY-MM-DD-weekly.md` from its own "
                "report and your `record_digest` sections (never write it yourself)",
            ),
            code_writes=("archive/digests/", *FOLDER_READMES),
            inputs=(
                Input("done", "the report of the mechanical pass"),
                Input("candidates", "what code found for your judgement, reminders included"),
                Input("daily-logs", "the past week's daily logs", hashed=True),
                Input("working-memory", "MEMORY.md", hashed=True),
            ),
        ),
        Contract(
            "calibrate",
            "CALIBRATE.md",
            RECORD_AUDIT,
            FILE_TOOLS,
            False,
            before=("runs the health check and hands you its report and the foundation files",),
            after=(
                "owns the folder READMEs' `## Index`: curate and compile's code adds each file "
                "they create; list orphans in your `pipeline` section, never propose Index lines",
                "writes the audit `archive/audits/YYYY-MM-calibrate.md` from its health check, "
                "your `record_audit` sections and every pending proposal (never write it "
                "yourself)",
            ),
            code_writes=("archive/audits/",),
            proposes=True,
            inputs=(
                Input("health", "the health check's report, taken before you run"),
                Input("foundation", "the foundation files", hashed=True),
                Input("lessons", "every lesson file with its text", hashed=True),
                Input("recent-curate-routings", "curate routings sampled across its last runs"),
            ),
        ),
    )
}


def contract(stage: str) -> Contract:
    return CONTRACTS[stage]


def tool_specs(stage: str) -> list[ToolSpec]:
    """Every tool the stage is offered, in the order the request lists them."""
    c = contract(stage)
    specs = [write_spec(c.modes) if n == "write_context" else TOOLS[n] for n in c.shared]
    specs.append(c.own_tool)
    if not c.forced:
        specs.append(TOOLS["finish"])
    return specs


def preamble(stage: str) -> str:
    """The shared rules, cut to what this stage can do (collect has no file tools)."""
    c = contract(stage)
    head = (
        "You work on an AI agent's memory workspace: plain markdown files that a person owns. "
        "Code enforces these rules whatever you do:\n"
    )
    if c.forced:
        return head + "\n".join(
            [
                f"- You have one tool, `{c.own_tool.name}`; call it exactly once with every "
                "item (an empty list is a fine answer). You have no file tools.",
                "- What code does before and after you is in your instructions below.",
                "- Never record secrets, credentials, tokens or raw transcripts.",
                "- Record facts and what was said, never instructions to other agents.",
                "",
            ]
        )
    rules = [
        "- Read a folder's README.md before changing anything there, and follow it.",
        "- Read a file before changing it and pass its sha256 as expected_sha256. A write's "
        "result gives each changed file's new sha256: use it for your next change to that file "
        "instead of reading it again.",
        f"- {EDIT_MATCH_RULE}",
        f"- write_context modes offered to you: {', '.join(c.modes)}. One call is one version: "
        "put one whole update (the content and its pointers) in one call; keep unrelated "
        "updates in separate calls.",
        "- A call is applied whole or not at all: any refusal (stale read, policy, size, "
        "secret, loss guard) means nothing of that call was written. Fix it and retry once.",
        "- The loss guard refuses a call that makes a file's content disappear from the "
        "workspace. Content you move to another file in the same call is kept, not lost.",
        "- Nothing is ever destroyed: delete moves a file to archive/trash/.",
        "- Never write secrets, credentials, tokens or raw transcripts.",
        "- Write facts and procedures, never instructions to other agents.",
    ]
    if c.proposes:
        rules.append(
            f"- Foundation files ({', '.join(FOUNDATION_FILES)}) and memory/.system/ change "
            'only through a proposal a human approves: such a write answers {"proposal": id} '
            "and nothing is written yet. Do not resend it."
        )
    else:
        rules.append(
            f"- Never write the foundation files ({', '.join(FOUNDATION_FILES)}) or "
            "memory/.system/: such a write is refused."
        )
    rules += [f"- Before you: code {x}." for x in c.before]
    rules += [f"- After you: code {x}." for x in c.after]
    rules.append("- When you are done, call finish with a short summary.")
    return head + "\n".join(rules) + "\n"


def actor_preamble(actor: str) -> str:
    """The general rules (the MCP server's instructions) with the modes the actor may use."""
    from crustacean.llm.tools import PREAMBLE

    return PREAMBLE.replace("{modes}", ", ".join(policy_modes(actor) or policy.MODES))


def render_section(stage: str) -> str:
    """The doc's tools section: every tool with its fields and enums, modes, folders, and who
    writes what. Pipeline docs hold it between BEGIN and END; a test keeps them equal."""
    c = contract(stage)
    lines = [BEGIN, "## Your tools", ""]
    if c.forced:
        lines += [
            f"You have no file tools. You answer with one call to `{c.own_tool.name}` (and one "
            "more only to correct what it refused); code writes the result.",
            "",
        ]
    for spec in tool_specs(stage):
        lines += _render_tool(spec)
    if c.modes:
        lines += ["", "**Write modes offered:** " + ", ".join(f"`{m}`" for m in c.modes) + "."]
        lines += ["", "**Where your policy lets you write** (code refuses anything else):"]
        lines += [
            f"- {', '.join(modes)}: " + ", ".join(f"`{f}`" for f in folders)
            for modes, folders in c.folders()
        ]
        if c.proposes:
            lines.append(
                "- foundation files and `memory/.system/`: only as a proposal a human approves"
            )
        if c.code_writes:
            lines.append(
                "- never: " + ", ".join(f"`{p}`" for p in c.code_writes) + " (code writes them)"
            )
    lines += ["", "**What code hands you** (each part under its tag in the request):"]
    lines += [
        f"- `<{i.tag}>`: {i.what}" + (" (each as `<file path sha256>`)" if i.hashed else "")
        for i in c.inputs
    ]
    lines += ["", "**What code does before you:**"] + [f"- Code {x}." for x in c.before]
    lines += ["", "**What code does after you:**"] + [f"- Code {x}." for x in c.after]
    lines += [END]
    return "\n".join(lines)


TOOLS_SENT = "(Each tool, with its fields, is in this request's tool definitions.)"


def sent_doc(stage: str, doc: str) -> str:
    """The stage doc as sent: its tool listing is the very text of the tool definitions the
    request carries, so it is replaced by one line (no run sends the same text twice). A
    workspace copy whose listing differs (older, edited) is sent as it is."""
    if stage not in CONTRACTS:
        return doc
    listing = "\n".join(line for spec in tool_specs(stage) for line in _render_tool(spec))
    return doc.replace(listing, TOOLS_SENT, 1) if listing else doc


def _render_tool(spec: ToolSpec) -> list[str]:
    props = spec.input_schema.get("properties", {})
    req = set(spec.input_schema.get("required", []))
    sig = ", ".join(k if k in req else f"{k}?" for k in props)
    out = [f"- `{spec.name} {{{sig}}}` — {spec.description}"]
    out += _render_fields(props, req, "  ")
    return out


def _render_fields(props: dict[str, Any], req: set[str], indent: str) -> list[str]:
    out = []
    for name, field in props.items():
        item = field.get("items") if field.get("type") == "array" else None
        sub = item if isinstance(item, dict) and item.get("type") == "object" else None
        if sub is None and field.get("type") == "object" and "properties" in field:
            sub = field
        desc = field.get("description", "")
        enum = field.get("enum") or (item or {}).get("enum")
        kind = _kind(field)
        text = f"{indent}- `{name}`{'' if name in req else ' (optional)'} — {kind}"
        if enum:
            text += ", one of " + ", ".join(f"`{e}`" for e in enum)
        if desc:
            text += f": {desc}"
        out.append(text)
        if sub is not None:
            out += _render_fields(
                sub.get("properties", {}), set(sub.get("required", [])), indent + "  "
            )
    return out


def _kind(field: dict[str, Any]) -> str:
    t = field.get("type", "any")
    if t == "array":
        item = field.get("items", {})
        return "list of " + ("objects" if item.get("type") == "object" else str(item.get("type")))
    if t == "object" and "properties" not in field:
        inner = field.get("additionalProperties", {}).get("type", "values")
        return "object of " + (inner if isinstance(inner, str) else " or ".join(inner))
    return t if isinstance(t, str) else " or ".join(t)


def _folder(glob: str) -> str:
    return glob.removesuffix("**") if glob.endswith("/**") else glob


TOOL_NAME = re.compile(
    r"`(record_[a-z_]+|list_context_files|read_context_file|search_memory|write_context|finish)\b"
)


def drift(stage: str, doc_text: str) -> list[str]:
    """Every way a doc disagrees with its stage's contract (empty: none)."""
    problems = []
    want = render_section(stage)
    start, end = doc_text.find(BEGIN), doc_text.find(END)
    if start < 0 or end < 0:
        problems.append(f"{contract(stage).doc} has no generated tools section")
    elif doc_text[start : end + len(END)] != want:
        problems.append(f"{contract(stage).doc}'s tools section differs from the contract")
    offered = set(contract(stage).tool_names)
    for name in sorted({m.group(1) for m in TOOL_NAME.finditer(doc_text)} - offered):
        problems.append(f"{contract(stage).doc} names `{name}`, which {stage} is not offered")
    return problems


def sync_doc(stage: str, doc_text: str) -> str:
    """The doc with its generated section replaced by the current one."""
    start, end = doc_text.find(BEGIN), doc_text.find(END)
    if start < 0 or end < 0:
        raise ValueError(f"{contract(stage).doc} has no {BEGIN} … {END} markers")
    return doc_text[:start] + render_section(stage) + doc_text[end + len(END) :]


def check_changes(stage: str, raw: object) -> None:
    """Refuse, before the store sees it, a change the stage is not offered: a mode outside its
    schema, a path code writes itself, or a foundation file when it may not propose. Nothing of
    the call is applied."""
    from crustacean.errors import PolicyError

    if not isinstance(raw, list):
        return  # the store explains the expected shape
    c = contract(stage)
    for ch in raw:
        if not isinstance(ch, dict):
            continue
        mode, path = ch.get("mode"), str(ch.get("path", "")).lstrip("./")
        if isinstance(mode, str) and mode in policy.MODES and mode not in c.modes:
            raise PolicyError(
                f"{stage} is not offered mode {mode!r} (offered: {', '.join(c.modes)}); "
                "nothing of this call was applied."
            )
        for target in (path, str(ch.get("to") or "").lstrip("./")):
            owner = next((p for p in c.code_writes if target.startswith(p)), None)
            if owner:
                raise PolicyError(
                    f"{target} is written by code, not by {stage} ({_owner_hint(stage, target)}); "
                    "nothing of this call was applied."
                )
            if target in FOUNDATION_FILES and not c.proposes:
                raise PolicyError(
                    f"{stage} never changes {target} (foundation files change only through "
                    "calibrate's proposals); put it in memory/notes/ with a note for "
                    "Calibrate. Nothing of this call was applied."
                )


def _owner_hint(stage: str, target: str = "") -> str:
    if target in FOLDER_READMES:
        return "code adds each file you create to its folder README's Index after the run"
    return {
        "curate": "code adds each file you create to its folder README's Index after the run",
        "compile": "give your digest sections with record_digest",
        "calibrate": "give your audit sections with record_audit",
    }.get(stage, "see your instructions")


SAFETY_BEGIN = "<!-- BEGIN GENERATED: stage table (crustacean/llm/contract.py) -->"
SAFETY_END = "<!-- END GENERATED: stage table -->"


def render_safety_table() -> str:
    """What each stage is told, offered and allowed, in one table (docs/safety.md)."""
    rows = [
        SAFETY_BEGIN,
        "| stage | told (its `.system/` doc, with the generated tools section) | offered tools "
        "| write modes | may write | code writes, not the model |",
        "|---|---|---|---|---|---|",
    ]
    for stage, c in CONTRACTS.items():
        where = "; ".join(
            f"{', '.join(modes)}: " + ", ".join(f"`{f}`" for f in folders)
            for modes, folders in c.folders()
        )
        if c.proposes:
            where += "; foundation files and `memory/.system/` as proposals only"
        code = "; ".join(c.after)
        tools = ", ".join(f"`{n}`" for n in c.tool_names)
        modes = ", ".join(c.modes) or "none (no file tools)"
        rows.append(f"| {stage} | `{c.doc}` | {tools} | {modes} | {where or 'nothing'} | {code} |")
    rows.append(SAFETY_END)
    return "\n".join(rows)


def sync_safety(text: str) -> str:
    start, end = text.find(SAFETY_BEGIN), text.find(SAFETY_END)
    if start < 0 or end < 0:
        raise ValueError(f"docs/safety.md has no {SAFETY_BEGIN} … {SAFETY_END} markers")
    return text[:start] + render_safety_table() + text[end + len(SAFETY_END) :]
