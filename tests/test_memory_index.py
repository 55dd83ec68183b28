"""A topic-less context from the memory index: the same memories, problems and output."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from crustacean.recall import context as context_mod
from crustacean.recall import memories
from crustacean.recall.context import Caps, assemble, parse_for
from crustacean.recall.memory_index import PERSON_FOLDERS, IndexedMemory, load_memories
from crustacean.state import open_state
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CAPS = Caps(max_entries=50, budget_chars=100_000, foundation_chars=100_000)


def put(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.fixture
def many(ws: Workspace) -> Workspace:
    """Every kind of memory file a context meets."""
    put(ws.root, "memory/notes/hot.md", "---\ntier: hot\n---\n# Hot\nalways loaded\n")
    put(ws.root, "memory/notes/warm.md", "# Warm\nonly with a topic\n")
    put(ws.root, "memory/lessons/ruling.md", "# Ruling\nlessons are hot by default\n")
    put(ws.root, "knowledge/topics/cold.md", "# Cold\nreference\n")
    put(ws.root, "memory/contacts/telegram-ana.md", "---\nname: Ana\n---\nAna likes tea\n")
    put(ws.root, "memory/groups/g-crew.md", "# Crew\nthe crew\n")
    put(ws.root, "memory/notes/empty.md", "\n\n")
    put(ws.root, "memory/notes/latin1.md", b"caf\xe9\n")
    put(ws.root, "memory/notes/badfront.md", "---\ntier: [\n---\nbody stays\n")
    put(ws.root, "memory/notes/archived.md", "---\ntier: archive\n---\nold\n")
    return ws


def expected(ws: Workspace) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    mems, problems = memories.load_memories(ws)
    used = [m for m in mems if m.tier == "hot" or m.path.startswith(PERSON_FOLDERS)]
    return [(m.path, m.doc.text) for m in used], problems


def got(ws: Workspace) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    mems, problems = load_memories(ws, bodies=False)
    return [(m.path, m.doc.text) for m in mems], problems


def test_the_index_gives_what_a_topic_less_context_uses_of_a_full_read(many: Workspace) -> None:
    assert got(many) == expected(many)  # first call: builds the index
    assert got(many) == expected(many)  # second: from it
    with open_state(many) as db:
        assert db.conn.execute("SELECT count(*) FROM memory_index").fetchone()[0] == 10


@pytest.mark.parametrize("change", ["retier", "new", "delete", "break", "fix", "same-tick"])
def test_a_changed_file_is_read_again(many: Workspace, change: str) -> None:
    got(many)
    warm = many.root / "memory/notes/warm.md"
    if change == "retier":
        warm.write_text("---\ntier: hot\n---\n# Warm\nnow hot\n")
    elif change == "new":
        put(many.root, "memory/contacts/slack-bo.md", "Bo\n")
    elif change == "delete":
        (many.root / "memory/notes/hot.md").unlink()
    elif change == "break":
        warm.write_bytes(b"\xff\xfe broken")
    elif change == "fix":
        put(many.root, "memory/notes/latin1.md", "cafe\n")
    else:  # the same size and modification time, as a write in the same clock tick leaves
        before = warm.stat()
        warm.write_text(warm.read_text().replace("topic", "TOPIC"))
        os.utime(warm, ns=(before.st_atime_ns, before.st_mtime_ns))
        retiered = warm.read_text().replace("# Warm", "---\ntier: hot\n---\n#W")[: before.st_size]
        warm.write_text(retiered.ljust(before.st_size, "x"))
        os.utime(warm, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert got(many) == expected(many)


@pytest.mark.parametrize("audience", ["main", "dm:ana", "group:crew", "cron", "dm:nobody"])
def test_context_output_is_the_same_as_from_a_full_read(
    many: Workspace, monkeypatch: pytest.MonkeyPatch, audience: str
) -> None:
    indexed = assemble(many, parse_for(audience), None, CAPS, NOW).to_json()

    def full(ws: Workspace, bodies: bool = True, topic: bool = False, **_: Any) -> Any:
        return memories.load_memories(ws)

    monkeypatch.setattr(context_mod, "load_memories", full)
    assert assemble(many, parse_for(audience), None, CAPS, NOW).to_json() == indexed
    with_topic = assemble(many, parse_for(audience), "the topic", CAPS, NOW).to_json()
    monkeypatch.undo()
    assert assemble(many, parse_for(audience), "the topic", CAPS, NOW).to_json() == with_topic


def test_settled_files_are_not_parsed_again(
    many: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files older than the racy window are answered from the index; a used memory's text is
    read when the context uses it (IndexedMemory.doc), a changed file is parsed again."""
    old = NOW.timestamp() - 86_400
    for top in ("memory", "knowledge"):
        for path in (many.root / top).rglob("*.md"):
            os.utime(path, (old, old))
    got(many)
    parsed: list[str] = []
    real = memories.read_memory

    def counting(ws: Workspace, rel: str, stored: Any = None) -> Any:
        parsed.append(rel)
        return real(ws, rel, stored)

    monkeypatch.setattr("crustacean.recall.memory_index.read_memory", counting)
    mems, _ = load_memories(many, bodies=False)
    assert parsed == [] and all(isinstance(m, IndexedMemory) for m in mems)
    assert [m.path for m in mems] == [p for p, _ in expected(many)[0]]
    assert got(many) == expected(many)
    warm = many.root / "memory/notes/warm.md"
    warm.write_text("---\ntier: hot\n---\nnow hot\n")
    os.utime(warm, (old + 60, old + 60))
    assert got(many) == expected(many)
    assert parsed == ["memory/notes/warm.md"]


