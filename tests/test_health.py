"""The health check by code (`crustacean.stages.health`) and `crustacean health`."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import Result

from conftest import run_cli
from crustacean.cli.health_cmd import health as health_command
from crustacean.runs import RunRecord, RunRecorder
from crustacean.stages import health as h
from crustacean.store.proposals import Proposal
from crustacean.usage import Usage
from crustacean.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = "sk-ant-api03-" + "Q7x" * 15
DAILY = {"curate": "30 3 * * *"}
WEEKLY = {"compile": "0 4 * * 0"}  # Sundays: 11-01, 11-08, 11-15, 11-22, 11-29


def at(day: int, hour: int = 3, minute: int = 30, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def run(
    stage: str,
    started: datetime,
    status: str = "ok",
    error: str | None = None,
    *,
    dry_run: bool = False,
    cost_usd: float = 0.0,
    usage: Usage | None = None,
) -> RunRecord:
    return RunRecord(
        id=f"{started:%Y%m%dT%H%M%S}-{stage}",
        stage=stage,
        started=started + timedelta(seconds=5),
        status=status,
        error=error,
        dry_run=dry_run,
        cost_usd=cost_usd,
        usage=usage or Usage(),
    )


def daily_runs(stage: str, days: range, skip: frozenset[int] = frozenset()) -> list[RunRecord]:
    return [run(stage, at(d)) for d in days if d not in skip]


# ---------------------------------------------------------------------------- cadence


def test_missed_daily_curate_slots_are_listed_newest_first() -> None:
    runs = daily_runs("curate", range(10, 31), skip=frozenset({25, 27}))
    check = h.cadence(DAILY, {"curate": True}, runs, NOW)
    assert check.status == "warn"
    assert check.figures["missed"] == 2 and check.figures["curate"]["missed"] == 2
    assert check.details == (
        "curate missed its 2026-11-27 03:30 UTC slot",
        "curate missed its 2026-11-25 03:30 UTC slot",
    )
    assert check.summary.startswith("2 missed run(s), 0 failed run(s) in 30 days")


def test_a_missed_weekly_compile_slot_and_no_miss_before_the_first_run() -> None:
    runs = [run("compile", at(d, 4, 0)) for d in (8, 22, 29)]  # 11-01 is before history
    check = h.cadence(WEEKLY, {"compile": True}, runs, NOW)
    assert check.status == "warn"
    assert check.details == ("compile missed its 2026-11-15 04:00 UTC slot",)
    assert check.figures["compile"]["expected"] == 3  # 15, 22, 29: the 08 slot precedes its run


def test_failed_runs_are_listed_with_their_errors_and_a_failing_latest_run_fails() -> None:
    runs = daily_runs("curate", range(20, 30))
    runs.append(run("curate", at(23, 9), "failed", "ApiError: overloaded"))
    runs.append(run("curate", at(30), "failed", "LimitError: MEMORY.md over its cap"))
    check = h.cadence(DAILY, {"curate": True}, runs, NOW)
    assert check.status == "fail" and check.figures["stopped"] == ["curate"]
    assert check.figures["failed"] == 2
    joined = "\n".join(check.details)
    assert "curate failed 2026-11-30 03:30 UTC" in joined
    assert "LimitError: MEMORY.md over its cap" in joined and "ApiError: overloaded" in joined


def test_an_earlier_failure_alone_is_a_warning() -> None:
    runs = [*daily_runs("curate", range(20, 31)), run("curate", at(22, 9), "failed", "Boom")]
    assert h.cadence(DAILY, {"curate": True}, runs, NOW).status == "warn"


def test_a_stage_that_stopped_running_fails() -> None:
    check = h.cadence(DAILY, {"curate": True}, daily_runs("curate", range(10, 27)), NOW)
    assert check.status == "fail" and check.figures["curate"]["missed"] == 4


def test_no_history_at_all_is_a_warning_not_a_crash() -> None:
    check = h.cadence({**DAILY, **WEEKLY}, {}, [], NOW)
    assert (check.status, check.summary) == ("warn", "no runs recorded yet")
    dry = [run("curate", at(29), dry_run=True)]
    assert h.cadence(DAILY, {}, dry, NOW).summary == "no runs recorded yet"


def test_disabled_stages_are_skipped_and_history_starts_at_the_first_run() -> None:
    runs = daily_runs("curate", range(28, 31))
    schedules = {**DAILY, "collect": "0 */2 * * *"}
    check = h.cadence(schedules, {"collect": False, "curate": True}, runs, NOW)
    assert check.status == "ok" and check.details == ()
    assert check.figures["collect"] == {"enabled": False}
    assert check.figures["curate"]["expected"] == 2  # 29 and 30; 28's slot precedes the anchor


def test_a_slot_not_yet_due_is_not_missed_and_dry_runs_do_not_count() -> None:
    runs = [*daily_runs("curate", range(20, 30)), run("curate", at(30), dry_run=True)]
    check = h.cadence(DAILY, {"curate": True}, runs, at(30, 3, 40))
    assert check.status == "ok"  # today's slot is 10 minutes old
    assert h.cadence(DAILY, {"curate": True}, runs, NOW).figures["missed"] == 1


# ---------------------------------------------------------------------------- cost


def test_cost_totals_by_stage_and_kind_over_30_days() -> None:
    runs = [
        run("curate", at(29), cost_usd=0.5, usage=Usage(1000, 200, 30, 4)),
        run("curate", at(28), cost_usd=0.25, usage=Usage(10, 2, 0, 0), dry_run=True),
        run("collect", at(29, 2, 0), cost_usd=0.01, usage=Usage(5, 1, 0, 0)),
        run("curate", at(20, month=10), cost_usd=9.0, usage=Usage(9, 9, 9, 9)),  # too old
    ]
    check = h.cost(runs, NOW)
    assert check.status == "ok"
    total = check.figures["total"]
    assert total["runs"] == 3 and total["cost_usd"] == pytest.approx(0.76)
    assert (total["input_tokens"], total["output_tokens"]) == (1015, 203)
    curate = check.figures["stages"]["curate"]
    assert (curate["cache_read_tokens"], curate["cache_write_tokens"]) == (30, 4)
    assert list(check.figures["stages"]) == ["collect", "curate"]
    assert check.summary == "$0.7600 over 3 run(s) in 30 days"


# ---------------------------------------------------------------------------- files


def test_daily_logs_missing_empty_and_noise() -> None:
    noise = "# 2026-11-27\n" + "- ok\n" * 3 + "- a real line that says something useful\n" * 2
    good = "# log\n- 09:00 talked to Ana about the move to Berlin next spring\n"
    logs = {date(2026, 11, d): good for d in range(20, 30) if d not in (24, 25)}
    logs[date(2026, 11, 26)] = "# 2026-11-26\n\n"
    logs[date(2026, 11, 27)] = noise
    check = h.daily_logs(logs, date(2026, 11, 30))
    assert check.status == "warn"
    assert check.figures["missing"] == ["2026-11-24", "2026-11-25"]
    assert check.figures["empty"] == ["2026-11-26"]
    assert check.figures["noisy"] == ["2026-11-27"]
    assert len(check.figures["last_sizes"]) == 8
    assert h.daily_logs({}, date(2026, 11, 30)).summary == "no daily logs yet"


@pytest.mark.parametrize(
    ("chars", "status"), [(840, "ok"), (860, "warn"), (1000, "warn"), (1001, "fail")]
)
def test_memory_md_against_its_caps(chars: int, status: str) -> None:
    text = "x" * (chars - 1) + "\n"
    check = h.memory_md(text, 500, 1000)
    assert check.status == status  # 84 % ok, 86 % warn, at the cap warn, over it fail
    assert check.figures["chars_pct"] == pytest.approx(chars / 10, abs=0.05)
    assert "bootstrap_pct" in check.figures and "lines_pct" in check.figures


def test_memory_md_lines_and_the_bootstrap_limit() -> None:
    assert h.memory_md("a\n" * 426, 500, 100_000).status == "warn"  # 85.2 % of lines
    assert h.memory_md("a\n" * 501, 500, 100_000).status == "fail"
    assert h.memory_md("x" * 17_100, 500, 100_000).status == "warn"  # 85.5 % of 20,000
    assert h.memory_md(None, 500, 1000).status == "warn"


def test_structure_map_dead_entries_and_orphans() -> None:
    text = (
        "# M\n\n## 📂 Memory Structure Map\n\n- `memory/contacts/` — people\n"
        "- `memory/gone/` — removed\n- `memory/YYYY-MM-DD.md` — logs\n\n## Other\n- `memory/x/`\n"
    )
    present = {"memory/contacts"}
    check = h.structure_map(
        text, ["memory/contacts/", "memory/x/", "knowledge/a.md"], present.__contains__
    )
    assert check.status == "warn"
    assert check.figures["dead"] == ["memory/gone/"]
    assert check.figures["orphans"] == ["memory/x/", "knowledge/a.md"]
    assert h.structure_map("# nothing\n", [], present.__contains__).status == "warn"


def test_broken_links_and_pointers() -> None:
    files = {
        "memory/notes/a.md": "See [b](b.md), [bob](../contacts/bob.md), [web](https://x.org),\n"
        "[top](#top), [mail](mailto:a@b.c), [root](knowledge/k.md) and `[no](code.md)`.\n",
        "MEMORY.md": "- **Old** → moved to `knowledge/topics/gone.md` (compile 2026-11-01).\n",
    }
    exists = {"memory/notes/b.md", "knowledge/k.md"}.__contains__
    check = h.links(files, exists, frozenset({"MEMORY.md"}))
    assert check.details == (
        "MEMORY.md:1 → knowledge/topics/gone.md",
        "memory/notes/a.md:1 → ../contacts/bob.md",
    )


def test_proposals_older_than_14_days() -> None:
    def prop(pid: int, days: int) -> Proposal:
        created = (NOW - timedelta(days=days)).isoformat(timespec="seconds")
        return Proposal(pid, created, "calibrate", f"edit {pid}", "", None, (), {})

    check = h.proposals([prop(1, 20), prop(2, 3)], NOW)
    assert check.status == "warn" and check.figures == {"pending": 2, "stale": 1}
    assert check.details == ("#1 (calibrate, 20 days): edit 1 — `crustacean review show 1`",)


# ---------------------------------------------------------------------------- workspace


def write(ws: Workspace, rel: str, text: str) -> Path:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def record(ws: Workspace, stage: str, start: datetime, status: str = "ok", err: str = "") -> None:
    with RunRecorder(ws, stage, clock=lambda: start) as rec:
        rec.add_usage(Usage(100, 10, 0, 0), 0.01)
        rec.finish(status, error=err or None)


def test_a_fresh_workspace_is_healthy_apart_from_having_no_history(ws: Workspace) -> None:
    result = h.check_workspace(ws, NOW)
    by = {c.name: c for c in result.checks}
    assert list(by) == [
        "cadence", "cost", "daily_logs", "memory_md", "structure_map", "orphans", "links",
        "frontmatter", "duplicates", "lessons", "proposals", "security",
    ]  # fmt: skip
    assert {n for n, c in by.items() if c.status != "ok"} == {"cadence", "daily_logs"}
    assert result.status == "warn"
    md = result.to_markdown()
    assert md.startswith("## Pipeline Health\n") and "- **cadence** (warn): no runs" in md


def test_a_troubled_workspace_reports_every_problem(ws: Workspace) -> None:
    for day in range(20, 30):
        if day != 25:
            record(ws, "curate", at(day))
    record(ws, "compile", at(22, 4, 0), "failed", "ApiError: overloaded")
    write(ws, "memory/2026-11-28.md", "# 2026-11-28\n- talked about the new flat in Lisbon\n")
    write(ws, "memory/side/x.md", "orphan folder\n")
    write(ws, "memory/notes/a.md", "Same text\n[gone](missing.md)\n")
    write(ws, "knowledge/notes/a.md", "Same text\n[gone](missing.md)\n")
    write(ws, "memory/notes/bad.md", "---\nkey: [unclosed\n---\nbody\n")
    write(ws, "memory/lessons/lessons.md", "## Old\n**Learned:** 2026-01-02\n\n## New\n"
          "**Learned:** 2026-11-01\n")  # fmt: skip
    props = ws.state_dir / "proposals"
    props.mkdir(parents=True, exist_ok=True)
    old = Proposal(7, "2026-11-01T00:00:00+00:00", "calibrate", "tune SOUL.md", "", None, (), {})
    (props / "000007.json").write_text(json.dumps(old.to_json()))
    result = h.check_workspace(ws, NOW)
    by = {c.name: c for c in result.checks}
    assert by["cadence"].figures["curate"]["missed"] == 2  # 25 and 30
    assert by["cadence"].figures["stopped"] == ["collect", "compile"]  # collect never ran
    assert any("ApiError: overloaded" in d for d in by["cadence"].details)
    assert by["cost"].figures["total"]["runs"] == 10
    assert by["structure_map"].figures["orphans"] == ["memory/side/"]
    assert len([d for d in by["links"].details if d.endswith("→ missing.md")]) == 2
    assert any(
        d.startswith("memory/notes/bad.md line 3: frontmatter is not valid YAML")
        for d in by["frontmatter"].details
    )
    assert by["duplicates"].details == ("memory/notes/a.md = knowledge/notes/a.md",)
    assert by["lessons"].figures == {"files": 1, "lessons": 2, "old": 1}
    assert "crustacean review show 7" in by["proposals"].details[0]
    assert result.status == "fail"


def test_a_secret_on_disk_fails_and_its_value_is_never_shown(ws: Workspace) -> None:
    write(ws, "archive/trash/2026-11-01/keys.md", f"note\nANTHROPIC_API_KEY={KEY}\n")
    (ws.root / "artifacts/images/pic.png").write_bytes(b"\x89PNG\x00\x00" + KEY.encode())
    result = h.check_workspace(ws, NOW)
    sec = next(c for c in result.checks if c.name == "security")
    assert sec.status == "fail" and result.status == "fail"
    assert sec.details == ("archive/trash/2026-11-01/keys.md: Anthropic API key (line 2)",)
    assert KEY not in result.to_markdown() and KEY not in json.dumps(result.to_json())
    out = cli(ws, "--json", code=1).output
    assert KEY not in out and json.loads(out)["status"] == "fail"
    assert KEY not in cli(ws, code=1).output


def test_a_broken_check_becomes_a_warning(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> list:
        raise OSError("disk on fire")

    monkeypatch.setattr(h, "list_proposals", boom)
    by = {c.name: c for c in h.check_workspace(ws, NOW).checks}
    assert by["proposals"].status == "warn" and "OSError: disk on fire" in by["proposals"].summary


# ---------------------------------------------------------------------------- CLI


def cli(ws: Workspace, *args: str, code: int = 0) -> Result:
    """`crustacean health …` in the workspace, as `CRUSTACEAN_WORKSPACE` names it."""
    return run_cli("health", *args, code=code, env={"CRUSTACEAN_WORKSPACE": str(ws.root)})


def test_cli_prints_each_check_and_exits_0_on_warnings(ws: Workspace) -> None:
    out = cli(ws).output
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["cadence", "warn"] and "no runs recorded yet" in lines[0]
    assert any(line.split()[:2] == ["security", "ok"] for line in lines)
    assert lines[-1] == "Overall: warn"
    data = json.loads(cli(ws, "--json").output)
    assert data["status"] == "warn" and len(data["checks"]) == 12
    assert "1 when any check fails" in (health_command.__doc__ or "")


def test_cli_indents_details_and_exits_1_on_a_failure(ws: Workspace) -> None:
    mem = ws.root / "MEMORY.md"
    mem.write_text(mem.read_text() + "x" * 13_000 + "\n[dead](nowhere.md)\n")
    out = cli(ws, code=1).output
    assert "memory_md      fail" in out
    assert "MEMORY.md:" in out and "→ nowhere.md" in out
    detail = next(line for line in out.splitlines() if "→ nowhere.md" in line)
    assert detail.startswith("        ")


@pytest.mark.parametrize(
    ("log", "empty"),
    [
        ("# 2026-11-26\n\n## Morning ##\n", True),
        ("# 2026-11-26\n<!-- nothing yet -->\n", True),
        ("# 2026-11-26\n#garden moved the beds to the south side\n", False),  # a tag, not a heading
        ("#\n##\n", True),
    ],
)
def test_an_empty_daily_log_is_headings_only_by_markdowns_rule(log: str, empty: bool) -> None:
    logs = {date(2026, 11, d): log if d == 26 else "- said something\n" for d in range(20, 30)}
    check = h.daily_logs(logs, date(2026, 11, 30))
    assert (check.figures["empty"] == ["2026-11-26"]) == empty
