"""The house rules that read off the folder tree (ARCHITECTURE.md): floors, and no import cycle.

Every import counts: at the top of a module, inside a function, under `TYPE_CHECKING`, and a
module named in a string (what `importlib.import_module` is handed). A lazy import may save
start-up time; it may not hide an arrow that points up.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "crustacean"

# Each floor may import only the floors below it. A top-level module is ground floor; a package
# is one floor; two packages on one floor do not import each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("<ground>",),
    ("store", "sources"),
    ("recall",),
    ("llm",),
    ("stages",),
    ("ops",),
    ("ui", "mcp_server"),
    ("cli",),
)
_MODULE_STRING = re.compile(r"^crustacean(\.[a-z_][a-z0-9_]*)+$")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, code: str, known: dict[str, Path], *, init: bool = False) -> set[str]:
    """Every crustacean module this code imports, wherever the import statement is."""
    package = module if init else module.rpartition(".")[0]
    out: set[str | None] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out |= {_resolve(a.name, known) for a in node.names if a.name.startswith("crustacean")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("crustacean"):
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    out.add(sub if sub in known else _resolve(base, known))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = _MODULE_STRING.match(node.value) and node.value in known
            out.add(node.value if named else None)
    out.discard(None)
    out.discard(module)
    return {m for m in out if m is not None}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {
        m: imports_of(m, p.read_text("utf-8"), known, init=p.name == "__init__.py")
        for m, p in known.items()
    }


def floor_of(module: str) -> tuple[int, str]:
    """(floor number, the unit on it): a package name, or `<ground>` for a top-level module."""
    parts = module.split(".")
    if len(parts) == 1:
        return 0, "<ground>"  # the package's own __init__ (its version)
    unit = "cli" if parts[1] == "__main__" else parts[1]  # `python -m crustacean` is the CLI
    is_package = (PACKAGE / unit).is_dir()
    if not is_package and unit not in {"mcp_server", "__main__"}:
        unit = "<ground>"
    for number, units in enumerate(FLOORS):
        if unit in units:
            return number, unit
    raise AssertionError(f"{module}: its folder is on no floor; add it to FLOORS")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_lazy_imports_included() -> None:
    assert cycles(graph()) == []


def test_every_arrow_points_down_a_floor() -> None:
    wrong = []
    for module, targets in sorted(graph().items()):
        floor, unit = floor_of(module)
        for target in sorted(targets):
            to_floor, to_unit = floor_of(target)
            same_package = unit == to_unit and unit != "<ground>"
            if same_package or (unit == "<ground>" and to_unit == "<ground>"):
                continue
            if to_floor >= floor:
                wrong.append(f"{module} (floor {floor}) -> {target} (floor {to_floor})")
    assert wrong == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function() -> None:
    """The gate itself: an import inside a function and a module named in a string count."""
    known = {"crustacean.a": Path("a.py"), "crustacean.b": Path("b.py")}
    code_a = "def f():\n    from crustacean.b import x\n"
    code_b = "import importlib\nM = importlib.import_module('crustacean.a')\n"
    edges = {"crustacean.a": imports_of("crustacean.a", code_a, known)}
    edges["crustacean.b"] = imports_of("crustacean.b", code_b, known)
    assert cycles(edges) == [["crustacean.a", "crustacean.b"]]


@pytest.mark.parametrize(
    ("module", "floor"),
    [
        ("crustacean.errors", 0),
        ("crustacean.store.write", 1),
        ("crustacean.sources.base", 1),
        ("crustacean.recall.search", 2),
        ("crustacean.llm.client", 3),
        ("crustacean.stages.collect", 4),
        ("crustacean.ops.tick", 5),
        ("crustacean.mcp_server", 6),
        ("crustacean.cli.app", 7),
    ],
)
def test_floors_read_off_the_tree(module: str, floor: int) -> None:
    assert floor_of(module)[0] == floor


def test_architecture_md_lists_the_same_floors() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text("utf-8")
    for units in FLOORS[1:]:
        for unit in units:
            shown = f"{unit}.py" if unit == "mcp_server" else f"{unit}/"
            assert shown in text, f"ARCHITECTURE.md does not name the floor {shown}"
