"""`crustacean ui` without a browser: the guard (token, Host, CSRF), escaping, the writes it makes
through the core functions, and page sizes on a big workspace.

Requests go through Starlette's TestClient against the real app with the address the server
would print (`127.0.0.1:PORT`), so the Host check is the real one. Every refused request is
followed by proof that nothing in the workspace changed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from store_helpers import git
from ui_helpers import HOSTILE, SOUL_ADDED, open_ws, seed

from conftest import snapshot
from crustacean.ops.init import init_workspace
from crustacean.store import history as hist
from crustacean.store import proposals
from crustacean.store.changes import Change
from crustacean.store.write import Store
from crustacean.ui import views
from crustacean.ui.security import Guard
from crustacean.ui.server import UiContext, build_app
from crustacean.workspace import Workspace

PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture(autouse=True)
def no_crontab(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor reads the crontab; the tests never touch the real one."""
    import crustacean.ops.cron as cron

    monkeypatch.setattr(cron, "read_crontab", lambda _f, **_: "")


@pytest.fixture
def seeded(ws: Workspace) -> tuple[Workspace, dict[str, object]]:
    return ws, seed(ws)


def client_for(root: Path, overrides: list[str] | None = None) -> tuple[TestClient, Guard]:
    guard = Guard.new(PORT)
    app = build_app(UiContext(root, overrides or [], guard))
    return TestClient(app, base_url=BASE, follow_redirects=False), guard


def logged_in(root: Path, overrides: list[str] | None = None) -> tuple[TestClient, Guard]:
    client, guard = client_for(root, overrides)
    assert client.get(f"/?token={guard.token}").status_code == 303
    return client, guard


