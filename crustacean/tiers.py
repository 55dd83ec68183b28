"""Memory tiers (seed 002): pure rules, with time passed in.

Hot memories are always loaded, warm ones when relevant, cold ones only when highly relevant,
archive never. Unused memories fade: hot→warm after `hot_days` without recall *and* fewer than
`hot_min_uses` uses, warm→cold after `warm_days`, cold→archive after `cold_days`. Every decision
carries the rule ids that fired and the figures they compared, so `tier list` and compile can
say why.

"Days without recall" run from the memory's clock: its last recall, or its creation when it was
never recalled; a manual tier restarts the clock at `tier_set` (the override holds until the
usual criteria are met again, counted from then).

Code never writes a tier into a file: the lifecycle's tiers and `tier set`'s overrides live in
state.db (`StoredTier`). A `tier:` a person wrote in a file's own frontmatter is their word: it
wins over anything stored, and the lifecycle leaves that memory alone (`Memory.pinned`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

TIERS = ("hot", "warm", "cold", "archive")
DAY_SECONDS = 86_400

# rule id → (from, to)
STEPS: dict[str, tuple[str, str]] = {
    "hot_to_warm": ("hot", "warm"),
    "warm_to_cold": ("warm", "cold"),
    "cold_to_archive": ("cold", "archive"),
    "hot_limit": ("hot", "warm"),
    "memory_cap": ("cold", "archive"),
}


class Recalls(NamedTuple):
    """How often a memory was recalled, from the recall ledger. This module's value types are
    NamedTuples (not frozen dataclasses, ~0.5 ms of generated code each at import, which every
    `context`, hook and search pays); `Memory` stays a dataclass, as compile's cache tells its
    rows (tuples) from it by type."""

    uses: int = 0
    last_recalled: datetime | None = None


class Rules(NamedTuple):
    """The thresholds of seed 002 (config section `[tiers]`)."""

    hot_days: int = 7
    hot_min_uses: int = 5
    warm_days: int = 30
    cold_days: int = 90
    hot_limit: int = 20
    memory_cap: int = 10000

    @classmethod
    def from_config(cls, tiers_config: Any) -> Rules:
        """From `crustacean.config.TiersConfig` (same field names)."""
        return cls(**{name: getattr(tiers_config, name) for name in cls._fields})


@dataclass(frozen=True)
class Memory:
    """What the rules need to know about one memory file.

    `tier_set` counts only when `manual`; a plain date is taken as midnight UTC. `pinned`: the
    tier is the one the file's own frontmatter names, which the lifecycle never changes.
    """

    path: str
    tier: str
    manual: bool
    created: datetime
    tier_set: datetime | date | None = None
    pinned: bool = False


class StoredTier(NamedTuple):
    """A tier kept in state.db, outside the file: the lifecycle's (`manual` False) or a
    `tier set` override (`manual`, with the moment it was set)."""

    tier: str
    manual: bool = False
    tier_set: datetime | None = None


def with_stored(mem: Memory, stored: StoredTier | None) -> Memory:
    """The memory with its stored tier, unless the file names its own (pure)."""
    if mem.pinned or stored is None:
        return mem
    return replace(mem, tier=stored.tier, manual=stored.manual, tier_set=stored.tier_set)


class TierDecision(NamedTuple):
    """Where one memory goes, which rules fired (in order) and the figures they compared."""

    path: str
    current: str
    next: str
    rules: tuple[str, ...] = ()
    figures: dict[str, int | str] = {}  # noqa: RUF012  # never changed in place: rules copy it

    @property
    def changed(self) -> bool:
        return self.next != self.current

    @property
    def reason(self) -> str:
        """One line for people, e.g. "hot→warm: 12 days without recall (≥7) and 2 uses (<5)"."""
        if not self.rules:
            return _stay_reason(self.current, self.figures)
        return "; ".join(_rule_reason(rule, self.figures) for rule in self.rules)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "current": self.current,
            "next": self.next,
            "changed": self.changed,
            "rules": list(self.rules),
            "figures": dict(self.figures),
            "reason": self.reason,
        }


def default_tier(path: str) -> str:
    """The tier of a file whose frontmatter names none, by where it lives.

    Lessons are settled rulings, always loaded; knowledge/ is reference, loaded only when highly
    relevant; anything in archive/ is never loaded; every other memory is warm.
    """
    path = path.removeprefix("./")
    if path.startswith("memory/lessons/"):
        return "hot"
    if path.startswith("knowledge/"):
        return "cold"
    if path.startswith("archive/"):
        return "archive"
    return "warm"


# ---------------------------------------------------------------------------------------------
# One memory


def utc(moment: datetime | date) -> datetime:
    """An aware UTC datetime; naive means UTC already, and a date means its midnight."""
    if not isinstance(moment, datetime):
        return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def idle_since(mem: Memory, recalls: Recalls) -> tuple[datetime, str]:
    """When the days without recall start counting, and from what."""
    if recalls.last_recalled is not None:
        start, what = utc(recalls.last_recalled), "last_recalled"
    else:
        start, what = utc(mem.created), "created"
    if mem.manual and mem.tier_set is not None and utc(mem.tier_set) > start:
        start, what = utc(mem.tier_set), "tier_set"
    return start, what


def days_between(start: datetime, now: datetime) -> int:
    """Whole days from start to now; a start in the future counts as 0."""
    return max(0, int((utc(now) - start).total_seconds() // DAY_SECONDS))


def next_tier(mem: Memory, recalls: Recalls, now: datetime, rules: Rules) -> TierDecision:
    """Apply the lifecycle once, following the chain as far as the figures allow."""
    if mem.tier not in TIERS:
        raise ValueError(f"{mem.path}: unknown tier {mem.tier!r}; expected one of {TIERS}")
    start, what = idle_since(mem, recalls)
    days = days_between(start, now)
    figures: dict[str, int | str] = {"days_unrecalled": days, "uses": recalls.uses, "clock": what}
    tier, fired = _descend(mem.tier, days, recalls.uses, rules, figures)
    return TierDecision(mem.path, mem.tier, tier, fired, figures)


def _descend(
    tier: str, days: int, uses: int, rules: Rules, figures: dict[str, int | str]
) -> tuple[str, tuple[str, ...]]:
    """Walk down while the next rule holds; records each threshold it compared in `figures`."""
    fired: list[str] = []
    if tier == "hot":
        figures |= {"hot_days": rules.hot_days, "hot_min_uses": rules.hot_min_uses}
        if days < rules.hot_days or uses >= rules.hot_min_uses:
            return tier, tuple(fired)
        tier = "warm"
        fired.append("hot_to_warm")
    if tier == "warm":
        figures["warm_days"] = rules.warm_days
        if days < rules.warm_days:
            return tier, tuple(fired)
        tier = "cold"
        fired.append("warm_to_cold")
    if tier == "cold":
        figures["cold_days"] = rules.cold_days
        if days >= rules.cold_days:
            tier = "archive"
            fired.append("cold_to_archive")
    return tier, tuple(fired)


# ---------------------------------------------------------------------------------------------
# All memories


def plan_tiers(
    memories: list[Memory], recalls: dict[str, Recalls], now: datetime, rules: Rules
) -> list[TierDecision]:
    """One decision per memory, in input order: lifecycle, then hot limit, then memory cap.
    A pinned memory (its tier in its own frontmatter) gets none: the person's word holds."""
    memories = [m for m in memories if not m.pinned]
    clocks = {m.path: idle_since(m, recalls.get(m.path, Recalls()))[0] for m in memories}
    uses = {m.path: recalls.get(m.path, Recalls()).uses for m in memories}
    decisions = [next_tier(m, recalls.get(m.path, Recalls()), now, rules) for m in memories]
    decisions = _apply_hot_limit(decisions, clocks, rules)
    return _apply_memory_cap(decisions, clocks, uses, rules)


