"""Layered config: defaults, layers, locks, env and flags, and every bad-input error."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli, snapshot
from crustacean.config import (
    SCHEMA,
    load_config,
    redundant_keys,
    render_workspace_toml,
    toml_value,
)
from crustacean.ops.init import init_workspace
from crustacean.workspace import Workspace


def test_defaults_match_the_seeds() -> None:
    s = load_config(None, env={}).settings
    assert (s.memory.max_entries, s.memory.budget_chars, s.memory.working_lines) == (50, 20000, 500)
    tiers = s.tiers
    assert (tiers.hot_days, tiers.hot_min_uses, tiers.warm_days, tiers.cold_days) == (7, 5, 30, 90)
    assert (tiers.hot_limit, tiers.memory_cap, s.archive.daily_after_days) == (20, 10000, 30)
    assert (s.store.max_file_bytes, s.store.max_files_per_call) == (262144, 20)
    assert s.memory.write == "direct"
    assert (s.models.small, s.models.mid, s.models.large) == (
        "claude-haiku-5-5",
        "claude-sonnet-5-5",
        "claude-opus-5-5",
    )
    stages = {
        n: (getattr(s.stages, n).tier, getattr(s.stages, n).schedule)
        for n in ("collect", "curate", "compile", "calibrate")
    }
    assert stages == {
        "collect": ("small", "0 */2 * * *"),
        "curate": ("mid", "30 3 * * *"),
        "compile": ("large", "0 4 * * 0"),
        "calibrate": ("large", "0 5 1 * *"),
    }


def test_rendered_toml_shows_every_key_but_sets_only_the_chosen_ones() -> None:
    text = render_workspace_toml({"workspace.daily_dir": "daily", "memory.write": "review"})
    data = tomllib.loads(text)
    keys = [x.lstrip("# ") for x in text.splitlines() if " = " in x and "  # " in x]
    assert len(keys) == len(SCHEMA) - 2  # sources and governance.locked are prose comments
    set_lines = [x for x in text.splitlines() if " = " in x and not x.startswith("#")]
    assert set_lines == [
        'daily_dir = "daily"  # daily logs in memory/ (root) or memory/daily/ (daily)',
        'write = "review"  # model writes: direct, review (every write is a proposal) or off '
        "(read-only)",
    ]
    assert "# schedule = " + '"0 */2 * * *"' in text  # a default is shown, commented out
    assert data["workspace"] == {"daily_dir": "daily"} and data["stages"]["collect"] == {}
    (Path("crustacean.toml")).write_text(text)
    loaded = load_config(Path("."), env={})
    chosen = {k for k, layer in loaded.origins.items() if layer == "workspace"}
    assert chosen == {"workspace.daily_dir", "memory.write"}
    assert all(loaded.values[k] == SCHEMA[k].default for k in SCHEMA if k not in chosen)


def test_an_old_full_toml_keeps_working_and_its_repeats_are_named(tmp_path: Path) -> None:
    """A crustacean.toml from before (every key pinned) loads unchanged; `--redundant` names
    the keys that only repeat a default, so the user can delete them."""
    sections: dict[str, list[str]] = {}
    for key, spec in SCHEMA.items():
        if key != "sources" and not key.startswith("governance."):
            sec, _, name = key.rpartition(".")
            sections.setdefault(sec, []).append(f"{name} = {toml_value(spec.default)}")
    full = "\n".join(f"[{sec}]\n" + "\n".join(lines) for sec, lines in sections.items())
    root = _workspace(tmp_path, full)
    loaded = load_config(root, env={})
    assert all(loaded.values[k] == SCHEMA[k].default for k in SCHEMA)
    repeats = redundant_keys(loaded)
    assert "models.small" in repeats and "prices.small.input" in repeats
    assert "workspace.daily_dir" not in repeats  # a fact of the workspace, not a taste
    out = run_cli("-w", str(root), "config", "show", "--redundant").stdout
    assert "delete the line to follow future defaults" in out
    assert '  models.small = "claude-haiku-5-5"  (' + str(root / "crustacean.toml") + ")" in out
    rows = json.loads(run_cli("-w", str(root), "config", "show", "--json").stdout)
    small = next(r for r in rows if r["key"] == "models.small")
    assert small["layer"] == "workspace" and small["redundant"] is True
    assert small["default"] == "claude-haiku-5-5"


def test_config_show_tells_defaults_from_choices(copied_ws: Workspace) -> None:
    root = copied_ws.root
    rows = json.loads(run_cli("-w", str(root), "config", "show", "--json").stdout)
    chosen = {r["key"] for r in rows if r["layer"] != "default"}
    assert chosen == {"workspace.daily_dir"}
    assert not any(r["redundant"] for r in rows)
    out = run_cli("-w", str(root), "config", "show").stdout
    assert f"1 of {len(SCHEMA)} keys chosen; the rest are defaults." in out
    assert (
        "No config file repeats a default"
        in run_cli("-w", str(root), "config", "show", "--redundant").stdout
    )


def _workspace(tmp_path: Path, toml: str | bytes) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    (root / "crustacean.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    return root


BAD_CONFIGS = [
    ("[memory]\nmax_entrys = 5\n", "unknown key 'memory.max_entrys'. Known keys in [memory]"),
    ("colour = 1\n", "unknown key 'colour'. Known keys at the top level"),
    ('[memory]\nmax_entries = "fifty"\n', "key 'memory.max_entries' must be an integer"),
    ("[memory]\nmax_entries = 0\n", "must be an integer of at least 1"),
    ('[memory]\nwrite = "sometimes"\n', 'must be one of "direct", "review", "off"'),
    ('[stages.collect]\nschedule = "61 * * * *"\n', "must be a valid 5-field cron expression"),
    ('[stages.collect]\nschedule = "0 0 9 * * *"\n', "6 fields read as seconds"),
    ('[workspace]\ntimezone = "Mars/Olympus"\n', "an IANA time zone"),
    ("[memory\nwrite = 1\n", "TOML syntax error"),
    ('[[sources]]\nkind = "openclaw"\n', "'path' must be set"),
    ('[[sources]]\npath = "x"\nkind = "slack"\n', "'kind' must be one of"),
    ("[store]\nmax_file_bytes = true\n", "key 'store.max_file_bytes' must be an integer"),
    (b'[memory]\nwrite = "\xff"\n', "not UTF-8"),
]


@pytest.mark.parametrize(("toml", "expected"), BAD_CONFIGS)
def test_bad_config_is_one_clear_line_with_exit_2(
    tmp_path: Path, toml: str | bytes, expected: str
) -> None:
    root = _workspace(tmp_path, toml)
    before = snapshot(root)
    result = run_cli("-w", str(root), "config", "show", code=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) <= 2 and lines[0].startswith("Error: ")
    assert str(root / "crustacean.toml") in result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.output
    assert snapshot(root) == before


def test_layers_apply_in_order_and_show_their_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_dir = tmp_path / "userconfig"
    user_dir.mkdir()
    (user_dir / "config.toml").write_text("[memory]\nmax_entries = 10\nbudget_chars = 999\n")
    org = tmp_path / "org.toml"
    org.write_text("[curate]\ndays = 5\n[memory]\nmax_entries = 7\n")
    monkeypatch.setenv("CRUSTACEAN_ORG_CONFIG", str(org))
    root = _workspace(tmp_path, "[memory]\nbudget_chars = 1234\n")
    monkeypatch.setenv("CRUSTACEAN_MEMORY__WORKING_LINES", "300")
    result = run_cli(
        "-w", str(root), "-c", "archive.daily_after_days=14", "config", "show", "--json"
    )
    rows = {r["key"]: (r["value"], r["layer"]) for r in json.loads(result.stdout)}
    assert rows["curate.days"] == (5, "org")
    assert rows["memory.max_entries"] == (10, "user")
    assert rows["memory.budget_chars"] == (1234, "workspace")
    assert rows["memory.working_lines"] == (300, "env")
    assert rows["archive.daily_after_days"][1] == "flag"
    assert rows["tiers.hot_days"][1] == "default"


def test_locked_key_keeps_the_org_value_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = tmp_path / "org.toml"
    org.write_text('[memory]\nwrite = "review"\n[governance]\nlocked = ["memory.write"]\n')
    monkeypatch.setenv("CRUSTACEAN_ORG_CONFIG", str(org))
    root = _workspace(tmp_path, '[memory]\nwrite = "direct"\n')
    result = run_cli("-w", str(root), "-c", "memory.write=off", "config", "show")
    assert f"Warning: {root / 'crustacean.toml'}: 'memory.write' is locked by the org config" in (
        result.stderr
    )
    assert "Warning: -c: 'memory.write' is locked" in result.stderr
    row = next(x for x in result.stdout.splitlines() if x.strip().startswith("memory.write "))
    assert '"review"' in row and "org" in row and "locked" in row


@pytest.mark.parametrize(
    ("env", "argv", "words"),
    [
        (
            {"CRUSTACEAN_MEMORY__MAX_ENTRIES": "many"},
            ["config", "show"],
            ["environment variable CRUSTACEAN_MEMORY__MAX_ENTRIES", "must be an integer"],
        ),
        (
            {"CRUSTACEAN_NOPE__KEY": "1"},
            ["config", "show"],
            ["environment variable CRUSTACEAN_NOPE__KEY", "unknown key 'nope.key'"],
        ),
        (
            {"CRUSTACEAN_ORG_CONFIG": "{tmp}/nope.toml"},
            ["config", "show"],
            ["CRUSTACEAN_ORG_CONFIG points to"],
        ),
        (
            {},
            ["-w", "{tmp}/plain", "history"],
            ["is not a crustacean workspace (no crustacean.toml)"],
        ),
    ],
    ids=["env value", "env key", "org file missing", "plain folder"],
)
def test_bad_environment_values_and_workspaces_are_usage_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    argv: list[str],
    words: list[str],
) -> None:
    (tmp_path / "plain").mkdir()
    for var, value in env.items():
        monkeypatch.setenv(var, value.format(tmp=tmp_path))
    result = run_cli(*(a.format(tmp=tmp_path) for a in argv), code=2)
    assert all(w in result.stderr for w in words), result.stderr


def test_env_and_flag_values_are_typed() -> None:
    loaded = load_config(
        None,
        env={"CRUSTACEAN_STAGES__CURATE__ENABLED": "false"},
        overrides=["llm.timeout_seconds=2.5", "governance.locked=a"],
    )
    assert loaded.settings.stages.curate.enabled is False
    assert loaded.settings.llm.timeout_seconds == 2.5
    assert loaded.warnings  # governance.locked is read only from the org file


# ------------------------------------------------------------ discovery


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for root in (a, b, c):
        init_workspace(root)
    (c / "memory" / "deep").mkdir()
    monkeypatch.chdir(c / "memory" / "deep")
    assert run_cli("paths", "--json").stdout.count(str(c)) >= 1
    monkeypatch.setenv("CRUSTACEAN_WORKSPACE", str(b))
    assert json.loads(run_cli("paths", "--json").stdout)["workspace"] == str(b)
    assert json.loads(run_cli("-w", str(a), "paths", "--json").stdout)["workspace"] == str(a)


def test_paths_lists_every_location(ws) -> None:
    out = run_cli("-w", str(ws.root), "paths").stdout
    for name in (
        "workspace:",
        "workspace config:",
        "state dir:",
        "logs:",
        "user config:",
        "org config:",
        "packaged pipeline docs:",
    ):
        assert name in out


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Europe/Berlin", "Pacific/Chatham"])
def test_today_in_the_system_zone_is_the_date_tzlocal_gives(
    zone: str, copied_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Workspace.today` with no zone configured reads the C library's local time (no tzlocal
    import); around midnight and DST changes it must be the date of the zone tzlocal names."""
    import time as time_mod
    from datetime import UTC, datetime, timedelta

    import tzlocal

    from crustacean.workspace import Workspace

    root = copied_ws.root
    monkeypatch.setenv("TZ", zone)
    time_mod.tzset()
    tzlocal.reload_localzone()
    try:
        ws = Workspace(root, load_config(root))
        named = Workspace(root, load_config(root)).tz  # tzlocal's zone
        assert str(named) == zone
        starts = [datetime(2026, m, d, tzinfo=UTC) for m, d in ((3, 8), (3, 29), (10, 25), (11, 1))]
        for start in starts:
            for quarter in range(0, 4 * 48):
                now = start + timedelta(minutes=15 * quarter)
                assert ws.today(now) == now.astimezone(named).date(), now
        assert "tz" not in ws.__dict__  # the shortcut never resolved the zone
    finally:
        monkeypatch.undo()
        time_mod.tzset()
        tzlocal.reload_localzone()


