"""Routes of the local UI, and the server that runs them.

Each route opens the workspace afresh (so a config edit shows at once, with the same layers,
-c overrides and governance locks as the CLI), calls the core function the matching CLI command
calls, and renders a template. Changes are POSTs through `_change`, which checks the CSRF token
before anything runs; refusals from the core (stale files, memory.write = "off", locks) become an
error page and change nothing, exactly as they would in the CLI.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from crustacean.clock import Clock, wall_clock, zone_name
from crustacean.config import STAGES
from crustacean.documents import DocumentSkipped, parse_document
from crustacean.errors import (
    CrustaceanError,
    LockedError,
    PolicyError,
    StaleWriteError,
    UsageError,
)
from crustacean.ops.status import doctor, run_totals, workspace_status
from crustacean.recall.memory_ops import memory_tier
from crustacean.recall.search import SearchIndex
from crustacean.runs import get_run, list_runs
from crustacean.state import open_state
from crustacean.store import Store, proposals, review
from crustacean.store import history as hist
from crustacean.store.changes import Change, unified_diff
from crustacean.ui import render, views
from crustacean.ui.security import Guard, GuardMiddleware
from crustacean.workspace import Workspace, open_workspace

T = TypeVar("T")
VERSIONS_PER_PAGE = 50
FILES_PER_PAGE = 200
RUNS_PER_PAGE = 50
PROPOSALS_PER_PAGE = 20
SEARCH_HITS = 30
WHOLE_DIFF = (20, 400)  # files, lines of a whole-workspace rollback's first look at its diff


@dataclass
class UiContext:
    """What every route needs: where the workspace is, how to open it, and the guard."""

    root: Path
    overrides: list[str]
    guard: Guard
    env: dict[str, str] | None = None
    clock: Clock = wall_clock

    def open(self) -> Workspace:
        return open_workspace(self.root, self.overrides, self.env)


def build_app(ctx: UiContext) -> Starlette:
    """The ASGI app: every request passes the guard first."""
    routes = [
        Route("/", _get(ctx, overview)),
        Route("/files", _get(ctx, files)),
        Route("/file", _get(ctx, file_page)),
        Route("/versions", _get(ctx, versions)),
        Route("/versions/{vid}", _get(ctx, version_page)),
        Route("/versions/{vid}/rollback", _get(ctx, rollback_confirm)),
        Route("/versions/{vid}/rollback", _change(ctx, rollback_do), methods=["POST"]),
        Route("/versions/{vid}/rollback/files", _get(ctx, rollback_files)),
        Route("/versions/{vid}/undo", _get(ctx, undo_confirm)),
        Route("/versions/{vid}/previous", _get(ctx, previous_version)),
        Route("/versions/{vid}/undo", _change(ctx, undo_do), methods=["POST"]),
        Route("/proposals", _get(ctx, proposals_page)),
        Route("/proposals/{pid:int}/approve", _change(ctx, approve), methods=["POST"]),
        Route("/proposals/{pid:int}/reject", _change(ctx, reject), methods=["POST"]),
        Route("/runs", _get(ctx, runs)),
        Route("/runs/{rid}", _get(ctx, run_page)),
        Route("/search", _get(ctx, search)),
        Route("/ui.css", lambda _r: FileResponse(render.HERE / "static/ui.css")),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        """An unknown page: the site's own page, with its navigation, not a bare text."""
        return _html(
            ctx,
            None,
            "error.html",
            404,
            title="Not found",
            message=f"There is no page at {request.url.path}; the links above lead to every page.",
        )

    return Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, guard=ctx.guard)],
        exception_handlers={404: not_found},
    )


Handler = Callable[[UiContext, Workspace, Request], Response]
ChangeHandler = Callable[[UiContext, Workspace, Request, FormData], Response]


