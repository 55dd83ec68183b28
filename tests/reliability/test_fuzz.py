"""Hostile input, fuzzed with hypothesis (issue 12, item 3).

Four targets, each with the promise it must keep whatever arrives:

* `Store.write_context` with random tool input: only `CrustaceanError` comes out, nothing
  outside the workspace changes, a refused call changes no workspace file, and an accepted call
  names exactly what it changed and leaves `git status` clean.
* `parse_document` and `set_meta` with random (frontmatter-shaped) text: never a crash.
* the transcript readers with random lines: never a crash, and the cursor is sound.
* `load_config` with random config files: a clean `ConfigError` or a config.

Each test prints how many cases ran (`pytest -s`). `CRUSTACEAN_FUZZ_EXAMPLES=N` sets the number
of examples of every test (the defaults keep the whole file at a few seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import git

from crustacean.config import SCHEMA, SECTIONS, load_config
from crustacean.documents import BOM, KNOWN_KEYS, parse_document, set_meta
from crustacean.errors import ConfigError, CrustaceanError
from crustacean.ops.init import init_workspace
from crustacean.sources import base as source_base
from crustacean.sources import read_new
from crustacean.store.changes import FIELDS
from crustacean.store.policy import MODES
from crustacean.store.write import Store
from crustacean.workspace import Workspace

ENV_EXAMPLES = "CRUSTACEAN_FUZZ_EXAMPLES"


def _examples(default: int) -> int:
    raw = os.environ.get(ENV_EXAMPLES, "").strip()
    return int(raw) if raw else default


def _settings(default: int) -> settings:
    return settings(
        max_examples=_examples(default),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _report(name: str, counts: Counter[str]) -> None:
    total = counts.pop("cases")
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"\nfuzz {name}: {total} cases ({detail})")


# ----------------------------------------------------------------------- shared strategies

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# ----------------------------------------------------------------------- 1. write_context

ACTORS = ("user", "curate", "compile", "collect", "mcp", "calibrate")
TODAY = "<today>"  # replaced by the workspace's daily log of today
OUTSIDE = "<outside>"  # replaced by the absolute path of the sibling "outside" folder
MAX_FILE_BYTES = 2048

GOOD_PATHS = (
    TODAY,
    "MEMORY.md",
    "SOUL.md",
    "memory/README.md",
    "memory/notes/a.md",
    "memory/notes/b.md",
    "memory/lessons/l.md",
    "memory/contacts/ana.md",
    "knowledge/topics/t.md",
    "knowledge/README.md",
    "archive/lessons/x.md",
    "archive/audits/a.md",
    "archive/trash/old.md",
    "memory/2020-01-01.md",
    "projects/p.md",
    "memory/notes/ünïcödé 🦀.md",
    "memory\\notes\\back.md",
    "./memory//notes/./dots.md",
    "knowledge/link-in/through.md",  # a symlink that stays inside: followed
)
HOSTILE_PATHS = (
    "",
    " ",
    ".",
    "./",
    "/",
    "..",
    "../outside/file.md",
    "../outside/new.md",
    "memory/../../outside/new.md",
    "memory/notes/../../../outside/new.md",
    f"{OUTSIDE}/abs.md",
    f"{OUTSIDE}/file.md",
    "/etc/passwd",
    "C:/x.md",
    "c:\\x.md",
    "\\\\server\\share\\x.md",
    ".git/config",
    ".git/HEAD",
    ".git/hooks/post-commit",
    ".GIT/config",
    ".git./x",
    "memory/.git/x",
    "memory/GIT~1/x",
    ".git:stream",
    ".crustacean/state.json",
    ".crustacean/journal.json",
    "./.crustacean/write.lock",
    "memory/notes/a\x00b.md",
    "\x00",
    "memory/notes/out/pwn.md",  # symlink to the outside folder
    "memory/notes/outfile.md",  # symlink to a file outside
    "memory/notes/ghost.md",  # dangling symlink to a missing file outside
    "memory/notes/gitlink/config",  # symlink into .git
    "memory/notes/gitlink",
    "memory/notes/statelink/journal.json",  # symlink into .crustacean
    "memory/notes/rootlink",  # symlink to the workspace root
    "memory/notes/rootlink/.git/config",
    # "memory/notes/loop" (a symlink loop) is left out: test_what_the_fuzzer_found_is_a_clean_error
    "memory",  # a folder
    "memory/notes",
    "a" * 256 + ".md",
    "memory/" + "n" * 255,
    "a/" * 600 + "x.md",
    "memory/notes/\udc80.md",  # lone surrogate
    "memory/notes/line\nbreak.md",
    "memory/notes/tab\t.md",
    "memory/notes/ .md",
    "memory/notes/trailing.md/",
    "MEMORY.md/x",
)
SEGMENTS = st.sampled_from(
    ["..", ".", "", ".git", ".crustacean", "memory", "notes", "knowledge", "out", "gitlink", "x.md"]
) | st.text(min_size=1, max_size=12)

PATHS = st.one_of(
    st.sampled_from(GOOD_PATHS),
    st.sampled_from(HOSTILE_PATHS),
    st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join),
    st.text(max_size=40),
    st.integers(),
    st.none(),
    JSON,
)
MODE_VALUES = st.one_of(
    st.sampled_from(MODES), st.sampled_from(MODES), st.text(max_size=8), st.none(), JSON
)
SECRET = "sk-ant-" + "api03-" + "A" * 40
TEXT = st.one_of(
    st.text(max_size=120),
    st.integers(0, 3 * MAX_FILE_BYTES).map(lambda n: ("line of memory\n" * (n // 15 + 1))[:n]),
    st.sampled_from(["", "\n", "\x00", "a\udc80b", "---\nname: x\n---\nbody\n", SECRET, "\r\n"]),
    st.just("x" * (MAX_FILE_BYTES + 1)),
)
FIELD_VALUES = st.one_of(TEXT, TEXT, st.integers(), st.none(), JSON)
SHA = st.one_of(
    st.text(alphabet="0123456789abcdefABCDEF", min_size=64, max_size=64),
    st.text(max_size=70),
    st.integers(),
)
CHANGE = st.fixed_dictionaries(
    {"path": PATHS, "mode": MODE_VALUES},
    optional={
        "content": FIELD_VALUES,
        "old": FIELD_VALUES,
        "new": FIELD_VALUES,
        "to": PATHS,
        "expected_sha256": SHA,
    },
)
STR_PATHS = st.one_of(
    st.sampled_from(GOOD_PATHS),
    st.sampled_from(GOOD_PATHS),
    st.sampled_from(HOSTILE_PATHS),
    st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join),
)
OLD = st.one_of(st.sampled_from(["alpha", "beta\n", "lesson", "topic", "#", "\n", "a"]), TEXT)


def _well_formed(mode: str) -> st.SearchStrategy[dict[str, object]]:
    """A change of the right shape for its mode, so the call gets past parsing."""
    fields: dict[str, st.SearchStrategy[object]] = {"path": STR_PATHS, "mode": st.just(mode)}
    for key in FIELDS[mode]:
        fields[key] = {"to": STR_PATHS, "old": OLD}.get(key, TEXT)
    return st.fixed_dictionaries(fields)


WELL_FORMED = st.sampled_from(MODES).flatmap(_well_formed)
# plausible calls, so that accepted calls (and their invariants) are common too
EASY = st.fixed_dictionaries(
    {
        "path": st.sampled_from(GOOD_PATHS),
        "mode": st.sampled_from(["create", "append", "overwrite", "delete", "move", "edit"]),
        "content": st.text(max_size=200),
        "old": OLD,
        "new": st.text(max_size=40),
        "to": st.sampled_from(GOOD_PATHS),
    }
)
CHANGE_WITH_EXTRA = st.builds(
    lambda c, extra: {**extra, **c}, CHANGE, st.dictionaries(st.text(max_size=6), JSON, max_size=2)
)
CHANGES = st.one_of(
    st.lists(EASY, min_size=1, max_size=3),
    st.lists(EASY, min_size=1, max_size=3),
    st.lists(EASY, min_size=1, max_size=3),
    st.lists(WELL_FORMED, min_size=1, max_size=4),
    st.lists(WELL_FORMED, min_size=1, max_size=4),
    st.lists(WELL_FORMED, min_size=1, max_size=2),
    st.lists(CHANGE, min_size=1, max_size=4),
    st.lists(st.one_of(CHANGE, CHANGE_WITH_EXTRA, JSON), max_size=4),
    JSON,
    st.lists(WELL_FORMED, min_size=21, max_size=23),  # over store.max_files_per_call
)
MESSAGES = st.one_of(
    *[st.just("fuzz")] * 8,
    st.text(max_size=40),
    # a lone surrogate is left out: see test_what_the_fuzzer_found_is_a_clean_error
    st.sampled_from(["", "  ", "a\x00b", "x" * 5000]),
    JSON,
)


def _tree(root: Path, skip: str | None = None) -> dict[str, str]:
    """Every entry under root: file hashes, symlink targets and folders (a mkdir counts too)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        if skip is not None and rel_dir.parts[:1] == (skip,):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            full = here / name
            rel = (rel_dir / name).as_posix()
            if full.is_symlink():
                out[rel] = "link:" + os.readlink(full)
            elif full.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
    return out


