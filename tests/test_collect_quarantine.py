"""One bad input never stops collect (issue 32): a lone surrogate in a transcript, a line no
reader can parse, an item the model cites wrongly or that holds a credential. Each is made
harmless or set aside with its reason in the run record, and the rest of the run goes on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeAnthropic, prompt_of, tool_use

from conftest import run_cli, stages_at
from crustacean.config import load_config
from crustacean.runs import get_run
from crustacean.sources import read_new
from crustacean.stages.collect import CollectResult, collect
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = "sk-ant-api03-" + "Q" * 40
CUT = "an emoji cut in half \\ud83d here"  # JSON text: half of a UTF-16 pair, as JS writes it


def cc_record(n: int, session: str, role: str, words: str) -> str:
    """One Claude Code line (`~/.claude/projects/<slug>/<session>.jsonl`), JSON text as is."""
    content = words if role == "user" else [{"type": "text", "text": words}]
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/me/garden",
        "sessionId": session,
        "version": "2.0.14",
        "gitBranch": "main",
        "type": role,
        "message": {"role": role, "content": content},
        "uuid": f"{session}-u{n}",
        "timestamp": f"2026-11-30T10:0{n}:00.000Z",
    }
    # the surrogate escape must reach the file as JSON text, not as an encoded character
    return json.dumps(record).replace("@CUT@", CUT) + "\n"


@pytest.fixture
def env(ws: Workspace, tmp_path: Path, fake_api: FakeAnthropic) -> dict[str, str]:
    projects = tmp_path / "claude/projects"
    toml = ws.root / "crustacean.toml"
    source = f'\n[[sources]]\nkind = "claude_code"\npath = "{projects}"\n'
    toml.write_text(toml.read_text() + source)
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake_api.url}


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "claude/projects/-home-me-garden"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def live(ws: Workspace, env: dict[str, str]) -> Workspace:
    return Workspace(ws.root, load_config(ws.root, env=env, overrides=["llm.max_retries=0"]))


def run(ws: Workspace, env: dict[str, str]) -> CollectResult:
    return collect(live(ws, env), env=env, clock=lambda: NOW)


def notes(*items: dict[str, Any]) -> dict[str, Any]:
    return tool_use(("record_notes", {"items": list(items)}))


def test_a_lone_surrogate_becomes_a_replacement_character_and_collect_goes_on(
    ws: Workspace,
    env: dict[str, str],
    fake_api: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stages_at(monkeypatch, NOW)
    (project(tmp_path) / "s1.jsonl").write_text(
        cc_record(1, "s1", "user", "We sow the beans on Friday.")
        + cc_record(2, "s1", "assistant", "@CUT@")
        + cc_record(3, "s1", "user", "And the tomatoes on Sunday.")
    )
    plan = run_cli("-w", str(ws.root), "collect", "--plan", env=env)
    assert "3 new message(s)" in plan.stdout
    fake_api.enqueue(notes({"category": "plan", "text": "Beans on Friday.", "refs": ["m1"]}))
    result = run(ws, env)
    assert result.record.status == "ok" and result.new_messages == 3 and result.appended == 1
    (request,) = fake_api.messages()
    text = prompt_of(request.body)
    assert "an emoji cut in half \ufffd here" in text
    assert "beans on Friday" in text and "tomatoes on Sunday" in text
    assert run(ws, env).record.status == "skipped"  # the cursor moved past all three


def test_a_lone_surrogate_in_a_session_id_or_tool_name_is_replaced_too(tmp_path: Path) -> None:
    path = project(tmp_path) / "s2.jsonl"
    line = cc_record(1, "s2-@CUT@", "user", "hello")
    tool = {
        "type": "assistant",
        "sessionId": "s2",
        "uuid": "t1",
        "timestamp": "2026-11-30T10:05:00.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu1", "name": "Bash@CUT@", "input": {}}],
        },
    }
    path.write_text(line + json.dumps(tool).replace("@CUT@", "\\udc00") + "\n")
    found = read_new(path, "claude_code", None)
    assert found.bad_lines == 0 and len(found.messages) == 2
    for message in found.messages:
        for value in (message.text, message.session, message.id):
            value.encode("utf-8")  # strict: never raises
    assert found.messages[0].session == "s2-an emoji cut in half \ufffd here"


def test_a_bad_line_is_set_aside_with_its_reason_and_the_rest_is_collected(
    ws: Workspace, env: dict[str, str], fake_api: FakeAnthropic, tmp_path: Path
) -> None:
    (project(tmp_path) / "s1.jsonl").write_text(
        cc_record(1, "s1", "user", "Ana likes green tea.")
        + '{"type": "user", "message": \n'  # cut by a crash, then the agent went on
        + cc_record(2, "s1", "user", "Maya is my sister.")
    )
    fake_api.enqueue(notes({"category": "person", "text": "Maya is the sister.", "refs": ["m2"]}))
    result = run(ws, env)
    assert result.record.status == "ok" and result.bad_lines == 1 and result.appended == 1
    (aside,) = get_run(ws, result.record.id).set_aside
    assert aside.kind == "line" and "s1.jsonl:2: not JSON (Expecting value: line 1" in aside.reason
    assert "1 unreadable line(s) skipped" in result.record.summary


def test_several_sessions_a_miscited_item_and_a_credential_are_refused_then_set_aside(
    ws: Workspace,
    env: dict[str, str],
    fake_api: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two Claude Code sessions in one chunk: the model cites m9 (no such message) and puts a
    key in an item; it is told both in one tool result, fixes the citation and not the key.
    The fixed and the good items land, the key's item is set aside (redacted), cursors move."""
    stages_at(monkeypatch, NOW)
    folder = project(tmp_path)
    (folder / "a.jsonl").write_text(
        cc_record(1, "a", "user", "Ana likes green tea.")
        + cc_record(2, "a", "assistant", "Noted: green tea.")
    )
    (folder / "b.jsonl").write_text(
        cc_record(3, "b", "user", "The plumber comes on Friday.")
        + cc_record(4, "b", "user", "Deploy with the staging key.")
    )
    secret = {"category": "fact", "text": f"The staging key is {KEY}.", "refs": ["m4"]}
    fake_api.enqueue(
        notes(
            {"category": "preference", "text": "Ana likes green tea.", "refs": ["m1"]},
            {"category": "reminder", "text": "The plumber comes on Friday.", "refs": ["m9"]},
            secret,
        ),
        notes(
            {"category": "reminder", "text": "The plumber comes on Friday.", "refs": ["m3"]},
            secret,
        ),
    )
    out = run_cli("-w", str(ws.root), "collect", env=env)
    assert "2 item(s) appended" in out.stdout
    assert "1 item(s) set aside after one correction" in out.stdout
    assert "1 reference(s) named no message of their chunk" in out.stdout
    _, second = fake_api.messages()
    refusal = second.body["messages"][-1]["content"][0]
    assert refusal["is_error"] is True
    assert (
        "item 2 ('The plumber comes on Friday.'): its refs (m9) name no message"
        in (refusal["content"])
    )
    assert "item 3 ('The staging key is [REDACTED:" in refusal["content"]
    assert KEY not in refusal["content"]
    log = (ws.root / "memory/2026-11-30.md").read_text()
    assert "Ana likes green tea." in log.split("session=a ", 1)[1]
    assert "The plumber comes on Friday." in log.split("session=b ", 1)[1]
    assert KEY not in log
    runs = json.loads(run_cli("-w", str(ws.root), "runs", "--json", env=env).stdout)
    shown = run_cli("-w", str(ws.root), "runs", "show", runs[0]["id"], env=env).stdout
    assert "Set aside (1), the run went on without them:" in shown
    assert "its text holds a credential" in shown and KEY not in shown
    assert "The staging key is [REDACTED:" in shown
    assert run(ws, env).record.status == "skipped"


def test_a_sent_request_s_tokens_are_recorded_before_its_answer_comes(
    ws: Workspace, env: dict[str, str], fake_api: FakeAnthropic, tmp_path: Path
) -> None:
    """Before: a run killed after it sent a request recorded 0 tokens. While the fake API
    answers, the run record already holds the request's estimate; after, the real usage."""
    from crustacean.runs import list_runs

    (project(tmp_path) / "s1.jsonl").write_text(cc_record(1, "s1", "user", "Ana likes tea."))
    seen: list[tuple[str, int]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        (running,) = list_runs(ws, limit=1)
        seen.append((running.status, running.usage.input_tokens))
        return tool_use(("record_notes", {"items": []}), usage={"input_tokens": 1234})

    fake_api.enqueue(answer)
    result = run(ws, env)
    ((status, pending),) = seen
    assert status == "running" and pending > 500  # the prompt's estimate, before any answer
    assert result.record.usage.input_tokens == 1234  # settled to what the API reported
