"""`crustacean help [COMMAND...]`: the help of a command, like COMMAND --help."""

from typing import Annotated, Any

import typer

from crustacean.errors import UsageError


def help_(
    ctx: typer.Context,
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The command (and subcommand) to explain, e.g. `review approve`."),
    ] = None,
) -> None:
    """Show the help of a command, like COMMAND --help (without one: the list of commands)."""
    typer.echo(context_of(ctx.find_root(), command or []).get_help(), nl=False)


def context_of(root: Any, names: list[str]) -> Any:
    """The context `names` (a command, then its subcommands) would run in, without running it;
    an unknown name is a usage error that lists the commands there."""
    cmd, sub_ctx = root.command, root
    for name in names:
        sub = cmd.get_command(sub_ctx, name) if hasattr(cmd, "get_command") else None
        if sub is None:
            known = ", ".join(cmd.list_commands(sub_ctx)) if hasattr(cmd, "list_commands") else ""
            where = " ".join([*sub_ctx.command_path.split()[1:], name])
            raise UsageError(
                f"No command `{where}`."
                + (f" Commands here: {known}." if known else f" `{sub_ctx.command_path}` has none.")
            )
        sub_ctx = sub.make_context(name, [], parent=sub_ctx, resilient_parsing=True)
        cmd = sub
    return sub_ctx
