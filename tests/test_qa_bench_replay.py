"""The QA bench's long conversation and its recorded runs: the generator is deterministic (the
committed runs are its output), its shape is the issue's kind of conversation, and each recorded
run rescores to its committed table without a model, every answer resting on text its answerer
read."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from bench import qa_bench
from bench.qa_data import long_set

LONG_RUNS = sorted(p for p in qa_bench.RUNS.glob("long-*") if (p / "run.json").exists())


def test_the_long_set_is_the_issues_kind_of_conversation() -> None:
    sessions, questions = long_set(7)
    turns = [t for s in sessions for t in s.turns]
    first, last = sessions[0].start, sessions[-1].start
    assert (
        len(sessions) >= 16
        and len(turns) >= 300
        and (first[:7], last[:7]) == ("2026-03", "2026-07")
    )
    assert Counter(q.kind for q in questions).keys() == {"single", "temporal", "multi"}
    said = " ".join(text for _, text in turns)
    for planted in (
        "lent me",
        "said:",
        "kids",
        "I felt",
        "I think it's",
        "Disaster week",
        "yesterday",
        "a week ago",
        "instead of",
    ):
        assert planted in said, planted

    # Answers rarely repeat their question: most share no content word with it.
    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z]{4,}", text.lower())}

    apart = [q for q in questions if not words(q.answer) & words(q.question)]
    assert len(apart) >= 0.8 * len(questions)
    assert long_set(7) == (sessions, questions) and long_set(8) != (sessions, questions)


@pytest.mark.parametrize("target", LONG_RUNS, ids=lambda p: p.name)
def test_a_recorded_run_is_what_the_generator_makes(target: Path) -> None:
    generated = json.loads((target / "generated.json").read_text())
    convo = qa_bench.conversation(generated["seed"], generated["sessions"], generated["data"])
    assert qa_bench.conversation_text(convo) == (target / "conversation.md").read_text()
    asked = qa_bench.questions(generated["sessions"], generated["data"], generated["seed"])
    assert [q.id for q in asked] == [
        q["id"] for q in json.loads((target / "questions.json").read_text())
    ]


@pytest.mark.parametrize("target", LONG_RUNS, ids=lambda p: p.name)
def test_a_recorded_run_rescores_without_a_model(target: Path) -> None:
    table = qa_bench.score_table(qa_bench.load_questions(target), qa_bench._answers(target))
    assert table + "\n" == (target / "score.md").read_text()
    assert qa_bench.evidence_problems(target) == []
    requests = sorted((target / "relay").glob("*.request.json"))
    assert requests and all(
        r.with_name(r.name.replace("request", "response")).exists() for r in requests
    )


def test_the_long_runs_meet_the_issues_goals_after_and_miss_them_before() -> None:
    scores = {
        p.name: qa_bench.f1_scores(qa_bench.load_questions(p), qa_bench._answers(p))
        for p in LONG_RUNS
    }
    after, before = scores["long-after"], scores["long-before"]
    assert after["b"]["all"] / after["a"]["all"] >= 0.90 and after["c"]["all"] > after["d"]["all"]
    assert (
        before["b"]["all"] / before["a"]["all"] < 0.90 and before["c"]["all"] < before["d"]["all"]
    )


def test_evidence_not_in_the_text_read_is_a_problem(tmp_path: Path) -> None:
    import shutil

    target = tmp_path / "run"
    shutil.copytree(qa_bench.RUNS / "long-after", target)
    quotes = json.loads((target / "answers/c.evidence.json").read_text())
    quotes["s01"] = ["a sentence no search returned"]
    quotes["s02"] = []
    (target / "answers/c.evidence.json").write_text(json.dumps(quotes))
    assert qa_bench.evidence_problems(target) == [
        "(c) s01: not in what it read: 'a sentence no search returned'",
        "(c) s02: an answer with no evidence quoted",
    ]
