"""Benchmark of `crustacean search` and of what waits on 10,000 memories: latency against grep
and `import typer`, the MCP tools, the SessionStart hook, incremental re-index, ranking quality.

Run it with `python bench/search_bench.py [--files N] [--dir DIR]` (the project's venv). It
generates a workspace (bench/generate.py: N memory files, default 10,000, plus 3 years of daily
logs) in a temp folder, or reuses DIR when it already holds one, and measures:

- the full index build (`SearchIndex.rebuild`);
- ~30 queries of 1–3 words through `SearchIndex.search` in-process, query only and with the
  freshness check `search` does by default, against `grep -rilF WORD` over the same files, one
  process per query as a user would run it;
- the MCP tools `search_memory` and `get_context` (with and without a topic) through an
  in-process MCP client, one session, as an agent calls them mid-conversation;
- `crustacean search` end to end and the SessionStart hook's whole command
  (`crustacean -w WS context --format claude-hook`), one process each, interleaved with
  `python -c 'import typer'`; `search` again with the semantic extra;
- re-indexing after 10 files change (`update`) against a full rebuild;
- ranking: 30 needles (a unique fact put into one section of a long file, queried by 2–3 of its
  words, one inflected) and the mean reciprocal rank in the top 10 of the right file and
  section, against plain BM25 over whole files (a second FTS5 table of whole files, same
  tokenizer, same quoting and OR fallback), where the right file alone counts as a hit.

`--mcp-only` measures the MCP tool calls and grep alone (a minute, for comparing two checkouts).
It prints one markdown table, then its rows of bench/BUDGETS.md: the hook's median ≤ 3x the typer
import's; `search` end to end p95 ≤ 3x it; each MCP tool call's p95 ≤ 0.2x the grep median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import budget, budget_table, data_size, isolate, row
from bench.generate import WORDS, generate_workspace
from crustacean.config import load_config
from crustacean.recall.search import SearchIndex
from crustacean.workspace import Workspace

CONTENT_WORDS = WORDS[60:2000]  # what queries are made of: common to middling words
NEEDLE_BAND = WORDS[300:3000]  # in dozens to hundreds of files each, so ranking has work to do
MARKER = ".bench-search"
NEEDLES = ".bench-needles.json"


@dataclass(frozen=True)
class Needle:
    path: str
    line: int  # 1-based line of the planted fact
    query: str


def _workspace(root: Path, files: int) -> tuple[Workspace, list[str]]:
    """Generate the workspace once (a marker file records it), then reuse it."""
    marker = root / MARKER
    if not marker.is_file() or marker.read_text() != str(files):
        if root.exists() and any(root.iterdir()):
            sys.exit(f"{root} is not empty and holds no bench workspace of {files} files.")
        generate_workspace(root, memory_files=files)
        marker.write_text(str(files))
    ws = Workspace(root, load_config(root))
    memory = sorted(
        p.relative_to(root).as_posix()
        for folder in ("memory", "knowledge")
        for p in (root / folder).rglob("*.md")
        if p.parent.name != ".system" and not p.name[:4].isdigit()
    )
    return ws, memory


# ---------------------------------------------------------------- needles


def _sections(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith("## ")]


def plant_needles(root: Path, memory: list[str], n: int, rng: random.Random) -> list[Needle]:
    """Put one fact into a middle section of n long files, once (a reused workspace keeps them)."""
    saved = root / NEEDLES
    if saved.is_file():
        return [Needle(**d) for d in json.loads(saved.read_text())]
    long_files = [p for p in memory if (root / p).stat().st_size > 2000]
    needles = []
    for path in rng.sample(long_files, len(long_files)):
        if len(needles) == n:
            break
        lines = (root / path).read_text("utf-8").split("\n")
        heads = _sections(lines)
        if len(heads) < 3:
            continue
        words = rng.sample(NEEDLE_BAND, 3)
        fact = f"Fact: the {words[0]} by the {words[1]} needs {words[2]} checked."
        end = heads[rng.randrange(1, len(heads) - 1) + 1] - 1
        while not lines[end].strip():
            end -= 1
        lines.insert(end + 1, fact)
        (root / path).write_text("\n".join(lines), "utf-8")
        asked = rng.sample(words, rng.choice((2, 3)))
        asked[0] += "" if asked[0].endswith("s") else "s"
        needles.append(Needle(path, end + 2, " ".join(asked)))
    saved.write_text(json.dumps([nd.__dict__ for nd in needles]))
    return needles


def _rr(ranked: list[bool]) -> float:
    return next((1 / (i + 1) for i, ok in enumerate(ranked) if ok), 0.0)


def mrr_chunked(index: SearchIndex, needles: list[Needle]) -> float:
    """Our ranking: the hit must name the needle's file and a line range holding its line."""
    scores = []
    for nd in needles:
        hits = index.search(nd.query, 10, refresh=False)
        scores.append(
            _rr([h.path == nd.path and h.start_line <= nd.line <= h.end_line for h in hits])
        )
    return statistics.fmean(scores)


