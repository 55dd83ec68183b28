"""Names a person can read safely (issue 33): the path jail refuses control characters,
bidirectional controls and other invisible code points, naming the character, and the names
git refuses on macOS and Windows; ordinary names in any script pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import snapshot
from crustacean.errors import PathError
from crustacean.store.paths import jail
from crustacean.store.write import Store
from crustacean.workspace import Workspace

REFUSED = [
    # (path, what the message names)
    ("memory/notes/evil\u202egpj.md", "a bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE)"),
    ("memory/notes/a\u2066b.md", "a bidirectional control (U+2066 LEFT-TO-RIGHT ISOLATE)"),
    ("memory/notes/rtl\u200fmark.md", "a bidirectional control (U+200F RIGHT-TO-LEFT MARK)"),
    ("memory/notes/arabic\u061cmark.md", "a bidirectional control (U+061C ARABIC LETTER MARK)"),
    ("memory/notes/esc\x1b[2Jname.md", "a control character (U+001B ESCAPE)"),
    ("memory/notes/cr\rname.md", "a control character (U+000D CARRIAGE RETURN)"),
    ("memory/notes/two\nlines.md", "a control character (U+000A LINE FEED)"),
    ("memory/notes/tab\there.md", "a control character (U+0009 TAB)"),
    ("memory/notes/bell\x07.md", "a control character (U+0007)"),
    ("memory/notes/del\x7f.md", "a control character (U+007F)"),
    ("memory/notes/c1\x9bname.md", "a control character (U+009B)"),
    ("memory/.git\u200c/config", "an invisible character (U+200C ZERO WIDTH NON-JOINER)"),
    ("memory/.gi\u200dt/hooks/x", "an invisible character (U+200D ZERO WIDTH JOINER)"),
    ("\ufeff.git/config", "an invisible character (U+FEFF ZERO WIDTH NO-BREAK SPACE)"),
    ("memory/notes/zero\u200bwidth.md", "an invisible character (U+200B ZERO WIDTH SPACE)"),
    ("memory/notes/soft\u00adhyphen.md", "an invisible character (U+00AD SOFT HYPHEN)"),
    ("memory/notes/word\u2060joiner.md", "an invisible character (U+2060 WORD JOINER)"),
    ("memory/notes/heart\ufe0f.md", "an invisible character (U+FE0F VARIATION SELECTOR-16)"),
    ("memory/notes/filler\u3164.md", "an invisible character (U+3164 HANGUL FILLER)"),
    (
        "memory/notes/tag\U000e0041.md",
        "an invisible character (U+E0041 TAG LATIN CAPITAL LETTER A)",
    ),
    ("memory/notes/line\u2028sep.md", "a line separator (U+2028 LINE SEPARATOR)"),
    # the names git cannot check out on Windows
    ("memory/notes/CON", "'CON', a name Windows reserves for a device"),
    ("memory/notes/nul.md", "'nul.md', a name Windows reserves for a device"),
    ("memory/aux/notes.md", "'aux', a name Windows reserves for a device"),
    ("memory/notes/com1.txt", "'com1.txt', a name Windows reserves for a device"),
    ("memory/notes/Lpt9 .md", "'Lpt9 .md', a name Windows reserves for a device"),
    ("memory/notes/trailing.", "a name ending in a dot or a space ('trailing.')"),
    ("memory/folder /x.md", "a name ending in a dot or a space ('folder ')"),
]

ACCEPTED = [
    "memory/notes/café-ünïcode.md",
    "memory/notes/日本語のメモ.md",
    "memory/notes/مرحبا.md",  # right-to-left letters are text, not controls
    "memory/notes/emoji-🦀.md",
    "memory/notes/console.md",  # a reserved name only as the whole name before a dot
    "memory/notes/nullable.md",
    "memory/notes/com10.md",
    "memory/notes/a.b.c.md",
    "memory/notes/it's a note (v2).md",
]


@pytest.mark.parametrize(("path", "named"), REFUSED)
def test_unreadable_names_are_refused_naming_the_character(
    tmp_path: Path, path: str, named: str
) -> None:
    with pytest.raises(PathError) as err:
        jail(tmp_path, path)
    assert named in str(err.value)
    assert str(err.value).startswith(f"path {path!r} ")  # repr: the message itself is readable


@pytest.mark.parametrize("path", ACCEPTED)
def test_ordinary_names_in_any_script_pass(tmp_path: Path, path: str) -> None:
    assert jail(tmp_path, path) == path


def test_a_write_and_a_move_to_an_unreadable_name_change_nothing(copied_ws: Workspace) -> None:
    store, before = Store(copied_ws), snapshot(copied_ws.root)
    with pytest.raises(PathError) as err:
        store.write_context(
            [{"path": "memory/notes/evil\u202egpj.md", "mode": "create", "content": "- x\n"}],
            actor="mcp",
            message="a note",
        )
    assert str(err.value) == (
        "path 'memory/notes/evil\\u202egpj.md' has a bidirectional control "
        "(U+202E RIGHT-TO-LEFT OVERRIDE) in it: ls, editors and other agents would show the "
        "name wrongly or not at all. Use visible characters only."
    )
    with pytest.raises(PathError, match=r"U\+200C ZERO WIDTH NON-JOINER"):
        store.write_context(
            [{"path": "MEMORY.md", "mode": "move", "to": "memory/.git\u200c/MEMORY.md"}],
            actor="user",
            message="move",
        )
    assert snapshot(copied_ws.root) == before
