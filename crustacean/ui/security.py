"""What keeps the local UI local: a Host check, a per-start token, and CSRF on every change.

A page on 127.0.0.1 is reachable by every other page the user's browser opens, so listening on
loopback alone is not enough:
- DNS rebinding points an attacker's name at 127.0.0.1; the Host header then names the attacker's
  host, so any Host other than `127.0.0.1:PORT` or `localhost:PORT` is refused.
- Every request needs the random token printed in the URL (first visit) or the cookie that visit
  set, so another local user or a page guessing the port sees nothing.
- Every change is a POST that carries a CSRF token derived from the session token, from our own
  origin; the cookie is SameSite=Strict on top.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, RedirectResponse, Response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = ("GET", "HEAD")
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make form POSTs say Origin: null
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True)
class Guard:
    """The secrets and names one server start accepts."""

    token: str
    port: int
    hosts: frozenset[str]

    @classmethod
    def new(cls, port: int, token: str | None = None) -> Guard:
        hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})
        return cls(token or secrets.token_urlsafe(32), port, hosts)

    @property
    def cookie(self) -> str:
        """Cookies ignore ports, so two servers on one machine need different names."""
        return f"crustacean_ui_{self.port}"

    @property
    def csrf(self) -> str:
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?{urlencode({'token': self.token})}"

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())

    def origin_ok(self, origin: str | None, fetch_site: str | None) -> bool:
        """A change must come from our own pages (browsers send Origin on every POST)."""
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return False
        return origin is None or origin in {f"http://{h}" for h in self.hosts}


class GuardMiddleware:
    """Refuses a wrong Host, a missing token and a foreign POST before any route runs."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn, g = HTTPConnection(scope), self.guard
        query, send = conn.query_params, _secured(send)
        if not g.host_ok(conn.headers.get("host")):
            refusal = "Refused: this address is not the crustacean ui's own host."
            response: Response = PlainTextResponse(refusal, 421)
        elif "token" in query:
            response = self._enter(scope, query.getlist("token")[0], query.multi_items())
        elif not g.token_ok(conn.cookies.get(g.cookie)):
            refusal = "Refused: open the URL that `crustacean ui` printed (it holds the token)."
            response = PlainTextResponse(refusal, 403)
        elif scope["method"] not in SAFE_METHODS and not g.origin_ok(
            conn.headers.get("origin"), conn.headers.get("sec-fetch-site")
        ):
            refusal = "Refused: changes are accepted only from the ui's own pages."
            response = PlainTextResponse(refusal, 403)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)

    def _enter(self, scope: Scope, given: str, query: list[tuple[str, str]]) -> Response:
        """A valid token becomes the cookie, and the token leaves the address bar and history."""
        if scope["method"] not in SAFE_METHODS or not self.guard.token_ok(given):
            refusal = "Refused: that token is not this server's; use the URL it printed."
            return PlainTextResponse(refusal, 403)
        rest = [(k, v) for k, v in query if k != "token"]
        location = scope.get("path", "/") + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self.guard.cookie}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
        return RedirectResponse(location, 303, headers={"set-cookie": cookie})  # %-quoted


def _secured(send: Send) -> Send:
    """Every response, a route's or a refusal, carries the strict headers."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *HEADERS]
        await send(message)

    return wrapped