@pytest.mark.parametrize(
    "deep",
    [
        "x = " + "[" * 3000 + "]" * 3000,
        "x = " + "{a = " * 3000 + "1" + "}" * 3000,
        "[" + ".".join(["a"] * 3000) + "]\nk = 1",
    ],
    ids=["arrays", "inline tables", "dotted table"],
)
def test_a_config_nested_thousands_of_levels_is_one_error_line(ws: Workspace, deep: str) -> None:
    """Before: a RecursionError traceback from every command. At Python's default recursion
    limit, which the command runs with (a Hypothesis test run before in the same worker can
    leave it raised, and then tomllib reads the nesting and the error names the unknown key)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        _nested_is_one_error_line(ws, deep)
    finally:
        sys.setrecursionlimit(limit)


def _nested_is_one_error_line(ws: Workspace, deep: str) -> None:
    toml = ws.root / "crustacean.toml"
    toml.write_text(toml.read_text() + "\n" + deep + "\n")
    before = snapshot(ws.root)
    for command in (["status"], ["health"], ["search", "beans"]):
        out = run_cli("-w", str(ws.root), *command, code=2)
        assert "Traceback" not in out.output and "RecursionError" not in out.output
        assert out.output.startswith(f"Error: {toml}: ") and out.output.count("\n") == 1
        if "[" not in deep[:1]:  # tomllib itself recurses: arrays and inline tables
            assert "config file is nested too deeply to read; " in out.output
    assert snapshot(ws.root) == before
