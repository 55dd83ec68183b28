"""The shell's lean search (cli/search_fast.py): one CLI, one behaviour.

Each case runs the same argv twice in fresh processes: through the console script
(crustacean/cli/entry.py, which may answer before the app loads) and through the typer app
itself; stdout, stderr, the exit code and the files left must be the same, and the case says
whether the lean path answered (it must, for a plain search with a memo and a fresh index; it
must not, for anything it cannot be sure of). No timings here: bench/search_bench.py has them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest

from crustacean.cli import search_fast
from crustacean.config import load_config
from crustacean.ops.init import init_workspace
from crustacean.recall import semantic
from crustacean.recall.search import SearchIndex
from crustacean.workspace import Workspace

HEAVY = ("typer", "click", "rich", "yaml", "crustacean.config", "crustacean.workspace")
LEAN = (  # the console script, and which heavy modules it had loaded when the process ended
    "import atexit, sys\n"
    "mark = sys.argv.pop(1)\n"
    "def seen():\n"
    f"    found = [m for m in {HEAVY!r} if m in sys.modules]\n"
    "    with open(mark, 'w') as fh:\n"
    "        fh.write(' '.join(found))\n"
    "atexit.register(seen)\n"
    "from crustacean.cli.entry import main\n"
    "main()\n"
)
APP = "from crustacean.cli.app import main\nmain()\n"  # the app, never the lean path
EAST, WEST = "Pacific/Kiritimati", "Pacific/Pago_Pago"  # 25 hours apart: never the same day

NOTES = {
    "memory/notes/garden.md": "# Garden\n\nThe tomatoes need staking.\nWhere is the hose?\n"
    "By the shed, coiled.\n",
    "memory/notes/work.md": "# Work\n\nThe invoice for March is late.\nThe garden shed invoice "
    "too.\n",
    "memory/contacts/maria.md": "---\nname: Maria Lopez\n---\n# Maria\n\nMaria's garden has "
    "figs.\n",
    "memory/notes/odd.md": "# Odd\n\nA line with a\ttab in it.\nSee http://x.test:80/path at "
    "10:05:30.\nescape \x1b[2K here\n",
    "archive/lessons/old.md": "# Old\n\nThe old garden plan, archived.\n",
    "README.md": "# Readme\n\nThis garden workspace.\n",
    "memory/notes/bad.md": "---\nname: [unclosed\n---\nbroken garden frontmatter\n",
}


class Run(NamedTuple):
    out: str
    err: str
    code: int
    heavy: str | None  # heavy modules the console script loaded; None for the app


def _env(root: Path, home: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CRUSTACEAN_CONFIG_DIR": str(home / "config"),
        "CRUSTACEAN_SEMANTIC": "0",
        "PYTHONIOENCODING": "utf-8",
        "LC_CTYPE": "C.UTF-8",  # else Python coerces the C locale and adds it to os.environ
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    env.update(extra)
    return env


def run(script: str, args: list[str], env: dict[str, str], cwd: Path, mark: Path) -> Run:
    pre = [str(mark)] if script is LEAN else []
    mark.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", script, *pre, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    heavy = mark.read_text() if script is LEAN and mark.is_file() else None
    return Run(done.stdout, done.stderr, done.returncode, heavy)


def state_rows(root: Path) -> dict[str, list[Any]]:
    """state.db as rows, but the memo (what a lean search reads) and the vectors' version
    token (random by design)."""
    conn = sqlite3.connect(root / ".crustacean" / "state.db")
    try:
        out = {}
        for table in ("search_files", "search_cjk", "search_vectors", "recalls", "_migrations"):
            out[table] = sorted(conn.execute(f"SELECT * FROM {table}").fetchall())
        out["search_lines"] = sorted(
            conn.execute("SELECT rowid, path, line, title, body FROM search_lines").fetchall()
        )
        out["search_meta"] = sorted(
            conn.execute("SELECT * FROM search_meta WHERE key != 'vectors'").fetchall()
        )
        return out
    finally:
        conn.close()


def files(root: Path) -> dict[str, str]:
    """Every file's sha256 (state.db as its rows: its pages may differ for the same rows)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or rel.startswith((".git/objects", ".git/logs")):
            continue
        if rel.startswith(".crustacean/state.db"):
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    if (root / ".crustacean" / "state.db").is_file():
        rows = json.dumps(state_rows(root), default=repr).encode()
        out["state.db"] = hashlib.sha256(rows).hexdigest()
    return out


