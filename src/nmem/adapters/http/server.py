"""Run the HTTP app under uvicorn with nmem's connection limits (`http.*` settings)."""

from __future__ import annotations

import socket

import uvicorn

from nmem.adapters.http.app import NmemApp
from nmem.adapters.http.protocol import protocol_for
from nmem.adapters.net import listen

# Event streams never end by themselves: on shutdown they get this long, then they are cancelled.
SHUTDOWN_GRACE = 2


async def serve(app: NmemApp, *, host: str, port: int, sockets: list[socket.socket] | None = None) -> None:
    """Serve until stopped, on `sockets` when given (`nmem.adapters.net.listen`), else binding
    `host:port` now."""
    limits = app.policy.limits
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            http=protocol_for(limits), h11_max_incomplete_event_size=limits.max_header_bytes,
                            timeout_keep_alive=limits.keep_alive_timeout, limit_concurrency=limits.max_connections,
                            ws_max_size=limits.max_body_bytes,  # a WebSocket message is a body too
                            timeout_graceful_shutdown=SHUTDOWN_GRACE)
    await uvicorn.Server(config).serve(sockets=sockets if sockets is not None else listen(host, port))
