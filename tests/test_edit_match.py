"""Issue 34, item 7: an edit whose old text still occurs exactly once is applied whatever its
expected_sha256, so a content change and its pointer need no wait for the previous call's
hash; several changes to one file in one call share the sha256 the writer read."""

from __future__ import annotations

import pytest

from conftest import snapshot
from crustacean.errors import StaleWriteError
from crustacean.llm.contract import EDIT_MATCH_RULE, preamble
from crustacean.store.changes import Change, sha256_hex
from crustacean.store.write import Store
from crustacean.workspace import Workspace

NOTE = "memory/notes/n.md"
TEXT = b"# Notes\n\n- one\n- two\n"


@pytest.fixture
def store(ws: Workspace) -> Store:
    s = Store(ws)
    s.write_context([Change(NOTE, "create", content=TEXT)], actor="user", message="seed")
    return s


def test_a_stale_edit_whose_old_text_is_still_unique_is_applied(store: Store) -> None:
    read = sha256_hex(TEXT)  # what the model was handed
    store.write_context(
        [Change(NOTE, "edit", old=b"- one\n", new=b"- one!\n", expected_sha256=read)],
        actor="curate",
        message="first",
    )
    store.write_context(  # the same sha256 again: the file changed, the snippet is still there
        [Change(NOTE, "edit", old=b"- two\n", new=b"- two!\n", expected_sha256=read)],
        actor="curate",
        message="second",
    )
    assert store.read_bytes(NOTE) == b"# Notes\n\n- one!\n- two!\n"


@pytest.mark.parametrize(
    "change",
    [
        Change(NOTE, "edit", old=b"- one\n", new=b"- 1\n"),  # its old text is gone
        Change(NOTE, "append", content=b"- three\n"),  # only an edit proves what it saw
    ],
)
def test_anything_else_with_an_older_sha_is_refused_as_stale(store: Store, change: Change) -> None:
    read = sha256_hex(TEXT)
    store.write_context(
        [Change(NOTE, "edit", old=b"- one\n", new=b"- uno\n", expected_sha256=read)],
        actor="curate",
        message="first",
    )
    before = snapshot(store.root)
    stale = Change(**{**change.__dict__, "expected_sha256": read})
    with pytest.raises(StaleWriteError, match="changed since it was read"):
        store.write_context([stale], actor="curate", message="stale")
    assert snapshot(store.root) == before


def test_two_changes_to_one_file_in_one_call_share_its_sha(store: Store) -> None:
    read = sha256_hex(TEXT)
    store.write_context(
        [
            Change(NOTE, "edit", old=b"- one\n", new=b"- 1\n", expected_sha256=read),
            Change(NOTE, "append", content=b"- three\n", expected_sha256=read),
        ],
        actor="curate",
        message="both",
    )
    assert store.read_bytes(NOTE) == b"# Notes\n\n- 1\n- two\n- three\n"


@pytest.mark.parametrize("stage", ["curate", "compile", "calibrate"])
def test_every_file_stage_is_told_the_rule(stage: str) -> None:
    assert EDIT_MATCH_RULE in preamble(stage)
