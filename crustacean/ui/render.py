"""HTML out of plain data: the templates, markdown and the cost chart.

Jinja2 escapes every value by default (autoescape), so workspace text (file content, commit
messages, run errors, tool inputs) can never become markup; the only strings marked safe are the
ones built here: markdown rendered with raw HTML off, and the SVG chart, whose labels are escaped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from datetime import date, datetime, tzinfo
from functools import cache
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from crustacean.clock import local_time, stored_time
from crustacean.runs import short_reason

HERE = Path(__file__).parent
STAGE_COLOURS = {
    "collect": "#4e79a7",
    "curate": "#59a14f",
    "compile": "#f28e2b",
    "calibrate": "#b07aa1",
}


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = lambda v: (v or "")[:12]
    env.filters["when"] = when
    env.filters["reason"] = short_reason  # a run's failure in a table cell, as `status` has it
    env.globals["qs"] = query_string
    return env


def when(moment: datetime | str | None, tz: tzinfo) -> str:
    """Any moment a page shows, in the one format of the CLI's tables (`clock.local_time`):
    an aware datetime, or a stored ISO text (a proposal's `created`)."""
    if moment is None or moment == "":
        return "—"
    if isinstance(moment, datetime):
        return local_time(moment, tz)
    parsed = stored_time(moment)
    return local_time(parsed, tz) if parsed else moment


def page(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def query_string(**params: Any) -> str:
    """`?a=1&b=x` from the params that are set (None and "" are left out)."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


@cache
def _markdown() -> Any:
    # html off: a file's <script> or <img onerror> is shown as text, never parsed as markup.
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str, folder: str = "") -> Markup:
    """Render a file's markdown; relative links open the linked file here (`folder` is the
    rendered file's folder, which they are relative to)."""
    md = _markdown()
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or ():
            if child.type == "link_open":
                child.attrSet("href", file_link(str(child.attrGet("href") or ""), folder))
    return Markup(md.renderer.render(tokens, md.options, {}))  # raw HTML is off, see _markdown


def file_link(href: str, folder: str) -> str:
    """`contacts/alice.md#x` from `memory/` becomes `/file?path=memory/contacts/alice.md#x`;
    absolute URLs, anchors and links that climb out of the workspace stay as they are."""
    if not href or href.startswith(("#", "/")) or ":" in href.split("/")[0]:
        return href
    target, _, anchor = href.partition("#")
    path = posixpath.normpath(posixpath.join(folder, target))
    if path.startswith("..") or path == ".":
        return href
    return "/file" + query_string(path=path) + (f"#{anchor}" if anchor else "")


def cost_chart(days: Sequence[date], per_stage: Mapping[str, Sequence[float]]) -> Markup:
    """Stacked bars, one per day, one colour per stage; drawn here so no script is needed."""
    width, height, pad, left = 1000, 180, 20, 64
    totals = [sum(vals[i] for vals in per_stage.values()) for i in range(len(days))]
    peak = max(totals, default=0.0) or 1.0
    bar = (width - left - pad) / max(len(days), 1)
    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height + 40}" role="img" '
        'xmlns="http://www.w3.org/2000/svg" aria-label="cost per day and stage, last 30 days">',
        f'<line x1="{left}" y1="{height}" x2="{width - pad}" y2="{height}" stroke="#999"/>',
        f'<text x="{left - 6}" y="{pad + 4}" text-anchor="end" class="axis">${peak:.4f}</text>',
        f'<text x="{left - 6}" y="{height}" text-anchor="end" class="axis">$0</text>',
    ]
    for i, day in enumerate(days):
        y = float(height)
        for stage, vals in per_stage.items():
            h = vals[i] / peak * (height - pad)
            if h <= 0:
                continue
            y -= h
            tip = escape(f"{day.isoformat()} {stage}: ${vals[i]:.4f}")
            out.append(
                f'<rect x="{left + i * bar + 1:.1f}" y="{y:.1f}" width="{bar - 2:.1f}" '
                f'height="{h:.1f}" fill="{STAGE_COLOURS.get(stage, "#888")}">'
                f"<title>{tip}</title></rect>"
            )
        if (len(days) - 1 - i) % 7 == 0:  # a label a week, the last one today
            out.append(
                f'<text x="{left + (i + 0.5) * bar:.1f}" y="{height + 16}" text-anchor="middle" '
                f'class="axis">{day:%m-%d}</text>'
            )
    x = float(left)
    for stage in per_stage:
        colour = STAGE_COLOURS.get(stage, "#888")
        out.append(f'<rect x="{x:.0f}" y="{height + 26}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14:.0f}" y="{height + 35}" class="axis">{escape(stage)}</text>')
        x += 100
    out.append("</svg>")
    return Markup("".join(out))  # every text in it is escaped above
