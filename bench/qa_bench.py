"""The QA bench: does the memory the pipeline writes answer what people later ask?

A generated conversation between two friends (bench/qa_data.py, as OpenClaw and Claude Code
transcripts: `short`, ten fact-dense sessions over four months; `long`, sixteen sessions over
four months, 324 messages, mostly small talk) with planted facts and questions with known
answers.
Collect and curate run for real against the fake Messages API in relay mode: every request is
written to a file and whoever plays the model writes the answer beside it. Then an answerer that
never sees the answers replies to every question from one source each, and `score` computes
token F1 the way the LoCoMo authors do. The sources:

- (a) `conversation`: the whole conversation text;
- (b) `memory`: the whole memory the pipeline wrote (daily logs + curated files);
- (c) `search_memory`: `crustacean search --budget-chars 2000 <question>` over that memory;
- (d) `search_verbatim`: the same search over the conversation written verbatim as daily logs.

Steps (a run lives in bench/qa_runs/<label>/, committed, so `score` reruns without a model):

    python -m bench.qa_bench generate --out /tmp/qa [--data long]  # workspace + transcripts
    python -m bench.qa_bench run --out /tmp/qa --label before  # collect + curate via the relay
    python -m bench.qa_bench answer-requests --label before
    python -m bench.qa_bench score --label before
    python -m bench.qa_bench relay --dir D                     # just the relay server
    python bench/qa_bench.py                                   # report every recorded run

An answerer writes `answers/<key>.json` and, beside it, `<key>.evidence.json`: the quotes each
answer rests on, which `evidence_problems` checks against the text that answerer read.

`run` prints each request file as it appears; answer it by writing `NNN.response.json` (a
Messages API response body: `{"content": [{"type": "tool_use", "name": ..., "input": ...}]}`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakeapi import FakeAnthropic

from bench.common import count, data_size, row
from bench.qa_data import FILLER, QUESTIONS, SESSIONS, Question, Session, long_set

RUNS = REPO / "bench" / "qa_runs"
BIN = Path(sys.executable).parent
CLI = {"path": str(BIN / "crustacean")}  # `run --cli` points it at another checkout's
SINCE = "2026-03-01"  # before the first session of either set
SEARCH_CHARS = 2_000
SOURCES = {
    "a": "conversation",
    "b": "memory",
    "c": "search_memory",
    "d": "search_verbatim",
}
SOURCE_TITLES = {
    "a": "the conversation itself",
    "b": "the whole memory the pipeline wrote (daily logs + curated files)",
    "c": f"`crustacean search` over that memory, {SEARCH_CHARS:,} chars a question",
    "d": f"`crustacean search` over the conversation as verbatim daily logs, {SEARCH_CHARS:,} "
    "chars",
}
KINDS = ("single", "temporal", "multi")
ENV = {
    "CRUSTACEAN_WORKSPACE__TIMEZONE": "UTC",
    "CRUSTACEAN_LLM__TIMEOUT_SECONDS": "86400",  # the one playing the model may take minutes
    "CRUSTACEAN_LLM__MAX_RETRIES": "0",
}

# ---------------------------------------------------------------- generate


def dataset(name: str, seed: int) -> tuple[tuple[Session, ...], tuple[Question, ...]]:
    """The sessions and questions of a conversation set: `short` (ten sessions, small talk
    added here) or `long` (sixteen, small talk included, built from `seed`)."""
    return (SESSIONS, QUESTIONS) if name == "short" else long_set(seed)


def conversation(
    seed: int = 7, sessions: int | None = None, data: str = "short"
) -> list[tuple[Session, list[Any]]]:
    """Every session with its turns: the planted ones in order, small talk around (seeded),
    each turn `(speaker, text, timestamp)` a minute or two after the one before."""
    rng = random.Random(seed)
    out = []
    for session in dataset(data, seed)[0][:sessions]:
        if data == "short":
            pairs = rng.sample(FILLER, 4)  # one exchange of small talk first, the rest at the end
            turns = [*pairs[0], *session.turns, *(t for pair in pairs[1:] for t in pair)]
        else:
            turns = list(session.turns)
        clock = datetime.fromisoformat(session.start.replace("Z", "+00:00"))
        timed = []
        for speaker, text in turns:
            timed.append((speaker, text, clock))
            clock += timedelta(seconds=rng.randrange(40, 200))
        out.append((session, timed))
    return out


def questions(sessions: int | None = None, data: str = "short", seed: int = 7) -> list[Question]:
    """The questions whose evidence is in the first `sessions` sessions."""
    all_sessions, all_questions = dataset(data, seed)
    limit = sessions or len(all_sessions)
    return [q for q in all_questions if max(q.sessions) <= limit]


def _uuid(rng: random.Random) -> str:
    """A version-4-shaped uuid from the seeded generator."""
    a, b, c, d, e = (rng.getrandbits(n) for n in (32, 16, 12, 12, 48))
    return f"{a:08x}-{b:04x}-4{c:03x}-a{d:03x}-{e:012x}"


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _openclaw(sid: str, turns: list[Any], rng: random.Random) -> list[dict[str, Any]]:
    """OpenClaw's session file: a header, then a tree of message entries. In a group chat the
    people's turns are user messages with the sender's name in front; Pip is the assistant."""
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": _iso(turns[0][2]),
            "cwd": "/home/maya/.openclaw/workspace",
        }
    ]
    parent = None
    for speaker, text, at in turns:
        eid = f"{rng.getrandbits(32):08x}"
        if speaker == "Pip":
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-5-5",
                "stopReason": "stop",
                "timestamp": int(at.timestamp() * 1000),
            }
        else:
            msg = {
                "role": "user",
                "content": [{"type": "text", "text": f"{speaker}: {text}"}],
                "timestamp": int(at.timestamp() * 1000),
            }
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": _iso(at),
                "message": msg,
            }
        )
        parent = eid
    return lines


def _claude_code(sid: str, turns: list[Any], rng: random.Random) -> list[dict[str, Any]]:
    """Claude Code's project transcript: user/assistant records linked by parentUuid."""
    lines: list[dict[str, Any]] = []
    parent = None
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/maya/bakery",
        "sessionId": sid,
        "version": "2.0.61",
        "gitBranch": "main",
    }
    for speaker, text, at in turns:
        uid = _uuid(rng)
        if speaker == "Pip":
            record = {
                **base,
                "parentUuid": parent,
                "type": "assistant",
                "requestId": f"req_{rng.getrandbits(40):010x}",
                "message": {
                    "id": f"msg_{rng.getrandbits(40):010x}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5-5",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 900, "output_tokens": 40},
                },
                "uuid": uid,
                "timestamp": _iso(at),
            }
        else:
            record = {
                **base,
                "parentUuid": parent,
                "type": "user",
                "message": {"role": "user", "content": f"{speaker}: {text}"},
                "uuid": uid,
                "timestamp": _iso(at),
            }
        lines.append(record)
        parent = uid
    return lines


