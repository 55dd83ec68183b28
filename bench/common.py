"""What every benchmark shares: an isolated environment, and rows for `python -m bench`."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

ROWS_ENV = "CRUSTACEAN_BENCH_ROWS"  # `python -m bench` sets it: one JSON line per figure goes here


def isolate(tmp: Path) -> None:
    """No user or system git config, no user crustacean config: both sides run the same git."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    os.environ.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "CRUSTACEAN_CONFIG_DIR": str(tmp / "userconfig"),
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@localhost",
        }
    )
    for var in [v for v in os.environ if v.startswith("CRUSTACEAN_") and "__" in v]:
        del os.environ[var]
    os.environ.pop("CRUSTACEAN_WORKSPACE", None)


def p95(samples: list[float]) -> float:
    """The 95th percentile, interpolated, so a handful of samples still gives a value."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[94]


def count(n: int, word: str) -> str:
    """`1 round`, `7 rounds`: sizes are stated in words people read."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _emit(record: dict[str, object]) -> None:
    path = os.environ.get(ROWS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def data_size(text: str) -> None:
    """State the data a bench ran on, as measured, for the header of the combined table."""
    _emit({"size": text})


def row(
    figure: str,
    median: float,
    p95: float | None = None,
    baseline: float | None = None,
    baseline_name: str = "",
    unit: str = "ms",
    ratio: float | None = None,
    ratio_label: str = "x",
    note: str = "",
) -> None:
    """One figure for the combined table (a no-op when the bench runs alone, which prints its
    own table); `baseline` is in `unit` too, and `ratio` defaults to median / baseline."""
    if ratio is None and baseline:
        ratio = median / baseline
    _emit(
        {
            "figure": figure,
            "median": median,
            "p95": p95,
            "baseline": baseline,
            "baseline_name": baseline_name,
            "unit": unit,
            "ratio": ratio,
            "ratio_label": ratio_label,
            "note": note,
        }
    )
