"""Issue 34, items 1, 5 and 9: code owns the folder READMEs' `## Index`; the indexer writes only
there, and the orphan check reads every folder Index (tested on the sample's own READMEs)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from crustacean.config import load_config
from crustacean.folder_index import INDEX_HEADING, indexed_names, insert_line, is_indexed
from crustacean.llm.contract import CONTRACTS, FOLDER_READMES, check_changes, preamble
from crustacean.ops.init import init_sample
from crustacean.stages.health import check_workspace, folder_indexes
from crustacean.stages.indexer import index_created
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TEMPLATES = Path(__file__).resolve().parent.parent / "templates/workspace"


@pytest.fixture
def sample(tmp_path: Path) -> Workspace:
    root = tmp_path / "sample"
    init_sample(root, NOW)
    return Workspace(root, load_config(root))


def index_of(text: str) -> str:
    return text.split(INDEX_HEADING, 1)[1]


def test_the_indexer_writes_under_index_only_on_the_samples_readme(sample: Workspace) -> None:
    """Item 9: `reminders/` is named in `How it is organized` too; the line goes to the Index."""
    (sample.root / "memory/reminders/personal.md").write_text("# Personal reminders\n")
    store = Store(sample)
    before = (sample.root / "memory/README.md").read_text()
    added = index_created(store, ["memory/reminders/personal.md"], "curate", "r1")
    after = (sample.root / "memory/README.md").read_text()
    assert added == ["memory/README.md: - `personal.md` — Personal reminders"]
    head, _, tail = after.partition(INDEX_HEADING)
    assert head == before.partition(INDEX_HEADING)[0]  # nothing above the Index changed
    lines = tail.split("\n")
    at = lines.index("  - `personal.md` — Personal reminders")
    assert lines[at - 1].startswith("- `reminders/`")
    assert index_created(store, ["memory/reminders/personal.md"], "curate", "r2") == []


@pytest.mark.parametrize(
    ("text", "sub", "want"),
    [
        # under the folder's Index bullet, not the prose bullet above that names it
        (
            "# R\n\n- `notes/`, `lists/` — prose\n\n## Index\n\n- `notes/` — staging\n",
            "notes",
            "# R\n\n- `notes/`, `lists/` — prose\n\n## Index\n\n- `notes/` — staging\n"
            "  - `a.md` — A\n",
        ),
        # after the lines already under the folder, before the next section
        (
            "## Index\n\n- `notes/` — n\n  - `b.md` — B\n- `lists/` — l\n\n## After\n",
            "notes",
            "## Index\n\n- `notes/` — n\n  - `b.md` — B\n  - `a.md` — A\n- `lists/` — l\n\n"
            "## After\n",
        ),
        # a folder the Index does not list yet: its bullet, at the end of the Index
        (
            "## Index\n\n- `notes/` — n\n\n## After\n",
            "ideas",
            "## Index\n\n- `notes/` — n\n- `ideas/`\n  - `a.md` — A\n\n## After\n",
        ),
        # no Index at all: one is added at the end
        (
            "# R\n\n- `notes/` — prose\n",
            "notes",
            "# R\n\n- `notes/` — prose\n\n## Index\n\n- `notes/`\n  - `a.md` — A\n",
        ),
    ],
)
def test_insert_line(text: str, sub: str, want: str) -> None:
    assert insert_line(text, sub, "  - `a.md` — A") == want


def test_only_the_index_counts_as_listed() -> None:
    text = "# R\n\n- `admin.md` is mentioned in prose\n\n## Index\n\n- `goals/`\n  - `v1.md` — V\n"
    assert indexed_names(text) == {"goals/", "v1.md"}
    assert is_indexed(text, "goals/v1.md") and not is_indexed(text, "reminders/admin.md")


def test_the_orphan_check_reads_every_folder_index(sample: Workspace) -> None:
    """Item 5: the sample's knowledge/README.md lists none of its 3 files: 3 orphans there."""
    check = next(c for c in check_workspace(sample, NOW).checks if c.name == "orphans")
    orphans = check.figures["orphans"]
    assert {
        "knowledge/procedures/garden-api-release.md",
        "knowledge/topics/garden-api.md",
        "knowledge/topics/portugal-freelance-taxes.md",
        "memory/reminders/admin.md",
    } <= set(orphans)
    assert check.status == "warn" and check.figures["indexes"] == ["knowledge", "memory"]
    assert not any(o.rpartition("/")[2][:4].isdigit() for o in orphans)  # daily logs: by date


@pytest.mark.parametrize(
    ("listed", "orphans"),
    [
        ("- `topics/`\n  - `a.md` — A\n", ["knowledge/topics/b.md"]),
        ("- `topics/`\n  - `a.md` — A\n  - `topics/b.md` — B\n", []),
    ],
)
def test_folder_indexes_table(listed: str, orphans: list[str]) -> None:
    readmes = {"knowledge/README.md": "# K\n\n- `b.md` in prose\n\n## Index\n\n" + listed}
    files = ["knowledge/README.md", "knowledge/topics/a.md", "knowledge/topics/b.md"]
    assert folder_indexes(readmes, files, "memory").figures["orphans"] == orphans


@pytest.mark.parametrize("stage", ["curate", "compile", "calibrate"])
def test_each_file_stage_is_told_code_owns_the_indexes(stage: str) -> None:
    assert "`## Index`" in preamble(stage)
    if stage != "calibrate":
        assert set(FOLDER_READMES) <= set(CONTRACTS[stage].code_writes)
        for readme in FOLDER_READMES:
            with pytest.raises(Exception, match="Index after the run"):
                check_changes(stage, [{"path": readme, "mode": "edit", "old": "a", "new": "b"}])


def test_the_template_readmes_say_code_keeps_the_index() -> None:
    for name in ("memory/README.md", "knowledge/README.md"):
        text = (TEMPLATES / name).read_text("utf-8")
        assert "in the same change" not in text
        assert "Code keeps the Index" in text and "never by a model" in index_of(text)


def test_the_samples_transcripts_are_never_offered_as_memory(sample: Workspace) -> None:
    """Item 13: the sample keeps its transcripts under `transcripts/`, a configured source."""
    from crustacean.recall.context import ContextRequest, build_context
    from crustacean.recall.search import SearchRequest, find
    from crustacean.store.reads import list_page

    assert any(p.startswith("transcripts/") for p in sample_paths(sample))
    listed = list_page(Store(sample), None, None, None)["files"]
    assert listed and not any(f["path"].startswith("transcripts/") for f in listed)
    assert list_page(Store(sample), "transcripts/", None, None)["files"] == []
    hits = find(sample, SearchRequest("garden")).hits
    assert hits and not any(h.path.startswith("transcripts/") for h in hits)
    loaded = build_context(sample, ContextRequest(), NOW)
    assert not any(e.path.startswith("transcripts/") for e in loaded.entries)


def sample_paths(ws: Workspace) -> list[str]:
    return [p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*") if p.is_file()]
