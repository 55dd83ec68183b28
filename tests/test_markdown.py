"""The one heading and fence rule (crustacean/markdown.py), and its readers agreeing on it.

Each row is a case where the readers' old rules disagreed: compile's sections, search's heading
path, curate's daily-log blocks and health's links now all read the text the same way.
"""

from __future__ import annotations

import pytest

from crustacean.markdown import (
    code_lines,
    first_heading,
    heading,
    headings,
    link_targets,
    split_sections,
)
from crustacean.recall.search import index_lines
from crustacean.stages.curate import parse_entries

HEADING_LINES = [
    ("## Plans", (2, "Plans")),
    ("## Plans ##", (2, "Plans")),  # a closing run of # is no part of the text
    ("### Plans #####", (3, "Plans")),
    ("## C# tips", (2, "C# tips")),  # a # inside the text stays
    ("## Plans#", (2, "Plans#")),  # no space before it: not a closing run
    ("   ## three spaces", (2, "three spaces")),
    ("    ## four spaces", None),  # indented code
    ("##\tTabbed", (2, "Tabbed")),
    ("##", (2, "")),  # an empty heading
    ("## ##", (2, "")),
    ("## Plans\r\n", (2, "Plans")),
    ("###### six", (6, "six")),
    ("####### seven", None),
    ("#hashtag", None),  # a tag, not a heading
    ("#5 on the list", None),
    ("", None),
    ("- ## in a bullet", None),
]


@pytest.mark.parametrize(("line", "want"), HEADING_LINES, ids=[r[0] for r in HEADING_LINES])
def test_heading_reads_one_line_as_commonmark_does(line: str, want: tuple[int, str] | None) -> None:
    assert heading(line) == want


FENCES = [
    ("backticks", ["```", "# x", "```", "# y"], [True, True, True, False]),
    ("tildes", ["~~~", "# x", "~~~", "# y"], [True, True, True, False]),
    ("an info string", ["```python", "# x", "```", "# y"], [True, True, True, False]),
    ("a longer closer", ["```", "# x", "`````", "# y"], [True, True, True, False]),
    ("a shorter line stays code", ["````", "```", "# x", "````"], [True] * 4),
    ("the other character stays code", ["```", "~~~", "# x", "```"], [True] * 4),
    ("a closer takes no info string", ["~~~", "~~~ no", "# x", "~~~"], [True] * 4),
    ("indented up to three", ["   ```", "# x", "  ```", "# y"], [True, True, True, False]),
    ("four spaces is no fence", ["    ```", "# x", "    ```"], [False] * 3),
    ("inline code is no fence", ["```a``` b", "# x"], [False, False]),
    ("never closed", ["# a", "```", "# x", "text"], [False, True, True, True]),
]


@pytest.mark.parametrize(("lines", "code"), [r[1:] for r in FENCES], ids=[r[0] for r in FENCES])
def test_code_lines_follow_the_fences(lines: list[str], code: list[bool]) -> None:
    assert code_lines(lines) == code
    assert [h.line for h in headings(lines)] == [
        i for i, line in enumerate(lines) if not code[i] and heading(line)
    ]


# A daily log and a MEMORY.md in one: every case where the old rules disagreed.
TEXT = """\
# Log
## Morning ##
- first bullet
```
## not a heading
```
~~~md
## nor this
~~~
    ```
## Evening
#hashtag line
- second bullet
"""


def test_compile_search_and_curate_read_the_same_sections() -> None:
    sections = split_sections(TEXT)
    assert [(s.heading, s.start, s.end) for s in sections] == [
        ("Morning", 1, 10),
        ("Evening", 10, 13),
    ]
    lines, _ = index_lines(TEXT, "2026-05-20")
    titles = {line.body: line.title for line in lines}
    assert titles["- first bullet"].endswith("Log › Morning")
    assert titles["## not a heading"].endswith("Log › Morning")
    assert titles["#hashtag line"].endswith("Log › Evening")
    assert titles["- second bullet"].endswith("Log › Evening")
    entries = parse_entries("2026-05-20", TEXT)
    assert [(e.block, e.text) for e in entries] == [
        ("Morning", "first bullet"),
        ("Evening", "second bullet"),
    ]


def test_first_heading_skips_tags_and_code() -> None:
    assert first_heading("#tag\n```\n# code\n```\n## Real one ##\n") == "Real one"
    assert first_heading("no heading\n") == ""


def test_links_in_fences_of_any_kind_are_code() -> None:
    text = "~~~\n[a](x.md)\n~~~\n[b](y.md)\n````\n```\n[c](z.md)\n````\n"
    assert list(link_targets(text)) == [(4, "y.md")]
