"""Benchmark the credential scan that runs on every write and every transcript line.

Run: `.venv/bin/python bench/secrets_bench.py [--lines N] [--rounds R]`. It makes N lines of
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

from bench.common import count, data_size, p95, row
from bench.generate import WORDS
from crustacean import secrets

SECRETS = (
    "sk-ant-" + "api03-" + "Q7" * 20,
    "ghp_" + "aB3" * 12,
    "AKIA" + "IOSFODNN7ABCDEFG",
    "ak_" + "t-F9AbvfZHU7SUrqAGNn",
    "7012345678:" + "AAE" + "k3Jd9sLq2Wm8Xn5Bv7Cz1Rt4Yp6qW9eR",
    "redis://:" + "s3cretPw9" + "@cache:6379",
)
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
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
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
