"""`crustacean config show` and `crustacean paths`."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import typer

from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state, warn
from crustacean.cli.output import Col, fit_table
from crustacean.config import SCHEMA, LoadedConfig, redundant_keys, toml_value
from crustacean.workspace import load_for, locations

config_app = typer.Typer(
    cls=CrustaceanGroup, help="Inspect the layered configuration.", no_args_is_help=True
)


@config_app.command("show")
def show(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    redundant: Annotated[
        bool,
        typer.Option(
            "--redundant",
            help="Only the keys a config file sets to exactly the default; delete them to "
            "follow future defaults.",
        ),
    ] = False,
) -> None:
    """Print every effective config value, where it came from (a default or a choice), and
    whether it is locked."""
    st = state(ctx)
    loaded = load_for(st.workspace, st.overrides)
    for warning in loaded.warnings:
        warn(f"Warning: {warning}")
    repeats = set(redundant_keys(loaded))
    rows = [_row(loaded, key, key in repeats) for key in SCHEMA if not redundant or key in repeats]
    if as_json:
        print_json(rows)
        return
    if redundant:
        _say_redundant(rows, loaded.sources)
        return
    cols = [Col("key"), Col("value", shrink=24), Col("from"), Col("locked", drop=1)]
    table_rows = [
        [
            row["key"],
            _shown(row["key"], row["value"]),
            row["layer"] + (" (= default)" if row["redundant"] else ""),
            "locked" if row["locked"] else "",
        ]
        for row in rows
    ]
    console.print(fit_table(cols, table_rows))
    chosen = sum(1 for row in rows if row["layer"] != "default")
    say(f"{chosen} of {len(rows)} keys chosen; the rest are defaults.")
    files = [f"{name}: {src}" for name, src in loaded.sources.items() if name not in ("default",)]
    say("Layers (lowest first): " + "; ".join(files))


class _Row(TypedDict):
    """One key of `config show` (its JSON object, and a line of its table)."""

    key: str
    value: Any
    default: Any
    layer: str
    source: str
    locked: bool
    redundant: bool


def _row(loaded: LoadedConfig, key: str, repeats_default: bool) -> _Row:
    value, default = loaded.values[key], SCHEMA[key].default
    if key == "sources":
        value, default = [s.__dict__ for s in value], []
    layer = loaded.origins[key]
    return {
        "key": key,
        "value": value,
        "default": default,
        "layer": layer,
        "source": loaded.sources.get(layer, ""),
        "locked": key in loaded.locked,
        "redundant": repeats_default,
    }


def _shown(key: str, value: object) -> str:
    if key == "sources" and isinstance(value, list):
        return f"{len(value)} source(s)"
    return toml_value(value)


def _say_redundant(rows: list[_Row], sources: dict[str, str]) -> None:
    if not rows:
        say("No config file repeats a default: every set key is a choice.")
        return
    say("These keys are set to exactly their default; delete the line to follow future defaults:")
    for row in rows:
        where = sources.get(str(row["layer"]), str(row["layer"]))
        say(f"  {row['key']} = {_shown(str(row['key']), row['value'])}  ({where})")


def paths(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (snake_case keys) instead of lines.")
    ] = False,
) -> None:
    """Print every location crustacean uses: workspace, config files, state, logs."""
    rows = locations(state(ctx).workspace, overrides=state(ctx).overrides)
    if as_json:
        print_json({key: None if where.startswith("(") else where for key, _, where in rows})
        return
    for _, label, where in rows:
        say(f"{label + ':':<24}{where}")
