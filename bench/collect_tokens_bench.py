"""Benchmark what collect sends for what is new: a 2-hourly increment, a backlog with copies, the
batch path's cost, and the month's cost of a fixed synthetic agent.

Run: `.venv/bin/python bench/collect_tokens_bench.py [--sessions 12] [--messages 150]`.

- **2-hourly increment** (the fixed synthetic agent): 20 OpenClaw sessions a day (08:00 to 20:40,
  one every 40 minutes, 20 messages a minute apart: user lines of ~150 characters, assistant
  lines of ~450), over 3 days; the files grow as the messages happen and `tick` runs every 2
  hours (curate, compile and calibrate disabled), through the end of day 3 plus 14 hours so
  everything is collected. Input tokens per new transcript token are every request's system text,
  tools and prompt (characters / 4) over the distinct messages' text (/ 4). Target ≤ 1.3.
- **Month's cost** at list prices (`[prices]`): collect's USD from its run records over the 3 days,
  × 10; curate's share is the items collect appended a month × curate's USD per routed entry,
  measured on one run of a day's items (curate runs once a day; 3 entries a contact) as
  `bench/curate_bench.py`'s "handed destinations" run is measured (its request bodies billed as
  the prompt cache would, its scripted replies as output, at the mid tier's list prices). The
  scripted model notes one item per 8 messages.
  Target < $3 (compile's and calibrate's weekly and monthly runs are not in it).

The backlog folder
is shaped like a real `agents/<id>/sessions/` one: SESSIONS live files of MESSAGES messages each
(about 400 characters, over the last day), and beside each a `.jsonl.reset.<ts>` copy of its
first half and three `.checkpoint.<uuid>.jsonl` copies of growing prefixes, so most messages sit
in four or five files. Collect runs through the real SDK against the local fake Messages API
(tests/fakeapi.py), whose model notes one item per ten messages, citing them.

- Input tokens per new transcript token: every recorded request body's system text, tools and
  prompt, in characters / 4 (the estimate `--plan` uses), over the text of the distinct new
  messages, also / 4. Target ≤ 1.3. Baseline, measured in the same run: the same ratio on the same
  sessions without any copies (the least collect can send), and, for scale, how many message
  copies the files hold per distinct message (what a reader sending each file would multiply by).
- Batch against direct: the same backfill collected once directly and once with `--batch`
  (submit, end, fetch), with the fake billing every request its real size; the run records' USD.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the fake Messages API lives with the tests

from fakeapi import FakeAnthropic, tool_use

from bench.common import count, data_size, isolate, row
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.stages.collect import collect
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WORDS = [
    "ana",
    "maya",
    "parser",
    "launch",
    "garden",
    "budget",
    "lease",
    "trip",
    "tea",
    "friday",
    "dentist",
    "train",
    "crab",
    "logo",
]


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def transcript(session: str, lines: list[str]) -> str:
    head = {"type": "session", "version": 3, "id": session, "timestamp": stamp(NOW)}
    return json.dumps(head) + "\n" + "".join(lines)


def build(folder: Path, sessions: int, messages: int, copies: bool) -> int:
    """The folder; returns the characters of distinct message text it holds."""
    rng = random.Random(17)
    sessions_dir = folder / "agents/main/sessions"
    sessions_dir.mkdir(parents=True)
    chars = 0
    for s in range(sessions):
        lines = []
        start = NOW - timedelta(hours=20) + timedelta(minutes=s)
        for i in range(messages):
            text = f"note-{s}-{i} " + " ".join(rng.choice(WORDS) for _ in range(70))
            chars += len(text)
            record = {
                "type": "message",
                "id": f"e{i}",
                "parentId": None,
                "timestamp": stamp(start + timedelta(minutes=i)),
                "message": {"role": "user" if i % 2 else "assistant", "content": text},
            }
            lines.append(json.dumps(record) + "\n")
        name = f"sess-{s:03d}"
        (sessions_dir / f"{name}.jsonl").write_text(transcript(name, lines))
        if copies:
            half = lines[: messages // 2]
            reset = sessions_dir / f"{name}.jsonl.reset.2026-11-30T01-00-00.000Z"
            reset.write_text(transcript(name, half))
            for k, cut in enumerate((messages // 4, messages // 2, messages)):
                checkpoint = sessions_dir / f"{name}.checkpoint.{k:04x}-{s:04x}.jsonl"
                checkpoint.write_text(transcript(name, lines[:cut]))
    return chars


# ------------------------------------------------------------ the synthetic agent

AGENT_START = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)  # a Monday
AGENT_DAYS = 3
SESSIONS_A_DAY, TURNS = 20, 20
ITEM_EVERY = 8  # the scripted model notes one item per this many messages


def agent_lines(days: int = AGENT_DAYS) -> dict[str, list[tuple[datetime, str]]]:
    """Every session's (time, JSONL line), sessions over the waking hours of `days` days."""
    rng = random.Random(5)
    out: dict[str, list[tuple[datetime, str]]] = {}
    for day in range(days):
        for s in range(SESSIONS_A_DAY):
            start = AGENT_START + timedelta(days=day, hours=8, minutes=40 * s)
            lines = []
            for i in range(TURNS):
                words = 25 if i % 2 == 0 else 75
                text = f"d{day}s{s}m{i} " + " ".join(rng.choice(WORDS) for _ in range(words))
                moment = start + timedelta(minutes=i)
                record = {
                    "type": "message",
                    "id": f"e{i}",
                    "parentId": None,
                    "timestamp": stamp(moment),
                    "message": {"role": "user" if i % 2 == 0 else "assistant", "content": text},
                }
                lines.append((moment, json.dumps(record) + "\n"))
            out[f"day{day}-s{s:02d}"] = lines
    return out


