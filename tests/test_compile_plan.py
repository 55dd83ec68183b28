"""Compile's planning half: every boundary of the pure planners, and no MEMORY.md line lost."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crustacean.markdown import Section, count_lines, split_lines, split_sections
from crustacean.stages.compile_plan import (
    NEVER_MOVE,
    Candidates,
    CapPlan,
    Move,
    Trash,
    find_candidates,
    is_never_move,
    mentions,
    owner_names,
    plan_daily_archive,
    plan_empty_and_duplicates,
    plan_hook_sweep,
    plan_memory_caps,
    slugify,
)

TODAY = date(2026, 3, 31)
NOW = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)


def day(age: int) -> date:
    return TODAY - timedelta(days=age)


def log(age: int, folder: str = "memory") -> str:
    return f"{folder}/{day(age).isoformat()}.md"


def archived(age: int, suffix: str = "") -> str:
    d = day(age)
    return f"archive/daily/{d:%Y-%m}/{d.isoformat()}{suffix}.md"


# ---------------------------------------------------------------------------------------------
# plan_daily_archive
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "after_days", "moved"),
    [
        (31, 30, True),
        (30, 30, False),
        (29, 30, False),
        (400, 30, True),
        (8, 7, True),
        (7, 7, False),
        (2, 0, True),
        (1, 0, False),  # yesterday, whatever after_days says
        (0, 0, False),  # today
        (1, -5, False),
        (0, -5, False),
        (-1, 0, False),  # the clock jumped backwards: a future log
        (-400, 30, False),
    ],
)
def test_daily_archive_age_boundaries(age: int, after_days: int, moved: bool) -> None:
    moves = plan_daily_archive([log(age)], "memory", TODAY, after_days, set())
    assert moves == ([Move(log(age), archived(age), moves[0].reason)] if moved else [])


def test_daily_archive_reason_is_one_line() -> None:
    (move,) = plan_daily_archive([log(45)], "memory", TODAY, 30, set())
    assert move.reason == f"daily log of {day(45)} is 45 days old (archived after 30)"


@pytest.mark.parametrize(
    "path",
    [
        "memory/2026-13-40.md",
        "memory/2026-02-30.md",
        "memory/2026-01-05-.md",
        "memory/2026-01-05.md.bak",
        "memory/2026-01-05-standup.md",  # a hook file, not a daily log
        "memory/notes/2026-01-05.md",
        "memory/daily/sub/2026-01-05.md",
        "knowledge/2026-01-05.md",
        "archive/daily/2026-01/2026-01-05.md",
        "2026-01-05.md",
    ],
)
def test_daily_archive_ignores_what_is_not_a_daily_log(path: str) -> None:
    assert plan_daily_archive([path], "memory", TODAY, 30, set()) == []


@pytest.mark.parametrize(
    ("daily_dir", "plain", "suffixed"),
    [
        ("memory", "memory", "memory/daily"),
        ("memory/daily", "memory/daily", "memory"),
    ],
)
def test_daily_archive_scans_both_folders(daily_dir: str, plain: str, suffixed: str) -> None:
    paths = [log(40, "memory"), log(40, "memory/daily"), log(41, "memory/daily"), log(3)]
    moves = plan_daily_archive(paths, daily_dir, TODAY, 30, set())
    assert [(m.src, m.dst) for m in moves] == [
        (log(41, "memory/daily"), archived(41)),
        (log(40, plain), archived(40)),
        (log(40, suffixed), archived(40, "~2")),
    ]


@pytest.mark.parametrize(
    ("existing", "dst"),
    [
        (set(), archived(40)),
        ({archived(40)}, archived(40, "~2")),
        ({archived(40), archived(40, "~2")}, archived(40, "~3")),
        ({archived(40).upper()}, archived(40, "~2")),  # case-insensitive file systems
        ({archived(41)}, archived(40)),
    ],
)
def test_daily_archive_never_overwrites(existing: set[str], dst: str) -> None:
    (move,) = plan_daily_archive([log(40)], "memory", TODAY, 30, existing)
    assert move.dst == dst
    assert (move.dst == archived(40)) == ("already exists" not in move.reason)


def test_daily_archive_rerun_plans_nothing() -> None:
    paths = [log(a) for a in (0, 1, 5, 31, 60, 61)]
    moves = plan_daily_archive(paths, "memory", TODAY, 30, set())
    assert len(moves) == 3
    after = [p for p in paths if p not in {m.src for m in moves}] + [m.dst for m in moves]
    assert plan_daily_archive(after, "memory", TODAY, 30, set(after)) == []


# ---------------------------------------------------------------------------------------------
# plan_hook_sweep
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "moved"),
    [
        ("memory/2026-01-05-standup.md", True),
        ("memory/2026-01-05-1430.md", True),  # the hook's HHMM fallback
        ("memory/2026-01-05-a-b.c.md", True),
        ("memory/2026-01-05.md", False),  # a daily log is never taken for a hook file
        ("memory/2026-01-05-.md", False),
        ("memory/2026-01-05.md.bak", False),
        ("memory/2026-13-40-x.md", False),
        ("memory/daily/2026-01-05-x.md", False),
        ("memory/notes/2026-01-05-x.md", False),
        ("2026-01-05-x.md", False),
    ],
)
def test_hook_sweep_names(path: str, moved: bool) -> None:
    moves = plan_hook_sweep([path], TODAY, set())
    name = path.rpartition("/")[2]
    assert moves == (
        [Move(path, f"archive/daily/2026-01/{name}", moves[0].reason)] if moved else []
    )


@pytest.mark.parametrize(
    ("age", "moved"), [(-3, False), (-1, False), (0, False), (1, False), (2, True), (90, True)]
)
def test_hook_sweep_leaves_today_yesterday_and_future(age: int, moved: bool) -> None:
    path = f"memory/{day(age).isoformat()}-session.md"
    assert bool(plan_hook_sweep([path], TODAY, set())) == moved


def test_hook_sweep_suffixes_collisions() -> None:
    paths = ["memory/2026-01-05-standup.md", "memory/2026-01-05-standup~2.md"]
    existing = {"archive/daily/2026-01/2026-01-05-standup.md"}
    moves = plan_hook_sweep(paths, TODAY, existing)
    assert [m.dst for m in moves] == [
        "archive/daily/2026-01/2026-01-05-standup~2.md",
        "archive/daily/2026-01/2026-01-05-standup~2~2.md",
    ]
    assert "already exists" in moves[0].reason


def test_hook_sweep_and_daily_archive_together() -> None:
    paths = [log(40), f"memory/{day(40).isoformat()}-chat.md", log(1), f"memory/{day(1)}-x.md"]
    moves = plan_daily_archive(paths, "memory", TODAY, 30, set(paths))
    sweeps = plan_hook_sweep(paths, TODAY, set(paths) | {m.dst for m in moves})
    assert [m.src for m in moves] == [log(40)]
    assert [m.src for m in sweeps] == [f"memory/{day(40).isoformat()}-chat.md"]
    assert len({m.dst for m in [*moves, *sweeps]}) == 2


# ---------------------------------------------------------------------------------------------
# plan_empty_and_duplicates
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "empty"),
    [
        (b"", True),
        (b"   \n\t\r\n", True),
        (b"\xef\xbb\xbf\n", True),
        (b"x", False),
        (b"# Title\n", False),
    ],
)
def test_empty_files(data: bytes, empty: bool) -> None:
    trash = plan_empty_and_duplicates({"memory/notes/a.md": data}, set())
    assert trash == ([Trash("memory/notes/a.md", "empty file")] if empty else [])


@pytest.mark.parametrize(
    "path",
    [
        "memory/.system/COMPILE.md",
        "memory/notes/.gitkeep",
        "memory/.dreams/x.md",
        "memory/README.md",
        "knowledge/topics/README.md",
        "knowledge/index.md",
        "MEMORY.md",
        "SOUL.md",
        "memory/SOUL.md",
        "archive/daily/2026-01/x.md",
        "projects/x.md",
        "memory/dreaming/x.md",
        "memory/notes/protected.md",
        "memory/2026-03-31.md",  # today's log, empty until Collect appends
        "memory/daily/2026-01-05.md",
        "memory/2026-03-30-session.md",
    ],
)
def test_empty_and_duplicates_leave_excluded_files(path: str) -> None:
    files = {path: b"", "memory/notes/copy.md": b"same", "memory/notes/copy2.md": b"same"}
    files_dup = {path: b"same", "memory/notes/copy.md": b"same"}
    protected = {"memory/notes/protected.md"}
    assert path not in {t.path for t in plan_empty_and_duplicates(files, protected)}
    assert path not in {t.path for t in plan_empty_and_duplicates(files_dup, protected)}


@pytest.mark.parametrize(
    "path", ["memory/2026-13-40.md", "memory/notes/2026-01-05.md", "memory/2026-01-05.md.bak"]
)
def test_dated_names_outside_the_daily_folders_are_ordinary_files(path: str) -> None:
    assert plan_empty_and_duplicates({path: b""}, set()) == [Trash(path, "empty file")]


@pytest.mark.parametrize(
    ("paths", "kept"),
    [
        (["memory/notes/b.md", "memory/notes/a.md"], "memory/notes/a.md"),
        (
            ["memory/notes/2026-01-05-a.md", "memory/notes/2026-01-04-b.md"],
            "memory/notes/2026-01-04-b.md",
        ),
        (["memory/x.md", "knowledge/topics/x.md"], "knowledge/topics/x.md"),
        (["memory/notes/a.md", "knowledge/topics/z.md"], "knowledge/topics/z.md"),
        (["memory/notes/x.md", "memory/notes/sub/y.md"], "memory/notes/sub/y.md"),
        (["memory/notes/c.md", "memory/notes/b.md", "memory/notes/a.md"], "memory/notes/a.md"),
    ],
)
def test_duplicates_keep_rule(paths: list[str], kept: str) -> None:
    trash = plan_empty_and_duplicates(dict.fromkeys(paths, b"same\n"), set())
    assert trash == sorted(
        (Trash(p, f"duplicate of {kept}") for p in paths if p != kept), key=lambda t: t.path
    )


@pytest.mark.parametrize(
    ("protected", "trashed"),
    [
        ({"memory/notes/b.md"}, {"memory/notes/a.md": "duplicate of memory/notes/b.md"}),
        ({"memory/notes/a.md", "memory/notes/b.md"}, {}),
        ({"memory/notes/c.md"}, {"memory/notes/b.md": "duplicate of memory/notes/a.md"}),
    ],
)
def test_duplicates_never_trash_protected(protected: set[str], trashed: dict[str, str]) -> None:
    files = dict.fromkeys(["memory/notes/a.md", "memory/notes/b.md"], b"same")
    trash = plan_empty_and_duplicates(files, protected)
    assert {t.path: t.reason for t in trash} == trashed


def test_empty_files_are_not_duplicates_of_each_other() -> None:
    files = {"memory/notes/a.md": b"", "memory/notes/b.md": b"\n", "knowledge/x.md": b"hi"}
    assert plan_empty_and_duplicates(files, set()) == [
        Trash("memory/notes/a.md", "empty file"),
        Trash("memory/notes/b.md", "empty file"),
    ]


# ---------------------------------------------------------------------------------------------
# split_sections
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("# Title\ntext\n", []),
        ("## A\nx\n## B\n", [("A", 2, 0, 2), ("B", 2, 2, 3)]),
        (
            "## A\n### a1\nx\n### a2\n## B\ny",
            [("A", 2, 0, 4), ("a1", 3, 1, 3), ("a2", 3, 3, 4), ("B", 2, 4, 6)],
        ),
        ("## A\nx\n# Top\n## B\n", [("A", 2, 0, 2), ("B", 2, 3, 4)]),
        ("## A\n#### deep\nx\n", [("A", 2, 0, 3)]),
        ("### orphan\nx\n## A\n", [("orphan", 3, 0, 2), ("A", 2, 2, 3)]),
        ("## A\n```\n## not a heading\n```\n## B\n", [("A", 2, 0, 4), ("B", 2, 4, 5)]),
        ("## A\n~~~~\n```\n## no\n~~~~\n", [("A", 2, 0, 5)]),
        ("## Closed ##\n##nospace\n", [("Closed", 2, 0, 2)]),
        ("## CRLF\r\nx\r\n## B\r\n", [("CRLF", 2, 0, 2), ("B", 2, 2, 3)]),
        ("   ## Indented\n    ## code\n", [("Indented", 2, 0, 2)]),
        ("##\nx\n", [("", 2, 0, 2)]),
    ],
)
def test_split_sections(text: str, expected: list[tuple[str, int, int, int]]) -> None:
    assert split_sections(text) == [Section(*e) for e in expected]


@pytest.mark.parametrize(
    ("heading", "never"),
    [
        *((name, True) for name in NEVER_MOVE),
        ("📂 Memory Structure Map", True),
        ("🔥 HOT / time-sensitive", True),
        ("🔐 security rules", True),
        ("🦞 Identity &Setup", True),
        ("📋 Active Cron Jobs (3)", True),
        ("Hot", False),
        ("Project Falcon", False),
        ("Security", False),
    ],
)
def test_never_move_headings(heading: str, never: bool) -> None:
    assert is_never_move(heading) == never


# ---------------------------------------------------------------------------------------------
# plan_memory_caps
# ---------------------------------------------------------------------------------------------


def section(heading: str, n: int, level: int = 2, width: int = 10) -> str:
    """A section of n lines (heading included)."""
    body = "".join(f"- {len(heading)} fact {i:03d}{'.' * width}\n" for i in range(n - 1))
    return f"{'#' * level} {heading}\n{body}"


def reassemble(plan: CapPlan) -> str:
    """Put every moved section back where its pointer is: must give the original text."""
    pending = list(plan.moves)
    out = []
    for line in split_lines(plan.new_text):
        if pending and line == pending[0].pointer:
            out += pending.pop(0).lines
        else:
            out.append(line)
    assert not pending, "a pointer is missing from new_text"
    return "".join(out)


def assert_lossless(text: str, plan: CapPlan) -> None:
    assert reassemble(plan) == text
    pointers = Counter(m.pointer for m in plan.moves)
    kept = Counter(split_lines(plan.new_text)) - pointers
    moved = Counter(line for m in plan.moves for line in m.lines)
    assert kept + moved == Counter(split_lines(text))
    assert plan.lines_after == count_lines(plan.new_text)
    assert plan.chars_after == len(plan.new_text)
    assert (plan.lines_before, plan.chars_before) == (count_lines(text), len(text))


def test_caps_noop_when_under() -> None:
    text = "# Memory\n" + section("A", 30) + section("B", 20)
    for max_lines in (51, 200):
        plan = plan_memory_caps(text, max_lines, len(text), TODAY, set())
        assert plan == CapPlan(text, (), 51, 51, len(text), len(text), True)


@pytest.mark.parametrize(
    ("max_lines", "moved"),
    [
        (62, []),  # 1 + 10 + 30 + 21 lines (the blank last line belongs to Mid)
        (61, ["Big"]),
        (33, ["Big"]),
        (32, ["Big", "Mid"]),
        (13, ["Big", "Mid"]),
        (12, ["Big", "Mid", "Small"]),
        (4, ["Big", "Mid", "Small"]),  # not reachable: everything movable moved
    ],
)
def test_caps_largest_first(max_lines: int, moved: list[str]) -> None:
    text = "# Memory\n" + section("Small", 10) + section("Big", 30) + section("Mid", 20) + "\n"
    plan = plan_memory_caps(text, max_lines, 10**6, TODAY, set())
    assert sorted(m.heading for m in plan.moves) == sorted(moved)
    assert plan.under_caps == (plan.lines_after <= max_lines)
    assert_lossless(text, plan)


def test_caps_by_characters_moves_the_widest() -> None:
    text = section("Long lines", 5, width=400) + section("Many lines", 30, width=0)
    plan = plan_memory_caps(text, 1000, len(text) - 1000, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Long lines"]
    assert plan.under_caps and plan.lines_after == plan.lines_before - 4


def test_caps_move_and_pointer_exact() -> None:
    text = "# Memory\n" + section("🦅 Project **Falcon**", 30) + section("Notes", 3)
    plan = plan_memory_caps(text, 10, 10**6, date(2026, 11, 30), set())
    (move,) = plan.moves
    assert move.dst == "knowledge/topics/project-falcon.md"
    assert move.pointer == (
        "- **🦅 Project Falcon** → moved to `knowledge/topics/project-falcon.md` "
        "(compile 2026-11-30).\n"
    )
    assert "".join(move.lines) == section("🦅 Project **Falcon**", 30)
    assert plan.new_text == "# Memory\n" + move.pointer + section("Notes", 3)
    assert plan.under_caps


@pytest.mark.parametrize("name", NEVER_MOVE)
def test_caps_never_moves_protected_sections(name: str) -> None:
    text = "# Memory\n" + section(f"🔥 {name.upper()}", 40) + section("Other", 5)
    plan = plan_memory_caps(text, 20, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Other"]
    assert not plan.under_caps
    assert section(f"🔥 {name.upper()}", 40) in plan.new_text
    assert_lossless(text, plan)


@pytest.mark.parametrize("marker", ["**Rule:**", "**Firm rule:**", "**FIRM RULE:**", "**rule:**"])
def test_caps_never_moves_rule_lines(marker: str) -> None:
    ruled = section("Ruled", 30).replace("fact 005", f"{marker} never do X")
    text = ruled + section("Free", 5)
    plan = plan_memory_caps(text, 10, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Free"]
    assert ruled in plan.new_text and not plan.under_caps


def test_caps_blocked_section_gives_up_its_subsections() -> None:
    lessons = (
        "## Lessons\n**Rule:** keep this\n" + section("Big lesson", 25, 3) + section("S", 3, 3)
    )
    text = lessons + section("Other", 5)
    plan = plan_memory_caps(text, 15, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Big lesson"]
    assert "**Rule:** keep this\n" in plan.new_text and plan.under_caps
    assert_lossless(text, plan)


def test_caps_never_move_subsection_pins_its_parent() -> None:
    parent = "## Setup\n" + section("Security Rules", 5, 3) + section("Long tale", 30, 3)
    plan = plan_memory_caps(parent, 20, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Long tale"]
    assert section("Security Rules", 5, 3) in plan.new_text


def test_caps_oversized_section_moves_its_subsections_first() -> None:
    projects = "## Projects\n" + "".join(section(f"P{i}", n, 3) for i, n in enumerate((40, 60, 50)))
    text = "# Memory\n" + projects + section("Misc", 20)
    plan = plan_memory_caps(text, 120, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["P1"]
    assert "## Projects\n" in plan.new_text and plan.under_caps
    assert_lossless(text, plan)


def test_caps_oversized_falls_back_to_the_whole_section() -> None:
    intro = "".join(f"- intro {i}\n" for i in range(100))
    text = "## Big\n" + intro + section("Tiny", 3, 3) + section("Small", 5)
    plan = plan_memory_caps(text, 40, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["Big"]
    assert plan.under_caps
    assert_lossless(text, plan)


def test_caps_pointer_label_is_one_clean_line() -> None:
    text = "## **Odd**\r heading\x0b  here\n" + "- x\n" * 20
    (move,) = plan_memory_caps(text, 5, 10**6, TODAY, set()).moves
    assert move.pointer.startswith("- **Odd heading here** → moved to `knowledge/topics/odd-")


def test_caps_crlf_stays_crlf() -> None:
    text = (section("A", 30) + section("B", 5)).replace("\n", "\r\n")
    plan = plan_memory_caps(text, 10, 10**6, TODAY, set())
    assert plan.moves[0].pointer.endswith(").\r\n")
    assert "\n" not in plan.new_text.replace("\r\n", "")
    assert all(line.endswith("\r\n") for line in plan.moves[0].lines)
    assert_lossless(text, plan)


def test_caps_last_section_without_final_newline() -> None:
    text = section("A", 3) + section("B", 30).rstrip("\n")
    plan = plan_memory_caps(text, 10, 10**6, TODAY, set())
    assert [m.heading for m in plan.moves] == ["B"]
    assert not plan.moves[0].pointer.endswith("\n")
    assert_lossless(text, plan)


def test_caps_not_reachable_reports_it() -> None:
    text = section("Memory Structure Map", 50) + section("A", 5)
    plan = plan_memory_caps(text, 10, 10**6, TODAY, set())
    assert not plan.under_caps and [m.heading for m in plan.moves] == ["A"]
    nothing = plan_memory_caps(section("Hot / Time-Sensitive", 50), 10, 10**6, TODAY, set())
    assert nothing.moves == () and not nothing.under_caps


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("🦅 Project Falcon", "project-falcon"),
        ("Café Déjà Vu", "cafe-deja-vu"),
        ("[Falcon](https://example.com/x)", "falcon"),
        ("**Bold** & Co.", "bold-co"),
        ("日本語", "section"),
        ("", "section"),
        ("a" * 59 + " b", "a" * 59),
        ("word " * 30, ("word-" * 12).rstrip("-")),
    ],
)
def test_slugify(heading: str, slug: str) -> None:
    assert slugify(heading) == slug
    assert len(slug) <= 60


@pytest.mark.parametrize(
    ("existing", "dsts"),
    [
        (set(), ["knowledge/topics/falcon.md", "knowledge/topics/falcon-2.md"]),
        (
            {"knowledge/topics/falcon.md"},
            ["knowledge/topics/falcon-2.md", "knowledge/topics/falcon-3.md"],
        ),
        (
            {"knowledge/topics/Falcon.md", "knowledge/topics/falcon-3.md"},
            ["knowledge/topics/falcon-2.md", "knowledge/topics/falcon-4.md"],
        ),
    ],
)
def test_caps_destination_collisions(existing: set[str], dsts: list[str]) -> None:
    text = section("Falcon", 30) + section("🦅 falcon", 29) + section("Rest", 2)
    plan = plan_memory_caps(text, 5, 10**6, TODAY, existing)
    assert [m.dst for m in plan.moves] == dsts


def test_caps_long_slug_suffix_stays_within_60() -> None:
    long = "x" * 80
    plan = plan_memory_caps(section(long, 30), 5, 10**6, TODAY, {f"knowledge/topics/{'x' * 60}.md"})
    stem = plan.moves[0].dst.removeprefix("knowledge/topics/").removesuffix(".md")
    assert stem == "x" * 58 + "-2"


# Random MEMORY.md-ish text: headings of every level (never-move names included), rule lines,
# fences, blank and unicode lines, mixed line endings.
_HEAD = st.builds(
    lambda lvl, h: f"{'#' * lvl} {h}",
    st.sampled_from([1, 2, 2, 2, 3, 3, 4]),
    st.one_of(st.sampled_from([*NEVER_MOVE, "Falcon", "Notes", "🦅 Falcon", ""]), st.text()),
)
_BODY = st.one_of(
    st.sampled_from(["- a fact", "- another fact about things", "", "text\r", "   "]),
    st.sampled_from(["**Rule:** never", "- **Firm rule:** x", "```", "~~~", "#", "##x"]),
    st.text(st.characters(blacklist_characters="\n"), max_size=40),
)
_BLOCK = st.builds(lambda head, body: [head, *body], _HEAD, st.lists(_BODY, max_size=14))
_DOC = st.builds(
    lambda blocks, end, last: (
        end.join(line for block in blocks for line in block) + (end if last else "")
    ),
    st.lists(_BLOCK, max_size=10),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(
    text=_DOC,
    max_lines=st.integers(0, 50),
    max_chars=st.integers(0, 1500),
    existing=st.sets(st.sampled_from(["knowledge/topics/falcon.md", "knowledge/topics/notes.md"])),
)
def test_caps_no_line_lost(text: str, max_lines: int, max_chars: int, existing: set[str]) -> None:
    plan = plan_memory_caps(text, max_lines, max_chars, TODAY, existing)
    assert_lossless(text, plan)
    assert plan.under_caps == (plan.lines_after <= max_lines and plan.chars_after <= max_chars)
    if count_lines(text) <= max_lines and len(text) <= max_chars:
        assert plan.moves == () and plan.new_text == text
    dsts = [m.dst for m in plan.moves]
    assert len(set(dsts)) == len(dsts) and not set(dsts) & existing
    for move in plan.moves:
        assert not is_never_move(move.heading)
        assert not any("**Rule:**" in line or "**Firm rule:**" in line for line in move.lines)
        assert move.lines[0].lstrip(" ").startswith(("## ", "### ", "##\n", "###\n", "##\r"))
        assert move.pointer in split_lines(plan.new_text)


# ---------------------------------------------------------------------------------------------
# find_candidates
# ---------------------------------------------------------------------------------------------


def candidates(**kw: object) -> Candidates:
    args: dict[str, object] = {"memory_md": "", "files": {}, "daily_logs": {}}
    args.update(kw)
    return find_candidates(today=TODAY, now=NOW, **args)  # type: ignore[arg-type]  # kw names find_candidates' own


@pytest.mark.parametrize(("n_lines", "listed"), [(10, False), (11, True), (30, True)])
def test_promotion_long_sections(n_lines: int, listed: bool) -> None:
    found = candidates(memory_md=section("Falcon", n_lines) + section("Other", 3))
    assert found.promotion == ((f"Falcon ({n_lines} lines)",) if listed else ())


def test_promotion_skips_never_move_sections() -> None:
    assert candidates(memory_md=section("Security Rules", 30)).promotion == ()


@pytest.mark.parametrize(("n", "listed"), [(4, False), (5, True), (9, True)])
def test_promotion_entities(n: int, listed: bool) -> None:
    text = "".join(f"- The team met Project Falcon on day {i}.\n" for i in range(n))
    found = candidates(memory_md=text).promotion
    assert found == ((f"Project Falcon ({n} mentions)",) if listed else ())


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("The Falcon Team met. Falcon Team!", {"Falcon Team": 2}),
        ("I'm sure. It's fine. On Monday in May.", {}),
        ("Ask Sean about `Config.Path` at https://Example.com/X", {"Ask Sean": 1}),
        ("see [Docs](https://X.io) and AWS", {"Docs": 1, "AWS": 1}),
        ("**Rule:** Never trust Bob", {"Never Trust Bob": 0, "Bob": 1}),
        ("Émile and Zoë met Émile", {"Émile": 2, "Zoë": 1}),
        ("Falcon's wings. The Falcon’s beak. Falcon", {"Falcon": 3}),
    ],
)
def test_mentions(text: str, names: dict[str, int]) -> None:
    found = mentions(text)
    assert {k: v for k, v in names.items() if v} == dict(found)


@pytest.mark.parametrize(
    ("path", "age_days", "listed"),
    [
        ("memory/notes/a.md", 13, False),
        ("memory/notes/a.md", 14, True),
        ("memory/lessons/sub/b.md", 40, True),
        ("memory/ideas/a.md", 40, False),
        ("knowledge/topics/a.md", 40, False),
        ("memory/notes/README.md", 40, False),
        ("memory/notes/a.md", -3, False),  # mtime in the future: the clock jumped backwards
    ],
)
def test_graduation(path: str, age_days: int, listed: bool) -> None:
    files = {path: (b"x", NOW - timedelta(days=age_days))}
    expected = (f"{path} (unchanged {age_days} days)",) if listed else ()
    assert candidates(files=files).graduation == expected


def test_graduation_naive_mtime() -> None:
    files = {"memory/notes/a.md": (b"x", datetime(2026, 3, 1))}
    assert candidates(files=files).graduation == ("memory/notes/a.md (unchanged 30 days)",)


@pytest.mark.parametrize(
    ("ages", "listed"),
    [
        ((0, 1, 2), True),
        ((0, 6, 6), True),
        ((0, 1), False),
        ((0, 1, 7), False),  # a week ago is outside this week
        ((0, 1, -1), False),  # a future-dated log is ignored
    ],
)
def test_patterns_window(ages: tuple[int, ...], listed: bool) -> None:
    logs: dict[date, str] = {}
    for age in ages:
        logs[day(age)] = logs.get(day(age), "") + "- talked about Falcon again\n"
    found = candidates(daily_logs=logs).patterns
    assert bool(found) == listed
    if listed:
        assert found == (f"Falcon (3 mentions on {len(set(ages))} days)",)


def test_patterns_tags() -> None:
    text = "- [falcon] a\n- [falcon] b\n- [reminder] c\n- [reminder] d\n- [reminder] e\n- [x] f\n"
    found = candidates(daily_logs={TODAY: text + "- [falcon] g\n"}).patterns
    assert found == ("[falcon] (3 mentions on 1 days)",)


@pytest.mark.parametrize(
    ("line", "due"),
    [
        ("- [ ] call Bob 2026-03-01", True),
        ("- call Bob by 2026-03-30", True),
        ("- [x] call Bob 2026-03-01", False),
        ("- [X] call Bob 2026-03-01", False),
        ("- call Bob 2026-03-01 (done)", False),
        ("- ✅ call Bob 2026-03-01", False),
        ("- call Bob 2026-03-31", False),  # today is not past due
        ("- call Bob 2026-04-10", False),
        ("- added 2026-01-01, due 2026-04-10", False),  # the latest date decides
        ("- call Bob 2026-02-30", False),
        ("## 2026-03-01", False),
        ("- call Bob", False),
    ],
)
def test_reminders_due_lines(line: str, due: bool) -> None:
    files = {"memory/reminders/todo.md": (f"# Reminders\n{line}\n".encode(), NOW)}
    found = candidates(files=files).reminders_due
    assert bool(found) == due
    if due:
        assert found[0].startswith(f"memory/reminders/todo.md:2: {line}")


@pytest.mark.parametrize(
    ("path", "body", "due"),
    [
        ("memory/reminders/2026-03-01-dentist.md", "Book the dentist\n", True),
        ("memory/reminders/2026-03-01-dentist.md", "Book the dentist - done\n", False),
        ("memory/reminders/2026-04-01-dentist.md", "Book the dentist\n", False),
        ("memory/reminders/dentist.md", "Book the dentist\n", False),
        ("memory/notes/2026-03-01-dentist.md", "Book the dentist\n", False),
    ],
)
def test_reminders_due_files(path: str, body: str, due: bool) -> None:
    found = candidates(files={path: (body.encode(), NOW)}).reminders_due
    assert found == ((f"{path} (due 2026-03-01)",) if due else ())


@pytest.mark.parametrize(
    ("body", "mtime_age", "listed"),
    [
        ("---\nrecorded: {d184}\n---\nx", 0, True),
        ("---\nrecorded: {d183}\n---\nx", 400, False),
        ("## L\n**Learned:** {d200} (daily log)\n", 0, True),
        ("## L\n**Learned:** {d10} (daily log) see {d200}\n", 400, False),
        ("Noted on {d190}, then {d5}\n", 0, True),
        ("no date at all\n", 184, True),
        ("no date at all\n", 183, False),
    ],
)
def test_old_lessons(body: str, mtime_age: int, listed: bool) -> None:
    text = body.format(**{f"d{n}": day(n).isoformat() for n in (5, 10, 183, 184, 190, 200)})
    path = "memory/lessons/lessons.md"
    files = {path: (text.encode(), NOW - timedelta(days=mtime_age)), "knowledge/old.md": (b"", NOW)}
    found = candidates(files=files).old_lessons
    assert bool(found) == listed
    if listed:
        assert found[0].startswith(f"{path} (")


def test_to_prompt() -> None:
    assert Candidates().to_prompt() == ""
    many = tuple(f"memory/notes/{i:02d}.md" for i in range(35))
    prompt = Candidates(graduation=many, patterns=("Falcon (3 mentions on 2 days)",)).to_prompt()
    assert prompt.startswith("## Candidates found by code\n")
    assert "### Graduation" in prompt and "### Patterns" in prompt
    assert "### Promotion" not in prompt and "### Reminders" not in prompt
    assert "- memory/notes/29.md" in prompt and "memory/notes/30.md" not in prompt
    assert "- … and 5 more" in prompt


def test_find_candidates_all_kinds_together() -> None:
    files = {
        "memory/notes/a.md": (b"facts", NOW - timedelta(days=20)),
        "memory/reminders/r.md": (b"- [ ] pay rent 2026-03-01\n", NOW),
        "memory/lessons/old.md": (b"recorded: 2025-01-01\n", NOW),
    }
    logs = {TODAY: "Falcon, Falcon and Falcon\n"}
    found = candidates(memory_md=section("Big", 12), files=files, daily_logs=logs)
    assert found.promotion == ("Big (12 lines)",)
    assert found.graduation == ("memory/notes/a.md (unchanged 20 days)",)
    assert found.patterns == ("Falcon (3 mentions on 1 days)",)
    assert found.reminders_due == (
        "memory/reminders/r.md:1: - [ ] pay rent 2026-03-01 (due 2026-03-01)",
    )
    assert found.old_lessons == ("memory/lessons/old.md (recorded 2025-01-01, 454 days ago)",)
    prompt = found.to_prompt()
    assert all(
        title in prompt for title in ("Promotion", "Graduation", "Patterns", "Reminders", "Lessons")
    )


@pytest.mark.parametrize(
    ("text", "due"),
    [
        ("- 2026-03-01 — call Bob (moved from 2026-04-20)", ["2026-03-01"]),
        ("- 2026-04-10 — call Bob (daily log 2026-03-01, telegram DM)", []),
        ("- call Bob (moved from 2026-03-01)", []),
        ("- [reminder] 2026-03-02 — pay rent", ["2026-03-02"]),
        ("- Due 2026-03-03.", ["2026-03-03"]),
        ("- [ ] **2026-03-04** — renew the passport", ["2026-03-04"]),
        # a wrapped continuation line is part of the item above, never a second reminder
        ("- 2026-04-10 — a long reminder that wraps\n  onto a line with 2026-03-01 in it", []),
        (
            "- 2026-03-05 — one\n  wrapped 2026-03-06\n- 2026-03-07 — two",
            ["2026-03-05", "2026-03-07"],
        ),
    ],
)
def test_reminders_are_one_line_items_with_a_leading_date(text: str, due: list[str]) -> None:
    files = {"memory/reminders/r.md": (f"# Reminders\n{text}\n".encode(), NOW)}
    found = candidates(files=files).reminders_due
    assert [f.rpartition("(due ")[2].rstrip(")") for f in found] == due


def test_category_tags_and_the_owners_names_are_not_entities() -> None:
    log = "".join(
        f"- [{tag}] Sam Rivera asked Crusty about Falcon.\n"
        for tag in ("decision", "decision", "plan", "joke", "todo")
    )
    owners = owner_names(
        "- **Name:** Sam Rivera\n- **What to call them:** Sam\n", "- **Name:** Crusty <!-- me -->\n"
    )
    assert owners == {"sam rivera", "sam", "rivera", "crusty"}
    found = candidates(daily_logs={TODAY: log}, owners=owners).patterns
    assert found == ("Falcon (5 mentions on 1 days)",)
    memory = "# MEMORY\n" + "- Sam met Falcon.\n" * 6
    assert candidates(memory_md=memory, owners=owners).promotion == ("Falcon (6 mentions)",)
    assert owner_names("- **Name:** <!-- what I am called -->\n") == frozenset()
