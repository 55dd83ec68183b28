"""Who may write where (DESIGN.md §4): the policy table actor by actor, foundation files and the
memory.write setting, and the ask-first review queue end to end (library and `review` commands)."""

from __future__ import annotations

import json
import os

import pytest
from store_helpers import git

from conftest import run_cli, snapshot
from crustacean.config import load_config
from crustacean.errors import PolicyError, ProposalError, StaleWriteError
from crustacean.store import proposals, review
from crustacean.store.policy import ACTORS, ASK_FIRST, MODEL_ACTORS, Verdict, decide
from crustacean.store.write import Store
from crustacean.workspace import FOUNDATION_FILES, Workspace

A, K, D = Verdict.ALLOW, Verdict.ASK, Verdict.DENY
LOG = "memory/2024-05-01.md"
DLOG = "memory/daily/2024-05-01.md"
HOMES = [f"memory/{d}/x.md" for d in ("contacts", "groups", "lessons", "reminders", "notes")]
HOMES += ["memory/goals/x.md", "memory/ideas/x.md", "memory/lists/sub/x.md"]

# (actor, mode, path, to, verdict) with daily logs in memory/ (the default)
TABLE: list[tuple[str, str, str, str | None, Verdict]] = [
    # collect: daily logs only, create and append only
    ("collect", "create", LOG, None, A),
    ("collect", "append", LOG, None, A),
    ("collect", "edit", LOG, None, D),
    ("collect", "overwrite", LOG, None, D),
    ("collect", "delete", LOG, None, D),
    ("collect", "move", LOG, "archive/daily/2024-05/2024-05-01.md", D),
    ("collect", "append", DLOG, None, D),  # not the configured daily folder
    ("collect", "append", "memory/2024-05-01.txt", None, D),
    ("collect", "append", "memory/notes/2024-05-01.md", None, D),
    ("collect", "append", "memory/2024-5-1.md", None, D),
    ("collect", "append", "MEMORY.md", None, D),
    ("collect", "create", "memory/notes/x.md", None, D),
    ("collect", "create", "knowledge/x.md", None, D),
    ("collect", "create", "archive/daily/2024-05-01.md", None, D),
    # curate: create/append/edit in the memory homes, knowledge/, MEMORY.md
    *[("curate", m, p, None, A) for m in ("create", "append", "edit") for p in HOMES],
    ("curate", "create", "knowledge/topics/t.md", None, A),
    ("curate", "edit", "knowledge/README.md", None, A),
    ("curate", "append", "MEMORY.md", None, A),
    ("curate", "edit", "MEMORY.md", None, A),
    ("curate", "edit", "memory/README.md", None, A),
    ("curate", "delete", "memory/notes/x.md", None, D),
    ("curate", "move", "memory/notes/x.md", "knowledge/topics/x.md", D),
    ("curate", "overwrite", "memory/notes/x.md", None, D),
    ("curate", "overwrite", "MEMORY.md", None, D),
    ("curate", "append", LOG, None, D),
    ("curate", "create", LOG, None, D),
    ("curate", "edit", "memory/.system/CURATE.md", None, D),
    ("curate", "create", "memory/.system/NEW.md", None, D),
    ("curate", "create", "archive/lessons/x.md", None, D),
    ("curate", "create", "archive/digests/x.md", None, D),
    ("curate", "create", "projects/x.md", None, D),
    ("curate", "create", "memory/x.md", None, D),  # loose files in memory/ are not a home
    # compile: writes like curate plus digests/lessons in the archive; moves and trashes
    *[("compile", m, p, None, A) for m in ("create", "append", "edit") for p in HOMES[:3]],
    ("compile", "create", "archive/digests/2024-W18.md", None, A),
    ("compile", "create", "archive/lessons/x.md", None, A),
    ("compile", "edit", "MEMORY.md", None, A),
    ("compile", "move", "memory/notes/x.md", "archive/lessons/x.md", A),
    ("compile", "move", "memory/notes/x.md", "knowledge/topics/x.md", A),  # graduation
    ("compile", "move", "knowledge/old.md", "archive/digests/old.md", A),
    ("compile", "move", LOG, "archive/daily/2024-05/2024-05-01.md", A),
    ("compile", "delete", "memory/notes/dup.md", None, A),
    ("compile", "delete", "knowledge/empty.md", None, A),
    ("compile", "move", "memory/notes/x.md", "projects/x.md", D),
    ("compile", "move", "memory/notes/x.md", "memory/x.md", D),
    ("compile", "move", "projects/x.md", "archive/x.md", D),
    ("compile", "overwrite", "memory/notes/x.md", None, D),
    ("compile", "create", "archive/audits/x.md", None, D),
    ("compile", "append", LOG, None, D),
    ("compile", "edit", "memory/.system/COMPILE.md", None, D),
    ("compile", "delete", "memory/.system/COMPILE.md", None, D),  # "never memory/.system/"
    ("compile", "move", "memory/.system/CURATE.md", "archive/x.md", D),
    ("compile", "move", "memory/notes/x.md", "memory/.system/x.md", D),
    # calibrate: audits and lessons
    ("calibrate", "create", "archive/audits/2024-05.md", None, A),
    ("calibrate", "edit", "memory/lessons/l.md", None, D),
    ("calibrate", "append", "MEMORY.md", None, D),
    ("calibrate", "create", "archive/lessons/old.md", None, A),
    ("calibrate", "move", "memory/lessons/l.md", "archive/lessons/l.md", A),
    ("calibrate", "move", "memory/lessons/l.md", "knowledge/l.md", D),
    ("calibrate", "delete", "memory/lessons/l.md", None, D),
    ("calibrate", "edit", "memory/notes/x.md", None, D),
    ("calibrate", "create", "archive/digests/x.md", None, D),
    ("calibrate", "edit", "memory/.system/CALIBRATE.md", None, K),
    ("calibrate", "delete", "memory/.system/CALIBRATE.md", None, D),
    # mcp: daily logs and a few homes
    ("mcp", "append", LOG, None, A),
    ("mcp", "create", "memory/notes/x.md", None, A),
    ("mcp", "edit", "memory/reminders/r.md", None, A),
    ("mcp", "edit", "MEMORY.md", None, A),
    ("mcp", "edit", LOG, None, D),
    ("mcp", "create", "knowledge/x.md", None, D),
    ("mcp", "delete", "memory/notes/x.md", None, D),
    ("mcp", "overwrite", "MEMORY.md", None, D),
    # foundation files: the actor's table decides first; a content change from calibrate or MCP
    # becomes a proposal, from curate, compile or collect it is refused (issue 33); deleting or
    # moving one (or moving anything onto one) is the table's call, and no table allows it
    *[
        (a, m, f, None, K if a in ASK_FIRST else D)
        for a in MODEL_ACTORS
        for f in FOUNDATION_FILES
        for m in ("create", "append", "edit", "overwrite")
    ],
    *[(a, "delete", f, None, D) for a in MODEL_ACTORS for f in FOUNDATION_FILES],
    ("curate", "move", "memory/notes/x.md", "SOUL.md", D),
    ("compile", "move", "memory/notes/x.md", "SOUL.md", D),
    ("compile", "move", "crustacean.toml", "SOUL.md", D),
    ("compile", "move", "USER.md", "archive/USER.md", D),
    ("mcp", "move", "crustacean.toml", "USER.md", D),
    # memory/.system/ in any case is the same folder on macOS and Windows
    ("compile", "delete", "memory/.SYSTEM/COMPILE.md", None, D),
    ("compile", "move", "memory/notes/x.md", "Memory/.System/x.md", D),
    ("calibrate", "edit", "memory/.System/CALIBRATE.md", None, K),
    # the user may do anything the jail allows
    *[("user", m, p, None, A) for m in ("overwrite", "delete") for p in ("SOUL.md", LOG)],
    ("user", "edit", "memory/.system/CURATE.md", None, A),
    ("user", "move", "projects/a.md", "b.md", A),
    # unknown actors get nothing
    ("stranger", "append", LOG, None, D),
    ("", "append", LOG, None, D),
]