def mrr_whole_files(root: Path, paths: list[str], needles: list[Needle], tmp: Path) -> float:
    """Plain BM25 over whole files, same tokenizer and quoting; the right file is a hit."""
    conn = sqlite3.connect(tmp / "baseline.db")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(path UNINDEXED, body, tokenize='porter unicode61')"
    )
    conn.executemany(
        "INSERT INTO f (path, body) VALUES (?, ?)",
        ((p, (root / p).read_text("utf-8")) for p in paths),
    )
    conn.commit()
    scores = []
    for nd in needles:
        terms = ['"' + word.replace('"', '""') + '"' for word in nd.query.split()]
        found = []
        for match in (" ".join(terms), " OR ".join(terms)):
            sql = "SELECT path FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10"
            found = [r[0] for r in conn.execute(sql, (match,))]
            if found:
                break
        scores.append(_rr([p == nd.path for p in found]))
    conn.close()
    return statistics.fmean(scores)


# ---------------------------------------------------------------- timing


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def _queries(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(CONTENT_WORDS, rng.choice((1, 2, 3)))) for _ in range(n)]


def _grep_cmd(root: Path, word: str) -> list[str]:
    """`grep -ril` over the workspace's markdown, its dot-folders (git, state) left out."""
    targets = sorted(str(p) for p in root.iterdir() if not p.name.startswith("."))
    return ["grep", "-rilF", "--include=*.md", "--exclude-dir=.*", "--", word, *targets]


def grep_times(root: Path, queries: list[str]) -> tuple[str, list[float]]:
    """One process per query, on its first word, as a user would run it; cache warmed first."""
    cmds = [_grep_cmd(root, q.split()[0]) for q in queries]
    subprocess.run(cmds[0], capture_output=True, check=False)
    times = [_time(lambda c=c: subprocess.run(c, capture_output=True, check=False)) for c in cmds]
    return cmds[0][0], times


def search_times(index: SearchIndex, queries: list[str], refresh: bool, rounds: int) -> list[float]:
    """Per-query median over `rounds`, so one hiccup does not pass for a slow query."""
    per_query = []
    for q in queries:
        runs = [_time(lambda q=q: index.search(q, 10, refresh=refresh)) for _ in range(rounds)]
        per_query.append(statistics.median(runs))
    return per_query


MCP_CALLS = 15  # get_context calls of each kind: ~0.1 s each on 10,000 memories


def mcp_times(
    ws: Workspace,
    queries: list[str],
    cpu: dict[str, list[float]] | None = None,
    calls: int = MCP_CALLS,
) -> dict[str, list[float]]:
    """Seconds per tool call through an in-process MCP client, as an agent calls them
    mid-conversation: one session, the first call of each tool (which builds or refreshes its
    index) left out; `search_memory` for every query, `get_context` with and without a topic.
    `cpu` gets the process's CPU seconds per call (every thread: a loaded machine stretches
    wall time, not this)."""
    import anyio
    from mcp import Client

    from crustacean.mcp_server import build_server

    todos = {
        "search_memory": [("search_memory", {"query": q, "limit": 10}) for q in queries],
        "get_context": [("get_context", {"audience": "main"})] * calls,
        "get_context, topic": [
            ("get_context", {"audience": "main", "topic": q}) for q in queries[:calls]
        ],
    }

    async def main() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {}
        async with Client(build_server(ws)) as client:
            for name, todo in todos.items():
                await client.call_tool(*todo[0])
                times[name] = []
                for tool, args in todo:
                    start, used = time.perf_counter(), time.process_time()
                    await client.call_tool(tool, args)
                    times[name].append(time.perf_counter() - start)
                    if cpu is not None:
                        cpu.setdefault(name, []).append(time.process_time() - used)
        return times

    return anyio.run(main)


