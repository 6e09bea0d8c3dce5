"""The guard in front of every HTTP request: Host check, token, CORS, CSRF, body limits.

In order, for each request (and WebSocket handshake):

1. **Host** outside the allowed names: 421 (a DNS-rebinding page sends its own name).
2. A CORS **preflight** from a configured origin: 204 with the CORS headers; no origin is
   configured by default, so no CORS header is ever sent.
3. **Token** (when set; always beyond loopback): `Authorization: Bearer <token>` or the
   cookie `/login?token=` sets, else 401. `/health` and `/login` need none. On a team server
   (users exist, nmem.team.accounts) it is one user's token as a bearer, looked up in the store (a
   live token's answer is kept for `http.token_cache_ms`, void at once when a token is revoked
   through any worker or by `nmem token revoke` on the server's home:
   `nmem.adapters.http.team.TeamAuth`); the request then acts for that user
   (`nmem.team.access.acting_as`).
4. **CSRF**, for every method but GET/HEAD/OPTIONS: an `Origin` header must be this server's
   own origin or a configured one (403 otherwise); and outside `/mcp` the request must carry
   a header no cross-site form can send: `Authorization` or `X-Nmem-CSRF` (403 otherwise).
   `/mcp` needs no such header because the SDK accepts only `application/json` bodies, which
   a cross-site page cannot send without a preflight this guard refuses.
5. **Body**: larger than `http.max_body_bytes` is 413 (a declared length before any of it
   is read), slower than `http.body_timeout` 408.

Every response gets `nosniff`, `DENY` framing and `no-referrer`. Refusals are JSON in the
API's error shape and close the connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from nmem.adapters.net import Limits, is_loopback
from nmem.errors import ConfigError
from nmem.team.access import SCOPE_KEY, Viewer, acting_as

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Offload = Callable[[Callable[[], bool]], Awaitable[bool]]

COOKIE = "nmem_session"
CSRF_HEADER = "x-nmem-csrf"
OPEN_PATHS = frozenset(("/health", "/login"))   # reachable without the token (still Host-checked)
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
MCP_PATH = "/mcp"
LOOPBACK_HOSTS = frozenset(("127.0.0.1", "localhost", "[::1]"))
RESPONSE_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer"))
CLOSE = {"connection": "close"}


class Users(Protocol):
    """A team server's users (nmem.adapters.http.team.TeamAuth)."""

    def active(self) -> bool: ...
    def cached(self, headers: dict[str, str]) -> tuple[Viewer | None, bool]: ...
    def viewer(self, headers: dict[str, str]) -> Viewer | None: ...
    def login(self, token: str) -> str | None: ...


@dataclass(frozen=True)
class Policy:
    """Who may talk to the server: what `Guard` enforces."""

    token: str | None = None
    allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS   # None: no Host check
    cors_origins: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def for_bind(cls, host: str, *, token: str | None, allowed_hosts: tuple[str, ...] = (),
                 cors_origins: tuple[str, ...] = (), limits: Limits | None = None, users: bool = False) -> Policy:
        """The policy for a server bound to `host`; refuses a non-loopback bind without a token
        (the users' tokens of a team server count)."""
        if not is_loopback(host) and not token and not users:
            raise ConfigError(f"refusing to listen on {host} without a token: pass --token or set NMEM_HTTP_TOKEN")
        hosts = {*LOOPBACK_HOSTS, *(h.strip().lower() for h in allowed_hosts if h.strip())}
        if host not in ("0.0.0.0", "::", ""):  # the bound address is the server's own name (127.0.0.2 too)
            bare = host.strip("[]").lower()
            hosts.add(f"[{bare}]" if ":" in bare else bare)
        # Bound beyond loopback with a token, every request must prove itself, which a rebound page
        # cannot; the machine's names are unknowable here, so the Host check would only refuse them.
        check = None if ((token or users) and not is_loopback(host) and not allowed_hosts) else frozenset(hosts)
        return cls(token or None, check, tuple(cors_origins), limits or Limits())

    def cookie_value(self) -> str:
        """What the login cookie holds: derived from the token, so the cookie never reveals it."""
        assert self.token is not None
        return hmac.new(self.token.encode(), b"nmem viewer session", hashlib.sha256).hexdigest()

    def authorized(self, headers: dict[str, str]) -> bool:
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return hmac.compare_digest(auth[7:].strip().encode(), self.token.encode())
        cookie = _cookie(headers.get("cookie", ""), COOKIE)
        return cookie is not None and hmac.compare_digest(cookie.encode(), self.cookie_value().encode())


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _hostname(header: str) -> str:
    """The name of a Host header without its port (an IPv6 address keeps its brackets)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def same_origin(origin: str, host: str) -> bool:
    """Whether a browser's `Origin` names the server the request was sent to (its Host)."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and parts.netloc.lower() == host.strip().lower()


