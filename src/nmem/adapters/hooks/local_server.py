"""A SessionStart on a server store (PostgreSQL) asks the local `nmem serve` for its context.

A hook never loads PostgreSQL's driver, so with `store.url` = postgresql://... it spools every
event (a running server stores them within seconds, `hooks.server_drain_ms`) and could print no
context. A SessionStart first offers its event to the HTTP server at `mcp.host:mcp.port`: one
that serves the same store (the body names it by a digest of the store URL; another store's
server answers 409) stores it under an idempotency key and answers with the block to print.
No server, another store, a refused token or no answer within `hooks.busy_budget_ms`: None,
and the event is spooled as before.

Standard library only (http.client, loaded here alone), as the hook path requires.
"""

from __future__ import annotations

import secrets
import time

from nmem import jsonlite as json
from nmem.capture.privacy import scrub_payload

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.capture import events as ev
    from nmem.config import Settings

EVENTS_PATH = "/api/v1/events"
ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")


def server_address(settings: Settings) -> tuple[str, int]:
    host = str(settings["mcp.host"]).strip("[]")
    return ("127.0.0.1" if f"{host}" in ANY_ADDRESS else host), int(settings["mcp.port"])


def session_start(settings: Settings, payload: dict[str, Any], event: ev.HookEvent) -> str | None:
    """The context block the local server answered after storing this SessionStart, or None
    when no server serving this store took it."""
    import http.client

    host, port = server_address(settings)
    token = str(settings["http.token"]) or str(settings["mcp.token"]) or str(settings["hooks.remote_token"])
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    headers.update({"Authorization": f"Bearer {token}"} if token else {"X-Nmem-CSRF": "1"})
    body = json.dumps({"key": f"local-{time.time_ns():x}-{secrets.token_hex(8)}", "event": scrub_payload(payload),
                       "received_at": event.timestamp, "store": settings.store_digest()})
    conn = http.client.HTTPConnection(host, port, timeout=max(0.05, int(settings["hooks.busy_budget_ms"]) / 1000))
    try:
        conn.request("POST", EVENTS_PATH, body=body.encode("utf-8"), headers=headers)
        response = conn.getresponse()
        text = response.read()
        if response.status != 200:
            return None
        answer = json.loads(text.decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    return str(answer.get("context") or "") if isinstance(answer, dict) else None
