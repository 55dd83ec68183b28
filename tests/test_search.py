"""Search: chunking, ranking, incremental updates, quoting, exclusions, bad files and the CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import run_cli, snapshot
from crustacean.errors import SearchQueryError
from crustacean.recall.search import (
    MAX_TERMS,
    Hit,
    Line,
    SearchIndex,
    index_lines,
    is_scaffold,
    log_day,
)
from crustacean.recall.search_query import split_words
from crustacean.state import MIGRATIONS, open_state, split_statements
from crustacean.workspace import Workspace


def write(ws: Workspace, rel: str, text: str | bytes) -> Path:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


def search(ws: Workspace, query: str, **kw: object) -> list[Hit]:
    with SearchIndex(ws) as index:
        return index.search(query, **kw)  # type: ignore[arg-type]  # kw mirrors search()'s


def paths(hits: list[Hit]) -> list[str]:
    return [h.path for h in hits]


# ---------------------------------------------------------------- chunking

DOC = """\
---
name: Heron Watch
recorded: 2026-01-02
---
Intro line before any heading.

# Birds

## Herons

Grey herons nest in March.

```sh
# not a heading, inside a fence
```

## Gulls
Gulls steal chips.
"""


def test_lines_carry_their_heading_path_and_skip_blanks_frontmatter_and_comments() -> None:
    lines, warning = index_lines(DOC + "<!-- collect run=x -->\n", "heron-watch")
    assert warning is None
    assert [ln.number for ln in lines] == [5, 7, 9, 11, 13, 14, 15, 17, 18]
    assert lines[0] == Line(5, "Heron Watch › Birds", "Intro line before any heading.")
    assert lines[3].title == "Heron Watch › Birds › Herons"
    assert lines[5].body == "# not a heading, inside a fence"
    assert lines[5].title == lines[3].title  # a fenced "# line" is not a heading
    assert lines[-1] == Line(18, "Heron Watch › Birds › Gulls", "Gulls steal chips.")


def test_a_title_holds_the_name_the_file_name_and_the_heading_path() -> None:
    lines, _ = index_lines("# Alice\n\n## Work\nAcme\n", "alice-smith")
    assert lines[-1] == Line(4, "alice smith › Alice › Work", "Acme")


@pytest.mark.parametrize(
    ("rel", "scaffold", "day"),
    [
        ("README.md", True, None),
        ("memory/contacts/README.md", True, None),
        ("AGENTS.md", True, None),
        ("memory/notes/readme-ideas.md", True, None),
        ("memory/notes/agents-of-change.md", False, None),
        ("memory/2026-03-04.md", False, "2026-03-04"),
        ("archive/daily/2026-03/2026-03-04.md", False, "2026-03-04"),
        ("memory/2026-02-30.md", False, None),
        ("memory/notes/2026-03-04-trip.md", False, None),
    ],
)
def test_scaffold_files_and_daily_log_dates(rel: str, scaffold: bool, day: str | None) -> None:
    assert (is_scaffold(rel), log_day(rel)) == (scaffold, day)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("---\nname: x\nno end\n", "line 1"),
        ("---\nname: [unclosed\n---\nbody\n", "line 3"),  # where YAML found it out
        ("---\n- a list\n---\nbody\n", "line 2"),  # where the list starts
    ],
)
def test_broken_frontmatter_is_body_with_a_warning_naming_the_line(text: str, line: str) -> None:
    lines, warning = index_lines(text, "x")
    assert warning is not None and warning.startswith(line) and "indexed as body" in warning
    assert lines[0].number == 1


def test_frontmatter_only_file_is_found_by_its_name(ws: Workspace) -> None:
    lines, _ = index_lines("---\nname: Lone Star\n---\n", "x")
    assert lines == [Line(1, "Lone Star › x", "")]
    write(ws, "memory/notes/x.md", "---\nname: Lone Star\n---\n")
    assert paths(search(ws, "lone star")) == ["memory/notes/x.md"]


# ---------------------------------------------------------------- ranking


def test_a_hit_names_the_lines_it_holds(ws: Workspace) -> None:
    write(ws, "memory/notes/birds.md", DOC)
    [hit] = search(ws, "chips")
    assert (hit.path, hit.start_line, hit.end_line) == ("memory/notes/birds.md", 18, 18)
    assert "[chips]" in hit.snippet and hit.score > 0 and hit.text == "Gulls steal chips."


def test_a_line_under_a_heading_or_file_named_for_its_word_ranks_above_a_mention(
    ws: Workspace,
) -> None:
    filler = "\n".join(f"Line {i} about tea, travel and the weather." for i in range(20))
    write(ws, "memory/notes/trip.md", f"# Trip\n\n{filler}\nWe saw one kingfisher.\n")
    write(ws, "memory/notes/river.md", "# River\n\n## Birds\n\nA kingfisher, blue and fast.\n")
    write(ws, "memory/notes/kingfisher.md", "# Notes\n\nThe kingfisher dives.\n")
    write(ws, "memory/notes/k.md", "---\nname: Kingfisher facts\n---\nThey dive.\n")
    found = paths(search(ws, "kingfisher"))
    assert found[:1] == ["memory/notes/kingfisher.md"]
    assert found.index("memory/notes/trip.md") < found.index("memory/notes/k.md")  # title only


def test_lines_with_most_words_come_first_when_none_has_all(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "# A\n\nThe ferry leaves at noon.\n")
    write(ws, "memory/notes/b.md", "# B\n\nThe ferry to the island leaves at noon.\n")
    hits = search(ws, "ferry island timetable")  # no line has "timetable"
    assert paths(hits)[:2] == ["memory/notes/b.md", "memory/notes/a.md"]
    assert hits[0].score > hits[1].score


def test_search_results_are_fresh_without_an_explicit_update(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "alpha\n")
    assert paths(search(ws, "alpha")) == ["memory/notes/a.md"]
    write(ws, "memory/notes/a.md", "beta\n")
    assert search(ws, "alpha") == []
    with SearchIndex(ws) as index:
        write(ws, "memory/notes/a.md", "gamma\n")
        assert index.search("gamma", refresh=False) == []


def test_limit_caps_the_hits(ws: Workspace) -> None:
    for i in range(5):
        write(ws, f"memory/notes/n{i}.md", f"walrus {i}\n")
    assert len(search(ws, "walrus", limit=3)) == 3


# ---------------------------------------------------------------- incremental updates


def test_update_reindexes_only_changed_files_and_drops_deleted_ones(ws: Workspace) -> None:
    for i in range(6):
        write(ws, f"memory/notes/n{i}.md", f"# Note {i}\n\nbody {i}\n")
    with SearchIndex(ws) as index:
        first = index.update()
        total = first.indexed
        write(ws, "memory/notes/n0.md", "# Note 0\n\nchanged otter\n")
        write(ws, "memory/notes/n1.md", "# Note 1\n\nchanged again\n")
        os.utime(ws.root / "memory/notes/n2.md", ns=(1, 1))  # touched, same bytes
        (ws.root / "memory/notes/n3.md").unlink()
        stats = index.update()
        assert (stats.indexed, stats.removed, stats.unchanged) == (2, 1, total - 3)
        assert index.update() == index.update()
        assert index.update().indexed == 0
        assert paths(index.search("otter")) == ["memory/notes/n0.md"]
        assert "memory/notes/n3.md" not in paths(index.search("body", limit=50))


def test_deleted_files_leave_no_lines_behind(ws: Workspace) -> None:
    write(ws, "memory/notes/gone.md", "# Gone\n\n" + "\n\n".join(["zebra"] * 5) + "\n")
    with SearchIndex(ws) as index:
        index.update()
        (ws.root / "memory/notes/gone.md").unlink()
        index.update()
        sql = "SELECT count(*) FROM search_lines WHERE path = 'memory/notes/gone.md'"
        assert index.db.conn.execute(sql).fetchone() == (0,)
        assert index.search("zebra") == []


def test_rebuild_indexes_everything_again(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "alpha\n")
    with SearchIndex(ws) as index:
        first = index.update()
        again = index.rebuild()
        assert again.indexed == first.indexed and again.removed == 0
        assert paths(index.search("alpha")) == ["memory/notes/a.md"]


def test_two_index_objects_on_one_database_stay_consistent(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "alpha\n")
    with SearchIndex(ws) as one, SearchIndex(ws) as two:
        one.update()
        write(ws, "memory/notes/a.md", "alpha beta\n")
        one.update()
        two.update()
        assert len(two.search("alpha")) == 1


def test_concurrent_updates_leave_one_consistent_index(ws: Workspace) -> None:
    for i in range(40):
        write(ws, f"memory/notes/n{i}.md", f"# N{i}\n\nsalamander {i}\n\n## More\n\nnewt\n")
    errors: list[BaseException] = []

    def update() -> None:
        try:
            with SearchIndex(ws) as index:
                index.update()
        except BaseException as e:
            errors.append(e)

    workers = [threading.Thread(target=update) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert errors == []
    with SearchIndex(ws) as index:
        count = "SELECT count(*) FROM search_lines WHERE path LIKE 'memory/notes/n%'"
        assert index.db.conn.execute(count).fetchone() == (160,)
        assert len(index.search("salamander", limit=100)) == 40


# ---------------------------------------------------------------- queries


@pytest.mark.parametrize(
    "query",
    ['he said "hi', "-x", "foo*", "AND", "OR NOT", "a:b", "NEAR(", "(", "^x", "'", '"', "- * :"],
)
def test_plain_queries_never_raise(ws: Workspace, query: str) -> None:
    write(ws, "memory/notes/a.md", "he said hi to foo and a b x\n")
    assert isinstance(search(ws, query), list)


def test_a_very_long_query_stays_a_query(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "albatross\n")
    long_query = "albatross " + " ".join(f"word{i}" for i in range(200))
    assert paths(search(ws, long_query)) == ["memory/notes/a.md"]
    assert len(split_words(long_query)) > MAX_TERMS


def test_operators_are_plain_words_by_default(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "cats NEAR dogs\n")
    write(ws, "memory/notes/b.md", "cats only\n")
    assert paths(search(ws, "cats NEAR")) == ["memory/notes/a.md", "memory/notes/b.md"]


def test_raw_passes_fts5_syntax_through(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "# Kestrel\n\nhovering\n")
    write(ws, "memory/notes/b.md", "a kestrel was hovering\n")
    assert paths(search(ws, "title:kestrel", raw=True)) == ["memory/notes/a.md"]
    assert set(paths(search(ws, "hover*", raw=True))) == {"memory/notes/a.md", "memory/notes/b.md"}


@pytest.mark.parametrize("query", ["foo AND", '"unclosed', "nosuchcolumn:x", "NEAR("])
def test_a_bad_raw_query_is_a_clean_error(ws: Workspace, query: str) -> None:
    with pytest.raises(SearchQueryError, match="check the FTS5 syntax, or drop --raw"):
        search(ws, query, raw=True)


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_an_empty_query_is_an_error(ws: Workspace, query: str) -> None:
    with pytest.raises(SearchQueryError, match="empty"):
        search(ws, query)


# ---------------------------------------------------------------- what is searched


def test_archive_is_excluded_unless_asked_and_the_trash_always(ws: Workspace) -> None:
    write(ws, "memory/notes/live.md", "narwhal live\n")
    write(ws, "archive/daily/2025-01/2025-01-01.md", "narwhal archived\n")
    write(ws, "archive/trash/2026-01-01/memory/notes/x.md", "narwhal trashed\n")
    assert paths(search(ws, "narwhal")) == ["memory/notes/live.md"]
    found = paths(search(ws, "narwhal", include_archive=True))
    assert sorted(found) == ["archive/daily/2025-01/2025-01-01.md", "memory/notes/live.md"]
    assert paths(search(ws, "narwhal", path_prefix="archive/")) == [
        "archive/daily/2025-01/2025-01-01.md"
    ]


def test_a_file_moved_into_the_archive_leaves_the_results(ws: Workspace) -> None:
    write(ws, "memory/notes/old.md", "pelican\n")
    assert paths(search(ws, "pelican")) == ["memory/notes/old.md"]
    (ws.root / "archive/lessons").mkdir(parents=True, exist_ok=True)
    (ws.root / "memory/notes/old.md").rename(ws.root / "archive/lessons/old.md")
    assert search(ws, "pelican") == []
    assert paths(search(ws, "pelican", include_archive=True)) == ["archive/lessons/old.md"]


def test_path_prefix_filters(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "okapi\n")
    write(ws, "knowledge/topics/b.md", "okapi\n")
    assert paths(search(ws, "okapi", path_prefix="knowledge/")) == ["knowledge/topics/b.md"]
    assert paths(search(ws, "okapi", path_prefix="./memory")) == ["memory/notes/a.md"]


def test_hidden_folders_symlinks_and_other_extensions_are_not_indexed(ws: Workspace) -> None:
    write(ws, "memory/.system/EXTRA.md", "quokka\n")
    write(ws, "notes.txt", "quokka\n")
    target = write(ws, "elsewhere.txt", "quokka\n")
    (ws.root / "memory/notes/link.md").symlink_to(target)
    write(ws, "memory/notes/UPPER.MD", "quokka\n")
    assert paths(search(ws, "quokka")) == ["memory/notes/UPPER.MD"]


def test_bad_files_are_skipped_and_named_while_search_keeps_working(ws: Workspace) -> None:
    write(ws, "memory/notes/latin1.md", "caf\xe9 tapir".encode("latin-1"))
    write(ws, "memory/notes/empty.md", "")
    write(ws, "memory/notes/blank.md", "\n  \n")
    write(ws, "memory/notes/huge.md", "tapir " * 200_000)
    write(ws, "memory/notes/broken.md", "---\nname: [oops\n---\ntapir in a broken file\n")
    write(ws, "memory/notes/good.md", "a good tapir\n")
    with SearchIndex(ws) as index:
        for stats in (index.update(), index.update()):  # named every time, not only the first
            assert dict(stats.skipped) == {
                "memory/notes/blank.md": "empty",
                "memory/notes/empty.md": "empty",
                "memory/notes/huge.md": "larger than 1 MB",
            }
            assert [p for p, _ in stats.warnings] == [
                "memory/notes/broken.md",
                "memory/notes/latin1.md",  # one bad byte: indexed with U+FFFD, and named
            ]
        assert sorted(paths(index.search("tapir"))) == [
            "memory/notes/broken.md",
            "memory/notes/good.md",
            "memory/notes/latin1.md",
        ]
        write(ws, "memory/notes/latin1.md", "fixed tapir\n")
        assert "memory/notes/latin1.md" not in dict(index.update().warnings)


def test_a_workspace_without_a_state_dir_gets_one(ws: Workspace) -> None:
    assert not (ws.root / ".crustacean/state.db").exists()
    search(ws, "anything")
    assert (ws.root / ".crustacean/state.db").is_file()


def test_hit_json_has_the_tool_fields() -> None:
    hit = Hit("a.md", 1, 2, 1.5, "[x]", "x\ny", "2026-03-04 10:05")
    assert hit.to_json() == {
        "path": "a.md",
        "start_line": 1,
        "end_line": 2,
        "score": 1.5,
        "snippet": "[x]",
        "text": "x\ny",
        "when": "2026-03-04 10:05",
        "shares_words": True,
    }


def test_snippets_are_short_single_lines(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "\n".join(["lorem ipsum dolor " * 6] * 8) + "\nibis\n")
    [hit] = search(ws, "ibis")
    assert len(hit.snippet) <= 200 and "\n" not in hit.snippet and "[ibis]" in hit.snippet


# ---------------------------------------------------------------- CLI


def test_cli_prints_path_lines_score_and_snippet(ws: Workspace) -> None:
    write(ws, "memory/notes/birds.md", DOC)
    result = run_cli("-w", str(ws.root), "search", "chips")
    [line] = result.stdout.strip().splitlines()
    location, score, snippet = line.split("  ", 2)
    assert location == "memory/notes/birds.md#L18-L18"
    assert float(score) > 0 and snippet == "Gulls steal [chips]."


def test_cli_says_no_matches(ws: Workspace) -> None:
    no_match = "No good match in the workspace; try other words, or fewer.\n"
    assert run_cli("-w", str(ws.root), "search", "zzzyzx").stdout == no_match


def test_cli_json_and_n(ws: Workspace) -> None:
    for i in range(3):
        write(ws, f"memory/notes/n{i}.md", f"[marmot] {i}\n")
    result = run_cli("-w", str(ws.root), "search", "marmot", "--json", "-n", "2")
    data = json.loads(result.stdout)
    assert len(data) == 2
    keys = {"path", "start_line", "end_line", "score", "snippet", "text", "when", "shares_words"}
    assert set(data[0]) == keys
    assert json.loads(run_cli("-w", str(ws.root), "search", "zzzyzx", "--json").stdout) == []


def test_cli_names_skipped_files_on_stderr(ws: Workspace) -> None:
    write(ws, "memory/notes/bad.md", b"\xff\xfe")
    write(ws, "memory/notes/ok.md", "capybara\n")
    result = run_cli("-w", str(ws.root), "search", "capybara", "--json")
    assert "Warning: memory/notes/bad.md: not valid UTF-8 at byte 0" in result.stderr
    assert json.loads(result.stdout)[0]["path"] == "memory/notes/ok.md"


def test_cli_bad_raw_query_exits_2_with_an_error_line(ws: Workspace) -> None:
    result = run_cli("-w", str(ws.root), "search", "--raw", "foo AND", code=2)
    assert result.stderr.startswith("Error: Invalid search query 'foo AND'")
    assert "drop --raw" in result.stderr and "Traceback" not in result.output


def test_cli_empty_query_exits_2(ws: Workspace) -> None:
    assert (
        "Error: the search query is empty"
        in run_cli("-w", str(ws.root), "search", " ", code=2).stderr
    )


def test_cli_n_below_one_is_a_usage_error(ws: Workspace) -> None:
    run_cli("-w", str(ws.root), "search", "x", "-n", "0", code=2)


def test_cli_archive_flag_and_path_prefix(ws: Workspace) -> None:
    write(ws, "archive/digests/2026-01-04-weekly.md", "dugong\n")
    write(ws, "memory/notes/a.md", "dugong\n")
    out = run_cli("-w", str(ws.root), "search", "dugong").stdout
    assert "archive/" not in out
    out = run_cli("-w", str(ws.root), "search", "dugong", "--archive").stdout
    assert "archive/digests/2026-01-04-weekly.md#L1-L1" in out
    out = run_cli("-w", str(ws.root), "search", "dugong", "--path-prefix", "memory/").stdout
    assert out.startswith("memory/notes/a.md#L1-L1")


def test_cli_record_counts_a_recall_per_returned_file(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "# Seal\n\nseal one\n\n## More\n\nseal two\n")
    run_cli("-w", str(ws.root), "search", "seal")
    with open_state(ws) as db:
        assert db.recalls() == {}
    run_cli("-w", str(ws.root), "search", "seal", "--record")
    with open_state(ws) as db:
        recalls = db.recalls_of("memory/notes/a.md")
    assert recalls.uses == 1 and recalls.last_recalled is not None


def test_cli_index_rebuilds_and_prints_stats(ws: Workspace) -> None:
    write(ws, "memory/notes/empty.md", "")
    result = run_cli("-w", str(ws.root), "index")
    assert result.stdout.startswith("Indexed ") and "skipped 1" in result.stdout
    assert "Skipped: memory/notes/empty.md (empty)" in result.stderr


# ---------------------------------------------------------------- matching words


def test_stemming_finds_other_forms_of_a_word(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "# Garden\n\nI planted courgettes and watered them.\n")
    for query in ("plant", "plants", "planting", "courgette", "watering"):
        assert paths(search(ws, query)) == ["memory/notes/a.md"], query


def test_stop_words_do_not_have_to_match(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "Caroline is researching adoption agencies.\n")
    assert paths(search(ws, "what did Caroline research?"))[:1] == ["memory/notes/a.md"]


def test_a_possessive_in_the_query_matches_the_persons_own_lines(ws: Workspace) -> None:
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- **Maria**: my sister moved to Oslo.\n")
    [hit] = search(ws, "Maria's sister")
    assert hit.text == "- **Maria**: my sister moved to Oslo."


def test_cjk_text_is_found_by_part_of_a_run(ws: Workspace) -> None:
    write(ws, "memory/notes/trip.md", "# 旅行\n\n来週東京に行きます。\nThe hotel is near Ueno.\n")
    write(ws, "memory/notes/food.md", "京都のラーメンが好き\n")
    assert paths(search(ws, "東京")) == ["memory/notes/trip.md"]
    assert paths(search(ws, "東京に行く")) == ["memory/notes/trip.md"]  # pieces: 東京に, 京に行
    assert paths(search(ws, "ラーメン")) == ["memory/notes/food.md"]
    assert paths(search(ws, "hotel 東京"))[0] == "memory/notes/trip.md"
    assert search(ws, "大阪") == []


def test_cjk_lines_leave_the_trigram_index_with_their_file(ws: Workspace) -> None:
    write(ws, "memory/notes/trip.md", "東京に行きます\n")
    assert paths(search(ws, "東京")) == ["memory/notes/trip.md"]
    (ws.root / "memory/notes/trip.md").unlink()
    assert search(ws, "東京") == []
    with SearchIndex(ws) as index:
        assert index.db.conn.execute("SELECT count(*) FROM search_cjk").fetchone() == (0,)


def test_scaffold_files_are_left_out_unless_a_prefix_is_given(ws: Workspace) -> None:
    write(ws, "README.md", "# Workspace\n\nAsk about the heron here.\n")
    write(ws, "memory/contacts/README.md", "One file per heron watcher.\n")
    write(ws, "AGENTS.md", "Look up the heron before answering.\n")
    write(ws, "memory/notes/birds.md", "A heron by the river.\n")
    assert paths(search(ws, "heron")) == ["memory/notes/birds.md"]
    assert paths(search(ws, "heron", path_prefix="memory/contacts/")) == [
        "memory/contacts/README.md"
    ]
    assert "AGENTS.md" in paths(search(ws, "heron", path_prefix="AGENTS"))


# ---------------------------------------------------------------- dates

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def daily(ws: Workspace, day: str, *turns: str) -> None:
    body = "\n".join(f"- **Ana**: {t}" for t in turns)
    write(ws, f"memory/{day}.md", f"# {day}\n\n### [19:05] evening chat\n\n{body}\n")


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("What did Ana cook for dinner on 2026-03-04?", "2026-03-04"),
        ("What did Ana cook for dinner on 4 March 2026?", "2026-03-04"),
        ("dinner in February", "2026-02-10"),
        ("what did Ana cook last week", "2026-03-24"),
        ("dinner in 2025", "2025-12-31"),
    ],
)
def test_a_date_in_the_query_prefers_that_days_daily_log(
    ws: Workspace, query: str, day: str
) -> None:
    for d, dish in (
        ("2025-12-31", "goose"),
        ("2026-02-10", "soup"),
        ("2026-03-04", "risotto"),
        ("2026-03-10", "tacos"),
        ("2026-03-24", "curry"),
    ):
        daily(ws, d, "How was work?", f"For dinner I cooked {dish}.")
    hits = search(ws, query, now=NOW)
    assert hits[0].path == f"memory/{day}.md"
    assert hits[0].when == f"{day} 19:05"


def test_a_date_alone_returns_that_days_lines_in_order(ws: Workspace) -> None:
    daily(ws, "2026-03-27", "first thing", "second thing")
    daily(ws, "2026-03-20", "older thing")
    hits = search(ws, "yesterday", now=NOW)
    assert {h.path for h in hits} == {"memory/2026-03-27.md"}
    assert "first thing" in hits[0].text and "second thing" in hits[0].text


def test_relative_dates_follow_now(ws: Workspace) -> None:
    daily(ws, "2026-03-27", "the plumber came")
    daily(ws, "2026-01-14", "the plumber came")
    later = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
    assert search(ws, "plumber yesterday", now=NOW)[0].path == "memory/2026-03-27.md"
    assert search(ws, "plumber yesterday", now=later)[0].path == "memory/2026-01-14.md"


# ---------------------------------------------------------------- windows and budgets


def test_neighbouring_hits_merge_into_one_window_and_no_line_comes_twice(
    ws: Workspace,
) -> None:
    lines = [f"- filler line {i} about nothing much" for i in range(30)]
    lines[10] = "- the otter swam past"
    lines[11] = "- another otter followed"
    lines[12] = "- a third otter, the smallest"
    lines[20] = "- did you see the otter?"
    lines[21] = "- yes, by the old bridge"
    write(ws, "memory/notes/river.md", "\n".join(lines) + "\n")
    hits = search(ws, "otter", limit=50)
    spans = sorted((h.start_line, h.end_line) for h in hits)
    assert spans == [(11, 13), (21, 22)]  # one window of three; a question with its answer
    seen = [n for h in hits for n in range(h.start_line, h.end_line + 1)]
    assert len(seen) == len(set(seen))
    [answer] = [h for h in hits if h.start_line == 21]
    assert answer.text == "- did you see the otter?\n- yes, by the old bridge"


def test_windows_never_cross_into_another_file(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "first\nlast line asks about the owl?\n")
    write(ws, "memory/notes/b.md", "unrelated opening line\n")
    [hit] = search(ws, "owl")
    assert (hit.path, hit.start_line, hit.end_line) == ("memory/notes/a.md", 2, 2)


def test_a_budget_is_filled_in_rank_order_and_never_exceeded(ws: Workspace) -> None:
    for i in range(40):
        write(ws, f"memory/notes/n{i:02}.md", f"# N{i}\n\nthe badger number {i} " + "x" * i + "\n")
    everything = search(ws, "badger", limit=50)
    for budget in (1, 100, 500, 2000):
        hits = search(ws, "badger", budget_chars=budget)
        used = sum(len(h.text) + 1 for h in hits)
        assert used <= budget
        assert [h.path for h in hits] == [h.path for h in everything if h in hits]
        rest = [h for h in everything if h not in hits]
        assert all(used + len(h.text) + 1 > budget for h in rest[:1]), budget
    assert len(search(ws, "badger", budget_chars=50_000)) == 40  # more than the default 10
    assert len(search(ws, "badger", budget_chars=50_000, limit=5)) == 5


@pytest.mark.parametrize(
    ("kw", "message"), [({"budget_chars": 0}, "budget"), ({"limit": 0}, "limit")]
)
def test_a_bad_budget_or_limit_is_a_clear_error(
    ws: Workspace, kw: dict[str, int], message: str
) -> None:
    with pytest.raises(SearchQueryError, match=message):
        search(ws, "x", **kw)


def test_cli_budget_prints_each_hits_lines(ws: Workspace) -> None:
    daily(ws, "2026-03-04", "Did you cook?", "Yes, a risotto.")
    out = run_cli("-w", str(ws.root), "search", "cook", "--budget-chars", "500").stdout
    assert out.splitlines() == [
        out.splitlines()[0],
        "    - **Ana**: Did you cook?",
        "    - **Ana**: Yes, a risotto.",
    ]
    assert out.startswith("memory/2026-03-04.md#L5-L6  ") and "(2026-03-04 19:05)" in out


def test_cli_bad_budget_exits_2_and_changes_nothing(ws: Workspace) -> None:
    write(ws, "memory/notes/a.md", "x\n")
    before = snapshot(ws.root)
    result = run_cli("-w", str(ws.root), "search", "x", "--budget-chars", "0", code=2)
    assert "--budget-chars" in result.output and "Traceback" not in result.output
    result = run_cli("-w", str(ws.root), "search", "x", "--budget-chars", "60000", code=2)
    assert "Error: the budget must be from 1 to 50,000 characters" in result.stderr
    assert snapshot(ws.root) == before


# ---------------------------------------------------------------- the migration


def test_an_index_built_before_line_search_is_rebuilt(ws: Workspace) -> None:
    """A state.db from before m007 (chunk rows) gets the line index at its next search."""
    write(ws, "memory/notes/a.md", "# A\n\nthe wombat sleeps\n")
    state_dir = ws.root / ".crustacean"
    state_dir.mkdir(exist_ok=True)
    conn = sqlite3.connect(state_dir / "state.db")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)")
    for name, sql in MIGRATIONS[:5]:
        for statement in split_statements(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO _migrations VALUES (?, 'x')", (name,))
    conn.execute(
        "INSERT INTO search_files (path, size, mtime_ns, sha256, first_rowid, chunks) "
        "VALUES ('memory/notes/a.md', 1, 1, 'old', 1, 1)"
    )
    conn.commit()
    conn.close()
    [hit] = search(ws, "wombats")
    assert (hit.path, hit.start_line) == ("memory/notes/a.md", 3)


# ---------------------------------------------------------------- round two (issue 38)


def _log(ws: Workspace, day: str, turns: list[str]) -> None:
    body = "".join(f"- **{t.split(': ', 1)[0]}**: {t.split(': ', 1)[1]}\n" for t in turns)
    write(ws, f"memory/{day}.md", f"# {day}\n\n### [19:05] evening\n\n{body}")


FILLER_TURNS = [
    "Ana: How was your weekend, Joe?",
    "Joe: Pretty quiet, I mostly stayed home.",
    "Ana: Work has been busy, we have a deadline on Friday.",
    "Joe: Did you try that new ramen place near the station?",
]


def test_an_answer_that_repeats_no_word_of_the_question_is_found_with_its_question(
    ws: Workspace,
) -> None:
    for i in range(8):
        _log(ws, f"2026-03-{10 + i}", FILLER_TURNS * 3)
    turns = [
        *FILLER_TURNS,
        "Joe: I still want to hear all about the honeymoon.",
        "Ana: Crete was magical, we swam every morning.",
        *FILLER_TURNS,
    ]
    _log(ws, "2026-03-20", turns)
    hits = search(ws, "Where did Ana go on the honeymoon", limit=3)
    assert any("Crete" in h.text for h in hits[:2])


def test_n_10_hits_are_the_first_ten_of_n_30(ws: Workspace) -> None:
    for i in range(12):
        turns = [
            f"Ana: The otter by the bridge again, day {i}?" if k % 5 == 0 else t
            for k, t in enumerate(FILLER_TURNS * 6)
        ]
        _log(ws, f"2026-04-{10 + i}", turns)
    for query in ("otter bridge", "Ana otter weekend", "otter"):
        ten, thirty = search(ws, query, limit=10), search(ws, query, limit=30)
        assert len(ten) == 10 and ten == thirty[:10]


def test_a_question_mark_anywhere_in_a_line_brings_the_next_turn(ws: Workspace) -> None:
    turns = ["Joe: How did the interview go? I thought of you all day.", "Ana: Hired on the spot."]
    _log(ws, "2026-03-20", [*FILLER_TURNS, *turns, *FILLER_TURNS])
    (hit,) = search(ws, "interview", limit=1)
    assert hit.text.endswith("Hired on the spot.")


def test_a_relative_date_with_no_log_in_range_is_searched_as_words(ws: Workspace) -> None:
    _log(ws, "2025-02-03", ["Ana: I have been sleeping badly recently.", *FILLER_TURNS])
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    (hit, *_) = search(ws, "sleeping recently", now=now)
    assert "recently" in hit.snippet and hit.path == "memory/2025-02-03.md"


def test_a_hyphenated_word_the_text_never_holds_is_searched_as_its_parts(ws: Workspace) -> None:
    write(ws, "memory/notes/code.md", "# Code\n\nShe loves programming in Rust.\n")
    assert paths(search(ws, "programming-related questions")) == ["memory/notes/code.md"]
    write(ws, "memory/notes/mail.md", "# Mail\n\nCheck the e-mail first.\n")
    assert paths(search(ws, "e-mail")) == ["memory/notes/mail.md"]  # held: a phrase still


def test_below_the_floor_search_says_there_is_no_good_match(ws: Workspace) -> None:
    for i in range(20):
        _log(ws, f"2026-03-{10 + i}", FILLER_TURNS * 4)  # Ana or Joe on every line
    root = str(ws.root)
    no_match = "No good match in the workspace; try other words, or fewer.\n"
    assert run_cli("-w", root, "search", "xyzzyqq").stdout == no_match
    assert run_cli("-w", root, "search", "Ana", "xyzzyqq").stdout == no_match  # only common
    out = run_cli("-w", root, "search", "--json", "Joe", "xyzzyqq")
    assert json.loads(out.stdout) == [] and "No good match" in out.stderr
    (hit, *_) = search(ws, "Ana deadline")
    assert hit.shares_words and hit.to_json()["shares_words"] is True


def test_template_text_left_as_init_wrote_it_is_never_returned(ws: Workspace) -> None:
    assert "episodic memory" in (ws.root / "MEMORY.md").read_text("utf-8")  # init's template
    assert search(ws, "episodic memory") == []
    text = (ws.root / "MEMORY.md").read_text("utf-8")
    write(ws, "MEMORY.md", text + "\n- Episodic memory of the Lisbon trip: see memory/notes.\n")
    assert [h.snippet for h in search(ws, "episodic memory")] == [
        "- [Episodic] [memory] of the Lisbon trip: see [memory]/notes."
    ]
