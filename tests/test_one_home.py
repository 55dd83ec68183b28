"""Text rules with one home (ARCHITECTURE.md): a second copy of one fails here, by name.

Markdown's heading and fence rules live in crustacean/markdown.py, so compile, health, search
and curate cannot disagree on what a section is; the state folder's name lives in
crustacean/tree.py (`STATE_DIR`), so every state path is found from it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "crustacean"
MARKDOWN_HOME = "crustacean/markdown.py"
STATE_HOME = "crustacean/tree.py"
_RE_CALLS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "split"}
# What a heading or fence rule looks like in a pattern: runs of # or of ``` / ~~~.
_HEADING_RULE = re.compile(r"#\{|#\+|#\*|\^ ?#|^#|\}#|\\#")
_FENCE_RULE = re.compile(r"```|`\{3|~~~|~\{3")
# A fence in what is not Markdown structure, with why.
ALLOWED = {
    ("crustacean/sources/base.py", "_META_BLOCK"): "OpenClaw's JSON envelopes in transcript text",
}


def _patterns() -> list[tuple[str, str, str]]:
    """(file, name it is bound to, pattern) of every literal regex handed to `re`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                for sub in ast.walk(node.value):
                    names[id(sub)] = node.targets[0].id
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in _RE_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            found.append((rel, names.get(id(node), "?"), node.args[0].value))
    return found


def test_heading_and_fence_rules_live_in_markdown_py() -> None:
    strays = [
        f"{rel} {name}: {pattern!r}"
        for rel, name, pattern in _patterns()
        if rel != MARKDOWN_HOME
        and (rel, name) not in ALLOWED
        and (_HEADING_RULE.search(pattern) or _FENCE_RULE.search(pattern))
    ]
    assert not strays, "use crustacean.markdown's headings()/code_lines():\n" + "\n".join(strays)


def test_the_state_folder_is_named_once() -> None:
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == STATE_HOME:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        strays += [
            f"{rel}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ".crustacean" in node.value
            and id(node) not in docstrings
        ]
    assert not strays, "name the state folder as tree.STATE_DIR:\n" + "\n".join(strays)


def test_the_checks_see_a_second_copy() -> None:
    """The detectors themselves: each old copy of a rule is caught."""
    for old in (
        r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$",
        r"^#{2,4}\s+(?P<head>.+)$",
        r"^\s*(```|~~~)",
        r"^ {0,3}(`{3,}|~{3,})",
    ):
        assert _HEADING_RULE.search(old) or _FENCE_RULE.search(old), old
    assert not _HEADING_RULE.search(r"[^\]\n]*\]\(") and not _FENCE_RULE.search(r"`[^`\n]*`")