def conversation_text(convo: list[tuple[Session, list[Any]]]) -> str:
    """Source (a): the conversation as a reader would see it, one line a turn."""
    parts = []
    for n, (_, turns) in enumerate(convo, 1):
        start = turns[0][2]
        parts.append(f"## Session {n}: {start:%A} {start.day} {start:%B %Y, %H:%M} UTC")
        parts += [f"[{at:%H:%M}] {speaker}: {text}" for speaker, text, at in turns]
        parts.append("")
    return "\n".join(parts)


def verbatim_logs(convo: list[tuple[Session, list[Any]]]) -> dict[str, str]:
    """Source (d)'s files: the conversation written as daily logs, every turn a bullet."""
    days: dict[str, list[str]] = {}
    for _, turns in convo:
        day = f"{turns[0][2]:%Y-%m-%d}"
        lines = days.setdefault(day, [f"# {day}", ""])
        people = sorted({speaker for speaker, _, _ in turns} - {"Pip"})
        lines.append(f"### [{turns[0][2]:%H:%M}] chat with {' and '.join(people)}")
        lines.append("")
        lines += [f"- **{speaker}**: {text}" for speaker, text, _ in turns]
        lines.append("")
    return {f"memory/{day}.md": "\n".join(lines) for day, lines in days.items()}


