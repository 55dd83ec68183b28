"""The held-out recall bench: LoCoMo's files written as daily logs, each question's evidence id
mapped to its line, and the whole run on a small file of LoCoMo's shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import heldout

REPO = Path(__file__).resolve().parents[1]


def _bench(
    path: Path, env: dict[str, str] | None = None, *args: str
) -> subprocess.CompletedProcess[str]:
    """`python bench/heldout.py PATH [ARGS]`, as the README runs it."""
    script = str(REPO / "bench" / "heldout.py")
    return subprocess.run(
        [sys.executable, script, str(path), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _conversation() -> dict[str, Any]:
    """Two sessions on two days, a shared photo, and one question of each kind the bench keeps
    or leaves out, with LoCoMo's own quirks in the evidence ids."""
    return {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! How have you been?"},
            {
                "speaker": "Melanie",
                "dia_id": "D1:2",
                "text": "Swamped with the kids.\nI painted a lake sunrise last year.",
                "blip_caption": "a photo of a painting of a sunrise over a lake",
            },
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "I went to a support group."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "We went camping in the forest."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "I started a pottery class."},
        ],
        "qa": [
            {"question": "When did Caroline go to the support group?", "answer": "7 May 2023",
             "evidence": ["D1:3"], "category": 2},
            {"question": "What did Melanie paint?", "answer": "a sunrise",
             "evidence": ["D1:2"], "category": 4},
            {"question": "What do Caroline's hobbies include?", "answer": "pottery",
             "evidence": ["D1:3; D2:2"], "category": 1},
            {"question": "Where did Melanie go camping?", "answer": "forest",
             "evidence": ["D:2:1"], "category": 4},
            {"question": "What did Melanie bake?", "evidence": ["D1:2"], "category": 5,
             "adversarial_answer": "bread"},
            {"question": "What did Caroline say last?", "answer": "?",
             "evidence": ["D9:99"], "category": 3},
        ],
    }  # fmt: skip


def test_sessions_become_daily_logs_and_evidence_ids_their_lines(tmp_path: Path) -> None:
    conv = _conversation() | {"sample_id": "c1"}
    written = heldout.write_logs(tmp_path, [conv])
    assert sorted(written.files) == ["memory/2023-05-08.md", "memory/2023-06-27.md"]
    assert (tmp_path / "memory/2023-05-08.md").read_text("utf-8").split("\n") == [
        "# 2023-05-08",
        "",
        "### [13:56] chat with Caroline and Melanie",
        "",
        "- **Caroline**: Hey Mel! How have you been?",
        "- **Melanie**: Swamped with the kids. I painted a lake sunrise last year.",
        "- **Caroline**: I went to a support group.",
        "",
    ]
    assert written.line_of[("c1", 1, 3)] == ("memory/2023-05-08.md", 7)
    assert str(written.last) == "2023-06-27 10:37:00"
    questions, dropped = heldout.questions(conv, written.line_of)
    assert [(q.kind, q.evidence) for q in questions] == [
        ("temporal", (("memory/2023-05-08.md", 7),)),
        ("single-hop", (("memory/2023-05-08.md", 6),)),
        ("multi-hop", (("memory/2023-05-08.md", 7), ("memory/2023-06-27.md", 6))),
        ("single-hop", (("memory/2023-06-27.md", 5),)),
    ]
    assert dropped == 1  # category 5 is not asked; "D9:99" names no turn


def test_a_shared_photo_caption_is_written_only_when_asked(tmp_path: Path) -> None:
    turn = _conversation()["session_1"][1]
    assert heldout.line(turn, captions=True).endswith(
        "last year. [shares a photo of a painting of a sunrise over a lake]"
    )
    assert "photo" not in heldout.line(turn)


@pytest.mark.parametrize("shape", ["list", "folder"])
def test_the_bench_runs_on_a_file_of_locomos_shape(shape: str, tmp_path: Path) -> None:
    """`locomo10.json` is a list of {sample_id, conversation, qa}; its zip holds one file each."""
    if shape == "list":
        data = tmp_path / "locomo10.json"
        conv = _conversation()
        qa = conv.pop("qa")
        data.write_text(json.dumps([{"sample_id": "conv-1", "conversation": conv, "qa": qa}]))
    else:
        data = tmp_path / "locomo10_v2"
        data.mkdir()
        (data / "26.json").write_text(json.dumps(_conversation()))
    env = {**os.environ, "TMPDIR": str(tmp_path), "CRUSTACEAN_SEMANTIC": "0"}
    done = _bench(data, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Held-out (lexical): 4 questions (every question; 1 left out" in done.stdout
    assert "| some within 2,000 | " in done.stdout
    assert "| context --topic --budget-chars 8,000, some | " in done.stdout


def test_a_path_that_is_not_there_says_what_to_give(tmp_path: Path) -> None:
    done = _bench(tmp_path / "nope.json")
    assert done.returncode == 2
    assert "nope.json does not exist: give LoCoMo's locomo10.json or its folder" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not JSON (Expecting property name enclosed in double quotes"),
        ('[{"sample_id": "x", "qa": []}]', "conversation 1 of "),
        (
            json.dumps(_conversation() | {"session_2_date_time": "June 27"}),
            "session_2_date_time 'June 27' is not a time like '1:56 pm on 8 May, 2023'",
        ),
        (
            json.dumps({k: v for k, v in _conversation().items() if k != "session_1_date_time"}),
            "session_1_date_time None is not a time like",
        ),
    ],
)
def test_a_file_not_of_locomos_shape_says_what_is_wrong(
    text: str, says: str, tmp_path: Path
) -> None:
    data = tmp_path / "locomo10.json"
    data.write_text(text)
    done = _bench(data)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing was measured, nothing written but the error


def test_every_must_ask_some_questions(tmp_path: Path) -> None:
    data = tmp_path / "26.json"
    data.write_text(json.dumps(_conversation()))
    done = _bench(data, None, "--every", "0")
    assert done.returncode == 2
    assert "--every 0: ask every K-th question, K 1 or more" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