def _memory_files(root: Path) -> dict[str, str]:
    """The workspace minus .git/ and .crustacean/ (where refusals and proposals may write)."""
    return {k: v for k, v in _tree(root).items() if k.split("/")[0] not in (".git", ".crustacean")}


def _substitute(value: object, today: str, outside: str) -> object:
    if isinstance(value, str):
        return value.replace(TODAY, today).replace(OUTSIDE, outside)
    if isinstance(value, list):
        return [_substitute(v, today, outside) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, today, outside) for k, v in value.items()}
    return value


@pytest.fixture
def fuzz_store(tmp_path: Path) -> Store:
    """One workspace (committed notes, symlinks leading in and out) for all examples of a test."""
    root = tmp_path / "ws"
    init_workspace(root)
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "file.md").write_text("outside, never touched\n")
    ws = Workspace(
        root, load_config(root, env={}, overrides=[f"store.max_file_bytes={MAX_FILE_BYTES}"])
    )
    store = Store(ws)
    store.write_context(
        [
            {"path": "memory/notes/a.md", "mode": "create", "content": "alpha\nbeta\n"},
            {"path": "memory/lessons/l.md", "mode": "create", "content": "lesson\n"},
            {"path": "knowledge/topics/t.md", "mode": "create", "content": "topic\n"},
        ],
        actor="user",
        message="seed",
    )
    links = {
        "memory/notes/out": str(outside),
        "memory/notes/outfile.md": str(outside / "file.md"),
        "memory/notes/ghost.md": str(outside / "ghost.md"),
        "memory/notes/gitlink": "../../.git",
        "memory/notes/statelink": "../../.crustacean",
        "memory/notes/rootlink": "../..",
        "memory/notes/loop": "loop",
        "knowledge/link-in": "../memory/notes",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    # untracked but ignored, so `git clean` between examples keeps them
    with (root / ".git" / "info" / "exclude").open("a") as fh:
        fh.write("".join(f"/{name}\n" for name in links))
    return store


def _reset(root: Path, base: str) -> None:
    git(root, "reset", "-q", "--hard", base)
    git(root, "clean", "-fdq")  # -x not given: the ignored symlinks and .crustacean/ stay


def test_write_context_never_escapes(fuzz_store: Store, tmp_path: Path) -> None:
    store, root = fuzz_store, fuzz_store.root
    outside = tmp_path / "outside"
    today = store.ws.daily_log(store.ws.today(datetime.now(UTC)))
    base = git(root, "rev-parse", "HEAD").strip()
    counts: Counter[str] = Counter()

    @_settings(300)
    @given(changes=CHANGES, actor=st.sampled_from((*ACTORS, "user", "user")), message=MESSAGES)
    def run(changes: object, actor: str, message: object) -> None:
        counts["cases"] += 1
        changes = _substitute(changes, today, str(outside))
        around = _tree(tmp_path, skip="ws")
        before = _memory_files(root)
        try:
            result = store.write_context(changes, actor=actor, message=message)  # type: ignore[arg-type]  # fuzzed changes, any JSON
        except CrustaceanError as e:
            counts[f"refused {type(e).__name__}"] += 1
            assert _tree(tmp_path, skip="ws") == around, "something outside the workspace moved"
            after = _memory_files(root)
            files = {k: v for k, v in after.items() if v != "dir"}
            assert files == {k: v for k, v in before.items() if v != "dir"}, (
                f"a refused call changed files: {e}"
            )
            if after != before:  # a call refused at commit time leaves the folders it made
                counts["refused, empty folders left"] += 1
            return
        try:
            assert _tree(tmp_path, skip="ws") == around, "something outside the workspace moved"
            after = _memory_files(root)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            if result.proposal is not None:
                counts["proposed"] += 1
                assert not changed, f"a proposal changed files: {changed}"
                return
            counts["applied" if result.files else "no-op"] += 1
            named = set(result.files)
            for rel in named:
                if rel in after:
                    assert not (root / rel).is_symlink()
                else:  # deleted or moved: its bytes now live in another named file
                    assert rel in before, f"{rel} is named but never existed"
                    assert before[rel] in {after.get(n) for n in named}, f"{rel}'s bytes are lost"
            # folders the call created are not files it names; every changed file is named
            changed_files = {k for k in changed if before.get(k) != "dir" and after.get(k) != "dir"}
            assert changed_files <= named, f"changed but not named: {changed_files - named}"
            status = git(root, "status", "--porcelain", "--untracked-files=no")
            assert status == "", status
            assert (result.version is None) == (not result.files)
        finally:
            if git(root, "rev-parse", "HEAD").strip() != base or result.proposal is not None:
                _reset(root, base)

    run()
    _report("write_context", counts)


# Bugs the fuzzer found (both fixed in the store); each stays pinned here.


@pytest.mark.parametrize(
    ("path", "message"),
    [("memory/notes/new.md", "a\udc80b"), ("memory/notes/loop", "fuzz")],
    ids=["surrogate message", "symlink loop"],
)
def test_what_the_fuzzer_found_is_a_clean_error(fuzz_store: Store, path: str, message: str) -> None:
    before = _memory_files(fuzz_store.root)
    with pytest.raises(CrustaceanError):
        fuzz_store.write_context(
            [{"path": path, "mode": "create", "content": "x\n"}], actor="user", message=message
        )
    assert _memory_files(fuzz_store.root) == before


def test_overwrite_then_delete_trashes_the_original_too(fuzz_store: Store) -> None:
    """Overwriting a file and deleting it in one call put only the overwritten bytes in the
    trash, so what the file held was left only in git's history: both go to the trash now."""
    root = fuzz_store.root
    original = (root / "memory/notes/a.md").read_bytes()
    result = fuzz_store.write_context(
        [
            {"path": "memory/notes/a.md", "mode": "overwrite", "content": "interim\n"},
            {"path": "memory/notes/a.md", "mode": "delete"},
        ],
        actor="user",
        message="fuzz",
    )
    assert not (root / "memory/notes/a.md").exists()
    trashed = sorted(f for f in result.files if f.startswith("archive/trash/"))
    assert [(root / f).read_bytes() for f in trashed] == [original, b"interim\n"]
    assert git(root, "status", "--porcelain", "--untracked-files=no") == ""


# ----------------------------------------------------------------------- 2. documents

YAML_KEYS = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=10))
YAML_VALUES = st.one_of(
    st.sampled_from(
        [
            "",
            "x",
            "'quoted'",
            '"dq \\u00e9"',
            "[",
            "]",
            "{",
            "{a: 1}",
            "[1, 2",
            "&a x",
            "*a",
            "*missing",
            "!!python/object/apply:os.system ['echo hi']",
            "!!binary aGk=",
            "!!int x",
            "!custom x",
            "2026-02-30",
            "2026-11-29",
            "2026-11-29T10:00:00Z",
            "9999-99-99 99:99:99",
            "hot",
            "Cold ",
            "- a",
            "|",
            ">-",
            "? x",
            "...",
            "---",
            "%YAML 1.1",
            "~",
            "null",
            "yes",
            "1e400",
            "0x1F",
            ".nan",
            "\t",
            "#comment",
            "[" * 300 + "]" * 300,
            "{" * 200,
            "a: b: c",
        ]
    ),
    st.text(max_size=20),
)
YAML_LINE = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", YAML_KEYS, YAML_VALUES),
    st.builds(lambda ind, k, v: f"{' ' * ind}{k}: {v}", st.integers(0, 4), YAML_KEYS, YAML_VALUES),
    YAML_VALUES,
    st.text(max_size=30),
)
FRONTMATTER = st.builds(
    lambda bom, lead, fence, lines, close, eol, body: (
        (BOM if bom else "")
        + lead
        + fence
        + eol
        + "".join(line + eol for line in lines)
        + close
        + body
    ),
    st.booleans(),
    st.sampled_from(["", "\n", "  \n", "\r\n"]),
    st.sampled_from(["---", "--- ", "---\t", "----", "-- -"]),
    st.lists(YAML_LINE, max_size=6),
    st.sampled_from(["---\n", "---\r\n", "---", "...\n", "--- x\n", ""]),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.text(max_size=60),
)
DOC_TEXT = st.one_of(st.text(max_size=200), FRONTMATTER, FRONTMATTER)
META_VALUES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["hot", "2026-11-29", "yes", "null", "", " x ", "a: b", "#", "- x", "'"]),
    st.integers(),
    st.booleans(),
    st.dates(min_value=date(1, 1, 1)),
)
UPDATES = st.dictionaries(
    st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=10)),
    META_VALUES,
    max_size=3,
)


