"""Hostile bodies, a loopback bind beyond 127.0.0.1, WebSockets past the connection cap and a
PostgreSQL server that drops the connection: clear HTTP answers, never a 500 or an unbounded
server. In process through httpx's ASGI transport, and a real `nmem serve` where uvicorn's
own connection handling is under test."""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from http_support import CSRF, error_of, http_client
from mcp_support import http_server
from nmem.adapters.http import openapi
from nmem.config import load_settings
from nmem.errors import StoreDisconnected
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
DEEP = "[" * 100_000 + "]" * 100_000


def body_routes() -> list[tuple[str, str]]:
    return [(e.method, e.openapi_path.replace("{", "").replace("}", ""))
            for e in openapi.endpoints() if e.body is not None or e.body_schema is not None]


def test_there_are_body_routes_to_attack() -> None:
    assert len(body_routes()) >= 4


@pytest.mark.parametrize("body", ['{"content": ' + DEEP + "}", DEEP, '{"a": ' * 50_000 + "1" + "}" * 50_000])
async def test_a_deeply_nested_body_is_400_on_every_body_route(service: Service, body: str) -> None:
    async with http_client(service) as client:
        for method, path in body_routes():
            response = await client.request(method, path, content=body,
                                             headers={**CSRF, "Content-Type": "application/json"})
            assert response.status_code == 400, (method, path, response.text)
            assert error_of(response)["type"] == "invalid_argument"


async def test_a_server_bound_to_another_loopback_address_accepts_it_as_host(service: Service) -> None:
    async with http_client(service, host="127.0.0.2", base_url="http://127.0.0.2:37777") as client:
        assert (await client.get("/health")).status_code == 200
        for host in ("127.0.0.2", "localhost:37777", "127.0.0.1"):
            assert (await client.get("/health", headers={"Host": host})).status_code == 200, host
        assert (await client.get("/health", headers={"Host": "127.0.0.3"})).status_code == 421


def test_websockets_count_toward_max_connections(tmp_path: Path) -> None:
    cap = 3
    with http_server(tmp_path / "home", env={"NMEM_HTTP_MAX_CONNECTIONS": str(cap)}) as server:
        url = f"ws://127.0.0.1:{server.port}/ws"
        deadline = time.monotonic() + 30
        while httpx2.get(f"http://127.0.0.1:{server.port}/health", timeout=60).status_code != 200:
            assert time.monotonic() < deadline  # the port listens before the app has started
            time.sleep(0.2)
        opened, statuses = 0, []
        with ExitStack() as stack:
            for _ in range(cap + 3):
                try:
                    stack.enter_context(connect(url, open_timeout=30))
                    opened += 1
                except InvalidStatus as exc:
                    statuses.append(exc.response.status_code)
            assert 0 < opened <= cap
            assert statuses and set(statuses) == {503}
        deadline = time.monotonic() + 10
        while True:  # the closed ones free their places
            try:
                with connect(url, open_timeout=30):
                    break
            except InvalidStatus:
                assert time.monotonic() < deadline
                time.sleep(0.2)


@pytest.fixture
def pg_app_name(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """NMEM_STORE_URL on a fresh schema, its connections tagged with an application name of their own."""
    name = f"nmem-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("NMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NMEM_STORE_URL", f"{pg_url}&application_name={quote(name)}")
    return name


def end_backends(pg_url: str, app_name: str) -> int:
    """pg_terminate_backend on the store's own connections (never a cluster restart others share)."""
    import psycopg

    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as admin:
        row = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE application_name = %s", (app_name,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.postgres
async def test_requests_after_postgres_dropped_the_connections_are_served(pg_url: str, pg_app_name: str) -> None:
    service = Service.open(load_settings())
    try:
        async with http_client(service, headers=CSRF) as client:
            written = []
            for i in range(6):
                assert end_backends(pg_url, pg_app_name) >= 0
                response = await client.post("/api/v1/memories", json={"content": f"note {i}", "domain": "user"})
                assert response.status_code in (201, 503), response.text
                if response.status_code == 503:
                    assert response.headers["retry-after"] == str(StoreDisconnected.retry_after)
                else:
                    written.append(f"note {i}")
                assert (await client.get("/api/v1/memories", params={"query": "note"})).status_code in (200, 503)
        assert written and {m.content for m in service.store.iter_memories("user", None)} >= set(written)
    finally:
        service.close()


@pytest.mark.postgres
def test_a_write_whose_connection_is_dropped_is_store_disconnected(pg_url: str, pg_app_name: str) -> None:
    service = Service.open(load_settings())
    try:
        with pytest.raises(StoreDisconnected) as raised, service.store.transaction():
            service.remember("in flight", domain="user")
            assert end_backends(pg_url, pg_app_name) >= 1
            service.remember("after the drop", domain="user")
        assert raised.value.http_status == 503 and raised.value.retry_after
        assert [m.content for m in service.store.iter_memories("user", None)] == []
        service.remember("once it is back", domain="user")
        assert [m.content for m in service.store.iter_memories("user", None)] == ["once it is back"]
    finally:
        service.close()


async def test_a_retryable_error_carries_retry_after(service: Service) -> None:
    from nmem.adapters.http.routing import error_response

    response = error_response(StoreDisconnected("gone"))
    assert response.status_code == 503 and response.headers["retry-after"] == "2"
    assert httpx2.codes.SERVICE_UNAVAILABLE == 503