@pytest.fixture
def ws(copied_ws: Workspace) -> Workspace:
    return copied_ws


@pytest.mark.parametrize(("actor", "mode", "path", "to", "verdict"), TABLE)
def test_policy_table(actor: str, mode: str, path: str, to: str | None, verdict: Verdict) -> None:
    decision = decide(actor, mode, path, daily="memory", write_setting="direct", to=to)
    assert decision.verdict is verdict, decision.reason
    if verdict is not A:
        assert decision.reason  # every refusal or question says why


@pytest.mark.parametrize(
    ("actor", "mode", "path", "verdict"),
    [
        ("collect", "create", DLOG, A),
        ("collect", "append", DLOG, A),
        ("collect", "append", LOG, D),  # memory/ root is not the daily folder any more
        ("collect", "append", "memory/daily/sub/2024-05-01.md", D),
        ("mcp", "append", DLOG, A),
        ("curate", "append", DLOG, D),
        ("compile", "move", DLOG, A),
    ],
)
def test_policy_with_daily_folder(actor: str, mode: str, path: str, verdict: Verdict) -> None:
    to = "archive/daily/2024-05/2024-05-01.md" if mode == "move" else None
    decision = decide(actor, mode, path, daily="memory/daily", write_setting="direct", to=to)
    assert decision.verdict is verdict, decision.reason