class Place:
    """A workspace, an environment and a cwd to run searches in."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.home = root, home
        self.mark = home / "heavy.txt"

    def lean(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
        return run(LEAN, list(args), env or _env(self.root, self.home), cwd or self.home, self.mark)

    def app(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
        return run(APP, list(args), env or _env(self.root, self.home), cwd or self.home, self.mark)

    def same(
        self,
        *args: str,
        answered: bool,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Run:
        """The console script and the app give the same answer and leave the same files."""
        before = files(self.root)
        lean = self.lean(*args, env=env, cwd=cwd)
        after_lean = files(self.root)
        app = self.app(*args, env=env, cwd=cwd)
        assert (lean.out, lean.err, lean.code) == (app.out, app.err, app.code)
        assert files(self.root) == after_lean
        if answered:  # answered before the app loaded: nothing heavy, nothing written
            assert lean.heavy == "", lean.heavy
            assert after_lean == before
        else:
            assert lean.heavy and "typer" in lean.heavy
        return lean


def make_workspace(root: Path, home: Path) -> Place:
    init_workspace(root)
    for rel, text in NOTES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    today = {zone: datetime.now(UTC).astimezone(ZoneInfo(zone)).date() for zone in (EAST, WEST)}
    for zone, day in today.items():
        (root / f"memory/{day.isoformat()}.md").write_text(
            f"# {day.isoformat()}\n\n## [09:00] note\n\nThe {zone.split('/')[1]} garden log.\n",
            "utf-8",
        )
    toml = root / "crustacean.toml"
    toml.write_text(toml.read_text("utf-8").replace('# timezone = ""', f'timezone = "{EAST}"'))
    with SearchIndex(Workspace(root, load_config(root))) as index:
        index.rebuild()
    return Place(root, home)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    base = tmp_path_factory.mktemp("lean")
    home = base / "home"
    home.mkdir()
    p = make_workspace(base / "ws", home)
    assert p.lean("-w", str(p.root), "search", "garden").heavy  # the app: leaves the memo
    return p


@pytest.fixture
def own(tmp_path: Path) -> Place:
    """A workspace of the test's own, to change."""
    home = tmp_path / "ownhome"
    home.mkdir()
    return make_workspace(tmp_path / "own", home)


@pytest.mark.parametrize(
    "args",
    [
        ["garden"],
        ["garden", "shed", "invoice"],
        ["garden", "-n", "2"],
        ["-n2", "garden"],
        ["garden", "--json"],
        ["garden", "--budget-chars", "120"],
        ["--budget-chars=400", "garden", "--json"],
        ["garden", "--path-prefix", "memory/contacts"],
        ["garden", "--path-prefix=README"],
        ["garden", "--archive", "-n", "20"],
        ["--raw", "title:garden"],
        ["--raw", '"garden shed"', "--json"],
        ["nothing-matches-this"],
        ["nothing-matches-this", "--json"],
        ["Maria's", "figs"],
        ["today", "garden"],
    ],
)
def test_a_plain_search_is_answered_lean_and_alike(place: Place, args: list[str]) -> None:
    place.same("-w", str(place.root), "search", *args, answered=True)


@pytest.mark.parametrize(
    "args",
    [
        ["--raw", "garden AND ("],  # bad FTS syntax: the app's error, exit 2
        ["--raw", "NEAR("],
        ["garden", "-n", "0"],  # click's range check
        ["garden", "-n", "x"],
        ["garden", "--budget-chars", "999999"],  # over the cap: the app's error
        ["   "],  # an empty query
        ["garden", "--help"],
        ["garden", "--bogus"],
        ["--", "garden"],
        ["garden", "-n"],
        ["tab", "--budget-chars", "200"],  # the line holds a tab: rich expands it
        ["x.test"],  # the line holds what rich may read as an :emoji: code
    ],
)
def test_what_the_lean_path_is_unsure_of_goes_to_the_app(place: Place, args: list[str]) -> None:
    place.same("-w", str(place.root), "search", *args, answered=False)


def test_the_lean_path_loads_no_typer_rich_yaml_or_config(place: Place) -> None:
    """sys.modules when the process ends, not a timer: what the lean answer never imports."""
    got = place.lean("-w", str(place.root), "search", "garden", "--json")
    assert got.code == 0 and json.loads(got.out)
    assert got.heavy == ""  # none of HEAVY: typer, click, rich, yaml, crustacean.config, …


