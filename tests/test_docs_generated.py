"""docs/cli.md and docs/configuration.md are generated from the code and must be current, and
the code they come from must say something for every command, option and key.

After changing a command, an option or a config key: `.venv/bin/python docs/generate.py`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from crustacean.config import CHECK_DOCS, CHECKS, SCHEMA, SourceConfig, schema

REPO = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    """docs/generate.py is a script, not a package module: load it by path, once."""
    if "docs_generate" not in sys.modules:
        spec = importlib.util.spec_from_file_location("docs_generate", REPO / "docs/generate.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["docs_generate"] = module
        spec.loader.exec_module(module)
    return sys.modules["docs_generate"]


@functools.cache
def _rendered(name: str) -> str:
    """Rendering every help screen takes a second or two: do it once per test run."""
    return _generator().TARGETS[name]()


@pytest.mark.parametrize("name", ["cli.md", "configuration.md"])
def test_generated_docs_are_up_to_date(name: str) -> None:
    expected = _rendered(name)
    path = REPO / "docs" / name
    current = path.read_text("utf-8") if path.is_file() else ""
    assert current == expected, (
        f"docs/{name} is out of date with the code; run `.venv/bin/python docs/generate.py` "
        "and commit the result."
    )


def test_check_mode_names_the_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = _generator()
    docs = tmp_path / "docs"
    docs.mkdir()
    cli = _rendered("cli.md")  # before the patch: else the patched entry would call itself
    monkeypatch.setitem(gen.TARGETS, "cli.md", lambda: cli)
    (docs / "cli.md").write_text(cli, "utf-8")
    (docs / "configuration.md").write_text("stale\n", "utf-8")
    monkeypatch.setattr(gen, "DOCS", docs)
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "docs/configuration.md" in err and "cli.md" not in err
    assert ".venv/bin/python docs/generate.py" in err
    (docs / "configuration.md").write_text(_rendered("configuration.md"), "utf-8")
    assert gen.main(["--check"]) == 0


def test_help_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Width and colour are pinned, whatever the caller's environment says."""
    gen = _generator()
    plain = gen.help_text(("cron", "install"))
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr(gen.rich_utils, "MAX_WIDTH", 60)
    monkeypatch.setattr(gen.rich_utils, "FORCE_TERMINAL", True)
    assert gen.help_text(("cron", "install")) == plain
    assert "\x1b" not in plain and max(len(line) for line in plain.splitlines()) == gen.WIDTH


def test_every_command_is_documented_with_help() -> None:
    gen = _generator()
    cmds = gen.commands()
    titles = {c.title for c in cmds}
    # the walk finds the groups' subcommands without a list to keep up to date
    assert {"crustacean cron install", "crustacean review approve", "crustacean tier set"} <= titles
    assert {"crustacean runs show", "crustacean config show"} <= titles
    text = (REPO / "docs/cli.md").read_text("utf-8")
    missing = []
    for cmd in cmds:
        if not (cmd.command.help or "").strip():
            missing.append(f"{cmd.title}: no help text (give the command a docstring)")
        for param in cmd.command.params:
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"{cmd.title} {param.name}: no help= text")
        if f"\n## {cmd.title}\n" not in text and f"\n### {cmd.title}\n" not in text:
            missing.append(f"{cmd.title}: no section in docs/cli.md")
    assert not missing, "\n".join(missing)


def test_every_config_key_is_in_the_reference() -> None:
    text = (REPO / "docs/configuration.md").read_text("utf-8")
    keys = [*SCHEMA, *(s.name for s in schema(SourceConfig, "sources[]."))]
    assert [k for k in keys if f"| `{k}` |" not in text] == []
    sections = {k.rpartition(".")[0] for k in SCHEMA if "." in k}
    assert [s for s in sections if f"`[{s}]`" not in text] == []


def test_every_value_check_has_words_for_the_docs() -> None:
    assert set(CHECK_DOCS) == set(CHECKS)
    assert {spec.check for spec in SCHEMA.values() if spec.check} <= set(CHECK_DOCS)


def test_layer_rules_are_described() -> None:
    text = (REPO / "docs/configuration.md").read_text("utf-8")
    order = ["**defaults**", "**org file**", "**user file**", "**workspace file**"]
    order += ["**environment**", "**flags**"]
    positions = [text.index(word) for word in order]
    assert positions == sorted(positions)
    for needle in ("CRUSTACEAN_ORG_CONFIG", "CRUSTACEAN_MEMORY__WRITE", "-c KEY=VALUE"):
        assert needle in text
    assert re.search(r"governance\.locked.*only from the org file", text, flags=re.S)
    assert "[[sources]]" in text
