"""Recall on a held-out benchmark: LoCoMo's long conversations, written as daily logs.

`bench/recall_bench.py` measures search and context on conversations we generate, so its figures
can drift toward what we tuned. This script asks the same measures of data we did not write:
LoCoMo (Maharana et al., 2024: ten conversations between two people, 19 to 32 sessions each,
about 1,500 questions whose evidence is marked per turn). Get it from the project's repository
(github.com/snap-research/locomo, `data/locomo10.json`, or the folder of per-conversation files
its `data/locomo10.zip` holds) and run

    python bench/heldout.py PATH [--semantic] [--rerank] [--every K] [--together]

Each conversation becomes its own workspace, as one agent's memory: one daily log per session
day (`memory/YYYY-MM-DD.md`: `# date`, a `### [HH:MM] chat with A and B` block per session, a
`- **Name**: text` line per turn; `--captions` adds a shared photo's caption after its text).
`--together` writes all ten into one workspace instead. The questions are LoCoMo's categories
1-4 (multi-hop, temporal, open-domain, single-hop); category 5 asks about what was never said
and has no evidence to find. A question whose evidence ids name no turn is left out and counted.
Questions are asked at the day after the conversation's last session.

For each question it walks `SearchIndex.search`'s hits as bench/recall_bench.py does and scores
"some" and "all" evidence lines reached within 1,000, 2,000 and 4,000 characters and in the top
10, beside one-line BM25 on the same files; and whether `context --topic QUESTION
--budget-chars 8000` (the whole output) holds them. `--semantic` turns on the semantic extra,
`--rerank` the rerank extra too: the whole set takes about 5 minutes on 2 CPUs with both, as the
encoder's vectors are kept by text from one question to the next, as an MCP server keeps them
(`--every K` asks every K-th question). No language model anywhere; the same data gives the
same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import isolate
from bench.conversations import Bench, Question
from bench.recall_bench import (
    CONTEXT_CHARS,
    DEPTH,
    Scores,
    _switch,
    context_share,
    line_reader,
    one_line_bm25,
    ours,
    score,
    search_table,
)
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.recall import rerank, semantic
from crustacean.recall.search import SearchIndex
from crustacean.workspace import Workspace

KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION = re.compile(r"session_(\d+)$")

Turn = tuple[str, int, int]  # conversation, session, turn: LoCoMo's "D3:12" in conversation c


def load(path: Path) -> list[dict[str, Any]]:
    """The conversations of `locomo10.json` (a list), of one conversation's file, or of a
    folder of them, in file-name order."""
    files = (
        sorted(path.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
        if path.is_dir()
        else [path]
    )
    out: list[dict[str, Any]] = []
    for f in files:
        try:
            data = json.loads(f.read_text("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{f} is not JSON ({e}): give LoCoMo's locomo10.json") from None
        for i, conv in enumerate(data if isinstance(data, list) else [data]):
            body = conv.get("conversation", conv) if isinstance(conv, dict) else {}
            if "speaker_a" not in body or not isinstance(body.get("session_1"), list):
                where = f"conversation {i + 1} of {f}" if isinstance(data, list) else str(f)
                raise ValueError(f"{where} has no speaker_a or session_1: not LoCoMo's shape")
            for key in body:
                if _SESSION.match(key) and isinstance(body[key], list) and body[key]:
                    _checked_when(f, key, body.get(f"{key}_date_time"))
            name = conv.get("sample_id") or (f"{f.stem}-{i}" if isinstance(data, list) else f.stem)
            out.append(body | {"qa": conv.get("qa", []), "sample_id": name})
    return out


def _checked_when(f: Path, key: str, text: object) -> None:
    """A session's time that `when` cannot read, named with its file, before any is written."""
    try:
        when(str(text))
    except ValueError:
        raise ValueError(
            f"{f}: {key}_date_time {text!r} is not a time like '1:56 pm on 8 May, 2023'"
        ) from None