MODULES = (  # the console script's own `import re`, then sys.modules at exit into a file
    "import atexit, re, sys\n"
    "mark = sys.argv.pop(1)\n"
    "def seen():\n"
    "    with open(mark, 'w') as fh:\n"
    "        fh.write(' '.join(sorted(sys.modules)))\n"
    "atexit.register(seen)\n"
)
# What a plain lexical search's answer does without: ~15 ms of imports (crustacean/lean.py).
NOT_LOADED = ("typing", "pathlib", "hashlib", "_hashlib", "json", "calendar", "urllib.parse")


def test_a_lexical_answer_imports_little_beyond_python_itself(place: Place) -> None:
    """sys.modules at exit, against a process that only starts (as the console script does,
    with `re`): neither typing, pathlib, hashlib, json nor calendar for a plain search; json
    for --json (which shows the check sees imports made while answering)."""

    def loaded(code: str, *args: str) -> set[str]:
        mark = place.home / "modules.txt"
        mark.unlink(missing_ok=True)
        done = subprocess.run(
            [sys.executable, "-c", MODULES + code, str(mark), *args],
            capture_output=True,
            env=_env(place.root, place.home),
            cwd=place.home,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return set(mark.read_text().split())

    main = "from crustacean.cli.entry import main\nmain()\n"
    start = loaded("")
    assert place.lean("-w", str(place.root), "search", "garden").heavy == ""  # memo in place
    plain = loaded(main, "-w", str(place.root), "search", "garden") - start
    assert "crustacean.cli.search_fast" in plain and "crustacean.cli.app" not in plain
    assert sorted(set(NOT_LOADED) & plain) == []
    as_json = loaded(main, "-w", str(place.root), "search", "garden", "--json") - start
    assert "json" in as_json and "crustacean.cli.app" not in as_json


def test_record_writes_so_the_app_answers_it(own: Place) -> None:
    def uses() -> list[tuple[str, int]]:
        conn = sqlite3.connect(own.root / ".crustacean" / "state.db")
        try:
            return conn.execute("SELECT path, uses FROM recalls ORDER BY path").fetchall()
        finally:
            conn.close()

    ask = ("-w", str(own.root), "search", "figs")
    assert own.lean(*ask).heavy  # leaves the memo
    recorded = own.lean(*ask, "--record")
    assert recorded.heavy and "maria.md" in recorded.out
    assert uses() == [("memory/contacts/maria.md", 1)]
    assert own.app(*ask, "--record").out == recorded.out
    assert uses() == [("memory/contacts/maria.md", 2)]


def test_the_control_characters_escape_alike(place: Place) -> None:
    got = place.same("-w", str(place.root), "search", "escape", answered=True)
    assert "\\x1b[2K" in got.out


def test_skipped_files_and_warnings_are_named_alike(place: Place) -> None:
    got = place.same("-w", str(place.root), "search", "broken", answered=True)
    assert "Warning: memory/notes/bad.md" in got.err


@pytest.mark.parametrize("form", ["-w", "--workspace=", "env", "cwd"])
def test_each_way_of_naming_the_workspace(place: Place, form: str) -> None:
    env, cwd = _env(place.root, place.home), place.home
    if form == "-w":
        pre = ["-w", str(place.root)]
    elif form == "--workspace=":
        pre = [f"--workspace={place.root}"]
    elif form == "env":
        pre, env = [], {**env, "CRUSTACEAN_WORKSPACE": str(place.root)}
    else:
        pre, cwd = [], place.root / "memory" / "notes"
    first = place.lean(*pre, "search", "figs", env=env, cwd=cwd)  # may leave the memo
    assert first.code == 0 and "maria.md" in first.out
    place.same(*pre, "search", "figs", answered=True, env=env, cwd=cwd)


def test_a_config_edited_between_two_runs_is_read_again(own: Place) -> None:
    ask = ("-w", str(own.root), "search", "today", "garden", "-n", "1")
    assert own.lean(*ask).heavy  # the app, which leaves the memo
    east = own.same(*ask, answered=True)
    assert "The Kiritimati [garden] log." in east.out
    toml = own.root / "crustacean.toml"
    toml.write_text(toml.read_text("utf-8").replace(EAST, WEST), "utf-8")
    west = own.same(*ask, answered=False)  # the memo no longer holds: the app answers
    assert "The Pago_Pago [garden] log." in west.out
    assert own.same(*ask, answered=True).out == west.out


def test_a_file_edited_in_place_is_found(own: Place) -> None:
    ask = ("-w", str(own.root), "search", "plumber")
    assert own.lean(*ask).heavy
    assert own.same(*ask, answered=True).out == "No matches.\n"
    folder = own.root / "memory/notes"
    kept = folder.stat().st_mtime_ns
    with (folder / "work.md").open("a", encoding="utf-8") as fh:
        fh.write("The plumber comes on Friday.\n")
    os.utime(folder, ns=(kept, kept))  # an append never changes its folder; make sure of it
    found = own.lean(*ask)  # a stale index: the app re-indexes and answers
    assert found.heavy and "memory/notes/work.md" in found.out
    assert own.same(*ask, answered=True).out == found.out


def test_an_unreadable_folder_goes_to_the_app(own: Place) -> None:
    ask = ("-w", str(own.root), "search", "garden")
    assert own.lean(*ask).heavy
    locked = own.root / "memory/locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as a user who reads any folder")
        got = own.same(*ask, answered=False)
        assert "Skipped: memory/locked/" in got.err
    finally:
        locked.chmod(0o755)


