"""The contract between what each stage is told and what code does: docs, preamble, request
and executor all follow crustacean/llm/contract.py; any drift fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crustacean.llm.contract import CONTRACTS, contract, drift, preamble, tool_specs
from crustacean.store import policy

PIPELINE = Path(__file__).resolve().parent.parent / "pipeline"
STAGES = sorted(CONTRACTS)


@pytest.mark.parametrize("stage", STAGES)
def test_doc_tools_section_matches_the_contract(stage: str) -> None:
    text = (PIPELINE / contract(stage).doc).read_text("utf-8")
    assert drift(stage, text) == []


@pytest.mark.parametrize(
    ("stage", "never"),
    [
        ("curate", {"overwrite", "delete", "move"}),
        ("compile", {"overwrite"}),
        ("calibrate", {"overwrite", "delete"}),
    ],
)
def test_a_stage_is_offered_only_the_modes_its_policy_may_use(stage: str, never: set[str]) -> None:
    modes = set(contract(stage).modes)
    assert not modes & never
    rules = policy.POLICY[stage]
    assert modes == {m for m in policy.MODES if any(m in ms for ms, _ in rules)}
    write = next(t for t in tool_specs(stage) if t.name == "write_context")
    enum = write.input_schema["properties"]["changes"]["items"]["properties"]["mode"]["enum"]
    assert set(enum) == modes


def test_collect_is_offered_its_one_tool_and_told_no_file_rules() -> None:
    assert [t.name for t in tool_specs("collect")] == [contract("collect").own_tool.name]
    text = preamble("collect")
    for word in ("expected_sha256", "README", "finish", "write_context"):
        assert word not in text


def test_collect_category_table_lists_exactly_the_schema_enum() -> None:
    spec = contract("collect").own_tool
    item = spec.input_schema["properties"]["items"]["items"]
    enum = item["properties"]["category"]["enum"]
    text = (PIPELINE / "COLLECT.md").read_text("utf-8")
    table = text.split("## What to look for", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert sorted(rows) == sorted(enum)


@pytest.mark.parametrize("stage", STAGES)
def test_preamble_names_only_offered_modes(stage: str) -> None:
    text = preamble(stage)
    for mode in set(policy.MODES) - set(contract(stage).modes):
        assert f" {mode}," not in text and f" {mode}." not in text


def test_safety_doc_table_is_generated_from_the_contract() -> None:
    from crustacean.llm.contract import render_safety_table

    text = (PIPELINE.parent / "docs/safety.md").read_text("utf-8")
    assert render_safety_table() in text


def test_every_shipped_doc_is_listed_under_its_version() -> None:
    """A doc edit without `docs/generate.py` would make every workspace copy look user-edited."""
    from crustacean.ops.system_docs import doc_version, shipped_hashes
    from crustacean.store.changes import sha256_hex
    from crustacean.workspace import PIPELINE_DOCS

    known = shipped_hashes()
    for name in PIPELINE_DOCS:
        data = (PIPELINE / name).read_bytes()
        version = str(doc_version(data.decode("utf-8")))
        assert sha256_hex(data) in known[name].get(version, []), (
            f"{name} changed: run .venv/bin/python docs/generate.py (and bump its Version: "
            "line when the change matters to existing workspaces)"
        )


@pytest.mark.parametrize("stage", STAGES)
def test_the_request_offers_exactly_the_contract(stage: str) -> None:
    """What build_params sends is what the doc and preamble describe: same tools, same modes."""
    from crustacean.llm.loop import StageRequest, build_params

    params = build_params(
        StageRequest(stage, "# doc", "go"), "m", [{"role": "user", "content": "go"}]
    )
    assert [t["name"] for t in params["tools"]] == list(contract(stage).tool_names)
    assert params["system"][0]["text"].startswith(preamble(stage))
    for tool in params["tools"]:
        if tool["name"] == "write_context":
            item = tool["input_schema"]["properties"]["changes"]["items"]
            assert item["properties"]["mode"]["enum"] == list(contract(stage).modes)


@pytest.mark.parametrize(
    ("stage", "change", "words"),
    [
        (
            "compile",
            {"path": "archive/digests/2026-11-29-weekly.md", "mode": "create", "content": "x"},
            "written by code, not by compile (give your digest sections with record_digest)",
        ),
        (
            "calibrate",
            {"path": "archive/audits/2026-11-calibrate.md", "mode": "create", "content": "x"},
            "written by code, not by calibrate",
        ),
        (
            "curate",
            {"path": "memory/README.md", "mode": "edit", "old": "#", "new": "##"},
            "written by code, not by curate",
        ),
        ("calibrate", {"path": "memory/lessons/a.md", "mode": "delete"}, "not offered mode"),
        ("compile", {"path": "USER.md", "mode": "edit", "old": "#", "new": "##"}, "never changes"),
    ],
)
def test_the_executor_refuses_what_the_contract_does_not_offer(
    ws: object, stage: str, change: dict[str, str], words: str
) -> None:
    from conftest import snapshot
    from crustacean.llm.contract import check_changes
    from crustacean.llm.tools import ToolExecutor
    from crustacean.store.write import Store

    store = Store(ws)  # type: ignore[arg-type]  # a stand-in workspace
    before = snapshot(store.root)
    executor = ToolExecutor(store, stage, "run", guard=lambda c: check_changes(stage, c))
    out = executor.call("write_context", {"changes": [change], "message": "x"})
    assert out.is_error and words in out.text and "othing of this call was applied" in out.text
    assert snapshot(store.root) == before