def _get(ctx: UiContext, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await run_in_threadpool(_guarded, ctx, lambda ws: handler(ctx, ws, request))

    return endpoint


def _change(ctx: UiContext, handler: ChangeHandler) -> Callable[[Request], Awaitable[Response]]:
    """A POST that runs only with this server's CSRF token."""

    async def endpoint(request: Request) -> Response:
        form = await request.form()
        token = form.get("csrf")
        if not ctx.guard.csrf_ok(token if isinstance(token, str) else None):
            return _error(
                ctx,
                None,
                403,
                "Refused: the form's CSRF token is missing or wrong; "
                "reload the page and try again.",
            )
        return await run_in_threadpool(_guarded, ctx, lambda ws: handler(ctx, ws, request, form))

    return endpoint


def _guarded(ctx: UiContext, call: Callable[[Workspace], Response]) -> Response:
    """The UI's one error boundary, like the CLI's: a CrustaceanError is a page, not a crash."""
    try:
        ws = ctx.open()
    except CrustaceanError as e:
        return _error(ctx, None, 500, str(e))
    try:
        return call(ws)
    except CrustaceanError as e:
        return _error(ctx, ws, _status_of(e), str(e))


def _status_of(e: CrustaceanError) -> int:
    codes = ((StaleWriteError, 409), (LockedError, 423), (PolicyError, 403))
    return next((code for kind, code in codes if isinstance(e, kind)), 400)


def _html(
    ctx: UiContext, ws: Workspace | None, name: str, http_status: int = 200, **kw: Any
) -> Response:
    pending = len(proposals.list_proposals(ws)) if ws is not None else 0
    tz = ws.tz if ws is not None else UTC
    body = render.page(
        name,
        csrf=ctx.guard.csrf,
        root=str(ctx.root),
        pending=pending,
        warnings=list(ws.config.warnings) if ws is not None else [],
        tz=tz,
        zone=zone_name(tz),
        **kw,
    )
    return HTMLResponse(body, status_code=http_status)


def _error(ctx: UiContext, ws: Workspace | None, code: int, message: str) -> Response:
    return _html(ctx, ws, "error.html", code, title="Refused", message=message)


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


def _paged(request: Request, items: Sequence[T], size: int) -> views.Paged[T]:
    """The page of `items` that the request's `?page=` asks for."""
    return views.page_of(items, views.page_number(request.query_params.get("page")), size)


# ---------------------------------------------------------------- overview


def overview(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean status` and `crustacean doctor` on one page."""
    now = ctx.clock()
    status = workspace_status(ws, now)
    runs = list_runs(ws, limit=10_000)
    per_stage = {
        s: [c for _, c in run_totals([r for r in runs if r.stage == s], now)[1]] for s in STAGES
    }
    days = [d for d, _ in status.daily_cost]
    report = doctor(ws.root, env=ctx.env, now=now)
    write = ws.config.get("memory.write")
    return _html(
        ctx,
        ws,
        "overview.html",
        title="Overview",
        status=status,
        chart=render.cost_chart(days, per_stage),
        findings=[f for f in report.findings if f.status != "ok"],
        ok_checks=sum(f.status == "ok" for f in report.findings),
        proposals=proposals.list_proposals(ws)[:5],
        write=write,
        write_locked="memory.write" in ws.config.locked,
        locked=sorted(ws.config.locked),
    )


# ---------------------------------------------------------------- files


def files(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """The workspace tree, one folder at a time (a folder of 10,000 memories is paged)."""
    folder = request.query_params.get("dir", "").strip("/")
    infos = Store(ws).list_context_files(f"{folder}/" if folder else None)
    entries = views.folder_entries(folder, infos)
    paged = _paged(request, entries, FILES_PER_PAGE)
    return _html(
        ctx,
        ws,
        "files.html",
        title="Files",
        folder=folder,
        crumbs=views.breadcrumbs(folder),
        paged=paged,
        total=len(entries),
    )


def file_page(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """A file rendered and raw, its tier with the reason, its recalls and its history."""
    path = request.query_params.get("path", "")
    if not path:
        raise UsageError("no file named; pick one on the Files page.")
    store = Store(ws)
    content = store.read_context_file(path)
    view = "raw" if request.query_params.get("view") == "raw" else "rendered"
    hl = views.line_range(request.query_params.get("hl"))
    page = views.page_number(request.query_params.get("page"))
    raw = views.raw_page(content.content, views.page_of_line(hl[0]) if hl else page)
    front, body = None, content.content
    if content.path.endswith(".md"):
        try:
            doc = parse_document(content.content, content.path)
            front, body = doc.front, doc.body
        except DocumentSkipped:
            pass
    tier = memory_tier(ws, content.path, ctx.clock())
    versions = hist.history(store, content.path, 10) if store.versioned else []
    return _html(
        ctx,
        ws,
        "file.html",
        title=content.path,
        file=content,
        view=view,
        raw=raw,
        line_count=content.content.count("\n") + (not content.content.endswith("\n")),
        cut=len(body) > views.MAX_TEXT_CHARS,
        front=front,
        rendered=(
            render.markdown(body[: views.MAX_TEXT_CHARS], content.path.rpartition("/")[0])
            if view == "rendered"
            else ""
        ),
        hl=hl,
        tier=tier,
        rows=views.version_rows(versions),
        crumbs=views.breadcrumbs(content.path.rpartition("/")[0]),
    )


# ---------------------------------------------------------------- versions


def versions(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean history`, paged: the page asks for one more row than it shows."""
    page = views.page_number(request.query_params.get("page"))
    path = request.query_params.get("path") or None
    found = hist.history(Store(ws), path, page * VERSIONS_PER_PAGE + 1)
    paged = views.page_of(found, page, VERSIONS_PER_PAGE)
    return _html(
        ctx,
        ws,
        "versions.html",
        title="Versions",
        paged=paged,
        rows=views.version_rows(paged.items),
        path=path,
    )


def version_page(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean show`: who, why, and the diff, with a rollback per file and for all."""
    store = Store(ws)
    shown = views.parse_show(hist.show(store, request.path_params["vid"]))
    only = request.query_params.get("file")
    chosen = [f for f in shown.files if f.path == only] if only else shown.files
    diff, cut = views.clip(chosen)
    return _html(
        ctx,
        ws,
        "version.html",
        title=f"Version {shown.id[:12]}",
        shown=shown,
        badge=views.badge(shown.actor, shown.message[0] if shown.message else ""),
        diff=diff[: views.MAX_LISTED_FILES],
        more_files=max(0, len(diff) - views.MAX_LISTED_FILES),
        cut=cut,
        only=only,
        done=request.query_params.get("done"),
        parent=hist.parent_of(store, shown.id),
    )


def previous_version(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """The version before this one that changed a file (worked out on the click, not for every
    file of a page), or the file's history when it is further back than the history reaches."""
    path = request.query_params.get("path") or ""
    found = hist.previous_version(Store(ws), request.path_params["vid"], path) if path else None
    if found is None:
        return _redirect(f"/versions{render.query_string(path=path)}")
    return _redirect(f"/versions/{found}{render.query_string(file=path)}")


def undo_confirm(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """What undoing a version (or one file of it) would change, before anything is written."""
    path = request.query_params.get("path") or None
    store = Store(ws)
    plan = hist.undo_changes(store, request.path_params["vid"], path)
    diff, cut = _planned_diff(store, plan.changes)
    return _html(
        ctx,
        ws,
        "undo.html",
        title=f"Undo {plan.version[:12]}",
        plan=plan,
        path=path,
        changes=plan.changes[: views.MAX_LISTED_FILES],
        count=len(plan.changes),
        diff=diff[: views.MAX_LISTED_FILES],
        cut=cut,
        digest=views.change_digest(plan.parent, plan.changes),
    )


def undo_do(ctx: UiContext, ws: Workspace, request: Request, form: FormData) -> Response:
    """`crustacean undo VERSION [PATH]`, if it still changes what the page showed."""
    vid = request.path_params["vid"]
    path = str(form.get("path") or "") or None
    store = Store(ws)
    plan = hist.undo_changes(store, vid, path)
    if views.change_digest(plan.parent, plan.changes) != form.get("digest"):
        raise StaleWriteError(
            "the workspace changed since this undo was shown, so it was not applied; "
            "open the undo again to see what it would change now."
        )
    _, result = hist.undo(store, vid, path)
    if not result.version:
        return _redirect(f"/versions/{plan.version}?done=nothing")
    return _redirect(f"/versions/{result.version}?done=undo")


def _rollback_plan(ws: Workspace, vid: str, path: str | None) -> tuple[Store, str, list[Change]]:
    store = Store(ws)
    target, changes = hist.rollback_changes(store, vid, [path] if path else [])
    return store, target, changes


def _planned_diff(
    store: Store,
    changes: list[Change],
    files: int = views.MAX_LISTED_FILES,
    budget: int = views.MAX_DIFF_LINES,
) -> tuple[list[views.DiffFile], bool]:
    """What a rollback or an undo would change, now → after, clipped for the page: files are
    read and diffed one by one only until the page's budget is spent (a rollback of 2,500
    files read and diffed them all to show the first few)."""
    shown: list[views.DiffFile] = []
    lines = 0
    for c in changes[:files]:
        if lines >= budget:
            break
        triple = (c.path, store.read_bytes(c.path), None if c.mode == "delete" else c.content)
        parsed = views.parse_unified(unified_diff([triple]))
        shown += parsed
        lines += sum(len(f.lines) for f in parsed)
    diff, cut = views.clip(shown, budget)
    return diff, cut or len(shown) < len(changes)


def rollback_confirm(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """What rolling back would change, file by file, before anything is written."""
    path = request.query_params.get("path") or None
    store, target, changes = _rollback_plan(ws, request.path_params["vid"], path)
    # the whole workspace: a first look at the diff (its files are counted above, listed a
    # link away); one file: its whole diff
    diff, cut = _planned_diff(store, changes, *(() if path else WHOLE_DIFF))
    return _html(
        ctx,
        ws,
        "rollback.html",
        title=f"Roll back to {target[:12]}",
        target=target,
        path=path,
        changes=changes[: views.MAX_LISTED_FILES] if path else [],
        folders=[] if path else views.by_folder(changes),
        count=len(changes),
        diff=diff,
        cut=cut,
        digest=views.change_digest(target, changes),
    )


def rollback_files(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """Every file a whole-workspace rollback would write, paged: the list behind the
    confirmation's per-folder summary."""
    _, target, changes = _rollback_plan(ws, request.path_params["vid"], None)
    folder = request.query_params.get("folder") or None
    if folder:
        changes = [c for c in changes if views.top_folder(c.path) == folder]
    paged = _paged(request, changes, FILES_PER_PAGE)
    return _html(
        ctx,
        ws,
        "rollback_files.html",
        title=f"Files a rollback to {target[:12]} writes",
        target=target,
        folder=folder,
        paged=paged,
        count=len(changes),
    )


def rollback_do(ctx: UiContext, ws: Workspace, request: Request, form: FormData) -> Response:
    """`crustacean rollback VERSION [PATH]`, if it still changes what the page showed."""
    vid = request.path_params["vid"]
    path = str(form.get("path") or "") or None
    store, target, changes = _rollback_plan(ws, vid, path)
    if views.change_digest(target, changes) != form.get("digest"):
        raise StaleWriteError(
            "the workspace changed since this rollback was shown, so it was not applied; "
            "open the rollback again to see what it would change now."
        )
    result = hist.rollback(store, vid, [path] if path else [])
    if not result.version:
        return _redirect(f"/versions/{target}?done=nothing")
    return _redirect(f"/versions/{result.version}?done=rollback")


# ---------------------------------------------------------------- proposals


def proposals_page(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean review` as approval cards, each with its diff against the files now."""
    store = Store(ws)
    status = request.query_params.get("status", "pending")
    if status not in ("pending", "approved", "rejected", "all"):
        status = "pending"
    found = proposals.list_proposals(store.ws, None if status == "all" else status)
    found.sort(key=lambda p: p.id, reverse=True)
    paged = _paged(request, found, PROPOSALS_PER_PAGE)
    cards = []
    for prop in paged.items:
        diff: list[views.DiffFile] = []
        problem: str | None = None
        cut = False
        if prop.status == "pending":
            try:
                diff, cut = views.clip(views.parse_unified(review.diff(store, prop.id)), 400)
            except CrustaceanError as e:
                problem = str(e)
        cards.append(
            {
                "p": prop,
                "diff": diff,
                "cut": cut,
                "problem": problem,
                "marks": views.foundation_marks(prop.changes),
            }
        )
    return _html(
        ctx,
        ws,
        "proposals.html",
        title="Proposals",
        cards=cards,
        paged=paged,
        status=status,
        write=ws.config.get("memory.write"),
        done=request.query_params.get("done"),
    )


def approve(ctx: UiContext, ws: Workspace, request: Request, form: FormData) -> Response:
    """`crustacean review approve ID`."""
    pid = request.path_params["pid"]
    result = review.approve(Store(ws), pid, review.local_user("in the review page"))
    if result.version:
        return _redirect(f"/versions/{result.version}?done=approved")
    return _redirect(f"/proposals?done=approved-{pid}")


def reject(ctx: UiContext, ws: Workspace, request: Request, form: FormData) -> Response:
    """`crustacean review reject ID --reason …`."""
    pid = request.path_params["pid"]
    review.reject(Store(ws), pid, str(form.get("reason") or ""))
    return _redirect(f"/proposals?done=rejected-{pid}")


# ---------------------------------------------------------------- runs


def runs(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean runs`, paged."""
    page = views.page_number(request.query_params.get("page"))
    stage = request.query_params.get("stage") or None
    found = list_runs(ws, page * RUNS_PER_PAGE + 1, stage)
    listed = views.page_of(found, page, RUNS_PER_PAGE)
    # the listing leaves tool calls out; this page shows their count and the refusals
    paged = views.Paged([get_run(ws, r.id) for r in listed.items], listed.page, listed.more)
    return _html(ctx, ws, "runs.html", title="Runs", paged=paged, stage=stage)


def run_page(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean runs show ID`: tokens, cost, tool calls, refusals and what it wrote."""
    rec = get_run(ws, request.path_params["rid"])
    refusals = [c for c in rec.tool_calls if c.is_error]
    return _html(ctx, ws, "run.html", title=f"Run {rec.id}", r=rec, refusals=refusals)


# ---------------------------------------------------------------- search


def search(ctx: UiContext, ws: Workspace, request: Request) -> Response:
    """`crustacean search`: the same index and ranking, hits linked to the lines."""
    query = request.query_params.get("q", "")
    prefix = request.query_params.get("prefix") or None
    archive = request.query_params.get("archive") == "1"
    hits, problem, skipped = [], None, []
    if query.strip():
        try:
            with open_state(ws) as db, SearchIndex(ws, db) as index:
                skipped = list(index.update().skipped)
                hits = index.search(
                    query, SEARCH_HITS, path_prefix=prefix, include_archive=archive, refresh=False
                )
        except CrustaceanError as e:
            problem = str(e)
    return _html(
        ctx,
        ws,
        "search.html",
        title="Search",
        query=query,
        prefix=prefix or "",
        archive=archive,
        hits=hits,
        problem=problem,
        skipped=skipped[:50],
    )


# ---------------------------------------------------------------- serving


def listen(port: int) -> socket.socket:
    """A socket on 127.0.0.1 only (port 0: a free one), bound before the URL is printed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if os.name != "nt":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        raise UsageError(
            f"cannot listen on 127.0.0.1:{port} ({e.strerror}); choose another port with "
            "--port N, or leave --port out for a free one."
        ) from None
    sock.listen(64)
    return sock


@dataclass
class Serving:
    """A bound server: its URL (with the token) and the uvicorn server to run."""

    url: str
    server: Any
    sock: socket.socket

    def run(self) -> None:
        """Serve in the foreground until Ctrl-C (uvicorn handles the signal)."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()


def prepare(
    root: Path, overrides: list[str], port: int, env: dict[str, str] | None = None
) -> Serving:
    """Bind, build the guarded app and return what to run; nothing is served yet."""
    sock = listen(port)
    guard = Guard.new(sock.getsockname()[1])
    app = build_app(UiContext(root, overrides, guard, env))
    # access_log off: the first request's URL carries the token
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return Serving(guard.url(), uvicorn.Server(config), sock)