def test_an_indexed_memory_knows_its_size_and_date_without_reading(many: Workspace) -> None:
    old = NOW.timestamp() - 86_400
    for path in (many.root / "memory").rglob("*.md"):
        os.utime(path, (old, old))
    full = {m.path: m for m in memories.load_memories(many)[0]}
    load_memories(many, bodies=False)
    for mem in load_memories(many, bodies=False)[0]:
        assert isinstance(mem, IndexedMemory) and mem._doc is None
        same = full[mem.path]
        assert (mem.tier, mem.recorded, mem.size, mem.mtime) == (
            same.tier,
            same.recorded,
            same.size,
            same.mtime,
        )
        assert mem._doc is None and mem.doc == same.doc


def test_a_topic_context_from_the_index_is_the_same_as_from_a_full_read(
    many: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm and cold memories picked by the ranking, a long one cut to its best lines, an
    archived one never: the same entries as when every memory is read and parsed."""
    long_body = "\n".join(f"- filler line {i} about nothing much" for i in range(120))
    put(many.root, "memory/notes/warm.md", "# Warm\nthe greenhouse heater broke again\n")
    put(many.root, "knowledge/topics/cold.md", "# Cold\ngreenhouse heater wiring diagram\n")
    put(
        many.root,
        "memory/notes/long.md",
        f"# Long\n{long_body}\nthe greenhouse heater needs a new fuse\n{long_body}\n",
    )
    put(many.root, "memory/notes/old.md", "---\ntier: archive\n---\ngreenhouse heater 2019\n")
    topic = "greenhouse heater"
    indexed = assemble(many, parse_for("main"), topic, CAPS, NOW).to_json()
    read: list[str] = []
    real = memories.read_memory

    def counting(ws: Workspace, rel: str, stored: Any = None) -> Any:
        read.append(rel)
        return real(ws, rel, stored)

    def full(ws: Workspace, bodies: bool = True, topic: bool = False, **_: Any) -> Any:
        return memories.load_memories(ws)

    monkeypatch.setattr(context_mod, "load_memories", full)
    assert assemble(many, parse_for("main"), topic, CAPS, NOW).to_json() == indexed
    paths = {e["path"]: e for e in indexed["entries"]}
    assert {"memory/notes/warm.md", "knowledge/topics/cold.md"} <= set(paths)
    assert "best lines" in paths["memory/notes/long.md"]["why"]
    assert "memory/notes/old.md" not in paths
    monkeypatch.undo()
    old_ns = int((NOW.timestamp() - 86_400) * 1e9)
    for top in ("memory", "knowledge"):
        for path in (many.root / top).rglob("*.md"):
            os.utime(path, ns=(old_ns, old_ns))  # settled: out of the racy window
    indexed = assemble(many, parse_for("main"), topic, CAPS, NOW).to_json()
    monkeypatch.setattr("crustacean.recall.memory_index.read_memory", counting)
    assert assemble(many, parse_for("main"), topic, CAPS, NOW).to_json() == indexed
    assert read == []  # nothing parsed again: the index knew every memory
    monkeypatch.setattr(context_mod, "load_memories", full)
    assert assemble(many, parse_for("main"), topic, CAPS, NOW).to_json() == indexed
