"""The HTTP app in process: its lifespan run as uvicorn runs it, requests through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from nmem.adapters.http.app import NmemApp, create_app
from nmem.service.api import Service

BASE = "http://127.0.0.1:37777"
CSRF = {"X-Nmem-CSRF": "1"}


@asynccontextmanager
async def running(app: NmemApp, base_url: str = BASE, **headers: str) -> AsyncIterator[httpx2.AsyncClient]:
    async with app.starlette.router.lifespan_context(app.starlette), \
            httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base_url,
                               headers=headers) as client:
        yield client


@asynccontextmanager
async def http_client(service: Service, *, base_url: str = BASE, headers: dict[str, str] | None = None,
                      **options: Any) -> AsyncIterator[httpx2.AsyncClient]:
    """A client of `create_app(service.settings, service=service, **options)`."""
    app = create_app(service.settings, service=service, project=options.pop("project", "demo"), **options)
    async with running(app, base_url, **(headers or {})) as client:
        yield client


def error_of(response: httpx2.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"type", "message", "code"}, body
    return dict(body["error"])