def error_body(kind: str, message: str, code: int = -32000) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "code": code}}


def refusal(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Response:
    """An error response that closes the connection, so the rest of the request is never read."""
    return JSONResponse(error_body(kind, message), status_code=status, headers={**(headers or {}), **CLOSE})


class Guard:
    """The ASGI middleware enforcing a `Policy` before the app sees a request."""

    def __init__(self, app: ASGIApp, policy: Policy, header_exempt: frozenset[str] = frozenset((MCP_PATH,)),
                 users: Users | None = None, offload: Offload | None = None) -> None:
        """`header_exempt`: paths whose unsafe requests need no CSRF header: `/mcp` and POSTs
        that change nothing (claude-mem's batch read); the Origin check still applies.
        `users`: a team server's user check, which replaces the policy's token once users exist;
        `offload` runs it (it reads the store) off the event loop."""
        self.app = app
        self.policy = policy
        self.header_exempt = header_exempt
        self.users = users
        self.offload = offload
        self.users_seen = False   # whether the last check found users (a hint: see _authorized)
        self._renewals: set[asyncio.Future[bool]] = set()   # background reads renewing kept token checks

    async def _check(self, scope: Scope, headers: dict[str, str]) -> bool:
        if self.users is None or self.offload is None:
            return self._authorized(scope, headers)
        viewer, renew = self.users.cached(headers) if self.users_seen else (None, False)
        if viewer is not None:   # a live token checked moments ago (TeamAuth): no read, no thread
            if renew:
                self._renew(headers)
            scope[SCOPE_KEY] = viewer
            return True
        return await self.offload(lambda: self._authorized(scope, headers))

    def _renew(self, headers: dict[str, str]) -> None:
        """Read a kept token check again in the background (TeamAuth.cached asked for it)."""
        users, offload = self.users, self.offload
        assert users is not None and offload is not None
        task = asyncio.ensure_future(offload(lambda: users.viewer(headers) is not None))
        self._renewals.add(task)
        task.add_done_callback(self._renewed)

    def _renewed(self, task: asyncio.Future[bool]) -> None:
        self._renewals.discard(task)
        if not task.cancelled():
            task.exception()   # a busy or failed read: the next request past half the time asks again

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        """The token check; on a team server the viewer found is kept in the scope.

        A live user token proves that users exist, so once they were seen the usual request costs
        one read (its token's user); whether any user exists is asked again only when no user was
        found (then the answer decides: 401, or the single-user token), and on every request while
        there were none: users added meanwhile are seen at once, and so are all users gone."""
        users = self.users
        if users is None:
            return self.policy.authorized(headers)
        asked = self.users_seen
        viewer = users.viewer(headers) if asked else None
        if viewer is None:
            self.users_seen = users.active()
            if not self.users_seen:
                return self.policy.authorized(headers)
            if not asked:
                viewer = users.viewer(headers)
        scope[SCOPE_KEY] = viewer
        return viewer is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        policy = self.policy
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        origin = headers.get("origin")
        cors = _cors_headers(origin) if origin is not None and origin in policy.cors_origins else {}
        host = headers.get("host", "")
        refused: Response | None = None
        if policy.allowed_hosts is not None and _hostname(host) not in policy.allowed_hosts:
            refused = refusal(421, "misdirected", "invalid Host header")
        elif method == "OPTIONS" and cors:
            await Response(status_code=204, headers=cors)(scope, receive, send)
            return
        elif path not in OPEN_PATHS and not await self._check(scope, headers):
            refused = refusal(401, "unauthorized", "a valid token is required (Authorization: Bearer <token>)",
                              {"WWW-Authenticate": 'Bearer realm="nmem"', **cors})
        elif scope["type"] == "websocket" and origin is not None and not (same_origin(origin, host) or cors):
            refused = refusal(403, "forbidden_origin", f"WebSocket from another origin: {origin}")
        elif method not in SAFE_METHODS:
            refused = self._csrf(path, headers, origin, host, cors)
        if refused is not None:
            if scope["type"] == "websocket":
                await receive()  # the connect message; closing before accept answers the handshake with 403
                await send({"type": "websocket.close", "code": 1008, "reason": "refused"})
            else:
                await refused(scope, receive, send)
            return
        if scope["type"] == "http" and not _declares_no_body(headers):
            replay = await self._body(scope, receive, send, headers, cors)
            if replay is None:
                return
            receive = replay
        extra = [*RESPONSE_HEADERS, *((k.encode(), v.encode()) for k, v in cors.items())] if cors \
            else RESPONSE_HEADERS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        with acting_as(scope.get(SCOPE_KEY)):
            await self.app(scope, receive, send_with_headers)

    def _csrf(self, path: str, headers: dict[str, str], origin: str | None, host: str,
              cors: dict[str, str]) -> Response | None:
        if origin is not None and not (same_origin(origin, host) or cors):
            return refusal(403, "csrf", f"cross-site request refused (Origin {origin})")
        if path not in self.header_exempt and not (CSRF_HEADER in headers or "authorization" in headers):
            return refusal(403, "csrf", "a request that changes data needs the header X-Nmem-CSRF: 1 "
                                        "(or Authorization); browsers never send it cross-site", cors)
        return None

    async def _body(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str],
                    cors: dict[str, str]) -> Receive | None:
        """A `receive` replaying the whole body, read within the limits; None once refused."""
        limits = self.policy.limits
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            await refusal(413, "too_large", "request body too large", cors)(scope, receive, send)
            return None
        try:
            with anyio.fail_after(limits.body_timeout):
                return await _read_body(receive, limits.max_body_bytes)
        except _BodyTooLarge:
            await refusal(413, "too_large", "request body too large", cors)(scope, receive, send)
        except TimeoutError:
            await refusal(408, "timeout", "request body not received in time", cors)(scope, receive, send)
        return None


