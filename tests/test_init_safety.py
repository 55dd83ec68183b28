"""init in a real home: the home folder is never adopted, and an adopted folder's credentials
and big files stay out of git (listed, in .gitignore's block); user edits holding a credential
are never snapshotted into history. Fake credentials are built by concatenation."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from store_helpers import git

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.errors import LimitError, SecretError
from crustacean.store.scan import BLOCK_END, BLOCK_START, check_file, with_left_out_block
from crustacean.store.write import Store
from crustacean.workspace import Workspace

AWS_ID = "AKIA" + "IOSFODNN7ABCDEFG"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "1234567890"
KEY = (
    "-----BEGIN OPENSSH " + "PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH " + "PRIVATE KEY-----\n"
)


def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.mark.parametrize(
    ("above", "named", "words", "hint"),
    [
        (False, False, "is your home folder", "crustacean init ~/agent"),
        (True, False, "holds your home folder", ""),
        (False, True, "is your home folder", ""),
    ],
    ids=["home as the current folder", "a folder above home", "home named"],
)
def test_init_refuses_the_home_folder_and_any_above_it(
    above: bool, named: bool, words: str, hint: str
) -> None:
    (home() / "notes.md").write_text("mine\n")
    os.chdir(home().parent if above else home())
    before = snapshot(home())
    result = run_cli("init", *([str(home())] if named else []), code=2)
    assert words in result.output and hint in result.output
    assert "Traceback" not in result.output
    assert snapshot(home()) == before
    assert not (home() / ".git").exists() and not (home().parent / "crustacean.toml").exists()


def test_init_without_a_folder_in_a_folder_of_its_own_adopts_it() -> None:
    agent = home() / "agent"
    agent.mkdir()
    os.chdir(agent)
    run_cli("init")
    assert (agent / "crustacean.toml").is_file()


def test_adopting_a_folder_leaves_keys_and_big_files_out_of_git() -> None:
    agent = home() / "agent"
    (agent / ".ssh").mkdir(parents=True)
    (agent / ".ssh/id_ed25519").write_text(KEY)
    (agent / ".ssh/id_ed25519.pub").write_text("ssh-ed25519 AAAAC3Nza user@host\n")
    (agent / ".env").write_text(f"AWS_ACCESS_KEY_ID={AWS_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
    (agent / "model.bin").write_bytes(os.urandom(5 * 1024 * 1024))
    (agent / "MEMORY.md").write_text("# Memory\n\n- the user likes tea\n")
    before = {p: (agent / p).read_bytes() for p in (".ssh/id_ed25519", ".env", "MEMORY.md")}

    result = run_cli("init", str(agent))

    tracked = git(agent, "ls-files").split()
    assert "MEMORY.md" in tracked and ".ssh/id_ed25519.pub" in tracked
    for left in (".ssh/id_ed25519", ".env", "model.bin"):
        assert left not in tracked, left
        assert left in result.output, left
        assert git(agent, "log", "--all", "--format=%H", "--", left) == ""  # not in history
    out = " ".join(result.output.split())
    assert "Left out of git (3" in out
    assert "model.bin: 5.0 MB, over store.max_snapshot_bytes (1.0 MB)" in out
    assert ".env: looks like a credential (AWS access key id, line 1)" in out
    assert ".ssh/id_ed25519: a credential file by its name" in out
    assert AWS_ID not in result.output and AWS_SECRET not in result.output
    ignore = (agent / ".gitignore").read_text()
    assert BLOCK_START in ignore and BLOCK_END in ignore
    assert "/.env\n" in ignore and "/model.bin\n" in ignore and ".crustacean/" in ignore
    assert git(agent, "status", "--porcelain") == ""  # nothing left dangling either
    assert {p: (agent / p).read_bytes() for p in before} == before  # every byte kept


def test_an_adopted_gitignore_keeps_its_lines_and_gains_the_block() -> None:
    agent = home() / "agent"
    agent.mkdir()
    (agent / ".gitignore").write_text("node_modules/\n*.log\n")
    (agent / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n")
    run_cli("init", str(agent))
    text = (agent / ".gitignore").read_text()
    assert text.startswith("node_modules/\n*.log\n")
    assert "/.env" in text
    assert ".env" not in git(agent, "ls-files").split()


def test_block_is_replaced_not_repeated() -> None:
    once = with_left_out_block("a\n", ["x y", "[b]"])
    twice = with_left_out_block(once, ["x y", "c"])
    assert twice.count(BLOCK_START) == 1
    assert twice.startswith("a\n\n")
    assert "/x\\ y\n/\\[b\\]\n/c\n" in twice


@pytest.mark.parametrize(
    ("path", "data", "kind"),
    [
        ("id_rsa", b"anything", "credential"),
        ("certs/server.pem", b"x", "credential"),
        (".netrc", b"machine x", "credential"),
        ("big.md", b"a" * 2000, "size"),
        ("notes.md", f"aws {AWS_ID}\n".encode(), "credential"),
        ("notes.md", b"# plain prose about passwords and tokens\n", None),
        ("id_rsa.pub", b"ssh-rsa AAAA", None),
        ("image.png", b"\x89PNG\0" + AWS_ID.encode(), None),
    ],
)
def test_check_file_table(path: str, data: bytes, kind: str | None) -> None:
    found = check_file(path, data, 1000)
    assert (found.kind if found else None) == kind
    if found:
        assert AWS_ID not in found.reason


def _dirty_write(ws: Workspace, content: str) -> tuple[Store, Path]:
    store = Store(ws)
    store.write_context(
        [{"path": "memory/notes/x.md", "mode": "create", "content": "# x\n\n- one\n"}],
        actor="user",
        message="start",
    )
    full = ws.root / "memory/notes/x.md"
    full.write_text(content)
    return store, full


def add_two(store: Store) -> None:
    """Curate's append to the file the user left dirty."""
    change = {"path": "memory/notes/x.md", "mode": "append", "content": "- two\n"}
    store.write_context([change], actor="curate", message="add two")


