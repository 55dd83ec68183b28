"""The write layer next to the user's own git, editor and hostile input (issue 19).

Every test goes through the real CLI (in-process or as a child process) or a real MCP session,
against real git in tmp_path, and shows both the message and that nothing was lost.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import KILL_AT
from store_helpers import user_git as git
from test_mcp import call, payload

from conftest import run_cli, snapshot
from crustacean.errors import VersionError
from crustacean.store import versions
from crustacean.store.versions import Git
from crustacean.store.write import Store
from crustacean.workspace import Workspace

EXE = str(Path(sys.executable).parent / "crustacean")


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "-w", str(root), *args], capture_output=True, text=True, timeout=120
    )


def user_commits_user_md(root: Path) -> None:
    """What the issue reproduced: the user edits USER.md and commits just that file."""
    with (root / "USER.md").open("a") as fh:
        fh.write("- Prefers tea.\n")
    git(root, "add", "USER.md")
    git(root, "commit", "-q", "-m", "my own edit")


def mcp_append(ws: Workspace, path: str, text: str, message: str = "note") -> object:
    changes = [{"path": path, "mode": "append", "content": text}]
    (result,) = call(ws, ("write_context", {"message": message, "changes": changes}))
    return result


# ------------------------------------------------------------------ 1. commit and index


HOLD_LOCK = """
import os, sys, time
lock, owner = sys.argv[1], sys.argv[2]
fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
print("held", flush=True)
if sys.argv[3] == "release":  # like a git command finishing once crustacean waits on it
    while not os.path.exists(owner):
        time.sleep(0.01)
    os.close(fd)
    os.unlink(lock)
else:
    sys.stdin.read()  # held until the test closes our stdin
