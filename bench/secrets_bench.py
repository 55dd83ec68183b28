"""Benchmark the credential scan that runs on every write and every transcript line.

Run: `.venv/bin/python bench/secrets_bench.py [--lines N] [--rounds R] [--samples S]`.

First, what it catches: S fresh values (default 1,000) of every form in `bench/secrets_corpus.py`
(each provider's published format, generated, never a real key), reported per kind as detected,
missed (not found, or a value left in the redacted text) and found as another kind; and S of
every ordinary text (digests, commit ids, UUIDs, base64 images, code, prose), reported as false
positives. `find_secrets` refuses a write and `redact` cleans what a model is sent from the same
spans, so one table is both.

Then its speed. It makes N lines of
note-like prose (default 50,000, about 3 MB): most plain, some with the words that wake a
detector ("token", "password", "key", URLs), a few with a real-looking credential. It times
`find_secrets` line by line (the pre-filter decides which detectors run) against the baseline,
measured in the same run, of every detector (detect-secrets' and the project's own) on every line:
the ratio is what the pre-filter saves.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from collections import Counter

from bench.common import count, data_size, p95, row
from bench.generate import WORDS
from bench.secrets_corpus import MAKERS, ORDINARY, credentials
from crustacean import secrets

SECRETS = tuple(c.text for c in credentials(random.Random(1)) if "\n" not in c.text)[:12]
HINTED = (
    "the token budget is 4000",
    "reset the password in settings",
    "see https://docs.internal/page",
    "the key point of the meeting",
    "api key rotation every 90 days",
)


def corpus(n: int) -> list[str]:
    """Note-like lines: 90% plain prose, 9% with detector words, 1% with a credential."""
    rng = random.Random(0)
    lines = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS[:3000]) for _ in range(rng.randint(6, 18)))
        if i % 100 == 0:
            words += " " + SECRETS[(i // 100) % len(SECRETS)]
        elif i % 11 == 0:
            words += ", " + HINTED[i % len(HINTED)]
        lines.append(f"- [{i % 24:02d}:00] {words}")
    return lines


def every_detector(text: str) -> int:
    """The scan without its pre-filter: each rule runs on each text."""
    found = 0
    for rule in secrets._RULES:
        found += sum(1 for _ in rule.find(text))
    return found + sum(1 for _ in secrets._table_secrets(text))


def recall(samples: int) -> int:
    """Print detected / missed / other kind per credential kind and false positives per
    ordinary text; return how many were missed or falsely flagged."""
    rng = random.Random(33)
    seen: Counter[str] = Counter()
    found: Counter[str] = Counter()
    other: Counter[str] = Counter()
    for make in MAKERS:
        for _ in range(samples):
            case = make(rng)
            kinds = [f.kind for f in secrets.find_secrets(case.text)]
            seen[case.kind] += 1
            if kinds and case.value not in secrets.redact(case.text):
                found[case.kind] += 1
                other[case.kind] += kinds[0] != case.kind
    print("| kind | samples | detected | missed | found as another kind |")
    print("|---|---:|---:|---:|---:|")
    for kind in seen:
        missed = seen[kind] - found[kind]
        print(f"| {kind} | {seen[kind]} | {found[kind]} | {missed} | {other[kind]} |")
    total, hits = sum(seen.values()), sum(found.values())
    print(
        f"| **all {len(seen)} kinds** | {total} | {hits} | {total - hits} | {sum(other.values())} |"
    )
    print("\n| ordinary text | samples | false positives |\n|---|---:|---:|")
    false = 0
    for name, make_text in ORDINARY.items():
        flagged = sum(1 for _ in range(samples) if secrets.find_secrets(make_text(rng)))
        false += flagged
        print(f"| {name} | {samples} | {flagged} |")
    print()
    return total - hits + false


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=1_000, help="values per form (recall)")
    args = parser.parse_args()
    recall(args.samples)
    lines = corpus(args.lines)
    mb = sum(len(line) + 1 for line in lines) / 1e6
    secrets.find_secrets(SECRETS[0])  # load detect-secrets once, outside the timing

    def timed(fn: object) -> list[float]:
        out = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for line in lines:
                fn(line)  # type: ignore[operator]
            out.append(time.perf_counter() - start)
        return out

    fast = timed(secrets.find_secrets)
    base = timed(every_detector)
    hits = sum(1 for line in lines if secrets.find_secrets(line))
    m, b = statistics.median(fast), statistics.median(base)
    data_size(f"{count(args.lines, 'line')} ({mb:.1f} MB), {count(args.rounds, 'round')}")
    row(
        "find_secrets, line by line",
        m * 1000,
        p95(fast) * 1000,
        b * 1000,
        "every detector on every line (no pre-filter)",
        note=f"{mb / m:.0f} MB/s; {hits} lines flagged",
    )
    print(f"{args.lines:,} lines, {mb:.1f} MB; {hits} lines flagged; {args.rounds} rounds\n")
    print("| figure | median ms | p95 ms | baseline (no pre-filter) ms | ratio | MB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| find_secrets, line by line | {m * 1000:.0f} | {p95(fast) * 1000:.0f} | "
        f"{b * 1000:.0f} | {m / b:.2f}x | {mb / m:.0f} |"
    )


if __name__ == "__main__":
    main()
