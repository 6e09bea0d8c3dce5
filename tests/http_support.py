"""The HTTP app in process: its lifespan run as uvicorn runs it, requests through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from nmem.adapters.http.app import NmemApp, create_app
from nmem.adapters.http.threads import WriteLane
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


async def queued_behind_one_write(lane: WriteLane, calls: list[Callable[[], Any]]) -> list[Any]:
    """Run `calls` as grouped writes that all wait behind one held write, so the lane takes them
    together once it is released; their answers (or exceptions), in order."""
    held, release = threading.Event(), threading.Event()
    first = asyncio.ensure_future(lane.run(lambda: (held.set(), release.wait(30)), grouped=True))
    while not held.is_set():
        await asyncio.sleep(0.01)
    waiting = [asyncio.ensure_future(lane.run(call, grouped=True)) for call in calls]
    while len(lane.pending) < len(calls):
        await asyncio.sleep(0.01)
    release.set()
    await first
    return await asyncio.gather(*waiting, return_exceptions=True)
