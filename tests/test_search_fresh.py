"""The freshness check: edits made outside crustacean are found without re-reading the tree.

Every case is a real edit of real files (an editor's save, git, a shell), made between two
searches; the second search must see it. A no-change check reads no file and writes nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crustacean.recall.search import SearchIndex, disk_mark, scan_markdown
from crustacean.workspace import Workspace

OLD_NS = 1_600_000_000 * 10**9  # 2020-09-13: an mtime long before any index


def put(ws: Workspace, rel: str, text: str) -> Path:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def paths(ws: Workspace, query: str) -> list[str]:
    with SearchIndex(ws) as index:
        return [h.path for h in index.search(query)]


def keep_mtimes(*paths: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in paths}


def restore(mtimes: dict[Path, int]) -> None:
    """Put mtimes back, as a sync tool or `touch -d` does: only sizes can tell then."""
    for path, ns in mtimes.items():
        os.utime(path, ns=(ns, ns))


@pytest.fixture
def indexed(ws: Workspace) -> Workspace:
    put(ws, "memory/notes/garden.md", "# Garden\n\nThe tomatoes need staking.\n")
    put(ws, "memory/notes/work.md", "# Work\n\nThe invoice for March is late.\n")
    assert paths(ws, "tomatoes") == ["memory/notes/garden.md"]
    return ws


def test_an_editors_save_by_rename_is_found(indexed: Workspace) -> None:
    tmp = put(indexed, "memory/notes/.garden.md.swp", "# Garden\n\nThe peppers need water.\n")
    os.replace(tmp, indexed.root / "memory/notes/garden.md")
    assert paths(indexed, "peppers") == ["memory/notes/garden.md"]
    assert paths(indexed, "tomatoes") == []


def test_a_write_in_place_is_found_though_its_folder_mtime_is_unchanged(
    indexed: Workspace,
) -> None:
    folder = indexed.root / "memory/notes"
    kept = keep_mtimes(folder)
    with (folder / "work.md").open("a", encoding="utf-8") as fh:
        fh.write("The plumber comes on Friday.\n")
    restore(kept)  # appending never changes a folder's mtime; make sure of it
    assert paths(indexed, "plumber") == ["memory/notes/work.md"]


def test_an_old_mtime_with_a_new_size_is_found(indexed: Workspace) -> None:
    folder = indexed.root / "memory/notes"
    path = folder / "garden.md"
    os.utime(path, ns=(OLD_NS, OLD_NS))
    with SearchIndex(indexed) as index:
        index.update()  # the index now holds the old mtime
    kept = keep_mtimes(path, folder)
    path.write_text("# Garden\n\nThe cucumbers climb the fence now.\n", "utf-8")
    restore(kept)  # same mtime as indexed, same folder mtime: only the size differs
    assert paths(indexed, "cucumbers") == ["memory/notes/garden.md"]


def test_a_git_checkout_of_an_older_version_is_found(indexed: Workspace) -> None:
    root = indexed.root

    def git(*args: str) -> None:
        """The user's own git, with an identity of its own: HOME is an empty tmp folder, and a
        host name without a domain gives git no fallback."""
        who = ["-c", "user.name=Ada", "-c", "user.email=ada@example.org"]
        subprocess.run(["git", "-C", str(root), *who, *args], check=True, capture_output=True)

    git("add", "memory/notes/garden.md")
    git("commit", "-q", "-m", "garden v1")
    put(indexed, "memory/notes/garden.md", "# Garden\n\nThe beans are sown.\n")
    git("commit", "-q", "-am", "garden v2")
    assert paths(indexed, "beans") == ["memory/notes/garden.md"]
    git("checkout", "HEAD~1", "--", "memory/notes/garden.md")
    assert paths(indexed, "beans") == []
    assert paths(indexed, "tomatoes") == ["memory/notes/garden.md"]


def test_a_deleted_file_is_gone_from_results(indexed: Workspace) -> None:
    (indexed.root / "memory/notes/garden.md").unlink()
    assert paths(indexed, "tomatoes") == []
    with SearchIndex(indexed) as index:
        rows = index.db.conn.execute("SELECT path FROM search_files").fetchall()
    assert ("memory/notes/garden.md",) not in rows


def test_a_renamed_folder_moves_its_files_in_the_results(indexed: Workspace) -> None:
    root = indexed.root
    os.rename(root / "memory/notes", root / "memory/jottings")
    assert paths(indexed, "tomatoes") == ["memory/jottings/garden.md"]
    assert paths(indexed, "invoice") == ["memory/jottings/work.md"]


def test_a_new_file_in_a_new_nested_folder_is_found(indexed: Workspace) -> None:
    put(indexed, "knowledge/topics/plants/herbs.md", "# Herbs\n\nBasil wants sun.\n")
    assert paths(indexed, "basil") == ["knowledge/topics/plants/herbs.md"]


def test_a_no_change_check_reads_no_file_and_writes_nothing(
    indexed: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import crustacean.recall.search as search_mod

    def no_read(*args: object) -> None:
        raise AssertionError("a file was read on a no-change check")

    monkeypatch.setattr(search_mod, "_read", no_read)
    with SearchIndex(indexed) as index:
        before = index.db.conn.total_changes
        stats = index.update()
        assert index.db.conn.total_changes == before
    assert stats.indexed == stats.removed == 0 and stats.unchanged > 0


def test_the_mark_changes_with_any_path_size_or_mtime(indexed: Workspace) -> None:
    disk, _ = scan_markdown(indexed.root)
    mark = disk_mark(disk)
    assert disk_mark(disk) == mark  # the same files, the same mark
    path = indexed.root / "memory/notes/work.md"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert disk_mark(scan_markdown(indexed.root)[0]) != mark
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert disk_mark(scan_markdown(indexed.root)[0]) == mark
    path.rename(path.with_name("work2.md"))
    assert disk_mark(scan_markdown(indexed.root)[0]) != mark


def test_an_index_emptied_behind_its_back_is_rebuilt(indexed: Workspace) -> None:
    with SearchIndex(indexed) as index, index.db.transaction() as conn:
        for table in ("search_lines", "search_cjk", "search_vectors", "search_files"):
            conn.execute(f"DELETE FROM {table}")  # the mark is left as it was
    assert paths(indexed, "tomatoes") == ["memory/notes/garden.md"]


def test_an_unreadable_file_is_tried_again_on_every_check(
    indexed: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = put(indexed, "memory/notes/locked.md", "# Locked\n\nThe safe code is elsewhere.\n")
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)  # as chmod 0 does, but also for root
    for _ in range(2):
        with SearchIndex(indexed) as index:
            skipped = dict(index.update().skipped)
        assert skipped["memory/notes/locked.md"] == "unreadable: Permission denied"
    monkeypatch.setattr(Path, "read_bytes", real)
    assert paths(indexed, "safe") == ["memory/notes/locked.md"]


def test_the_scan_takes_markdown_files_only_and_no_symlink_or_trash(indexed: Workspace) -> None:
    put(indexed, "memory/notes/b.MD", "# B\n")
    put(indexed, "memory/notes/skip.txt", "not markdown\n")
    put(indexed, "archive/trash/2026-01-01/gone.md", "# Gone\n")
    (indexed.root / "memory/notes/link.md").symlink_to(indexed.root / "memory/notes/work.md")
    disk, problems = scan_markdown(indexed.root)
    assert problems == []
    assert "memory/notes/b.MD" in disk and "memory/notes/link.md" not in disk
    assert "memory/notes/skip.txt" not in disk and "archive/trash/2026-01-01/gone.md" not in disk