def when(text: str) -> datetime:
    """LoCoMo's session stamp, "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(" ".join(text.replace(",", " ").split()), "%I:%M %p on %d %B %Y")


def turn_id(dia_id: str) -> tuple[int, int] | None:
    """(session, turn) of an id as LoCoMo writes them ("D3:12", and the odd "D:3:12")."""
    m = _ID.search(dia_id)
    return (int(m[1]), int(m[2])) if m else None


def line(turn: dict[str, Any], captions: bool = False) -> str:
    """One turn as a daily log's chat line; with `captions`, the photo it shares after its
    text (LoCoMo's machine caption of the photo: words no one in the conversation said)."""
    text = " ".join(str(turn.get("text", "")).split())
    caption = " ".join(str(turn.get("blip_caption", "")).split()) if captions else ""
    if caption:
        text = f"{text} [shares {caption}]".strip()
    return f"- **{turn['speaker']}**: {text}"


@dataclass
class Written:
    files: dict[str, list[str]]
    line_of: dict[Turn, tuple[str, int]]  # a turn's (path, 1-based line)
    last: datetime  # the last session's time, of all conversations written


def write_logs(root: Path, convs: list[dict[str, Any]], captions: bool = False) -> Written:
    """Every session of `convs` as daily logs under `root`, sessions of one day in time order."""
    by_day: dict[str, list[tuple[datetime, str, int, dict[str, Any]]]] = defaultdict(list)
    for conv in convs:
        cid = str(conv["sample_id"])
        for key, turns in conv.items():
            m = _SESSION.match(key)
            if not m or not isinstance(turns, list) or not turns:
                continue
            at = when(conv[f"{key}_date_time"])
            by_day[at.date().isoformat()].append((at, cid, int(m[1]), conv))
    files: dict[str, list[str]] = {}
    line_of: dict[Turn, tuple[str, int]] = {}
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for day in sorted(by_day):
        rel = f"memory/{day}.md"
        lines = [f"# {day}", ""]
        for at, cid, s, conv in sorted(by_day[day], key=lambda x: (x[0], x[1], x[2])):
            lines += [f"### [{at:%H:%M}] chat with {conv['speaker_a']} and {conv['speaker_b']}", ""]
            for turn in conv[f"session_{s}"]:
                ident = turn_id(str(turn.get("dia_id", "")))
                if ident:
                    line_of[(cid, *ident)] = (rel, len(lines) + 1)
                lines.append(line(turn, captions))
            lines.append("")
        files[rel] = lines
        (root / rel).write_text("\n".join(lines), "utf-8")
    last = max(at for day in by_day.values() for at, *_ in day)
    return Written(files, line_of, last)


def questions(
    conv: dict[str, Any], line_of: dict[Turn, tuple[str, int]]
) -> tuple[list[Question], int]:
    """Categories 1-4 with their evidence lines; and how many were left out (no id found)."""
    out, dropped = [], 0
    cid = str(conv["sample_id"])
    for qa in conv["qa"]:
        kind = KINDS.get(qa.get("category"))
        if kind is None:
            continue
        found = []
        for ref in qa.get("evidence", []):
            for part in re.split(r"[;,]", str(ref)):
                ident = turn_id(part)
                if ident and (cid, *ident) in line_of and line_of[(cid, *ident)] not in found:
                    found.append(line_of[(cid, *ident)])
        if found:
            out.append(Question(kind, str(qa["question"]), tuple(found)))
        else:
            dropped += 1
    return out, dropped


@dataclass
class Totals:
    ours: Scores
    base: Scores
    context: Scores
    sizes: list[int]
    times: list[float]
    asked: int = 0
    dropped: int = 0
    logs: int = 0
    chars: int = 0


def _merge(into: Scores, part: Scores) -> None:
    for key, values in part.got.items():
        into.got.setdefault(key, []).extend(values)


def measure(
    root: Path, tmp: Path, convs: list[dict[str, Any]], every: int, captions: bool, t: Totals
) -> None:
    """One workspace holding `convs`: index it, then ask every `every`-th question."""
    init_workspace(root, detect=False, home=tmp / "home")
    written = write_logs(root, convs, captions)
    asked: list[Question] = []
    for conv in convs:
        qs, dropped = questions(conv, written.line_of)
        asked += qs
        t.dropped += dropped
    asked = asked[::every]
    now = written.last + timedelta(days=1)
    bench = Bench(asked, now, written.files)
    ws = Workspace(root, load_config(root))

    lines = line_reader(root, written.files)
    with SearchIndex(ws) as index:
        index.rebuild()
    baseline = one_line_bm25(root)
    mine, base = Scores(), Scores()
    with SearchIndex(ws) as index:
        search = ours(index, bench)
        for q in asked:
            start = time.perf_counter()
            spans = search(q.text)
            t.times.append(time.perf_counter() - start)
            score(mine, q, spans, lines)
            score(base, q, baseline(q.text), lines)
    context = context_share(ws, bench, lines, t.sizes, whole=False)
    for into, part in ((t.ours, mine), (t.base, base), (t.context, context)):
        _merge(into, part)
    t.asked += len(asked)
    t.logs += len(written.files)
    t.chars += sum(len(x) + 1 for v in written.files.values() for x in v)


def report(t: Totals, mode: str, every: int) -> None:
    kinds = [*KINDS.values(), "all kinds"]
    sample = "every question" if every == 1 else f"1 question in {every}"
    print(
        f"\nHeld-out ({mode}): {t.asked} questions ({sample}; {t.dropped} left out, their "
        f"evidence ids name no turn) over {t.logs} daily logs ({t.chars:,} chars). Each cell: "
        "crustacean search / one-line BM25.\n"
    )
    search_table(t.ours, t.base, kinds)
    for m in ("some", "all"):
        cells = [f"{t.context.share(k, m + ' bounded'):.3f}" for k in kinds]
        print(
            f"| context --topic --budget-chars {CONTEXT_CHARS:,}, {m} | " + " | ".join(cells) + " |"
        )
    sizes = t.sizes or [0]
    print(
        f"\n`context --budget-chars {CONTEXT_CHARS:,}` output: median "
        f"{statistics.median(sizes):,.0f} chars, max {max(sizes):,}."
    )
    if t.times:
        print(
            f"Search ({DEPTH} hits): mean {statistics.fmean(t.times) * 1000:.1f} ms (wall, this "
            "machine; with the rerank extra, vectors kept from earlier questions)."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="locomo10.json, or a folder of its conversations")
    parser.add_argument("--semantic", action="store_true", help="with the semantic extra")
    parser.add_argument("--rerank", action="store_true", help="with the semantic and rerank extras")
    parser.add_argument("--every", type=int, default=1, help="ask every K-th question (default 1)")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument(
        "--together", action="store_true", help="all conversations in one workspace"
    )
    parser.add_argument(
        "--captions", action="store_true", help="write a shared photo's caption after its turn"
    )
    args = parser.parse_args()
    if not args.path.exists():
        parser.error(f"{args.path} does not exist: give LoCoMo's locomo10.json or its folder")
    if args.every < 1:
        parser.error(f"--every {args.every}: ask every K-th question, K 1 or more")
    try:
        convs = load(args.path)[: args.conversations]
    except ValueError as e:
        parser.error(str(e))
    if not convs:
        parser.error(f"{args.path} holds no conversation")
    dense = args.semantic or args.rerank
    _switch(dense, args.rerank)
    if dense and semantic.load() is None:
        parser.error("the semantic extra is not installed: pip install 'crustacean[semantic]'")
    if args.rerank and rerank.load() is None:
        parser.error("the rerank extra is not installed: pip install 'crustacean[rerank]'")
    mode = "semantic + rerank" if args.rerank else "semantic" if dense else "lexical"
    t = Totals(Scores(), Scores(), Scores(), [], [])
    with tempfile.TemporaryDirectory(prefix="crustacean-heldout-") as tmp_name:
        tmp = Path(tmp_name)
        isolate(tmp)
        groups = [convs] if args.together else [[c] for c in convs]
        for i, group in enumerate(groups):
            measure(tmp / f"ws{i}", tmp, group, args.every, args.captions, t)
            print(f"measured {group[-1]['sample_id']}: {t.asked} questions so far", flush=True)
    report(t, mode, args.every)


if __name__ == "__main__":
    os.environ.setdefault(semantic.ENV, "0")
    main()
