"""Benchmark of what `search` and `context --topic` find within a character budget.

Run it with `python bench/recall_bench.py [--sessions N] [--seed S]` (the project's venv). It
initializes a workspace in a temp folder and writes generated conversations into it as daily logs
(bench/conversations.py: four pairs of people, N sessions each, planted facts and questions of six
kinds: single, spread, when, reworded, answer, paraphrase). For each question it walks the ranked
hits of `SearchIndex.search`, counting each line's characters (line + newline), and stops at the
budget; a question scores "some" when one of its evidence lines was reached and "all" when every one
was, at 1,000, 2,000 and 4,000 characters and in the top 10 hits with no budget. The baseline, run
on the same files in the same process, is one-line BM25: every line of every file search indexes is
its own FTS5 row (same porter tokenizer), queried by the question's words ORed, one line a hit. It
also reports the size of the hits (lines), the share of questions whose evidence lines `context
--topic QUESTION` puts within its first 8,000 characters, the same share when `--budget-chars 8000`
bounds the output (where the code takes it: its length is reported), and the mean query time. The
main table is lexical search (the default install); when the `semantic` extra is installed the same
questions run again with it, and a second table shows both. When the `rerank` extra is installed
too (and CRUSTACEAN_RERANK is not 0), they run again on the same workspaces with its encoder at
each candidate count and weight of RERANK_TOPS x RERANK_WEIGHTS (and session 9's rule, the
best lines with copies of one text included), and a third table shows every variant, with what
the encoder costs: its load, a query with nothing kept (wall and CPU), and a CLI search's
start-up with it on and off. No language model anywhere; the same seed gives the
same figures.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from bench.common import data_size, isolate, row
from bench.conversations import KINDS, Bench, Question, generate
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.recall import rerank, semantic
from crustacean.recall.search import SearchIndex, scan_markdown
from crustacean.workspace import Workspace

BUDGETS = (1000, 2000, 4000)
CONTEXT_CHARS = 8000
DEPTH = 200  # hits asked for: more than any budget here can hold
_WORDS = re.compile(r"[^\W_]+")

Span = tuple[str, int, int]  # path, first line, last line (1-based, inclusive)


@dataclass
class Scores:
    """Per question kind, each measure's list of 0/1 outcomes."""

    got: dict[tuple[str, str], list[bool]] = field(default_factory=dict)

    def add(self, kind: str, measure: str, ok: bool) -> None:
        for k in (kind, "all kinds"):
            self.got.setdefault((k, measure), []).append(ok)

    def share(self, kind: str, measure: str) -> float:
        values = self.got.get((kind, measure), [])
        return sum(values) / len(values) if values else 0.0


def measures() -> list[str]:
    out = []
    for b in BUDGETS:
        out += [f"some within {b:,}", f"all within {b:,}"]
    return [*out, "some in top 10", "all in top 10"]


def walk(spans: Iterable[Span], lines: Callable[[str], list[str]], budget: int) -> set[tuple]:
    """The (path, line) pairs reached before the budget runs out, in rank order."""
    reached: set[tuple[str, int]] = set()
    used = 0
    for path, first, last in spans:
        text = lines(path)
        for n in range(first, last + 1):
            cost = len(text[n - 1]) + 1 if n <= len(text) else 1
            if used + cost > budget:
                return reached
            used += cost
            reached.add((path, n))
    return reached


def score(
    scores: Scores, q: Question, spans: list[Span], lines: Callable[[str], list[str]]
) -> None:
    """Add one question's outcomes at every budget and in the top 10."""
    want = set(q.evidence)
    top = {(p, n) for p, a, b in spans[:10] for n in range(a, b + 1)}
    outcomes = {"top 10": top}
    for b in BUDGETS:
        outcomes[f"{b:,}"] = walk(spans, lines, b)
    for where, reached in outcomes.items():
        prep = "in" if where == "top 10" else "within"
        scores.add(q.kind, f"some {prep} {where}", bool(want & reached))
        scores.add(q.kind, f"all {prep} {where}", want <= reached)


# ---------------------------------------------------------------- the two searches


def ours(index: SearchIndex, bench: Bench) -> Callable[[str], list[Span]]:
    """`SearchIndex.search` as the CLI and MCP call it, given `now` when it takes one."""
    takes_now = "now" in inspect.signature(index.search).parameters
    extra = {"now": bench.now} if takes_now else {}

    def run(query: str) -> list[Span]:
        hits = index.search(query, DEPTH, refresh=False, **extra)
        return [(h.path, h.start_line, h.end_line) for h in hits]

    return run