def test_parse_document_never_raises() -> None:
    counts: Counter[str] = Counter()

    @_settings(600)
    @given(text=DOC_TEXT, updates=UPDATES)
    def run(text: str, updates: dict[str, object]) -> None:
        counts["cases"] += 1
        doc = parse_document(text, "memory/notes/fuzz.md")
        bom = BOM if text.startswith(BOM) else ""
        assert doc.text == text
        assert bom + (doc.front or "") + doc.body == text
        assert isinstance(doc.meta, dict)
        assert doc.front is None or doc.warning is None
        for prop in ("name", "source", "recorded", "tier", "tier_set"):
            getattr(doc, prop)
        if doc.warning is not None:
            counts["warned"] += 1
            return
        try:
            new = set_meta(doc, updates)
        except ValueError:
            assert doc.front is not None  # a file without frontmatter never refuses
            counts["set_meta refused"] += 1
            return
        again = parse_document(new, doc.path)
        assert again.warning is None, again.warning
        assert again.body == doc.body
        for key, value in updates.items():
            assert again.meta.get(key) == value, (key, value, again.meta, new)
        counts["set_meta ok"] += 1

    run()
    _report("parse_document", counts)


# ----------------------------------------------------------------------- 3. transcripts

SMALL_MAX_LINE = 4096
OPENCLAW_LINES = [
    {"role": "user", "content": "hello", "timestamp": 1795675690000},
    {
        "type": "message",
        "id": "a1",
        "timestamp": "2026-11-26T02:30:04.210Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    },
    {"type": "session", "version": 3, "id": "s", "timestamp": "2026-11-26T02:30:04.000Z"},
]
CLAUDE_LINES = [
    {
        "type": "user",
        "uuid": "u1",
        "timestamp": "2026-11-25T13:02:44.118Z",
        "sessionId": "s",
        "message": {"role": "user", "content": "hi"},
    },
    {
        "type": "assistant",
        "uuid": "u2",
        "timestamp": "2026-11-25T13:02:45Z",
        "sessionId": "s",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
    },
    {"type": "summary", "summary": "s", "leafUuid": "x"},
]


def _mutate(record: dict[str, object], key: str, value: object) -> bytes:
    out = json.loads(json.dumps(record))
    if key in out:
        out[key] = value
    elif isinstance(out.get("message"), dict):
        out["message"][key] = value
    return json.dumps(out, allow_nan=True).encode()


LINE = st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from(
        [
            b"",
            b"   ",
            b"\xff\xfe\xfd",
            b"\xc3\x28",
            b"\xed\xa0\x80",
            b"{",
            b"null",
            b"[]",
            b"1e999",
            b'"str"',
            b'{"role": null}',
            b"\x00\x00",
            b"\r",
            b"NaN",
            b'{"timestamp": 1e400}',
        ]
    ),
    JSON.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.builds(
        _mutate,
        st.sampled_from(OPENCLAW_LINES + CLAUDE_LINES),
        st.sampled_from(["content", "timestamp", "role", "message", "type", "text", "uuid", "id"]),
        JSON,
    ),
    st.sampled_from([json.dumps(r).encode() for r in OPENCLAW_LINES + CLAUDE_LINES]),
    st.integers(SMALL_MAX_LINE - 2, SMALL_MAX_LINE * 3).map(lambda n: b"x" * n),  # "huge"
)
TRANSCRIPT = st.builds(
    lambda lines, tail, eol: b"".join(line + eol for line in lines) + tail,
    st.lists(LINE, max_size=8),
    st.one_of(st.just(b""), LINE),  # a partial last line without its newline
    st.sampled_from([b"\n", b"\r\n"]),
)


