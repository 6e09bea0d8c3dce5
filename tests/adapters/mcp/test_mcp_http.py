"""`nmem serve --transport http`: a real subprocess on a loopback port, driven by the SDK's HTTP client.

Raw `http.client` requests check the guard's status codes and headers (421, 401, CORS), which
the SDK client only reports as a failed connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_support import (
    CWD,
    PROJECT,
    HttpServer,
    Inbox,
    Seeded,
    child_env,
    free_port,
    http_server,
    nmem_argv,
    record_process,
    seed,
    structured,
    tool_error,
)
from nmem.adapters.http.app import create_app
from nmem.adapters.mcp.tools import TOOLS
from nmem.config import load_settings
from nmem.service.api import Service

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOKEN = "s3cret-token-for-tests"
ORIGIN = "http://localhost:5173"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw-http-test", "version": "0"}}}


def seeded_home(path: Path) -> tuple[Path, Seeded]:
    home = path / "nmem-home"
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    try:
        return home, seed(service)
    finally:
        service.close()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Seeded]]:
    """Loopback, no token, no CORS: the default."""
    home, seeded = seeded_home(tmp_path_factory.mktemp("http-open"))
    with http_server(home, env={"NMEM_MCP_POLL_MS": "100", "CLAUDE_PROJECT_DIR": CWD}) as server:
        yield server, seeded


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A token, one CORS origin and one extra allowed Host name."""
    home, _ = seeded_home(tmp_path_factory.mktemp("http-guarded"))
    with http_server(home, "--token", TOKEN, "--project", PROJECT,
                     env={"NMEM_MCP_CORS_ORIGINS": ORIGIN, "NMEM_MCP_ALLOWED_HOSTS": "nmem.test"}) as server:
        yield server


@asynccontextmanager
async def connect(url: str, token: str | None = None, mode: str = "legacy",
                  inbox: Inbox | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode,  # type: ignore[arg-type]
                   message_handler=inbox) as client:
        yield client


