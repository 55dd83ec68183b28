"""Memory tiers (seed 002): pure rules, with time passed in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

TIERS = ("hot", "warm", "cold", "archive")


@dataclass(frozen=True)
class Usage:
    """How often a memory was recalled, from the recall ledger."""

    uses: int = 0
    last_recalled: datetime | None = None
