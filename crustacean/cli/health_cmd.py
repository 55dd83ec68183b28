"""`crustacean health`: the pipeline and workspace health check by code."""

from datetime import UTC, datetime
from typing import Annotated

import typer

from crustacean.cli.common import print_json, say, state
from crustacean.stages.health import check_workspace


def health(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Check the pipeline's cadence and cost and the workspace's shape, item by item.

    Exit codes: 0 when every check is ok or warn, 1 when any check fails.
    """
    result = check_workspace(state(ctx).open(), datetime.now(UTC))
    if as_json:
        print_json(result.to_json())
    else:
        width = max(len(c.name) for c in result.checks)
        for check in result.checks:
            say(f"{check.name:<{width}}  {check.status:<4}  {check.summary}")
            for line in check.details:
                say(f"{'':<{width}}        {line}")
        say(f"\nOverall: {result.status}")
    if result.status == "fail":
        raise typer.Exit(1)
