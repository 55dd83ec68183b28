"""`crustacean config show` and `crustacean paths`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from crustacean.cli.common import CrustaceanGroup, console, err_console, print_json, state
from crustacean.config import SCHEMA, toml_value
from crustacean.workspace import load_for, locations

config_app = typer.Typer(
    cls=CrustaceanGroup, help="Inspect the layered configuration.", no_args_is_help=True
)


@config_app.command("show")
def show(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Print every effective config value, the layer it came from, and whether it is locked."""
    st = state(ctx)
    loaded = load_for(st.workspace, st.overrides)
    for warning in loaded.warnings:
        err_console.print(f"Warning: {warning}", markup=False)
    rows = []
    for key in SCHEMA:
        value = loaded.values[key]
        if key == "sources":
            value = [s.__dict__ for s in value]
        layer = loaded.origins[key]
        rows.append(
            {
                "key": key,
                "value": value,
                "layer": layer,
                "source": loaded.sources.get(layer, ""),
                "locked": key in loaded.locked,
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table(show_edge=False)
    for col in ("key", "value", "from", "locked"):
        table.add_column(col)
    for row in rows:
        value = row["value"]
        shown = f"{len(value)} source(s)" if row["key"] == "sources" else toml_value(value)
        table.add_row(row["key"], shown, row["layer"], "locked" if row["locked"] else "")
    console.print(table)
    files = [f"{name}: {src}" for name, src in loaded.sources.items() if name not in ("default",)]
    console.print("Layers (lowest first): " + "; ".join(files), markup=False)


def paths(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Print every location crustacean uses: workspace, config files, state, logs."""
    rows = locations(state(ctx).workspace, overrides=state(ctx).overrides)
    if as_json:
        print_json(dict(rows))
        return
    for name, where in rows:
        console.print(f"{name + ':':<24}{where}", markup=False)
