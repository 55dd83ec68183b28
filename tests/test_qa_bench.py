"""The QA bench: LoCoMo's token F1, the generated conversation, collect through the relay with a
scripted responder standing in for the model, and scoring a small recorded run."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fakeapi import FakeAnthropic, prompt_of

from bench import qa_bench
from bench.qa_data import QUESTIONS, SESSIONS
from crustacean.sources import read_new

Make = Callable[[dict[str, Any]], dict[str, Any]]


SCORERS = {"f1": qa_bench.f1, "multi": qa_bench.f1_multi, "coverage": qa_bench.coverage}


@pytest.mark.parametrize(
    ("scorer", "given", "truth", "expected"),
    [
        # token F1 as LoCoMo scores it (single-hop and temporal questions)
        ("f1", "The Salt Orchard", "the salt orchard", 1.0),
        ("f1", "Salt Orchard, by Ines Varga.", "The Salt Orchard by Ines Varga", 1.0),
        ("f1", "Crumb and Compass", "Crumb & Compass", 1.0),  # '&' punctuation, 'and' an article
        ("f1", "Tavira", "Tavira, Portugal", 2 / 3),
        ("f1", "he cried", "cries", 2 / 3),  # Porter stems: cried, cries -> cri
        ("f1", "no no", "no", 2 / 3),  # tokens count with multiplicity
        ("f1", "2,400 euros", "2400 euros", 1.0),  # commas go before punctuation
        ("f1", "unknown", "three", 0.0),
        ("f1", "", "three", 0.0),
        # multi-hop: each comma-separated part of the truth, best matched, averaged
        ("multi", "Crumb & Compass, Harbourside", "Crumb & Compass, Harbourside", 1.0),
        ("multi", "Harbourside", "Crumb & Compass, Harbourside", 0.5),
        ("multi", "Harbourside, Crumb & Compass", "Crumb & Compass, Harbourside", 1.0),
        ("multi", "clarinet", "clarinet", 1.0),
        # coverage: the answer's tokens found in a context (ISO days read as 'D Month YYYY')
        ("coverage", "- [fact] Maya went to the open studio on 2026-06-01.", "1 June 2026", 1.0),
        ("coverage", "They went to Tavira.", "Tavira, Portugal", 0.5),
        ("coverage", "He was so proud he cried.", "so proud he cried", 1.0),
        ("coverage", "", "three", 0.0),
    ],
)
def test_scores(scorer: str, given: str, truth: str, expected: float) -> None:
    assert SCORERS[scorer](given, truth) == pytest.approx(expected)


def test_normalize_drops_articles_punctuation_and_case() -> None:
    assert qa_bench.normalize_answer("The Sign said: 'No dogs, and an owl!'") == (
        "sign said no dogs owl"
    )


def test_every_question_names_sessions_that_exist_and_ids_are_unique() -> None:
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    assert {q.kind for q in QUESTIONS} == set(qa_bench.KINDS)
    for q in QUESTIONS:
        assert q.sessions and max(q.sessions) <= len(SESSIONS), q.id
    assert 30 <= len(QUESTIONS) <= 50 and 8 <= len(SESSIONS) <= 12


@contextmanager
def _responder(folder: Path, make: Make) -> Iterator[None]:
    """A thread answering every request file in `folder` with `make(request)`, as a person
    playing the model would."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.05):
            for req in sorted(folder.glob("*.request.json")):
                answer = req.with_name(req.name.replace("request", "response"))
                if not answer.exists():
                    reply = make(json.loads(req.read_text()))
                    temp = answer.with_suffix(".tmp")
                    temp.write_text(json.dumps(reply))
                    temp.replace(answer)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def test_relay_writes_the_request_and_answers_with_the_response_file(tmp_path: Path) -> None:
    folder = tmp_path / "relay"
    reply = {"content": [{"type": "text", "text": "hi there"}]}
    with _responder(folder, lambda body: reply), FakeAnthropic(folder, 0.02) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0)
        params: dict[str, Any] = {
            "model": "claude-haiku-5-5",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hello"}],
        }
        first = client.messages.create(**params)
        again = client.messages.create(**params)  # the same body: a retry keeps its number
    block = first.content[0]
    assert isinstance(block, anthropic.types.TextBlock) and block.text == "hi there"
    assert first.stop_reason == "end_turn"
    assert first.usage.output_tokens > 0 and first.id != again.id
    assert sorted(p.name for p in folder.iterdir()) == ["001.request.json", "001.response.json"]
    sent = json.loads((folder / "001.request.json").read_text())
    assert sent["messages"] == [{"role": "user", "content": "hello"}]