def reindex_times(
    index: SearchIndex, root: Path, memory: list[str], rng: random.Random, rounds: int
) -> list[float]:
    """Change 10 files, then time `update()` picking up exactly those."""
    times = []
    for r in range(rounds):
        for path in rng.sample(memory, 10):
            with (root / path).open("a", encoding="utf-8") as f:
                f.write(f"\n- change {r}: {' '.join(rng.sample(CONTENT_WORDS, 5))}\n")
        times.append(_time(index.update))
    return times


TYPER = "`python -c 'import typer'`"
HOOK = "the SessionStart hook's whole command"


def cli_times(
    root: Path, queries: list[str], pycache: Path, semantic: bool = False
) -> dict[str, list[float]]:
    """Seconds per fresh process, as a user or Claude Code runs them: `crustacean search` end to
    end, one process per query, and (lexical only) the SessionStart hook's command and
    `python -c 'import typer'`, interleaved so drift hits all alike. The console script runs
    with its bytecode cached as an installed package has it (in `pycache`, whatever
    PYTHONDONTWRITEBYTECODE says); `semantic` switches the extra on. Two untimed rounds first
    write the bytecode, the indexes and, with the extra, the vectors."""
    exe = [str(Path(sys.executable).parent / "crustacean"), "-w", str(root)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"CRUSTACEAN_SEMANTIC": "1" if semantic else "0", "PYTHONPYCACHEPREFIX": str(pycache)}
    cmds: dict[str, Callable[[str], list[str]]] = {"search": lambda q: [*exe, "search", q]}
    if not semantic:
        cmds[HOOK] = lambda q: [*exe, "context", "--format", "claude-hook"]
        cmds[TYPER] = lambda q: [sys.executable, "-c", "import typer"]
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for i, q in enumerate([queries[0], queries[0], *queries]):
        for name, cmd in cmds.items():
            start = time.perf_counter()
            subprocess.run(cmd(q), capture_output=True, check=True, env=env)
            if i >= 2:
                times[name].append(time.perf_counter() - start)
    return times


