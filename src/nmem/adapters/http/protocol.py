"""uvicorn's HTTP protocol with the request-head limits uvicorn lacks (`http.header_timeout`,
`http.max_header_bytes`) and the connection cap it forgets for WebSockets
(`http.max_connections`); the body limits live in `nmem.adapters.http.security`.

The server runs `GuardedHttpToolsProtocol` (uvicorn's protocol on httptools, llhttp's C parser):
it parses a request and writes a response in about a third of the event loop's CPU that h11, a
parser in pure Python, takes (`make bench-team`: the event loop held the GIL in over half the
samples, h11 the largest part of it; uvicorn's h11 protocol guarded these limits before).

A response's head and the start of its body leave in one write (`HeldHead`): uvicorn writes the
head as soon as the app starts its response, then the body, two `send()` calls where one does. On
loopback a send also runs the receiver's TCP work, and the two were a third of the event loop's
samples under `make bench-team`. The head waits only until the body's first write in the same
step of the loop, never longer: a streamed response (SSE) whose body comes later gets its head
written at the end of that step.
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nmem.adapters.net import Limits

REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def reject(transport: asyncio.WriteTransport, status: int, message: str) -> None:
    """Answer `status` with the API's error shape and close, before any request reached the app."""
    kind = {408: "timeout", 503: "busy"}.get(status, "too_large")
    body = json.dumps({"error": {"type": kind, "message": message, "code": -32000}}).encode()
    retry = "retry-after: 1\r\n" if status == 503 else ""
    head = (f"HTTP/1.1 {status} {REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{retry}connection: close\r\n\r\n")
    transport.write(head.encode("ascii") + body)
    transport.close()


# Past this a body is written on its own after the held head: joining them would copy it
JOIN_AT_MOST = 64 * 1024


class HeldHead:
    """The transport one request's cycle writes through: its first write (the response's head,
    or a `100 Continue`) is held until its next write, which takes it along in one `send()`, or
    until the loop's next step (`loop.call_soon`), whichever comes first. Closing writes what is
    held first. Every later write goes straight to the transport."""

    __slots__ = ("transport", "loop", "held", "first")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport, self.loop = transport, loop
        self.held: bytes | None = None
        self.first = True

    def write(self, data: bytes) -> None:
        if self.first:
            self.first = False
            self.held = data
            self.loop.call_soon(self.flush)
            return
        held = self.held
        if held is not None:
            self.held = None
            if len(data) <= JOIN_AT_MOST:
                data = held + data
            else:
                self.transport.write(held)
        self.transport.write(data)

    def flush(self) -> None:
        held = self.held
        if held is not None:
            self.held = None
            if not self.transport.is_closing():
                self.transport.write(held)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, guarded: a deadline on each request's head, from
    the connection's start or the first byte of a head on a keep-alive connection to the head's
    end; 431 for a head larger than `max_head_bytes`, counted before the parser sees it (llhttp
    sets no limit of its own); and the connection cap for WebSocket handshakes."""

    head_timeout: float = Limits.header_timeout
    max_head_bytes: int = Limits.max_header_bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._head_timer: asyncio.TimerHandle | None = None
        self._expect_head = True   # the next bytes begin (or continue) a request's head
        self._in_head = False      # the parser has begun a head it has not finished
        self._head_so_far = b""    # a head begun in an earlier read, to find its end and size
        self._wait_for_head()      # a client that never sends a byte

    def data_received(self, data: bytes) -> None:
        if self._expect_head and self._head_too_large(data):
            self._reject(431, "request header fields too large")
            return
        super().data_received(data)
        if self._in_head:
            self._wait_for_head()  # a head begun (on an idle keep-alive connection too): the same deadline

    def on_message_begin(self) -> None:
        self._in_head = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._expect_head = self._in_head = False
        self._head_so_far = b""
        self._stop_waiting()
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:   # a request's cycle (not a WebSocket's upgrade), its task not yet run
            self.cycle.transport = HeldHead(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._expect_head = True   # what follows is the next request's head
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        """uvicorn counts an open WebSocket among the connections but checks the cap only for
        plain requests: a WebSocket handshake past `http.max_connections` gets the same 503."""
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self._reject(503, "too many open connections; try again later")
            return
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _head_too_large(self, data: bytes) -> bool:
        pending = self._head_so_far + data
        end = pending.find(b"\r\n\r\n")
        if end >= 0:
            return end + 4 > self.max_head_bytes
        if len(pending) > self.max_head_bytes:
            return True
        self._head_so_far = pending   # at most max_head_bytes, kept until the head ends
        return False

    def _wait_for_head(self) -> None:
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._expect_head and not self.transport.is_closing():
            self._reject(408, "request header not received in time")

    def _reject(self, status: int, message: str) -> None:
        reject(self.transport, status, message)


def protocol_for(limits: Limits) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn instantiates per connection, bound to these limits."""
    return type("NmemHttpProtocol", (GuardedHttpToolsProtocol,),
                {"head_timeout": limits.header_timeout, "max_head_bytes": limits.max_header_bytes})
