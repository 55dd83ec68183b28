"""Tokens and what they cost: one home for the billing arithmetic that runs, the model client
and the batch path share (ground floor, so none of them imports another for it)."""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import Any

from crustacean.config import PriceConfig


@dataclass
class Usage:
    """Tokens of one response or one run, by the kinds the API bills separately."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __neg__(self) -> Usage:
        return Usage(*(-n for n in astuple(self)))

    @property
    def total_input(self) -> int:
        """Every prompt token the model read: uncached, read from cache and written to it."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


KINDS = tuple(f.name for f in fields(Usage))  # the billed kinds, as run_records' columns


def usage_of(response_usage: Any) -> Usage:
    """The four billed token kinds of one response (cache fields may be missing or None)."""
    return Usage(
        getattr(response_usage, "input_tokens", 0) or 0,
        getattr(response_usage, "output_tokens", 0) or 0,
        getattr(response_usage, "cache_read_input_tokens", 0) or 0,
        getattr(response_usage, "cache_creation_input_tokens", 0) or 0,
    )


def cost(usage: Usage, price: PriceConfig) -> float:
    """Estimated USD from the configured price table (per million tokens)."""
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / 1_000_000