ALLOWED_SAMPLES = [
    (a, m, p, t) for a, m, p, t, v in TABLE if v is A and a in MODEL_ACTORS
]  # every allowed model write in the table
DENIED_SAMPLES = [(a, m, p, t) for a, m, p, t, v in TABLE if v is D and a in MODEL_ACTORS]


@pytest.mark.parametrize(("actor", "mode", "path", "to"), ALLOWED_SAMPLES)
def test_review_setting_makes_every_allowed_model_write_ask_first(
    actor: str, mode: str, path: str, to: str | None
) -> None:
    decision = decide(actor, mode, path, daily="memory", write_setting="review", to=to)
    assert decision.verdict is K
    assert "memory.write is review" in decision.reason


def test_review_setting_keeps_denials_and_foundation_questions() -> None:
    # review never widens what an actor may do: a denied write stays denied, not a proposal
    for actor, mode, path, to in DENIED_SAMPLES:
        assert decide(actor, mode, path, daily="memory", write_setting="review", to=to).verdict is D
    for actor in MODEL_ACTORS:
        verdict = decide(actor, "edit", "SOUL.md", daily="memory", write_setting="review").verdict
        assert verdict is (K if actor in ASK_FIRST else D)


@pytest.mark.parametrize("actor", MODEL_ACTORS)
@pytest.mark.parametrize("path", [LOG, "MEMORY.md", "SOUL.md", "memory/notes/x.md"])
def test_off_setting_refuses_every_model_write(actor: str, path: str) -> None:
    decision = decide(actor, "append", path, daily="memory", write_setting="off")
    assert decision.verdict is D
    assert "memory.write is off" in decision.reason and "finish summary" in decision.reason


@pytest.mark.parametrize("setting", ["direct", "review", "off"])
def test_user_is_always_allowed(setting: str) -> None:
    assert "user" in ACTORS
    for path in ("SOUL.md", LOG, "memory/notes/x.md", "archive/trash/x.md"):
        assert decide("user", "delete", path, daily="memory", write_setting=setting).verdict is A


@pytest.mark.parametrize(
    ("actor", "mode", "path", "words"),
    [
        ("curate", "delete", "memory/notes/x.md", "curate may not delete memory/notes/x.md; it may "
         "create, append or edit there; nothing is ever deleted or overwritten by this stage."),
        ("compile", "overwrite", "memory/notes/x.md", "compile may not overwrite "
         "memory/notes/x.md; it may create, append, edit, delete or move there"),
        ("collect", "create", "knowledge/x.md", "collect may not write knowledge/x.md. Places it "
         "may write: memory/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md."),
        ("collect", "edit", LOG, "collect may not edit memory/2024-05-01.md; it may create or "
         "append there"),
    ],
)  # fmt: skip
def test_denials_say_what_the_actor_may_do(actor: str, mode: str, path: str, words: str) -> None:
    reason = decide(actor, mode, path, daily="memory", write_setting="direct").reason
    assert words in reason


# ------------------------------------------------------------------ ask-first end to end


def without_proposals(snap: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in snap.items() if not k.startswith(".crustacean/proposals/")}