def test_generate_writes_readable_transcripts_the_same_every_time(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for out in (first, second):
        qa_bench.generate(out, seed=3, sessions=3)
    files = sorted(p.relative_to(first) for p in (first / "transcripts").rglob("*.jsonl"))
    assert len(files) == 3
    assert [(first / f).read_bytes() for f in files] == [(second / f).read_bytes() for f in files]
    kinds = {"openclaw" if "openclaw" in f.parts else "claude_code" for f in files}
    assert kinds == {"openclaw", "claude_code"}
    turns = 0
    for f in files:
        kind = "openclaw" if "openclaw" in f.parts else "claude_code"
        result = read_new(first / f, kind, None, since=datetime(2026, 1, 1, tzinfo=UTC))
        assert result.bad_lines == 0 and result.messages
        turns += len(result.messages)
    assert turns == sum(len(t) for _, t in qa_bench.conversation(3, 3))
    questions = json.loads((first / "questions.json").read_text())
    assert questions and all(max(q["sessions"]) <= 3 for q in questions)
    assert "The Salt Orchard" in (first / "conversation.md").read_text()


def _notes(body: dict[str, Any]) -> dict[str, Any]:
    """Collect's answer, read off the request as a model would: the line about the kids."""
    text = prompt_of(body)
    ref = re.search(r"\b(m\d+)\b[^\n]*? user: Jonas: Chaotic", text)
    assert ref is not None
    item = {"category": "person", "text": "Jonas has three kids under ten.", "refs": [ref[1]]}
    return {"content": [{"type": "tool_use", "name": "record_notes", "input": {"items": [item]}}]}


def test_collect_runs_through_the_relay(tmp_path: Path) -> None:
    out = tmp_path / "qa"
    ws = qa_bench.generate(out, sessions=2)
    folder = tmp_path / "relay"
    with _responder(folder, _notes):
        record = qa_bench.run_pipeline(out, folder, stages=("collect",), announce=False)
    assert record["collect"]["exit"] == 0, record
    assert record["collect"]["output"]["status"] == "ok"
    assert "Jonas has three kids under ten." in (ws / "memory/2026-06-02.md").read_text()
    request = json.loads((folder / "001.request.json").read_text())
    assert request["tool_choice"] == {"type": "tool", "name": "record_notes"}
    assert "The Salt Orchard" in json.dumps(request)
    assert set(qa_bench.memory_files(ws)) == {"memory/2026-06-02.md"}


def test_score_reruns_from_a_recorded_run(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "tiny"
    (target / "answers").mkdir(parents=True)
    questions = [
        {
            "id": "s1",
            "kind": "single",
            "question": "Q?",
            "answer": "The Salt Orchard",
            "sessions": [1],
        },
        {
            "id": "t1",
            "kind": "temporal",
            "question": "Q?",
            "answer": "1 June 2026",
            "sessions": [1],
        },
        {
            "id": "m1",
            "kind": "multi",
            "question": "Q?",
            "answer": "Crumb & Compass, Harbourside",
            "sessions": [2, 4],
        },
    ]
    (target / "questions.json").write_text(json.dumps(questions))
    answers = {
        "a": {"s1": "Salt Orchard", "t1": "1 June 2026", "m1": "Crumb and Compass, Harbourside"},
        "b": {"s1": "unknown", "t1": "June 2026", "m1": "Harbourside"},
    }
    for key, got in answers.items():
        (target / "answers" / f"{key}.json").write_text(json.dumps(got))
    table = qa_bench.cmd_score("tiny", runs=tmp_path / "runs")
    rows = table.splitlines()
    assert rows[2] == "| (a) the conversation itself | 1.000 | 1.000 | 1.000 | 1.000 |"
    assert rows[3].startswith("| (b) the whole memory") and rows[3].endswith(
        "| 0.433 | 0.000 | 0.800 | 0.500 |"
    )
    assert "3 questions: 1 single, 1 temporal, 1 multi." in table
    assert "Ratio (b)/(a): 0.43." in table
    assert (target / "score.md").read_text() == table + "\n"


@pytest.mark.slow
def test_answer_requests_give_each_source_its_text_and_never_the_answers(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "tiny"
    (target / "memory/memory").mkdir(parents=True)
    (target / "memory/memory/2026-06-02.md").write_text(
        "# 2026-06-02\n\n### [19:14] Jonas's weekend\n\n- [person] Jonas has three kids.\n"
    )
    convo = qa_bench.conversation(7, 1)
    (target / "conversation.md").write_text(qa_bench.conversation_text(convo))
    (target / "generated.json").write_text(json.dumps({"seed": 7, "sessions": 1}))
    picked = [q for q in QUESTIONS if q.id in ("s01", "s02", "t01")]  # t01: "1 June 2026"
    rows = [{**q.__dict__, "sessions": list(q.sessions)} for q in picked]
    (target / "questions.json").write_text(json.dumps(rows))
    requests = qa_bench.answer_requests("tiny", runs=tmp_path / "runs")
    names = sorted(p.relative_to(requests).as_posix() for p in requests.rglob("*.md"))
    assert names == [
        "README.md",
        "a_conversation.md",
        "b_memory.md",
        "c_search_memory/s01.md",
        "c_search_memory/s02.md",
        "c_search_memory/t01.md",
        "d_search_verbatim/s01.md",
        "d_search_verbatim/s02.md",
        "d_search_verbatim/t01.md",
    ]
    assert "The Salt Orchard by Ines Varga" in (requests / "a_conversation.md").read_text()
    memory = (requests / "b_memory.md").read_text()
    assert "Jonas has three kids." in memory and "Salt Orchard" not in memory
    one = (requests / "c_search_memory/s02.md").read_text()
    assert "- s02: How many children does Jonas have?" in one and "s01" not in one
    assert "Jonas has three kids." in one
    verbatim = (requests / "d_search_verbatim/s02.md").read_text()
    assert "three kids under ten" in verbatim
    for path in requests.rglob("*.md"):  # the dated answer is said only as "yesterday"
        assert "1 June 2026" not in path.read_text(), path


def test_relay_refuses_a_folder_holding_an_earlier_runs_answers(tmp_path: Path) -> None:
    folder = tmp_path / "relay"
    folder.mkdir()
    (folder / "001.response.json").write_text('{"content": [{"type": "text", "text": "old"}]}')
    with FakeAnthropic(relay_dir=folder) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0)
        with pytest.raises(anthropic.InternalServerError, match="from an earlier run"):
            client.messages.create(
                model="claude-haiku-5-5",
                max_tokens=5,
                messages=[{"role": "user", "content": "hello"}],
            )
    assert not (folder / "001.request.json").exists()
