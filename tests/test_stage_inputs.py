"""Issue 34, items 4 and 6: each stage is sent what its doc promises, and its doc promises only
what is sent. Every stage runs on the sample against the fake API; its first request must hold
each input of its contract (the doc's generated "What code hands you"), and every file handed
in a hashed input carries the sha256 of its bytes on disk."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakeapi import prompt_of, tool_use

from crustacean.config import load_config
from crustacean.llm.contract import CONTRACTS, contract, render_section
from crustacean.ops.init import init_sample
from crustacean.stages.calibrate import calibrate
from crustacean.stages.collect import collect
from crustacean.stages.compile import compile_workspace
from crustacean.stages.curate import curate
from crustacean.store.changes import sha256_hex
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PIPELINE = Path(__file__).resolve().parent.parent / "pipeline"
_FILE = re.compile(r'<file path="([^"]+)" sha256="([0-9a-f]{64})"')


def nothing_to_do(body: dict[str, Any]) -> dict[str, Any]:
    """A model with nothing to add: collect's one tool with no items, else finish."""
    if [t["name"] for t in body["tools"]] == ["record_notes"]:
        return tool_use(("record_notes", {"items": []}))
    return tool_use(("finish", {"summary": "nothing to do"}))


@pytest.fixture(scope="module")
def requests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    """Each stage's first prompt, from one run of all four on the sample, in pipeline order."""
    from fakeapi import FakeAnthropic

    root = tmp_path_factory.mktemp("inputs") / "sample"
    init_sample(root, NOW)
    out: dict[str, tuple[str, Path]] = {}
    with FakeAnthropic() as fake:
        env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake.url}
        ws = Workspace(root, load_config(root, env=env, overrides=["llm.max_retries=0"]))
        runs = {
            "collect": lambda: collect(ws, env=env, clock=lambda: NOW),
            "curate": lambda: curate(ws, env=env, clock=lambda: NOW),
            "compile": lambda: compile_workspace(ws, env=env, clock=lambda: NOW),
            "calibrate": lambda: calibrate(ws, env=env, clock=lambda: NOW),
        }
        fake.enqueue(*[nothing_to_do] * 40)
        for stage, run in runs.items():
            seen = len(fake.messages())
            run()
            bodies = [m.body for m in fake.messages()[seen:]]
            assert bodies, f"{stage} sent no request"
            out[stage] = (prompt_of(bodies[0]), root)
    return out


@pytest.mark.parametrize("stage", sorted(CONTRACTS))
def test_the_request_holds_every_input_the_doc_promises(
    requests: dict[str, tuple[str, Path]], stage: str
) -> None:
    prompt, root = requests[stage]
    c = contract(stage)
    assert c.inputs, f"{stage}'s contract names no input"
    for i in c.inputs:
        assert f"<{i.tag}>" in prompt and f"</{i.tag}>" in prompt, f"{stage}: no <{i.tag}>"
        if i.hashed:
            part = prompt.split(f"<{i.tag}>", 1)[1].split(f"</{i.tag}>", 1)[0]
            files = _FILE.findall(part)
            assert files, f"{stage}: <{i.tag}> holds no file with its sha256"
            for path, sha in files:
                assert sha == sha256_hex((root / path).read_bytes()), path


@pytest.mark.parametrize("stage", sorted(CONTRACTS))
def test_the_doc_lists_the_inputs_from_the_contract(stage: str) -> None:
    """The drift test covers inputs: the doc's generated section names every tag."""
    text = (PIPELINE / contract(stage).doc).read_text("utf-8")
    assert render_section(stage) in text
    for i in contract(stage).inputs:
        assert f"`<{i.tag}>`" in text


def test_compile_gets_the_week_of_logs_and_memory_md(
    requests: dict[str, tuple[str, Path]],
) -> None:
    prompt, _ = requests["compile"]
    logs = prompt.split("<daily-logs>", 1)[1].split("</daily-logs>", 1)[0]
    assert len(_FILE.findall(logs)) >= 3  # the sample's logs of the past week
    assert '<file path="MEMORY.md"' in prompt.split("<working-memory>", 1)[1]


def test_calibrate_gets_the_foundation_files_and_lessons_with_hashes(
    requests: dict[str, tuple[str, Path]],
) -> None:
    prompt, _ = requests["calibrate"]
    lessons = prompt.split("<lessons>", 1)[1].split("</lessons>", 1)[0]
    assert {p for p, _ in _FILE.findall(lessons)} >= {
        "memory/lessons/lessons.md",
        "memory/lessons/co-op-invoices.md",
    }
    assert "Every invoice (fatura-recibo)" in lessons  # the text, not only the name
    foundation = prompt.split("<foundation>", 1)[1].split("</foundation>", 1)[0]
    assert '<file path="USER.md"' in foundation and '<file path="IDENTITY.md"' in foundation