def test_no_snapshot_commits_user_edits_holding_a_credential(ws: Workspace) -> None:
    store, full = _dirty_write(ws, f"# x\n\n- one\n- aws {AWS_ID}\n")
    head = git(ws.root, "rev-parse", "HEAD")
    with pytest.raises(SecretError) as err:
        add_two(store)
    assert "memory/notes/x.md has uncommitted edits" in str(err.value)
    assert "AWS access key id, line 4" in str(err.value) and AWS_ID not in str(err.value)
    assert git(ws.root, "rev-parse", "HEAD") == head
    assert AWS_ID in full.read_text()  # the user's file is as they left it


def test_no_snapshot_commits_a_file_over_the_size_limit(tmp_path: Path) -> None:
    root = tmp_path / "w"
    run_cli("init", str(root), "--no-detect")
    toml = root / "crustacean.toml"  # init writes the default commented out
    toml.write_text(
        re.sub(r"(?m)^(# )?max_snapshot_bytes = \d+", "max_snapshot_bytes = 100", toml.read_text())
    )
    ws = Workspace(root, load_config(root))
    _, full = _dirty_write(ws, "# x\n\n" + "- line\n" * 40)
    with pytest.raises(LimitError, match=r"over store\.max_snapshot_bytes"):
        add_two(Store(ws))
    assert full.read_text().count("- line") == 40


def test_an_init_stopped_before_its_baseline_commits_it_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: Ctrl-C during the adoption, then `init` again: the user's files were never
    committed, so "the state before crustacean" could not be restored."""
    from crustacean.store.versions import Git

    root = tmp_path / "agent"
    (root / "notes").mkdir(parents=True)
    for i in range(30):
        (root / f"notes/day-{i:02d}.md").write_text(f"# Day {i}\n\nThe user's own words.\n")

    def pressed(self: Git, **kw: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(Git, "commit_all", pressed)
        stopped = run_cli("init", str(root), code=130)
    assert stopped.output == (
        "Interrupted; init stopped part way; run the same `crustacean init` again to finish it.\n"
    )
    assert (root / ".git").is_dir()  # the repository was made, with no commit
    out = run_cli("init", str(root))
    assert "Committed the files that were already here as the baseline." in out.stdout
    first = git(root, "rev-list", "--max-parents=0", "HEAD").strip()
    assert "baseline of the files already here" in git(root, "log", "-1", "--format=%s", first)
    tree = git(root, "ls-tree", "-r", "--name-only", first).split()
    assert [p for p in tree if p.startswith("notes/")] == [
        f"notes/day-{i:02d}.md" for i in range(30)
    ]


def test_init_source_on_an_existing_workspace_adds_the_source(ws: Workspace) -> None:
    """Before: `init --source KIND` on a workspace was silently ignored."""
    out = run_cli("init", str(ws.root), "--source", "claude_code")
    assert "Added the --source table(s) to crustacean.toml." in out.stdout
    sources = load_config(ws.root).settings.sources
    assert [s.kind for s in sources] == ["claude_code"]
    assert git(ws.root, "status", "--porcelain") == ""  # added as a version
    again = run_cli("init", str(ws.root), "--source", "claude_code")
    assert "Added the --source" not in again.stdout
    assert len(load_config(ws.root).settings.sources) == 1


def test_init_source_refuses_naming_the_table_when_the_file_cannot_take_it(
    ws: Workspace,
) -> None:
    toml = ws.root / "crustacean.toml"
    toml.write_text('sources = [{kind = "plain", path = "notes"}]\n' + toml.read_text())
    git(ws.root, "-c", "user.name=Ada", "-c", "user.email=ada@example.org", "commit", "-qam", "x")
    before = snapshot(ws.root)
    out = run_cli("init", str(ws.root), "--source", "claude_code", code=2)
    assert out.output.startswith(
        "Error: crustacean.toml exists and cannot take a [[sources]] table as it is; add this "
        'to it by hand:\n[[sources]]\nkind = "claude_code"\npath = "'
    )
    assert snapshot(ws.root) == before
