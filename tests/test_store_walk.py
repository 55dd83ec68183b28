"""A write's walk (issue 31): the face plans, applies and commits a call once each.

A profile hook records every call the face (`store/write.py`) makes into the store's planning and
apply modules during one `write_context`. Before the split, the face's own methods ran the checks,
the journal and the recovery, and control came back into it from other modules 58 times a call.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

import pytest

from crustacean.store import apply, plan, write
from crustacean.store.write import Store
from crustacean.workspace import Workspace

STEPS = {Path(m.__file__ or "").name: m for m in (plan, apply)}


def face_calls(store: Store, changes: list[dict[str, str]], actor: str) -> list[str]:
    """`module:function` of each call from a frame of the face into plan.py or apply.py."""
    face = write.__file__
    seen: list[str] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        name = Path(frame.f_code.co_filename).name
        caller = frame.f_back
        while caller is not None and "contextlib" in caller.f_code.co_filename:
            caller = caller.f_back  # a `with` on a generator: the face is the one that asked
        if event == "call" and name in STEPS and caller and caller.f_code.co_filename == face:
            seen.append(f"{name.removesuffix('.py')}:{frame.f_code.co_name}")

    sys.setprofile(hook)
    try:
        store.write_context(changes, actor=actor, message="walked")
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("actor", ["user", "curate"])
def test_a_write_goes_plan_apply_commit_once_each(copied_ws: Workspace, actor: str) -> None:
    store = Store(copied_ws)
    note = "memory/notes/walk.md"
    store.write_context(
        [{"path": note, "mode": "create", "content": "- one\n- two\n"}],
        actor="user",
        message="setup",
    )
    changes = [
        {"path": note, "mode": "edit", "old": "- two", "new": "- two, and three"},
        {"path": "memory/notes/walk-2.md", "mode": "create", "content": "- more\n"},
    ]
    assert face_calls(store, changes, actor) == [
        "plan:check_message",  # before the lock: a bad message waits for no writer
        "apply:opened",  # the store's lock; a killed call undone
        "plan:plan",
        "plan:touched",
        "apply:apply",  # journal, then the files
        "apply:commit",  # the version, then the user's index
        "apply:opened",  # the lock released
    ]