def test_no_workspace_goes_to_the_app(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    place = Place(tmp_path / "none", home)
    place.root.mkdir()
    got = place.same("search", "garden", answered=False, cwd=place.root)
    assert got.code == 2 and "no crustacean workspace" in got.err


def test_the_semantic_extra_on_and_off(own: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRUSTACEAN_SEMANTIC", "1")
    semantic.forget()
    installed = semantic.load() is not None
    semantic.forget()
    if not installed:
        pytest.skip("the semantic extra is not installed")
    on = _env(own.root, own.home, CRUSTACEAN_SEMANTIC="1")
    ask = ("-w", str(own.root), "search", "vegetables", "shed")
    assert own.lean(*ask, env=on).heavy  # embeds every line, leaves the memo
    with_model = own.same(*ask, answered=True, env=on)
    assert own.lean(*ask).heavy  # off: another environment, another memo
    without = own.same(*ask, answered=True)
    assert with_model.out != without.out  # the model adds what no word matched


# ---------------------------------------------------------------- in-process rules


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["search", "a", "b"], ("a", "b")),
        (["-w", "W", "search", "a", "-n", "3", "--json"], ("a",)),
        (["search", "--raw", "a", "--archive", "--path-prefix", "p/"], ("a",)),
        (["search", "--budget-chars=10", "a"], ("a",)),
        (["search"], None),  # no words: click's usage error
        (["search", "a", "-n", "-3"], None),
        (["search", "a", "-n", "03"], None),
        (["search", "a", "-n", "1", "-n", "2"], None),
        (["search", "a", "--path-prefix", "--json"], None),  # click would take it as the value
        (["search", "a", "--json=1"], None),
        (["search", "a", "-h"], None),
        (["search", "a", "-"], None),
        (["-q", "search", "a"], None),
        (["-c", "k=v", "search", "a"], None),
        (["-w", "A", "-w", "B", "search", "a"], None),
        (["index"], None),
        (["tick", "search"], None),
    ],
)
def test_only_invocations_understood_whole_are_parsed(
    argv: list[str], words: tuple[str, ...] | None
) -> None:
    ask = search_fast.parse(argv)
    assert (ask.words if ask else None) == words


