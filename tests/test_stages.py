"""The stage skeleton and registry: one list of stages, one runner, one result type."""

from __future__ import annotations

import re
from pathlib import Path

from crustacean.config import STAGES, StagesConfig
from crustacean.stages import registry
from crustacean.stages.skeleton import Stage, StageResult
from crustacean.workspace import Workspace

PACKAGE = Path(__file__).resolve().parents[1] / "crustacean"


def test_the_registry_holds_every_stage_in_pipeline_order() -> None:
    assert STAGES == ("collect", "curate", "compile", "calibrate")
    assert StagesConfig._fields == STAGES
    for name in STAGES:
        stage = registry.stage(name)
        assert isinstance(stage, Stage) and stage.name == name


def test_every_stage_plans_into_the_one_result_type(ws: Workspace) -> None:
    for name in STAGES:
        result = registry.stage(name).run(ws, plan=True)
        assert isinstance(result, StageResult) and result.record is None
        assert result.to_json()["status"] == "plan" and result.plan_line()


def test_no_other_module_lists_the_stages() -> None:
    """The names live in config.STAGES; a second tuple of them would drift."""
    listing = re.compile(r"""["']collect["'],\s*["']curate["']""")
    found = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if listing.search(path.read_text("utf-8"))
    ]
    assert found == []
