"""Benchmark curate's token economy: input tokens per routed entry, through the fake API.

Run: `.venv/bin/python bench/curate_bench.py [--people 10] [--entries 2]`. A workspace with PEOPLE
contact files (about 15 lines each) and three daily logs holding ENTRIES entries about each person
is curated twice, with the same scripted model, through the real agent loop and SDK against the
local fake Messages API:

- **baseline, nothing handed**: the request as it was before this change (no files with the
  entries). The scripted model does what a real model did in that situation: reads the READMEs
  and MEMORY.md, then for each destination reads the file in one turn and writes it in the next.
- **handed**: the request as it is now, with the READMEs, MEMORY.md and each likely destination
  (content and sha256) handed with the entries. The scripted model reads in one turn the
  destinations that were not handed (beyond `HAND_FILES`), writes every destination in one turn
  with the sha256s it was handed or read, and reports the routing.

Input tokens are measured from the request bodies the fake server received (characters / 4),
every turn counted whole, and billed as the API's prompt cache would (`bench/prompt_cache.py`:
tools, system, messages in that order, read up to the longest prefix an earlier breakpoint wrote,
written up to the last breakpoint); "uncached" is what is not a cache read (cache writes and plain
input). Output tokens are the scripted replies' JSON / 4. USD per routed entry is that bill at the
mid tier's list prices (`[prices].mid`). The model's behaviour is scripted, so the figure measures
the request shape and the turns it needs, not a real model's choices.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakeapi import FakeAnthropic, tool_use

from bench.common import data_size, isolate, row
from bench.prompt_cache import PromptCache
from crustacean.config import load_config
from crustacean.llm.loop import min_cacheable_tokens
from crustacean.ops.init import init_workspace
from crustacean.stages import curate as curate_mod
from crustacean.store.changes import sha256_hex
from crustacean.usage import cost
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
NAMES = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas"]
NAMES += ["Kofi", "Lena", "Marta", "Nuno", "Olga", "Pedro", "Quim"]
SHAPES = {  # name: (files handed with the entries, how the scripted model reads)
    "nothing handed, one read then one write per file": (False, "serial"),
    "nothing handed, all reads in one turn (baseline)": (False, "parallel"),
    "handed destinations": (True, "none"),
}


def build(root: Path, people: int, per_person: int) -> dict[str, list[str]]:
    """Contacts and daily logs; returns each contact path's entry texts."""
    init_workspace(root, detect=False)
    routes: dict[str, list[str]] = {}
    logs = {d: [f"# {d}", "", "### [09:00] chats", ""] for d in DAYS}
    for i, name in enumerate(NAMES[:people]):
        path = f"memory/contacts/telegram-{name.lower()}.md"
        facts = [
            f"- 2026-10-{d:02d} — {name} mentioned detail {d} about work and family."
            for d in range(1, 13)
        ]
        (root / path).write_text(f"---\nname: {name}\n---\n# {name}\n\n" + "\n".join(facts) + "\n")
        for k in range(per_person):
            text = f"[person] {name} said something new, number {k}, about the trip in December."
            logs[DAYS[(i + k) % 3]].append(f"- {text}")
            routes.setdefault(path, []).append(text)
    for day, lines in logs.items():
        (root / f"memory/{day}.md").write_text("\n".join(lines) + "\n")
    return routes


def script(root: Path, routes: dict[str, list[str]], reads: str) -> list[dict[str, Any]]:
    """The scripted model's replies for one run."""
    ids = {
        e.text: e.id
        for day in DAYS
        for e in curate_mod.parse_entries(day, (root / f"memory/{day}.md").read_text())
    }

    def write(path: str, texts: list[str], sha: str | None) -> tuple[str, dict[str, Any]]:
        change: dict[str, Any] = {
            "path": path,
            "mode": "append",
            "content": "".join(f"- 2026-11-30 — {t.removeprefix('[person] ')}\n" for t in texts),
        }
        if sha:
            change["expected_sha256"] = sha
        return ("write_context", {"changes": [change], "message": f"curate: {path}"})

    routing = (
        "record_routing",
        {
            "entries": [
                {"id": ids[t], "destination": p} for p, texts in routes.items() for t in texts
            ]
        },
    )
    finish = tool_use(("finish", {"summary": "routed"}))
    if reads == "none":
        sha = {p: sha256_hex((root / p).read_bytes()) for p in routes}
        writes = [write(p, t, sha[p]) for p, t in routes.items()]
        unhanded = [p for p in routes if p not in handed_paths(root)]
        first_reads = [tool_use(*[("read_context_file", {"path": p}) for p in unhanded])]
        return [*(first_reads if unhanded else []), tool_use(*writes), tool_use(routing), finish]
    first = tool_use(
        *[
            ("read_context_file", {"path": p})
            for p in ("memory/README.md", "knowledge/README.md", "MEMORY.md")
        ]
    )
    turns = [first]
    if reads == "parallel":
        turns.append(tool_use(*[("read_context_file", {"path": p}) for p in routes]))
        turns.append(tool_use(*[write(p, t, None) for p, t in routes.items()]))
        return [*turns, tool_use(routing), finish]
    for path, texts in routes.items():
        turns.append(tool_use(("read_context_file", {"path": path})))
        turns.append(tool_use(write(path, texts, None)))
    return [*turns, tool_use(routing), finish]


