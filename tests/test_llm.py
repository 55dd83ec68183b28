"""The model runtime end to end: the real anthropic SDK against the local fake Messages API."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakeapi import delay, drop, error, find_key_leaks, message, text, tool_use
from stagekit import live, run_stage, write_call
from store_helpers import git

from conftest import snapshot
from crustacean.config import load_config
from crustacean.errors import ConfigError, LockedError, ModelError
from crustacean.llm.client import resolve_credentials
from crustacean.llm.loop import StageRequest, build_params
from crustacean.llm.runner import plan_stage
from crustacean.runs import RunLock, get_run, list_runs
from crustacean.workspace import Workspace

KEY = "sk-ant-api03-" + "K" * 40  # looks real, so the leak checks mean something


def request(prompt: str = "Route today's notes.") -> StageRequest:
    return StageRequest(stage="curate", system_doc="# Curate\nRoute things.", prompt=prompt)


def configured(ws: Workspace, fake: Any, *extra: str) -> tuple[Workspace, dict[str, str]]:
    return live(ws, fake, "llm.max_retries=2", "llm.timeout_seconds=5", *extra, key=KEY)


def test_two_turn_stage_end_to_end(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api)
    fake_api.enqueue(
        tool_use(
            ("read_context_file", {"path": "memory/README.md"}),
            write_call(
                "memory/notes/tea.md",
                "create",
                "note Alice's tea",
                content="- Alice likes green tea.\n",
            ),
            usage={"input_tokens": 1200, "cache_creation_input_tokens": 3000},
        ),
        tool_use(
            ("finish", {"summary": "Filed one note."}),
            usage={"input_tokens": 300, "cache_read_input_tokens": 3000, "output_tokens": 40},
        ),
    )
    run = run_stage(ws, request(), env=env)
    rec = run.record
    assert (rec.status, rec.turns, rec.summary) == ("ok", 2, "Filed one note.")
    assert rec.files_changed == ["memory/notes/tea.md"] and len(rec.versions) == 1
    u = rec.usage
    assert (u.input_tokens, u.cache_write_tokens, u.cache_read_tokens) == (1500, 3000, 3000)
    assert rec.cost_usd > 0
    assert (ws.root / "memory/notes/tea.md").read_text() == "- Alice likes green tea.\n"
    log = git(ws.root, "log", "-1", "--format=%an|%s|%B")
    assert log.startswith("crustacean curate|note Alice's tea|")
    assert f"Crustacean-Run: {rec.id}" in log
    assert rec.model == "claude-sonnet-5-5"

    first, second = fake_api.messages()
    assert first.body["model"] == "claude-sonnet-5-5"
    assert first.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "Read a file before changing it" in first.body["system"][0]["text"]
    assert first.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in first.body["tools"]] == [
        "list_context_files",
        "read_context_file",
        "search_memory",
        "write_context",
        "record_routing",
        "finish",
    ]
    last = second.body["messages"][-1]
    assert last["role"] == "user" and last["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [b["type"] for b in last["content"]] == ["tool_result", "tool_result"]
    # the moving breakpoint, and the previous turn's kept (a hit however many blocks a turn adds)
    assert second.body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps(second.body["messages"][1])
    read_result = json.loads(last["content"][0]["content"])
    assert read_result["path"] == "memory/README.md" and len(read_result["sha256"]) == 64
    written = json.loads(last["content"][1]["content"])  # the new sha256: no second read needed
    tea = (ws.root / "memory/notes/tea.md").read_bytes()
    assert written["sha256"] == {"memory/notes/tea.md": hashlib.sha256(tea).hexdigest()}
    assert find_key_leaks(fake_api, KEY) == []
    stored = get_run(ws, rec.id)
    assert [c.name for c in stored.tool_calls] == ["read_context_file", "write_context", "finish"]
    assert (ws.root / ".crustacean/logs" / f"{rec.id}.log").is_file()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (write_call("memory/notes/x.md", "delete"), "curate is not offered mode 'delete'"),
        (("write_context", {"changes": "not a list", "message": "x"}), "changes must be"),
        (write_call("../../etc/passwd", "create", content="x"), "uses '..'"),
        (("read_context_file", {}), "'path' is required"),
        (("read_context_file", {"path": "memory/none.md"}), "does not exist"),
        (("search_memory", {"query": "x", "limit": "ten"}), "limit must be an integer"),
        (("teleport", {"to": "mars"}), "unknown tool 'teleport'"),
        (
            write_call("MEMORY.md", "append", content="x", expected_sha256="0" * 64),
            "changed since it was read",
        ),
    ],
)
def test_bad_tool_calls_become_error_results(
    ws: Workspace, fake_api: Any, call: tuple[str, dict[str, Any]], words: str
) -> None:
    ws, env = configured(ws, fake_api)
    (ws.root / "memory/notes/x.md").write_text("x\n")
    fake_api.enqueue(tool_use(call), text("I give up."))
    before = snapshot(ws.root / "memory")
    run = run_stage(ws, request(), env=env)
    assert run.record.status == "ok"
    result = fake_api.messages()[1].body["messages"][-1]["content"][0]
    assert result["is_error"] is True and words in result["content"]
    assert snapshot(ws.root / "memory") == before


def test_foundation_write_becomes_a_proposal(ws: Workspace, fake_api: Any) -> None:
    """Calibrate is the stage whose contract lets it propose foundation changes."""
    ws, env = configured(ws, fake_api)
    before = (ws.root / "SOUL.md").read_bytes()
    fake_api.enqueue(
        tool_use(write_call("SOUL.md", "append", "bolder", content="- Be bolder.\n")),
        tool_use(("finish", {"summary": "proposed"})),
    )
    req = StageRequest(stage="calibrate", system_doc="# Calibrate", prompt="Review.")
    rec = run_stage(ws, req, env=env).record
    assert rec.proposals == [1] and rec.versions == []
    assert (ws.root / "SOUL.md").read_bytes() == before
    reply = fake_api.messages()[1].body["messages"][-1]["content"][0]["content"]
    assert json.loads(reply)["proposal"] == 1 and json.loads(reply)["applied"] is False


@pytest.mark.parametrize(
    ("final", "status", "error"),
    [
        (
            message([{"type": "text", "text": "cut"}], stop_reason="max_tokens"),
            "partial",
            "max_tokens",
        ),
        (message([{"type": "text", "text": "no"}], stop_reason="refusal"), "failed", "refused"),
        (
            message([{"type": "text", "text": "big"}], stop_reason="model_context_window_exceeded"),
            "partial",
            "context window",
        ),
        (text("All done."), "ok", None),
    ],
)
def test_stop_reasons(
    ws: Workspace, fake_api: Any, final: dict, status: str, error: str | None
) -> None:
    ws, env = configured(ws, fake_api)
    fake_api.enqueue(
        message([{"type": "text", "text": "thinking..."}], stop_reason="pause_turn"), final
    )
    rec = run_stage(ws, request(), env=env).record
    assert rec.status == status and rec.turns == 2
    assert (rec.error is None) if error is None else (error in rec.error)
    assert len(fake_api.messages()) == 2  # pause_turn continued without a new user message
    assert fake_api.messages()[1].body["messages"][-1]["role"] == "assistant"


def test_a_model_that_loops_forever_is_stopped_by_max_turns(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api, "budget.max_turns=3")
    fake_api.enqueue(*[tool_use(("list_context_files", {"prefix": "memory/"}))] * 5)
    rec = run_stage(ws, request(), env=env).record
    assert (rec.status, rec.turns) == ("partial", 3)
    assert "budget.max_turns" in rec.error
    assert fake_api.remaining == 2


def test_input_token_budget_stops_the_run(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api, "budget.max_input_tokens=150")
    fake_api.enqueue(*[tool_use(("list_context_files", {}))] * 3)
    rec = run_stage(ws, request(), env=env).record
    assert (rec.status, rec.turns) == ("partial", 2)
    assert "budget.max_input_tokens" in rec.error


def test_dry_run_writes_nothing_and_shows_the_diff(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api)
    fake_api.enqueue(
        tool_use(write_call("memory/notes/d.md", "create", "d", content="- dry\n")),
        tool_use(("read_context_file", {"path": "memory/notes/d.md"})),
        tool_use(("finish", {"summary": "done"})),
    )
    before = snapshot(ws.root)
    run = run_stage(ws, request(), env=env, dry_run=True)
    seen = json.loads(fake_api.messages()[2].body["messages"][-1]["content"][0]["content"])
    assert seen["content"] == "- dry\n"  # the model reads its own write back
    assert run.diff is not None and "+++ b/memory/notes/d.md" in run.diff and "+- dry" in run.diff
    assert not (ws.root / "memory/notes/d.md").exists()
    after = snapshot(ws.root)
    assert {k: v for k, v in after.items() if not k.startswith(".crustacean/")} == {
        k: v for k, v in before.items() if not k.startswith(".crustacean/")
    }
    assert run.record.dry_run and run.record.versions == []


def test_plan_makes_no_call_and_needs_no_key(ws: Workspace, fake_api: Any) -> None:
    plan = plan_stage(ws, request("x" * 4000))
    assert plan.model == "claude-sonnet-5-5" and plan.est_input_tokens > 1000
    assert plan.est_cost_first_turn > 0 and plan.excerpt.endswith(" …")
    assert "write_context" in plan.tools
    assert fake_api.requests == []


def test_build_params_is_pure_and_readable() -> None:
    params = build_params(request(), "m", [{"role": "user", "content": "hi"}])
    assert params["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]


# ------------------------------------------------------------ faults


def test_no_api_key_is_a_config_error_before_any_call(ws: Workspace, fake_api: Any) -> None:
    with pytest.raises(ConfigError, match="no API key: set ANTHROPIC_API_KEY") as info:
        run_stage(ws, request(), env={})
    assert info.value.exit_code == 2 and fake_api.requests == []
    assert list_runs(ws) == []


def test_key_from_the_env_file(ws: Workspace, tmp_path: Path) -> None:
    envfile = tmp_path / "userconfig" / "env"
    envfile.parent.mkdir(parents=True, exist_ok=True)
    envfile.write_text(f"# for cron\nexport ANTHROPIC_API_KEY='{KEY}'\n")
    creds = resolve_credentials(
        ws.settings, {"CRUSTACEAN_CONFIG_DIR": str(tmp_path / "userconfig")}
    )
    assert creds.key == KEY and creds.source == str(envfile)


def test_an_auth_token_is_sent_as_a_bearer_token(ws: Workspace, fake_api: Any) -> None:
    """ANTHROPIC_AUTH_TOKEN is an OAuth-style token: Authorization: Bearer, not x-api-key."""
    env = {"ANTHROPIC_AUTH_TOKEN": KEY, "ANTHROPIC_BASE_URL": fake_api.url}
    live = Workspace(ws.root, load_config(ws.root, env=env, overrides=["llm.max_retries=0"]))
    fake_api.enqueue(text("done"))
    run_stage(live, request(), env=env)
    headers = fake_api.messages()[0].headers
    assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers


@pytest.mark.parametrize(
    ("items", "words", "requests"),
    [
        ([error(401)], "the API key was rejected", 1),
        ([error(404)], "set models.mid in crustacean.toml", 1),
        ([error(429)] * 3, "rate-limited the run (429) after 2 retries", 3),
        ([error(529)] * 3, "overloaded (529) after 2 retries", 3),
        ([error(500)] * 3, "the API failed (500) after 2 retries", 3),
        ([drop()] * 3, "could not reach the API", 3),
    ],
)
def test_api_faults_fail_the_run_cleanly(
    ws: Workspace, fake_api: Any, items: list[Any], words: str, requests: int
) -> None:
    ws, env = configured(ws, fake_api)
    fake_api.enqueue(*items)
    before = snapshot(ws.root / "memory")
    with pytest.raises(ModelError, match=re.escape(words)) as info:
        run_stage(ws, request(), env=env)
    assert info.value.exit_code == 1
    assert KEY not in str(info.value)
    assert len(fake_api.messages()) == requests
    (rec,) = list_runs(ws)
    assert rec.status == "failed" and words.split(" (")[0] in rec.error
    assert snapshot(ws.root / "memory") == before


def test_timeout_fails_the_run(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api, "llm.timeout_seconds=0.3", "llm.max_retries=0")
    fake_api.enqueue(delay(600, text("late")))  # held 10 minutes: only the timeout ends it
    with pytest.raises(ModelError, match=r"did not answer within 0.3s"):
        run_stage(ws, request(), env=env)


def test_connection_refused(ws: Workspace) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    ws = Workspace(ws.root, load_config(ws.root, env=env, overrides=["llm.max_retries=0"]))
    with pytest.raises(
        ModelError, match=re.escape("could not reach the API at http://127.0.0.1:9")
    ):
        run_stage(ws, request(), env=env)


def test_error_after_a_write_keeps_the_write_whole(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api, "llm.max_retries=0")
    fake_api.enqueue(
        tool_use(write_call("memory/notes/a.md", "create", "a", content="- a\n")),
        error(500),
    )
    with pytest.raises(ModelError):
        run_stage(ws, request(), env=env)
    assert (ws.root / "memory/notes/a.md").read_text() == "- a\n"
    assert git(ws.root, "status", "--porcelain") == ""  # the version is whole, nothing dangling
    (rec,) = list_runs(ws)
    assert rec.status == "failed" and rec.files_changed == ["memory/notes/a.md"]


def test_a_second_run_exits_with_the_lock_error(ws: Workspace, fake_api: Any) -> None:
    ws, env = configured(ws, fake_api)
    with RunLock(ws, "compile", "other"), pytest.raises(LockedError) as info:
        run_stage(ws, request(), env=env)
    assert info.value.exit_code == 75 and "stage compile" in str(info.value)
    assert fake_api.requests == []