def crustacean(
    *args: str, cwd: Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a user runs it, in an environment isolated from the host."""
    result = subprocess.run(
        [CLI["path"], *args], cwd=cwd, env=_env(env), capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise SystemExit(f"crustacean {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def isolate(base: Path) -> None:
    """No host git identity, HOME or user config reaches the CLI or git (kept in `_ISOLATION`,
    not os.environ, so a test calling the bench changes nothing around it)."""
    (base / "home").mkdir(parents=True, exist_ok=True)
    _ISOLATION.clear()
    _ISOLATION.update(
        {
            "HOME": str(base / "home"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "CRUSTACEAN_CONFIG_DIR": str(base / "userconfig"),
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@localhost",
            "TZ": "UTC",
        }
    )


_ISOLATION: dict[str, str] = {}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every process the bench starts."""
    full = {**os.environ, **_ISOLATION, **ENV, **(extra or {})}
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CRUSTACEAN_WORKSPACE"):
        full.pop(key, None)
    return full


def generate(out: Path, seed: int = 7, sessions: int | None = None, data: str = "short") -> Path:
    """Write `out/ws` (a fresh workspace reading `out/transcripts`), the transcripts, the
    conversation text and questions.json. Returns the workspace."""
    isolate(out)
    convo = conversation(seed, sessions, data)
    rng = random.Random(seed)
    transcripts = out / "transcripts"
    shutil.rmtree(transcripts, ignore_errors=True)
    oc_dir = transcripts / "openclaw/agents/main/sessions"
    cc_dir = transcripts / "claude/projects/-home-maya-bakery"
    for session, turns in convo:
        sid = _uuid(rng)
        folder, write = (
            (oc_dir, _openclaw) if session.kind == "openclaw" else (cc_dir, _claude_code)
        )
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{sid}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in write(sid, turns, rng)))
        stamp = turns[-1][2].timestamp()
        os.utime(path, (stamp, stamp))
    ws = out / "ws"
    shutil.rmtree(ws, ignore_errors=True)
    crustacean("init", str(ws), "--no-detect", cwd=out)
    toml = ws / "crustacean.toml"
    toml.write_text(
        toml.read_text()
        + f'\n[[sources]]\nkind = "openclaw"\npath = "{oc_dir.parent.parent}"\n'
        + f'\n[[sources]]\nkind = "claude_code"\npath = "{cc_dir.parent}"\n'
    )
    (out / "conversation.md").write_text(conversation_text(convo))
    (out / "generated.json").write_text(
        json.dumps({"seed": seed, "sessions": sessions, "data": data}) + "\n"
    )
    (out / "questions.json").write_text(
        json.dumps([asdict(q) for q in questions(sessions, data, seed)], indent=1) + "\n"
    )
    return ws


# ---------------------------------------------------------------- relay and run


@contextmanager
def relay(folder: Path, poll: float = 0.2) -> Iterator[FakeAnthropic]:
    """The fake Messages API answering from `folder`'s response files."""
    folder.mkdir(parents=True, exist_ok=True)
    with FakeAnthropic(relay_dir=folder, relay_poll=poll) as fake:
        yield fake


def _announce(folder: Path, stop: threading.Event) -> None:
    """Print each request file as it appears, so whoever plays the model knows what to answer."""
    seen: set[str] = set()
    while not stop.wait(0.5):
        for path in sorted(folder.glob("*.request.json")):
            if path.name not in seen:
                seen.add(path.name)
                print(
                    f"waiting for {path.with_name(path.name.replace('request', 'response'))}",
                    flush=True,
                )


