"""Our own agent loop on `messages.create` (not the beta tool runner): full history every turn,
prompt caching on the stable prefix, every stop reason handled, budgets enforced by code."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from crustacean.config import BudgetConfig, PriceConfig
from crustacean.llm import contract
from crustacean.llm.tools import TOOLS, ToolExecutor, ToolOutcome, ToolSpec
from crustacean.runs import RunRecorder
from crustacean.usage import Usage, cost, usage_of

EPHEMERAL = {"type": "ephemeral"}
DEFAULT_TOOLS = tuple(TOOLS)


@dataclass(frozen=True)
class StageRequest:
    """What a stage asks of the model: its instructions, its input, its tools."""

    stage: str
    system_doc: str
    prompt: str
    tools: tuple[str, ...] = DEFAULT_TOOLS
    extra_tools: tuple[ToolSpec, ...] = ()
    tool_choice: dict[str, Any] | None = None
    max_tokens: int = 8192
    cache_prompt: bool = True
    """Mark the moving breakpoint on the conversation; False for a one-shot prompt never reused."""
    min_cache_tokens: int = 0
    """Mark the system/tools prefix only when it reaches this size (the model's minimum)."""


# The smallest prefix each model family caches (a smaller one is silently not cached, so a mark
# on it only makes the request look cached). Checked in order; the first match wins.
_MIN_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("haiku-3", 2048),
    ("sonnet-4-6", 2048),
    ("haiku", 4096),
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("opus-4-7", 4096),
    ("opus-5", 512),
    ("fable-5", 512),
    ("mythos-5", 512),
)


def min_cacheable_tokens(model: str) -> int:
    """The model's minimum cacheable prefix in tokens (1024 when the family is not known)."""
    return next((n for mark, n in _MIN_CACHEABLE if mark in model), 1024)


def tool_specs(req: StageRequest) -> list[ToolSpec]:
    """A pipeline stage is offered exactly what its contract lists; other requests their own."""
    if req.stage in contract.CONTRACTS:
        return contract.tool_specs(req.stage)
    return [TOOLS[n] for n in req.tools] + list(req.extra_tools)


