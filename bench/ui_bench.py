"""Benchmark `crustacean ui` pages on a large generated workspace.

Run: `.venv/bin/python bench/ui_bench.py [--files N] [--rounds R]`. It builds a workspace of N
memory files (default 10,000) plus 3 years of daily logs, commits it, and times each page as a
request through the real app in-process (the guard, the core call, the template), against the
same core call alone (what `crustacean status`, `history`, `search` and the store's listing do),
measured in the same run. The ratio is what the page costs on top of the CLI's own work; the size
column is the page's bytes (pages are paged, so none grows with the workspace).

The last row is the whole-workspace rollback confirmation after one version that changed half of
the memory files (issue 36: 2,500 files of a 5,000-file workspace were listed one by one, 5.6 s,
217 KB), against the core's `rollback_changes` alone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import count, data_size, isolate, open_store, p95, row
from bench.generate import generate_workspace


def _times(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        isolate(Path(tmp))
        root = Path(tmp) / "ws"
        made = generate_workspace(root, args.files)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run(["git", "commit", "-qm", "generated"], cwd=root, check=True)
        _change_half(root, made.memory_files)
        print(_table(root, args.rounds, args.files))


def _change_half(root: Path, files: list[str]) -> None:
    """One version that edits every other memory file (a third of them deleted, as an agent's
    bad pass might), so the first version is a whole-workspace rollback away."""
    for i, rel in enumerate(files[::2]):
        path = root / rel
        if i % 3 == 0:
            path.unlink()
        else:
            path.write_text(path.read_text("utf-8") + "\n- an edit to roll back\n", "utf-8")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "half the files changed"], cwd=root, check=True)


def _table(root: Path, rounds: int, files: int) -> str:
    from starlette.testclient import TestClient

    import crustacean.ops.cron as cron
    from crustacean.config import load_config
    from crustacean.ops.status import doctor, workspace_status
    from crustacean.recall.search import SearchIndex
    from crustacean.state import open_state
    from crustacean.store import history as hist
    from crustacean.ui.security import Guard
    from crustacean.ui.server import UiContext, build_app
    from crustacean.workspace import Workspace

    cron.read_crontab = lambda _f, **_: ""  # never this machine's crontab
    guard = Guard.new(8000)
    client = TestClient(build_app(UiContext(root, [], guard)), base_url="http://127.0.0.1:8000")
    client.cookies.set(guard.cookie, guard.token)
    ws = Workspace(root, load_config(root))
    store = open_store(ws)
    folder = "memory/notes"
    with open_state(ws) as db, SearchIndex(ws, db) as index:
        index.update()  # both sides then search a built index

    def search_core() -> None:
        with open_state(ws) as db, SearchIndex(ws, db) as idx:
            idx.update()
            idx.search("garden budget", 30, refresh=False)

    first = hist.history(store, None, 2)[-1].id
    cases = [
        ("overview", "/", lambda: (workspace_status(ws, datetime.now(UTC)), doctor(root))),
        (f"files ({folder})", f"/files?dir={folder}", lambda: store.list_context_files(folder)),
        ("versions", "/versions", lambda: hist.history(store, None, 51)),
        ("search", "/search?q=garden+budget", search_core),
        (
            "rollback confirmation (whole workspace)",
            f"/versions/{first}/rollback",
            lambda: hist.rollback_changes(store, first, []),
        ),
    ]
    lines = [
        f"{count(files, 'memory file')}; {count(rounds, 'round')} each\n",
        "| page | median ms | p95 ms | core call alone ms | ratio | page size KB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    data_size(f"{count(files, 'memory file')} + 3 years of daily logs, {count(rounds, 'round')}")
    for name, url, core in cases:
        size = len(client.get(url).content)  # also warms caches for both sides
        page, base = [], []
        for _ in range(rounds):  # alternated, so both sides see the same load on the machine
            page += _times(lambda url=url: client.get(url), 1)
            base += _times(core, 1)
        m, b = statistics.median(page) * 1000, statistics.median(base) * 1000
        row(f"ui {name}", m, p95(page) * 1000, b, "the same core call alone", note=f"{size:,} B")
        lines.append(
            f"| {name} | {m:.0f} | {p95(page) * 1000:.0f} | {b:.0f} | {m / b:.2f}x | "
            f"{size / 1024:.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
