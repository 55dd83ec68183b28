"""Curate and people: a person known by no channel gets a contact file under a name-based id,
an entry about two people is filed in both contact files, and curate's input is what its doc
says (the last days, plus the days a backfill wrote)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from fakeapi import tool_use
from store_helpers import commit_all

from crustacean.config import CurateConfig, load_config
from crustacean.stages.curate import (
    SKIP,
    curate,
    days_to_curate,
    destinations,
    likely_destinations,
    parse_entries,
)
from crustacean.state import open_state
from crustacean.workspace import Workspace, data_dir

NOW = datetime(2026, 7, 14, 9, 0, tzinfo=UTC)
DAY = "2026-07-13"
LOG = (
    f"# {DAY}\n\n### [19:15] Rent rise, cat's name, a plan\n"
    "<!-- collect run=r1 session=s1 -->\n\n"
    "- Lena's landlord raised her rent: it is 1,020 euros a month now.\n"
    "- [person] Omar is thinking about quitting the choir; Lena thinks it's a shame.\n"
)
LENA, OMAR = "memory/contacts/name-lena.md", "memory/contacts/name-omar.md"
ALICE, SOURDOUGH = "memory/contacts/telegram-alice.md", "knowledge/topics/sourdough.md"


def clock() -> datetime:
    return NOW


@pytest.fixture
def setup(ws: Workspace, fake_api: Any) -> dict[str, Any]:
    (ws.root / f"memory/{DAY}.md").write_text(LOG)
    commit_all(ws.root, "a log")
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_api.url}
    live = Workspace(ws.root, load_config(ws.root, env=env, overrides=["llm.max_retries=0"]))
    rent, choir = (e.id for e in parse_entries(DAY, LOG))
    return {"ws": live, "env": env, "fake": fake_api, "rent": rent, "choir": choir}


def contact(name: str, line: str) -> dict[str, Any]:
    body = f"---\nname: {name}\n---\n# {name}\n\nNotes on {name}; no channel known yet.\n\n{line}"
    return {"path": f"memory/contacts/name-{name.lower()}.md", "mode": "create", "content": body}


def routed(ws: Workspace) -> dict[str, str]:
    with open_state(ws) as db:
        return dict(db.conn.execute("SELECT id, destination FROM curated_entries").fetchall())


def test_people_without_a_channel_get_name_based_contact_files_and_a_shared_entry_both(
    setup: dict[str, Any],
) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    choir = (
        "- 2026-07-13 — Thinking about quitting the choir; Lena thinks it's a shame (daily log).\n"
    )
    fake.enqueue(
        tool_use(
            (
                "write_context",
                {
                    "message": "curate: Lena and Omar",
                    "changes": [
                        contact(
                            "Lena",
                            "- 2026-07-13 — Rent is 1,020 euros a month now.\n"
                            + choir.replace("Thinking", "Omar is thinking"),
                        ),
                        contact("Omar", choir),
                    ],
                },
            ),
            (
                "record_routing",
                {
                    "entries": [
                        {"id": s["rent"], "destination": LENA},
                        {"id": s["choir"], "destination": OMAR, "also": [LENA]},
                    ]
                },
            ),
        ),
        tool_use(("finish", {"summary": "two contact files"})),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    assert result.record.status == "ok", result.record.error
    assert result.routed == {LENA: 2, OMAR: 1} and result.unreported == 0
    assert routed(s["ws"]) == {s["rent"]: LENA, s["choir"]: f"{OMAR}, {LENA}"}
    readme = (root / "memory/README.md").read_text()
    assert "`name-lena.md`" in readme and "`name-omar.md`" in readme  # code indexed both
    assert "quitting the choir" in (root / LENA).read_text()
    assert "quitting the choir" in (root / OMAR).read_text()
    again = curate(s["ws"], env=s["env"], clock=clock)
    assert again.record.status == "skipped" and len(fake.messages()) == 2  # never shown again


def test_a_second_destination_not_written_keeps_the_entry_for_next_run(
    setup: dict[str, Any],
) -> None:
    s, fake, root = setup, setup["fake"], setup["ws"].root
    fake.enqueue(
        tool_use(
            ("write_context", {"message": "curate: Omar", "changes": [contact("Omar", "- x\n")]}),
            (
                "record_routing",
                {"entries": [{"id": s["choir"], "destination": OMAR, "also": [LENA]}]},
            ),
        ),
        tool_use(("finish", {"summary": "claimed both"})),
    )
    result = curate(s["ws"], env=s["env"], clock=clock)
    reply = fake.messages()[1].body["messages"][-1]["content"][1]
    assert reply["is_error"] and f"{LENA} does not exist" in reply["content"]
    assert s["choir"] not in routed(s["ws"]) and result.unreported == 1
    assert not (root / LENA).exists()
    fake.enqueue(tool_use(("finish", {"summary": "later"})))
    curate(s["ws"], env=s["env"], clock=clock)
    assert "quitting the choir" in fake.messages()[2].body["messages"][0]["content"][0]["text"]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"destination": OMAR}, (OMAR,)),
        ({"destination": OMAR, "also": [LENA]}, (OMAR, LENA)),
        ({"destination": f"./{OMAR}", "also": [OMAR, f"./{LENA}", ""]}, (OMAR, LENA)),
        ({"destination": "skip", "also": [LENA]}, SKIP),
        ({"destination": ""}, SKIP),
        ({"destination": OMAR, "also": LENA}, (OMAR,)),  # not a list: ignored
    ],
)
def test_destinations(item: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert destinations(item) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Lena's rent is 1,020 euros now.", [LENA]),
        ("Omar and Lena went to the jazz night.", [LENA, OMAR]),
        ("They settled on a name for the cat: Pepper.", []),  # `name-` is no name
        ("Alice became head baker.", [ALICE]),
        ("Sourdough starter needs feeding.", [SOURDOUGH]),
        ("Call Ana about the lease.", []),  # no file for Ana yet: nothing to hand
        ("Telegram was down again.", []),  # a channel prefix is not a name
    ],
)
def test_likely_destinations_are_the_files_named_by_the_entry(
    text: str, expected: list[str]
) -> None:
    entries = parse_entries(DAY, f"- {text}\n")
    labels = {LENA: "Lena", OMAR: "Omar", ALICE: "Alice", SOURDOUGH: "Sourdough"}
    assert sorted(likely_destinations(entries, labels)) == expected


def test_curate_doc_states_its_input_as_code_builds_it(ws: Workspace) -> None:
    """CURATE.md says the last `curate.days` logs (its default) plus the days a backfill wrote,
    and code hands exactly those days: older backfilled ones first, then the recent ones."""
    doc = (data_dir("pipeline") / "CURATE.md").read_text("utf-8")
    line = doc.split("- **Input:**", 1)[1].split("\n\n", 1)[0]
    default = re.search(r"(\d+) by default", line)
    assert "`curate.days`" in line and "backfill" in line
    assert default and int(default[1]) == CurateConfig().days
    days = days_to_curate(ws, NOW, 3, backfilled=["2026-03-03", "2026-07-13"])
    assert days == ["2026-03-03", "2026-07-12", "2026-07-13", "2026-07-14"]
