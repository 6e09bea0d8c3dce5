"""The MCP server under hostile or broken clients: real server processes, real sockets.

HTTP: slow, partial, oversized and too many requests against `nmem serve --transport http`
with small `http.*` limits (1 s timeouts), driven by bounded raw clients on loopback; a
busy port and a bad host. Stdio: every error class's code, and a forced bug, through the
official SDK client against a real `nmem serve` process.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import run_nmem
from mcp_support import CWD, HttpServer, Seeded, child_env, http_server, seed, structured, tool_error
from nmem.adapters.mcp.server import ERROR_META
from nmem.config import load_settings
from nmem.service.api import Service

pytestmark = pytest.mark.slow

TIMEOUT = 1.0            # the server's header and body timeouts in these tests
GIVE_UP = 8.0            # a slow client stops on its own after this: the server must cut it well before
MAX_BODY = 64 * 1024
MAX_HEADER = 8 * 1024
MAX_CONNECTIONS = 8
LIMITS = {"NMEM_HTTP_HEADER_TIMEOUT": str(TIMEOUT), "NMEM_HTTP_BODY_TIMEOUT": str(TIMEOUT),
          "NMEM_HTTP_KEEP_ALIVE": "1", "NMEM_HTTP_MAX_BODY": str(MAX_BODY),
          "NMEM_HTTP_MAX_HEADER": str(MAX_HEADER), "NMEM_HTTP_MAX_CONNECTIONS": str(MAX_CONNECTIONS)}
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "fault-test", "version": "0"}}}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    home = tmp_path_factory.mktemp("http-faults") / "nmem-home"
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    try:
        seed(service)
    finally:
        service.close()
    with http_server(home, env={**LIMITS, "CLAUDE_PROJECT_DIR": CWD}) as running:
        # The port listens before the server has loaded the MCP stack: wait until it answers,
        # so the timings below start with a running server.
        assert initialize(running).status == 200
        yield running


def head(port: int, method: str = "POST", extra: str = "") -> bytes:
    return (f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{extra}").encode()


def initialize(server: HttpServer) -> http.client.HTTPResponse:
    """A well-behaved client: one initialize request, its response read in full."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/mcp", body=INITIALIZE, headers={
            "Host": f"127.0.0.1:{server.port}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
        response = conn.getresponse()
        response.read()
        return response
    finally:
        conn.close()


@dataclass
class Outcome:
    """What a slow client saw: the status the server answered (if it got through), whether the
    server closed the connection, and when."""

    response: bytes = b""
    closed: bool = False
    seconds: float = 0.0
    sent: int = 0

    @property
    def status(self) -> int | None:
        line = self.response.split(b"\r\n", 1)[0].split()
        return int(line[1]) if len(line) > 1 and line[1].isdigit() else None


@dataclass
class SlowClient:
    """A bounded slow client in a thread: sends `first`, then one byte of `trickle` every
    `every` seconds, reading whatever comes back, until the server closes or GIVE_UP."""

    port: int
    first: bytes
    trickle: bytes = b""
    every: float = 0.2
    outcome: Outcome = field(default_factory=Outcome)
    connected: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        out = self.outcome
        drip = itertools.cycle(self.trickle) if self.trickle else None
        with socket.create_connection(("127.0.0.1", self.port), timeout=self.every) as sock:
            if self.first:
                sock.sendall(self.first)
                out.sent += len(self.first)
            self.connected.set()
            while time.monotonic() - start < GIVE_UP:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    chunk = None
                except ConnectionError:
                    out.closed = True
                    break
                if chunk == b"":
                    out.closed = True
                    break
                if chunk:
                    out.response += chunk
                    continue
                if drip is not None:
                    try:
                        sock.sendall(bytes([next(drip)]))
                        out.sent += 1
                    except OSError:
                        out.closed = True
                        break
        out.seconds = time.monotonic() - start

    def wait(self) -> Outcome:
        self.thread.join(GIVE_UP + 5)
        assert not self.thread.is_alive()
        return self.outcome


def test_slow_clients_are_cut_within_their_timeouts_while_a_normal_client_is_served(server: HttpServer) -> None:
    port = server.port
    slow = {
        "silent": SlowClient(port, b""),
        "head trickled": SlowClient(port, head(port), b"X-Slow: 1\r\n"),
        "head unfinished": SlowClient(port, head(port)),
        "body trickled": SlowClient(port, head(port, extra="Content-Length: 10000\r\n\r\n"), b"{"),
        "body unfinished": SlowClient(port, head(port, extra=f"Content-Length: {len(INITIALIZE)}\r\n\r\n")
                                      + INITIALIZE[:20]),
    }
    for client in slow.values():
        assert client.connected.wait(5)
    response = initialize(server)
    assert response.status == 200
    assert all(c.thread.is_alive() for c in slow.values()), {n: c.outcome for n, c in slow.items()}
    for name, client in slow.items():
        outcome = client.wait()
        assert outcome.closed, f"{name}: still open after {GIVE_UP} s"
        assert TIMEOUT * 0.9 <= outcome.seconds < TIMEOUT + 3, (name, outcome)
        if not client.trickle:  # a trickler may have its answer reset by its own next byte
            assert outcome.status == 408, (name, outcome)
    assert initialize(server).status == 200


def test_a_declared_10_mb_body_is_refused_before_any_of_it_is_read(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head(server.port, extra=f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"))
        answer = b""
        while chunk := sock.recv(65536):  # the server answers and closes without waiting for the body
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"connection: close" in answer.lower()
    assert initialize(server).status == 200


def test_a_streamed_10_mb_body_is_cut_after_the_limit(server: HttpServer) -> None:
    """Chunked, so no length to refuse up front: the server reads up to the limit, answers
    413 and closes; the client cannot push its 10 MB through."""
    chunk = b"%x\r\n%s\r\n" % (16 * 1024, b"x" * 16 * 1024)
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sock.sendall(head(server.port, extra="Transfer-Encoding: chunked\r\n\r\n"))
        with pytest.raises(OSError):  # reset, broken pipe, or a send that no longer moves
            while sent < 10 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
    assert sent < 10 * 1024 * 1024 / 2, sent
    assert initialize(server).status == 200


def get_head(port: int, extra: str) -> bytes:
    return f"GET /api/v1/search?query=cache HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}".encode()


@pytest.mark.parametrize("declared", ["Content-Length: 10000\r\n\r\n{", "Transfer-Encoding: chunked\r\n\r\nffff\r\n"])
def test_a_get_that_declares_a_body_still_has_it_timed(server: HttpServer, declared: str) -> None:
    """Only a head that declares no body skips the body's deadline: a GET declaring one (a length,
    or chunks) and trickling it is cut like a POST."""
    outcome = SlowClient(server.port, get_head(server.port, declared), b"x").wait()
    assert outcome.closed, outcome
    assert TIMEOUT * 0.9 <= outcome.seconds < TIMEOUT + 3, outcome
    assert initialize(server).status == 200


def test_bytes_after_a_get_without_a_body_are_the_next_head_under_its_deadline(server: HttpServer) -> None:
    """A GET that declares no body is answered at once; what the client sends after it is the
    next request's head, cut at the head deadline when it never ends."""
    next_head = b"GET /health HTTP/1.1\r\n" + b"X-Slow: 1\r\n" * 20
    outcome = SlowClient(server.port, get_head(server.port, "\r\n"), next_head).wait()
    assert outcome.response.startswith(b"HTTP/1.1 200 "), outcome.response[:80]
    assert outcome.closed, outcome
    assert b"HTTP/1.1 408 " in outcome.response, outcome.response[-200:]
    assert TIMEOUT * 0.9 <= outcome.seconds < TIMEOUT + 3, outcome


def test_a_get_declaring_a_10_mb_body_is_413_and_a_chunked_one_is_cut(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(get_head(server.port, f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:80]
    chunk = b"%x\r\n%s\r\n" % (16 * 1024, b"x" * 16 * 1024)
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sock.sendall(get_head(server.port, "Transfer-Encoding: chunked\r\n\r\n"))
        with pytest.raises(OSError):
            while sent < 10 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
    assert sent < 10 * 1024 * 1024 / 2, sent
    assert initialize(server).status == 200


def test_a_body_just_under_the_limit_is_served(server: HttpServer) -> None:
    padded = json.loads(INITIALIZE)
    padded["params"]["clientInfo"]["name"] = "x" * (MAX_BODY - len(INITIALIZE) - 100)
    body = json.dumps(padded).encode()
    assert len(body) < MAX_BODY
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("POST", "/mcp", body=body, headers={
        "Host": f"127.0.0.1:{server.port}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})
    assert conn.getresponse().status == 200
    conn.close()


def _until_closed(sock: socket.socket) -> bytes:
    """All the server sends before it closes the connection (a reset ends it too)."""
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def test_oversized_headers_are_431(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head(server.port, extra=f"X-Big: {'a' * (MAX_HEADER + 1024)}\r\n\r\n"))
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:80]
    # a header block within the limit is fine
    fits = head(server.port, extra=f"X-Big: {'a' * (MAX_HEADER // 2)}\r\nContent-Length: {len(INITIALIZE)}\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(fits + INITIALIZE)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_a_head_too_large_in_several_reads_is_431(server: HttpServer) -> None:
    """The head's size counts across reads: each part fits, the whole does not."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head(server.port, extra=f"X-Big-1: {'a' * (MAX_HEADER * 3 // 4)}\r\n"))
        time.sleep(0.2)
        sock.sendall(f"X-Big-2: {'b' * (MAX_HEADER * 3 // 4)}\r\n\r\n".encode())
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:80]
    assert initialize(server).status == 200


def test_too_many_connections_get_503_until_the_slow_ones_are_cut(server: HttpServer) -> None:
    hogs = [SlowClient(server.port, b"") for _ in range(MAX_CONNECTIONS)]
    for hog in hogs:
        assert hog.connected.wait(5)
    assert initialize(server).status == 503
    for hog in hogs:
        assert hog.wait().closed
    assert initialize(server).status == 200


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client() as http_client, \
            Client(streamable_http_client(url, http_client=http_client), mode="legacy") as client:
        yield client


@pytest.mark.anyio
async def test_a_well_behaved_session_outlives_every_timeout(server: HttpServer) -> None:
    """The limits bound each request, not a session: an open event stream and a kept-alive
    connection idle past the timeouts go on working; tool errors keep their codes over HTTP."""
    async with connect(server.url) as client:
        assert structured(await client.call_tool("search", {"query": "login"}))["count"] > 0
        await anyio.sleep(TIMEOUT * 1.5)  # past the header, body and keep-alive timeouts
        result = await client.call_tool("timeline", {"anchor": 424242})
        assert tool_error(result) == "anchor observation not found"
        assert (result.meta or {})[ERROR_META] == {"code": -32001, "kind": "not_found"}
        assert structured(await client.call_tool("status", {}))["observations"] > 0


# -- where the server cannot listen -------------------------------------------------------------


def test_a_busy_port_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_nmem(["serve", "--transport", "http", "--port", str(port)], env=child_env(tmp_path / "home"),
                        timeout=30)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"nmem: port {port} on 127.0.0.1 is in use: stop what holds it, or choose another port "
        "(--port or the mcp.port setting)"]


@pytest.mark.parametrize(("host", "says"), [
    ("no-such-host.invalid", "no-such-host.invalid: no such host name"),
    ("192.0.2.1", "192.0.2.1: not an address of this machine"),  # TEST-NET-1, never local
])
def test_a_bad_host_is_one_line_and_exit_3(tmp_path: Path, host: str, says: str) -> None:
    done = run_nmem(["serve", "--transport", "http", "--host", host, "--port", "37999", "--token", "t"],
                    env=child_env(tmp_path / "home"), timeout=30)
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"nmem: cannot listen on {says}"), line


def test_a_port_out_of_range_in_the_settings_is_a_config_error(tmp_path: Path) -> None:
    done = run_nmem(["serve", "--transport", "http"], env=child_env(tmp_path / "home", NMEM_MCP_PORT="70000"),
                    timeout=30)
    assert (done.returncode, done.stderr) == (3, "nmem: mcp.port: 70000 is not a port (1-65535)\n")


@pytest.mark.parametrize("setting", ["NMEM_HTTP_HEADER_TIMEOUT", "NMEM_HTTP_MAX_BODY"])
def test_a_limit_that_is_not_positive_is_a_config_error(tmp_path: Path, setting: str) -> None:
    done = run_nmem(["serve", "--transport", "http", "--port", "37999"],
                    env=child_env(tmp_path / "home", **{setting: "0"}), timeout=30)
    assert done.returncode == 3, done.stderr
    assert "must be greater than 0" in done.stderr


# -- stdio: codes and a bug, through a real server process ------------------------------------------


FORCED_BUG = ("import sys, nmem.service.api\n"
              "def broken(self, *a, **k):\n"
              "    raise RuntimeError('s3cret internal detail')\n"
              "nmem.service.api.Service.status = broken\n"
              "nmem.service.api.Service.session_trace = broken\n"
              "from nmem.__main__ import main\n"
              "sys.exit(main(['serve']))\n")


@pytest.mark.anyio
async def test_stdio_errors_carry_their_codes_and_a_bug_leaks_nothing(nmem_home: Path, seeded: Seeded,
                                                                       tmp_path: Path) -> None:
    server = StdioServerParameters(command=sys.executable, args=["-c", FORCED_BUG],
                                   env=child_env(nmem_home, CLAUDE_PROJECT_DIR=CWD), cwd=str(tmp_path))
    log = tmp_path / "stderr.log"
    with log.open("w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            codes: dict[str, Any] = {}
            for name, tool, arguments in (
                    ("not found", "timeline", {"anchor": 424242}),
                    ("validation", "get_observations", {"ids": [2**64]}),
                    ("blocked", "remember", {"content": "<private>the root password</private>"}),
                    ("invalid params", "search", {"limit": "ten"}),
                    ("internal", "status", {})):
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (name, result)
                codes[name] = (result.meta or {})[ERROR_META]["code"]
                assert "s3cret" not in tool_error(result) and "Traceback" not in tool_error(result)
            assert codes == {"not found": -32001, "validation": -32002, "blocked": -32003,
                             "invalid params": -32602, "internal": -32603}
            with pytest.raises(MCPError) as err:
                await client.read_resource("nmem://project:demo/sessions/s1")
            assert (err.value.code, err.value.message) == (types.INTERNAL_ERROR, "Internal error")
            assert "s3cret" not in str(err.value.data)
    assert "s3cret internal detail" in log.read_text()  # the server's log keeps the details


def test_raw_json_numbers_beyond_any_integer_are_tool_errors_not_code_0(nmem_home: Path, seeded: Seeded) -> None:
    """The literal JSON a client may send (`1e400`, 25 digits), as bytes on a real server's stdin."""
    lines = [json.loads(INITIALIZE), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    calls = {
        2: '{"name": "search", "arguments": {"query": "login", "limit": 1e400}}',
        3: '{"name": "get_observations", "arguments": {"ids": [9999999999999999999999999]}}',
        4: '{"name": "timeline", "arguments": {"anchor": -9999999999999999999999999}}',
        5: '{"name": "search", "arguments": {"query": "login", "offset": 1e19}}',
    }
    text = "".join(json.dumps(line) + "\n" for line in lines) + "".join(
        f'{{"jsonrpc": "2.0", "id": {i}, "method": "tools/call", "params": {params}}}\n' for i, params in calls.items())
    answers: dict[int, Any] = {}
    with subprocess.Popen([sys.executable, "-m", "nmem", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env=child_env(nmem_home, CLAUDE_PROJECT_DIR=CWD)) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        bound = threading.Timer(30, proc.kill)  # a server that never answers fails the test, not hangs it
        bound.start()
        try:
            proc.stdin.write(text.encode())
            proc.stdin.flush()
            while len(answers) < 1 + len(calls):
                message = json.loads(proc.stdout.readline())
                answers[message["id"]] = message
        finally:
            bound.cancel()
            proc.kill()
    codes = {i: answers[i]["result"]["_meta"][ERROR_META]["code"] for i in calls}
    assert all(answers[i]["result"]["isError"] for i in calls)
    assert codes == {2: -32602, 3: -32002, 4: -32002, 5: -32002}