def memory_files(ws: Path) -> dict[str, str]:
    """What the pipeline wrote: every markdown file a version changed since init, read from
    the work tree (daily logs, curated files, folder indexes), not memory/.system/."""
    first = _git(ws, "rev-list", "--max-parents=0", "HEAD").split()[0]
    names = _git(ws, "diff", "--name-only", first, "HEAD").split()
    return {
        n: (ws / n).read_text()
        for n in sorted(names)
        if n.endswith(".md") and not n.startswith("memory/.system/") and (ws / n).exists()
    }


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ws), *args], capture_output=True, text=True, check=True, env=_env()
    ).stdout


def run_pipeline(
    out: Path, folder: Path, *, stages: Sequence[str] = ("collect", "curate"), announce: bool = True
) -> dict[str, Any]:
    """collect (a backfill since the first session) then curate, both through the relay."""
    ws = out / "ws"
    isolate(out)
    record: dict[str, Any] = {}
    stop = threading.Event()
    with relay(folder) as fake:
        if announce:
            threading.Thread(target=_announce, args=(folder, stop), daemon=True).start()
        env = {"ANTHROPIC_BASE_URL": fake.url}
        for stage in stages:
            args = ["--since", SINCE] if stage == "collect" else []
            done = crustacean(stage, *args, "--json", cwd=ws, env=env, check=False)
            record[stage] = {"exit": done.returncode, "output": _json_or_text(done.stdout)}
            if done.returncode not in (0,):
                record[stage]["stderr"] = done.stderr
        stop.set()
    return record


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_run(out: Path, label: str, runs: Path = RUNS) -> None:
    target = runs / label
    if (target / "relay").exists() and any((target / "relay").iterdir()):
        raise SystemExit(f"{target} is recorded already; choose another --label")
    result = run_pipeline(out, target / "relay")
    (target / "run.json").write_text(json.dumps(result, indent=1) + "\n")
    memory = target / "memory"
    shutil.rmtree(memory, ignore_errors=True)
    for name, text in memory_files(out / "ws").items():
        (memory / name).parent.mkdir(parents=True, exist_ok=True)
        (memory / name).write_text(text)
    for name in ("questions.json", "conversation.md", "generated.json"):
        shutil.copy(out / name, target / name)
    print(f"recorded in {target}")


# ---------------------------------------------------------------- answer requests

ANSWER_RULES = (
    "Answer each question from the text given for it, and from nothing else (no guessing from "
    "other questions). Answer in as few words as possible, like a short-answer quiz: a name, a "
    "number, a date written as 'D Month YYYY', a short phrase. If the text does not say, answer "
    '"unknown". Dates said relatively ("yesterday", "last Sunday") are relative to the date of '
    "the message or log they are in."
)


def _read_tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text()
        for p in sorted(folder.rglob("*.md"))
        if p.is_file()
    }


def search_workspace(files: dict[str, str], base: Path) -> Path:
    """A fresh workspace holding `files` (committed, as the pipeline's would be), to search."""
    ws = base / "ws"
    crustacean("init", str(ws), "--no-detect", cwd=base)
    for name, text in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "bench: the memory to search")
    return ws


def search(ws: Path, question: str) -> str:
    """What `crustacean search` hands an agent for the question, at the bench's budget."""
    words = re.sub(r"[^\w\s'&-]", " ", question).split()
    done = crustacean("search", "--budget-chars", str(SEARCH_CHARS), *words, cwd=ws, check=False)
    return done.stdout.strip() or "(no results)"


def load_questions(target: Path) -> list[Question]:
    rows = json.loads((target / "questions.json").read_text())
    return [Question(**{**q, "sessions": tuple(q["sessions"])}) for q in rows]