SOUL_EDIT = {"path": "SOUL.md", "mode": "append", "content": "- Be kind to crabs.\n"}
NOTE_ADD = {"path": "memory/notes/crabs.md", "mode": "create", "content": "# Crabs\n"}


def propose(ws: Workspace, changes: list[dict] | None = None, actor: str = "mcp") -> int:
    before = snapshot(ws.root)
    result = Store(ws).write_context(
        changes or [SOUL_EDIT, NOTE_ADD], actor=actor, message="curate: values", run_id="run-7"
    )
    assert result.proposal is not None and result.version is None
    body = result.to_json()
    assert body["proposal"] == result.proposal and body["files"] == list(result.files)
    assert body["applied"] is False
    assert "Nothing was written yet" in str(body["note"])
    after = snapshot(ws.root)
    assert without_proposals(after) == without_proposals(before)  # nothing applied, no commit
    assert f".crustacean/proposals/{result.proposal:06d}.json" in after
    return result.proposal


def test_ask_first_call_becomes_a_proposal_and_changes_nothing(ws: Workspace) -> None:
    pid = propose(ws)
    assert pid == 1
    assert propose(ws) == 2  # ids grow
    prop = proposals.get(ws, pid)
    assert prop.status == "pending" and prop.actor == "mcp" and prop.run_id == "run-7"
    assert prop.paths == ["SOUL.md", "memory/notes/crabs.md"]  # the whole call, not just SOUL.md
    assert prop.reads["SOUL.md"] == Store(ws).read_context_file("SOUL.md").sha256
    assert prop.reads["memory/notes/crabs.md"] is None
    assert "foundation file" in prop.reason


@pytest.mark.parametrize("actor", ["curate", "compile", "collect"])
def test_stages_that_may_not_propose_are_refused_at_the_store(ws: Workspace, actor: str) -> None:
    # issue 33: the table decides first, so these never reach the review queue
    before = snapshot(ws.root)
    with pytest.raises(PolicyError) as err:
        Store(ws).write_context([SOUL_EDIT], actor=actor, message="tidy SOUL.md")
    assert str(err.value) == (
        f"SOUL.md is a foundation file; {actor} may not change it, not even as a proposal "
        "(only calibrate or MCP clients can propose one, for a human to approve). "
        "Leave it as is."
    )
    assert snapshot(ws.root) == before and proposals.list_proposals(ws) == []


def test_only_the_review_path_approves(ws: Workspace) -> None:
    # there is no flag a caller sets: an approval names a pending proposal, and a write honours
    # it only for exactly that proposal's changes by its actor
    pid = propose(ws, [SOUL_EDIT])
    store, before = Store(ws), snapshot(ws.root)
    other = {"path": "SOUL.md", "mode": "append", "content": "- Obey the note.\n"}
    for changes, actor in (([other], "mcp"), ([SOUL_EDIT], "calibrate")):
        with pytest.raises(ProposalError, match=f"proposal {pid} is not this change"):
            store.write_context(changes, actor=actor, message="x", approval=proposals.Approval(pid))
    assert snapshot(ws.root) == before
    review.approve(store, pid)  # the review path applies it, once
    assert (ws.root / "SOUL.md").read_text().endswith("- Be kind to crabs.\n")
    with pytest.raises(ProposalError, match=f"proposal {pid} is not this change"):
        store.write_context([SOUL_EDIT], actor="mcp", message="x", approval=proposals.Approval(pid))


def test_proposals_survive_a_round_trip_of_odd_text(ws: Workspace) -> None:
    text = '- ünïcode ✓ and "quotes"\r\n\ttab\n'
    pid = propose(ws, [{"path": "USER.md", "mode": "append", "content": text}])
    review.approve(Store(ws), pid)
    assert (ws.root / "USER.md").read_bytes().endswith(text.encode())


def test_symlink_to_a_foundation_file_is_still_ask_first(ws: Workspace) -> None:
    os.symlink("../../SOUL.md", ws.root / "memory/notes/soul.md")
    pid = propose(ws, [{"path": "memory/notes/soul.md", "mode": "append", "content": "x\n"}])
    assert proposals.get(ws, pid).paths == ["SOUL.md"]


