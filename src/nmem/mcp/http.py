"""Streamable HTTP transport at `/mcp`: loopback by default, a token for anything else.

The guard runs before the SDK app: a Host header outside the allowed names gets 421
(DNS-rebinding defence), a missing or wrong `Authorization: Bearer` gets 401 when a token
is set, and CORS headers are sent only for origins the user listed.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse, Response

from nmem.errors import ConfigError
from nmem.mcp.server import NmemServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
MCP_PATH = "/mcp"


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _hostname(header: str) -> str:
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """Host check, bearer token and opt-in CORS in front of the MCP app."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: set[str] | None, token: str | None,
                 cors_origins: tuple[str, ...] = ()) -> None:
        """`allowed_hosts=None` turns the Host check off (a token-guarded wildcard bind)."""
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.token = token
        self.cors_origins = cors_origins

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
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode()) for k, v in cors.items())]
            await send(message)

        await self.app(scope, receive, send_with_cors)


def build_app(app: NmemServer, *, host: str, port: int, token: str | None,
              cors_origins: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = ()) -> ASGIApp:
    """The guarded Starlette app serving MCP at /mcp; refuses non-loopback binds without a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(f"refusing to listen on {host} without a token: pass --token or set NMEM_MCP_TOKEN")
    hosts = {"127.0.0.1", "localhost", "[::1]", *allowed_hosts}
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts.add(f"[{host}]" if ":" in host else host)
    # Our guard checks Host (with or without a port); the SDK's own check would demand exact ports.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    inner = app.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=host)
    # Bound beyond loopback with a token, every request must prove itself, which a rebound page
    # cannot; the machine's names are unknowable here, so the Host check would only refuse them.
    check_hosts = None if (token and not is_loopback(host) and not allowed_hosts) else hosts
    return Guard(inner, allowed_hosts=check_hosts, token=token or None, cors_origins=cors_origins)


async def serve_http(app: NmemServer, *, host: str, port: int, token: str | None,
                     cors_origins: tuple[str, ...] = (), allowed_hosts: tuple[str, ...] = ()) -> None:
    asgi = build_app(app, host=host, port=port, token=token, cors_origins=cors_origins,
                     allowed_hosts=allowed_hosts)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    async with app.running():
        await uvicorn.Server(config).serve()