def answer_requests(label: str, runs: Path = RUNS) -> Path:
    """Write, per source, the prompt files an answerer reads (never the answers): (a) and (b)
    one file with the text and every question; (c) and (d) one file per question holding only
    that question's search result."""
    target = runs / label
    qs = load_questions(target)
    requests = target / "answer-requests"
    shutil.rmtree(requests, ignore_errors=True)
    requests.mkdir(parents=True)
    listing = "\n".join(f"- {q.id}: {q.question}" for q in qs)
    memory = _read_tree(target / "memory")
    memory_text = "\n\n".join(f"=== {name} ===\n{text}" for name, text in memory.items())
    convo_text = (target / "conversation.md").read_text()
    for key, text in (("a", convo_text), ("b", memory_text)):
        (requests / f"{key}_{SOURCES[key]}.md").write_text(
            f"# Questions, answered from {SOURCE_TITLES[key]}\n\n{ANSWER_RULES}\n\n"
            f"<text>\n{text}\n</text>\n\n## Questions\n\n{listing}\n"
        )
    generated = json.loads((target / "generated.json").read_text())
    convo = conversation(generated["seed"], generated["sessions"], generated.get("data", "short"))
    for key, files in (("c", memory), ("d", verbatim_logs(convo))):
        folder = requests / f"{key}_{SOURCES[key]}"
        folder.mkdir()
        with tempfile.TemporaryDirectory() as tmp:
            isolate(Path(tmp))
            ws = search_workspace(files, Path(tmp))
            for q in qs:
                (folder / f"{q.id}.md").write_text(
                    f"# Question {q.id}, answered from {SOURCE_TITLES[key]}\n\n{ANSWER_RULES}\n\n"
                    f"<search-results>\n{search(ws, q.question)}\n</search-results>\n\n"
                    f"## Question\n\n- {q.id}: {q.question}\n"
                )
    (requests / "README.md").write_text(
        "# For the answerer\n\nFor each source a, b, c, d: read only that source's request "
        "file(s) here, and write `../answers/<letter>.json` as one JSON object "
        '{"question_id": "answer", ...} covering every question. Read nothing outside this '
        "folder.\n"
    )
    return requests


# ---------------------------------------------------------------- score

_STEMMER = sqlite3.connect(":memory:", check_same_thread=False)
_STEMMER.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter ascii')")
_STEMMER.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")


@cache
def _stem_one(token: str) -> str:
    _STEMMER.execute("DELETE FROM t")
    _STEMMER.execute("INSERT INTO t(x) VALUES (?)", (token,))
    return "".join(r[0] for r in _STEMMER.execute("SELECT term FROM v ORDER BY offset")) or token


def _stem(tokens: list[str]) -> list[str]:
    """Porter stems, from SQLite's FTS5 `porter` tokenizer (the stdlib has no stemmer); the
    LoCoMo scorer uses NLTK's PorterStemmer, which agrees on ordinary English words."""
    return [_stem_one(t) for t in tokens]


def normalize_answer(text: str) -> str:
    """LoCoMo's normalization: drop commas, the articles (and 'and'), punctuation; lowercase."""
    text = str(text).replace(",", "")
    text = re.sub(r"\b(a|an|the|and)\b", " ", text, flags=re.IGNORECASE)
    text = "".join(ch for ch in text if ch not in string.punctuation)
    return " ".join(text.lower().split())


