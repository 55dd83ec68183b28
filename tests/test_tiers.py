"""Tier lifecycle (seed 002): every boundary, the chain, the hot limit and the memory cap."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crustacean.config import TiersConfig
from crustacean.tiers import (
    TIERS,
    Memory,
    Recalls,
    Rules,
    TierDecision,
    default_tier,
    next_tier,
    plan_tiers,
    utc,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RULES = Rules()


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def mem(
    tier: str,
    path: str = "memory/notes/a.md",
    *,
    created: float = 400,
    manual: bool = False,
    tier_set: float | None = None,
) -> Memory:
    return Memory(path, tier, manual, ago(created), None if tier_set is None else ago(tier_set))


def use(uses: int, recalled: float | None) -> Recalls:
    return Recalls(uses, None if recalled is None else ago(recalled))


CHAIN = ("hot_to_warm", "warm_to_cold", "cold_to_archive")  # the lifecycle's rules in order

# (tier, uses, days since last recall or None, created days ago) → (next, rules)
LIFECYCLE = [
    ("hot, day 6", "hot", 0, 6, 400, "hot", ()),
    ("hot, day 7", "hot", 0, 7, 400, "warm", ("hot_to_warm",)),
    ("hot, day 7, 4 uses", "hot", 4, 7, 400, "warm", ("hot_to_warm",)),
    ("hot, day 7, 5 uses", "hot", 5, 7, 400, "hot", ()),
    ("hot, day 6, 4 uses", "hot", 4, 6, 400, "hot", ()),
    ("hot, 5 uses never fades", "hot", 5, 400, 400, "hot", ()),
    ("hot, 6 days 23 h", "hot", 0, 6 + 23 / 24, 400, "hot", ()),
    ("hot, day 29", "hot", 2, 29, 400, "warm", ("hot_to_warm",)),
    ("hot, day 30", "hot", 2, 30, 400, "cold", CHAIN[:2]),
    ("hot, day 89", "hot", 2, 89, 400, "cold", CHAIN[:2]),
    ("hot, day 90", "hot", 2, 90, 400, "archive", CHAIN),
    ("hot, day 100, full chain", "hot", 2, 100, 400, "archive", CHAIN),
    ("warm, day 29", "warm", 0, 29, 400, "warm", ()),
    ("warm, day 30", "warm", 0, 30, 400, "cold", ("warm_to_cold",)),
    ("warm ignores uses", "warm", 50, 30, 400, "cold", ("warm_to_cold",)),
    ("warm, day 90", "warm", 0, 90, 400, "archive", CHAIN[1:]),
    ("cold, day 89", "cold", 0, 89, 400, "cold", ()),
    ("cold, day 90", "cold", 0, 90, 400, "archive", ("cold_to_archive",)),
    ("archive stays", "archive", 0, 1000, 1000, "archive", ()),
    ("archive, fresh", "archive", 9, 0, 1000, "archive", ()),
    ("never recalled, created 6 days ago", "hot", 0, None, 6, "hot", ()),
    ("never recalled, created 7 days ago", "hot", 0, None, 7, "warm", ("hot_to_warm",)),
    ("never recalled warm, created 29", "warm", 0, None, 29, "warm", ()),
    ("never recalled warm, created 30", "warm", 0, None, 30, "cold", ("warm_to_cold",)),
    ("never recalled cold, created 90", "cold", 0, None, 90, "archive", ("cold_to_archive",)),
    ("recalled in the future (clock skew)", "hot", 0, -3, 400, "hot", ()),
]


@pytest.mark.parametrize(
    ("tier", "uses", "recalled", "created", "expected", "rules"),
    [c[1:] for c in LIFECYCLE],
    ids=[c[0] for c in LIFECYCLE],
)
def test_lifecycle_boundaries(
    tier: str,
    uses: int,
    recalled: float | None,
    created: float,
    expected: str,
    rules: tuple[str, ...],
) -> None:
    d = next_tier(mem(tier, created=created), use(uses, recalled), NOW, RULES)
    assert (d.current, d.next, d.rules) == (tier, expected, rules)
    assert d.changed == (expected != tier)
    assert d.figures["uses"] == uses
    assert d.figures["clock"] == ("created" if recalled is None else "last_recalled")


# manual tier: (tier, set days ago, recalled days ago, uses) → (next, rules, clock)
MANUAL = [
    ("hot set 3 days ago, old recall", "hot", 3, 200, 0, "hot", (), "tier_set"),
    ("hot set 6 days ago", "hot", 6, 200, 4, "hot", (), "tier_set"),
    ("hot set 7 days ago, 4 uses", "hot", 7, 200, 4, "warm", ("hot_to_warm",), "tier_set"),
    ("hot set 7 days ago, 5 uses", "hot", 7, 200, 5, "hot", (), "tier_set"),
    ("hot set 8 days ago, recalled since", "hot", 8, 2, 0, "hot", (), "last_recalled"),
    ("hot set, never recalled", "hot", 3, None, 0, "hot", (), "tier_set"),
    ("warm set 29 days ago", "warm", 29, 400, 0, "warm", (), "tier_set"),
    ("warm set 30 days ago", "warm", 30, 400, 0, "cold", ("warm_to_cold",), "tier_set"),
    ("cold set 89 days ago", "cold", 89, 400, 0, "cold", (), "tier_set"),
    ("cold set 90 days ago", "cold", 90, 400, 0, "archive", ("cold_to_archive",), "tier_set"),
    ("archive set by hand", "archive", 1, 1, 99, "archive", (), "last_recalled"),
]


@pytest.mark.parametrize(
    ("tier", "set_ago", "recalled", "uses", "expected", "rules", "clock"),
    [c[1:] for c in MANUAL],
    ids=[c[0] for c in MANUAL],
)
def test_manual_tier_restarts_the_clock(
    tier: str,
    set_ago: float,
    recalled: float | None,
    uses: int,
    expected: str,
    rules: tuple[str, ...],
    clock: str,
) -> None:
    m = mem(tier, manual=True, tier_set=set_ago)
    d = next_tier(m, use(uses, recalled), NOW, RULES)
    assert (d.next, d.rules, d.figures["clock"]) == (expected, rules, clock)


def test_tier_set_counts_only_for_a_manual_tier() -> None:
    m = mem("hot", manual=False, tier_set=1)
    d = next_tier(m, use(0, 10), NOW, RULES)
    assert (d.next, d.figures["clock"]) == ("warm", "last_recalled")


def test_tier_set_as_a_date_is_its_midnight() -> None:
    m = Memory("memory/a.md", "hot", True, ago(400), date(2026, 11, 23))
    d = next_tier(m, Recalls(0, ago(300)), NOW, RULES)
    assert (d.next, d.figures["days_unrecalled"]) == ("warm", 7)


@pytest.mark.parametrize(
    ("now", "recalled"),
    [
        (NOW.replace(tzinfo=None), ago(7).replace(tzinfo=None)),
        (NOW.replace(tzinfo=None), ago(7)),
        (NOW.astimezone(timezone(timedelta(hours=-8))), ago(7).replace(tzinfo=None)),
    ],
    ids=["both naive", "naive now", "other zone"],
)
def test_naive_datetimes_count_as_utc(now: datetime, recalled: datetime) -> None:
    d = next_tier(mem("hot"), Recalls(0, recalled), now, RULES)
    assert (d.next, d.figures["days_unrecalled"]) == ("warm", 7)


def test_utc() -> None:
    assert utc(datetime(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)
    plus2 = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert utc(plus2) == datetime(2026, 1, 1, tzinfo=UTC)
    assert utc(plus2).tzinfo is UTC
    assert utc(date(2026, 1, 1)) == datetime(2026, 1, 1, tzinfo=UTC)


def test_unknown_tier_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown tier 'tepid'"):
        next_tier(mem("tepid"), Recalls(), NOW, RULES)


def test_figures_of_the_full_chain() -> None:
    d = next_tier(mem("hot"), use(2, 100), NOW, RULES)
    assert d.figures == {
        "days_unrecalled": 100,
        "uses": 2,
        "clock": "last_recalled",
        "hot_days": 7,
        "hot_min_uses": 5,
        "warm_days": 30,
        "cold_days": 90,
    }


def test_rules_come_from_config_and_apply() -> None:
    assert Rules.from_config(TiersConfig()) == Rules()
    custom = TiersConfig(hot_days=3, hot_min_uses=2, warm_days=10, cold_days=20, hot_limit=5)
    rules = Rules.from_config(custom)
    assert rules == Rules(3, 2, 10, 20, 5, 10000)
    assert next_tier(mem("hot"), use(1, 3), NOW, rules).next == "warm"
    assert next_tier(mem("hot"), use(2, 3), NOW, rules).next == "hot"


# --- reasons ------------------------------------------------------------------------------

REASONS = [
    ("hot", use(2, 12), "hot→warm: 12 days without recall (≥7) and 2 uses (<5)"),
    (
        "hot",
        use(2, 100),
        "hot→warm: 100 days without recall (≥7) and 2 uses (<5); "
        "warm→cold: 100 days without recall (≥30); cold→archive: 100 days without recall (≥90)",
    ),
    ("warm", use(0, 31), "warm→cold: 31 days without recall (≥30)"),
    ("cold", use(0, 95), "cold→archive: 95 days without recall (≥90)"),
    ("hot", use(9, 40), "stays hot: 9 uses (≥5)"),
    ("hot", use(1, 3), "stays hot: 3 days without recall (<7)"),
    ("warm", use(0, 12), "stays warm: 12 days without recall (<30)"),
    ("cold", use(0, 12), "stays cold: 12 days without recall (<90)"),
    ("archive", use(0, 12), "stays archive: only moved back by hand"),
]


@pytest.mark.parametrize(("tier", "usage", "reason"), REASONS)
def test_reason_text(tier: str, usage: Recalls, reason: str) -> None:
    assert next_tier(mem(tier), usage, NOW, RULES).reason == reason


def test_to_json_is_serialisable() -> None:
    d = next_tier(mem("hot"), use(2, 12), NOW, RULES)
    data = json.loads(json.dumps(d.to_json()))
    assert data == {
        "path": "memory/notes/a.md",
        "current": "hot",
        "next": "warm",
        "changed": True,
        "rules": ["hot_to_warm"],
        "figures": {
            "days_unrecalled": 12,
            "uses": 2,
            "clock": "last_recalled",
            "hot_days": 7,
            "hot_min_uses": 5,
            "warm_days": 30,
        },
        "reason": "hot→warm: 12 days without recall (≥7) and 2 uses (<5)",
    }


# --- hot limit ----------------------------------------------------------------------------


def _by_path(decisions: list[TierDecision]) -> dict[str, TierDecision]:
    return {d.path: d for d in decisions}


def test_hot_limit_sends_the_least_recently_recalled_to_warm() -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(22)]
    recalls = {m.path: use(10, i) for i, m in enumerate(mems)}  # h21 is the stalest
    plan = _by_path(plan_tiers(mems, recalls, NOW, RULES))
    moved = sorted(p for p, d in plan.items() if d.changed)
    assert moved == ["memory/h20.md", "memory/h21.md"]
    d = plan["memory/h21.md"]
    assert (d.next, d.rules) == ("warm", ("hot_limit",))
    assert (d.figures["hot_count"], d.figures["hot_limit"]) == (22, 20)
    assert d.reason == (
        "hot→warm: 22 hot memories exceed the hot limit of 20; "
        "among the least recently recalled (21 days without recall)"
    )
    assert sum(d.next == "hot" for d in plan.values()) == 20


def test_hot_limit_ties_go_by_path_whatever_the_input_order() -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(22)]
    recalls = {m.path: use(10, 1) for m in mems}
    random.Random(4).shuffle(mems)
    moved = sorted(d.path for d in plan_tiers(mems, recalls, NOW, RULES) if d.changed)
    assert moved == ["memory/h00.md", "memory/h01.md"]


@pytest.mark.parametrize(("count", "moved"), [(19, 0), (20, 0), (21, 1), (22, 2)])
def test_hot_limit_boundary(count: int, moved: int) -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(count)]
    recalls = {m.path: use(10, 1) for m in mems}
    assert sum(d.changed for d in plan_tiers(mems, recalls, NOW, RULES)) == moved


def test_hot_limit_counts_after_the_lifecycle() -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(22)]
    recalls = {m.path: use(10, 1) for m in mems}
    recalls["memory/h00.md"] = recalls["memory/h01.md"] = use(1, 8)  # these fade on their own
    plan = plan_tiers(mems, recalls, NOW, RULES)
    assert {d.path: d.rules for d in plan if d.changed} == {
        "memory/h00.md": ("hot_to_warm",),
        "memory/h01.md": ("hot_to_warm",),
    }


def test_hot_limit_then_the_chain_continues() -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(21)]
    recalls = {m.path: use(10, 1) for m in mems}
    recalls["memory/h05.md"] = use(10, 40)  # kept hot by uses, but 40 days unrecalled
    d = _by_path(plan_tiers(mems, recalls, NOW, RULES))["memory/h05.md"]
    assert (d.next, d.rules) == ("cold", ("hot_limit", "warm_to_cold"))


def test_hot_limit_spares_a_fresh_manual_pin() -> None:
    mems = [mem("hot", f"memory/h{i:02}.md") for i in range(20)]
    pinned = mem("hot", "memory/pinned.md", manual=True, tier_set=0)
    recalls = {m.path: use(10, 1) for m in mems} | {pinned.path: use(0, 300)}
    plan = plan_tiers([*mems, pinned], recalls, NOW, RULES)
    assert _by_path(plan)["memory/pinned.md"].next == "hot"
    assert sum(d.changed for d in plan) == 1


# --- memory cap ---------------------------------------------------------------------------


def test_memory_cap_archives_the_lowest_priority_cold_first() -> None:
    mems = [
        mem("cold", "memory/c-used.md"),
        mem("cold", "memory/c-recent.md"),
        mem("cold", "memory/c-stale.md"),
        *(mem("warm", f"memory/w{i}.md") for i in range(3)),
    ]
    recalls = {
        "memory/c-used.md": use(3, 60),
        "memory/c-recent.md": use(0, 5),
        "memory/c-stale.md": use(0, 20),
        **{f"memory/w{i}.md": use(0, 1) for i in range(3)},
    }
    rules = Rules(memory_cap=5)
    plan = _by_path(plan_tiers(mems, recalls, NOW, rules))
    archived = [p for p, d in plan.items() if d.next == "archive"]
    assert sorted(archived) == ["memory/c-recent.md", "memory/c-stale.md"]
    d = plan["memory/c-stale.md"]
    assert d.rules == ("memory_cap",)
    assert (d.figures["memory_count"], d.figures["memory_cap"]) == (6, 5)
    assert d.reason == (
        "cold→archive: 6 memories reach the cap of 5; "
        "lowest-priority cold (0 uses, 20 days without recall)"
    )


@pytest.mark.parametrize(("count", "archived"), [(4, 0), (5, 1), (6, 2)])
def test_memory_cap_boundary(count: int, archived: int) -> None:
    mems = [mem("cold", f"memory/c{i}.md") for i in range(count)]
    recalls = {m.path: use(i, 1) for i, m in enumerate(mems)}
    plan = plan_tiers(mems, recalls, NOW, Rules(memory_cap=5))
    assert [d.path for d in plan if d.changed] == [f"memory/c{i}.md" for i in range(archived)]


def test_memory_cap_never_archives_warm_or_hot_but_says_so() -> None:
    mems = [mem("cold", "memory/c.md"), mem("warm", "memory/w.md"), mem("hot", "memory/h.md")]
    mems.append(mem("warm", "memory/w2.md"))
    recalls = {m.path: use(9, 1) for m in mems}
    rules = Rules(memory_cap=2)
    plan = plan_tiers(mems, recalls, NOW, rules)
    assert [d.path for d in plan if d.changed] == ["memory/c.md"]


def test_memory_cap_ignores_archived_and_uses_fresh_cold() -> None:
    mems = [
        mem("archive", "memory/a.md"),
        mem("cold", "memory/gone.md"),  # 95 days: archived by the lifecycle, not the cap
        mem("warm", "memory/w.md"),  # 35 days: becomes cold, then is the one capped
        mem("warm", "memory/w-fresh.md"),
    ]
    recalls = {
        "memory/gone.md": use(0, 95),
        "memory/w.md": use(0, 35),
        "memory/w-fresh.md": use(0, 1),
    }
    plan = _by_path(plan_tiers(mems, recalls, NOW, Rules(memory_cap=2)))
    assert plan["memory/gone.md"].rules == ("cold_to_archive",)
    assert plan["memory/w.md"].rules == ("warm_to_cold", "memory_cap")
    assert plan["memory/w.md"].figures["memory_count"] == 2
    assert plan["memory/w-fresh.md"].next == "warm"


# --- the plan as a whole ------------------------------------------------------------------


def test_plan_is_one_decision_per_memory_in_input_order() -> None:
    mems = [mem(t, f"memory/{t}.md") for t in TIERS]
    plan = plan_tiers(mems, {}, NOW, RULES)
    assert [d.path for d in plan] == [m.path for m in mems]


def test_plan_is_deterministic() -> None:
    rng = random.Random(7)
    mems = [mem(rng.choice(TIERS), f"memory/m{i:03}.md") for i in range(200)]
    recalls = {m.path: use(rng.randint(0, 9), rng.choice([None, 1, 1, 8, 31])) for m in mems}
    rules = Rules(hot_limit=10, memory_cap=120)
    first = plan_tiers(mems, recalls, NOW, rules)
    shuffled = mems[:]
    rng.shuffle(shuffled)
    assert _by_path(plan_tiers(shuffled, recalls, NOW, rules)) == _by_path(first)


MEMORIES = st.lists(
    st.tuples(
        st.sampled_from(TIERS),
        st.integers(0, 8),  # uses
        st.one_of(st.none(), st.integers(0, 120)),  # days since last recall
        st.integers(0, 200),  # days since created
        st.one_of(st.none(), st.integers(0, 120)),  # manual: days since tier_set
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(MEMORIES, st.integers(1, 8), st.integers(1, 30))
def test_plan_invariants_and_idempotence(rows: list, hot_limit: int, cap: int) -> None:
    rules = Rules(hot_limit=hot_limit, memory_cap=cap)
    mems, recalls = [], {}
    for i, (tier, uses, recalled, created, set_ago) in enumerate(rows):
        m = mem(tier, f"memory/m{i:02}.md", created=created, manual=set_ago is not None)
        mems.append(Memory(m.path, tier, m.manual, m.created, ago(set_ago or 0)))
        recalls[m.path] = use(uses, recalled)
    plan = plan_tiers(mems, recalls, NOW, rules)
    assert all(TIERS.index(d.next) >= TIERS.index(d.current) for d in plan)  # only downwards
    assert all(d.changed == bool(d.rules) for d in plan)
    assert sum(d.next == "hot" for d in plan) <= hot_limit
    live = sum(d.next != "archive" for d in plan)
    assert live < cap or not any(d.next == "cold" for d in plan)
    applied = [replace(m, tier=d.next) for m, d in zip(mems, plan, strict=True)]
    assert not any(d.changed for d in plan_tiers(applied, recalls, NOW, rules))


@pytest.mark.parametrize(
    ("path", "tier"),
    [
        ("memory/lessons/no-barrel-files.md", "hot"),
        ("memory/lessons/deep/one.md", "hot"),
        ("./memory/lessons/x.md", "hot"),
        ("knowledge/topics/rust.md", "cold"),
        ("knowledge/x.md", "cold"),
        ("archive/lessons/old.md", "archive"),
        ("memory/contacts/alice.md", "warm"),
        ("memory/2026-11-30.md", "warm"),
        ("MEMORY.md", "warm"),
        ("memory/lessons.md", "warm"),
        ("knowledgebase/x.md", "warm"),
    ],
)
def test_default_tier(path: str, tier: str) -> None:
    assert default_tier(path) == tier
