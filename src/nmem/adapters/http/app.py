"""The one ASGI app `nmem serve --transport http` runs: `create_app(settings)`.

    /api/v1/...      the REST API (`nmem.adapters.http.api`)
    /api/...         claude-mem's worker endpoints (`nmem.adapters.http.claude_mem`)
    /mcp             MCP over Streamable HTTP (the official SDK's app, `nmem.adapters.mcp.server`)
    /health          liveness, no token needed
    /openapi.json    the OpenAPI document (`nmem.adapters.http.openapi`)
    /login           sets the viewer's cookie from the token
    /stream/..., /ws live streams (`nmem.adapters.http.streams`)
    /, /viewer/...   the web viewer (`nmem.adapters.http.viewer`)

Everything sits behind `nmem.adapters.http.security.Guard`. Other routes (streams, the viewer) join
through `create_app(..., routes_extra=[...])` or the route list below; they reach the service
through `request.app.state.nmem` (a `Context`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from nmem import __version__
from nmem.adapters.http import observe, openapi, streams, viewer
from nmem.adapters.http import team as team_api
from nmem.adapters.http.openapi import endpoints
from nmem.adapters.http.routing import Context, DirectRoutes, error_response, json_response, routes
from nmem.adapters.http.security import MCP_PATH, Guard, Policy, login
from nmem.adapters.http.threads import StoreThreads, auto_threads
from nmem.adapters.mcp.server import NmemServer, current_project
from nmem.adapters.net import Limits
from nmem.config import Settings
from nmem.errors import InvalidArgument, NmemError, NotFound, StorageError
from nmem.service.api import Service
from nmem.team import accounts as team

log = logging.getLogger("nmem.http")


class NmemApp:
    """The guarded ASGI app, with the parts tests and other routes need to reach."""

    def __init__(self, starlette: Starlette, guard: Guard, context: Context, mcp: NmemServer,
                 metrics: observe.Metrics | None = None) -> None:
        self.starlette = starlette
        self.guard = guard
        self.context = context
        self.mcp = mcp
        self.policy = guard.policy
        self.metrics = metrics or observe.Metrics()
        # The guard's own reads (a team server looks its users up in the store) may raise an
        # NmemError before any response began: it answers with its status, so a dropped database
        # connection is a 503 with Retry-After, not a 500.
        self.front = observe.Observe(guard, self.metrics, lambda: starlette.routes,
                                     on_error=lambda exc: error_response(exc, context.service))

    @property
    def service(self) -> Service:
        return self.context.service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Request id and metrics around everything (`observe.Observe`), then the guard, then the app."""
        await self.front(scope, receive, send)


def create_app(settings: Settings, *, service: Service | None = None, host: str | None = None,
               token: str | None = None, project: str | None = None, tools: str | None = None,
               limits: Limits | None = None, routes_extra: Sequence[BaseRoute] = (), workers: int = 1) -> NmemApp:
    """The HTTP app for `settings`: bound to `host` (the `mcp.host` setting by default), with
    `token` (else `http.token`, else `mcp.token`); once the store has users (`nmem user add`),
    every request needs one user's token instead (nmem.team.accounts). Opens the service from the
    settings unless given one (then the caller closes it). A non-loopback host without a token is a ConfigError.
    `workers` > 1: one of several processes behind one port, so MCP at /mcp keeps no session
    between requests (the next one may reach another process)."""
    bind = host or str(settings["mcp.host"])
    secret = token or str(settings["http.token"]) or str(settings["mcp.token"]) or None
    limits = limits or Limits.from_settings(settings)
    policy_for = functools.partial(Policy.for_bind, bind, token=secret,
        allowed_hosts=(*settings["http.allowed_hosts"], *settings["mcp.allowed_hosts"]),
        cors_origins=(*settings["http.cors_origins"], *settings["mcp.cors_origins"]), limits=limits)
    owned = service is None
    svc = service if service is not None else Service.open(settings)
    try:
        policy = policy_for(users=team.active(svc.store))
    except Exception:
        if owned:
            svc.close()
        raise
    users = team_api.TeamAuth(svc.store, int(settings["http.token_cache_ms"]) / 1000, settings.home)
    hub = streams.StreamHub(settings, users=users)
    cwd = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    # SQLite reads compute in this process; PostgreSQL's wait for its server as much
    waits = not svc.store.url.startswith("sqlite:")
    threads = StoreThreads(svc.store, auto_threads(int(settings["http.threads"]), workers, waits), limits.max_queue,
                           limits.max_wait_ms, int(settings["http.write_batch"]), svc.forget_uncommitted)
    context = Context(svc, project or current_project(svc), cwd, threads)
    mcp = NmemServer(svc, project=context.project, tools=tools or str(settings["mcp.tools"]),
                     poll_interval=int(settings["mcp.poll_interval_ms"]) / 1000)
    metrics = observe.Metrics()
    mcp.on_tool = metrics.tool_call
    observe.install_log_ids()
    # The guard checks Host (with or without a port); the SDK's own check would demand exact ports.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    mcp_app = mcp.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security,
                                             host=bind, max_request_body_size=limits.max_body_bytes,
                                             stateless_http=workers > 1)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if owned:
                stack.callback(svc.close)
            stack.callback(users.close)     # after the threads stopped (callbacks run last first)
            stack.callback(threads.close)
            # accesses of memories counted on the writer thread, many requests' at once (threads.Touches)
            svc.touch_sink = threads.touches.add
            stack.callback(setattr, svc, "touch_sink", None)   # before threads.close stores the last
            await stack.enter_async_context(mcp_app.router.lifespan_context(mcp_app))
            await stack.enter_async_context(mcp.running())
            stack.callback(hub.close)
            await threads.warm(functools.partial(svc.search, "nmem", scope="all", limit=10))
            yield

    async def health(_: Request) -> Response:
        try:
            version = svc.store.schema_version()
        except NmemError as exc:
            error = exc if isinstance(exc, StorageError) else StorageError(exc.message)
            error = type(error)(f"database unavailable: {error.message}")
            return error_response(error, svc)
        return json_response({"status": "ok", "version": __version__, "schema_version": version})

    document = openapi.text()

    async def openapi_json(_: Request) -> Response:
        return Response(document, media_type="application/json")

    table: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/login", login(policy, users), methods=["GET"]),
        Route("/metrics", observe.metrics_endpoint(metrics, context), methods=["GET"]),
        *routes(endpoints(), context),
        *streams.routes(),
        *viewer.routes(),
        *routes_extra,
        Route(MCP_PATH, mcp_app),
    ]
    starlette = Starlette(routes=table, lifespan=lifespan, exception_handlers={
        HTTPException: _http_error, Exception: _unexpected})
    starlette.state.nmem = context
    starlette.state.stream_hub = hub
    exempt = frozenset((MCP_PATH, *streams.HEADER_EXEMPT, *(e.path for e in endpoints() if e.reads_only)))
    guard = Guard(DirectRoutes(starlette, _unexpected), policy, exempt, users, offload=threads.check)
    return NmemApp(starlette, guard, context, mcp, metrics)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such path, wrong method) in the API's error shape."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error: NmemError = NotFound(f"no such endpoint: {request.url.path} (see /openapi.json)")
    else:
        error = InvalidArgument(str(exc.detail))
    response = error_response(error)
    response.status_code = exc.status_code
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(NmemError("Internal error"))