def next_change(
    memories: list[Memory], recalls: dict[str, Recalls], now: datetime, rules: Rules
) -> datetime | None:
    """The first moment after `now` at which `plan_tiers` could decide otherwise on the same
    memories and recalls (None: never). Time enters only as whole days without recall compared
    with hot_days, warm_days and cold_days, and `days >= T` turns true at clock + T days."""
    now, soonest = utc(now), None
    thresholds = {rules.hot_days, rules.warm_days, rules.cold_days}
    for mem in (m for m in memories if not m.pinned):
        start, _ = idle_since(mem, recalls.get(mem.path, Recalls()))
        for days in thresholds:
            at = start + timedelta(days=days)
            if at > now and (soonest is None or at < soonest):
                soonest = at
    return soonest


def _apply_hot_limit(
    decisions: list[TierDecision], clocks: dict[str, datetime], rules: Rules
) -> list[TierDecision]:
    """Beyond the limit, the least recently recalled hot ones go warm (ties: path)."""
    hot = [d for d in decisions if d.next == "hot"]
    excess = len(hot) - rules.hot_limit
    if excess <= 0:
        return decisions
    hot.sort(key=lambda d: (clocks[d.path], d.path))
    demote = {d.path for d in hot[:excess]}
    extra = {"hot_count": len(hot), "hot_limit": rules.hot_limit}
    return [_demoted(d, rules, extra) if d.path in demote else d for d in decisions]


