"""Streamable HTTP transport at `/mcp`: loopback by default, a token for anything else.

The guard runs before the SDK app: a Host header outside the allowed names gets 421
(DNS-rebinding defence), a missing or wrong `Authorization: Bearer` gets 401 when a token
is set, and CORS headers are sent only for origins the user listed.

Limits (`http.*` settings) keep slow or oversized requests from holding the server: a
request's head must arrive within `http.header_timeout` (408) and fit `http.max_header_bytes`
(431); its body must arrive within `http.body_timeout` (408) and fit `http.max_body_bytes`
(413, before a declared body is read at all); past `http.max_connections` open connections
a request gets 503. Each refusal closes the connection, so nothing more of it is read.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import h11
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse, Response
from uvicorn.protocols.http.h11_impl import H11Protocol

from nmem.errors import ConfigError
from nmem.mcp.listening import Limits, is_loopback, listen
from nmem.mcp.server import NmemServer

__all__ = ["Guard", "Limits", "build_app", "is_loopback", "listen", "serve_http"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"
CLOSE = {"connection": "close"}


def _hostname(header: str) -> str:
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """Host check, bearer token and opt-in CORS in front of the MCP app."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: set[str] | None, token: str | None,
                 cors_origins: tuple[str, ...] = (), limits: Limits | None = None) -> None:
        """`allowed_hosts=None` turns the Host check off (a token-guarded wildcard bind)."""
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.token = token
        self.cors_origins = cors_origins
        self.limits = limits or Limits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        cors = {"access-control-allow-origin": origin, "vary": "Origin",
                "access-control-allow-headers": "authorization, content-type, mcp-session-id, mcp-protocol-version",
                "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
                "access-control-expose-headers": "mcp-session-id"} if origin in self.cors_origins else {}
        if self.allowed_hosts is not None and _hostname(headers.get("host", "")) not in self.allowed_hosts:
            await JSONResponse({"error": "invalid Host header"}, status_code=421)(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and cors:
            await Response(status_code=204, headers=cors)(scope, receive, send)
            return
        if self.token is not None:
            auth = headers.get("authorization", "")
            given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                await JSONResponse({"error": "unauthorized"}, status_code=401,
                                   headers={"WWW-Authenticate": 'Bearer realm="nmem"', **cors})(scope, receive, send)
                return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            await _refuse(413, "request body too large", cors)(scope, receive, send)
            return
        try:
            with anyio.fail_after(self.limits.body_timeout):
                receive = await _read_body(receive, self.limits.max_body_bytes)
        except _BodyTooLarge:
            await _refuse(413, "request body too large", cors)(scope, receive, send)
            return
        except TimeoutError:
            await _refuse(408, "request body not received in time", cors)(scope, receive, send)
            return
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode()) for k, v in cors.items())]
            await send(message)

        await self.app(scope, receive, send_with_cors)


class _BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> Receive:
    """Read the whole request body (at most `limit` bytes) and return a `receive` that
    replays it, then hands over to the connection's own (an event stream waits on it for
    the client to go)."""
    body = bytearray()
    pending: list[MutableMapping[str, Any]] = []
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

    async def replay() -> MutableMapping[str, Any]:
        return pending.pop(0) if pending else await receive()
    return replay


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """An error response that closes the connection, so the rest of the request is never read."""
    return JSONResponse({"error": message}, status_code=status, headers={**(headers or {}), **CLOSE})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head and 431 for a head too
    large: uvicorn alone waits forever for a head trickled a byte at a time (it times out
    only idle keep-alive connections), and h11 alone lets a large head through when it
    arrives in one read."""

    head_timeout: float = Limits.header_timeout
    max_head_bytes: int = Limits.max_header_bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._head_timer: asyncio.TimerHandle | None = None
        self._wait_for_head()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_size(data) > self.max_head_bytes:
            self._reject(431, "request header fields too large")
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._wait_for_head()  # a head begun on an idle keep-alive connection: the same deadline
        else:
            self._stop_waiting()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _head_size(self, data: bytes) -> int:
        """The size of the head being received so far (h11 checks only a head still incomplete
        after a read, so a large one arriving whole would pass)."""
        pending = self.conn.trailing_data[0] + data
        end = pending.find(b"\r\n\r\n")
        return len(pending) if end < 0 else end + 4

    def _wait_for_head(self) -> None:
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._reject(408, "request header not received in time")

    def _reject(self, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        head = (f"HTTP/1.1 {status} {H11_REASONS[status]}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()


H11_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large"}


def protocol_for(limits: Limits) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn instantiates per connection, bound to these limits."""
    return type("NmemHttpProtocol", (GuardedH11Protocol,),
                {"head_timeout": limits.header_timeout, "max_head_bytes": limits.max_header_bytes})


def build_app(app: NmemServer, *, host: str, port: int, token: str | None,
              cors_origins: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = (),
              limits: Limits | None = None) -> ASGIApp:
    """The guarded Starlette app serving MCP at /mcp; refuses non-loopback binds without a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(f"refusing to listen on {host} without a token: pass --token or set NMEM_MCP_TOKEN")
    hosts = {"127.0.0.1", "localhost", "[::1]", *allowed_hosts}
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts.add(f"[{host}]" if ":" in host else host)
    # Our guard checks Host (with or without a port); the SDK's own check would demand exact ports.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    limits = limits or Limits()
    inner = app.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=host,
                                           max_request_body_size=limits.max_body_bytes)
    # Bound beyond loopback with a token, every request must prove itself, which a rebound page
    # cannot; the machine's names are unknowable here, so the Host check would only refuse them.
    check_hosts = None if (token and not is_loopback(host) and not allowed_hosts) else hosts
    return Guard(inner, allowed_hosts=check_hosts, token=token or None, cors_origins=cors_origins, limits=limits)


async def serve_http(app: NmemServer, *, host: str, port: int, token: str | None,
                     cors_origins: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = (),
                     limits: Limits | None = None, sockets: list[socket.socket] | None = None) -> None:
    """Serve until stopped, on `sockets` when given (`listen`), else binding `host:port` now."""
    limits = limits or Limits()
    asgi = build_app(app, host=host, port=port, token=token, cors_origins=cors_origins,
                     allowed_hosts=allowed_hosts, limits=limits)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on",
                            http=protocol_for(limits), h11_max_incomplete_event_size=limits.max_header_bytes,
                            timeout_keep_alive=limits.keep_alive_timeout, limit_concurrency=limits.max_connections)
    sockets = sockets if sockets is not None else listen(host, port)
    async with app.running():
        await uvicorn.Server(config).serve(sockets=sockets)
