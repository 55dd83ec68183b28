"""What curate's request holds costs money every day: nothing in it twice (issue 34, item 14).
The folder READMEs come without their `## Index` (code's, and the files it lists are in
`<existing-files>`), still with the sha256 of the whole file."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from crustacean.config import load_config
from crustacean.folder_index import indexed_names, insert_line
from crustacean.llm.contract import file_block
from crustacean.ops.init import init_sample
from crustacean.stages import curate as c
from crustacean.state import open_state
from crustacean.store import Store
from crustacean.store.changes import sha256_hex
from crustacean.workspace import Workspace

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def sample_prompt(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "sample"
    init_sample(root, NOW)
    readme = root / "knowledge/README.md"  # an Index line for a file, as code's indexer writes
    line = "  - `garden-api.md` — garden-api"
    readme.write_text(insert_line(readme.read_text(), "topics", line))
    ws = Workspace(root, load_config(root))
    store = Store(ws)
    with open_state(ws) as db:
        entries = c.pending_entries(ws, db, store, NOW, ws.settings.curate.days)
    assert entries
    return root, c.request_for(ws, store, entries).prompt


def handed(prompt: str, path: str) -> tuple[str, str]:
    m = re.search(
        rf'<file path="{re.escape(path)}" sha256="(\w+)"([^>]*)>\n(.*?)</file>', prompt, re.S
    )
    assert m, path
    return m[1], m[3]


def test_the_readmes_are_handed_without_their_index(tmp_path: Path) -> None:
    root, prompt = sample_prompt(tmp_path)
    existing = prompt.split("<existing-files>", 1)[1].split("</existing-files>", 1)[0]
    for readme in ("memory/README.md", "knowledge/README.md"):
        data = (root / readme).read_bytes()
        sha, body = handed(prompt, readme)
        assert sha == sha256_hex(data)  # the whole file's, as every handed file's
        text = data.decode()
        assert text.split("## Index", 1)[0] in body  # the rules, whole
        assert body.endswith(c.INDEX_NOTE + "\n")
        folder = readme.removesuffix("README.md")
        for name in indexed_names(text):  # every file the Index lists is in the map
            if name.endswith(".md"):
                assert name not in body
                assert any(folder in line and name in line for line in existing.splitlines())
    assert "garden-api.md" in indexed_names((root / "knowledge/README.md").read_text())
    sha, memory = handed(prompt, "MEMORY.md")
    assert memory == (root / "MEMORY.md").read_text()  # other files whole


def test_a_readme_without_an_index_or_with_one_after_is_kept_apart() -> None:
    plain = b"# notes\n\nRules.\n"
    assert file_block("memory/README.md", plain, index_note="(x)").endswith("Rules.\n</file>")
    after = b"# m\n\n## Index\n\n- `a.md` - a\n\n## Later\n\nkept\n"
    block = file_block("memory/README.md", after, index_note="(x)")
    assert 'index="left out"' in block and "`a.md`" not in block
    assert block.endswith("## Index\n\n(x)\n\n## Later\n\nkept\n</file>")