def workspace_state(root: Path) -> dict[str, str]:
    """Every workspace file, git refs included; proposals' own JSON is operational state."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".crustacean/")}


# ---------------------------------------------------------------- token


def test_every_request_needs_the_token_then_the_cookie(ws: Workspace, seeded) -> None:
    client, guard = client_for(ws.root)
    for path in ("/", "/files", "/file?path=SOUL.md", "/versions", "/ui.css"):
        r = client.get(path)
        assert r.status_code == 403 and "open the URL that `crustacean ui` printed" in r.text
        assert "Soul" not in r.text
    assert client.get("/?token=wrong").status_code == 403
    r = client.get(f"/files?dir=memory&token={guard.token}")
    assert r.status_code == 303 and r.headers["location"] == "/files?dir=memory"
    cookie = r.headers["set-cookie"]
    assert f"crustacean_ui_{PORT}={guard.token}" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/").status_code == 200
    client.cookies.clear()
    client.cookies.set(guard.cookie, "not-the-token")
    assert client.get("/").status_code == 403


def test_the_token_is_random_per_start_and_the_url_is_loopback() -> None:
    a, b = Guard.new(PORT), Guard.new(PORT)
    assert a.token != b.token and len(a.token) >= 40 and a.csrf != b.csrf
    assert a.url().startswith(f"http://127.0.0.1:{PORT}/?token=")


# ---------------------------------------------------------------- Host


@pytest.mark.parametrize(
    "host",
    ["evil.example", f"evil.example:{PORT}", "127.0.0.1", f"127.0.0.1:{PORT + 1}", "0.0.0.0"],
)
def test_a_foreign_host_header_is_refused_even_with_the_cookie(seeded, host: str) -> None:
    ws, info = seeded
    client, guard = logged_in(ws.root)
    before = workspace_state(ws.root)
    r = client.get("/", headers={"host": host})
    assert r.status_code == 421 and "Refused" in r.text and "Soul" not in r.text
    pid = info["proposals"][0]
    r = client.post(f"/proposals/{pid}/approve", data={"csrf": guard.csrf}, headers={"host": host})
    assert r.status_code == 421
    assert workspace_state(ws.root) == before
    assert proposals.get(ws, pid).status == "pending"


# ---------------------------------------------------------------- CSRF


def test_changes_without_a_valid_csrf_token_change_nothing(seeded) -> None:
    ws, info = seeded
    client, guard = logged_in(ws.root)
    pid = info["proposals"][0]
    first = hist.history(Store(ws), None, 50)[-1].id
    before = workspace_state(ws.root)
    attempts = [
        (f"/proposals/{pid}/approve", {}, {}),
        (f"/proposals/{pid}/approve", {"csrf": "forged"}, {}),
        (f"/proposals/{pid}/approve", {"csrf": guard.csrf}, {"origin": "http://evil.example"}),
        (f"/proposals/{pid}/approve", {"csrf": guard.csrf}, {"sec-fetch-site": "cross-site"}),
        (f"/proposals/{pid}/reject", {"reason": "x"}, {}),
        (f"/versions/{first}/rollback", {"path": "SOUL.md"}, {}),
    ]
    for url, form, headers in attempts:
        r = client.post(url, data=form, headers=headers)
        assert r.status_code == 403, (url, form, headers, r.status_code)
        assert "Refused" in r.text
    assert client.get(f"/proposals/{pid}/approve").status_code == 405  # a GET never changes
    no_cookie, _ = client_for(ws.root)
    assert no_cookie.post(f"/proposals/{pid}/approve", data={"csrf": guard.csrf}).status_code == 403
    assert workspace_state(ws.root) == before
    assert all(p.status == "pending" for p in proposals.list_proposals(ws, None))


def test_pages_carry_the_csrf_token_and_strict_headers(ws: Workspace, seeded) -> None:
    client, guard = logged_in(ws.root)
    r = client.get("/proposals")
    assert f'name="csrf" value="{guard.csrf}"' in r.text
    assert guard.token not in r.text  # the session token itself never appears in a page
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "same-origin"
    assert client.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200  # the same


# ---------------------------------------------------------------- escaping


def test_hostile_workspace_text_is_escaped_on_every_page(ws: Workspace, seeded) -> None:
    store = Store(ws)
    name = "memory/notes/<img src=x onerror=alert(3)>.md"
    store.write_context(
        [Change(name, "create", content=HOSTILE.encode())],
        actor="user",
        message="<script>alert('msg')</script>",
    )
    store.write_context(
        [Change("IDENTITY.md", "append", content=HOSTILE.encode())],
        actor="calibrate",
        message="<script>alert('proposal')</script>",
    )
    client, _ = logged_in(ws.root)
    head = hist.history(store, None, 1)[0].id
    pages = [
        "/",
        "/files?dir=memory/notes",
        f"/file{render_qs(path=name)}",
        f"/file{render_qs(path=name, view='raw')}",
        "/file?path=memory/notes/hostile.md",
        "/versions",
        f"/versions/{head}",
        f"/versions/{head}/rollback",
        "/proposals",
        "/runs",
        "/search?q=evil",
        "/search?q=%3Cscript%3E",
    ]
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:500])
        assert markup_of(r.text) == set(), url
    raw = client.get(f"/file{render_qs(path='memory/notes/hostile.md', view='raw')}").text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in raw
    run = client.get("/runs").text
    rid = re.search(r'href="/runs/([^"]+)"', run).group(1)
    detail = client.get(f"/runs/{rid}").text
    assert "<tidy>" not in detail and "refused" in detail


class _Markup(HTMLParser):
    """Collects what a browser would run or load: script/img/iframe tags, on* handlers,
    javascript: links."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "img", "iframe", "object", "embed"):
            self.found.add(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.found.add(name)
            if name in ("href", "src") and (value or "").strip().lower().startswith("javascript:"):
                self.found.add(f"{name}=javascript:")


def markup_of(page: str) -> set[str]:
    parser = _Markup()
    parser.feed(page)
    return parser.found


def render_qs(**params: str) -> str:
    from crustacean.ui.render import query_string

    return query_string(**params)


# ---------------------------------------------------------------- writes


def test_approve_applies_the_proposal_as_a_version(seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, info = seeded
    monkeypatch.setenv("LOGNAME", "sam")  # who approves: the login name, as getpass reads it
    client, guard = logged_in(ws.root)
    pid = info["proposals"][0]
    page = client.get("/proposals").text
    assert "replaces SOUL.md" in page  # a foundation file is marked on its card
    r = client.post(f"/proposals/{pid}/approve", data={"csrf": guard.csrf})
    assert r.status_code == 303
    vid = re.fullmatch(r"/versions/([0-9a-f]{40})\?done=approved", r.headers["location"]).group(1)
    assert SOUL_ADDED.strip() in (ws.root / "SOUL.md").read_text()
    top = hist.history(Store(ws), None, 1)[0]
    assert top.id == vid and top.actor == "calibrate" and top.files == ("SOUL.md",)
    body = git(ws.root, "log", "-1", "--format=%b", vid)
    assert body.startswith("Approved by sam in the review page.\n")
    assert proposals.get(ws, pid).status == "approved"
    shown = client.get(r.headers["location"]).text
    assert "Approved: the proposal was applied" in shown and "Be brief, warm and exact." in shown
    assert f'href="/versions/{vid}"' in client.get("/proposals?status=approved").text
    again = client.post(f"/proposals/{pid}/approve", data={"csrf": guard.csrf})
    assert again.status_code == 400 and "already approved" in again.text


def test_reject_writes_nothing(seeded) -> None:
    ws, info = seeded
    client, guard = logged_in(ws.root)
    pid = info["proposals"][1]
    before = workspace_state(ws.root)
    r = client.post(f"/proposals/{pid}/reject", data={"csrf": guard.csrf, "reason": "not <now>"})
    assert r.status_code == 303 and r.headers["location"] == f"/proposals?done=rejected-{pid}"
    assert workspace_state(ws.root) == before
    prop = proposals.get(ws, pid)
    assert prop.status == "rejected" and prop.note == "not <now>"
    assert "not &lt;now&gt;" in client.get("/proposals?status=rejected").text


def test_a_stale_proposal_is_refused_and_stays_pending(seeded) -> None:
    ws, info = seeded
    client, guard = logged_in(ws.root)
    pid = info["proposals"][0]
    (ws.root / "SOUL.md").write_text("# Soul\n\nedited by hand meanwhile\n")
    before = workspace_state(ws.root)
    r = client.post(f"/proposals/{pid}/approve", data={"csrf": guard.csrf})
    assert r.status_code == 409 and f"proposal {pid} is stale" in r.text
    assert "Nothing was changed" in r.text
    assert workspace_state(ws.root) == before
    assert proposals.get(ws, pid).status == "pending"


def test_memory_write_off_refuses_approval(seeded) -> None:
    ws, info = seeded
    client, guard = logged_in(ws.root, ["memory.write=off"])
    assert "memory.write is <b>off</b>" in client.get("/").text
    page = client.get("/proposals").text
    assert re.search(r'class="approve" disabled', page)
    before = workspace_state(ws.root)
    r = client.post(f"/proposals/{info['proposals'][0]}/approve", data={"csrf": guard.csrf})
    assert r.status_code == 403 and "memory.write is off" in r.text
    assert workspace_state(ws.root) == before


def test_a_locked_memory_write_cannot_be_overridden(
    seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, info = seeded
    org = tmp_path / "org.toml"
    org.write_text('[memory]\nwrite = "off"\n\n[governance]\nlocked = ["memory.write"]\n')
    monkeypatch.setenv("CRUSTACEAN_ORG_CONFIG", str(org))
    client, guard = logged_in(ws.root, ["memory.write=direct"])
    overview = client.get("/").text
    assert "locked by the org config" in overview and "is locked by the org config" in overview
    before = workspace_state(ws.root)
    r = client.post(f"/proposals/{info['proposals'][0]}/approve", data={"csrf": guard.csrf})
    assert r.status_code == 403 and "memory.write is off" in r.text
    assert workspace_state(ws.root) == before


def test_rollback_of_one_file_confirms_then_writes_a_user_version(ws: Workspace, seeded) -> None:
    client, guard = logged_in(ws.root)
    store = Store(ws)
    path = "memory/contacts/alice.md"
    created = hist.history(store, path, 10)[-1]
    confirm = client.get(f"/versions/{created.id}/rollback{render_qs(path=path)}")
    assert confirm.status_code == 200
    assert "writes <b>1 file(s)</b>" in confirm.text and f"restore: {path}" in confirm.text
    assert "green tea, never coffee" in confirm.text  # the diff shows what goes away
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', confirm.text).group(1)
    r = client.post(
        f"/versions/{created.id}/rollback",
        data={"csrf": guard.csrf, "path": path, "digest": digest},
    )
    assert r.status_code == 303
    top = hist.history(store, None, 1)[0]
    assert r.headers["location"] == f"/versions/{top.id}?done=rollback"
    assert top.actor == "user" and top.files == (path,) and top.message.startswith("rollback ")
    assert "tea over coffee" in (ws.root / path).read_text()
    assert "Rolled back" in client.get(r.headers["location"]).text


def test_a_rollback_confirmed_before_a_change_is_refused(ws: Workspace, seeded) -> None:
    client, guard = logged_in(ws.root)
    path = "memory/contacts/alice.md"
    created = hist.history(Store(ws), path, 10)[-1]
    confirm = client.get(f"/versions/{created.id}/rollback{render_qs(path=path)}").text
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', confirm).group(1)
    (ws.root / path).write_text("# Alice\n\nchanged after the confirmation\n")
    before = workspace_state(ws.root)
    r = client.post(
        f"/versions/{created.id}/rollback",
        data={"csrf": guard.csrf, "path": path, "digest": digest},
    )
    assert r.status_code == 409 and "changed since this rollback was shown" in r.text
    assert workspace_state(ws.root) == before


def test_bad_input_gets_a_clear_page_and_changes_nothing(ws: Workspace, seeded) -> None:
    client, guard = logged_in(ws.root)
    before = workspace_state(ws.root)
    cases = [
        ("/versions/nope", 400, "unknown version 'nope'"),
        ("/file?path=../outside.md", 400, "outside.md"),
        ("/file?path=missing.md", 400, "missing.md does not exist"),
        ("/file?path=.git/config", 400, ".git"),
        ("/file?path=.crustacean/state.db", 400, ".crustacean"),
        ("/file?path=/etc/passwd", 400, "/etc/passwd"),
        ("/file", 400, "no file named"),
        ("/runs/nope", 400, "nope"),
        ("/search?q=%22unclosed", 200, ""),
    ]
    for url, code, words in cases:
        r = client.get(url)
        assert r.status_code == code, (url, r.status_code, r.text[:300])
        assert words in unescape(r.text) and "Traceback" not in r.text
    r = client.post("/proposals/999/approve", data={"csrf": guard.csrf})
    assert r.status_code == 400 and "no proposal 999" in r.text
    assert workspace_state(ws.root) == before


# ---------------------------------------------------------------- pages


def test_pages_show_what_the_cli_shows(seeded) -> None:
    ws, info = seeded
    client, _ = logged_in(ws.root)
    overview = client.get("/").text
    for words in ("collect", "next slot", "$0.4100", "MEMORY.md", "Pending proposals", "Doctor"):
        assert words in overview
    assert '<svg class="chart"' in overview and "compile: $0.4100" in overview
    versions = client.get("/versions").text
    assert "agent write · curate" in versions and "agent write · compile" in versions
    assert "2 files" in versions  # a call that changed two files shows the count
    file_page = client.get("/file?path=memory/contacts/alice.md").text
    assert 'id="tier"' in file_page and "warm" in file_page and 'id="recalls">0<' in file_page
    hits = client.get("/search?q=lighthouse").text
    assert "knowledge/topics/lighthouse.md#L" in hits and "view=raw" in hits
    run = client.get(f"/runs/{info['runs'][0]}").text
    assert "2, of which 1 refused" in run and "cache read 3,000" in run


def test_views_label_versions() -> None:
    cases = [
        ("curate", "curate: routed", "agent", "agent write · curate"),
        ("mcp", "note", "agent", "agent write · mcp"),
        ("user", "rollback SOUL.md to version abc", "rollback", "rollback"),
        (
            "user",
            "snapshot of uncommitted edits before a curate write",
            "snapshot",
            "user snapshot",
        ),
        ("calibrate", "tidy (proposal 3, approved)", "approved", "approved · calibrate"),
        ("user", "remember x", "user", "user"),
    ]
    for actor, message, kind, label in cases:
        assert views.badge(actor, message) == views.Badge(kind, label)
    assert views.files_label(["a.md"]) == "a.md" and views.files_label(["a", "b"]) == "2 files"
    assert views.line_range("3-5") == (3, 5) and views.line_range("4") == (4, 4)
    assert views.line_range("5-3") is None and views.line_range("x") is None
    paged = views.page_of(list(range(11)), 2, 5)
    assert paged.items == [5, 6, 7, 8, 9] and paged.prev == 1 and paged.next == 3
    assert views.page_of(list(range(10)), 2, 5).next is None
    assert views.page_number("-3") == 1 and views.page_number("x") == 1


def test_foundation_marks() -> None:
    marks = views.foundation_marks(
        [
            Change("SOUL.md", "overwrite", content=b"x"),
            Change("USER.md", "delete"),
            Change("USER.md", "append", content=b"x"),
            Change("memory/notes/a.md", "move", to="TOOLS.md"),
        ]
    )
    assert marks == ["replaces SOUL.md", "deletes USER.md", "replaces TOOLS.md (moved onto it)"]


# ---------------------------------------------------------------- a big workspace


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10,000 memories in one folder and 122 versions, made with git directly (fast)."""
    base = tmp_path_factory.mktemp("big")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(base))
        mp.setenv("CRUSTACEAN_CONFIG_DIR", str(base / "cfg"))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        root = base / "ws"
        init_workspace(root)
        notes = root / "memory/notes"
        for i in range(10_000):
            (notes / f"note-{i:05d}.md").write_text(
                f"---\nname: note-{i}\ntier: {'warm' if i % 3 else 'cold'}\n---\n"
                f"Note {i} about topic {i % 97}: a fact worth keeping.\n"
            )
        ident = ["-c", "user.name=crustacean user", "-c", "user.email=u@localhost"]
        git(root, *ident, "add", "-A")
        git(root, *ident, "commit", "-qm", "10,000 notes")
        stream = "".join(
            f"commit refs/heads/HEADREF\ncommitter crustacean curate <c@localhost> "
            f"{1_700_000_000 + i} +0000\ndata {len(f'edit {i}')}\nedit {i}\n"
            f"{'from HEADREF^0' + chr(10) if i == 0 else ''}"
            f"M 100644 inline memory/notes/note-{i:05d}.md\ndata 12\nedited {i:04d}\n\n"
            for i in range(120)
        )
        branch = git(root, "symbolic-ref", "--short", "HEAD").strip()
        stream = stream.replace("HEADREF", branch)
        subprocess.run(
            ["git", "fast-import", "--quiet"], cwd=root, input=stream.encode(), check=True
        )
        subprocess.run(["git", "checkout", "-q", "-f", branch], cwd=root, check=True)
    return root


LIMIT = 300_000  # "a few hundred KB"


def test_ten_thousand_memories_page_under_a_few_hundred_kb(big: Path) -> None:
    client, _ = logged_in(big)
    baseline = hist.history(Store(open_ws(big)), None, 200)[-2].id  # the 10,000 notes
    pages = {}
    for url in (
        "/",
        "/files",
        "/files?dir=memory/notes",
        "/files?dir=memory/notes&page=50",
        "/versions",
        "/versions?page=3",
        f"/versions/{baseline}",
        "/file?path=memory/notes/note-00042.md",
        "/search?q=topic",
        "/proposals",
        "/runs",
    ):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        pages[url] = r.text
    sizes = {url: len(text.encode()) for url, text in pages.items()}
    print(sizes)
    assert max(sizes.values()) < LIMIT, sizes
    first, last = pages["/files?dir=memory/notes"], pages["/files?dir=memory/notes&page=50"]
    assert "10000 entries" in first.replace(",", "")
    assert first.count('class="file mono"') == 200 and 'rel="next"' in first
    assert last.count('class="file mono"') == 200 and 'rel="next"' not in last
    assert "note-09999.md" in last
    assert pages["/versions"].count("version-link") == 50 and 'rel="next"' in pages["/versions"]
    page3 = pages["/versions?page=3"]  # 120 edits, the 10,000 notes, init
    assert page3.count("version-link") == 22 and 'rel="next"' not in page3
    big_diff = pages[f"/versions/{baseline}"]
    assert "part of it is cut" in big_diff and "more file(s)" in big_diff


# ---------------------------------------------------------------- the command


def test_ui_command_prints_its_url_serves_and_stops_on_ctrl_c(ws: Workspace) -> None:
    import http.cookiejar
    import signal
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "crustacean", "-w", str(ws.root), "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        url = lines[1].split()[-1]
        assert lines[0].startswith("crustacean ui for") and lines[2] == "Press Ctrl-C to stop.\n"
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", url)
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        with opener.open(url, timeout=60) as r:
            assert r.status == 200 and "Overview" in r.read().decode()
        with opener.open(url.split("?")[0] + "versions", timeout=60) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip().endswith("Stopped.") and "Traceback" not in err
    assert url.split("token=")[1] not in err  # no access log carries the token


def test_ui_command_on_a_busy_port_says_so(ws: Workspace) -> None:
    import socket

    from conftest import run_cli

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        before = snapshot(ws.root)
        result = run_cli("-w", str(ws.root), "ui", "--no-open", "--port", str(port), code=2)
    assert f"Error: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "--port N" in result.stderr
    assert snapshot(ws.root) == before


def test_a_huge_hand_written_file_is_paged(ws: Workspace) -> None:
    lines = [f"line {i} of a long log" for i in range(1, 20_001)]
    lines[4] = "x" * 400_000  # one absurdly long line
    (ws.root / "memory/notes/huge.md").write_text("\n".join(lines) + "\n")
    client, _ = logged_in(ws.root)
    sizes = []
    for url in (
        "/file?path=memory/notes/huge.md",
        "/file?path=memory/notes/huge.md&view=raw",
        "/file?path=memory/notes/huge.md&view=raw&page=20",
        "/file?path=memory/notes/huge.md&view=raw&hl=15000-15002",
    ):
        r = client.get(url)
        assert r.status_code == 200, url
        sizes.append(len(r.content))
    assert max(sizes) < LIMIT, sizes
    hit = client.get("/file?path=memory/notes/huge.md&view=raw&hl=15000-15002").text
    assert '<span id="L15000" class="hl">' in hit and "line 15000 of a long log" in hit
    assert "line 14001 of" in hit and "line 13999 of" not in hit  # page 15: lines 14001-15000
    first = client.get("/file?path=memory/notes/huge.md&view=raw").text
    assert "long lines are shortened" in first and "20000 lines" in first.replace(",", "")


def test_parse_show_splits_header_trailers_and_files() -> None:
    text = (
        "commit abc123\nAuthor:     crustacean curate <crustacean@localhost>\n"
        "AuthorDate: Tue Dec 1 08:00:00 2026 +0000\nCommit:     crustacean curate <c@l>\n"
        "CommitDate: Tue Dec 1 08:00:00 2026 +0000\n\n    curate: route\n\n"
        "    Crustacean-Actor: curate\n    Crustacean-Run: run-1\n    Crustacean-Call: call-1\n\n"
        " a.md | 2 +-\n\n"
        "diff --git a/a.md b/a.md\nindex 1..2 100644\n--- a/a.md\n+++ b/a.md\n"
        "@@ -1 +1 @@\n-old\n+new\n"
        "diff --git a/b.md b/b.md\nnew file mode 100644\n--- /dev/null\n+++ b/b.md\n"
        "@@ -0,0 +1 @@\n+hi\n"
    )
    shown = views.parse_show(text)
    assert (shown.id, shown.actor, shown.message, shown.run_id) == (
        "abc123",
        "curate",
        ["curate: route"],
        "run-1",
    )
    assert [(f.path, f.old, f.added, f.removed) for f in shown.files] == [
        ("a.md", "a.md", 1, 1),
        ("b.md", None, 1, 0),
    ]
    assert shown.files[0].lines == [("hunk", "@@ -1 +1 @@"), ("del", "-old"), ("add", "+new")]
    alone = views.parse_show(text.replace("run-1", "call-1"))
    assert alone.run_id is None  # a write outside a run names only its call


@pytest.mark.parametrize(
    ("href", "folder", "link"),
    [
        ("contacts/alice.md", "memory", "/file?path=memory%2Fcontacts%2Falice.md"),
        ("../SOUL.md#who", "memory", "/file?path=SOUL.md#who"),
        ("https://example.com/x", "memory", "https://example.com/x"),
        ("#section", "", "#section"),
        ("../../etc/passwd", "memory", "../../etc/passwd"),
        ("mailto:a@b.c", "", "mailto:a@b.c"),
    ],
)
def test_relative_markdown_links_open_the_file_here(href: str, folder: str, link: str) -> None:
    from crustacean.ui.render import file_link, markdown

    assert file_link(href, folder) == link
    assert f'href="{link.replace("&", "&amp;")}"' in markdown(f"[x]({href})", folder)


def test_the_real_server_checks_host_and_token_too(seeded) -> None:
    """The same guard under uvicorn on an ephemeral port, over a real socket."""
    import http.client

    from ui_helpers import serve

    ws, _ = seeded
    before = workspace_state(ws.root)
    with serve(ws.root) as running:

        def get(path: str, host: str) -> tuple[int, dict[str, str]]:
            conn = http.client.HTTPConnection("127.0.0.1", running.guard.port, timeout=60)
            try:
                conn.request("GET", path, headers={"Host": host})
                r = conn.getresponse()
                r.read()
                return r.status, {k.lower(): v for k, v in r.getheaders()}
            finally:
                conn.close()

        own = f"127.0.0.1:{running.guard.port}"
        token = f"/?token={running.guard.token}"
        assert (
            get(token, "attacker.example")[0] == 421
        )  # DNS rebinding: the right token, wrong name
        assert get("/", own)[0] == 403
        status, headers = get(token, own)
        assert status == 303 and headers["set-cookie"].startswith(running.guard.cookie)
    assert workspace_state(ws.root) == before


# ---------------------------------------------------------------- undo


def test_undo_from_the_version_page(ws: Workspace, seeded) -> None:
    client, guard = logged_in(ws.root)
    versions = hist.history(Store(ws), None, 50)
    weekly = next(v for v in versions if v.message == "compile: weekly pass")
    before_weekly = versions[versions.index(weekly) + 1].id
    page = client.get(f"/versions/{weekly.id}").text
    assert f'id="parent-link" href="/versions/{before_weekly}"' in page
    assert f'href="/versions/{weekly.id}/undo"' in page and "Undo this change" in page
    assert f'href="/versions/{weekly.id}/undo?path=memory%2Fcontacts%2Falice.md"' in page
    prev = client.get(f"/versions/{weekly.id}/previous?path=memory/contacts/alice.md")
    assert prev.status_code == 303
    assert prev.headers["location"].endswith("?file=memory%2Fcontacts%2Falice.md")
    assert prev.headers["location"].startswith(f"/versions/{before_weekly}")

    confirm = client.get(f"/versions/{weekly.id}/undo?path=memory/contacts/alice.md").text
    assert "restore: memory/contacts/alice.md" in confirm and "new version" in confirm
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', confirm).group(1)
    form = {"csrf": guard.csrf, "path": "memory/contacts/alice.md", "digest": digest}
    stale = client.post(f"/versions/{weekly.id}/undo", data={**form, "digest": "0" * 64})
    assert stale.status_code == 409 or stale.status_code == 400
    r = client.post(f"/versions/{weekly.id}/undo", data=form)
    assert r.status_code == 303 and r.headers["location"].endswith("?done=undo")
    assert "tea over coffee" in (ws.root / "memory/contacts/alice.md").read_text()
    assert (ws.root / "knowledge/topics/lighthouse.md").is_file()  # only the one file
    assert "Undone:" in client.get(r.headers["location"]).text