def test_transcript_readers_never_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_base, "MAX_LINE_BYTES", SMALL_MAX_LINE)  # huge lines stay cheap
    counts: Counter[str] = Counter()
    path = tmp_path / "transcript.jsonl"

    @_settings(300)
    @given(
        kind=st.sampled_from(["openclaw", "claude_code", "plain"]), data=TRANSCRIPT, more=TRANSCRIPT
    )
    def run(kind: str, data: bytes, more: bytes) -> None:
        counts["cases"] += 1
        path.unlink(missing_ok=True)
        path.write_bytes(data)
        first = read_new(path, kind, None)
        assert 0 <= first.cursor.offset <= len(data)
        assert not read_new(path, kind, first.cursor).messages, "a second read found messages"
        counts["messages"] += len(first.messages)
        counts["bad lines"] += first.bad_lines
        with path.open("ab") as fh:  # the transcript grows; the cursor resumes
            fh.write(more)
        grown = read_new(path, kind, first.cursor)
        assert 0 <= grown.cursor.offset <= len(data) + len(more)
        assert not read_new(path, kind, grown.cursor).messages, "a third read found messages"

    run()
    with pytest.raises(ValueError):
        read_new(path, "nonsense", None)
    _report("transcript readers", counts)


# ----------------------------------------------------------------------- 4. config

