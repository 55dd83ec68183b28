"""Every test runs isolated: workspace, user config and HOME point into tmp_path, no API key,
no colours, no network."""

from __future__ import annotations

import os

# typer and rich read these at import time, so they are cleared before the app is imported.
for _var in (
    "FORCE_COLOR",
    "PY_COLORS",
    "GITHUB_ACTIONS",
    "CRUSTACEAN_WORKSPACE",
    "CRUSTACEAN_ORG_CONFIG",
    "CRUSTACEAN_CONFIG_DIR",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "LANGUAGE",  # gettext reads it before LC_ALL: git would still answer in the host's language
):
    os.environ.pop(_var, None)
os.environ.update(
    {
        "TERM": "dumb",
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "_TYPER_FORCE_DISABLE_TERMINAL": "1",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",  # git's and the CLI's messages in English, text in UTF-8, on any host
        "CRUSTACEAN_SEMANTIC": "0",  # lexical search unless a test switches the extra on
        "CRUSTACEAN_RERANK": "0",  # no encoder (torch) unless a test puts one in
    }
)

import hashlib  # noqa: E402  (after the environment is fixed)
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from store_helpers import copy_workspace, make_template  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from crustacean.cli.app import app  # noqa: E402
from crustacean.workspace import Workspace  # noqa: E402

# CI runs the property and fuzz tests on a fixed seed, so a red build is reproducible; a developer's
# run explores new examples each time.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRUSTACEAN_CONFIG_DIR", str(tmp_path / "userconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # As on a host whose name has no domain: git never guesses an identity, so a test's own
    # `git commit` without one fails on every machine, not only on some.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    for var in ("CRUSTACEAN_WORKSPACE", "CRUSTACEAN_ORG_CONFIG", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for var in [v for v in os.environ if v.startswith("CRUSTACEAN_") and "__" in v]:
        monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def fresh_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace initialized once per test process, for `ws` to copy."""
    return make_template(tmp_path_factory)


@pytest.fixture
def ws(fresh_template: Path, tmp_path: Path) -> Workspace:
    """A freshly initialized, versioned workspace at tmp_path/ws: a byte copy of one `init`
    made once per test process (same files, commits and index; ~70 ms less CPU a test, and
    ~700 tests take it). `init` itself has its own tests (tests/test_init*.py)."""
    return copy_workspace(fresh_template, tmp_path)


@pytest.fixture(scope="module")
def ws_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace initialized once per module (init is slow), for `copied_ws` to copy."""
    return make_template(tmp_path_factory)


@pytest.fixture
def copied_ws(ws_template: Path, tmp_path: Path) -> Workspace:
    """What `ws` gives (tmp_path/ws, freshly initialized), as a copy of the module's template."""
    return copy_workspace(ws_template, tmp_path)


def run_cli(*args: str, code: int = 0, env: dict[str, str] | None = None):
    """Invoke the CLI in-process and check the exit code."""
    result = CliRunner().invoke(app, list(args), prog_name="crustacean", env=env)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def stages_at(monkeypatch: pytest.MonkeyPatch, now: datetime) -> None:
    """The CLI's stages run at `now`, a fixture's time, not today's: collect reads the last two
    days and curate "the last N days" by this clock, so on the real one a fixture's transcripts
    and logs fall out of range as the calendar moves on."""
    monkeypatch.setattr("crustacean.stages.skeleton.wall_clock", lambda: now)


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under root (git refs and state included): proof nothing moved."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(root).as_posix()
            if rel.startswith(".git/") and not rel.startswith((".git/refs", ".git/HEAD")):
                continue  # object files and logs: HEAD and refs say whether a commit happened
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def fake_api():
    """A local fake Messages API (tests/fakeapi.py), so model calls never reach the network."""
    from fakeapi import FakeAnthropic

    with FakeAnthropic() as fake:
        yield fake


# The longest tests (by their time in a whole run on 2 loaded CPUs), started first, longest
# first: under `-n auto --dist worksteal` each worker runs its share in order and an idle one
# steals from the end of another's, so a long one collected last would run alone at the end
# while the other CPU idles. None of them shares a module-scoped fixture with a test left behind
# (moving one away from its module would build that fixture twice).
FIRST = (
    "tests/test_cron.py::test_real_cron_daemon_runs_the_installed_entry",  # waits for cron's minute
    "tests/test_types.py::test_mypy_is_clean",
    "tests/test_quickstart.py::test_quickstart_with_a_base_url_runs_every_stage_once",
    "tests/test_store_history.py::test_random_writes_and_rollbacks_never_lose_a_byte_or_a_version",
    "tests/test_docs.py::test_guide_commands_run_in_order[claude-code.md]",
    "tests/test_docs.py::test_guide_commands_run_in_order[openclaw.md]",
    "tests/test_readme.py::test_the_tour_runs_in_order",
    "tests/reliability/test_crash.py::test_crash_curate_short",
    "tests/reliability/test_crash.py::test_crash_collect_short",
    "tests/reliability/test_crash.py::test_kills_at_the_index_sync_point_lose_nothing",
    "tests/test_docs.py::test_guide_commands_run_in_order[fleet.md]",
    "tests/reliability/test_concurrency.py::test_mcp_writers_race_a_curate_run",
    "tests/test_bench.py::test_benchmark_runs_on_tiny_data[search_bench.py]",
    "tests/reliability/test_crash.py::test_edits_made_after_a_crash_survive_repair",
    "tests/reliability/test_fuzz.py::test_write_context_never_escapes",
    "tests/test_bench.py::test_benchmark_runs_on_tiny_data[tick_bench.py]",
    "tests/test_bench.py::test_benchmark_runs_on_tiny_data[collect_tokens_bench.py]",
    "tests/test_quickstart.py::"
    "test_quickstart_without_a_key_plans_calls_nothing_and_its_next_commands_work",
    "tests/test_docs.py::test_guide_commands_run_in_order[exit-codes-and-env.md]",
    "tests/test_qa_bench.py::test_collect_runs_through_the_relay",
    "tests/reliability/test_crash.py::test_collect_killed_inside_its_write_loses_nothing",
    "tests/test_docs.py::test_guide_commands_run_in_order[safety.md]",
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per CPU, plus one. Some tests mostly wait on another process (the
    real cron daemon's next minute, up to 60 s; a browser; git's fsyncs): with one worker per
    CPU such a wait leaves a CPU idle (2 CPUs: 397 s a whole run; with the extra worker 300 s)."""
    return (
        len(os.sched_getaffinity(0)) + 1
        if hasattr(os, "sched_getaffinity")
        else ((os.cpu_count() or 1) + 1)
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Moves FIRST to the front, keeping the rest in collection order (every worker collects
    the same order, as xdist requires)."""
    rank = {nodeid: i for i, nodeid in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(FIRST)))
