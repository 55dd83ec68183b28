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
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

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

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}?{urlencode({'token': self.token})}"

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


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(header: str) -> dict[str, str]:
    out = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            out[name] = value
    return out


class GuardMiddleware:
    """Refuses a wrong Host, a missing token and a foreign POST before any route runs."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        g = self.guard
        if not g.host_ok(headers.get("host")):
            await _plain(send, 421, "Refused: this address is not the crustacean ui's own host.")
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if given is not None:
            await self._enter(scope, send, given, [(k, v) for k, v in query if k != "token"])
            return
        if not g.token_ok(_cookies(headers.get("cookie", "")).get(g.cookie)):
            await _plain(
                send,
                403,
                "Refused: open the URL that `crustacean ui` printed (it holds the token).",
            )
            return
        if scope["method"] not in SAFE_METHODS and not g.origin_ok(
            headers.get("origin"), headers.get("sec-fetch-site")
        ):
            await _plain(send, 403, "Refused: changes are accepted only from the ui's own pages.")
            return
        await self.app(scope, receive, _secured(send))

    async def _enter(
        self, scope: Scope, send: Send, given: str, rest: list[tuple[str, str]]
    ) -> None:
        """A valid token becomes the cookie, and the token leaves the address bar and history."""
        if scope["method"] not in SAFE_METHODS or not self.guard.token_ok(given):
            await _plain(
                send, 403, "Refused: that token is not this server's; use the URL it printed."
            )
            return
        location = scope.get("path", "/") + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self.guard.cookie}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
        await _respond(
            send,
            303,
            b"",
            [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
        )


def _secured(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *HEADERS]
        await send(message)

    return wrapped


async def _plain(send: Send, status: int, text: str) -> None:
    await _respond(send, status, text.encode(), [(b"content-type", b"text/plain; charset=utf-8")])


async def _respond(
    send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode()), *HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": body})