"""


def hold_index_lock(ws: Workspace, how: str) -> subprocess.Popen[str]:
    lock = ws.root / ".git/index.lock"
    owner = ws.state_dir / versions.LOCK_OWNER
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock), str(owner), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_write_waits_for_the_users_index_lock_and_their_next_commit_keeps_it(
    ws: Workspace,
) -> None:
    holder = hold_index_lock(ws, "release")
    out = cli(ws.root, "remember", "tea", "Alice drinks green tea.")
    holder.wait(timeout=60)
    assert out.returncode == 0, out.stderr
    assert git(ws.root, "diff", "--cached", "--name-only") == ""  # index == HEAD
    user_commits_user_md(ws.root)
    assert "green tea" in git(ws.root, "show", "HEAD:memory/lessons/tea.md")
    assert git(ws.root, "status", "--porcelain") == ""


def test_a_live_index_lock_fails_clearly_naming_it_and_writes_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(versions, "INDEX_LOCK_WAIT", 0.3)
    holder = hold_index_lock(ws, "hold")
    try:
        before = snapshot(ws.root)
        out = run_cli("-w", str(ws.root), "remember", "tea", "Green tea.", code=75)
        assert "index lock" in out.stderr and ".git/index.lock" in out.stderr
        assert "waited 0.3 s" in out.stderr and "Traceback" not in out.output
        after = snapshot(ws.root)
        assert {k: v for k, v in after.items() if k != ".git/index.lock"} == {
            k: v for k, v in before.items() if k != ".git/index.lock"
        }
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_stale_index_lock_is_cleared_with_a_log_line(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    (ws.root / ".git/index.lock").write_bytes(b"")  # a killed git left it; nobody owns it
    run_cli("-w", str(ws.root), "remember", "tea", "Green tea.")
    assert "removed a stale" in caplog.text and "index.lock" in caplog.text
    assert not (ws.root / ".git/index.lock").exists()
    assert git(ws.root, "diff", "--cached", "--name-only") == ""


def killed_cli(root: Path, point: str, *args: str) -> None:
    """Run a CLI write in a child that SIGKILLs itself at a store fault point."""
    script = KILL_AT.format(point=point, argv=[EXE, "-w", str(root), *args])
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert (root / ".crustacean/journal.json").exists()


def test_a_kill_between_the_index_and_heads_move_is_repaired_by_the_next_write(
    ws: Workspace,
) -> None:
    """The index takes a version before HEAD names it (issue 32): a kill between leaves HEAD
    behind the index, never ahead; the next write undoes the unacknowledged call."""
    from crustacean.store.apply import INDEX_SYNC

    killed_cli(ws.root, INDEX_SYNC, "remember", "tea", "Alice drinks green tea.")
    assert "tea.md" not in git(ws.root, "ls-tree", "-r", "--name-only", "HEAD")  # not yet
    assert "tea.md" in git(ws.root, "diff", "--cached", "--name-only")  # the index has it
    run_cli("-w", str(ws.root), "remember", "coffee", "Bob drinks coffee.")  # the next run
    assert git(ws.root, "diff", "--cached", "--name-only") == ""
    user_commits_user_md(ws.root)
    assert "coffee" in git(ws.root, "show", "HEAD:memory/lessons/coffee.md")
    assert not (ws.root / "memory/lessons/tea.md").exists()  # never acknowledged: undone
    assert git(ws.root, "status", "--porcelain") == ""


# ------------------------------------------------------------------ 2. mid-merge, detached


def conflicted(ws: Workspace, how: str) -> None:
    """Put the repository in the middle of `how`, with MEMORY.md in conflict where it can be."""
    root = ws.root
    main = git(root, "symbolic-ref", "--short", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "other")
    (root / "MEMORY.md").write_text("# Memory\n- theirs\n")
    git(root, "commit", "-q", "-am", "theirs")
    git(root, "checkout", "-q", main)
    (root / "MEMORY.md").write_text("# Memory\n- ours\n")
    git(root, "commit", "-q", "-am", "ours")
    command = {
        "merge": ["merge", "other"],
        "rebase": ["rebase", "other"],
        "cherry-pick": ["cherry-pick", "other"],
        "revert": ["revert", "--no-edit", "HEAD"],
        "bisect": ["bisect", "start"],
        "detached": ["checkout", "-q", "--detach"],
    }[how]
    if how == "revert":  # a revert conflicts when a later commit touched the same lines
        (root / "MEMORY.md").write_text("# Memory\n- ours, later\n")
        git(root, "commit", "-q", "-am", "later")
        command = ["revert", "--no-edit", "HEAD~1"]
    git(root, *command, check=how in ("bisect", "detached"))


WHAT = {
    "merge": "a merge",
    "rebase": "a rebase",
    "cherry-pick": "a cherry-pick",
    "revert": "a revert",
    "bisect": "a bisect",
    "detached": "HEAD is detached",
}


@pytest.mark.parametrize("how", list(WHAT))
def test_no_write_mid_merge_rebase_or_on_a_detached_head(ws: Workspace, how: str) -> None:
    conflicted(ws, how)
    before = snapshot(ws.root)
    index = (ws.root / ".git/index").read_bytes()
    unmerged = git(ws.root, "ls-files", "-u")
    out = run_cli("-w", str(ws.root), "remember", "tea", "Green tea.", code=2)
    assert WHAT[how] in out.stderr and "nothing was written" in out.stderr
    result = mcp_append(ws, "MEMORY.md", "- acknowledged?\n")
    assert result.is_error and WHAT[how] in result.content[0].text  # type: ignore[attr-defined]  # errors are text
    # the repository is left exactly as the user had it: files, conflict, index, refs
    assert snapshot(ws.root) == before
    assert (ws.root / ".git/index").read_bytes() == index
    assert git(ws.root, "ls-files", "-u") == unmerged
    if how == "merge":
        assert unmerged and "<<<<<<<" in (ws.root / "MEMORY.md").read_text()
        git(ws.root, "merge", "--abort")
        assert (ws.root / "MEMORY.md").read_text() == "# Memory\n- ours\n"


def test_proposals_still_queue_mid_merge(ws: Workspace) -> None:
    conflicted(ws, "merge")
    soul = (ws.root / "SOUL.md").read_bytes()
    result = mcp_append(ws, "SOUL.md", "- Be kind.\n")
    assert payload(result)["proposal"] == 1
    assert (ws.root / "SOUL.md").read_bytes() == soul
    out = run_cli("-w", str(ws.root), "review", "approve", "1", code=2)  # approving waits too
    assert "a merge" in out.stderr
    git(ws.root, "merge", "--abort")
    run_cli("-w", str(ws.root), "review", "approve", "1")
    assert (ws.root / "SOUL.md").read_text().endswith("- Be kind.\n")


# ------------------------------------------------------------------ 3. crash repair


def test_a_hand_edit_made_after_a_crash_survives_repair(ws: Workspace) -> None:
    run_cli("-w", str(ws.root), "remember", "tea", "Alice drinks green tea.")
    lesson = ws.root / "memory/lessons/tea.md"
    killed_cli(ws.root, "first", "remember", "tea", "Alice drinks oolong now.")
    assert "oolong" in lesson.read_text()  # written, never committed
    edited = lesson.read_text() + "\nA hand edit after the crash.\n"
    lesson.write_text(edited)
    run_cli("-w", str(ws.root), "remember", "coffee", "Bob drinks coffee.")  # repairs first
    assert lesson.read_text() == edited  # kept, not rolled back
    assert git(ws.root, "show", "HEAD~1:memory/lessons/tea.md") == edited  # and versioned
    log = git(ws.root, "log", "-2", "--format=%an|%s")
    assert "crustacean user|snapshot of edits made after an interrupted write" in log
    assert git(ws.root, "status", "--porcelain") == ""


# ------------------------------------------------------------------ 4. file modes


def test_writes_keep_each_files_mode_and_new_files_get_the_umask(ws: Workspace) -> None:
    script = ws.root / "memory/notes/run.md"
    script.write_text("# run\n")
    script.chmod(0o755)
    git(ws.root, "add", "memory/notes/run.md")
    git(ws.root, "commit", "-q", "-m", "an executable note")
    old = os.umask(0o027)
    try:
        wrote = mcp_append(ws, "memory/notes/run.md", "- step\n")
        changes = [{"path": "memory/notes/new.md", "mode": "create", "content": "new\n"}]
        (made,) = call(ws, ("write_context", {"message": "new", "changes": changes}))
    finally:
        os.umask(old)
    assert payload(wrote)["version"] and payload(made)["version"]
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert git(ws.root, "ls-files", "-s", "memory/notes/run.md").startswith("100755")
    assert stat.S_IMODE((ws.root / "memory/notes/new.md").stat().st_mode) == 0o640


# ------------------------------------------------------------------ 5. secrets


KEY = "AKIA" + "QWERTYUIOPASDF27"  # an AWS access key id shape, built so no scanner trips here


def test_a_key_in_the_message_the_path_or_spliced_by_an_edit_is_refused(ws: Workspace) -> None:
    note = "memory/notes/ids.md"
    (first,) = call(
        ws,
        (
            "write_context",
            {
                "message": "ids",
                "changes": [{"path": note, "mode": "create", "content": f"id {KEY[:10]} end\n"}],
            },
        ),
    )
    assert payload(first)["version"]
    before = snapshot(ws.root)
    attempts = [
        {
            "message": f"add {KEY}",
            "changes": [{"path": note, "mode": "append", "content": "- fine\n"}],
        },
        {
            "message": "a file",
            "changes": [{"path": f"memory/notes/{KEY}.md", "mode": "create", "content": "x\n"}],
        },
        {
            "message": "splice",
            "changes": [{"path": note, "mode": "edit", "old": " end", "new": KEY[10:]}],
        },
    ]
    results = call(ws, *[("write_context", a) for a in attempts])
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results), texts
    assert "the version message looks like a credential" in texts[0]
    assert "the path of changes[0] looks like a credential" in texts[1]
    assert f"line 1 of {note} as this change would leave it" in texts[2]
    assert all(KEY not in t and KEY[10:] not in t for t in texts)  # never echoed
    assert snapshot(ws.root) == before
    assert KEY not in git(ws.root, "log", "--all", "--format=%B")


def test_a_key_the_user_already_had_in_a_file_does_not_block_other_edits(ws: Workspace) -> None:
    note = ws.root / "memory/notes/ids.md"
    note.write_text(f"# ids\nmine: {KEY}\n")
    git(ws.root, "add", "memory/notes/ids.md")
    git(ws.root, "commit", "-q", "-m", "mine")
    assert payload(mcp_append(ws, "memory/notes/ids.md", "- another line\n"))["version"]


# ------------------------------------------------------------------ 6. terminal output


def test_review_diff_and_history_escape_control_characters_and_markup(ws: Workspace) -> None:
    message = "\x1b[2Kharmless [bold red]APPROVE NOW[/] \x9b1A\r"
    changes = [{"path": "SOUL.md", "mode": "append", "content": "- Be kind.\x1b[2K\x1b[1A\n"}]
    (queued,) = call(ws, ("write_context", {"message": message, "changes": changes}))
    assert payload(queued)["proposal"] == 1
    root = str(ws.root)
    outputs = [
        run_cli("-w", root, "review").stdout,
        run_cli("-w", root, "review", "show", "1").stdout,
    ]
    run_cli("-w", root, "review", "approve", "1")
    outputs += [run_cli("-w", root, "history").stdout, run_cli("-w", root, "show", "HEAD").stdout]
    for out in outputs:
        assert "\x1b" not in out and "\x9b" not in out and "\r" not in out, out
    assert all("\\x1b[2K" in out for out in outputs)
    for out in (outputs[0], outputs[1], outputs[2]):
        assert "[bold red]APPROVE NOW[/]" in out  # shown as typed, never rendered
    assert "- Be kind.\\x1b[2K\\x1b[1A" in outputs[1]  # the diff too


# ------------------------------------------------------------------ 7. frontmatter bombs


BOMB = (
    "---\n"
    + "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    + "---\nA tiny note with a bomb on top.\n"
)


def test_an_alias_bomb_is_reported_over_the_limit_not_parsed(ws: Workspace) -> None:
    bomb = ws.root / "memory/notes/bomb.md"
    bomb.write_text(BOMB)
    assert len(BOMB) < 1024  # nine levels of nine: 387 million values once expanded
    before = snapshot(ws.root)
    run_cli("-w", str(ws.root), "tier", "set", "memory/notes/bomb.md", "hot")  # kept in state.db
    assert snapshot(ws.root)["memory/notes/bomb.md"] == before["memory/notes/bomb.md"]
    health = run_cli("-w", str(ws.root), "health")
    assert "memory/notes/bomb.md" in health.stdout and "over the limit" in health.stdout
    run_cli("-w", str(ws.root), "compile", "--no-model")  # the run the bomb used to stall
    assert snapshot(ws.root)["memory/notes/bomb.md"] == before["memory/notes/bomb.md"]
    found = run_cli("-w", str(ws.root), "search", "tiny note", "--json")
    assert "over the limit" in found.stderr and "memory/notes/bomb.md" in found.stdout


def test_a_self_referencing_alias_is_over_the_depth_limit(ws: Workspace) -> None:
    from crustacean.documents import parse_document

    doc = parse_document("---\na: &a [*a]\n---\nbody\n", "memory/notes/loop.md")
    assert doc.meta == {} and doc.warning and "deeper than 64 levels" in doc.warning


# ------------------------------------------------------------------ 8. no silent unversioned


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository another owner")
def test_dubious_ownership_fails_loudly_and_says_how_to_fix_it(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))  # never the real global config
    for path in [ws.root, *ws.root.rglob("*")]:
        os.lchown(path, 4242, 4242)
    before = snapshot(ws.root)
    out = run_cli("-w", str(ws.root), "remember", "tea", "Green tea.", code=2)
    fix = f"git config --global --add safe.directory {ws.root}"
    assert "dubious ownership" in out.stderr and fix in out.stderr
    assert "nothing was written" in out.stderr and snapshot(ws.root) == before
    result = mcp_append(ws, "MEMORY.md", "- a line\n")
    assert result.is_error and fix in result.content[0].text  # type: ignore[attr-defined]  # errors are text
    assert fix in run_cli("-w", str(ws.root), "history", code=2).stderr
    subprocess.run(["git", "config", "--global", "--add", "safe.directory", str(ws.root)])
    run_cli("-w", str(ws.root), "remember", "tea", "Green tea.")
    assert "Green tea" in git(ws.root, "show", "HEAD:memory/lessons/tea.md")


def test_signing_is_honoured_and_a_failing_signer_refuses_the_write(ws: Workspace) -> None:
    signer = ws.root.parent / "fake-gpg"
    signer.write_text(
        "#!/bin/sh\ncat >/dev/null\necho '[GNUPG:] SIG_CREATED ' >&2\n"
        "printf -- '-----BEGIN PGP SIGNATURE-----\\nfake\\n-----END PGP SIGNATURE-----\\n'\n"
    )
    signer.chmod(0o755)
    git(ws.root, "config", "commit.gpgsign", "true")
    git(ws.root, "config", "gpg.program", str(signer))
    run_cli("-w", str(ws.root), "remember", "tea", "Green tea.")
    assert "gpgsig -----BEGIN PGP SIGNATURE-----" in git(ws.root, "cat-file", "commit", "HEAD")
    git(ws.root, "config", "gpg.program", "false")
    before = snapshot(ws.root)
    out = run_cli("-w", str(ws.root), "remember", "coffee", "Coffee.", code=2)
    assert "git commit failed: error: gpg failed to sign the data" in out.stderr
    assert snapshot(ws.root) == before  # the files are put back; no version, no change


# ------------------------------------------------------------------ 9. the smaller ones


def test_moving_onto_a_foundation_file_is_refused_not_proposed(ws: Workspace) -> None:
    changes = [{"path": "crustacean.toml", "mode": "move", "to": "USER.md"}]
    (result,) = call(ws, ("write_context", {"message": "mv", "changes": changes}))
    assert result.is_error and "'to'" in result.content[0].text  # MCP is offered no move
    assert not (ws.state_dir / "proposals").exists()


def test_an_edit_cannot_take_memory_md_past_its_line_cap(ws: Workspace) -> None:
    memory = ws.root / "MEMORY.md"
    memory.write_text("# Memory\n" + "x" * 3000 + "\n")
    git(ws.root, "commit", "-q", "-am", "a long line")
    before = snapshot(ws.root)
    changes = [{"path": "MEMORY.md", "mode": "edit", "old": "x" * 3000, "new": "- y\n" * 600}]
    (result,) = call(ws, ("write_context", {"message": "split", "changes": changes}))
    assert result.is_error and "MEMORY.md would be 602 lines" in result.content[0].text
    assert snapshot(ws.root) == before


def test_reserved_folders_in_any_case_are_refused(ws: Workspace) -> None:
    for path in (".Crustacean/state.md", ".CRUSTACEAN/x.md"):
        changes = [{"path": path, "mode": "create", "content": "x\n"}]
        (result,) = call(ws, ("write_context", {"message": "x", "changes": changes}))
        assert result.is_error and "which crustacean never writes" in result.content[0].text


def test_one_invalid_byte_does_not_hide_a_daily_log_from_context(ws: Workspace) -> None:
    from datetime import UTC, datetime

    log = ws.root / ws.daily_log(ws.today(datetime.now(UTC)))
    log.write_bytes(b"# today\n- met Alice at the caf\xe9 by the pier\n")
    out = run_cli("-w", str(ws.root), "context")
    assert "met Alice at the caf\ufffd by the pier" in out.stdout


def test_a_running_mcp_server_reads_mcp_write_on_every_call(ws: Workspace) -> None:
    import anyio
    from mcp import Client

    from crustacean.mcp_server import build_server

    def change(name: str) -> dict[str, object]:
        content = {"path": f"memory/notes/{name}.md", "mode": "create", "content": "n\n"}
        return {"message": name, "changes": [content]}

    async def main() -> list[object]:
        async with Client(build_server(ws)) as client:
            first = await client.call_tool("write_context", change("one"))
            toml = ws.root / "crustacean.toml"
            text = toml.read_text()
            assert "[mcp]\n" in text
            toml.write_text(text.replace("[mcp]\n", '[mcp]\nwrite = "off"\n', 1))
            return [first, await client.call_tool("write_context", change("two"))]

    first, second = anyio.run(main)
    assert payload(first)["version"]
    assert second.is_error and "memory.write is off" in second.content[0].text  # type: ignore[attr-defined]  # errors are text
    assert not (ws.root / "memory/notes/two.md").exists()


def test_status_escapes_workspace_text_in_a_run_error(ws: Workspace) -> None:
    from datetime import UTC, datetime

    from crustacean.runs import RunRecorder

    with RunRecorder(ws, "curate", clock=lambda: datetime.now(UTC)) as rec:
        rec.finish("failed", error="WriteError: [red]x[/red] \x1b[2Kgone")
    out = run_cli("-w", str(ws.root), "status").stdout
    assert "\x1b" not in out and "[red]x[/red] \\x1b[2K" in out


def _new_secret_wide(old: bytes, new: bytes) -> str | None:
    """The reference: the kinds in the whole files, before against after (a kind found more
    often after than before is new)."""
    from collections import Counter

    from crustacean.secrets import find_secrets

    before = Counter(f.kind for f in find_secrets(old.decode()))
    after = Counter(f.kind for f in find_secrets(new.decode()))
    return next((k for k in after if after[k] > before[k]), None)


_SECRET_LINES = [
    "# ids\n",
    f"mine: {KEY}\n",
    f"id {KEY[:10]}",
    f"{KEY[10:]} end\n",
    "tier: cold\n",
    "token = 0123456789abcdef0123456789abcdef\n",
    "- plain line\n",
    "\n",
]


@given(
    before=st.lists(st.sampled_from(_SECRET_LINES), max_size=8),
    after=st.lists(st.sampled_from(_SECRET_LINES), max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_only_the_changed_lines_are_scanned_and_the_verdict_is_the_whole_files(
    before: list[str], after: list[str]
) -> None:
    """Without a PEM block nearby, _new_secret reads only the changed lines; it refuses exactly
    when the whole files hold more credentials of a kind after the change than before."""
    from crustacean.store.plan import _new_secret

    old, new = "".join(before).encode(), "".join(after).encode()
    assert (_new_secret(old, new)[1] is None) == (_new_secret_wide(old, new) is None)


def test_a_large_commit_packs_its_blobs_and_holds_what_git_add_would(
    ws: Workspace, tmp_path: Path
) -> None:
    """From versions.PACK_FROM files a commit's plain blobs go into one pack; an executable, a
    symlink, a file git converts (a `.gitattributes` line-ending rule), a deleted file go the
    usual way, and the tree is the one `git add` of the same files gives."""
    root = ws.root
    (root / ".gitattributes").write_text("*.txt text eol=lf\n")
    git(root, "add", ".gitattributes")
    git(root, "commit", "-q", "-m", "attributes")
    (root / "memory/notes/gone.md").write_text("soon gone\n")
    git(root, "add", "memory/notes/gone.md")
    git(root, "commit", "-q", "-m", "gone")
    paths = []
    for i in range(versions.PACK_FROM + 6):
        rel = f"memory/notes/n{i:03}.md"
        (root / rel).write_text(f"note {i}\n")
        paths.append(rel)
    (root / "memory/notes/tool.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "memory/notes/tool.sh", 0o755)
    (root / "memory/notes/crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    os.symlink("n000.md", root / "memory/notes/link.md")
    (root / "memory/notes/gone.md").unlink()
    paths += [f"memory/notes/{n}" for n in ("tool.sh", "crlf.txt", "link.md", "gone.md")]
    packs = set((root / ".git/objects/pack").glob("*.pack"))
    commit = versions.Git(root).commit_paths(paths, actor="user", message="many", trailers={})
    assert set((root / ".git/objects/pack").glob("*.pack")) - packs  # one new pack
    ours = git(root, "rev-parse", f"{commit}^{{tree}}").strip()
    twin = tmp_path / "twin"
    subprocess.run(["git", "clone", "-q", str(root), str(twin)], check=True)
    git(twin, "reset", "-q", "--hard", f"{commit}~1")
    for rel in paths:
        (twin / rel).unlink(missing_ok=True)
        if os.path.lexists(root / rel):
            if (root / rel).is_symlink():
                os.symlink(os.readlink(root / rel), twin / rel)
            else:
                shutil.copy2(root / rel, twin / rel)
    git(twin, "add", "-A", "--", *paths)
    assert git(twin, "write-tree").strip() == ours
    assert git(root, "cat-file", "-p", f"{commit}:memory/notes/crlf.txt") == "one\ntwo\n"


# ------------------------------------------------------------------ 10. the version git makes

NOTE = "memory/notes/fast.md"


@pytest.fixture
def store(ws: Workspace) -> Store:
    s = Store(ws)
    s.write_context(
        [{"path": NOTE, "mode": "create", "content": "# fast\n"}], actor="user", message="setup"
    )
    return s


def append(store: Store, text: str, path: str = NOTE) -> str | None:
    change = {"path": path, "mode": "append", "content": text}
    return store.write_context([change], actor="curate", message="fast: append").version


def assert_sound(root: Path) -> None:
    """What git itself says of the repository: no error, no warning, a reflog naming HEAD."""
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=root, capture_output=True, text=True)
    said = (fsck.stdout + fsck.stderr).splitlines()
    # a commit no ref names (a kill before HEAD moved leaves one, as a killed git does), or
    # the tree of a user's index with other work staged (`git commit --only` writes it, as
    # for the user's own partial commits), is not a fault: gc prunes it
    dangling = ("dangling commit ", "dangling tree ")
    assert fsck.returncode == 0 and all(s.startswith(dangling) for s in said), said
    head = git(root, "rev-parse", "HEAD").strip()
    assert git(root, "reflog", "-n1", "--format=%H").strip() == head


def assert_index_follows_head(root: Path, path: str) -> None:
    assert (
        git(root, "ls-files", "-s", "--", path).split()[:2]
        == git(root, "ls-tree", "HEAD", "--", path).split()[0:3:2]
    )


def spy_git(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> None:
    """Record the git subcommand of every `Git.run` from now on."""
    real = Git.run

    def run(self: Git, *args: str, **kw: object):  # type: ignore[no-untyped-def]  # a spy with git's own signature
        events.append(versions._subcommand(args))
        return real(self, *args, **kw)  # type: ignore[arg-type]  # passes git's keyword arguments through

    monkeypatch.setattr(Git, "run", run)


def test_a_version_holds_the_calls_files_on_head_and_the_index_follows(store: Store) -> None:
    root = store.root
    version = append(store, "- one line\n")
    assert version == git(root, "rev-parse", "HEAD").strip()
    assert (
        git(root, "reflog", "-n1", "--format=%H %gs")
        == f"{version} crustacean curate: fast: append\n"
    )
    assert git(root, "log", "-1", "--format=%an <%ae>|%cn") == (
        "crustacean curate <crustacean@localhost>|crustacean curate\n"
    )
    assert git(root, "show", f"HEAD:{NOTE}") == "# fast\n- one line\n"
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == [NOTE]
    assert git(root, "diff", "--cached", "--name-only") == ""  # the user's index is HEAD's
    assert git(root, "status", "--porcelain") == ""
    assert_index_follows_head(root, NOTE)
    assert_sound(root)
    assert not [p for p in (root / ".crustacean").iterdir() if p.name.startswith("index-")]


def _staged_other(root: Path) -> None:
    (root / "USER.md").write_text("staged by the user\n")
    git(root, "add", "USER.md")


def _intent_to_add(root: Path) -> None:
    (root / "later.md").write_text("not yet\n")
    git(root, "add", "-N", "later.md")


STATES = {
    "staged-other-file": _staged_other,
    "assume-unchanged": lambda r: git(r, "update-index", "--assume-unchanged", NOTE),
    "skip-worktree": lambda r: git(r, "update-index", "--skip-worktree", NOTE),
    "mode-change": lambda r: (r / NOTE).chmod(0o755),
    "packed-objects": lambda r: git(r, "gc", "-q"),
    "packed-refs": lambda r: git(r, "pack-refs", "--all", "--prune"),
    "no-index": lambda r: (r / ".git/index").unlink(),
    "intent-to-add": _intent_to_add,
}


@pytest.mark.parametrize("state", list(STATES))
def test_the_version_is_the_calls_whatever_the_users_index_holds(store: Store, state: str) -> None:
    root = store.root
    append(store, "- before\n")
    STATES[state](root)
    staged = git(root, "diff", "--cached", "--name-only").split()
    before = git(root, "rev-parse", "HEAD").strip()
    append(store, "- after\n")
    assert git(root, "rev-parse", "HEAD~1").strip() == before
    assert git(root, "show", f"HEAD:{NOTE}") == (root / NOTE).read_text()
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == [NOTE]  # nothing else
    mode = git(root, "ls-tree", "HEAD", "--", NOTE).split()[0]
    assert mode == ("100755" if state == "mode-change" else "100644")
    assert_index_follows_head(root, NOTE)
    if state != "no-index":  # what the user staged stays staged, and only that
        assert git(root, "diff", "--cached", "--name-only").split() == staged
    assert_sound(root)


def test_a_linked_worktree_gets_its_versions_on_its_own_branch(
    ws: Workspace, tmp_path: Path
) -> None:
    from crustacean.config import load_config

    main = git(ws.root, "rev-parse", "HEAD").strip()
    linked = tmp_path / "linked"
    git(ws.root, "worktree", "add", "-q", "-b", "side", str(linked))
    store = Store(Workspace(linked, load_config(linked)))
    assert store.versioned
    version = append(store, "- from the linked worktree\n")
    assert git(linked, "rev-parse", "HEAD").strip() == version
    assert git(linked, "symbolic-ref", "--short", "HEAD").strip() == "side"
    assert git(ws.root, "rev-parse", "HEAD").strip() == main  # the main worktree's is as it was
    assert git(linked, "status", "--porcelain") == ""
    assert_index_follows_head(linked, NOTE)


def test_the_files_folders_are_synced_before_head_moves(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folders' fsyncs run while git works, but HEAD moves only after they are done."""
    from crustacean.store import apply as write

    events: list[str] = []
    real_sync = write.fsync_dir

    def sync(folder: Path) -> None:
        real_sync(folder)
        events.append(f"synced {folder.relative_to(store.root).as_posix()}")

    monkeypatch.setattr(write, "fsync_dir", sync)
    spy_git(monkeypatch, events)
    append(store, "- durable\n")
    assert "synced .crustacean" in events[: events.index("add")]  # the journal's
    assert events.index("synced memory/notes") < events.index("commit")


