"""uvicorn's h11 protocol with the request-head limits uvicorn lacks (`http.header_timeout`,
`http.max_header_bytes`) and the connection cap it forgets for WebSockets
(`http.max_connections`); the body limits live in `nmem.adapters.http.security`."""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from nmem.adapters.net import Limits

H11_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


class GuardedH11Protocol(H11Protocol):
    """A deadline on each request's head and 431 for a head too large: uvicorn alone waits
    forever for a head trickled a byte at a time (it times out only idle keep-alive
    connections), and h11 alone lets a large head through when it arrives in one read."""

    head_timeout: float = Limits.header_timeout
    max_head_bytes: int = Limits.max_header_bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._head_timer: asyncio.TimerHandle | None = None
        self._wait_for_head()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_size(data) > self.max_head_bytes:
            self._reject(431, "request header fields too large")
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._wait_for_head()  # a head begun on an idle keep-alive connection: the same deadline
        else:
            self._stop_waiting()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        """uvicorn counts an open WebSocket among the connections but checks the cap only for
        plain requests: a WebSocket handshake past `http.max_connections` gets the same 503."""
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self._reject(503, "too many open connections; try again later")
            return
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _head_size(self, data: bytes) -> int:
        """The size of the head being received so far (h11 checks only a head still incomplete
        after a read, so a large one arriving whole would pass)."""
        pending = self.conn.trailing_data[0] + data
        end = pending.find(b"\r\n\r\n")
        return len(pending) if end < 0 else end + 4

    def _wait_for_head(self) -> None:
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._reject(408, "request header not received in time")

    def _reject(self, status: int, message: str) -> None:
        kind = {408: "timeout", 503: "busy"}.get(status, "too_large")
        body = json.dumps({"error": {"type": kind, "message": message, "code": -32000}}).encode()
        retry = "retry-after: 1\r\n" if status == 503 else ""
        head = (f"HTTP/1.1 {status} {H11_REASONS[status]}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n{retry}connection: close\r\n\r\n")
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()


def protocol_for(limits: Limits) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn instantiates per connection, bound to these limits."""
    return type("NmemHttpProtocol", (GuardedH11Protocol,),
                {"head_timeout": limits.header_timeout, "max_head_bytes": limits.max_header_bytes})