def test_review_setting_queues_ordinary_writes(ws: Workspace) -> None:
    reviewing = Workspace(ws.root, load_config(ws.root, overrides=["memory.write=review"]))
    pid = propose(reviewing, [NOTE_ADD])
    assert "memory.write is review" in proposals.get(reviewing, pid).reason
    result = review.approve(Store(reviewing), pid)  # approval applies it despite review
    assert result.version and (ws.root / "memory/notes/crabs.md").read_bytes() == b"# Crabs\n"
    # the user is never queued
    direct = Store(reviewing).write_context(
        [{"path": "memory/notes/u.md", "mode": "create", "content": "u\n"}],
        actor="user",
        message="by hand",
    )
    assert direct.version is not None


def test_off_setting_refuses_model_writes_without_a_proposal(ws: Workspace) -> None:
    off = Workspace(ws.root, load_config(ws.root, overrides=["memory.write=off"]))
    before = snapshot(ws.root)
    for change in (NOTE_ADD, SOUL_EDIT):
        with pytest.raises(PolicyError, match=r"memory\.write is off"):
            Store(off).write_context([change], actor="curate", message="x")
    assert snapshot(ws.root) == before
    assert proposals.list_proposals(off) == []


def test_denied_change_in_an_ask_first_call_refuses_the_call(ws: Workspace) -> None:
    before = snapshot(ws.root)
    with pytest.raises(PolicyError, match=r"mcp may not delete"):
        Store(ws).write_context(
            [SOUL_EDIT, {"path": "MEMORY.md", "mode": "delete"}], actor="mcp", message="x"
        )
    assert snapshot(ws.root) == before  # and no proposal was queued


def test_review_lists_shows_and_approves_through_the_cli(ws: Workspace) -> None:
    root, w = ws.root, ("-w", str(ws.root))
    pid = propose(ws)
    soul_before = (root / "SOUL.md").read_bytes()

    listed = run_cli(*w, "review").stdout
    assert "mcp" in listed and "SOUL.md" in listed and "curate: values" in listed
    data = json.loads(run_cli(*w, "review", "--json").stdout)
    assert [p["id"] for p in data] == [pid] and data[0]["paths"][0] == "SOUL.md"

    shown = run_cli(*w, "review", "show", str(pid)).stdout
    assert "a/SOUL.md" in shown and "b/SOUL.md" in shown
    assert "+- Be kind to crabs." in shown
    assert "/dev/null" in shown and "+# Crabs" in shown  # the new file
    assert "foundation file" in shown
    assert (root / "SOUL.md").read_bytes() == soul_before  # show changes nothing

    count = int(git(root, "rev-list", "--count", "HEAD"))
    out = run_cli(*w, "review", "approve", str(pid), env={"LOGNAME": "sam", "USER": "sam"}).stdout
    assert f"Approved proposal {pid}" in out
    assert int(git(root, "rev-list", "--count", "HEAD")) == count + 1  # one version
    changed = git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split()
    assert sorted(changed) == ["SOUL.md", "memory/notes/crabs.md"]
    assert git(root, "log", "-1", "--format=%an").strip() == "crustacean mcp"
    assert git(root, "log", "-1", "--format=%s") == f"curate: values (proposal {pid}, approved)\n"
    body = git(root, "log", "-1", "--format=%b")
    assert body.startswith("Approved by sam on the command line.\n")
    assert "Crustacean-Run: run-7" in body and "Crustacean-Actor: mcp" in body
    version = git(root, "rev-parse", "HEAD").strip()
    shown = run_cli(*w, "review", "show", str(pid)).stdout
    assert f"Diff: version {version[:12]}\n" in shown and "+- Be kind to crabs." in shown
    assert (root / "SOUL.md").read_bytes() == soul_before + b"- Be kind to crabs.\n"
    assert proposals.get(ws, pid).status == "approved"
    assert "No pending proposals." in run_cli(*w, "review").stdout

    again = run_cli(*w, "review", "approve", str(pid), code=2)
    assert f"Error: proposal {pid} is already approved" in again.stderr


