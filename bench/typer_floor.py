"""The start-up floor of a typer CLI shaped like crustacean's hook command.

The same root options as `crustacean` (`--workspace`, `--set`, `--quiet`, `--version`) and a
`context` command with the same five options, used the ordinary way; it parses
`context --format claude-hook` and prints an empty JSON object. bench/runtime_bench.py times it
beside the real commands: what is left between it and a crustacean command is crustacean's own
work (its imports, reading the workspace, rendering).
"""

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False)


@app.callback()
def root(
    workspace: Annotated[Path | None, typer.Option("--workspace", "-w")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", "-c", metavar="KEY=VALUE")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    version: Annotated[bool, typer.Option("--version", is_eager=True)] = False,
) -> None:
    """The root's options, as crustacean declares them."""


@app.command()
def context(
    for_: Annotated[str, typer.Option("--for")] = "main",
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    fmt: Annotated[str, typer.Option("--format")] = "markdown",
    max_entries: Annotated[int | None, typer.Option("--max-entries")] = None,
    budget_chars: Annotated[int | None, typer.Option("--budget-chars")] = None,
) -> None:
    """The hook command's options; prints what an empty hook would."""
    typer.echo("{}")


if __name__ == "__main__":
    app()
