"""The fake Messages API, driven through the real anthropic SDK: if these pass, agent-loop tests
that use it see what production would see (shapes, retries, errors, streaming)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from fakeapi import (
    FakeAnthropic,
    delay,
    drop,
    error,
    find_key_leaks,
    message,
    text,
    tool_use,
)

MODEL = "claude-sonnet-5-5"
HELLO = [{"role": "user", "content": "hello"}]


_clients: list[anthropic.Anthropic] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    """Close every client a test made, so no pooled socket is left for the GC to warn about."""
    yield
    while _clients:
        _clients.pop().close()


def make_client(fake: FakeAnthropic, max_retries: int = 0, **kw: Any) -> anthropic.Anthropic:
    """The SDK pointed at the fake; HOME is already a tmp dir (autouse fixture)."""
    client = anthropic.Anthropic(
        api_key="test-key", base_url=fake.url, max_retries=max_retries, **kw
    )
    _clients.append(client)
    return client


def ask(client: anthropic.Anthropic, **kw: Any) -> anthropic.types.Message:
    """One non-streaming call with the boilerplate filled in."""
    return client.messages.create(**{"model": MODEL, "max_tokens": 1024, "messages": HELLO, **kw})


def test_text_reply_has_api_shape_and_request_is_recorded(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(text("hi there"))
    r = ask(make_client(fake_api), system=[{"type": "text", "text": "be brief"}])
    assert (r.type, r.role, r.stop_reason, r.stop_sequence) == (
        "message",
        "assistant",
        "end_turn",
        None,
    )
    assert r.content[0].type == "text" and r.content[0].text == "hi there"
    assert r.model == MODEL  # echoed from the request
    assert r.id == "msg_01" and r._request_id == "req_01"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (100, 20)
    [req] = fake_api.messages()
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.headers["authorization"] == "Bearer test-key"
    assert req.body["model"] == MODEL and req.body["messages"] == HELLO
    assert req.body["system"] == [{"type": "text", "text": "be brief"}]
    assert fake_api.remaining == 0


def test_tool_use_then_tool_result_turn(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(
        tool_use(
            ("read_context_file", {"path": "README.md"}), ("list_context_files", {}), text="ok"
        ),
        text("done"),
    )
    client = make_client(fake_api)
    msgs: list[dict[str, Any]] = list(HELLO)
    r = ask(client, messages=msgs)
    assert r.stop_reason == "tool_use"
    calls = [b for b in r.content if b.type == "tool_use"]
    assert [(c.id, c.name, c.input) for c in calls] == [
        ("toolu_01", "read_context_file", {"path": "README.md"}),
        ("toolu_02", "list_context_files", {}),
    ]
    msgs.append({"role": "assistant", "content": r.content})
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": "x"} for c in calls]
    msgs.append({"role": "user", "content": results})
    assert ask(client, messages=msgs).content[0].text == "done"
    second = fake_api.messages()[1].body["messages"]
    assert second[1]["role"] == "assistant"
    sent = [(b["type"], b.get("id"), b.get("input")) for b in second[1]["content"]]
    assert sent == [
        ("text", None, None),
        ("tool_use", "toolu_01", {"path": "README.md"}),
        ("tool_use", "toolu_02", {}),
    ]
    assert second[2] == {"role": "user", "content": results}


def test_explicit_tool_id_is_kept(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(tool_use(("toolu_abc", "finish", {"summary": "s"})))
    assert ask(make_client(fake_api)).content[0].id == "toolu_abc"


@pytest.mark.parametrize(
    "stop", ["max_tokens", "pause_turn", "refusal", "model_context_window_exceeded"]
)
def test_any_stop_reason(fake_api: FakeAnthropic, stop: str) -> None:
    fake_api.enqueue(message([{"type": "text", "text": "…"}], stop_reason=stop, model="m-x"))
    r = ask(make_client(fake_api))
    assert (r.stop_reason, r.model) == (stop, "m-x")


def test_429_is_retried_then_succeeds(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(error(429), text("ok"))
    assert ask(make_client(fake_api, max_retries=2)).content[0].text == "ok"
    reqs = fake_api.messages()
    assert [r.headers["x-stainless-retry-count"] for r in reqs] == ["0", "1"]


def test_401_is_not_retried(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(error(401, message="invalid x-api-key"), text("never"))
    with pytest.raises(anthropic.AuthenticationError) as exc:
        ask(make_client(fake_api, max_retries=2))
    assert exc.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    assert len(fake_api.messages()) == 1 and fake_api.remaining == 1


def test_404_unknown_model(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(error(404, message="model: claude-nope"))
    with pytest.raises(anthropic.NotFoundError, match="claude-nope"):
        ask(make_client(fake_api), model="claude-nope")


def test_unknown_path_is_404(fake_api: FakeAnthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        make_client(fake_api).models.list()
    assert fake_api.requests[0].path == "/v1/models" and fake_api.messages() == []


def test_delay_makes_client_time_out_quickly(fake_api: FakeAnthropic) -> None:
    """The answer is held for 10 minutes: only the client's own timeout ends the call."""
    fake_api.enqueue(delay(600, text("late")))
    with pytest.raises(anthropic.APITimeoutError):
        ask(make_client(fake_api, timeout=0.3))