def _demoted(d: TierDecision, rules: Rules, extra: Mapping[str, int | str]) -> TierDecision:
    """Hot limit moves it to warm; the lifecycle then continues from warm as usual."""
    figures = {**d.figures, **extra}
    days, uses = int(figures["days_unrecalled"]), int(figures["uses"])
    tier, fired = _descend("warm", days, uses, rules, figures)
    return d._replace(next=tier, rules=(*d.rules, "hot_limit", *fired), figures=figures)


def _apply_memory_cap(
    decisions: list[TierDecision],
    clocks: dict[str, datetime],
    uses: dict[str, int],
    rules: Rules,
) -> list[TierDecision]:
    """At or over the cap, archive the lowest-priority cold ones until under it; never warm/hot."""
    count = sum(d.next != "archive" for d in decisions)
    need = count - rules.memory_cap + 1
    if need <= 0:
        return decisions
    cold = [d for d in decisions if d.next == "cold"]
    cold.sort(key=lambda d: (uses[d.path], clocks[d.path], d.path))
    chosen = {d.path for d in cold[:need]}
    extra = {"memory_count": count, "memory_cap": rules.memory_cap}
    return [
        d._replace(next="archive", rules=(*d.rules, "memory_cap"), figures={**d.figures, **extra})
        if d.path in chosen
        else d
        for d in decisions
    ]


# ---------------------------------------------------------------------------------------------
# Reasons


def _rule_reason(rule: str, f: dict[str, int | str]) -> str:
    src, dst = STEPS.get(rule, ("?", "?"))
    days = f.get("days_unrecalled")
    if rule == "hot_to_warm":
        why = (
            f"{days} days without recall (≥{f.get('hot_days')}) "
            f"and {f.get('uses')} uses (<{f.get('hot_min_uses')})"
        )
    elif rule in ("warm_to_cold", "cold_to_archive"):
        limit = f.get("warm_days" if rule == "warm_to_cold" else "cold_days")
        why = f"{days} days without recall (≥{limit})"
    elif rule == "hot_limit":
        why = (
            f"{f.get('hot_count')} hot memories exceed the hot limit of {f.get('hot_limit')}; "
            f"among the least recently recalled ({days} days without recall)"
        )
    elif rule == "memory_cap":
        why = (
            f"{f.get('memory_count')} memories reach the cap of {f.get('memory_cap')}; "
            f"lowest-priority cold ({f.get('uses')} uses, {days} days without recall)"
        )
    else:
        why = rule
    return f"{src}→{dst}: {why}"


def _stay_reason(tier: str, f: dict[str, int | str]) -> str:
    days = f.get("days_unrecalled")
    if tier == "hot":
        uses, min_uses = f.get("uses", 0), f.get("hot_min_uses", 0)
        if isinstance(uses, int) and isinstance(min_uses, int) and uses >= min_uses:
            return f"stays hot: {uses} uses (≥{min_uses})"
        return f"stays hot: {days} days without recall (<{f.get('hot_days')})"
    if tier in ("warm", "cold"):
        limit = f.get(f"{tier}_days")
        return f"stays {tier}: {days} days without recall (<{limit})"
    return "stays archive: only moved back by hand"
