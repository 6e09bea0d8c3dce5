"""Run the HTTP app under uvicorn with nmem's connection limits (`http.*` settings)."""

from __future__ import annotations

import gc
import socket

import uvicorn

from nmem.adapters.http.app import NmemApp
from nmem.adapters.http.protocol import protocol_for
from nmem.adapters.net import listen

# Event streams never end by themselves: on shutdown they get this long, then they are cancelled.
SHUTDOWN_GRACE = 2
# The cyclic garbage collector while serving: a young generation of 20,000 objects rather than 700,
# older ones collected more rarely. Every request allocates thousands of objects (rows, models,
# ASGI messages) that reference counting frees; at the defaults `make bench-team --pg` ran 826
# collections, 813 ms with the GIL held out of 4.8 s of the server's CPU, every thread stopped
# meanwhile; with these and the startup heap frozen, 4-7 collections, 110-140 ms.
GC_THRESHOLDS = (20_000, 50, 100)


def tune_gc() -> None:
    """Freeze what startup built (imports, the app: never garbage) out of the collector's sight and
    collect the young generations less often (GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(app: NmemApp, *, host: str, port: int, sockets: list[socket.socket] | None = None) -> None:
    """Serve until stopped, on `sockets` when given (`nmem.adapters.net.listen`), else binding
    `host:port` now."""
    limits = app.policy.limits
    tune_gc()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            http=protocol_for(limits),
                            timeout_keep_alive=limits.keep_alive_timeout, limit_concurrency=limits.max_connections,
                            ws_max_size=limits.max_body_bytes,  # a WebSocket message is a body too
                            timeout_graceful_shutdown=SHUTDOWN_GRACE)
    await uvicorn.Server(config).serve(sockets=sockets if sockets is not None else listen(host, port))
