"""What the API's prompt cache would bill for a run's request bodies, for the benches' dollars.

The cache works on the prompt in the API's order (tools, then system, then each message's
blocks), whatever order a body's JSON keys come in. A block marked `cache_control` writes the
prefix through it (when that prefix reaches the model's minimum cacheable size); a later request
reads the longest prefix it shares with a written one, looked up at each of its own breakpoints
and up to `LOOKBACK` blocks before each. So per request: `cache_read` is the prefix read,
`cache_write` what follows it up to the last breakpoint, `input` the rest. Tokens are characters
of each block's JSON / 4, the estimate `--plan` uses. One run's requests are minutes apart, well
inside the 5-minute TTL; separate runs (curate is daily) share nothing, so a bill is per run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from crustacean.usage import Usage

LOOKBACK = 20  # blocks before a breakpoint where the API still looks for a cache hit


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(identity, marked) of each block in cache order; the mark is not part of the identity."""
    out: list[tuple[str, bool]] = []

    def add(block: dict[str, Any], role: str = "") -> None:
        bare = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((json.dumps([role, bare], sort_keys=True), "cache_control" in block))

    for tool in body.get("tools", []):
        add(tool)
    system = body.get("system", [])
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        add(block, "system")
    for msg in body["messages"]:
        content = msg["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add(block, msg["role"])
    return out


class PromptCache:
    """The cache of one run: bill each request body in the order they were sent."""

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self.written: set[str] = set()
        self.bill = Usage()

    def send(self, body: dict[str, Any], output_tokens: int = 0) -> Usage:
        """The request's usage, as the API would report it; added to the run's `bill`."""
        blocks = _blocks(body)
        chain, sizes, h = [], [], hashlib.sha256()
        for key, _ in blocks:
            h.update(key.encode())
            chain.append(h.hexdigest())
            sizes.append(len(key) // 4)
        upto = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        read_at = -1
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if chain[j] in self.written:
                    read_at = max(read_at, j)
                    break
        read = upto[read_at] if read_at >= 0 else 0
        cached = [m for m in marks if upto[m] >= self.min_tokens]
        self.written.update(chain[m] for m in cached)
        write = max(0, upto[cached[-1]] - read) if cached else 0
        one = Usage(upto[-1] - read - write, output_tokens, read, write)
        self.bill += one
        return one