class Stream(io.StringIO):
    def __init__(self, tty: bool = False, encoding: str = "utf-8") -> None:
        super().__init__()
        self.tty, self._encoding = tty, encoding

    @property
    def encoding(self) -> str:
        return self._encoding

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("out", "err", "env", "args", "answered"),
    [
        (Stream(), Stream(), {}, [], True),
        (Stream(tty=True), Stream(), {}, [], False),  # rich's terminal output
        (Stream(), Stream(tty=True), {}, [], False),  # the progress bar
        (Stream(), Stream(tty=True), {}, ["--json"], False),  # no bar, but a note to wrap
        (Stream(), Stream(), {"FORCE_COLOR": "1"}, [], False),
        (Stream(), Stream(), {"TTY_COMPATIBLE": "1"}, [], False),
        (Stream(encoding="ascii"), Stream(), {}, [], False),  # click re-wraps, rich refuses
        (Stream(), Stream(encoding="latin-1"), {}, [], False),
    ],
)
def test_streams_the_lean_path_leaves_to_the_app(
    place: Place,
    out: Stream,
    err: Stream,
    env: dict[str, str],
    args: list[str],
    answered: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRUSTACEAN_SEMANTIC", "0")  # as in the environment it is handed
    base = _env(place.root, place.home)
    argv = ["-w", str(place.root), "search", "figs", *args]
    assert place.lean(*argv, env={**base, **env}).code == 0  # the memo of this environment
    probe = search_fast.probe(argv, {**base, **env}, place.home)
    assert probe is not None
    assert probe.answer(out, err) is answered
    assert bool(out.getvalue()) is answered


def test_a_memo_of_another_crustacean_is_not_read(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUSTACEAN_SEMANTIC", "0")
    argv = ["-w", str(place.root), "search", "figs"]
    env = _env(place.root, place.home)
    probe = search_fast.probe(argv, env, place.home)
    assert probe is not None and probe.answer(Stream(), Stream())
    monkeypatch.setattr(search_fast, "__version__", "0.0.0-other")
    other = search_fast.probe(argv, env, place.home)
    assert other is not None and not other.answer(Stream(), Stream())


def test_the_memo_keeps_a_bounded_number_of_rows(own: Place) -> None:
    argv = ["-w", str(own.root), "search", "figs"]
    assert own.lean(*argv).heavy  # the state.db with its memo table
    for k in range(search_fast.KEPT_MEMOS + 3):
        probe = search_fast.probe(argv, _env(own.root, own.home, OTHER=str(k)), own.home)
        assert probe is not None
        before = probe.snapshot()
        search_fast.note(own.root, EAST, warned=False)  # what the app's search notes
        assert probe.remember(before)
    conn = sqlite3.connect(own.root / ".crustacean" / "state.db")
    try:
        kept = conn.execute("SELECT count(*) FROM search_memo").fetchone()[0]
    finally:
        conn.close()
    assert kept == search_fast.KEPT_MEMOS


def test_a_config_that_warns_leaves_no_memo(own: Place) -> None:
    argv = ["-w", str(own.root), "search", "figs"]
    assert own.lean(*argv).heavy
    probe = search_fast.probe(argv, _env(own.root, own.home, OTHER="warned"), own.home)
    assert probe is not None
    before = probe.snapshot()
    search_fast.note(own.root, EAST, warned=True)
    assert not probe.remember(before)
    assert not probe.remember(before)  # and no note left over from another search


def test_a_copy_of_a_workspace_reads_no_memo_of_the_original(place: Place, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(place.root, copy, symlinks=True)
    other = Place(copy, place.home)
    first = other.lean("-w", str(copy), "search", "figs")
    assert first.heavy  # its own root: the app answers first, and leaves its own memo
    assert other.same("-w", str(copy), "search", "figs", answered=True).out == first.out


def test_a_closed_pipe_ends_both_paths_alike(place: Place) -> None:
    """`crustacean search … | head` that stops reading: exit 1 and nothing on stderr."""
    args = ["-w", str(place.root), "search", "garden", "--budget-chars", "50000"]
    got = []
    for script in (LEAN, APP):
        pre = [str(place.mark)] if script is LEAN else []
        read, write = os.pipe()
        os.close(read)  # nobody reads: the first write fails
        try:
            done = subprocess.run(
                [sys.executable, "-c", script, *pre, *args],
                stdout=write,
                stderr=subprocess.PIPE,
                env=_env(place.root, place.home),
                cwd=place.home,
                timeout=300,
                check=False,
            )
        finally:
            os.close(write)
        got.append((done.returncode, done.stderr))
    assert got[0] == got[1] == (1, got[1][1])
    assert b"Traceback" not in got[0][1]


@pytest.mark.parametrize("name", ["a b", "per%cent", "what?", "hash#tag", "ünï cödé", "%3F"])
def test_a_workspace_whose_path_a_uri_must_escape_is_answered_alike(
    place: Place, tmp_path: Path, name: str
) -> None:
    """The lean path opens state.db read-only through an SQLite URI, escaped by hand (pathlib's
    as_uri is not imported): `%`, `?` and `#` in the folder's name must still reach the file."""
    copy = tmp_path / name / "ws"
    shutil.copytree(place.root, copy, symlinks=True)
    other = Place(copy, place.home)
    assert other.lean("-w", str(copy), "search", "figs").heavy  # the app, leaving the memo
    other.same("-w", str(copy), "search", "figs", answered=True)
    inside = copy / "memory"  # found from the cwd, another memo key
    assert other.lean("search", "figs", cwd=inside).heavy
    other.same("search", "figs", answered=True, cwd=inside)
