"""What every benchmark shares: an isolated environment, and rows for `python -m bench`."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

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


BUDGET_HEADER = (
    "| who waits | figure | value | baseline | ratio | budget | ok |\n|---|---|--:|---|--:|--:|---|"
)


def budget_line(record: dict[str, Any]) -> str:
    """One budget row in the format every bench and the summary of `python -m bench` print:
    who waits, the figure (and the statistic), its value, the baseline measured in the same run,
    the ratio, the budget, and ok or MISS."""
    unit = record["unit"]
    cells = [
        str(record["who"]),
        f"{record['figure']} ({record['stat']})",
        f"{num(record['value'])} {unit}",
        f"{record['baseline_name']}: {num(record['baseline'])} {unit}",
        f"{record['ratio']:.2f}x",
        f"≤ {record['limit']:g}x" + (f", {record['also']}" if record["also"] else ""),
        "ok" if record["ok"] else "MISS",
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def num(value: float) -> str:
    """Three significant figures or so, without scientific notation for big values."""
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def budget(
    who: str,
    figure: str,
    value: float,
    baseline: float,
    baseline_name: str,
    limit: float,
    *,
    stat: str = "median",
    unit: str = "ms",
    also: str = "",
    also_ok: bool = True,
) -> dict[str, Any]:
    """One row of bench/BUDGETS.md, checked: `value` (the figure's `stat`) against `limit` times
    `baseline` (its median, measured in the same run, in `unit` too), plus an `also` condition
    that must hold (`0 tokens`). Recorded for `python -m bench`'s summary and returned, so the
    bench prints its rows with `budget_table`."""
    ratio = value / baseline
    record: dict[str, Any] = {
        "who": who,
        "figure": figure,
        "stat": stat,
        "value": value,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "unit": unit,
        "ratio": ratio,
        "limit": limit,
        "also": also,
        "ok": ratio <= limit and also_ok,
    }
    _emit({"budget": record})
    return record


def budget_table(records: list[dict[str, Any]]) -> str:
    """The budget rows of one bench, under the common header."""
    return "Budgets (bench/BUDGETS.md):\n\n" + "\n".join(
        [BUDGET_HEADER, *(budget_line(r) for r in records)]
    )


def open_store(ws: Any) -> Any:
    """The store's public face, `Store(ws)`, wherever this checkout keeps it: re-exported from
    `crustacean.store` once it does, else `crustacean.store.write` (main before issue 31)."""
    import crustacean.store

    face = getattr(crustacean.store, "Store", None)
    if face is None:
        from crustacean.store.write import Store as face
    return face(ws)
