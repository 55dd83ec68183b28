"""History, show and rollback (DESIGN.md §4, issue 3): through the CLI and the library, and a
seeded random walk of writes and rollbacks checked against an independent model of the files."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_helpers import git

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.errors import VersionError, WriteError
from crustacean.ops.init import init_workspace
from crustacean.store import history as hist
from crustacean.store.write import Store
from crustacean.workspace import Workspace

DAY = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def count(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD"))


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def files(store: Store) -> dict[str, bytes]:
    """Every workspace file a writer sees (the trash, .git and .crustacean left out)."""
    return {f.path: (store.root / f.path).read_bytes() for f in store.list_context_files()}


def write(store: Store, changes: list[dict], actor: str = "user", message: str = "w") -> str:
    result = store.write_context(changes, actor=actor, message=message)
    assert result.version
    return result.version


@pytest.fixture
def store(copied_ws: Workspace) -> Store:
    return Store(copied_ws, clock=lambda: DAY)


Versions = tuple[Store, list[str], list[dict[str, bytes]]]


def versions_after(store: Store, *calls: tuple[list[dict], str, str]) -> Versions:
    """Each call (changes, actor, message) written in turn: the store, the versions (init's
    first) and the files at each of them."""
    states, versions = [files(store)], [head(store.root)]
    for changes, actor, message in calls:
        versions.append(write(store, changes, actor, message))
        states.append(files(store))
    return store, versions, states


@pytest.fixture
def three(store: Store) -> Versions:
    """Three versions after init: v1 creates a and b, v2 changes a and adds c, v3 deletes b."""
    a, b = "memory/notes/a.md", "memory/notes/b.md"
    return versions_after(
        store,
        (
            [
                {"path": a, "mode": "create", "content": "a1\n"},
                {"path": b, "mode": "create", "content": "b1\r\nno newline"},
            ],
            "user",
            "w",
        ),
        (
            [
                {"path": a, "mode": "append", "content": "a2 ✓\n"},
                {"path": "knowledge/c.md", "mode": "create", "content": "c1\n"},
                {"path": "MEMORY.md", "mode": "append", "content": "- pointer to c\n"},
            ],
            "curate",
            "curate: c",
        ),
        ([{"path": b, "mode": "delete"}], "user", "w"),
    )


# ------------------------------------------------------------------ library


def test_history_lists_versions_newest_first(three) -> None:
    store, versions, _ = three
    log = hist.history(store, limit=10)
    assert [v.id for v in log] == versions[::-1]
    assert log[1].actor == "curate" and log[1].message == "curate: c"
    assert sorted(log[1].files) == ["MEMORY.md", "knowledge/c.md", "memory/notes/a.md"]
    assert log[1].run_id  # the Crustacean-Run trailer
    assert log[-1].message == "crustacean init: scaffold workspace"
    assert [v.id for v in hist.history(store, "knowledge/c.md")] == [versions[2]]
    assert [v.id for v in hist.history(store, "memory/notes/b.md")] == [versions[3], versions[1]]
    assert len(hist.history(store, limit=2)) == 2


def test_show_prints_the_diff(three) -> None:
    store, versions, _ = three
    text = hist.show(store, versions[2][:10])
    assert "crustacean curate" in text and "curate: c" in text
    assert "+a2 ✓" in text and "+c1" in text and "knowledge/c.md" in text


def test_rollback_restores_byte_identical_as_a_new_version(three) -> None:
    store, versions, states = three
    before = count(store.root)
    result = hist.rollback(store, versions[1])
    assert result.version and result.version != versions[1]
    assert files(store) == states[1]  # byte-identical, CRLF and missing final newline included
    assert count(store.root) == before + 1  # recorded, not rewritten
    log = git(store.root, "rev-list", "HEAD").split()
    assert set(versions) <= set(log)  # every earlier version is still there
    assert git(store.root, "log", "-1", "--format=%s").startswith(
        f"rollback 4 file(s) to version {versions[1][:12]}"
    )
    assert git(store.root, "log", "-1", "--format=%an").strip() == "crustacean user"
    assert git(store.root, "status", "--porcelain") == ""


def test_files_created_after_the_version_go_to_the_trash(three) -> None:
    store, versions, states = three
    result = hist.rollback(store, versions[1])
    assert not (store.root / "knowledge/c.md").exists()
    trashed = store.root / "archive/trash/2024-05-01/knowledge/c.md"
    assert trashed.read_bytes() == b"c1\n"  # never unlinked
    assert "archive/trash/2024-05-01/knowledge/c.md" in result.files
    # the earlier delete of b left a trash copy that the rollback does not touch
    assert (store.root / "archive/trash/2024-05-01/memory/notes/b.md").exists()
    assert files(store) == states[1]


def test_deleted_file_comes_back(three) -> None:
    store, versions, states = three
    hist.rollback(store, versions[2], ["memory/notes/b.md"])
    assert (store.root / "memory/notes/b.md").read_bytes() == b"b1\r\nno newline"
    assert files(store) == {**states[3], "memory/notes/b.md": b"b1\r\nno newline"}


def test_rollback_of_specific_paths_leaves_the_rest(three) -> None:
    store, versions, states = three
    hist.rollback(store, versions[1], ["memory/notes/a.md"])
    expected = {**states[3], "memory/notes/a.md": states[1]["memory/notes/a.md"]}
    assert files(store) == expected
    assert git(store.root, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split() == [
        "memory/notes/a.md"
    ]


def test_rollback_of_a_rollback_restores_the_later_state(three) -> None:
    store, versions, states = three
    first = hist.rollback(store, versions[0])
    assert files(store) == states[0]
    second = hist.rollback(store, versions[3])  # the state the first rollback replaced
    assert second.version and files(store) == states[3]
    # or, the same thing named by the rollback commit itself
    hist.rollback(store, versions[0])
    hist.rollback(store, f"{first.version}~1")
    assert files(store) == states[3]
    assert count(store.root) == len(versions) + 4


def test_rollback_to_the_current_state_does_nothing(three) -> None:
    store, versions, _ = three
    before = snapshot(store.root)
    result = hist.rollback(store, versions[3])
    assert result.files == () and result.version is None
    assert snapshot(store.root) == before


def test_rollback_snapshots_an_uncommitted_edit_first(three) -> None:
    store, versions, _ = three
    (store.root / "memory/notes/a.md").write_bytes(b"typed by the user\n")
    result = hist.rollback(store, versions[1], ["memory/notes/a.md"])
    assert result.snapshot  # the user's edit is kept in history before it is replaced
    assert git(store.root, "show", f"{result.snapshot}:memory/notes/a.md") == "typed by the user\n"
    assert (store.root / "memory/notes/a.md").read_bytes() == b"a1\n"


def test_rollback_of_a_path_missing_then_is_refused(three) -> None:
    store, versions, _ = three
    before = snapshot(store.root)
    with pytest.raises(VersionError, match=r"knowledge/c\.md did not exist at version"):
        hist.rollback(store, versions[1], ["knowledge/c.md"])
    assert snapshot(store.root) == before


# ------------------------------------------------------------------ CLI


def test_history_cli_table_and_json(three) -> None:
    store, versions, _ = three
    w = ("-w", str(store.root))
    table = run_cli(*w, "history").stdout
    for v in versions:
        assert v[:12] in table
    assert "curate" in table and "curate: c" in table and "knowledge/c.md" in table
    data = json.loads(run_cli(*w, "history", "--json").stdout)
    assert [d["id"] for d in data] == versions[::-1]
    assert set(data[0]) >= {"id", "time", "actor", "message", "files", "run_id"}
    datetime.fromisoformat(data[0]["time"])
    one = json.loads(run_cli(*w, "history", "-n", "1", "--json").stdout)
    assert [d["id"] for d in one] == [versions[3]]
    only_c = json.loads(run_cli(*w, "history", "knowledge/c.md", "--json").stdout)
    assert [d["id"] for d in only_c] == [versions[2]]
    assert run_cli(*w, "history", "-n", "0", code=2).exit_code == 2


def test_show_cli(three) -> None:
    store, versions, _ = three
    out = run_cli("-w", str(store.root), "show", versions[2][:8]).stdout
    assert "crustacean curate" in out and "+c1" in out


def test_rollback_cli_whole_and_paths(three) -> None:
    store, versions, states = three
    w = ("-w", str(store.root))
    out = run_cli(*w, "rollback", versions[1], "memory/notes/a.md").stdout
    assert "Restored 1 file(s) as version" in out and "memory/notes/a.md" in out
    assert (store.root / "memory/notes/a.md").read_bytes() == b"a1\n"
    out = run_cli(*w, "rollback", versions[1]).stdout
    assert "Restored" in out
    assert files(store) == states[1]
    head_now = head(store.root)
    out = run_cli(*w, "rollback", versions[1]).stdout
    assert "Nothing to roll back" in out
    assert head(store.root) == head_now  # no empty version


def test_history_without_git_says_versioning_is_off(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    init_workspace(root)
    shutil.rmtree(root / ".git")
    for args in (("history",), ("show", "HEAD"), ("rollback", "HEAD")):
        result = run_cli("-w", str(root), *args, code=2)
        assert "Error: versioning is off" in result.stderr
    with pytest.raises(VersionError, match="versioning is off"):
        hist.history(Store(Workspace(root, load_config(root))))


# ------------------------------------------------------------------ property: random walk

PATHS = ("memory/notes/a.md", "memory/notes/b.md", "knowledge/c.md", "memory/notes/sub/d.md")
WORDS = ("crab", "shell", "tide", "reef", "ü", "✓", "claw", "sand", "two words", "#", "-", "\t")
MODES = ("create", "append", "edit", "overwrite", "delete", "move")


def _text(rng: random.Random) -> str:
    lines = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        for _ in range(rng.randint(1, 4))
    ]
    end = rng.choice(["\n", "\n", "\r\n", ""])
    return end.join(lines) + end if end else "\n".join(lines)


def _change(rng: random.Random, cur: dict[str, bytes]) -> dict:
    """Mostly a change that fits the files (so most calls apply), sometimes any change at all."""
    path = rng.choice(PATHS)
    free = [p for p in PATHS if p not in cur]
    if rng.random() < 0.15:
        mode = rng.choice(MODES)
    elif path in cur:
        mode = rng.choice(["append", "edit", "edit", "overwrite", "delete", "move"])
    else:
        mode = rng.choice(["create", "append"])
    ch: dict = {"path": path, "mode": mode}
    if mode in ("create", "append", "overwrite"):
        ch["content"] = _text(rng)
    elif mode == "edit":
        text = cur.get(path, b"").decode()
        if text and rng.random() < 0.85:
            i = rng.randrange(len(text))
            ch["old"] = text[i : i + rng.randint(6, 30)]
        else:
            ch["old"] = rng.choice(WORDS)
        ch["new"] = rng.choice(["", _text(rng)])
    elif mode == "move":
        ch["to"] = rng.choice(free if free and rng.random() < 0.85 else PATHS)
    if mode != "create" and rng.random() < 0.25:
        data = cur.get(path)
        good = data is not None and rng.random() < 0.8
        ch["expected_sha256"] = hashlib.sha256(data if good else b"other").hexdigest()
    return ch


def _model_apply(orig: dict[str, bytes], changes: list[dict]) -> dict[str, bytes] | None:
    """The spec of each mode, independent of the store: the new files, or None if refused."""
    cur = dict(orig)
    for ch in changes:
        path, mode = ch["path"], ch["mode"]
        sha = ch.get("expected_sha256")
        if sha is not None and (path not in orig or hashlib.sha256(orig[path]).hexdigest() != sha):
            old = ch.get("old", "").encode()
            still = mode == "edit" and path in cur and old and cur[path].count(old) == 1
            if not still:  # an edit whose old text occurs once applies whatever its sha
                return None  # stale against the disk as the call found it
        if mode not in ("create", "append") and path not in cur:
            return None
        if mode == "create":
            if path in cur:
                return None
            cur[path] = ch["content"].encode()
        elif mode == "append":
            base = cur.get(path, b"")
            sep = b"\n" if base and not base.endswith(b"\n") else b""
            cur[path] = base + sep + ch["content"].encode()
        elif mode == "edit":
            old = ch["old"].encode()
            if not old or cur[path].count(old) != 1:
                return None
            cur[path] = cur[path].replace(old, ch["new"].encode())
        elif mode == "overwrite":
            cur[path] = ch["content"].encode()
        elif mode == "delete":
            del cur[path]  # to the trash, which `files` leaves out
        elif mode == "move":
            if ch["to"] in cur:
                return None
            cur[ch["to"]] = cur.pop(path)
    return cur


def _disk(root: Path, trash: bool = True) -> tuple[str, dict[str, bytes]]:
    """HEAD and every byte outside .git/ and .crustacean/ (and the trash unless `trash`)."""
    ref = (root / ".git/HEAD").read_text().strip().removeprefix("ref: ")
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", ".crustacean")]
        elif rel == "archive" and not trash:
            dirnames[:] = [d for d in dirnames if d != "trash"]
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as fh:
                out[name if rel == "." else f"{rel}/{name}"] = fh.read()
    return (root / ".git" / ref).read_text().strip(), out


def _live(root: Path) -> dict[str, bytes]:
    """What `files` returns, read without the store (the walk reads it after every step)."""
    return _disk(root, trash=False)[1]


def _walk(store: Store, seed: int, ops: int) -> dict[str, int]:
    rng = random.Random(seed)
    root = store.root
    cur = _live(root)
    assert cur == files(store)  # the cheap reader agrees with list_context_files
    versions: dict[str, dict[str, bytes]] = {head(root): cur}
    commits = count(root)
    seen = {"write": 0, "rollback": 0, "refused": 0, "no-op": 0}
    for step in range(ops):
        where = f"seed {seed} step {step}"
        if rng.random() < 0.15:
            target = rng.choice(list(versions))
            paths = rng.sample(PATHS, rng.randint(1, 2)) if rng.random() < 0.3 else []
            if any(p not in versions[target] for p in paths):
                before = _disk(root)
                with pytest.raises(VersionError, match="did not exist at version"):
                    hist.rollback(store, target, paths)
                assert _disk(root) == before, where
                seen["refused"] += 1
                continue
            result = hist.rollback(store, target, paths)
            expected = dict(versions[target])
            if paths:
                expected = {**cur, **{p: versions[target][p] for p in paths}}
            cur = _live(root)
            assert cur == expected, where  # byte-identical to the model of the target
            new_count = count(root)
            assert new_count == commits + (1 if result.version else 0), where  # only grows
            commits = new_count
            if result.version:
                versions[result.version] = cur
            seen["rollback"] += 1
            continue
        changes = [_change(rng, cur) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        expected = _model_apply(cur, changes)
        if expected is None:
            before = _disk(root)
            with pytest.raises(WriteError):
                store.write_context(changes, actor="user", message=f"step {step}")
            assert _disk(root) == before, (where, changes)  # refused whole: nothing moved
            seen["refused"] += 1
            continue
        result = store.write_context(changes, actor="user", message=f"step {step}")
        cur = _live(root)
        assert cur == expected, (where, changes)
        if result.version:
            commits += 1
            versions[result.version] = cur
            seen["write"] += 1
        else:
            assert not result.files, where  # no version only when nothing changed
            seen["no-op"] += 1
    # no version was lost: every one the walk saw is still in history, and nothing else is
    history = git(root, "rev-list", "HEAD").split()
    assert set(versions) <= set(history)
    assert len(history) == commits
    assert git(root, "status", "--porcelain") == ""
    assert not (store.ws.state_dir / "journal.json").exists()
    assert files(store) == cur
    return seen


# Two fixed walks, and a third on a seed drawn each run (fixed under CI, as hypothesis is), so
# the runs explore new walks over time; a failure names its seed.
SEEDS = (11, 42, 1999 if os.environ.get("CI") else random.SystemRandom().randrange(10**6))
OPS = 260  # x 3 seeds = 780 operations


def test_random_writes_and_rollbacks_never_lose_a_byte_or_a_version(tmp_path: Path) -> None:
    """Seeded walks of writes (1-3 changes each, applied or refused) and rollbacks.

    Each seed walks its own workspace; the walks run side by side in threads (they spend their
    time waiting on git).
    """

    def walk(seed: int) -> dict[str, int]:
        root = tmp_path / f"walk-{seed}"
        init_workspace(root)
        return _walk(Store(Workspace(root, load_config(root)), clock=lambda: DAY), seed, OPS)

    workers = max(1, min(len(SEEDS), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = dict(zip(SEEDS, pool.map(walk, SEEDS), strict=True))
    for seed, seen in results.items():
        assert sum(seen.values()) == OPS, seed
        assert seen["write"] > OPS / 3 and seen["rollback"] > 10 and seen["refused"] > 10, (
            seed,
            seen,
        )


def test_a_one_megabyte_version_message_is_one_bounded_line_in_history(ws: Workspace) -> None:
    """Before: a 1 MB message was the commit subject and `history` printed 6.5 MB."""
    huge = "The model wrote at length. " * 40_000  # ~1 MB, as a runaway model's message
    Store(ws).write_context(
        [{"path": "memory/notes/long.md", "mode": "create", "content": "x\n"}],
        actor="curate",
        message=huge,
    )
    out = run_cli("-w", str(ws.root), "history").stdout
    assert len(out) < 4_000
    assert f"… ({len(huge.strip()):,} chars)" in out  # git keeps it without the last space
    data = json.loads(run_cli("-w", str(ws.root), "history", "--json").stdout)
    assert len(data[0]["message"]) > 900_000  # the data keeps it whole