def test_busy_seconds_counts_handling_and_scripted_delays(fake_api: FakeAnthropic) -> None:
    """Benchmarks subtract it from a client's wall time, so it must not count idle time."""
    assert fake_api.busy_seconds == 0.0
    client = make_client(fake_api)
    fake_api.enqueue(delay(0.2, text("late")), text("quick"))
    start = time.perf_counter()
    ask(client)
    time.sleep(0.3)  # idle between requests: not the server's time
    ask(client)
    wall = time.perf_counter() - start
    assert 0.2 <= fake_api.busy_seconds < wall - 0.3


def test_stop_does_not_wait_for_a_pending_delay() -> None:
    """A held answer of 10 minutes; stopping well before it (a safety margin, not a deadline)."""
    start = time.monotonic()
    with FakeAnthropic() as fake:
        fake.enqueue(delay(600, text("late")))
        with pytest.raises(anthropic.APITimeoutError):
            ask(make_client(fake, timeout=0.2))
    assert time.monotonic() - start < 300


def test_drop_is_a_connection_error(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(drop())
    with pytest.raises(anthropic.APIConnectionError):
        ask(make_client(fake_api))
    fake_api.enqueue(text("next"))  # the server survives a dropped connection
    assert ask(make_client(fake_api)).content[0].text == "next"


def test_stream_text(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(text("streamed reply text", usage={"output_tokens": 7}))
    kw: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HELLO}
    with make_client(fake_api).messages.stream(**kw) as s:
        pieces = list(s.text_stream)
        final = s.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == "streamed reply text"
    assert final.content[0].text == "streamed reply text"
    assert (final.stop_reason, final.usage.output_tokens, final.usage.input_tokens) == (
        "end_turn",
        7,
        100,
    )
    assert fake_api.messages()[0].body["stream"] is True


def test_stream_tool_input(fake_api: FakeAnthropic) -> None:
    args = {"path": "notes/a.md", "content": "x" * 40, "expected_sha256": None}
    fake_api.enqueue(tool_use(("write_context", args), ("finish", {}), text="writing"))
    kw: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HELLO}
    with make_client(fake_api).messages.stream(**kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
        ("text", None),
        ("tool_use", args),
        ("tool_use", {}),
    ]
    assert final.content[0].text == "writing"


def test_count_tokens_does_not_consume_the_queue(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(text("kept"))
    n = make_client(fake_api).messages.count_tokens(model=MODEL, messages=HELLO)
    [req] = fake_api.requests
    assert req.path == "/v1/messages/count_tokens"
    assert n.input_tokens == len(json.dumps(req.body)) // 4 > 0
    assert fake_api.remaining == 1 and fake_api.messages() == []


def test_cache_usage_passes_through(fake_api: FakeAnthropic) -> None:
    usage = {"cache_read_input_tokens": 900, "cache_creation_input_tokens": 50}
    fake_api.enqueue(text("cached", usage=usage))
    r = ask(make_client(fake_api), cache_control={"type": "ephemeral"})
    assert (r.usage.cache_read_input_tokens, r.usage.cache_creation_input_tokens) == (900, 50)
    assert r.usage.input_tokens == 100  # defaults fill the rest
    assert fake_api.messages()[0].body["cache_control"] == {"type": "ephemeral"}


def test_empty_queue_is_a_non_retryable_500(fake_api: FakeAnthropic) -> None:
    with pytest.raises(anthropic.InternalServerError, match="no scripted response left"):
        ask(make_client(fake_api, max_retries=2))
    assert len(fake_api.messages()) == 1  # x-should-retry: false


def test_find_key_leaks(fake_api: FakeAnthropic) -> None:
    fake_api.enqueue(text("a"), text("b"))
    client = make_client(fake_api)
    ask(client)
    assert find_key_leaks(fake_api, "test-key") == []  # the header carries it; that's fine
    ask(client, messages=[{"role": "user", "content": "my key is test-key"}])
    [leak] = find_key_leaks(fake_api, "test-key")
    assert "my key is test-key" in leak


def test_message_batches_through_the_sdk(fake_api: FakeAnthropic) -> None:
    """create → retrieve (in progress) → end → retrieve → results, with the SDK's own calls."""
    fake_api.enqueue(text("first"), error(400, message="bad request"))
    client = make_client(fake_api)
    params = {"model": MODEL, "max_tokens": 64, "messages": HELLO}
    batch = client.messages.batches.create(
        requests=[{"custom_id": "a", "params": params}, {"custom_id": "b", "params": params}]
    )
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 2
    assert client.messages.batches.retrieve(batch.id).results_url is None
    with pytest.raises(anthropic.AnthropicError):
        list(client.messages.batches.results(batch.id))
    fake_api.end_batches()
    done = client.messages.batches.retrieve(batch.id)
    assert done.processing_status == "ended" and done.request_counts.succeeded == 1
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["a"].type == "succeeded" and results["a"].message.content[0].text == "first"
    assert results["b"].type == "errored"
    assert fake_api.batch_requests() == [params, params]
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve("msgbatch_missing")