def build_params(req: StageRequest, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The request of one turn (pure, so tests can read it): the stable prefix is cached."""
    tools = [t.for_anthropic() for t in tool_specs(req)]
    head = contract.preamble if req.stage in contract.CONTRACTS else contract.actor_preamble
    text = head(req.stage) + "\n" + contract.sent_doc(req.stage, req.system_doc)
    system: dict[str, Any] = {"type": "text", "text": text}
    prefix_tokens = (len(system["text"]) + len(json.dumps(tools))) // 4
    if prefix_tokens >= req.min_cache_tokens:
        system["cache_control"] = EPHEMERAL
        if tools:
            tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": req.max_tokens,
        "system": [system],
        "tools": tools,
        "messages": with_breakpoint(messages) if req.cache_prompt else copy.deepcopy(messages),
    }
    if req.tool_choice:
        params["tool_choice"] = req.tool_choice
    return params


def with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose last block carries the moving cache breakpoint, and whose previous turn's
    last block keeps the one it had: the API looks for a cached prefix only about 20 blocks
    before a breakpoint, so a turn of many parallel calls and results would otherwise miss the
    whole conversation cached by the turn before. With the tools' and the system's, four marks,
    the API's most; older ones are dropped."""
    out = copy.deepcopy(messages)
    for back in (3, 1) if len(out) >= 3 else (1,):
        if len(out) < back:
            continue
        msg = out[-back]
        if isinstance(msg["content"], str):
            msg["content"] = [{"type": "text", "text": msg["content"]}]
        msg["content"][-1] = {**msg["content"][-1], "cache_control": EPHEMERAL}
    return out


@dataclass
class LoopOutcome:
    status: str  # ok | partial | failed
    stop: str
    summary: str | None = None
    error: str | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    text: str = ""
    last_reply_stop: str = ""  # the last response's stop_reason (max_tokens: maybe truncated)


def run_loop(
    create: Callable[..., Any],
    req: StageRequest,
    model: str,
    executor: ToolExecutor,
    budget: BudgetConfig,
    price: PriceConfig,
    recorder: RunRecorder,
    on_turn: Callable[[Usage, float], None] | None = None,
    on_send: Callable[[Usage, float], None] | None = None,
) -> LoopOutcome:
    """Turn by turn until the model finishes, stops, or a budget ends the run as partial.

    `on_send` is told a request's estimated input before it is sent and told it back, negated,
    once the response's real usage is known: a run killed while waiting still shows the
    tokens it spent. A request that failed (an error, not a kill or Ctrl-C) is settled too."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": req.prompt}]
    out = LoopOutcome("ok", "end_turn")
    while True:
        if out.turns >= budget.max_turns:
            return _partial(out, "max_turns", f"stopped after {out.turns} turns (budget.max_turns)")
        if out.usage.total_input >= budget.max_input_tokens:
            return _partial(
                out,
                "max_input_tokens",
                f"stopped at {out.usage.total_input:,} input tokens (budget.max_input_tokens)",
            )
        params = build_params(req, model, messages)
        pending = Usage(input_tokens=len(json.dumps(params)) // 4)
        if on_send:
            on_send(pending, 0.0)  # tokens only: its cost is settled exactly after
        try:
            resp = create(**params)
        except Exception:
            if on_send:
                on_send(-pending, 0.0)
            raise
        if on_send:
            on_send(-pending, 0.0)
        out.turns += 1
        out.last_reply_stop = str(resp.stop_reason)
        used = usage_of(resp.usage)
        out.usage, out.cost = out.usage + used, out.cost + cost(used, price)
        if on_turn:
            on_turn(used, cost(used, price))
        blocks = [_block(b) for b in resp.content]
        messages.append({"role": "assistant", "content": blocks})
        out.text = "".join(b.get("text", "") for b in blocks if b["type"] == "text") or out.text
        recorder.log(
            f"turn {out.turns}: stop_reason={resp.stop_reason}, "
            f"in={used.input_tokens} out={used.output_tokens}"
        )
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if calls and resp.stop_reason in ("tool_use", "max_tokens"):
            results, finished = _run_tools(calls, executor, recorder)
            messages.append({"role": "user", "content": results})
            if finished is not None:
                out.summary, out.stop = finished, "finish"
                return out
            if resp.stop_reason == "tool_use":
                continue
        done = _stop(out, resp.stop_reason)
        if done is not None:
            return done


def _stop(out: LoopOutcome, reason: str | None) -> LoopOutcome | None:
    """What each stop reason means for the run; None means keep going."""
    match reason:
        case "end_turn" | "stop_sequence":
            out.stop, out.summary = reason, out.summary or (out.text.strip() or None)
            return out
        case "pause_turn":
            return None  # the API paused a long turn: send the history back as it is
        case "max_tokens":
            return _partial(out, reason, "the model's reply hit max_tokens; the run stopped")
        case "model_context_window_exceeded":
            return _partial(out, reason, "the conversation outgrew the model's context window")
        case "refusal":
            out.status, out.stop, out.error = "failed", reason, "the model refused to continue"
            return out
        case _:
            return _partial(out, str(reason), f"unexpected stop reason {reason!r}")


def _partial(out: LoopOutcome, stop: str, error: str) -> LoopOutcome:
    out.status, out.stop, out.error = "partial", stop, error
    return out


def _run_tools(
    calls: list[dict[str, Any]], executor: ToolExecutor, recorder: RunRecorder
) -> tuple[list[dict[str, Any]], str | None]:
    """Run every tool_use block of one reply, in order; all get a tool_result."""
    results, finished = [], None
    for call in calls:
        outcome: ToolOutcome = executor.call(call["name"], call.get("input"))
        recorder.tool_call(call["name"], call.get("input") or {}, outcome.is_error, outcome.text)
        if outcome.write is not None:
            w = outcome.write
            recorder.wrote(list(w.files), w.version, w.proposal)
        if outcome.finished is not None:
            finished = outcome.finished
        results.append(
            {
                "type": "tool_result",
                "tool_use_id": call["id"],
                "content": outcome.text,
                "is_error": outcome.is_error,
            }
        )
    return results, finished


def _block(block: Any) -> dict[str, Any]:
    """An SDK content block as a plain param dict (what the next request sends back)."""
    data = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    if data.get("type") == "tool_use" and isinstance(data.get("input"), str):
        with suppress(ValueError):  # a string that is no JSON stays as it came
            data["input"] = json.loads(data["input"])
    return {k: v for k, v in data.items() if k not in ("citations", "caller") or v}
