"""Issue 34, item 2: reminders in every form people write; code's past-due detector reads them
all (pure, with `today` passed in), and compile's candidates list the done ones for pruning."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from crustacean.ops.init import sample_files
from crustacean.stages.compile_plan import find_candidates, reminder_items

TODAY = date(2026, 12, 1)
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PIPELINE = Path(__file__).resolve().parent.parent / "pipeline"


@pytest.mark.parametrize(
    ("text", "due", "done"),
    [
        ("- [ ] 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), False),
        ("- [x] 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), True),
        ("- [X] 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), True),
        ("- 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), False),
        ("- 2026-11-20 — Send Priya the receipts (done 2026-11-21)", date(2026, 11, 20), True),
        ("- 2026-11-20 — Send Priya the receipts ✅", date(2026, 11, 20), True),
        ("## Done\n\n- 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), True),
        ("## Completed\n\n- [ ] 2026-11-20 — Send Priya the receipts", date(2026, 11, 20), True),
        ("## Done\n\n## Open\n\n- [ ] 2026-11-20 — Send Priya", date(2026, 11, 20), False),
        ("- [ ] Chase the payment (no date)", None, None),
    ],
)
def test_each_form_is_read(text: str, due: date | None, done: bool | None) -> None:
    items = reminder_items(text)
    if due is None:
        assert items == []
    else:
        assert [(r.due, r.done) for r in items] == [(due, done)]


def test_the_samples_ticked_reminders_are_listed_for_pruning() -> None:
    """The sample's `memory/reminders/admin.md`: three `[x]` lines under `## Done`, past their
    date, and one open `[ ]` line whose date has passed."""
    files = {p: (d, NOW) for p, d in sample_files(TODAY, NOW).items() if p.startswith("memory/")}
    found = find_candidates("", files, {}, TODAY, NOW)
    assert len(found.reminders_done) == 3
    assert all(x.startswith("memory/reminders/admin.md:") for x in found.reminders_done)
    assert all("[x]" in x for x in found.reminders_done)
    assert len(found.reminders_due) == 1 and "[ ]" in found.reminders_due[0]
    prompt = found.to_prompt()
    assert "Reminders done and past their date (safe to prune)" in prompt


@pytest.mark.parametrize("doc", ["CURATE.md", "COMPILE.md"])
def test_the_docs_name_one_preferred_form_and_what_code_also_reads(doc: str) -> None:
    text = (PIPELINE / doc).read_text("utf-8")
    assert "- [ ] 2026-12-04 — " in text and "- [x]" in text
    assert "(done YYYY-MM-DD)" in text and "`## Done`" in text
