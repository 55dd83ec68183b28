"""What a request costs: no text is sent twice in one request, and the cache marks let every
turn read what the turn before wrote (issue 34, item 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crustacean.llm import contract
from crustacean.llm.loop import StageRequest, build_params

PIPELINE = Path(__file__).resolve().parent.parent / "pipeline"


@pytest.mark.parametrize("stage", sorted(contract.CONTRACTS))
def test_the_tool_listing_is_sent_once_in_the_tool_definitions(stage: str) -> None:
    doc = (PIPELINE / contract.contract(stage).doc).read_text()
    params = build_params(StageRequest(stage, doc, "go"), "m", [{"role": "user", "content": "go"}])
    system, tools = params["system"][0]["text"], json.dumps(params["tools"])
    for spec in contract.tool_specs(stage):
        assert f"`{spec.name} {{" not in system  # its listed signature is gone from the doc
        assert spec.description not in system
        assert json.dumps(spec.description)[1:-1] in tools
    assert contract.TOOLS_SENT in system
    assert "**What code hands you**" in system  # the rest of the contract section stays
    assert len(system) < len(doc) + len(contract.preamble(stage))


def test_a_workspace_doc_whose_listing_differs_is_sent_as_it_is() -> None:
    doc = (
        (PIPELINE / "CURATE.md")
        .read_text()
        .replace("Read a file, or lines", "Read a file or lines")
    )
    assert contract.sent_doc("curate", doc) == doc
    assert contract.sent_doc("not-a-stage", "# doc") == "# doc"


def marks(params: dict[str, Any]) -> list[str]:
    """Where the request's cache breakpoints are, in cache order."""
    out = [f"tool {t['name']}" for t in params["tools"] if "cache_control" in t]
    out += ["system" for b in params["system"] if "cache_control" in b]
    for n, msg in enumerate(params["messages"]):
        blocks = msg["content"] if isinstance(msg["content"], list) else []
        out += [f"message {n} block {k}" for k, b in enumerate(blocks) if "cache_control" in b]
    return out


def test_each_turn_keeps_the_previous_turns_breakpoint_and_moves_the_last() -> None:
    calls = [{"type": "tool_use", "id": f"t{i}", "name": "finish", "input": {}} for i in range(25)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"} for i in range(25)]
    history: list[dict[str, Any]] = [{"role": "user", "content": "route these"}]
    req = StageRequest("curate", "# Curate", "route these")
    assert marks(build_params(req, "m", history)) == [
        "tool finish",
        "system",
        "message 0 block 0",
    ]
    history += [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    second = marks(build_params(req, "m", history))
    assert second == ["tool finish", "system", "message 0 block 0", "message 2 block 24"]
    history += [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    third = marks(build_params(req, "m", history))
    assert third == ["tool finish", "system", "message 2 block 24", "message 4 block 24"]
    assert "cache_control" not in json.dumps(history)  # the loop's own history is never marked


def test_the_plan_bills_a_first_turn_as_cache_writes_where_it_is_marked(tmp_path: Path) -> None:
    from crustacean.config import load_config
    from crustacean.llm.runner import plan_stage
    from crustacean.ops.init import init_workspace
    from crustacean.workspace import Workspace

    init_workspace(tmp_path / "ws", detect=False)
    ws = Workspace(tmp_path / "ws", load_config(tmp_path / "ws"))
    price = ws.settings.prices.mid
    out = 8192 // 8 * price.output / 1e6
    cached = plan_stage(ws, StageRequest("curate", "# Curate", "route these"))
    assert cached.est_cost_first_turn == pytest.approx(
        cached.est_input_tokens * price.cache_write / 1e6 + out
    )
    once = plan_stage(ws, StageRequest("curate", "# Curate", "go", cache_prompt=False))
    prefix = (once.system_chars + once.tools_chars) // 4
    assert once.est_cost_first_turn == pytest.approx(
        (prefix * price.cache_write + (once.est_input_tokens - prefix) * price.input) / 1e6 + out
    )
