"""OpenClaw's dreaming owns DREAMS.md, memory/.dreams/ and memory/dreaming/: no stage writes,
moves or deletes them, and doctor warns about dreaming only when openclaw.json turns it on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_openclaw_jobs import openclaw_home

from conftest import snapshot
from crustacean.errors import PolicyError
from crustacean.ops.status import doctor
from crustacean.store.policy import MODEL_ACTORS, Verdict, decide
from crustacean.store.write import Store
from crustacean.workspace import Workspace

DREAMS = ("DREAMS.md", "dreams.md", "memory/.dreams/recall.json", "memory/dreaming/deep/x.md")


@pytest.mark.parametrize("actor", MODEL_ACTORS)
@pytest.mark.parametrize("mode", ["create", "append", "edit", "overwrite", "delete", "move"])
@pytest.mark.parametrize("path", DREAMS)
def test_no_stage_touches_what_dreaming_owns(actor: str, mode: str, path: str) -> None:
    verdict = decide(actor, mode, path, daily="memory", write_setting="direct")
    assert verdict.verdict is Verdict.DENY and "OpenClaw's dreaming" in verdict.reason


@pytest.mark.parametrize(
    ("actor", "mode", "path", "to", "verdict"),
    [
        ("compile", "move", "memory/notes/a.md", "memory/.Dreams/a.md", Verdict.DENY),  # into it
        ("user", "edit", "DREAMS.md", None, Verdict.ALLOW),  # the user still may
    ],
)
def test_nothing_moves_into_what_dreaming_owns_and_the_user_still_may(
    actor: str, mode: str, path: str, to: str | None, verdict: Verdict
) -> None:
    found = decide(actor, mode, path, daily="memory", write_setting="direct", to=to)
    assert found.verdict is verdict


def test_a_compile_delete_of_dream_state_is_refused_and_changes_nothing(ws: Workspace) -> None:
    state = ws.root / "memory/.dreams/short-term-recall.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"entries": []}\n')
    before = snapshot(ws.root)
    with pytest.raises(PolicyError, match=r"belong to OpenClaw's dreaming"):
        Store(ws).write_context(
            [{"path": "memory/.dreams/short-term-recall.json", "mode": "delete"}],
            actor="compile",
            message="tidy",
        )
    assert snapshot(ws.root) == before


@pytest.mark.parametrize(
    ("dreaming", "warns"),
    [(None, False), ({}, False), ({"enabled": False}, False), ({"enabled": True}, True)],
)
def test_doctor_warns_about_dreaming_only_when_it_is_on(
    ws: Workspace, tmp_path: Path, dreaming: Any, warns: bool
) -> None:
    home = openclaw_home(tmp_path, ws, dreaming)
    env = {"HOME": str(home), "PATH": str(tmp_path / "empty"), "CRUSTACEAN_CONFIG_DIR": "/x"}
    found = [f for f in doctor(ws.root, env=env).findings if f.name == "openclaw dreaming"]
    assert bool(found) is warns
    if found:
        assert "DREAMS.md" in found[0].detail and "memory/.dreams/" in found[0].detail