def agent_text_chars(sessions: dict[str, list[tuple[datetime, str]]]) -> int:
    return sum(
        len(json.loads(line)["message"]["content"]) for s in sessions.values() for _, line in s
    )


def grow(folder: Path, sessions: dict[str, list[tuple[datetime, str]]], now: datetime) -> None:
    """Each session's file as it stands at `now` (lines only ever appended)."""
    for name, lines in sessions.items():
        due = [line for moment, line in lines if moment <= now]
        if not due:
            continue
        path = folder / f"{name}.jsonl"
        head = {"type": "session", "version": 3, "id": name, "timestamp": stamp(lines[0][0])}
        text = json.dumps(head) + "\n" + "".join(due)
        if not path.exists() or path.stat().st_size != len(text.encode()):
            path.write_text(text)
            os.utime(path, (now.timestamp(), now.timestamp()))  # as if written at `now`


def increment_run(fake: FakeAnthropic, tmp: Path, days: int = AGENT_DAYS) -> dict[str, float]:
    """`tick` every 2 hours over the synthetic agent's days; what collect sent and cost."""
    from crustacean.ops.tick import tick
    from crustacean.runs import list_runs

    root, folder = tmp / "agent" / "ws", tmp / "agent" / "openclaw" / "agents/main/sessions"
    folder.mkdir(parents=True)
    sessions = agent_lines(days)
    init_workspace(root, detect=False)
    toml = root / "crustacean.toml"
    toml.write_text(
        toml.read_text() + f'\n[[sources]]\nkind = "openclaw"\npath = "{folder.parents[2]}"\n'
    )
    env = {"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": fake.url}
    off = [f"stages.{s}.enabled=false" for s in ("curate", "compile", "calibrate")]
    ws = Workspace(root, load_config(root, env=env, overrides=["workspace.timezone=UTC", *off]))
    before = len(fake.requests)
    moment, end = AGENT_START, AGENT_START + timedelta(days=days, hours=14)
    ticks = 0
    while moment <= end:
        grow(folder, sessions, moment)
        fake.enqueue(*[dense_reply] * 50)
        tick(ws, env=env, clock=lambda at=moment: at)
        with fake._lock:
            fake._queue.clear()
        moment += timedelta(hours=2)
        ticks += 1
    bodies = [r.body for r in fake.requests[before:] if r.path == "/v1/messages"]
    runs = [r for r in list_runs(ws, limit=10_000, stage="collect") if not r.dry_run]
    appended = sum(
        int(line.startswith("- "))
        for p in (root / "memory").glob("2026-*.md")
        for line in p.read_text().splitlines()
    )
    return {
        "sent_chars": sum(sent_chars(b) for b in bodies),
        "new_chars": agent_text_chars(sessions),
        "requests": len(bodies),
        "ticks": ticks,
        "calls_runs": sum(1 for r in runs if r.turns),
        "usd": sum(r.cost_usd for r in runs),
        "items": appended,
    }


