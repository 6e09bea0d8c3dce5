"""The HTTP guard: loopback by default, a token beyond it (bearer or the viewer's cookie), the
Host check, no CORS unless configured, CSRF protection on every mutation, no secret in any
settings or status response, and no request path ever opened as a file."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from http_support import BASE, CSRF, error_of, running
from mcp_support import PROJECT, Seeded, seed
from nmem.adapters.http.api import ENDPOINTS
from nmem.adapters.http.app import NmemApp, create_app
from nmem.adapters.http.security import COOKIE, Guard, Policy
from nmem.config import Settings, load_settings
from nmem.errors import ConfigError
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
TOKEN = "tok-9f8e7d6c5b4a-http-tests"
ORIGIN = "http://localhost:5173"
SECRET_PASSWORD = "hunter2-sync-password"


def settings_with(nmem_home: Path, **env: str) -> Settings:
    return load_settings({**os.environ, "NMEM_HOME": str(nmem_home), **env})


@pytest.fixture
def guarded(nmem_home: Path) -> Iterator[tuple[NmemApp, Seeded]]:
    """A token, one CORS origin, one extra Host name, and a sync remote with a password in it."""
    settings = settings_with(nmem_home, NMEM_HTTP_TOKEN=TOKEN, NMEM_HTTP_CORS_ORIGINS=ORIGIN,
                             NMEM_HTTP_ALLOWED_HOSTS="nmem.test", NMEM_MCP_TOKEN="mcp-" + TOKEN,
                             NMEM_SYNC_REMOTE=f"https://me:{SECRET_PASSWORD}@git.example/memory.git")
    service = Service.open(settings)
    try:
        seeded = seed(service)
        yield create_app(settings, service=service, project=PROJECT), seeded
    finally:
        service.close()


@pytest.fixture
async def anonymous(guarded: tuple[NmemApp, Seeded]) -> AsyncIterator[httpx2.AsyncClient]:
    async with running(guarded[0]) as client:
        yield client


@pytest.fixture
async def open_app(service: Service, seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    async with running(create_app(service.settings, service=service, project=PROJECT)) as client:
        yield client


BEARER = {"Authorization": f"Bearer {TOKEN}"}


# -- binding -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_a_non_loopback_bind_without_a_token_is_refused(service: Service, host: str) -> None:
    with pytest.raises(ConfigError, match=f"refusing to listen on {host} without a token"):
        create_app(service.settings, service=service, host=host)


def test_loopback_needs_no_token_and_checks_hosts() -> None:
    policy = Policy.for_bind("127.0.0.1", token=None)
    assert policy.token is None and policy.allowed_hosts is not None and "localhost" in policy.allowed_hosts


async def test_without_a_token_loopback_requests_are_served(open_app: httpx2.AsyncClient) -> None:
    assert (await open_app.get("/api/v1/status")).status_code == 200


# -- the token ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "])
@pytest.mark.parametrize("path", ["/api/v1/status", "/openapi.json", "/api/search?query=x", "/mcp"])
async def test_missing_or_wrong_token_is_401(anonymous: httpx2.AsyncClient, authorization: str | None,
                                             path: str) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = await anonymous.get(path, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert error_of(response)["type"] == "unauthorized"


async def test_the_bearer_token_is_accepted_and_mcp_token_does_not_widen_it(anonymous: httpx2.AsyncClient) -> None:
    assert (await anonymous.get("/api/v1/status", headers=BEARER)).status_code == 200
    # an explicit --token / http.token wins: mcp.token does not open the server alongside it
    other = await anonymous.get("/api/v1/status", headers={"Authorization": f"Bearer mcp-{TOKEN}"})
    assert other.status_code == 401


async def test_health_needs_no_token(anonymous: httpx2.AsyncClient) -> None:
    health = await anonymous.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"


async def test_login_sets_a_cookie_that_is_not_the_token(anonymous: httpx2.AsyncClient) -> None:
    refused = await anonymous.get("/login", params={"token": "wrong"})
    assert refused.status_code == 401 and "set-cookie" not in refused.headers
    login = await anonymous.get("/login", params={"token": TOKEN, "next": "/api/v1/status"})
    assert login.status_code == 303 and login.headers["location"] == "/api/v1/status"
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie
    value = cookie.split(";")[0].split("=", 1)[1]
    with_cookie = await anonymous.get("/api/v1/status", headers={"Cookie": f"{COOKIE}={value}"})
    assert with_cookie.status_code == 200
    forged = await anonymous.get("/api/v1/status", headers={"Cookie": f"{COOKIE}={TOKEN}"})
    assert forged.status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example", "/\\evil.example", "evil"])
async def test_login_never_redirects_off_the_server(anonymous: httpx2.AsyncClient, target: str) -> None:
    login = await anonymous.get("/login", params={"token": TOKEN, "next": target})
    assert login.status_code == 303 and login.headers["location"] == "/"


# -- Host and CORS ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:37777", "127.0.0.1.evil.example", "nmem.test.evil"])
async def test_a_foreign_host_header_is_421(anonymous: httpx2.AsyncClient, host: str) -> None:
    response = await anonymous.get("/health", headers={**BEARER, "Host": host})
    assert response.status_code == 421 and error_of(response)["type"] == "misdirected"


@pytest.mark.parametrize("host", ["127.0.0.1:37777", "localhost", "[::1]:8080", "nmem.test:37777", "NMEM.TEST"])
async def test_loopback_and_configured_host_names_pass(anonymous: httpx2.AsyncClient, host: str) -> None:
    assert (await anonymous.get("/api/v1/status", headers={**BEARER, "Host": host})).status_code == 200


async def test_no_cors_headers_by_default(open_app: httpx2.AsyncClient) -> None:
    response = await open_app.get("/api/v1/status", headers={"Origin": ORIGIN})
    assert not any(k.startswith("access-control-") for k in response.headers)
    preflight = await open_app.options("/api/v1/memories", headers={"Origin": ORIGIN,
                                                                   "Access-Control-Request-Method": "POST"})
    assert not any(k.startswith("access-control-") for k in preflight.headers)


async def test_cors_for_the_configured_origin_only(anonymous: httpx2.AsyncClient) -> None:
    preflight = await anonymous.options("/api/v1/memories", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-nmem-csrf"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "x-nmem-csrf" in preflight.headers["access-control-allow-headers"]
    get = await anonymous.get("/api/v1/status", headers={**BEARER, "Origin": ORIGIN})
    assert get.headers["access-control-allow-origin"] == ORIGIN
    stranger = await anonymous.get("/api/v1/status", headers={**BEARER, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in stranger.headers


async def test_every_response_refuses_sniffing_and_framing(open_app: httpx2.AsyncClient) -> None:
    for path in ("/api/v1/status", "/health", "/api/v1/nothing"):
        headers = (await open_app.get(path)).headers
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"


# -- CSRF ------------------------------------------------------------------------------------------------


def _mutation_url(path: str, seeded: Seeded) -> str:
    return path.replace("{ref:path}", seeded.memory_id)


MUTATIONS = [e for e in ENDPOINTS if e.method not in ("GET", "HEAD")]


def test_the_api_has_mutations_to_guard() -> None:
    assert {e.method for e in MUTATIONS} == {"POST", "PATCH", "DELETE", "PUT"}


@pytest.mark.parametrize("endpoint", MUTATIONS, ids=lambda e: f"{e.method} {e.path}")
async def test_every_mutation_without_the_csrf_header_is_refused_and_changes_nothing(
        open_app: httpx2.AsyncClient, service: Service, seeded: Seeded, endpoint: Any) -> None:
    before = service.get_memory(seeded.memory_id)
    count = service.status()["memories"]
    url = _mutation_url(endpoint.path, seeded)
    body = {"content": "planted by a cross-site form"} if endpoint.method == "POST" else {"tier": "cold"}
    for headers in ({}, {"Origin": "https://evil.example", **CSRF}, {"Origin": "null", **CSRF}):
        response = await open_app.request(endpoint.method, url, json=body, headers=headers)
        assert response.status_code == 403, (headers, response.text)
        assert error_of(response)["type"] == "csrf"
    assert service.get_memory(seeded.memory_id) == before
    assert service.status()["memories"] == count


async def test_a_cookie_session_still_needs_the_csrf_header(anonymous: httpx2.AsyncClient) -> None:
    login = await anonymous.get("/login", params={"token": TOKEN})
    cookie = {"Cookie": login.headers["set-cookie"].split(";")[0]}
    body = {"content": "from the viewer"}
    assert (await anonymous.post("/api/v1/memories", json=body, headers=cookie)).status_code == 403
    same_origin = {**cookie, **CSRF, "Origin": BASE}
    assert (await anonymous.post("/api/v1/memories", json=body, headers=same_origin)).status_code == 201


async def test_bearer_requests_and_configured_origins_pass_csrf(anonymous: httpx2.AsyncClient) -> None:
    body = {"content": "from a script"}
    assert (await anonymous.post("/api/v1/memories", json=body, headers=BEARER)).status_code == 201
    cross = {**BEARER, "Origin": ORIGIN}
    assert (await anonymous.post("/api/v1/memories", json=body, headers=cross)).status_code == 201


async def test_mcp_posts_from_a_foreign_origin_are_refused(open_app: httpx2.AsyncClient) -> None:
    response = await open_app.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers={"Origin": "https://evil.example",
                                            "Accept": "application/json, text/event-stream"})
    assert response.status_code == 403


# -- WebSocket handshakes (the streams' endpoint sits behind the same guard) --------------------------------


async def _handshake(policy: Policy, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "websocket.accept"})

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await Guard(app, policy)({"type": "websocket", "path": "/ws", "headers": headers}, receive, send)
    return sent


async def test_websocket_handshakes_need_the_token_and_this_origin() -> None:
    policy = Policy.for_bind("127.0.0.1", token=TOKEN)
    host = (b"host", b"127.0.0.1:37777")
    auth = (b"authorization", f"Bearer {TOKEN}".encode())
    assert (await _handshake(policy, [host]))[0]["type"] == "websocket.close"
    foreign = await _handshake(policy, [host, auth, (b"origin", b"https://evil.example")])
    assert foreign[0] == {"type": "websocket.close", "code": 1008, "reason": "refused"}
    assert (await _handshake(policy, [host, auth, (b"origin", b"http://127.0.0.1:37777")]))[0]["type"] \
        == "websocket.accept"


# -- secrets and files ---------------------------------------------------------------------------------------


async def test_no_secret_in_settings_or_status(anonymous: httpx2.AsyncClient) -> None:
    for path in ("/api/v1/settings", "/api/v1/status", "/health", "/openapi.json"):
        body = (await anonymous.get(path, headers=BEARER)).text
        assert TOKEN not in body and SECRET_PASSWORD not in body, path
    rows = {r["name"]: r for r in (await anonymous.get("/api/v1/settings", headers=BEARER)).json()["settings"]}
    assert rows["http.token"]["value"] == "***" and rows["mcp.token"]["value"] == "***"
    assert rows["sync.remote"]["value"] == "https://me:***@git.example/memory.git"


OPENED: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and OPENED and isinstance(args[0], str):
        OPENED.append(args[0])


sys.addaudithook(_audit)  # records only while a test has put a marker in OPENED


async def test_no_request_path_is_ever_opened_as_a_file(open_app: httpx2.AsyncClient, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the contents nobody may read over HTTP\n")
    name = str(secret)
    relative = os.path.relpath(name, os.getcwd())
    paths = [
        f"/api/v1/files/history?path={name}", f"/api/v1/files/history?path={relative}",
        f"/api/v1/search?files={name}", f"/api/v1/records/{name}", f"/api/v1/memories/..%2F..{name}",
        f"/..{name}", f"/static/..%2F..%2F..{name}", f"/api/search/by-file?files={name}",
        f"/api/v1/context?project={name}", f"/login?next={name}", f"/openapi.json/..{name}",
    ]
    OPENED.append("<marker>")
    try:
        for path in paths:
            response = await open_app.get(path)
            assert response.status_code < 500, (path, response.text)
            assert "nobody may read" not in response.text, path
    finally:
        opened, OPENED[:] = OPENED[1:], []
    assert not [p for p in opened if "secret.txt" in p]