def raw(server: HttpServer, method: str = "POST", headers: dict[str, str] | None = None,
        body: object = INITIALIZE) -> http.client.HTTPResponse:
    """One request with exactly the headers given (Host included), the response read in full."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    base = {"Host": f"127.0.0.1:{server.port}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    data = json.dumps(body).encode() if method == "POST" else None
    conn.request(method, "/mcp", body=data, headers={**base, **(headers or {})}, encode_chunked=False)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def cors_headers(response: http.client.HTTPResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in response.getheaders() if k.lower().startswith("access-control-")}


# -- tools, resources and a subscription over HTTP ------------------------------------------------------


async def test_tools_and_resources_over_http(open_server: tuple[HttpServer, Seeded]) -> None:
    server, seeded = open_server
    async with connect(server.url) as client:
        assert client.protocol_version == "2025-11-25"
        assert len((await client.list_tools()).tools) == len(TOOLS)  # the default profile: every nmem tool
        found = structured(await client.call_tool("search", {"query": "login"}))
        # its project's results first
        assert [r["project"] for r in found["results"] if r["kind"] == "observation"] == [PROJECT, "other"]
        assert tool_error(await client.call_tool("timeline", {"anchor": 424242})) == "anchor observation not found"
        assert tool_error(await client.call_tool("session_trace", {"session_id": "nope"})) == "session not found: nope"
        memory = json.loads((await client.read_resource(seeded.memory_urn)).contents[0].text)  # type: ignore[union-attr]
        assert memory["id"] == seeded.memory_id
    async with connect(server.url, mode="auto") as modern:
        assert modern.protocol_version == "2026-07-28"
        again = structured(await modern.call_tool("search", {"query": "login"}))
        assert again["results"] == found["results"]


async def test_subscription_over_http_fires_when_another_process_records(
        open_server: tuple[HttpServer, Seeded]) -> None:
    server, _ = open_server
    inbox = Inbox()
    namespace = f"nmem://project:{PROJECT}/observations"
    async with connect(server.url, inbox=inbox) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(namespace)
        await record_process(server.home, "PostToolUse", session_id="s1", cwd=CWD, tool_name="Bash",
                             tool_input={"command": "make http-check"}, tool_response={"exit_code": 0})
        await inbox.wait_updated(namespace, timeout=10)
        assert inbox.errors() == []


# -- the guard ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "nmem.test"])
def test_foreign_host_header_is_421(open_server: tuple[HttpServer, Seeded], host: str) -> None:
    server, _ = open_server
    assert raw(server, headers={"Host": host}).status == 421


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:{port}", "127.0.0.1:{port}"])
def test_loopback_host_header_is_accepted(open_server: tuple[HttpServer, Seeded], host: str) -> None:
    server, _ = open_server
    assert raw(server, headers={"Host": host.format(port=server.port)}).status == 200


async def test_sdk_client_with_a_foreign_host_header_cannot_connect(open_server: tuple[HttpServer, Seeded]) -> None:
    server, _ = open_server
    with pytest.raises(Exception, match=r"TaskGroup|error response"):
        async with create_mcp_http_client(headers={"Host": "evil.example"}) as http, \
                Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
            await client.list_tools()


def test_without_a_token_the_guard_asks_for_none(open_server: tuple[HttpServer, Seeded]) -> None:
    server, _ = open_server
    assert raw(server).status == 200


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer "])
def test_missing_or_wrong_token_is_401(guarded_server: HttpServer, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    response = raw(guarded_server, headers=headers)
    assert response.status == 401
    assert response.getheader("WWW-Authenticate", "").startswith("Bearer")


def test_right_token_is_accepted_and_a_configured_host_name_too(guarded_server: HttpServer) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert raw(guarded_server, headers=auth).status == 200
    assert raw(guarded_server, headers={**auth, "Host": f"nmem.test:{guarded_server.port}"}).status == 200
    assert raw(guarded_server, headers={**auth, "Host": "evil.example"}).status == 421


async def test_sdk_client_needs_the_right_token(guarded_server: HttpServer) -> None:
    for token in (None, "wrong"):
        with pytest.raises(Exception, match=r"TaskGroup|error response"):
            async with connect(guarded_server.url, token) as client:
                await client.list_tools()
    async with connect(guarded_server.url, TOKEN) as client:
        assert len((await client.list_tools()).tools) == len(TOOLS)  # the default profile: every nmem tool
        found = structured(await client.call_tool("search", {"query": "login"}))
        # --project: the first results
        assert [r["project"] for r in found["results"] if r["kind"] == "observation"] == [PROJECT, "other"]


def test_no_cors_headers_by_default(open_server: tuple[HttpServer, Seeded]) -> None:
    server, _ = open_server
    assert cors_headers(raw(server, headers={"Origin": ORIGIN})) == {}
    preflight = raw(server, "OPTIONS", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert cors_headers(preflight) == {}


def test_cors_headers_for_a_configured_origin_only(guarded_server: HttpServer) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    preflight = raw(guarded_server, "OPTIONS", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                                                        "Access-Control-Request-Headers": "authorization"})
    assert preflight.status == 204  # a preflight carries no credentials; it must not need the token
    allowed = cors_headers(preflight)
    assert allowed["access-control-allow-origin"] == ORIGIN
    assert "authorization" in allowed["access-control-allow-headers"]
    assert "POST" in allowed["access-control-allow-methods"]

    post = raw(guarded_server, headers={**auth, "Origin": ORIGIN})
    assert post.status == 200
    assert cors_headers(post)["access-control-allow-origin"] == ORIGIN
    assert "mcp-session-id" in cors_headers(post)["access-control-expose-headers"]

    stranger = raw(guarded_server, headers={**auth, "Origin": "https://evil.example"})
    assert cors_headers(stranger) == {}


# -- refusing to start -------------------------------------------------------------------------------------


def test_non_loopback_host_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run(nmem_argv("serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())),
                          env=child_env(tmp_path / "home"), capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert "--token" in done.stderr and "NMEM_MCP_TOKEN" in done.stderr
    assert done.stdout == ""


async def test_wildcard_bind_with_a_token_accepts_requests_addressed_to_this_machine(service: Service) -> None:
    """`nmem serve --transport http --host 0.0.0.0 --token T` (the example in `nmem serve --help`) is for
    other machines: a request addressed to this machine's name must pass the Host check."""
    guard = create_app(service.settings, service=service, host="0.0.0.0", token=TOKEN).guard
    reached: list[str] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    guard.app = inner  # type: ignore[attr-defined]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for host in (socket.gethostname(), f"{socket.gethostname()}:37777"):
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [
            (b"host", host.encode()), (b"authorization", f"Bearer {TOKEN}".encode())]}
        await guard(scope, receive, send)
        statuses = [m["status"] for m in sent if m["type"] == "http.response.start"]
        assert statuses == [], f"Host {host!r} refused with {statuses}"
    assert reached == ["/mcp", "/mcp"]