def _declares_no_body(headers: dict[str, str]) -> bool:
    """Whether the request's head says it has no body: no Transfer-Encoding and no Content-Length
    (or 0). The HTTP parser then reads no body at all (a request is never read to the
    connection's close), so there is nothing to time or to count: no timeout scope, no replay.
    Bytes sent after such a head are the next request's head, under the head limits
    (`nmem.adapters.http.protocol`)."""
    return "transfer-encoding" not in headers and headers.get("content-length", "0") == "0"


def _cors_headers(origin: str) -> dict[str, str]:
    return {"access-control-allow-origin": origin, "vary": "Origin", "access-control-allow-credentials": "true",
            "access-control-allow-headers": "authorization, content-type, mcp-session-id, mcp-protocol-version, "
                                            "last-event-id, " + CSRF_HEADER,
            "access-control-allow-methods": "GET, POST, PATCH, PUT, DELETE, OPTIONS",
            "access-control-expose-headers": "mcp-session-id"}


class _BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> Receive:
    """Read the whole request body (at most `limit` bytes) and return a `receive` that
    replays it, then hands over to the connection's own (an event stream waits on it for
    the client to go)."""
    body = bytearray()
    pending: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            pending.append(message)  # the client went: let the app hear it
            break
        body += message.get("body", b"")
        if len(body) > limit:
            raise _BodyTooLarge
        if not message.get("more_body", False):
            break
    pending.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()
    return replay


def login(policy: Policy, users: Users | None = None) -> Callable[[Request], Awaitable[Response]]:
    """`GET /login?token=…[&next=/path]`: sets the session cookie the viewer's requests carry
    (HttpOnly, SameSite=Strict, holding a digest of the token, not the token) and redirects.
    On a team server the token is one user's, and the cookie signs that user in while the
    token lives (`nmem.adapters.http.team.TeamAuth`)."""

    async def endpoint(request: Request) -> Response:
        target = request.query_params.get("next") or "/"
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            target = "/"  # never an open redirect
        given = request.query_params.get("token", "")
        if users is not None and users.active():
            cookie = users.login(given) if given else None
        elif policy.token is None:
            return RedirectResponse(target, status_code=303)
        else:
            cookie = policy.cookie_value() if hmac.compare_digest(given.encode(), policy.token.encode()) else None
        if cookie is None:
            return JSONResponse(error_body("unauthorized", "wrong or missing token"), status_code=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
        return response

    return endpoint