def dense_reply(body: dict[str, Any]) -> dict[str, Any]:
    """One item per ITEM_EVERY messages, citing them; billed the request's real size."""
    refs = re.findall(r"^\[?(m\d+)\b.*?(?:user|assistant): (\S+)", prompt_text(body), re.M)
    items = [
        {"category": "fact", "text": f"The garden budget came up ({tag}).", "refs": [ref]}
        for ref, tag in refs[::ITEM_EVERY]
    ]
    usage = {"input_tokens": sent_chars(body) // 4, "output_tokens": 40 * len(items)}
    return tool_use(("record_notes", {"items": items}), usage=usage)


CURATE_PER_CONTACT = 3  # a day's entries for curate's run: this many to each destination


def curate_usd_per_entry(tmp: Path, entries: int) -> dict[str, float]:
    """Curate's measured run (its own bench's handed request) on `entries` entries: curate
    runs once a day, so the month's runs each see a day's items."""
    from bench.curate_bench import NAMES, measure

    people = min(len(NAMES), max(1, round(entries / CURATE_PER_CONTACT)))
    return measure(tmp, people, CURATE_PER_CONTACT, "handed destinations")


def prompt_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """One item per ten messages, citing them; billed the request's real size."""
    refs = re.findall(r"^\[?(m\d+)\b", prompt_text(body), re.M)
    items = [{"category": "fact", "text": f"Item from {ref}.", "refs": [ref]} for ref in refs[::10]]
    usage = {"input_tokens": sent_chars(body) // 4, "output_tokens": 40 * len(items)}
    return tool_use(("record_notes", {"items": items}), usage=usage)


def sent_chars(body: dict[str, Any]) -> int:
    system = sum(len(b["text"]) for b in body.get("system", []))
    return system + len(json.dumps(body.get("tools", []))) + len(prompt_text(body))


def workspace(tmp: Path, name: str, sessions: int, messages: int, copies: bool) -> tuple:
    root, folder = tmp / name / "ws", tmp / name / "openclaw"
    chars = build(folder, sessions, messages, copies)
    init_workspace(root, detect=False)
    toml = root / "crustacean.toml"
    toml.write_text(toml.read_text() + f'\n[[sources]]\nkind = "openclaw"\npath = "{folder}"\n')
    return root, chars


def collect_all(fake: FakeAnthropic, root: Path, *, batch: bool = False) -> tuple[int, float, int]:
    """Collect everything (over as many runs as the budget needs); (chars sent, USD, requests)."""
    env = {"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": fake.url}
    ws = Workspace(root, load_config(root, env=env, overrides=["workspace.timezone=UTC"]))
    before, usd, requests = len(fake.requests), 0.0, 0
    for _ in range(200):
        fake.enqueue(*[reply] * 400)
        result = collect(ws, env=env, clock=lambda: NOW, batch=batch)
        if batch:
            fake.end_batches()
            result = collect(ws, env=env, clock=lambda: NOW)
        usd += result.record.cost_usd if result.record else 0.0
        if (
            result.record
            and result.record.status in ("ok", "skipped")
            and not result.left_for_next_run
        ):
            break
    with fake._lock:
        fake._queue.clear()
    bodies = [r.body for r in fake.requests[before:] if r.path == "/v1/messages"]
    bodies += fake.batch_requests() if batch else []
    requests = len(bodies)
    return sum(sent_chars(b) for b in bodies), usd, requests


def copies_per_message(folder: Path, distinct: int) -> float:
    """Message lines in every file (headers aside) per distinct message."""
    lines = sum(len(p.read_text().splitlines()) - 1 for p in folder.rglob("*.jsonl*"))
    return lines / distinct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--messages", type=int, default=150)
    parser.add_argument(
        "--agent-days", type=int, default=AGENT_DAYS, help="days of the synthetic agent's ticks"
    )
    args = parser.parse_args()
    days = args.agent_days
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        isolate(tmp)
        os.environ["TZ"] = "UTC"
        with FakeAnthropic() as fake:
            root, new_chars = workspace(tmp, "copies", args.sessions, args.messages, True)
            sent, direct_usd, requests = collect_all(fake, root)
            bare_root, bare_chars = workspace(tmp, "bare", args.sessions, args.messages, False)
            bare_sent, _, _ = collect_all(fake, bare_root)
            spread = copies_per_message(tmp / "copies/openclaw", args.sessions * args.messages)
            batch_root, _ = workspace(tmp, "batch", args.sessions, args.messages, True)
            _, batch_usd, batch_requests = collect_all(fake, batch_root, batch=True)
            with sqlite3.connect(batch_root / ".crustacean/state.db") as db:
                left = db.execute("SELECT count(*) FROM collect_sent_batches").fetchone()[0]
            agent = increment_run(fake, tmp, days)
        day_items = agent["items"] / days
        run = curate_usd_per_entry(tmp / "curate", round(day_items))
    curate_tokens, curate_entry_usd = run["per_entry"], run["usd_per_entry"]
    ratio, bare_ratio = sent / new_chars, bare_sent / bare_chars
    inc_ratio = agent["sent_chars"] / agent["new_chars"]
    month_collect = agent["usd"] / days * 30
    month_items = day_items * 30
    month_curate = month_items * curate_entry_usd
    month = month_collect + month_curate
    size = (
        f"{count(args.sessions, 'session')} × {count(args.messages, 'message')} "
        f"({new_chars / 4:,.0f} new transcript tokens), each message in {spread:.1f} files"
    )
    data_size(size)
    row(
        "collect: input tokens sent per new transcript token (checkpoint/reset copies)",
        ratio,
        baseline=bare_ratio,
        baseline_name="same sessions without copies",
        unit="tokens/token",
        note=f"{count(requests, 'request')}; target ≤ 1.3",
    )
    row(
        "collect --batch: USD for the same backfill",
        batch_usd,
        baseline=direct_usd,
        baseline_name="direct collect",
        unit="USD",
        note=f"{count(batch_requests, 'batch request')}; {left} batch(es) left open",
    )
    agent_size = (
        f"synthetic agent: {SESSIONS_A_DAY} sessions × {TURNS} messages a day over {days} "
        f"days ({agent['new_chars'] / 4:,.0f} transcript tokens), tick every 2 h"
    )
    data_size(agent_size)
    row(
        "collect: input tokens per new transcript token, 2-hourly increments",
        inc_ratio,
        unit="tokens/token",
        note=f"{agent['requests']:.0f} requests in {agent['ticks']:.0f} ticks; target ≤ 1.3",
    )
    row(
        "month at list prices, synthetic agent: collect + curate's share",
        month,
        unit="USD",
        note=f"collect ${month_collect:.2f}, curate ${month_curate:.2f}; target < $3",
    )
    print(f"Data: {agent_size}; backlog: {size}.\n")
    print("| figure | value | target |")
    print("|---|---|---|")
    print(
        f"| input tokens per new transcript token, 2-hourly increments | {inc_ratio:.3f} | ≤ 1.3 |"
    )
    print(f"| input tokens per new transcript token, backlog (copies) | {ratio:.3f} | ≤ 1.3 |")
    print(
        f"| collect requests for the agent's {days} days | {agent['requests']:.0f} "
        f"({agent['ticks']:.0f} ticks) | |"
    )
    print(f"| collect, a month | ${month_collect:.3f} | |")
    print(
        f"| curate's share, a month: {month_items:,.0f} items × ${curate_entry_usd:.5f} a routed "
        f"entry (a daily run of {run['routed']:.0f} entries in {run['turns']:.0f} turns: "
        f"{curate_tokens:,.0f} input tokens, {run['uncached_per_entry']:,.0f} uncached, "
        f"{run['output_per_entry']:,.0f} output an entry) | ${month_curate:.2f} | |"
    )
    print(f"| month, collect + curate | ${month:.2f} | < $3 |\n")
    print("| figure | value | baseline | ratio |")
    print("|---|---|---|---|")
    print(
        f"| input tokens per new transcript token | {ratio:.3f} | {bare_ratio:.3f} (no copies) "
        f"| {ratio / bare_ratio:.2f}x |"
    )
    print(
        f"| batch cost of the backfill | ${batch_usd:.4f} | ${direct_usd:.4f} (direct) | "
        f"{batch_usd / direct_usd:.2f}x |"
    )
    print(
        f"\n{count(requests, 'request')} direct; message copies per distinct message {spread:.1f}."
    )


if __name__ == "__main__":
    main()