def one_line_bm25(root: Path) -> Callable[[str], list[Span]]:
    """Every line of every indexable file as its own FTS5 row; the query's words ORed."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE l USING fts5(path UNINDEXED, line UNINDEXED, body, "
        "tokenize='porter unicode61')"
    )
    found, _ = scan_markdown(root)
    for rel in sorted(found):
        text = (root / rel).read_text("utf-8").split("\n")
        conn.executemany(
            "INSERT INTO l (path, line, body) VALUES (?, ?, ?)",
            [(rel, n + 1, line) for n, line in enumerate(text) if line.strip()],
        )
    conn.commit()

    def run(query: str) -> list[Span]:
        terms = sorted({w.lower() for w in _WORDS.findall(query)})
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        sql = "SELECT path, line FROM l WHERE l MATCH ? ORDER BY bm25(l) LIMIT ?"
        return [(p, int(n), int(n)) for p, n in conn.execute(sql, (match, DEPTH))]

    return run


def context_share(
    ws: Workspace,
    bench: Bench,
    lines: Callable[[str], list[str]],
    sizes: list[int],
    whole: bool = True,
) -> Scores:
    """Whether `context --topic QUESTION` holds the evidence lines in its first 8,000 chars
    ("some"/"all", unless not `whole`), and in its whole output asked with `--budget-chars
    8000` ("some bounded", "all bounded"; each output's length goes to `sizes`)."""
    from crustacean.recall.context import ContextRequest, build_context

    out = Scores()
    for q in bench.questions:
        bounded = ContextRequest("main", q.text, budget_chars=CONTEXT_CHARS)
        fitted = build_context(ws, bounded, bench.now).to_markdown()
        sizes.append(len(fitted))
        outputs = [(" bounded", fitted)]
        if whole:
            text = build_context(ws, ContextRequest("main", q.text), bench.now).to_markdown()
            outputs.insert(0, ("", text[:CONTEXT_CHARS]))
        for name, text in outputs:
            have = [lines(p)[n - 1].strip() in text for p, n in q.evidence]
            out.add(q.kind, "some" + name, any(have))
            out.add(q.kind, "all" + name, all(have))
    return out


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    ours: Scores
    base: Scores
    context: Scores
    hit_lines: list[int]
    times: list[float]
    context_sizes: list[int]
    questions: int
    files: int
    chars: int


def first_of_each_kind(questions: list[Question], per_kind: int | None) -> list[Question]:
    """The first `per_kind` questions of each kind, in their order (all of them for None): a
    quick run asks every kind, just fewer of each."""
    if per_kind is None:
        return questions
    seen: dict[str, int] = {}
    kept = []
    for q in questions:
        seen[q.kind] = seen.get(q.kind, 0) + 1
        if seen[q.kind] <= per_kind:
            kept.append(q)
    return kept


@dataclass
class Built:
    """A generated workspace, indexed, and its questions: measured as it is, or with a variant."""

    ws: Workspace
    bench: Bench
    lines: Callable[[str], list[str]]
    dense: bool


def build(
    root: Path,
    tmp: Path,
    sessions: int,
    seed: int,
    dense: bool = False,
    per_kind: int | None = None,
) -> Built:
    _switch(dense, False)
    init_workspace(root, detect=False, home=tmp / "home")
    bench = generate(root, seed=seed, sessions=sessions)
    bench.questions = first_of_each_kind(bench.questions, per_kind)
    ws = Workspace(root, load_config(root))
    with SearchIndex(ws) as index:
        index.rebuild()
    return Built(ws, bench, line_reader(root), dense)


def line_reader(
    root: Path, known: dict[str, list[str]] | None = None
) -> Callable[[str], list[str]]:
    """A file's lines by its workspace path, each file read once (`known`: already in hand)."""
    cache = dict(known or {})

    def lines(path: str) -> list[str]:
        if path not in cache:
            cache[path] = (root / path).read_text("utf-8").split("\n")
        return cache[path]

    return lines


def _switch(dense: bool, reranked: bool) -> None:
    """The semantic and rerank extras on or off for what follows (both load once)."""
    os.environ[semantic.ENV] = "1" if dense else "0"
    os.environ[rerank.ENV] = "1" if reranked else "0"
    semantic.forget()


def run(built: Built, reranked: bool = False) -> Run:
    """Every question through search and context, as the extras are switched."""
    _switch(built.dense, reranked)
    bench, lines = built.bench, built.lines
    mine, base = Scores(), Scores()
    hit_lines: list[int] = []
    times: list[float] = []
    baseline = one_line_bm25(built.ws.root)
    with SearchIndex(built.ws) as index:
        search = ours(index, bench)
        for q in bench.questions:
            start = time.perf_counter()
            spans = search(q.text)
            times.append(time.perf_counter() - start)
            hit_lines += [b - a + 1 for _, a, b in spans[:10]]
            score(mine, q, spans, lines)
            score(base, q, baseline(q.text), lines)
    sizes: list[int] = []
    context = context_share(built.ws, bench, lines, sizes)
    chars = sum(len(line) + 1 for v in bench.files.values() for line in v)
    questions, files = len(bench.questions), len(bench.files)
    return Run(mine, base, context, hit_lines, times, sizes, questions, files, chars)


def measure(root: Path, tmp: Path, sessions: int, seed: int, dense: bool = False) -> Run:
    return run(build(root, tmp, sessions, seed, dense))


def _pct(values: list[int], q: int) -> float:
    if len(values) < 2:
        return float(values[0]) if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def search_table(mine: Scores, base: Scores, kinds: list[str]) -> None:
    """Each measure a row, each kind (with its count of questions) a column: ours / BM25's."""
    counts = {k: len(mine.got.get((k, "some in top 10"), [])) for k in kinds}
    print("| measure | " + " | ".join(f"{k} ({counts[k]})" for k in kinds) + " |")
    print("|---|" + "--:|" * len(kinds))
    for m in measures():
        cells = [f"{mine.share(k, m):.3f} / {base.share(k, m):.3f}" for k in kinds]
        print(f"| {m} | " + " | ".join(cells) + " |")


def report(run: Run, sessions: int) -> None:
    """The bench's own table, and the headline figures as rows for `python -m bench`."""
    data_size(
        f"{run.files} daily logs ({run.chars:,} chars), 4 pairs x {sessions} sessions, "
        f"{run.questions} questions"
    )
    kinds = [*KINDS, "all kinds"]
    print(
        f"\n{run.questions} questions over {run.files} daily logs ({run.chars:,} chars); "
        "each cell: crustacean search / one-line BM25.\n"
    )
    search_table(run.ours, run.base, kinds)
    for m in ("some", "all"):
        cells = [f"{run.context.share(k, m):.3f}" for k in kinds]
        print(f"| context --topic, {m} within {CONTEXT_CHARS:,} | " + " | ".join(cells) + " |")
        cells = [f"{run.context.share(k, m + ' bounded'):.3f}" for k in kinds]
        print(
            f"| context --topic --budget-chars {CONTEXT_CHARS:,}, {m} | " + " | ".join(cells) + " |"
        )
    sizes = run.context_sizes or [0]
    med_size = statistics.median(sizes)
    print(
        f"\n`context --budget-chars {CONTEXT_CHARS:,}` output: median {med_size:,.0f} chars, "
        f"max {max(sizes):,}."
    )
    med, p95 = statistics.median(run.hit_lines or [0]), _pct(run.hit_lines, 95)
    mean_ms = statistics.fmean(run.times) * 1000
    print(f"\nHit size in the top 10: median {med:.0f} lines, p95 {p95:.0f}.")
    p95_ms = _pct(run.times, 95) * 1000
    print(f"Query time ({DEPTH} hits): mean {mean_ms:.1f} ms, p95 {p95_ms:.1f} ms.")
    for m in ("some within 1,000", "some within 2,000", "all within 2,000", "all within 4,000"):
        for k in ("all kinds", "answer", "reworded"):
            name = f"recall, {m} chars ({k})"
            ours_share, base_share = run.ours.share(k, m), run.base.share(k, m)
            base = base_share or None  # one-line BM25 finds no answer: no ratio to show
            row(name, ours_share, None, base, "one-line BM25" if base else "", unit="share")
    row(
        f"recall, context --topic: some evidence within {CONTEXT_CHARS:,} chars",
        run.context.share("all kinds", "some"),
        unit="share",
    )
    row(
        f"recall, context --topic --budget-chars {CONTEXT_CHARS:,}: some evidence in the output",
        run.context.share("all kinds", "some bounded"),
        unit="share",
    )


def report_semantic(lexical: Run, dense: Run) -> None:
    """Lexical against lexical + the semantic extra, per kind, at each budget."""
    kinds = [*KINDS, "all kinds"]
    print("\nWith the semantic extra (each cell: lexical / lexical + semantic):\n")
    print("| measure | " + " | ".join(kinds) + " |")
    print("|---|" + "--:|" * len(kinds))
    for m in measures()[:6]:
        cells = [f"{lexical.ours.share(k, m):.3f} / {dense.ours.share(k, m):.3f}" for k in kinds]
        print(f"| {m} | " + " | ".join(cells) + " |")
    m = "some within 2,000"
    name = f"recall with the semantic extra, {m} chars (reworded)"
    share = dense.ours.share("reworded", m), lexical.ours.share("reworded", m)
    row(name, share[0], None, share[1], "lexical", unit="share")


RERANK_TOPS = (30, 60)  # candidate lines reranked (each widened by the line after it)
RERANK_WEIGHTS = (1.0,)  # of the encoder's cosine (0.5 and 2.0: bench/RESULTS.md, session 9)
TIMED = 12  # questions timed with nothing kept, for the per-query cost
STARTS = 2  # CLI searches timed, each way
RERANK_KINDS = ("reworded", "paraphrase", "all kinds")
RERANK_MEASURES = (
    "some within 1,000",
    "some within 2,000",
    "all within 2,000",
    "context bounded some",
    "context bounded all",
)


def _cell(run: Run, kind: str, measure: str) -> float:
    if measure.startswith("context bounded"):
        return run.context.share(kind, measure.split()[-1] + " bounded")
    return run.ours.share(kind, measure)


def rerank_cost(built: Built, tops: Iterable[int]) -> dict[int, tuple[float, float, float]]:
    """Per-query cost of a search with the rerank extra, nothing kept from an earlier query:
    (mean wall ms, p95 wall ms, mean CPU ms of the process) over the first TIMED questions,
    for each candidate count. CPU time is the figure that holds on a machine others share."""
    _switch(built.dense, True)
    model = rerank.load()
    assert model is not None
    out: dict[int, tuple[float, float, float]] = {}
    saved = rerank.TOP
    with SearchIndex(built.ws) as index:
        search = ours(index, built.bench)
        for top in tops:
            rerank.TOP = top
            wall, cpu = [], []
            for q in built.bench.questions[:TIMED]:
                model.forget_texts()
                start, start_cpu = time.perf_counter(), time.process_time()
                search(q.text)
                wall.append((time.perf_counter() - start) * 1000)
                cpu.append((time.process_time() - start_cpu) * 1000)
            out[top] = (
                statistics.fmean(wall),
                _pct([round(t) for t in wall], 95),
                statistics.fmean(cpu),
            )
    rerank.TOP = saved
    return out


def cli_startup(built: Built) -> dict[str, float]:
    """Wall seconds of one `crustacean search` in a fresh process, rerank off and on (the
    semantic extra on in both): the model's load is what a shell search pays."""
    out = {}
    question = built.bench.questions[0].text
    cmd = [sys.executable, "-m", "crustacean", "-w", str(built.ws.root), "search", question]
    for name, value in (("off", "0"), ("on", "1")):
        env = {**os.environ, semantic.ENV: "1", rerank.ENV: value}
        times = []
        for _ in range(STARTS):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times)
    return out


