"""The CLI is a thin edge (ARCHITECTURE.md, floor 7): a command parses, calls one core function
and renders what comes back. The gate: no command body is over MAX_BODY_LINES, measured with ast
on the function every command of the app (and every group callback) runs.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from crustacean.cli.app import app

CLI = Path(__file__).resolve().parent.parent / "crustacean" / "cli"
MAX_BODY_LINES = 15
NOT_YET_THIN: frozenset[str] = frozenset()  # a command module not thin yet, named until it is


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one: the
    signature (typer's Annotated parameters) and the docstring (the --help text) do not count."""
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
        body = body[1:]
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def commands(group: Any, ctx: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    """(command path, the function typer calls) for every command and group callback."""
    if getattr(group, "callback", None) is not None:
        yield ctx.command_path, group.callback
    for name in getattr(group, "list_commands", lambda _: [])(ctx):
        sub = group.get_command(ctx, name)
        sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        yield from commands(sub, sub_ctx)


def definition(fn: Callable[..., Any]) -> tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef]:
    fn = inspect.unwrap(fn)
    path = Path(fn.__code__.co_filename)
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name != fn.__name__:
            continue
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])  # as the code says
        if first == fn.__code__.co_firstlineno:
            return path, node
    raise AssertionError(f"no definition of {fn.__qualname__} in {path}")


def every_command() -> list[tuple[str, Path, ast.FunctionDef | ast.AsyncFunctionDef]]:
    root = typer.main.get_command(app)
    ctx = root.make_context("crustacean", [], resilient_parsing=True)
    found = []
    for where, fn in commands(root, ctx):
        path, node = definition(fn)
        if path.parent == CLI:  # typer's own (completion) callbacks are not ours to measure
            found.append((where, path, node))
    return found


def test_every_command_body_is_thin() -> None:
    too_long = [
        f"{where} ({path.name}:{node.lineno} {node.name}): {body_lines(node)} lines"
        for where, path, node in every_command()
        if path.name not in NOT_YET_THIN and body_lines(node) > MAX_BODY_LINES
    ]
    assert too_long == [], (
        f"command bodies over {MAX_BODY_LINES} lines: move the logic into a core function "
        "that returns a value, and render it here"
    )


def test_the_gate_sees_every_command() -> None:
    """The walk reaches each command module, groups' subcommands and group callbacks."""
    seen = {(path.name, node.name) for _, path, node in every_command()}
    for expected in [
        ("search_cmd.py", "search"),
        ("context_cmd.py", "context"),
        ("help_cmd.py", "help_"),
        ("review_cmd.py", "review"),  # a group callback
        ("review_cmd.py", "approve"),
        ("config_cmd.py", "show"),
        ("memory_cmd.py", "tier_list"),
        ("stages_cmd.py", "compile_"),
    ]:
        assert expected in seen, expected
    assert {p.name for p in CLI.glob("*_cmd.py")} <= {name for name, _ in seen}


def test_body_lines_skips_the_docstring_and_signature() -> None:
    code = 'def f(\n    a: int,\n) -> None:\n    """Doc.\n\n    More."""\n    x = a\n\n    y = x\n'
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert body_lines(node) == 3
    long = ast.parse("def g():\n" + "    pass\n" * (MAX_BODY_LINES + 1)).body[0]
    assert isinstance(long, ast.FunctionDef) and body_lines(long) == MAX_BODY_LINES + 1


def test_the_temporary_exceptions_are_real_files() -> None:
    """A renamed or deleted module must leave the exception list too."""
    assert all((CLI / name).is_file() for name in NOT_YET_THIN)


EDGES = [
    *sorted(CLI.glob("*.py")),
    CLI.parent / "mcp_server.py",
    *sorted((CLI.parent / "ui").glob("*.py")),
]


def function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, statement) of every import inside a function without a `# lazy:` comment saying
    what it saves: on its line, or in the comment above it (or above its block of imports)."""
    lines = path.read_text("utf-8").splitlines()
    found = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and not _explained(lines, node.lineno):
                found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def _explained(lines: list[str], lineno: int) -> bool:
    at = lineno - 1
    if "# lazy:" in lines[at]:
        return True
    while at > 0 and lines[at - 1].strip().startswith(("#", "from ", "import ")):
        at -= 1
        if lines[at].strip().startswith("# lazy:"):
            return True
    return False


def test_an_edge_imports_inside_a_function_only_for_a_measured_start_up_cost() -> None:
    """The edges import at the top; a lazy import stays only with `# lazy: <why, the figure>`
    (what `python -X importtime` measured it saves, and for which command)."""
    bare = [
        f"{path.relative_to(CLI.parent.parent)}:{line}: {code}"
        for path in EDGES
        if path.name not in NOT_YET_THIN
        for line, code in function_level_imports(path)
    ]
    assert bare == []


def test_the_import_gate_finds_a_bare_lazy_import(tmp_path: Path) -> None:
    code = (
        "def f():\n    import json\n\n\n"
        "def g():\n    # lazy: 1 ms, for g\n    # alone\n    import json\n    import os\n"
    )
    (tmp_path / "m.py").write_text(code)
    assert function_level_imports(tmp_path / "m.py") == [(2, "import json")]
