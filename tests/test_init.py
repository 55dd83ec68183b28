"""`crustacean init`: the full tree, adoption without touching a byte, idempotence, git."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_helpers import git

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.workspace import FOUNDATION_FILES, LAYOUT_DIRS, PIPELINE_DOCS


def test_init_creates_the_whole_tree(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    result = run_cli("init", str(root))
    for rel in LAYOUT_DIRS:
        assert (root / rel).is_dir(), rel
    for name in (
        *FOUNDATION_FILES,
        "MEMORY.md",
        "crustacean.toml",
        ".gitignore",
        "memory/README.md",
        "knowledge/README.md",
    ):
        assert (root / name).is_file(), name
    for doc in PIPELINE_DOCS:
        assert (root / "memory/.system" / doc).read_text().startswith("# ")
    assert "## 📂 Memory Structure Map" in (root / "MEMORY.md").read_text()
    assert "## Index" in (root / "memory/README.md").read_text()
    assert "## Index" in (root / "knowledge/README.md").read_text()
    assert ".crustacean/" in (root / ".gitignore").read_text()
    assert "created" in result.stdout and "Next steps:" in result.stdout
    assert "OpenClaw" not in result.stdout  # not installed in this HOME: not named
    assert "ANTHROPIC_API_KEY" in result.stdout and "ANTHROPIC_BASE_URL" in result.stdout
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "log", "--format=%an|%s").strip() == (
        "crustacean user|crustacean init: scaffold workspace"
    )
    load_config(root, env={})  # the written config is valid


def test_every_config_key_is_in_the_written_toml(tmp_path: Path) -> None:
    run_cli("init", str(tmp_path / "w"))
    text = (tmp_path / "w/crustacean.toml").read_text()
    for key in (
        "max_entries = 50",
        "budget_chars = 20000",
        "working_lines = 500",
        "hot_days = 7",
        "hot_min_uses = 5",
        "warm_days = 30",
        "cold_days = 90",
        "hot_limit = 20",
        "memory_cap = 10000",
        "daily_after_days = 30",
        "max_file_bytes = 262144",
        "max_files_per_call = 20",
        'timezone = ""',
    ):
        assert key in text


def test_daily_dir_option_is_written_to_the_config(tmp_path: Path) -> None:
    root = tmp_path / "w"
    run_cli("init", str(root), "--daily-dir", "daily")
    assert load_config(root, env={}).settings.workspace.daily_dir == "daily"
    assert (root / "memory/daily").is_dir()


def test_init_on_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    result = run_cli("init", str(tmp_path / "f"), code=2)
    assert "is a file; give a folder" in result.stderr
    assert (tmp_path / "f").read_text() == "x"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder the shell is in."""
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def test_workspace_flag_names_the_folder_init_makes(tmp_path: Path, here: Path) -> None:
    """`crustacean -w X init` inits X, never the folder the shell is in (as `git -C X init`)."""
    run_cli("-w", str(tmp_path / "ws"), "init", "--no-detect")
    assert (tmp_path / "ws/crustacean.toml").is_file()
    assert list(here.iterdir()) == []
    run_cli("-w", str(tmp_path / "ws"), "init", str(tmp_path / "ws"), "--no-detect")  # the same


def test_two_different_folders_for_init_is_a_usage_error(here: Path) -> None:
    result = run_cli("-w", str(here / "a"), "init", str(here / "b"), code=2)
    assert "init was given two folders" in result.stderr
    assert "give the folder once" in result.stderr
    assert list(here.iterdir()) == []


def _openclaw_workspace(root: Path) -> None:
    """What an OpenClaw user already has: their own foundation files, logs and notes."""
    (root / "memory/contacts").mkdir(parents=True)
    (root / "SOUL.md").write_text("# Soul\nI am Pinch.   \n\n\n")  # odd whitespace on purpose
    (root / "MEMORY.md").write_bytes(b"# Memory\r\n- likes tea\r\n")  # CRLF on purpose
    (root / "memory/2026-11-29.md").write_text("### [09:00] chat\n- hello\n")
    (root / "memory/contacts/telegram-alice.md").write_text("---\nname: Alice\n---\nfriend\n")
    (root / ".gitignore").write_text("node_modules/\n")