SCHEMA_KEYS = sorted(SCHEMA)
TOML_KEY = st.one_of(
    st.sampled_from(SCHEMA_KEYS),
    st.sampled_from(sorted(SECTIONS)),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.-", min_size=1, max_size=12),
    st.text(max_size=8).map(json.dumps),  # a quoted key
)


def _toml_string(s: str) -> str:
    return json.dumps(s)  # JSON escapes are valid TOML basic-string escapes (mostly)


TOML_SCALAR = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True).map(
        lambda f: {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(f), repr(f))
    ),
    st.booleans().map(lambda b: "true" if b else "false"),
    st.text(max_size=20).map(_toml_string),
    st.sampled_from(
        [
            '"direct"',
            '"review"',
            '"off"',
            '"ask"',
            '"auto"',
            '"plain"',
            '"0 */2 * * *"',
            '"UTC"',
            '"Mars/Olympus"',
            '"small"',
            "1979-05-27",
            "07:32:00",
            "1979-05-27T07:32:00Z",
            "0",
            "-1",
            "0.5",
            "1.5",
            '""',
            "'literal'",
            "'''multi\nline'''",
            "0x10",
            "1_000",
        ]
    ),
)
TOML_VALUE = st.recursive(
    TOML_SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(st.tuples(TOML_KEY, inner), max_size=3).map(
            lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in kv) + "}"
        )
    ),
    max_leaves=6,
)
TOML_LINE = st.one_of(
    st.builds(lambda k, v: f"{k} = {v}", TOML_KEY, TOML_VALUE),
    st.builds(lambda k: f"[{k}]", TOML_KEY),
    st.just("[[sources]]"),
    st.builds(lambda k: f"[[{k}]]", TOML_KEY),
    st.sampled_from(['path = "~/notes"', 'kind = "plain"', "# comment", "", "=", "[", "a ="]),
    st.text(max_size=30),
)
TOML_TEXT = st.lists(TOML_LINE, max_size=8).map("\n".join)
CONFIG_BYTES = st.one_of(
    TOML_TEXT.map(str.encode),
    TOML_TEXT.map(str.encode),
    st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.binary(max_size=100),
)


