"""The shortcut behind the guard (`routing.DirectRoutes`): a request for a declared endpoint of a
fixed path goes straight to it, answered exactly as Starlette's routing answers it; everything
else, and any path an earlier route takes, still goes through Starlette."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from http_support import running
from mcp_support import Seeded
from nmem.adapters.http import api
from nmem.adapters.http.app import create_app
from nmem.adapters.http.routing import Context, DirectRoutes, routes
from nmem.service.api import Service

pytestmark = pytest.mark.anyio

Asgi = Any


async def _answer(app: Asgi, method: str, path: str, query: dict[str, Any] | None = None,
                  body: bytes = b"", headers: tuple[tuple[bytes, bytes], ...] = ()) -> list[dict[str, Any]]:
    """The ASGI messages `app` sends for one request."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": urlencode(query or {}, doseq=True).encode(), "server": ("127.0.0.1", 37777),
             "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1:37777"), (b"content-length", str(len(body)).encode()), *headers]}
    sent: list[dict[str, Any]] = []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    await app(scope, receive, send)
    return sent


JSON = ((b"content-type", b"application/json"),)


@pytest.mark.parametrize(("method", "path", "query", "body", "headers"), [
    ("GET", "/api/v1/search", {"scope": "observations", "query": "login"}, b"", ()),
    ("GET", "/api/v1/search", {"query": "login", "format": "full", "project": "*"}, b"", ()),
    ("GET", "/api/v1/search", {"query": "login", "limit": 0}, b"", ()),            # out of range: 422
    ("GET", "/api/v1/search", {"query": "login", "colour": "red"}, b"", ()),       # unknown parameter: 400
    ("GET", "/api/v1/observations", {"ids": "1,2,99999"}, b"", ()),
    ("GET", "/api/v1/projects", None, b"", ()),
    ("GET", "/api/v1/records", {"refs": "nmem:nothing"}, b"", ()),
    ("POST", "/api/v1/memories", None, b'{"content": "not json', JSON),           # invalid body: 400
    ("POST", "/api/v1/memories", None, b'{"content": "x"}', ()),                   # not JSON's type: 400
])
async def test_a_fixed_path_endpoint_answers_as_through_starlette(
        service: Service, seeded: Seeded, method: str, path: str, query: dict[str, Any] | None, body: bytes,
        headers: tuple[tuple[bytes, bytes], ...]) -> None:
    app = create_app(service.settings, service=service, project="demo")
    direct = app.guard.app
    assert isinstance(direct, DirectRoutes) and (method, path) in direct.table
    async with running(app):
        shortcut = await _answer(direct, method, path, query, body, headers)
        starlette = await _answer(app.starlette, method, path, query, body, headers)
    assert shortcut == starlette
    assert shortcut[0]["type"] == "http.response.start" and len(shortcut) == 2


async def test_only_fixed_paths_starlette_would_send_there_are_taken(service: Service) -> None:
    context = Context(service)
    taken: list[str] = []

    async def earlier(request: Request) -> Response:
        taken.append(request.url.path)
        return PlainTextResponse("earlier route")

    table = [Route("/api/v1/status", earlier, methods=["GET"]), *routes(api.ENDPOINTS, context)]
    direct = DirectRoutes(Starlette(routes=table), lambda request, exc: None)  # type: ignore[arg-type,return-value]
    assert ("GET", "/api/v1/search") in direct.table and ("POST", "/api/v1/memories") in direct.table
    assert ("GET", "/api/v1/status") not in direct.table             # an earlier route takes it
    assert not any("{" in path for _, path in direct.table)            # `/api/v1/memories/{ref}` goes through Starlette
    assert ("HEAD", "/api/v1/search") not in direct.table
    answer = await _answer(direct, "GET", "/api/v1/status")
    assert answer[1]["body"] == b"earlier route" and taken == ["/api/v1/status"]


async def test_the_metrics_label_a_direct_request_by_its_route(service: Service, seeded: Seeded) -> None:
    app = create_app(service.settings, service=service, project="demo")
    async with running(app) as client:
        assert (await client.get("/api/v1/search", params={"query": "login"})).status_code == 200
        assert (await client.get("/api/v1/memories/nmem:nothing")).status_code == 404
        text = (await client.get("/metrics")).text
    assert 'nmem_http_requests_total{route="/api/v1/search",method="GET",status="200"} 1' in text
    assert 'nmem_http_requests_total{route="/api/v1/memories/{ref}",method="GET",status="404"} 1' in text