def test_a_file_that_cannot_be_written_leaves_nothing_behind(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One temp file of a call fails while the others are written at once: the error is
    raised, no file changed, no temp file and no journal is left, and no version is made."""
    from crustacean.store import apply as write

    root = store.root
    names = [f"memory/notes/n{i}.md" for i in range(4)]
    store.write_context(
        [{"path": p, "mode": "create", "content": "x\n"} for p in names],
        actor="user",
        message="setup",
    )
    before, head = snapshot(root), git(root, "rev-parse", "HEAD")
    real = write.synced_temp

    def flaky(path: Path, data: bytes, mode: int | None) -> str:
        if path.name == "n2.md":
            raise OSError(28, "No space left on device")
        return real(path, data, mode)

    monkeypatch.setattr(write, "synced_temp", flaky)
    with pytest.raises(OSError, match="No space left"):
        store.write_context(
            [{"path": p, "mode": "append", "content": "y\n"} for p in names],
            actor="curate",
            message="doomed",
        )
    assert snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == head


def test_disk_waits_run_together_and_report_every_failure() -> None:
    from crustacean.store.parallel import all_at_once, start

    assert all_at_once([lambda i=i: i * i for i in range(20)]) == [i * i for i in range(20)]
    boom = OSError("disk")

    def fail() -> int:
        raise boom

    out = all_at_once([lambda: 1, fail, lambda: 3], keep_going=True)
    assert out == [1, boom, 3]
    ran: list[int] = []
    with pytest.raises(OSError, match="disk"):
        all_at_once([lambda: ran.append(1), fail, lambda: ran.append(3)])
    assert sorted(ran) == [1, 3]  # every job ran before the error was raised
    wait = start(fail)
    with pytest.raises(OSError, match="disk"):
        wait()
    wait()  # a second wait returns at once


def test_a_config_change_is_seen_by_the_next_version_of_the_same_store(store: Store) -> None:
    """A long-lived store (the MCP server's) reads the config each version."""
    root = store.root
    append(store, "- one\n")
    git(root, "config", "i18n.commitEncoding", "ISO-8859-1")
    append(store, "- two\n")
    assert "\nencoding ISO-8859-1\n" in git(root, "cat-file", "commit", "HEAD")


def _take_the_branch_lock(root: Path) -> None:
    branch = git(root, "symbolic-ref", "HEAD").strip()
    (root / ".git" / f"{branch}.lock").write_text("another git's\n")


def _move_the_branch(root: Path) -> None:
    git(root, "update-ref", "HEAD", "HEAD~1")


def _commit_meanwhile(root: Path) -> None:
    """Another tool's commit, which needs no index (the store holds git's index lock)."""
    theirs = git(root, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "theirs").strip()
    git(root, "update-ref", "HEAD", theirs)


def race_before_the_commit(
    store: Store, monkeypatch: pytest.MonkeyPatch, race: Callable[[Path], None]
) -> list[str]:
    """Run `race` once the user's index holds the call, just before the version's
    `git commit`; returns HEAD as the other git left it (filled in then)."""
    from crustacean.store import apply as write

    head: list[str] = []

    def hook(point: str) -> None:
        if point == write.INDEX_SYNC:
            race(store.root)
            head.append(git(store.root, "rev-parse", "HEAD").strip())

    monkeypatch.setattr(write, "_FAULT_HOOK", hook)
    return head


def test_a_branch_lock_taken_meanwhile_fails_the_write_cleanly(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another git holds the branch's lock when the version is made: git refuses, the write
    fails, nothing changed (the user's index as it was), and the other git's lock is kept."""
    root = store.root
    append(store, "- one\n")
    before = (root / NOTE).read_bytes()
    head = race_before_the_commit(store, monkeypatch, _take_the_branch_lock)
    with pytest.raises(VersionError, match="git commit failed"):
        append(store, "- two\n")
    assert (root / NOTE).read_bytes() == before
    assert git(root, "rev-parse", "HEAD").strip() == head[0]
    assert git(root, "diff", "--cached", "--name-only") == ""
    assert list((root / ".git/refs/heads").glob("*.lock"))  # theirs, left alone
    assert not (root / ".crustacean/journal.json").exists()


@pytest.mark.parametrize("race", [_move_the_branch, _commit_meanwhile])
def test_a_head_moved_meanwhile_is_built_on_never_overwritten(
    store: Store, monkeypatch: pytest.MonkeyPatch, race: Callable[[Path], None]
) -> None:
    """Another tool moves HEAD (git's porcelain cannot: the store holds git's index lock)
    just before the version: `git commit` builds the version on the HEAD it finds, so what
    the other tool did is kept as the parent and nothing of its tree is reverted."""
    root = store.root
    append(store, "- one\n")
    head = race_before_the_commit(store, monkeypatch, race)
    version = append(store, "- two\n")
    assert version == git(root, "rev-parse", "HEAD").strip()
    assert git(root, "rev-parse", "HEAD~1").strip() == head[0]  # as the other git left it
    assert (
        git(root, "show", f"HEAD:{NOTE}") == (root / NOTE).read_text() == "# fast\n- one\n- two\n"
    )
    assert git(root, "diff", "--name-only", "HEAD~1", "HEAD").split() == [NOTE]
    assert_sound(root)
