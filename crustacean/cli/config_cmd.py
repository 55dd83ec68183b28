"""`crustacean config show` and `crustacean paths`."""

from typing import Annotated

import typer

from crustacean.cli.common import CrustaceanGroup, console, print_json, say, state
from crustacean.cli.output import Col, fit_table
from crustacean.config import ConfigRow, config_rows
from crustacean.workspace import locations

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
    loaded = state(ctx).load()
    rows = config_rows(loaded, redundant_only=redundant)
    if as_json:
        print_json([row.to_json() for row in rows])
    elif redundant:
        _say_redundant(rows, loaded.sources)
    else:
        _say_table(rows, loaded.sources)


def _say_table(rows: list[ConfigRow], sources: dict[str, str]) -> None:
    cols = [Col("key"), Col("value", shrink=24), Col("from"), Col("locked", drop=1)]
    table_rows = [
        [
            row.key,
            row.shown(),
            row.layer + (" (= default)" if row.redundant else ""),
            "locked" if row.locked else "",
        ]
        for row in rows
    ]
    console.print(fit_table(cols, table_rows))
    chosen = sum(1 for row in rows if row.layer != "default")
    say(f"{chosen} of {len(rows)} keys chosen; the rest are defaults.")
    files = [f"{name}: {src}" for name, src in sources.items() if name not in ("default",)]
    say("Layers (lowest first): " + "; ".join(files))


def _say_redundant(rows: list[ConfigRow], sources: dict[str, str]) -> None:
    if not rows:
        say("No config file repeats a default: every set key is a choice.")
        return
    say("These keys are set to exactly their default; delete the line to follow future defaults:")
    for row in rows:
        say(f"  {row.key} = {row.shown()}  ({sources.get(row.layer, row.layer)})")


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
