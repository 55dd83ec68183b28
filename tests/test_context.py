"""`crustacean context`, `remember` and `tier`: the loading table, tiers, caps and bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli, snapshot
from crustacean.errors import UsageError
from crustacean.recall.context import (
    Caps,
    ContextRequest,
    assemble,
    build_context,
    choose,
    loadable,
    newest,
    not_loaded_summary,
    parse_for,
)
from crustacean.recall.memories import load_memories
from crustacean.state import open_state
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FENCED = "```\n<!-- kept -->\n\n\n# not a heading\n```\n"


def put(ws: Workspace, rel: str, text: str) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def memo(name: str, body: str, *, tier: str | None = None, recorded: str | None = None) -> str:
    meta = [f"name: {name}"]
    if tier:
        meta.append(f"tier: {tier}")
    if recorded:
        meta.append(f"recorded: {recorded}")
    return "---\n" + "\n".join(meta) + "\n---\n" + body + "\n"


def caps(n: int = 50, budget: int = 20000, foundation: int = 30000) -> Caps:
    return Caps(n, budget, foundation)


@pytest.mark.parametrize(
    ("value", "kind", "name"),
    [
        ("main", "main", None),
        ("cron", "cron", None),
        ("dm:alice", "dm", "alice"),
        ("group:crabs", "group", "crabs"),
    ],
)
def test_for_forms(value: str, kind: str, name: str | None) -> None:
    aud = parse_for(value)
    assert (aud.kind, aud.name) == (kind, name)


@pytest.mark.parametrize("value", ["", "dm", "dm:", "group:", "channel:x", "main:x", "MAIN"])
def test_unknown_for_lists_the_valid_forms(value: str) -> None:
    with pytest.raises(UsageError, match="use one of: main, dm:NAME, group:NAME, cron"):
        parse_for(value)


def test_loading_table(ws: Workspace) -> None:
    put(ws, "memory/2026-11-30.md", "### [09:00] today\n- t\n")
    put(ws, "memory/2026-11-29.md", "### [09:00] yesterday\n- y\n")
    put(ws, "memory/2026-11-28.md", "### [09:00] older\n- o\n")
    put(ws, "memory/contacts/telegram-alice.md", memo("Alice", "Alice likes tea."))
    put(ws, "memory/groups/telegram-g-crabs.md", memo("Crabs", "The crabs group is loud."))

    def paths(audience: str) -> list[str]:
        return [e.path for e in assemble(ws, parse_for(audience), None, caps(), NOW).entries]

    every = ["SOUL.md", "IDENTITY.md", "USER.md", "memory/2026-11-30.md", "memory/2026-11-29.md"]
    main = paths("main")
    assert [p for p in main if p in every or p == "MEMORY.md"] == ["MEMORY.md", *every]
    assert "memory/2026-11-28.md" not in main
    assert "MEMORY.md" not in paths("cron") and "MEMORY.md" not in paths("dm:alice")
    assert "memory/contacts/telegram-alice.md" in paths("dm:alice")
    assert "memory/contacts/telegram-alice.md" not in paths("main")
    assert "memory/groups/telegram-g-crabs.md" in paths("group:crabs")
    missing = assemble(ws, parse_for("dm:bob"), None, caps(), NOW)
    assert ("dm:bob", "no matching file") in missing.not_loaded


@pytest.mark.parametrize(
    ("text", "loaded"),
    [
        ("# T\n\n<!-- fill me in -->\n\n## Empty\n\n<!-- and me -->\n", ""),
        ("# T\n\n## A\n\n- a\n- <!-- more? -->\n\n## B\n<!-- x -->\n", "# T\n\n## A\n\n- a\n"),
        ("# T\n\n## A\n\n### A1\n\ntext\n\n## B\n", "# T\n\n## A\n\n### A1\n\ntext\n"),
        ("a <!-- inline --> b\n\n\n\nc\n", "a  b\n\nc\n"),
        (FENCED, FENCED),
        ("<!-- a\n multi-line\n comment -->\n# T\n\nx\n", "# T\n\nx\n"),
        ("plain text, no markup\n", "plain text, no markup\n"),
    ],
)
def test_loadable_strips_comments_and_empty_template_sections(text: str, loaded: str) -> None:
    assert loadable(text) == loaded


def test_tiers_decide_what_loads(ws: Workspace) -> None:
    put(ws, "memory/notes/hot.md", memo("hot", "pinned fact", tier="hot"))
    put(ws, "memory/notes/warm.md", memo("warm", "the falcon launch moved to march"))
    put(ws, "memory/notes/cold.md", memo("cold", "falcon budget detail", tier="cold"))
    put(ws, "memory/notes/gone.md", memo("gone", "falcon launch budget", tier="archive"))
    put(ws, "knowledge/topics/falcon.md", "# Falcon\nfalcon launch budget history\n")

    def loaded(topic: str | None) -> set[str]:
        ctx = assemble(ws, parse_for("main"), topic, caps(), NOW)
        return {e.path for e in ctx.entries if e.section == "memory"}

    hot, warm, cold = "memory/notes/hot.md", "memory/notes/warm.md", "memory/notes/cold.md"
    topic_file = "knowledge/topics/falcon.md"
    assert loaded(None) == {hot}
    assert loaded("launch march weather") == {hot, warm}  # warm: 2 of 3 words (0.67 >= 0.5)
    assert loaded("falcon budget") == {hot, warm, cold, topic_file}  # cold ones: 2 of 2
    assert loaded("falcon budget detail history") == {hot}  # cold ones: 3 of 4 (0.75 < 0.8)
    assert "memory/notes/gone.md" not in loaded("falcon launch budget")  # archive: never


def test_a_topic_picks_memories_with_the_search_ranking(ws: Workspace) -> None:
    """Stemming and stop words: "plants" finds "planted", "what did" need not match."""
    put(ws, "memory/notes/garden.md", memo("garden", "Ana planted courgettes in June."))
    put(ws, "memory/notes/other.md", memo("other", "Ana went to Porto."))
    ctx = assemble(ws, parse_for("main"), "what plants did Ana grow", caps(), NOW)
    picked = {e.path for e in ctx.entries if e.section == "memory"}
    assert picked == {"memory/notes/garden.md"}  # ana + plant: 2 of 3 words; other: 1 of 3


def test_a_long_memory_loads_its_best_lines_for_the_topic(ws: Workspace) -> None:
    filler = "\n\n".join(f"## Part {i}\n\nNothing much about item {i} today." for i in range(80))
    body = f"{filler}\n\n## Keys\n\nThe spare key to the shed is under the blue pot.\n"
    put(ws, "memory/notes/house.md", memo("house", body))
    ctx = assemble(ws, parse_for("main"), "spare shed key", caps(), NOW)
    [entry] = [e for e in ctx.entries if e.path == "memory/notes/house.md"]
    assert entry.text.strip() == "## Keys\nThe spare key to the shed is under the blue pot."
    assert "best lines for the topic" in entry.why


def test_a_topic_fills_the_rest_of_the_budget_with_daily_log_and_knowledge_lines(
    ws: Workspace,
) -> None:
    for day, dish in (("2026-04-10", "risotto"), ("2026-05-02", "tacos"), ("2026-11-02", "soup")):
        log = f"# {day}\n\n### [19:05] evening\n\n- **Ana**: For dinner I cooked {dish}.\n"
        put(ws, f"memory/{day}.md", log + "".join(f"- filler {i}\n" for i in range(30)))
    put(ws, "knowledge/topics/cooking.md", "# Cooking\n\nRisotto needs patience at dinner.\n")
    ctx = assemble(ws, parse_for("main"), "what did Ana cook for dinner in May", caps(), NOW)
    found = [e for e in ctx.entries if e.section == "found"]
    assert found[0].text == "- **Ana**: For dinner I cooked tacos."
    assert (found[0].title, found[0].why) == ("memory/2026-05-02.md#L5", "19:05")
    md = ctx.to_markdown()
    assert "## Found for the topic" in md and "### memory/2026-05-02.md#L5 (19:05)" in md
    small = assemble(ws, parse_for("main"), "Ana dinner", caps(budget=80), NOW)
    assert sum(len(e.text) + 1 for e in small.entries if e.section == "found") <= 80
    assert not [
        e
        for e in assemble(ws, parse_for("main"), None, caps(), NOW).entries
        if e.section == "found"
    ]


def test_caps_newest_first_then_budget(ws: Workspace) -> None:
    for i in range(6):
        put(
            ws,
            f"memory/notes/n{i}.md",
            memo(f"n{i}", f"note {i} " + "x" * 90, tier="hot", recorded=f"2026-11-0{i + 1}"),
        )
    ctx = assemble(ws, parse_for("cron"), None, caps(n=4, budget=250), NOW)
    kept = [e.path for e in ctx.entries if e.section == "memory"]
    assert kept == ["memory/notes/n5.md", "memory/notes/n4.md"]  # newest first, budget 250
    cut = dict(ctx.not_loaded)
    assert cut["memory/notes/n3.md"] == "over memory.budget_chars 250"
    assert cut["memory/notes/n1.md"] == "over memory.max_entries 4"
    md = ctx.to_markdown()
    assert "This context is not your whole memory. Not loaded: " in md
    assert (
        "memory/notes/ (2 over memory.budget_chars 250: n3.md, n2.md; "
        "2 over memory.max_entries 4: n1.md, n0.md)"
    ) in md
    assert md.rstrip().endswith("or `crustacean search WORDS` in a shell.")


def test_foundation_budget_lists_what_it_cut(ws: Workspace) -> None:
    ctx = assemble(ws, parse_for("main"), None, caps(foundation=1500), NOW)
    assert any(why == "over context.foundation_chars 1500" for _, why in ctx.not_loaded)
    assert sum(len(e.text) for e in ctx.entries if e.section == "foundation") <= 1500


def test_lessons_are_settled_rulings(ws: Workspace) -> None:
    run_cli("-w", str(ws.root), "remember", "no-barrel-files", "Imports use full paths.")
    md = assemble(ws, parse_for("main"), None, caps(), NOW).to_markdown()
    assert "## Settled rulings (memory/lessons/)" in md
    assert "Do not re-raise or re-argue them" in md and "say so plainly" in md
    assert "Imports use full paths." in md


def test_formats_and_recalls(ws: Workspace) -> None:
    put(ws, "memory/notes/hot.md", memo("hot", "pinned fact", tier="hot"))
    w = ("-w", str(ws.root))
    hook = json.loads(run_cli(*w, "context", "--format", "claude-hook").stdout)
    assert hook["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "pinned fact" in hook["hookSpecificOutput"]["additionalContext"]
    data = json.loads(run_cli(*w, "context", "--format", "json", "--for", "cron").stdout)
    assert data["for"] == "cron" and {e["path"] for e in data["entries"]} >= {"SOUL.md"}
    with open_state(ws) as db:
        assert db.recalls_of("memory/notes/hot.md").uses == 1  # two loads on one day: one use


@pytest.mark.parametrize("flag", ["--budget-chars", "--max-entries"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_zero_or_negative_caps_are_usage_errors(ws: Workspace, flag: str, value: str) -> None:
    before = snapshot(ws.root)
    result = run_cli("-w", str(ws.root), "context", flag, value, code=2)
    assert f"Error: {flag} must be at least 1, not {value}." in result.stderr
    assert snapshot(ws.root) == before


def test_bad_for_and_format_are_usage_errors(ws: Workspace) -> None:
    result = run_cli("-w", str(ws.root), "context", "--for", "slack:x", code=2)
    assert "Error: unknown --for 'slack:x'; use one of: main, dm:NAME, group:NAME, cron." in (
        result.stderr
    )
    assert (
        "use markdown, json or claude-hook"
        in run_cli("-w", str(ws.root), "context", "--format", "xml", code=2).stderr
    )


def test_bad_files_are_skipped_and_named(ws: Workspace) -> None:
    (ws.root / "memory/notes/latin1.md").write_bytes(b"caf\xe9 au lait\n")
    (ws.root / "memory/notes/empty.md").write_bytes(b"")
    (ws.root / "memory/notes/huge.md").write_bytes(b"# big\n" + b"y" * 1_100_000)
    (ws.root / "memory/notes/broken.md").write_text("---\nname: [unclosed\n---\nstill read\n")
    put(ws, "memory/notes/fine.md", memo("fine", "fine hot note", tier="hot"))
    result = run_cli("-w", str(ws.root), "context", "--topic", "still read")
    assert "fine hot note" in result.stdout and "still read" in result.stdout
    for name in ("latin1.md (not UTF-8", "empty.md (empty)", "huge.md (", "broken.md ("):
        assert f"Skipped: memory/notes/{name}" in result.stderr
    search = run_cli("-w", str(ws.root), "search", "fine")
    assert "memory/notes/fine.md" in search.stdout


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=0, max_size=40),
    tiers=st.lists(st.sampled_from(["hot", "warm", "cold", "archive"]), min_size=40, max_size=40),
    n=st.integers(1, 30),
    budget=st.integers(1, 30000),
    topic=st.sampled_from([None, "alpha", "alpha beta", "gamma delta epsilon"]),
)
def test_caps_are_never_exceeded(
    ws: Workspace, sizes: list[int], tiers: list[str], n: int, budget: int, topic: str | None
) -> None:
    for old in (ws.root / "memory/notes").glob("*.md"):
        old.unlink()
    for i, size in enumerate(sizes):
        day = (NOW - timedelta(days=i)).date().isoformat()
        body = ("alpha beta gamma delta epsilon " * 200)[:size]
        put(ws, f"memory/notes/m{i}.md", memo(f"m{i}", body, tier=tiers[i], recorded=day))
    mems, _ = load_memories(ws)
    kept, cut = choose(mems, topic, caps(n, budget))
    newest_first = sorted(mems, key=newest, reverse=True)  # as `Reader.candidates` gives them
    assert choose(newest_first, topic, caps(n, budget), ordered=True) == (kept, cut)
    assert len(kept) <= n
    assert sum(len(m.doc.body) for m, _ in kept) <= budget
    assert all(m.tier != "archive" for m, _ in kept)
    assert not ({m.path for m, _ in kept} & {p for p, _ in cut})
    recorded = [m.recorded for m, _ in kept]
    assert recorded == sorted(recorded, reverse=True)


def test_build_context_uses_config_caps(ws: Workspace) -> None:
    ctx = build_context(ws, ContextRequest("main", None, None, None), NOW)
    assert ctx.audience.kind == "main"


# ------------------------------------------------------------ remember and tier


def test_remember_writes_a_ruling_and_replaces_by_name(ws: Workspace) -> None:
    w = ("-w", str(ws.root))
    run_cli(*w, "remember", "tabs", "Use tabs.", "--source", "https://example.com/pr/1")
    text = (ws.root / "memory/lessons/tabs.md").read_text()
    assert text.startswith("---\nname: tabs\nsource: https://example.com/pr/1\nrecorded: ")
    assert text.endswith("---\n\nUse tabs.\n")
    run_cli(*w, "remember", "tabs", "Use spaces after all.", "--tier", "warm")
    text = (ws.root / "memory/lessons/tabs.md").read_text()
    assert "Use spaces after all." in text and "tier: warm" in text and "Use tabs." not in text
    history = run_cli(*w, "history", "memory/lessons/tabs.md", "--json").stdout
    assert [v["message"] for v in json.loads(history)] == ["remember tabs", "remember tabs"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["../escape", "x"], "is not a safe slug"),
        (["Has Spaces", "x"], "is not a safe slug"),
        (["ok-name", "   "], "TEXT is empty"),
        (["ok-name", "x", "--tier", "lukewarm"], "--tier must be one of hot, warm, cold, archive"),
    ],
)
def test_remember_bad_input(ws: Workspace, args: list[str], message: str) -> None:
    before = snapshot(ws.root)
    result = run_cli("-w", str(ws.root), "remember", *args, code=2)
    assert message in result.stderr and result.stderr.startswith("Error: ")
    assert snapshot(ws.root) == before


def test_tier_set_list_and_plan(ws: Workspace) -> None:
    put(ws, "memory/notes/a.md", "# A\nbody\n")
    w = ("-w", str(ws.root))
    out = run_cli(*w, "tier", "set", "memory/notes/a.md", "cold").stdout
    assert "kept in state.db; the file is unchanged" in out
    assert (ws.root / "memory/notes/a.md").read_text() == "# A\nbody\n"  # issue 34, item 10
    rows = json.loads(run_cli(*w, "tier", "list", "--tier", "cold", "--json").stdout)
    assert [r["path"] for r in rows] == ["memory/notes/a.md"]
    assert rows[0]["how"].startswith("manual since")
    assert run_cli(*w, "tier", "plan").stdout.strip() == "No tier changes are due."
    bad = run_cli(*w, "tier", "set", "memory/notes/a.md", "tepid", code=2)
    assert "tier must be one of hot, warm, cold, archive" in bad.stderr
    missing = run_cli(*w, "tier", "set", "memory/notes/nope.md", "hot", code=2)
    assert "is not a memory file" in missing.stderr
    put(ws, "memory/notes/b.md", "---\ntier: hot\n---\n# B\n")
    own = run_cli(*w, "tier", "set", "memory/notes/b.md", "cold", code=2)
    assert "names its own tier in its frontmatter (tier: hot)" in own.stderr
    assert (ws.root / "memory/notes/b.md").read_text() == "---\ntier: hot\n---\n# B\n"


def test_tier_plan_shows_due_demotions(ws: Workspace) -> None:
    put(ws, "memory/lessons/old.md", memo("old", "old lesson", recorded="2026-01-01"))
    put(ws, "memory/notes/mine.md", memo("mine", "my hot note", tier="hot", recorded="2026-01-01"))
    out = run_cli("-w", str(ws.root), "tier", "plan").stdout
    assert "memory/lessons/old.md: hot→warm" in out
    assert "mine.md" not in out  # its own `tier: hot` is the person's word: never demoted


def test_paths_are_repo_relative(ws: Workspace, tmp_path: Path) -> None:
    assert all(not Path(p).is_absolute() for p, _ in load_memories(ws)[1])


@pytest.mark.parametrize("budget", [1500, 4000, 8000])
def test_budget_chars_bounds_the_whole_output_headings_and_notes_included(
    ws: Workspace, budget: int
) -> None:
    for i in range(12):
        day = f"2026-0{1 + i % 9}-1{i % 10}"
        turns = "".join(
            f"- **Ana**: dinner talk {k}, the soup was cold again.\n" for k in range(40)
        )
        put(ws, f"memory/{day}.md", f"# {day}\n\n### [19:05] evening\n\n{turns}")
    for i in range(20):
        put(ws, f"memory/notes/n{i}.md", memo(f"note {i}", "soup dinner " * 80, tier="hot"))
    request = ContextRequest("main", "what soup did Ana cook for dinner", budget_chars=budget)
    ctx = build_context(ws, request, NOW)
    md = ctx.to_markdown()
    assert len(md) <= budget
    assert md.startswith("# Memory context") and "crustacean search WORDS" in md  # notes kept
    assert "## Not loaded" in md  # what did not fit is named
    root = str(ws.root)
    out = run_cli("--workspace", root, "context", "--topic", "soup", "--budget-chars", str(budget))
    assert len(out.stdout.rstrip("\n")) <= budget
    hook = run_cli(
        "--workspace", root, "context", "--format", "claude-hook", "--budget-chars", str(budget)
    )
    assert len(hook.stdout.rstrip("\n")) <= budget


@pytest.mark.parametrize(
    ("cut", "summary"),
    [
        ([], ""),
        ([("SOUL.md", "over a")], "SOUL.md (over a)"),
        (
            [
                ("m/a.md", "over x"),
                ("m/b.md", "over y"),
                ("k/c.md", "over x"),
                ("m/d.md", "over x"),
            ],
            "m/ (2 over x: a.md, d.md; 1 over y: b.md); k/ (1 over x: c.md)",
        ),
        (
            [("m/a.md", "over x"), ("m/b.md", "over x"), ("m/c.md", "over x")],
            "m/ (3 over x: a.md, b.md, …)",
        ),
    ],
)
def test_not_loaded_summary_groups_reasons_per_folder_in_the_order_cut(
    cut: list[tuple[str, str]], summary: str
) -> None:
    assert not_loaded_summary(cut, 2) == summary


def test_a_topic_leaves_out_foundation_files_that_are_still_inits_template(
    ws: Workspace,
) -> None:
    """An untouched template holds nothing about the user: with a topic it does not take the
    topic's room (listed, so the agent can read it), a filled-in one loads; without a topic
    the templates load as before."""
    user = (ws.root / "USER.md").read_text()
    put(ws, "USER.md", user.replace("- **Name:**", "- **Name:** Ana Lima", 1))
    put(ws, "memory/2026-05-02.md", "# 2026-05-02\n\n### [19:05] evening\n\n- **Ana**: soup.\n")
    ctx = assemble(ws, parse_for("main"), "soup", caps(), NOW)
    foundation = [e.path for e in ctx.entries if e.section == "foundation"]
    assert foundation == ["USER.md"]
    untouched = {p for p, why in ctx.not_loaded if why == "init's template, unchanged"}
    assert untouched == {"MEMORY.md", "SOUL.md", "IDENTITY.md"}
    assert "MEMORY.md, SOUL.md, IDENTITY.md (init's template, unchanged)" in ctx.to_markdown()
    plain = assemble(ws, parse_for("main"), None, caps(), NOW)
    assert [e.path for e in plain.entries if e.section == "foundation"] == [
        "MEMORY.md",
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
    ]


def test_found_lines_are_packed_one_heading_a_file(ws: Workspace) -> None:
    """A file's windows print under one heading naming their lines, in line order, joined by a
    `…` line; a session's time once when they share it, per window when they do not."""
    filler = "".join(f"- **Ana**: filler talk {k}.\n" for k in range(8))
    put(
        ws,
        "memory/2026-05-02.md",
        "# 2026-05-02\n\n### [19:05] evening\n\n- **Ana**: The kite flew well.\n"
        f"{filler}- **Ana**: My kite string broke.\n\n### [21:40] late\n\n"
        "- **Ana**: Kite repaired.\n",
    )
    ctx = assemble(ws, parse_for("main"), "kite", caps(), NOW)
    [found] = [e for e in ctx.entries if e.section == "found"]
    assert found.title == "memory/2026-05-02.md#L5, L14 (19:05), L18 (21:40)"
    assert found.why == ""
    assert found.text == (
        "- **Ana**: The kite flew well.\n…\n- **Ana**: My kite string broke.\n…\n"
        "- **Ana**: Kite repaired."
    )
    md = ctx.to_markdown()
    assert md.count("### memory/2026-05-02.md") == 1


def test_a_whole_budget_is_filled_with_found_lines_to_the_character(ws: Workspace) -> None:
    """`--budget-chars`: the found lines take what the rest left, more than a search's 50
    windows when they fit, and the output stays within the budget."""
    for i in range(40):
        day = f"2026-0{1 + i // 10}-{10 + i % 10}"
        turns = "".join(f"- **Ana**: talk {k} about the weather.\n" for k in range(6))
        turns += "".join(f"- **Ana**: the soup number {i}-{k} was cold.\n\n" for k in range(4))
        put(ws, f"memory/{day}.md", f"# {day}\n\n### [19:05] evening\n\n{turns}")
    request = ContextRequest("main", "soup", budget_chars=8000)
    md = build_context(ws, request, NOW).to_markdown()
    assert 8000 - 200 <= len(md) <= 8000
    assert md.count("the soup number") > 50
    assert "over budget_chars" not in md  # found lines are not listed as files not loaded
