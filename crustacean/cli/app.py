"""The root command and its global options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crustacean import __version__
from crustacean.cli import (
    config_cmd,
    cron_cmd,
    health_cmd,
    history_cmd,
    init_cmd,
    mcp_cmd,
    memory_cmd,
    review_cmd,
    runs_cmd,
    search_cmd,
    stages_cmd,
    status_cmd,
    tick_cmd,
    ui_cmd,
)
from crustacean.cli.common import CrustaceanGroup, console, state

app = typer.Typer(
    cls=CrustaceanGroup,
    name="crustacean",
    help="Keep an AI agent's markdown memory workspace alive: the 4C pipeline, versioned "
    "writes and recall.",
    epilog="Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from crustacean.system_docs import shipped_version

        console.print(f"crustacean {__version__} (pipeline docs {shipped_version()})")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Workspace folder. Default: $CRUSTACEAN_WORKSPACE, then the nearest folder "
            "upwards holding crustacean.toml.",
            show_default=False,
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            "-c",
            help="Override a config key for this run, as KEY=VALUE (repeatable), "
            "e.g. -c memory.write=off.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Exit codes: 0 ok, 1 failed, 2 usage or config error, 75 another run holds the lock."""
    st = state(ctx)
    st.workspace = workspace
    st.overrides = list(set_ or [])


app.command("init")(init_cmd.init)
app.command("collect")(stages_cmd.collect)
app.command("curate")(stages_cmd.curate)
app.command("compile")(stages_cmd.compile_)
app.command("calibrate")(stages_cmd.calibrate)
app.command("health")(health_cmd.health)
app.command("status")(status_cmd.status)
app.command("doctor")(status_cmd.doctor)
app.command("tick")(tick_cmd.tick)
app.add_typer(cron_cmd.cron_app, name="cron")
app.command("mcp")(mcp_cmd.mcp)
app.add_typer(config_cmd.config_app, name="config")
app.command("paths")(config_cmd.paths)
app.command("history")(history_cmd.history)
app.command("show")(history_cmd.show)
app.command("rollback")(history_cmd.rollback)
app.add_typer(review_cmd.review_app, name="review")
app.command("context")(memory_cmd.context)
app.command("search")(search_cmd.search)
app.command("index")(search_cmd.index)
app.command("remember")(memory_cmd.remember)
app.add_typer(memory_cmd.tier_app, name="tier")
app.add_typer(runs_cmd.runs_app, name="runs")
app.command("ui")(ui_cmd.ui)


def main() -> None:
    app(prog_name="crustacean")
