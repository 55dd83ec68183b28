"""`crustacean mcp`: serve the memory tools over stdio."""

from typing import Annotated

import typer

from crustacean.cli.common import print_json, state


def mcp(
    ctx: typer.Context,
    print_tools: Annotated[
        bool, typer.Option("--print-tools", help="Print the tools and their schemas, then exit.")
    ] = False,
) -> None:
    """Serve the memory tools to an MCP client over stdio (Claude Code, Claude Desktop, …)."""
    # lazy: mcp_server imports the mcp SDK, ~1.2 s, that `crustacean --help` (which builds
    # every command) would pay
    from crustacean.mcp_server import serve, tool_schemas

    ws = state(ctx).open()
    if print_tools:
        print_json(tool_schemas(ws))
        return
    serve(ws)