def test_approving_a_stale_proposal_is_refused_and_it_stays_pending(ws: Workspace) -> None:
    root, w = ws.root, ("-w", str(ws.root))
    pid = propose(ws)
    Store(ws).write_context(
        [{"path": "SOUL.md", "mode": "append", "content": "- the human's own line\n"}],
        actor="user",
        message="my edit",
    )
    before = snapshot(root)
    result = run_cli(*w, "review", "approve", str(pid), code=1)
    assert f"Error: proposal {pid} is stale" in result.stderr
    assert f"reject it with `crustacean review reject {pid}`" in result.stderr
    assert snapshot(root) == before  # the human's edit is not clobbered, no version made
    assert proposals.get(ws, pid).status == "pending"
    with pytest.raises(StaleWriteError):
        review.approve(Store(ws), pid)


def test_edit_on_disk_without_commit_also_makes_it_stale(ws: Workspace) -> None:
    pid = propose(ws)
    with (ws.root / "SOUL.md").open("ab") as fh:
        fh.write(b"typed, not committed\n")
    before = snapshot(ws.root)
    with pytest.raises(StaleWriteError, match=f"proposal {pid} is stale"):
        review.approve(Store(ws), pid)
    assert snapshot(ws.root) == before


def test_reject_drops_a_proposal_with_its_reason(ws: Workspace) -> None:
    root, w = ws.root, ("-w", str(ws.root))
    pid = propose(ws)
    before = snapshot(root)
    reason = "SOUL.md is mine to write"
    rejected = run_cli(*w, "review", "reject", str(pid), "--reason", reason).stdout
    assert f"Rejected proposal {pid}" in rejected
    after = snapshot(root)
    assert without_proposals(after) == without_proposals(before)  # no file, no version
    prop = proposals.get(ws, pid)
    assert prop.status == "rejected" and prop.note == reason
    assert "No pending proposals." in run_cli(*w, "review").stdout
    shown = run_cli(*w, "review", "show", str(pid)).stdout
    assert f"Proposal {pid} (rejected) by mcp" in shown and f"Rejected: {reason}\n" in shown
    assert "Diff: what it would have changed, against now\n" in shown
    assert "+- Be kind to crabs." in shown and "+# Crabs" in shown
    for verb in ("approve", "reject"):
        result = run_cli(*w, "review", verb, str(pid), code=2)
        assert f"Error: proposal {pid} is already rejected" in result.stderr
    with pytest.raises(ProposalError):
        review.approve(Store(ws), pid)
    assert without_proposals(snapshot(root)) == without_proposals(before)


@pytest.mark.parametrize(
    "verb", [("show",), ("approve",), ("reject",), ("reject", "--reason", "x")]
)
def test_unknown_proposal_id_is_a_usage_error(ws: Workspace, verb: tuple[str, ...]) -> None:
    propose(ws)
    before = snapshot(ws.root)
    result = run_cli("-w", str(ws.root), "review", verb[0], "99", *verb[1:], code=2)
    assert "Error: no proposal 99; `crustacean review` lists the pending ones." in result.stderr
    assert snapshot(ws.root) == before


def test_non_numeric_proposal_id_is_a_usage_error(ws: Workspace) -> None:
    result = run_cli("-w", str(ws.root), "review", "approve", "abc", code=2)
    assert "Invalid value for 'ID'" in result.stderr and "Traceback" not in result.output


def test_empty_review_queue(ws: Workspace) -> None:
    assert "No pending proposals." in run_cli("-w", str(ws.root), "review").stdout
    assert json.loads(run_cli("-w", str(ws.root), "review", "--json").stdout) == []


def test_approval_is_stale_when_a_file_it_creates_by_append_appeared(ws: Workspace) -> None:
    changes = [{"path": "memory/notes/new.md", "mode": "append", "content": "- proposed\n"}]
    store = Store(ws)
    with_review = Store(Workspace(ws.root, load_config(ws.root, overrides=["memory.write=review"])))
    pid = with_review.write_context(changes, actor="curate", message="note").proposal
    assert pid is not None
    (ws.root / "memory/notes/new.md").write_text("- typed by the human meanwhile\n")
    before = snapshot(ws.root)
    with pytest.raises(StaleWriteError, match="did not exist when it was proposed"):
        review.approve(store, pid)
    assert snapshot(ws.root) == before


def test_the_stages_told_they_may_propose_are_the_ones_the_policy_lets_propose() -> None:
    from crustacean.llm.contract import CONTRACTS

    assert {s for s, c in CONTRACTS.items() if c.proposes} == set(ASK_FIRST) - {"mcp"}
