"""Start-up pays for the command that runs: lazy commands, plain coercion, same CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer

from crustacean.cli import lazy
from crustacean.cli.app import COMMANDS, app
from crustacean.workspace import Workspace


def probe_command() -> Any:
    """One command with every plain annotation the CLI uses, returning what it was given."""
    scratch = typer.Typer()

    @scratch.command()
    def probe(
        arg: Annotated[str, typer.Argument()],
        n: Annotated[int, typer.Option("-n", min=1)] = 10,
        k: Annotated[int | None, typer.Option("-k")] = None,
        where: Annotated[Path | None, typer.Option("--where")] = None,
        many: Annotated[list[str] | None, typer.Option("--many")] = None,
        flag: Annotated[bool, typer.Option("--flag")] = False,
    ) -> dict[str, Any]:
        return {"arg": arg, "n": n, "k": k, "where": where, "many": many, "flag": flag}

    return typer.main.get_command(scratch)


def outcome(command: Any, argv: list[str]) -> tuple[str, Any]:
    """('ok', values) or ('error', typer's message) of one parse."""
    try:
        return "ok", command.main(args=argv, prog_name="probe", standalone_mode=False)
    except typer.TyperException as e:
        return "error", (type(e).__name__, e.format_message())


ARGVS = [
    ["x"],
    ["x", "-n", "5"],
    ["x", "-n", "007"],  # typer's own decides a leading zero
    ["x", "-n", " 5"],
    ["x", "-n", "+5"],
    ["x", "-n", "0"],  # below min: typer's message
    ["x", "-n", "-3"],
    ["x", "-n", "abc"],
    ["x", "-n", "1_000"],
    ["x", "-n", "99999999999999999999999"],
    ["x", "-k", "-4"],
    ["x", "-k", "4.0"],
    ["x", "--where", "a/b"],
    ["x", "--where", ""],
    ["x", "--where", "~/x"],
    ["x", "--many", "a", "--many", "b"],
    ["x", "--flag"],
    ["ünï cødé"],
    [],  # missing argument
    ["x", "--nosuch"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) or "none" for a in ARGVS])
def test_plain_coercion_gives_what_typer_gives(argv: list[str]) -> None:
    own = probe_command()
    plain = probe_command()
    lazy.plain_params(plain, ["-h", "--help"])
    assert outcome(plain, argv) == outcome(own, argv)


def test_every_plain_parameter_of_the_cli_skips_pydantic() -> None:
    """With this typer the layer is active (a typer whose internals moved turns it off: then
    this fails, and start-up pays for pydantic again)."""
    root = typer.main.get_command(app)
    root.make_context("crustacean", ["paths"], resilient_parsing=True)  # the parse every run makes
    seen = 0

    def walk(command: Any) -> None:
        nonlocal seen
        for param in [*command.params, command._help_option]:
            if param is not None and lazy._is_plain(param):
                assert type(param._runtime_param).__name__ == "_PlainParam", param.name
                seen += 1
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(root)
    assert seen > 60


def test_help_lists_every_command_in_order() -> None:
    root = typer.main.get_command(app)
    assert list(root.commands) == [*(name for name, _, _ in COMMANDS), "help"]  # help: last
    assert all(root.commands[name].name == name for name, _, _ in COMMANDS)


def imports_of(argv: list[str], cwd: Path) -> set[str]:
    code = "import sys; from crustacean.cli.entry import main; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.parametrize(
    ("argv", "not_loaded"),
    [
        (["paths"], {"pydantic", "crustacean.cli.mcp_cmd", "crustacean.cli.review_cmd"}),
        (["search", "garden"], {"pydantic", "crustacean.cli.memory_cmd", "anthropic"}),
        (["context", "--for", "main"], {"pydantic", "rich", "crustacean.cli.search_cmd"}),
    ],
)
def test_a_command_loads_only_what_it_needs(
    ws: Workspace, argv: list[str], not_loaded: set[str]
) -> None:
    loaded = imports_of(argv, ws.root)
    assert "typer" in loaded and not loaded & not_loaded, loaded & not_loaded