def test_adoption_keeps_every_existing_file_byte_identical(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    _openclaw_workspace(root)
    before = snapshot(root)
    result = run_cli("init", str(root), "--verbose")
    after = snapshot(root)
    assert {k: after[k] for k in before} == before
    assert "kept" in result.stdout
    assert "Committed the files that were already here as the baseline" in result.stdout
    assert ".git/info/exclude" in result.stdout
    assert ".crustacean/" in (root / ".git/info/exclude").read_text()
    log = git(root, "log", "--format=%s").splitlines()
    assert log == [
        "crustacean init: scaffold workspace",
        "crustacean init: baseline of the files already here",
    ]
    assert "SOUL.md" in git(root, "show", "--name-only", "--format=", "HEAD~1")
    assert "SOUL.md" not in git(root, "show", "--name-only", "--format=", "HEAD")


def test_init_twice_creates_nothing_the_second_time(tmp_path: Path) -> None:
    root = tmp_path / "w"
    run_cli("init", str(root))
    before = snapshot(root)
    result = run_cli("init", str(root))
    assert result.stdout.count("created") == 1 and "0 created" in result.stdout
    assert snapshot(root) == before


def test_existing_repo_with_uncommitted_work_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    git(root, "init", "-q")
    (root / "notes.md").write_text("draft\n")
    (root / "USER.md").write_text("me\n")
    result = run_cli("init", str(root))
    assert "2 path(s) had uncommitted changes; crustacean left them uncommitted." in result.stdout
    status = git(root, "status", "--porcelain")
    assert "?? notes.md" in status and "?? USER.md" in status
    committed = git(root, "show", "--name-only", "--format=", "HEAD")
    assert "notes.md" not in committed and "USER.md" not in committed
    assert (root / "USER.md").read_text() == "me\n"


def test_without_git_the_workspace_still_works_unversioned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    root = tmp_path / "w"
    result = run_cli("init", str(root))
    assert "git was not found: the workspace works, but unversioned" in result.stdout
    assert not (root / ".git").exists()
    assert (root / "MEMORY.md").is_file()
    result = run_cli("-w", str(root), "history", code=2)
    assert "versioning is off" in result.stderr


def test_version_flag_names_the_pipeline_docs_version() -> None:
    from crustacean.ops.system_docs import shipped_version

    out = run_cli("--version").stdout
    assert out.startswith("crustacean 0.") and f"pipeline docs {shipped_version()}" in out


def test_stage_docs_come_from_the_workspace_then_the_package(tmp_path: Path) -> None:
    from crustacean.workspace import stage_doc

    root = tmp_path / "w"
    run_cli("init", str(root))
    (root / "memory/.system/CURATE.md").write_text("# Curate, tuned\n")
    (root / "memory/.system/COMPILE.md").unlink()
    assert stage_doc(root, "CURATE.md") == "# Curate, tuned\n"
    assert stage_doc(root, "COMPILE.md").startswith("# ") and "Version: 3" in stage_doc(
        root, "COMPILE.md"
    )


def test_init_offers_the_transcripts_it_finds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude/projects").mkdir(parents=True)
    result = run_cli("init", str(tmp_path / "w"))
    assert "Found claude_code transcripts in ~/.claude/projects: added as a collect source." in (
        " ".join(result.stdout.split())
    )
    sources = load_config(tmp_path / "w", env={}).settings.sources
    assert [(s.kind, s.path) for s in sources] == [("claude_code", "~/.claude/projects")]
    run_cli("init", str(tmp_path / "v"), "--no-detect")
    assert load_config(tmp_path / "v", env={}).settings.sources == []


def test_init_does_not_guess_between_two_agents(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".openclaw/agents/main/sessions").mkdir(parents=True)
    (home / ".claude/projects").mkdir(parents=True)
    result = run_cli("init", str(tmp_path / "w"))
    out = " ".join(result.stdout.split())
    assert "Found transcripts of more than one agent" in out and "added none" in out
    assert "--source KIND" in out and "memorySearch.extraPaths" in out  # OpenClaw is here
    assert load_config(tmp_path / "w", env={}).settings.sources == []
    run_cli("init", str(tmp_path / "v"), "--source", "claude_code")
    sources = load_config(tmp_path / "v", env={}).settings.sources
    assert [(s.kind, s.path) for s in sources] == [("claude_code", "~/.claude/projects")]
    run_cli("init", str(tmp_path / "u"), "--source", "openclaw", "--source", "claude_code")
    assert [s.kind for s in load_config(tmp_path / "u", env={}).settings.sources] == [
        "openclaw",
        "claude_code",
    ]


@pytest.mark.parametrize(
    ("answer", "kinds"),
    [
        ("claude_code\n", ["claude_code"]),
        ("both\n", ["openclaw", "claude_code"]),
        ("\n", []),
        ("telegram\n", None),  # a bad answer: a usage error, and nothing made
    ],
)
def test_at_a_terminal_init_asks_which_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, kinds: list[str] | None
) -> None:
    from typer.testing import CliRunner

    from crustacean.cli import init_cmd
    from crustacean.cli.app import app

    home = tmp_path / "home"
    (home / ".openclaw/agents/main/sessions").mkdir(parents=True)
    (home / ".claude/projects").mkdir(parents=True)
    monkeypatch.setattr(init_cmd, "_interactive", lambda: True)
    result = CliRunner().invoke(app, ["init", str(tmp_path / "w")], input=answer)
    assert "Collect which? (openclaw, claude_code, both, none)" in result.output
    if kinds is None:
        assert result.exit_code == 2 and not (tmp_path / "w").exists()
        assert "answer one of openclaw, claude_code, both, none, not 'telegram'" in result.output
        return
    assert result.exit_code == 0, result.output
    assert [s.kind for s in load_config(tmp_path / "w", env={}).settings.sources] == kinds