def f1(prediction: str, truth: str) -> float:
    """Token F1 of stemmed, normalized tokens, counted with multiplicity."""
    pred = _stem(normalize_answer(prediction).split())
    gold = _stem(normalize_answer(truth).split())
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if not same:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_multi(prediction: str, truth: str) -> float:
    """LoCoMo's multi-hop score: each comma-separated part of the truth, best matched by a part
    of the prediction, averaged."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(truth).split(",")]
    return sum(max(f1(p, g) for p in preds) for g in golds) / len(golds)


def score_one(q: Question, answer: str) -> float:
    return f1_multi(answer, q.answer) if q.kind == "multi" else f1(answer, q.answer)


def by_kind(qs: Sequence[Question], scores: dict[str, float]) -> dict[str, float]:
    """The mean score overall (`all`) and per question kind."""
    out = {"all": sum(scores[q.id] for q in qs) / len(qs)}
    for kind in KINDS:
        ids = [q.id for q in qs if q.kind == kind]
        if ids:
            out[kind] = sum(scores[i] for i in ids) / len(ids)
    return out


def _table_row(name: str, means: dict[str, float], extra: str = "") -> str:
    cells = [f"{means['all']:.3f}", *(f"{means[k]:.3f}" if k in means else "–" for k in KINDS)]
    return f"| {name} | " + " | ".join(cells) + f" |{extra}"


def f1_scores(
    qs: Sequence[Question], answers: dict[str, dict[str, str]]
) -> dict[str, dict[str, float]]:
    """Per source answered: the mean F1 overall and per kind."""
    return {
        key: by_kind(qs, {q.id: score_one(q, answers[key].get(q.id, "")) for q in qs})
        for key in SOURCES
        if key in answers
    }


def score_table(qs: Sequence[Question], answers: dict[str, dict[str, str]]) -> str:
    """The markdown table: F1 overall and per kind for every source answered, and (b)/(a)."""
    lines = [
        "| the answerer read | F1 | " + " | ".join(KINDS) + " |",
        "|---|--:|" + "--:|" * len(KINDS),
    ]
    means = f1_scores(qs, answers)
    lines += [_table_row(f"({key}) {SOURCE_TITLES[key]}", m) for key, m in means.items()]
    counts = Counter(q.kind for q in qs)
    lines.append("")
    lines.append(f"{len(qs)} questions: " + ", ".join(f"{counts[k]} {k}" for k in KINDS) + ".")
    if "a" in means and "b" in means and means["a"]["all"]:
        lines.append(f"Ratio (b)/(a): {means['b']['all'] / means['a']['all']:.2f}.")
    return "\n".join(lines)


_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _spelled_dates(text: str) -> str:
    """ISO days also written as 'D Month YYYY', the answers' form, so coverage can see them."""
    return _ISO_DAY.sub(
        lambda m: f"{m[0]} {int(m[3])} {datetime(2000, int(m[2]), 1):%B} {m[1]}", text
    )


def coverage(context: str, truth: str) -> float:
    """The share of the answer's (stemmed, normalized) tokens found anywhere in the context: an
    answerer-free upper bound on what it can say, not F1 (it cannot tell a fact from a
    coincidence, nor resolve 'yesterday')."""
    gold = _stem(normalize_answer(truth).split())
    have = set(_stem(normalize_answer(_spelled_dates(context)).split()))
    return sum(t in have for t in gold) / len(gold) if gold else 0.0


def _contexts(requests: Path, key: str, qs: Sequence[Question]) -> dict[str, str]:
    """What the answerer of source `key` reads for each question."""
    name = f"{key}_{SOURCES[key]}"
    if (requests / f"{name}.md").exists():
        text = (requests / f"{name}.md").read_text()
        inner = text.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]
        return {q.id: inner for q in qs}
    out = {}
    for q in qs:
        text = (requests / name / f"{q.id}.md").read_text()
        out[q.id] = text.split("<search-results>\n", 1)[1].rsplit("\n</search-results>", 1)[0]
    return out


def evidence_problems(target: Path) -> list[str]:
    """Each recorded answer's quoted evidence, checked against what that source's answerer read
    (`answers/<key>.evidence.json`: `{"s01": ["a quote", ...]}`): a quote not in that question's
    text, or an answer other than "unknown" with no quote, is a problem. It keeps the answerer
    honest: nothing it answered can come from outside its source."""
    qs = load_questions(target)
    problems = []
    for key in SOURCES:
        path = target / "answers" / f"{key}.evidence.json"
        if not path.exists():
            continue
        quotes = json.loads(path.read_text())
        answers = json.loads((target / "answers" / f"{key}.json").read_text())
        contexts = _contexts(target / "answer-requests", key, qs)
        for q in qs:
            said = quotes.get(q.id, [])
            text = " ".join(contexts[q.id].split())
            if not said and answers.get(q.id, "unknown") != "unknown":
                problems.append(f"({key}) {q.id}: an answer with no evidence quoted")
            problems += [
                f"({key}) {q.id}: not in what it read: {quote!r}"
                for quote in said
                if " ".join(quote.split()) not in text
            ]
    return problems