def handed_paths(root: Path) -> set[str]:
    """The files curate's request hands over (the rest the scripted model reads first)."""
    from crustacean.state import open_state
    from crustacean.store import Store

    ws = Workspace(root, load_config(root))
    store = Store(ws)
    with open_state(ws) as db:
        entries = curate_mod.pending_entries(ws, db, store, NOW, ws.settings.curate.days)
    prompt = curate_mod.request_for(ws, store, entries).prompt
    return set(re.findall(r'<file path="([^"]+)"', prompt))


def measure(tmp: Path, people: int, per_person: int, shape: str) -> dict[str, float]:
    handed, reads = SHAPES[shape]
    root = tmp / reads
    routes = build(root, people, per_person)
    original = curate_mod.handed_files
    if not handed:  # the request as it was: nothing handed with the entries
        curate_mod.handed_files = lambda *a, **k: ""  # type: ignore[assignment]
    try:
        with FakeAnthropic() as fake:
            env = {"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": fake.url}
            ws = Workspace(root, load_config(root, env=env, overrides=["llm.max_retries=0"]))
            replies = script(root, routes, reads)
            fake.enqueue(*replies)
            result = curate_mod.curate(ws, env=env, clock=lambda: NOW)
            bodies = [m.body for m in fake.messages()]
    finally:
        curate_mod.handed_files = original
    routed = sum(result.routed.values())
    assert routed == sum(len(t) for t in routes.values()), (result.routed, result.skipped)
    model = ws.settings.models.mid
    cache = PromptCache(min_cacheable_tokens(model))
    for body, reply in zip(bodies, replies, strict=True):
        cache.send(body, len(json.dumps(reply["content"])) // 4)
    bill = cache.bill
    return {
        "turns": len(bodies),
        "routed": routed,
        "per_entry": bill.total_input / routed,
        "uncached_per_entry": (bill.input_tokens + bill.cache_write_tokens) / routed,
        "output_per_entry": bill.output_tokens / routed,
        "usd_per_entry": cost(bill, ws.settings.prices.mid) / routed,
        "first": bill_first(bodies[0]),
    }


def bill_first(body: dict[str, Any]) -> int:
    """The first request's input tokens (nothing cached yet)."""
    return PromptCache(0).send(body).total_input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=10)
    parser.add_argument("--entries", type=int, default=2, help="entries per person")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        got = {name: measure(Path(tmp), args.people, args.entries, name) for name in SHAPES}
    before, after = (
        got["nothing handed, all reads in one turn (baseline)"],
        got["handed destinations"],
    )
    size = f"{args.people} contacts, {before['routed']:.0f} entries over 3 daily logs"
    data_size(size)
    print(f"curate token economy ({size}; scripted model, fake API)\n")
    print(
        "| request | turns | input tokens / routed entry | uncached / entry | output / entry "
        "| USD / entry (list) | first turn |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, m in got.items():
        print(
            f"| {name} | {m['turns']:.0f} | {m['per_entry']:,.0f} | "
            f"{m['uncached_per_entry']:,.0f} | {m['output_per_entry']:,.0f} | "
            f"${m['usd_per_entry']:.5f} | {m['first']:,.0f} |"
        )
    ratio = after["per_entry"] / before["per_entry"]
    print(f"\nhanded / baseline: {ratio:.2f}x input tokens per routed entry")
    serial = got["nothing handed, one read then one write per file"]["per_entry"]
    print(f"handed / one read and write per file: {after['per_entry'] / serial:.2f}x")
    for figure, key, unit in (
        ("curate input tokens per routed entry", "per_entry", "tokens"),
        (
            "curate USD per routed entry at list prices (prompt cache billed)",
            "usd_per_entry",
            "USD",
        ),
        ("curate uncached input tokens per routed entry", "uncached_per_entry", "tokens"),
    ):
        row(
            figure,
            after[key],
            baseline=before[key],
            baseline_name="nothing handed, reads in one turn",
            unit=unit,
        )


if __name__ == "__main__":
    main()