def test_an_openclaw_workspace_takes_only_openclaws_transcripts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".openclaw/agents/main/sessions").mkdir(parents=True)
    (home / ".claude/projects").mkdir(parents=True)
    run_cli("init", str(home / ".openclaw/workspace"))
    sources = load_config(home / ".openclaw/workspace", env={}).settings.sources
    assert [s.kind for s in sources] == ["openclaw"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "telegram"], "unknown --source 'telegram'; use openclaw or claude_code"),
        (["--source", "openclaw", "--no-detect"], "--source names the sources to add"),
        (["--sample", "--source", "openclaw"], "--sample uses its own layout and sources"),
        (["--sample", "--daily-dir", "daily"], "its own layout and sources; drop --daily-dir"),
        (["--daily-dir", "weekly"], "Error: --daily-dir must be root or daily"),
    ],
)
def test_bad_options_are_usage_errors_and_create_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_cli("init", str(tmp_path / "w"), *args, code=2)
    assert message in result.output
    assert not (tmp_path / "w").exists()


def test_adopting_adds_no_template_an_agent_would_load(tmp_path: Path) -> None:
    root = tmp_path / "oc"
    root.mkdir()
    (root / "SOUL.md").write_text("# Soul\nI am Otto.\n")
    (root / "memory").mkdir()
    (root / "memory/2026-11-29.md").write_text("- hello\n")
    result = run_cli("init", str(root))
    for name in ("IDENTITY.md", "TOOLS.md", "USER.md", "AGENTS.md", "MEMORY.md"):
        assert not (root / name).exists(), name
    assert (root / "SOUL.md").read_text() == "# Soul\nI am Otto.\n"
    assert (root / "memory/README.md").is_file() and (root / "crustacean.toml").is_file()
    out = " ".join(result.stdout.split())
    assert "no AGENTS.md, IDENTITY.md, USER.md, TOOLS.md, MEMORY.md template was added" in out


V1 = Path(__file__).parent / "fixtures/pipeline-v1"  # two docs as version 1 shipped them


def test_init_upgrades_unedited_docs_and_proposes_over_edited_ones(tmp_path: Path) -> None:
    import json

    from crustacean.ops.system_docs import shipped_hashes, upgrade_docs
    from crustacean.store.proposals import list_proposals
    from crustacean.store.review import diff
    from crustacean.store.write import Store
    from crustacean.workspace import Workspace, data_dir

    root = tmp_path / "w"
    run_cli("init", str(root))
    system = root / "memory/.system"
    shipped = {n: (data_dir("pipeline") / n).read_bytes() for n in PIPELINE_DOCS}
    old = {n: json.dumps(v) for n, v in shipped_hashes().items()}
    assert all('"1"' in old[n] for n in PIPELINE_DOCS)
    # a workspace from version 1: docs as shipped then, and one the user tuned
    v1 = {n: (V1 / n).read_bytes() for n in ("COMPILE.md", "CURATE.md")}
    tuned = v1["CURATE.md"] + b"\n- Also: file recipes under knowledge/recipes/.\n"
    store = Store(Workspace(root, load_config(root)))
    store.write_context(
        [
            {"path": f"memory/.system/{n}", "mode": "overwrite", "content": text.decode()}
            for n, text in (("COMPILE.md", v1["COMPILE.md"]), ("CURATE.md", tuned))
        ],
        actor="user",
        message="docs as a version-1 workspace has them",
    )

    result = run_cli("init", str(root))
    assert "Updated memory/.system/COMPILE.md to the shipped version" in result.stdout
    assert "memory/.system/CURATE.md has your edits, so it was kept" in result.stdout
    assert (system / "COMPILE.md").read_bytes() == shipped["COMPILE.md"]
    assert (system / "CURATE.md").read_bytes() == tuned  # the user's edit is never overwritten
    (prop,) = list_proposals(store.ws)
    text = diff(store, prop.id)
    assert "+Version: 3" in text and "-- Also: file recipes under knowledge/recipes/." in text
    # running it again adds no second proposal and changes nothing
    before = snapshot(root)
    again = upgrade_docs(store)
    assert again.proposed == {} and again.updated == [] and snapshot(root) == before
