"""The loss guard measures loss: old content found nowhere in the files a call leaves behind
(rewording and moving are not loss), with a floor for small files and a cap per file per run.
Every refusal says nothing of the call was applied and names the file and lines; each case
proves that nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.errors import LimitError
from crustacean.store.changes import sha256_hex
from crustacean.store.loss import lost_lines
from crustacean.store.write import Store
from crustacean.workspace import Workspace

RUN = "run-1"


def put(ws: Workspace, path: str, lines: list[str]) -> bytes:
    data = ("\n".join(lines) + "\n").encode()
    Store(ws).write_context(
        [{"path": path, "mode": "create", "content": data.decode()}], actor="user", message="seed"
    )
    return data


def edit(path: str, old: bytes, new: str) -> dict[str, str]:
    return {
        "path": path,
        "mode": "edit",
        "old": old.decode(),
        "new": new,
        "expected_sha256": sha256_hex(old),
    }


def refused(store: Store, changes: list[dict[str, str]], actor: str = "compile") -> str:
    before = snapshot(store.root)
    with pytest.raises(LimitError) as info:
        store.write_context(changes, actor=actor, message="x", run_id=RUN)
    assert snapshot(store.root) == before  # nothing of the call was applied: files, git, state
    msg = str(info.value)
    assert msg.startswith("refused, nothing of this call was applied:")
    return msg


FACTS = [
    f"- 2026-11-{d:02d} — Fact number {d} about the garden project, item {d}." for d in range(1, 29)
]


def test_junk_replacement_of_a_whole_file_is_refused(ws: Workspace) -> None:
    old = put(ws, "memory/notes/garden.md", ["# Garden", *FACTS * 3])
    junk = "# Garden\n" + "".join(f"- lorem ipsum dolor {i}\n" for i in range(84))
    msg = refused(Store(ws), [edit("memory/notes/garden.md", old, junk)], actor="curate")
    assert "memory/notes/garden.md would lose 84 line(s)" in msg
    assert "line 2: '- 2026-11-01 — Fact number 1" in msg and "and 81 more" in msg
    assert "compile.max_loss_fraction 0.1" in msg and "archive/pruned/" in msg


def test_many_small_edits_add_up_per_file_per_run(ws: Workspace) -> None:
    lines = ["# Garden", *FACTS]  # 29 lines: a run may lose max(3, 2) = 3
    put(ws, "memory/notes/garden.md", lines)
    store = Store(ws)
    for n in range(3):
        cur = store.read_bytes("memory/notes/garden.md") or b""
        store.write_context(
            [edit("memory/notes/garden.md", cur, cur.decode().replace(FACTS[n] + "\n", ""))],
            actor="compile",
            message=f"drop {n}",
            run_id=RUN,
        )
    cur = store.read_bytes("memory/notes/garden.md") or b""
    msg = refused(
        store, [edit("memory/notes/garden.md", cur, cur.decode().replace(FACTS[3] + "\n", ""))]
    )
    assert "would lose 1 line(s) (after 3 lost earlier this run)" in msg
    assert "at most 3 of its 29 lines" in msg
    # another run starts its own tally
    store.write_context(
        [edit("memory/notes/garden.md", cur, cur.decode().replace(FACTS[3] + "\n", ""))],
        actor="compile",
        message="next run",
        run_id="run-2",
    )


def test_a_prune_moved_to_an_archive_file_in_the_same_call_is_not_loss(ws: Workspace) -> None:
    path = "memory/reminders/errands.md"
    done = [f"- 2026-11-{d:02d} — Errand {d} (done 2026-11-{d:02d})" for d in range(1, 11)]
    old = put(ws, path, ["# Errands", *done, "- 2026-12-20 — Book the flights"])  # 12 lines
    kept = "# Errands\n- 2026-12-20 — Book the flights\n"
    store = Store(ws)
    msg = refused(store, [edit(path, old, kept)])  # 10 of 12 lines, nowhere else: refused
    assert "errands.md would lose 10 line(s)" in msg
    archive = "archive/pruned/memory/reminders/errands.md"
    result = store.write_context(
        [
            edit(path, old, kept),
            {"path": archive, "mode": "create", "content": "\n".join(done) + "\n"},
        ],
        actor="compile",
        message="prune done errands to the archive",
        run_id=RUN,
    )
    assert (ws.root / path).read_text() == kept
    assert (ws.root / archive).read_text().count("(done") == 10
    assert result.sha256[path] == sha256_hex(kept.encode())  # the next change needs no read


def test_a_reworded_line_is_not_loss(ws: Workspace) -> None:
    path = "memory/contacts/telegram-ana.md"
    lines = [
        "# Ana",
        "- Ana moved to Lisbon in February.",
        "- Works at Acme as a designer.",
        "- Prefers voice notes to long texts.",
        "- Has a dog called Pixel.",
    ]
    old = put(ws, path, lines)
    new = (
        "# Ana\n- In February, Ana moved to Lisbon.\n- Designer at Acme; works there since 2025.\n"
        "- Prefers voice notes over long texts.\n- Her dog is called Pixel.\n"
    )
    assert lost_lines(old, [new.encode()], [new.splitlines()]) == []
    Store(ws).write_context([edit(path, old, new)], actor="curate", message="reword", run_id=RUN)
    assert (ws.root / path).read_text() == new


def test_a_small_file_may_lose_a_few_lines_but_not_most(ws: Workspace) -> None:
    path = "memory/notes/small.md"
    lines = ["# Small", "- one thing", "- second thing", "- third thing", "- fourth thing"]
    old = put(ws, path, lines)
    store = Store(ws)
    msg = refused(store, [edit(path, old, "# Small\n")])  # 4 lines: over the floor of 3
    assert "small.md would lose 4 line(s)" in msg and "at most 3 of its 5 lines" in msg
    assert "compile.loss_floor_lines 3" in msg
    store.write_context(
        [edit(path, old, "# Small\n- one thing\n")], actor="compile", message="x", run_id=RUN
    )
    assert (ws.root / path).read_text() == "# Small\n- one thing\n"


def test_a_refusal_of_one_file_applies_none_of_the_others(ws: Workspace, tmp_path: Path) -> None:
    old = put(ws, "memory/notes/garden.md", ["# Garden", *FACTS])
    refused(
        Store(ws),
        [
            {"path": "memory/notes/new.md", "mode": "create", "content": "# New\n"},
            edit("memory/notes/garden.md", old, "# Garden\n"),
        ],
    )
    assert not (ws.root / "memory/notes/new.md").exists()


def test_casefold_makes_and_unmakes_no_whitespace_or_line_break() -> None:
    """The loss guard folds a whole text once and then splits it into lines and words, which is
    the same as folding each line only while no code point folds to or from whitespace or a
    line break: checked here over all of them, so a new Unicode version cannot slip past."""
    import sys

    odd = []
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        folded = c.casefold()
        if any(x.isspace() for x in folded) != c.isspace() or len(folded.splitlines()) != len(
            c.splitlines()
        ):
            odd.append(hex(cp))
    assert odd == []