def coverage_scores(target: Path) -> dict[str, tuple[dict[str, float], int]]:
    """Per source: answer-token coverage overall and per kind, and the characters the answerer
    reads a question, for a run whose answer requests are written (no answerer needed)."""
    qs = load_questions(target)
    out = {}
    for key in SOURCES:
        ctx = _contexts(target / "answer-requests", key, qs)
        means = by_kind(qs, {q.id: coverage(ctx[q.id], q.answer) for q in qs})
        out[key] = (means, sum(len(c) for c in ctx.values()) // len(qs))
    return out


def coverage_table(label: str, runs: Path = RUNS) -> str:
    """The coverage of every source as a markdown table."""
    lines = [
        "| the answerer reads | coverage | " + " | ".join(KINDS) + " | chars read a question |",
        "|---|--:|" + "--:|" * len(KINDS) + "--:|",
    ]
    for key, (means, chars) in coverage_scores(runs / label).items():
        lines.append(_table_row(f"({key}) {SOURCE_TITLES[key]}", means, f" {chars:,} |"))
    return "\n".join(lines)


def _answers(target: Path) -> dict[str, dict[str, str]]:
    answers = {}
    for key in SOURCES:
        path = target / "answers" / f"{key}.json"
        if path.exists():
            answers[key] = json.loads(path.read_text())
    return answers


def cmd_score(label: str, runs: Path = RUNS) -> str:
    target = runs / label
    answers = _answers(target)
    if not answers:
        raise SystemExit(f"no answers yet: write {target / 'answers'}/<a|b|c|d>.json first")
    table = score_table(load_questions(target), answers)
    (target / "score.md").write_text(table + "\n")
    return table


def run_figures(target: Path) -> list[str]:
    """What the recorded run's stages did, from its run records and relay files."""
    record = json.loads((target / "run.json").read_text())
    lines = []
    collect = record.get("collect", {}).get("output")
    if isinstance(collect, dict):
        run = collect["run"]
        budgets = [
            json.loads(r.read_text()).get("max_tokens")
            for r in sorted((target / "relay").glob("*.request.json"))
            if "record_notes" in r.read_text()
        ]
        lines.append(
            f"- collect: {collect['status']}, {collect['new_messages']} messages in "
            f"{collect['chunks']} chunk(s), {collect['appended']} items appended; "
            f"{run['usage']['output_tokens']:,} output tokens against max_tokens "
            f"{', '.join(str(b) for b in budgets)}"
        )
    curate = record.get("curate", {}).get("output")
    if isinstance(curate, dict):
        routed = sum(curate.get("routed", {}).values())
        skipped = sum(curate.get("skipped", {}).values())
        lines.append(
            f"- curate: {curate['status']}, {curate['run']['turns']} turns, "
            f"{curate['entries']} entries: {routed} routed to {len(curate.get('routed', {}))} "
            f"files, {skipped} skipped"
        )
    memory = _read_tree(target / "memory")
    convo = (target / "conversation.md").read_text()
    lines.append(
        f"- the conversation: {len(convo):,} chars; the memory written: {len(memory)} files, "
        f"{sum(len(t) for t in memory.values()):,} chars"
    )
    return lines


def _rows(label: str, what: str, scores: dict[str, tuple[dict[str, float], int]]) -> None:
    """One figure per source for `python -m bench`, against (a), the conversation itself."""
    base = scores.get("a", ({"all": 0.0}, 0))[0]["all"]
    for key, (means, _) in scores.items():
        row(
            f"QA run {label}: {what}, ({key}) {SOURCES[key]}",
            means["all"],
            baseline=base if key != "a" else None,
            baseline_name="(a) the conversation itself" if key != "a" else "",
            unit="share",
        )


def _recorded(runs: Path) -> list[Path]:
    """The recorded runs, oldest first (by when their collect started)."""

    def started(target: Path) -> str:
        output = json.loads((target / "run.json").read_text()).get("collect", {}).get("output")
        return output["run"]["started"] if isinstance(output, dict) else ""

    return sorted((p for p in runs.iterdir() if (p / "run.json").exists()), key=started)


def report(runs: Path = RUNS) -> str:
    """Every recorded run, rescored without a model: how it was played (its NOTES.md), what the
    stages did, answer-token coverage, and F1 once its answers are recorded."""
    parts = []
    for target in _recorded(runs):
        parts.append(f"### Run `{target.name}`\n")
        if (target / "NOTES.md").exists():
            parts.append((target / "NOTES.md").read_text().strip() + "\n")
        parts.append("\n".join(run_figures(target)) + "\n")
        if (target / "answer-requests").exists():
            parts.append(coverage_table(target.name, runs) + "\n")
            _rows(target.name, "answer-token coverage", coverage_scores(target))
        if any((target / "answers").glob("*.json")):
            parts.append("Token F1 of the answers:\n\n" + cmd_score(target.name, runs) + "\n")
            if any((target / "answers").glob("*.evidence.json")):
                problems = evidence_problems(target)
                parts.append(
                    "Every answer's quoted evidence is in the text its answerer read.\n"
                    if not problems
                    else "Evidence problems:\n\n" + "\n".join(f"- {p}" for p in problems) + "\n"
                )
            answers = _answers(target)
            f1s = f1_scores(load_questions(target), answers)
            _rows(target.name, "token F1", {k: (m, 0) for k, m in f1s.items()})
        else:
            parts.append(
                f"No answers recorded yet: an answerer writes `{target.name}/answers/<a|b|c|d>"
                ".json` from `answer-requests/`, then `score` gives token F1.\n"
            )
    return "\n".join(parts)


# ---------------------------------------------------------------- the command line


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cli", type=Path, help="the crustacean executable to run (default: this venv's)"
    )
    sub = parser.add_subparsers(dest="step")  # none: report every recorded run
    gen = sub.add_parser("generate", help="workspace, transcripts and questions")
    gen.add_argument("--out", type=Path, required=True)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--sessions", type=int, default=None, help="only the first N sessions")
    gen.add_argument("--data", choices=("short", "long"), default="short", help="which set")
    run = sub.add_parser("run", help="collect + curate through the relay")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--label", required=True)
    req = sub.add_parser("answer-requests", help="the answerer's prompt files")
    req.add_argument("--label", required=True)
    sc = sub.add_parser("score", help="token F1 of the recorded answers")
    sc.add_argument("--label", required=True)
    cov = sub.add_parser("coverage", help="answer tokens in each source's context (no answerer)")
    cov.add_argument("--label", required=True)
    rel = sub.add_parser("relay", help="only the relay server, until interrupted")
    rel.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cli:
        CLI["path"] = str(args.cli.resolve())
    if args.step is None:
        runs = [p.name for p in _recorded(RUNS)]
        data_size(
            f"{count(len(runs), 'recorded run')} ({', '.join(runs)}), {len(QUESTIONS)} "
            f"questions over {len(SESSIONS)} sessions"
        )
        print(report())
    elif args.step == "generate":
        ws = generate(args.out.resolve(), args.seed, args.sessions, args.data)
        print(
            f"workspace {ws}; {len(json.loads((args.out / 'questions.json').read_text()))} "
            "questions"
        )
    elif args.step == "run":
        cmd_run(args.out.resolve(), args.label)
    elif args.step == "answer-requests":
        print(f"answer requests in {answer_requests(args.label)}")
    elif args.step == "score":
        print(cmd_score(args.label))
    elif args.step == "coverage":
        print(coverage_table(args.label))
    else:
        with relay(args.dir.resolve()) as fake:
            print(fake.url, flush=True)
            print(
                f"relay: run crustacean with ANTHROPIC_BASE_URL={fake.url}; answer each "
                f"NNN.request.json in {args.dir} with NNN.response.json (Ctrl-C stops)",
                file=sys.stderr,
                flush=True,
            )
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
