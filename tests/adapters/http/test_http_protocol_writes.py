"""How nmem's HTTP protocol (`nmem.adapters.http.protocol`) writes a response: head and body in one
write (one TCP segment on loopback), yet a streamed response's head at once. uvicorn serves small
ASGI apps through the protocol `nmem serve` runs, on a real loopback socket."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from mcp_support import free_port
from nmem.adapters.http.protocol import JOIN_AT_MOST, protocol_for
from nmem.adapters.net import Limits

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads TCP_INFO's segment counts (Linux)")

TCP_INFO_DATA_SEGS_IN = 152   # offset of tcpi_data_segs_in in Linux's struct tcp_info (since 4.6)


@contextmanager
def serving(app: Any) -> Iterator[int]:
    """`app` behind nmem's protocol on a loopback port, until the block ends."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                            http=protocol_for(Limits()))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the test server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def data_segments_in(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    if len(info) < TCP_INFO_DATA_SEGS_IN + 4:
        pytest.skip("this kernel's TCP_INFO has no data segment counts")
    return int(struct.unpack_from("I", info, TCP_INFO_DATA_SEGS_IN)[0])


def read_response(sock: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """One response with a content-length: (head, body, bytes read past it)."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        rest += chunk
    return head, rest[:length], rest[length:]


def answering(body: bytes) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    return app


@pytest.mark.parametrize("size", [2, 4000])
def test_head_and_body_arrive_in_one_segment(size: int) -> None:
    body = b"[" + b"1" * (size - 2) + b"]"
    with serving(answering(body)) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        read = b""
        sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")     # the connection's first answer, not counted
        _, got, read = read_response(sock, read)
        before = data_segments_in(sock)
        for _ in range(20):
            sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            _, got, read = read_response(sock, read)
            assert got == body
        assert data_segments_in(sock) - before == 20   # uvicorn alone wrote each head and body apart: 40


def test_a_large_body_still_follows_its_head() -> None:
    """A guard (passes on uvicorn alone too): a body past JOIN_AT_MOST is written after its head."""
    body = b"x" * (JOIN_AT_MOST + 1)
    with serving(answering(body)) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        for _ in range(3):
            sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            head, got, _ = read_response(sock)
            assert head.startswith(b"HTTP/1.1 200") and got == body


def test_a_streamed_head_is_written_before_its_body_is_ready() -> None:
    """A response whose body comes later (an event stream) gets its head at once: the app sends
    its body only once the client has read the head. A guard (uvicorn alone writes the head at
    once too): holding the head must never wait for a body."""
    head_read = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        while not head_read.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": False})

    with serving(app) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in data
        head_read.set()
        while not data.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            data += chunk
        assert b"data: 1" in data and b"data: 2" in data


def test_an_answer_that_closes_the_connection_is_written_whole() -> None:
    """A guard (passes on uvicorn alone too): what is held is written before the connection closes."""
    body = b'{"ok": true}'

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    with serving(app) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(body)
