"""`crustacean status` and `crustacean doctor` on a generated history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakeapi import error, text

from conftest import run_cli
from crustacean.ops.status import doctor, run_totals, split_fix, workspace_status
from crustacean.runs import RunRecorder
from crustacean.usage import Usage
from crustacean.workspace import Workspace, locations

NOW = datetime.now(UTC)


def history(ws: Workspace) -> None:
    for days_ago, stage, status, usd in (
        (1, "collect", "ok", 0.002),
        (1, "curate", "failed", 0.0),
        (3, "collect", "ok", 0.004),
        (40, "compile", "ok", 1.0),
    ):
        at = NOW - timedelta(days=days_ago)
        with RunRecorder(ws, stage, clock=lambda at=at: at) as rec:
            rec.add_usage(Usage(1000, 100, 0, 0), usd)
            rec.finish(status, error="ModelError: overloaded (529)" if status == "failed" else None)


def test_status_figures_and_dashboard(ws: Workspace) -> None:
    history(ws)
    (ws.root / "MEMORY.md").write_text("x\n" * 450)
    result = workspace_status(ws, NOW)
    assert result.totals["collect"]["runs"] == 2 and result.totals["curate"]["failures"] == 1
    assert result.totals["compile"]["runs"] == 0  # 40 days ago is outside the window
    assert round(sum(c for _, c in result.daily_cost), 4) == 0.006
    assert result.memory_md["state"] == "near limit" and result.memory_md["lines"] == 450
    last = {s.stage: s.last for s in result.stages}
    assert last["curate"].status == "failed" and last["calibrate"] is None
    assert all(s.next_slot and s.next_slot > NOW for s in result.stages)
    out = run_cli("-w", str(ws.root), "status").stdout
    assert ("Cost per day  |" in out and "▁" in out) or "█" in out
    assert "MEMORY.md: 450/500 lines" in out and "near limit" in out
    data = json.loads(run_cli("-w", str(ws.root), "status", "--json").stdout)
    assert data["last_30_days"]["collect"]["tokens_in"] == 2000
    assert [s["stage"] for s in data["stages"]] == ["collect", "curate", "compile", "calibrate"]


def test_run_totals_are_pure() -> None:
    totals, daily = run_totals([], NOW)
    assert len(daily) == 30 and all(t["runs"] == 0 for t in totals.values())


def test_doctor_key_for_cron(ws: Workspace, tmp_path: Path) -> None:
    report = doctor(
        ws.root,
        env={"HOME": str(tmp_path / "home"), "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")},
    )
    key = next(f for f in report.findings if f.name == "api key for cron")
    assert key.status == "fail" and "mode 600" in key.fix and report.failed
    shell = doctor(ws.root, env={"ANTHROPIC_API_KEY": "k", "CRUSTACEAN_CONFIG_DIR": str(tmp_path)})
    assert next(f for f in shell.findings if f.name == "api key for cron").status == "warn"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg/env").write_text("ANTHROPIC_API_KEY=k\n")
    good = doctor(ws.root, env={"CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")})
    assert next(f for f in good.findings if f.name == "api key for cron").status == "ok"
    names = {f.name for f in good.findings}
    assert {"config", "git", "workspace writable", "last run", "lock"} <= names
    assert "openclaw" not in names  # not installed here: not named


@pytest.mark.parametrize(
    "line", ["ANTHROPIC_AUTH_TOKEN=t\n", "ANTHROPIC_BASE_URL=http://127.0.0.1:9\n"]
)
def test_doctor_accepts_what_a_run_accepts_in_the_env_file(
    ws: Workspace, tmp_path: Path, line: str
) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg/env").write_text(line)
    report = doctor(ws.root, env={"CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")})
    assert next(f for f in report.findings if f.name == "api key for cron").status == "ok"


def test_doctor_and_paths_honour_llm_env_file(ws: Workspace, tmp_path: Path) -> None:
    custom = tmp_path / "secrets/crustacean.env"
    custom.parent.mkdir()
    custom.write_text("ANTHROPIC_API_KEY=k\n")
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text().replace('# env_file = ""', f'env_file = "{custom}"', 1))
    env = {"CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")}
    found = next(f for f in doctor(ws.root, env=env).findings if f.name == "api key for cron")
    assert found.status == "ok" and str(custom) in found.detail
    assert ("env_file", "env file (API key)", str(custom)) in locations(ws.root, env=env)


def test_doctor_config_error_and_cli_exit(ws: Workspace) -> None:
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + "\n[bogus]\nx = 1\n")
    report = doctor(ws.root, env={})
    assert report.findings[0].status == "fail" and "unknown key" in report.findings[0].detail
    result = run_cli("-w", str(ws.root), "doctor", code=1)
    assert "fail  config:" in result.stdout


def openclaw_home(tmp_path: Path, config: str, name: str = "home") -> Path:
    """A HOME whose ~/.openclaw/openclaw.json holds `config`."""
    home = tmp_path / name
    (home / ".openclaw").mkdir(parents=True)
    (home / ".openclaw/openclaw.json").write_text(config)
    return home


def test_doctor_ping_and_openclaw(ws: Workspace, fake_api: Any, tmp_path: Path) -> None:
    config = {
        "agents": {"defaults": {"workspace": str(ws.root), "memorySearch": {"extraPaths": []}}}
    }
    home = openclaw_home(tmp_path, json.dumps(config))
    fake_api.enqueue(text("pong"))
    env = {
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": fake_api.url,
        "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    report = doctor(ws.root, env=env, ping=True)
    by = {f.name: f for f in report.findings}
    assert by["api ping"].status == "ok" and fake_api.messages()[0].body["max_tokens"] == 1
    assert by["openclaw memorySearch"].status == "warn"
    assert str(ws.root / "knowledge") in by["openclaw memorySearch"].fix
    assert "openclaw dreaming" not in by  # off by default: OpenClaw documents it as opt-in


@pytest.mark.parametrize(
    ("config", "search", "dreaming"),
    [
        ('{agents: {defaults: {memorySearch: {extraPaths: ["knowledge"]}}}}', "warn", None),
        (
            '{agents: {defaults: {workspace: "WS", memorySearch: {extraPaths: ["knowledge",],},},},'
            " // JSON5\n"
            ' plugins: {entries: {"memory-core": {config: {dreaming: {enabled: false}}}}}}',
            "ok",
            None,
        ),
        (
            '{agents: {list: [{id: "main", workspace: "WS", memorySearch: {extraPaths: '
            '["./knowledge"]}}]}, plugins: {entries: {"memory-core": {enabled: false}}}}',
            "ok",
            None,
        ),
        (
            '{agents: {defaults: {memorySearch: {extraPaths: ["~/agent-ws/knowledge"]}}}}',
            "ok",
            None,
        ),
        (
            '{agents: {defaults: {memorySearch: {extraPaths: ["WS/knowledge/"]}}},'
            ' plugins: {entries: {"memory-core": {config: {dreaming: {enabled: true}}}}}}',
            "ok",
            "warn",
        ),
    ],
)
def test_doctor_reads_openclaw_config_as_openclaw_does(
    tmp_path: Path, config: str, search: str, dreaming: str | None
) -> None:
    from crustacean.ops.init import init_workspace

    root = tmp_path / "home/agent-ws"
    home = openclaw_home(tmp_path, config.replace("WS", str(root)))
    init_workspace(root, detect=False)
    with (root / "crustacean.toml").open("a") as fh:  # it collects OpenClaw's transcripts
        fh.write('\n[[sources]]\nkind = "openclaw"\npath = "~/.openclaw/agents"\n')
    env = {"HOME": str(home), "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")}
    by = {f.name: f.status for f in doctor(root, env=env).findings}
    assert by["openclaw memorySearch"] == search
    assert by.get("openclaw dreaming") == dreaming


def test_doctor_names_an_unreadable_openclaw_config(ws: Workspace, tmp_path: Path) -> None:
    home = openclaw_home(tmp_path, "{agents: [")
    report = doctor(ws.root, env={"HOME": str(home), "CRUSTACEAN_CONFIG_DIR": str(tmp_path)})
    found = next(f for f in report.findings if f.name == "openclaw")
    assert found.status == "warn" and "could not be read as JSON5" in found.detail
    assert "openclaw doctor" in found.fix


def test_doctor_sees_the_cron_entry(ws: Workspace, tmp_path: Path, monkeypatch: Any) -> None:
    from crustacean.ops import cron, status

    tab = tmp_path / "crontab"
    tab.write_text("# mine\n")
    cron.install(ws, crontab_file=tab, python="/nonexistent/python3")
    monkeypatch.setattr(cron, "read_crontab", lambda _f, **_: tab.read_text())
    found = {f.name: f for f in status._cron(ws)}
    assert (
        found["cron entry"].status == "fail"
        and "/nonexistent/python3" in found["cron entry"].detail
    )
    cron.install(ws, crontab_file=tab)
    found = {f.name: f for f in status._cron(ws)}
    assert found["cron entry"].status == "ok" and "cron daemon" in found
    tab.write_text(tab.read_text().replace(" tick --log >> ", " tick >> "))  # an older release's
    old = {f.name: f for f in status._cron(ws)}["cron entry"]
    assert old.status == "warn" and "unrotated" in old.detail
    assert old.fix == "run `crustacean cron install` again"


@pytest.mark.parametrize(
    ("status", "detail", "fix"),
    [
        (401, "the API key was rejected (401; key from", "set a valid one"),
        (
            404,
            "model 'claude-haiku-5-5' was not found (404)",
            "set models.small in crustacean.toml",
        ),
    ],
)
def test_doctor_ping_names_the_fix_of_a_failed_request(
    ws: Workspace, fake_api: Any, tmp_path: Path, status: int, detail: str, fix: str
) -> None:
    fake_api.enqueue(error(status))
    env = {
        "ANTHROPIC_API_KEY": "sk-test-ping-0123456789",
        "ANTHROPIC_BASE_URL": fake_api.url,
        "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    found = next(f for f in doctor(ws.root, env=env, ping=True).findings if f.name == "api ping")
    assert found.status == "fail" and found.detail.startswith(detail)
    assert found.fix.startswith(fix) and found.fix != "see the message"


def test_split_fix_cuts_at_the_last_semicolon_outside_brackets() -> None:
    assert split_fix("x failed (401; key from env); set a valid one.") == (
        "x failed (401; key from env)",
        "set a valid one",
    )
    assert split_fix("no semicolon here")[1].startswith("run `crustacean doctor --ping` again")


def _doctor_names(ws: Workspace, home: Path, tmp_path: Path) -> dict[str, Any]:
    env = {"HOME": str(home), "CRUSTACEAN_CONFIG_DIR": str(tmp_path / "cfg")}
    return {f.name: f for f in doctor(ws.root, env=env).findings}


def test_doctor_names_only_what_is_installed(ws: Workspace, tmp_path: Path) -> None:
    home = tmp_path / "bare-home"
    home.mkdir()
    names = _doctor_names(ws, home, tmp_path)
    assert not [n for n in names if "openclaw" in n or "claude" in n]


def test_doctor_keeps_openclaw_advice_out_of_a_claude_code_workspace(
    ws: Workspace, tmp_path: Path
) -> None:
    home = openclaw_home(tmp_path, "{agents: {defaults: {memorySearch: {}}}}", "home2")
    names = _doctor_names(ws, home, tmp_path)
    assert "openclaw memorySearch" not in names and "openclaw dreaming" not in names


@pytest.mark.parametrize(
    ("lines", "width", "status"),
    [(150, 40, "ok"), (201, 10, "warn"), (100, 300, "warn")],  # 100 x 300 B = 29 KB
)
def test_doctor_warns_about_claude_codes_memory_md_past_its_load_limit(
    ws: Workspace, tmp_path: Path, lines: int, width: int, status: str
) -> None:
    home = tmp_path / "home3"
    memory = home / ".claude/projects/-home-you-code-app/memory/MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text(("x" * (width - 1) + "\n") * lines)
    found = _doctor_names(ws, home, tmp_path)["claude code memory"]
    assert found.status == status
    if status == "warn":
        assert str(memory) in found.detail and "200 lines / 25 KB" in found.detail
        assert "short index" in found.fix


KEY = "sk-ant-api03-" + "Q" * 40


@pytest.mark.parametrize(
    ("text", "mode", "key_status", "file_findings"),
    [
        (f"ANTHROPIC_API_KEY={KEY}\n", 0o600, "ok", [("ok", "is private and every line")]),
        ("ANTHROPIC_API_KEY=sk-ant-...\n", 0o600, "fail", [("ok", "is private")]),
        ("export ANTHROPIC_API_KEY='<your key>'\n", 0o600, "fail", [("ok", "is private")]),
        (f"ANTHROPIC_API_KEY={KEY}\n", 0o644, "ok", [("warn", "can be read by other users")]),
        (
            f"# my key\n{KEY}\nANTHROPIC_API_KEY={KEY}\n",
            0o640,
            "ok",
            [("warn", "(mode 640)"), ("warn", "line(s) 2 are not KEY=VALUE and are ignored")],
        ),
    ],
    ids=["private", "placeholder", "bracketed placeholder", "world-readable", "unparsable line"],
)
def test_doctor_checks_the_key_file(
    ws: Workspace,
    tmp_path: Path,
    text: str,
    mode: int,
    key_status: str,
    file_findings: list[tuple[str, str]],
) -> None:
    """Before: ok for the guide's `sk-ant-...` and for an env file anyone could read."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "env").write_text(text)
    (cfg / "env").chmod(mode)
    report = doctor(ws.root, env={"CRUSTACEAN_CONFIG_DIR": str(cfg)})
    key = next(f for f in report.findings if f.name == "api key for cron")
    assert key.status == key_status
    if key_status == "fail":
        assert key.detail == f"the key in {cfg / 'env'} is a placeholder from a guide, not a key"
        assert KEY not in key.detail + key.fix and report.failed
    found = [f for f in report.findings if f.name == "key file"]
    assert len(found) == len(file_findings)
    for finding, (status, needle) in zip(found, file_findings, strict=True):
        assert finding.status == status and needle in finding.detail, finding
    if mode & 0o077:
        assert found[0].fix == f"chmod 600 {cfg / 'env'}"
