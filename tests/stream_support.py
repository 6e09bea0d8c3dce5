"""A real HTTP server on a loopback port (uvicorn in a thread) and a small SSE reader for the
stream and viewer tests."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from mcp_support import free_port
from nmem.adapters.http.app import create_app
from nmem.config import Settings


@dataclass
class Event:
    event: str
    data: Any
    id: str | None = None


@dataclass
class Server:
    port: int
    settings: Settings

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def running_server(settings: Settings) -> Iterator[Server]:
    """`create_app(settings)` served by uvicorn on 127.0.0.1 in a thread, until the block ends."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on", ws="websockets-sansio",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield Server(port, settings)
    finally:
        server.should_exit = True
        thread.join(10)


class SseReader:
    """An open event stream; `next_event` reads one event (comments are kept in `comments`)."""

    def __init__(self, port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 10) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path, headers=headers or {})
        self.response = self.conn.getresponse()
        self.comments = 0

    @property
    def status(self) -> int:
        return self.response.status

    def next_event(self) -> Event:
        fields: dict[str, str] = {}
        while True:
            raw = self.response.readline()
            if not raw:
                raise EOFError("the stream ended")
            line = raw.decode().rstrip("\n")
            if line == "":
                if fields:
                    return Event(fields.get("event", "message"), json.loads(fields.get("data", "null")),
                                 fields.get("id"))
                continue
            if line.startswith(":"):
                self.comments += 1
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value

    def comments_within(self, seconds: float) -> int:
        """Read for `seconds`, counting comment lines (keep-alives) and expecting no event."""
        deadline = time.monotonic() + seconds
        count = 0
        while time.monotonic() < deadline:
            line = self.response.readline().decode()
            assert not line.startswith(("event:", "data:")), line
            count += line.startswith(":")
        return count

    def events_until(self, stop: str) -> list[Event]:
        events: list[Event] = []
        while True:
            event = self.next_event()
            events.append(event)
            if event.event == stop:
                return events

    def close(self) -> None:
        self.conn.close()