def test_config_files_give_config_error(tmp_path: Path) -> None:
    root = tmp_path / "cfgws"
    root.mkdir()
    user_dir = tmp_path / "cfguser"
    user_dir.mkdir()
    org = tmp_path / "org.toml"
    counts: Counter[str] = Counter()

    @_settings(500)
    @given(
        where=st.sampled_from(["workspace", "user", "org"]),
        data=CONFIG_BYTES,
        env_pairs=st.dictionaries(
            st.sampled_from(
                [
                    "CRUSTACEAN_MEMORY__WRITE",
                    "CRUSTACEAN_STORE__MAX_FILE_BYTES",
                    "CRUSTACEAN_NOPE__X",
                    "CRUSTACEAN_SOURCES__PATH",
                ]
            ),
            st.text(max_size=10).filter(lambda s: "\x00" not in s),
            max_size=1,
        ),
    )
    def run(where: str, data: bytes, env_pairs: dict[str, str]) -> None:
        counts["cases"] += 1
        for p in (root / "crustacean.toml", user_dir / "config.toml", org):
            p.unlink(missing_ok=True)
        target = {
            "workspace": root / "crustacean.toml",
            "user": user_dir / "config.toml",
            "org": org,
        }
        target[where].write_bytes(data)
        env = {"CRUSTACEAN_CONFIG_DIR": str(user_dir), **env_pairs}
        if where == "org":
            env["CRUSTACEAN_ORG_CONFIG"] = str(org)
        try:
            loaded = load_config(root, env=env)
        except ConfigError:
            counts["ConfigError"] += 1
            return
        counts["loaded"] += 1
        assert loaded.settings is not None

    run()
    _report("config", counts)
