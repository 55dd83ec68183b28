"""Issue 34, item 7, replayed: curate on the sample in at most 4 turns, with the answers a model
played by hand gave (bench/curate_turn_runs/, see its README), and nothing lost.

The recorded run is rerun through the real SDK against the fake API, no model: the sample at the
run's `now`, collect and curate each answered by the recorded responses in order. Its turns and
its routing must come out as recorded, every write applied and every entry routed or skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fakeapi import prompt_of

from bench import curate_turns
from crustacean.stages.curate import parse_entries
from crustacean.state import open_state

RUN = curate_turns.RUNS / "after"
_ENTRY = re.compile(r"^- \[([0-9a-f]{12})\] (\d{4}-\d\d-\d\d) ", re.MULTILINE)


def test_the_recorded_curate_run_takes_at_most_4_turns_routes_as_recorded_and_loses_nothing(
    tmp_path: Path, fake_api: Any
) -> None:
    root, fake = tmp_path / "sample", fake_api
    got = curate_turns.replay(RUN, root, fake)
    recorded = json.loads((RUN / "run.json").read_text())
    assert got["collect"] == recorded["collect"] == {"status": "ok", "turns": 1}
    cur = got["curate"]
    assert cur["status"] == "ok" and cur["turns"] <= 4
    assert cur == recorded["curate"]  # same turns, destinations, skips and new index lines
    assert fake.remaining == 0  # every recorded answer was used
    # nothing lost: every entry routed or kept, every call applied
    assert cur["unreported"] == 0
    assert sum(cur["routed"].values()) + sum(cur["skipped"].values()) == cur["entries"]
    asked = fake.messages()[1:]  # the curate requests (the first was collect's)
    results = [
        block
        for body in (r.body for r in asked[1:])
        for block in body["messages"][-1]["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and not any(r["is_error"] for r in results)
    shown = dict(_ENTRY.findall(prompt_of(asked[0].body)))
    ws, _ = curate_turns.workspace(root, fake.url)
    with open_state(ws) as db:
        done = dict(db.conn.execute("SELECT id, run_id FROM curated_entries").fetchall())
    assert set(shown) <= set(done) and len(set(done[i] for i in shown)) == 1  # all, this run
    for day in set(shown.values()):  # every bullet of those days' logs: curated, now or before
        text = (root / "memory" / f"{day}.md").read_text()
        assert {e.id for e in parse_entries(day, text)} <= set(done)
    for dest in cur["routed"]:
        assert (root / dest).is_file()
