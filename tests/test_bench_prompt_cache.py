"""The benches bill request bodies as the API's prompt cache would (bench/prompt_cache.py): a
wrong bill would make a cost figure, and the month's, say what the requests do not."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
prompt_cache: Any = importlib.import_module("bench.prompt_cache")

EPH = {"type": "ephemeral"}
SYSTEM = "s" * 8000  # 2,000 tokens or so
TOOLS = [{"name": "finish", "description": "d" * 400, "cache_control": EPH}]


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    """A body with its keys in alphabetical order, as a server sees the SDK's JSON."""
    return {
        "max_tokens": 10,
        "messages": list(messages),
        "system": [{"type": "text", "text": SYSTEM, "cache_control": EPH}],
        "tools": TOOLS,
    }


def user(text: str, mark: bool = True) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    return {"role": "user", "content": [{**block, "cache_control": EPH} if mark else block]}


def test_a_second_turn_reads_what_the_first_wrote_whatever_the_key_order() -> None:
    cache = prompt_cache.PromptCache(1024)
    first = cache.send(body(user("p" * 4000)))
    assert (
        first.cache_read_tokens == 0 and first.input_tokens == 0 and first.cache_write_tokens > 3000
    )
    reply = {"role": "assistant", "content": [{"type": "text", "text": "a" * 400}]}
    second = cache.send(body(user("p" * 4000, mark=False), reply, user("r" * 400)))
    assert (
        second.cache_read_tokens == first.cache_write_tokens
    )  # the whole first prompt, moved mark or not
    assert 150 < second.cache_write_tokens < 300 and second.input_tokens == 0
    assert cache.bill.cache_read_tokens == second.cache_read_tokens


def test_a_prefix_under_the_minimum_is_never_cached() -> None:
    cache = prompt_cache.PromptCache(100_000)
    for _ in range(2):
        one = cache.send(body(user("p" * 400)))
        assert one.cache_read_tokens == one.cache_write_tokens == 0 and one.input_tokens > 2000


def test_a_hit_more_blocks_back_than_the_lookback_is_missed() -> None:
    """The API looks about 20 blocks before a breakpoint: a turn that adds more blocks after
    the previous breakpoint without one of its own there reads only the system prefix."""
    cache = prompt_cache.PromptCache(1024)
    cache.send(body(user("p" * 4000)))
    calls = [{"type": "tool_use", "id": f"t{i}", "name": "finish", "input": {}} for i in range(11)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"} for i in range(11)]
    results[-1] = {**results[-1], "cache_control": EPH}
    later = cache.send(
        body(
            user("p" * 4000, mark=False),
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        )
    )
    assert later.cache_read_tokens < 2200  # tools and system only, not the 1,000-token prompt