def semantic_installed() -> bool:
    """Whether the semantic extra would load (checked in a child: this process has it off)."""
    code = "from crustacean.recall import semantic; raise SystemExit(semantic.load() is None)"
    env = {**os.environ, "CRUSTACEAN_SEMANTIC": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


def _count_rows(conn: sqlite3.Connection) -> int:
    """Rows of the index (lines, or chunks before line-level search)."""
    for table in ("search_lines", "search_chunks"):
        try:
            return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        except sqlite3.OperationalError:
            continue
    return 0


def _indexed(conn: sqlite3.Connection) -> list[str]:
    column = "lines" if _has(conn, "search_lines") else "chunks"
    return [p for (p,) in conn.execute(f"SELECT path FROM search_files WHERE {column} > 0")]


def _has(conn: sqlite3.Connection, table: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE name = ?"
    return conn.execute(sql, (table,)).fetchone() is not None


# ---------------------------------------------------------------- report


@dataclass
class Figures:
    """Every measurement of one run, in seconds (MRR aside)."""

    files: int = 0
    chunks: int = 0
    tool: str = "grep"
    builds: list[float] = field(default_factory=list)
    quick: list[float] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)
    check: list[float] = field(default_factory=list)
    mcp: dict[str, list[float]] = field(default_factory=dict)
    mcp_cpu: dict[str, list[float]] = field(default_factory=dict)
    cli: dict[str, list[float]] = field(default_factory=dict)
    cli_semantic: list[float] = field(default_factory=list)
    grep: list[float] = field(default_factory=list)
    reindex: list[float] = field(default_factory=list)
    mrr_ours: float = 0.0
    mrr_base: float = 0.0
    needles: int = 0
    queries: int = 30


def measure_mcp(root: Path, files: int, n_queries: int = 30, mcp_calls: int = MCP_CALLS) -> Figures:
    """The MCP tool calls and grep alone (`--mcp-only`), on the same workspace and queries."""
    rng = random.Random(7)
    ws, memory = _workspace(root, files)
    needles = plant_needles(root, memory, 30, rng)
    fig = Figures(needles=len(needles), queries=n_queries)
    with SearchIndex(ws) as index:
        index.update()
        queries = _queries(rng, n_queries)
    fig.mcp = mcp_times(ws, queries, fig.mcp_cpu, mcp_calls)
    fig.tool, fig.grep = grep_times(root, queries)
    return fig


def report_mcp(fig: Figures, memory_files: int) -> None:
    grep = statistics.median(fig.grep)
    print("| figure | median | p95 | baseline | ratio |")
    print("|---|---|---|---|---|")
    for name, times in fig.mcp.items():
        print(_latency_row(f"MCP {name}", times, grep, fig.tool))
    for name, times in fig.mcp_cpu.items():
        print(
            _row(
                f"MCP {name}: the process's CPU per call",
                _ms(statistics.median(times)),
                _ms(_p95(times)),
            )
        )
    rows = budgets(fig, memory_files)
    print("\n" + budget_table([r for r in rows if r["who"] == "an agent's MCP tool call"]))


def measure(
    root: Path, files: int, tmp: Path, n_queries: int = 30, mcp_calls: int = MCP_CALLS
) -> Figures:
    rng = random.Random(7)
    ws, memory = _workspace(root, files)
    needles = plant_needles(root, memory, 30, rng)
    fig = Figures(needles=len(needles), queries=n_queries)
    with SearchIndex(ws) as index:
        fig.builds = [_time(index.rebuild) for _ in range(2)]
        conn = index.db.conn
        fig.chunks = _count_rows(conn)
        indexed = _indexed(conn)
        fig.files = len(indexed)
        queries = _queries(rng, n_queries)
        fig.quick = search_times(index, queries, refresh=False, rounds=5)
        fig.fresh = search_times(index, queries, refresh=True, rounds=3)
        fig.check = [_time(index.update) for _ in range(5)]
        fig.mcp = mcp_times(ws, queries, fig.mcp_cpu, mcp_calls)
        fig.cli = cli_times(root, queries[: n_queries * 2 // 3], tmp / "pycache")
        fig.tool, fig.grep = grep_times(root, queries)
        fig.reindex = reindex_times(index, root, memory, rng, rounds=5)
        fig.mrr_ours = mrr_chunked(index, needles)
    if semantic_installed():  # last: its vectors stay in the index of a reused --dir
        fig.cli_semantic = cli_times(
            root, queries[: n_queries // 3], tmp / "pycache", semantic=True
        )["search"]
    fig.mrr_base = mrr_whole_files(root, indexed, needles, tmp)
    return fig


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _row(figure: str, median: str, p95: str = "", baseline: str = "", ratio: str = "") -> str:
    return f"| {figure} | {median} | {p95} | {baseline} | {ratio} |"


def _latency_row(name: str, times: list[float], grep: float, tool: str) -> str:
    med, p95 = statistics.median(times), _p95(times)
    base = f"`{tool} -ril`, one process per query"
    row(
        name,
        med * 1000,
        p95 * 1000,
        grep * 1000,
        base,
        ratio=p95 / grep,
        ratio_label="x (p95 / baseline)",
    )
    return _row(
        name, _ms(med), _ms(p95), f"{tool} -il {_ms(grep)}", f"p95/{tool} = {p95 / grep:.3f}"
    )


def report(fig: Figures, memory_files: int) -> None:
    """Print the bench's own table, and the same figures as rows for `python -m bench`."""
    rebuild, grep = statistics.median(fig.builds), statistics.median(fig.grep)
    reindex, check = statistics.median(fig.reindex), statistics.median(fig.check)
    data_size(f"{memory_files:,} memory files + 3 years of daily logs ({fig.files:,} indexed)")
    print(
        f"\n{memory_files} memory files + daily logs: {fig.files} indexed files, {fig.chunks} "
        f"index rows; SQLite {sqlite3.sqlite_version}; Python {platform.python_version()}; "
        f"baseline tool: {fig.tool}; {fig.queries} queries; {fig.needles} needles.\n"
    )
    print("| figure | median | p95 | baseline | ratio |")
    print("|---|---|---|---|---|")
    row("full index build (`index`)", rebuild, unit="s")
    print(_row("full index build (`index`)", f"{rebuild:.2f} s"))
    print(_latency_row("search, query only", fig.quick, grep, fig.tool))
    print(_latency_row("search with freshness check (default)", fig.fresh, grep, fig.tool))
    row("freshness check alone (no change)", check * 1000, _p95(fig.check) * 1000)
    print(_row("freshness check alone (no change)", _ms(check), _ms(_p95(fig.check))))
    name = "MCP search_memory in a conversation (refreshes after its writes, else every 5 s)"
    print(_latency_row(name, fig.mcp["search_memory"], grep, fig.tool))
    print(_latency_row("MCP get_context (audience main)", fig.mcp["get_context"], grep, fig.tool))
    name = "MCP get_context (audience main, a topic)"
    print(_latency_row(name, fig.mcp["get_context, topic"], grep, fig.tool))
    name = "`crustacean search` end to end (one process)"
    print(_latency_row(name, fig.cli["search"], grep, fig.tool))
    if fig.cli_semantic:
        name = "`crustacean search` end to end, semantic extra on (one process)"
        print(_latency_row(name, fig.cli_semantic, grep, fig.tool))
    name = "re-index after 10 changed files"
    row(name, reindex * 1000, _p95(fig.reindex) * 1000, rebuild * 1000, "full rebuild")
    print(
        _row(
            name,
            _ms(reindex),
            _ms(_p95(fig.reindex)),
            f"rebuild {rebuild:.2f} s",
            f"{reindex / rebuild:.2%} of rebuild",
        )
    )
    name = "needle MRR@10: chunked+title vs whole-file BM25"
    row(name, fig.mrr_ours, None, fig.mrr_base, "whole-file BM25", unit="MRR")
    ratio = f"{fig.mrr_ours / fig.mrr_base:.2f}×" if fig.mrr_base else "n/a"
    print(_row(name, f"{fig.mrr_ours:.3f}", "", f"{fig.mrr_base:.3f}", ratio))
    print("\n" + budget_table(budgets(fig, memory_files)))


def budgets(fig: Figures, memory_files: int) -> list[dict[str, Any]]:
    """This bench's rows of bench/BUDGETS.md, in ms, against baselines of the same run."""
    grep = statistics.median(fig.grep) * 1000
    on = f"{memory_files:,} memories"
    grep_name = "`grep -ril`, one process per query"
    rows = (
        []
        if not fig.cli
        else [
            budget(
                "Claude Code at every session start",
                f"{HOOK} (`context --format claude-hook`), {on}",
                statistics.median(fig.cli[HOOK]) * 1000,
                statistics.median(fig.cli[TYPER]) * 1000,
                TYPER,
                3,
            ),
            budget(
                "a person or an agent at a shell",
                f"`crustacean search` end to end, {on}",
                _p95(fig.cli["search"]) * 1000,
                statistics.median(fig.cli[TYPER]) * 1000,
                TYPER,
                3,
                stat="p95",
            ),
        ]
    )
    for name, times in fig.mcp.items():
        what = f"MCP {name.replace(', topic', ' with a topic')}, {on}"
        rows.append(
            budget(
                "an agent's MCP tool call",
                what,
                _p95(times) * 1000,
                grep,
                grep_name,
                0.2,
                stat="p95",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000, help="memory files to generate")
    parser.add_argument("--dir", type=Path, help="generate here, or reuse a bench workspace here")
    parser.add_argument("--queries", type=int, default=30, help="queries (2/3 of them by the CLI)")
    parser.add_argument("--mcp-only", action="store_true", help="only the MCP calls and grep")
    parser.add_argument(
        "--mcp-calls", type=int, default=MCP_CALLS, help="MCP get_context calls of each kind"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crustacean-search-bench-") as tmp_name:
        tmp = Path(tmp_name)
        isolate(tmp)
        os.environ["CRUSTACEAN_SEMANTIC"] = "0"  # the default install: lexical search
        root = (args.dir or tmp / "ws").resolve()
        if args.mcp_only:
            report_mcp(measure_mcp(root, args.files, args.queries, args.mcp_calls), args.files)
        else:
            report(measure(root, args.files, tmp, args.queries, args.mcp_calls), args.files)


if __name__ == "__main__":
    main()