def _variant_row(name: str, r: Run) -> None:
    cells = [f"{_cell(r, k, m):.3f}" for m in RERANK_MEASURES for k in RERANK_KINDS]
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def rerank_runs(lexical: Built, dense: Built, before: dict[str, Run]) -> None:
    """The rerank extra's variants on the same workspaces (the encoder loaded once), after
    the runs `before` it (lexical, semantic): each row printed as soon as it is measured (the
    first variant embeds what the others reuse), then what the encoder costs."""
    _switch(True, True)
    start = time.perf_counter()
    if rerank.load() is None:
        print("\n(the rerank extra is not installed: no rerank figures)")
        return
    load_s = time.perf_counter() - start
    rerank.KEEP_TEXTS = 200_000  # every variant embeds the same lines: once (same figures)
    print(
        "\nRerank with a contextual encoder (all-MiniLM-L6-v2, the rerank extra): each row a "
        "variant, each cell a share. context bounded = `context --topic "
        f"--budget-chars {CONTEXT_CHARS:,}`, the whole output.\n"
    )
    heads = [f"{m} ({k})" for m in RERANK_MEASURES for k in RERANK_KINDS]
    print("| variant | " + " | ".join(heads) + " |")
    print("|---|" + "--:|" * len(heads))
    for name, r in before.items():
        _variant_row(name, r)
    kept = rerank.TOP, rerank.WEIGHT
    topic_top = rerank.TOPIC_TOP
    grid = [(t, w) for t in RERANK_TOPS for w in RERANK_WEIGHTS if (t, w) != kept]
    for top, weight in [kept, *grid]:
        # a topic reranks twice a search's lines (rerank.TOPIC_TOP): so in every variant
        rerank.TOP, rerank.WEIGHT, rerank.TOPIC_TOP = top, weight, 2 * top
        name = (
            f"semantic + rerank {top} lines of distinct text ({2 * top} for a topic), "
            f"weight {weight}"
        )
        runs = run(dense, reranked=True)
        _variant_row(name, runs)
        if (top, weight) == kept:
            for m in ("some within 2,000", "context bounded some"):
                label = f"recall with the rerank extra, {m} (all kinds)"
                row(label, _cell(runs, "all kinds", m), unit="share")
    rerank.TOP, rerank.WEIGHT = kept
    rerank.TOPIC_TOP = topic_top
    distinct, copies_last = rerank.distinct, semantic.copies_last
    rerank.distinct = lambda lines, top: [r for r, _ in lines][:top]
    semantic.copies_last = lambda ranked, keys: list(ranked)
    try:  # session 9's rules, side by side: the best lines, copies of one text included
        name = f"semantic + rerank {kept[0]}, copies included (session 9), weight {kept[1]}"
        _variant_row(name, run(dense, reranked=True))
    finally:
        rerank.distinct, semantic.copies_last = distinct, copies_last
    base_ms = statistics.fmean(before["semantic"].times) * 1000
    print(f"\nModel load in this process (imports + weights, once per process): {load_s:.1f} s.")
    for top, (mean, p95, cpu) in rerank_cost(dense, RERANK_TOPS).items():
        print(
            f"Search with rerank of {top} lines (+ the line after each), nothing kept, first "
            f"{TIMED} questions: wall mean {mean:.0f} ms, p95 {p95:.0f} ms; CPU {cpu:.0f} ms a "
            f"query (semantic alone: {base_ms:.1f} ms wall).",
            flush=True,
        )
    startup = cli_startup(dense)
    print(
        f"One `crustacean search` in a fresh process (median of {STARTS}, semantic on): "
        f"{startup['off']:.1f} s with CRUSTACEAN_RERANK=0, {startup['on']:.1f} s with the rerank.",
        flush=True,
    )
    name = f"lexical + rerank {rerank.TOP}, weight {rerank.WEIGHT}"
    print("\n| variant | " + " | ".join(heads) + " |")
    print("|---|" + "--:|" * len(heads))
    _variant_row(name, run(lexical, reranked=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40, help="sessions per pair of people")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lexical", action="store_true", help="skip the semantic extra's run")
    parser.add_argument(
        "--questions", type=int, help="ask only this many questions of each kind (a quick run)"
    )
    parser.add_argument("--no-rerank", action="store_true", help="skip the rerank extra's runs")
    args = parser.parse_args()
    reranks = not args.no_rerank and rerank.wanted()  # CRUSTACEAN_RERANK=0 (the tests) skips it
    with tempfile.TemporaryDirectory(prefix="crustacean-recall-bench-") as tmp_name:
        tmp = Path(tmp_name)
        isolate(tmp)
        words = build(tmp / "ws", tmp, args.sessions, args.seed, per_kind=args.questions)
        lexical = run(words)
        report(lexical, args.sessions)
        os.environ[semantic.ENV] = "1"
        semantic.forget()
        if not args.lexical and semantic.load() is not None:
            dense_ws = build(
                tmp / "ws-semantic", tmp, args.sessions, args.seed, True, args.questions
            )
            dense = run(dense_ws)
            report_semantic(lexical, dense)
            if reranks:
                rerank_runs(words, dense_ws, {"lexical": lexical, "semantic": dense})


if __name__ == "__main__":
    main()
