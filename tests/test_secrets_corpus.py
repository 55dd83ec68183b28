"""Every credential kind the detector claims, in every place a secret can hide, and the
ordinary texts that must pass: one detector refuses the write and redacts what a model is sent.

Values are generated (`bench/secrets_corpus.py`, seeded) in each provider's published format:
none is a real key, and this file holds no literal one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.secrets_corpus import MAKERS, ORDINARY, Case, credentials, ordinary
from crustacean.errors import SecretError
from crustacean.secrets import find_secrets, redact
from crustacean.sources.base import finish_text
from crustacean.store.write import Store
from tests.store_helpers import copy_workspace, make_template

SAMPLES = 25  # fresh values per form for the pure checks; the bench runs many more
CASES = credentials(random.Random(33))
IDS = [f"{i}-{c.kind}" for i, c in enumerate(CASES)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One workspace for the module: refused writes change nothing, so they can share it."""
    template = make_template(tmp_path_factory)
    return Store(copy_workspace(template, tmp_path_factory.mktemp("corpus")))


def _refused(store: Store, case: Case, *, changes: list[dict[str, str]], message: str) -> str:
    """The refusal's message for one write; the workspace is checked to be unchanged."""
    head = store.git.head()
    with pytest.raises(SecretError) as err:
        store.write_context(changes, actor="mcp", message=message)
    assert store.git.head() == head
    message = str(err.value)
    assert case.value not in message and f"({case.kind})" in message
    return message


@pytest.mark.parametrize("index", range(len(MAKERS)), ids=IDS)
def test_every_form_is_found_as_its_kind_and_redacted(index: int) -> None:
    rng = random.Random(index)
    for _ in range(SAMPLES):
        case = MAKERS[index](rng)
        assert [f.kind for f in find_secrets(case.text)] == [case.kind], case.text
        redacted = redact(case.text)
        assert case.value not in redacted and f"[REDACTED:{case.kind}]" in redacted
        assert find_secrets(redacted) == []


@pytest.mark.parametrize("kind", list(ORDINARY))
def test_ordinary_texts_pass_untouched(kind: str) -> None:
    rng = random.Random(kind)
    for _ in range(SAMPLES):
        text = ORDINARY[kind](rng)
        assert find_secrets(text) == [], text
        assert redact(text) == text


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_refused_in_content(store: Store, case: Case) -> None:
    content = f"# Setup\n\n- a fact\n{case.text}\n"
    path = "memory/notes/setup.md"
    _refused(
        store, case, changes=[{"path": path, "mode": "create", "content": content}], message="setup"
    )
    assert not (store.root / path).exists()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_refused_in_the_version_message(store: Store, case: Case) -> None:
    change = {"path": "memory/notes/plain.md", "mode": "create", "content": "- a fact\n"}
    _refused(store, case, changes=[change], message=f"{case.text}\n\n(remember this)")
    assert not (store.root / "memory/notes/plain.md").exists()


ALONE = [c for c in CASES if c.alone and "/" not in c.value and len(c.value) < 190]


@pytest.mark.parametrize("case", ALONE, ids=[c.kind for c in ALONE])
def test_refused_as_a_file_name(store: Store, case: Case) -> None:
    path = f"memory/notes/{case.value}.md"
    change = {"path": path, "mode": "create", "content": "- a fact\n"}
    message = _refused(store, case, changes=[change], message="a note")
    assert "path of changes[0]" in message
    assert not (store.root / path).exists()


def _harmless_pieces(case: Case) -> str | None:
    """The text cut in two by `…` where neither piece is a credential, if there is a cut."""
    at = case.text.index(case.value)
    for cut in (at + 2, at + len(case.value) // 2, at + len(case.value) - 3):
        pieces = case.text[:cut] + "…" + case.text[cut:]
        if not find_secrets(pieces):
            return pieces
    return None


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_refused_when_an_edit_splices_it_together(store: Store, case: Case) -> None:
    # Two harmless pieces are written first; the edit that joins them would make the key.
    pieces = _harmless_pieces(case)
    path = f"memory/notes/splice-{CASES.index(case)}.md"
    create = [{"path": path, "mode": "create", "content": f"# Notes\n\n{pieces or case.text}\n"}]
    if pieces is None:  # a key block's header alone is refused: no harmless half exists
        _refused(store, case, changes=create, message="a note")
        return
    store.write_context(create, actor="mcp", message="two pieces")
    before = (store.root / path).read_bytes()
    _refused(
        store,
        case,
        changes=[{"path": path, "mode": "edit", "old": "…", "new": ""}],
        message="join",
    )
    assert (store.root / path).read_bytes() == before


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_transcript_line_reaches_the_model_redacted(case: Case) -> None:
    # finish_text is the last step of every source reader: what collect sends is its output
    sent = finish_text(f"user: here is the thing you asked for\n{case.text}\nthanks")
    assert case.value not in sent and f"[REDACTED:{case.kind}]" in sent


def test_ordinary_texts_are_written_and_sent_as_they_are(store: Store) -> None:
    for i, (kind, text) in enumerate(ordinary(random.Random(5))):
        path = f"memory/notes/ordinary-{i}.md"
        store.write_context(
            [{"path": path, "mode": "create", "content": text + "\n"}],
            actor="mcp",
            message=f"note: {kind}",
        )
        assert (store.root / path).read_text(encoding="utf-8") == text + "\n"
        assert "[REDACTED" not in finish_text(text)


def test_the_corpus_files_hold_no_literal_secret() -> None:
    here = Path(__file__)
    corpus = here.parents[1] / "bench" / "secrets_corpus.py"
    for path in (here, corpus):
        assert find_secrets(path.read_text(encoding="utf-8")) == [], path


def test_the_safety_doc_lists_exactly_the_kinds_caught() -> None:
    from crustacean import secrets

    doc = (Path(__file__).parents[1] / "docs" / "safety.md").read_text(encoding="utf-8")
    block = doc.split("<!-- BEGIN secret kinds")[1].split("<!-- END secret kinds")[0]
    listed = [line.split("|")[1].strip() for line in block.splitlines()[3:] if line.startswith("|")]
    caught = {rule.kind for rule in secrets._RULES} | {secrets.TABLE_KIND}
    assert sorted(listed) == sorted(caught)
    assert {c.kind for c in CASES} == caught  # and the corpus has every kind


def test_a_row_appended_under_a_password_column_is_refused(store: Store) -> None:
    # the header is in the file already, outside the lines the change adds
    path = "memory/notes/accounts.md"
    header = "# Accounts\n\n| service | password |\n|---|---|\n| printer | see the vault |\n"
    store.write_context(
        [{"path": path, "mode": "create", "content": header}], actor="mcp", message="accounts"
    )
    value = "Wq" + "8vLr2" + "Xe5Tn!"
    case = Case("password in a table", f"| wifi | {value} |", value, alone=False)
    _refused(
        store,
        case,
        changes=[{"path": path, "mode": "append", "content": case.text + "\n"}],
        message="wifi",
    )
    assert (store.root / path).read_text(encoding="utf-8") == header
