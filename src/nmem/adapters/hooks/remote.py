"""`nmem record --remote URL`: a hook that sends its event to a team server instead of a local
database (docs/team.md).

The event is POSTed to `URL/api/v1/events` with the user's token (`hooks.remote_token`) and an
idempotency key made once per event. Events the server could not take (unreachable, slower
than `hooks.busy_budget_ms`, 5xx, refused token) wait in `<data dir>/spool/remote/<url id>/`
with their key, and each later run for the same server sends them first, oldest first. The
server stores a key at most once, so a retry after a lost answer stores nothing twice.

The hook path's rules hold: standard library only (http.client), and never exit 2.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time

from nmem import jsonlite as json
from nmem.capture.privacy import scrub_payload
from nmem.capture.spool import CLAIMED, SET_ASIDE, WAITING, waiting
from nmem.errors import InvalidArgument, StorageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.capture import events as ev
    from nmem.capture.spool import HookLog
    from nmem.config import Settings

EVENTS_PATH = "/api/v1/events"
REMOTE_DIR = "remote"
BATCH = 200


class Unreachable(Exception):
    """The server did not take the event now (network, time, 5xx): keep it and try later."""


class Refused(Exception):
    """The server refused this event for good (invalid, too large): keep it aside for a person."""


class Unauthorized(Exception):
    """The server refused the token: keep the event; the user must fix the token."""


def spool_dir(settings: Settings, url: str) -> str:
    return os.path.join(settings.spool_dir, REMOTE_DIR, hashlib.sha256(url.encode()).hexdigest()[:16])


def new_key() -> str:
    return f"{time.time_ns():x}-{secrets.token_hex(12)}"


def _endpoint(url: str) -> tuple[str, str, int | None, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(f"--remote needs an http(s) URL of an nmem server, not {url!r}")
    return parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/") + EVENTS_PATH


def send(url: str, token: str, item: dict[str, Any], ends: float) -> dict[str, Any]:
    """POST one spooled item; the server's answer. Raises Unreachable, Refused or Unauthorized."""
    import http.client

    scheme, host, port, path = _endpoint(url)
    left = ends - time.monotonic()
    if left <= 0.005:
        raise Unreachable("the hook's time budget ran out")
    body = json.dumps({"key": item["key"], "event": item["event"], "received_at": item.get("received_at")})
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    else:
        headers["X-Nmem-CSRF"] = "1"
    conn_class = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = conn_class(host, port, timeout=left)
    try:
        conn.request("POST", path, body=body.encode("utf-8"), headers=headers)
        response = conn.getresponse()
        status = response.status
        text = response.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if status in (200, 201):
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {}
        return answer if isinstance(answer, dict) else {}
    message = _error_message(text) or f"HTTP {status}"
    if status in (401, 403):
        raise Unauthorized(f"{url} refused the token: {message}")
    if status in (400, 404, 413, 422):
        raise Refused(f"{url} refused the event ({status}): {message}")
    raise Unreachable(f"{url} answered {status}: {message}")


def _error_message(text: str) -> str:
    try:
        data = json.loads(text)
        return str(data["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text.strip()[:200]


def keep(settings: Settings, url: str, item: dict[str, Any]) -> str:
    """Write an item to the server's spool, atomically; named so names sort oldest first."""

    folder = settings.ensure_dir(spool_dir(settings, url))
    name = f"{time.time_ns()}-{os.getpid()}{WAITING}"
    tmp = os.path.join(folder, f".{name}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(item))
    os.replace(tmp, os.path.join(folder, name))
    return name


def drain(settings: Settings, url: str, token: str, ends: float, log: HookLog) -> None:
    """Send the server's waiting events, oldest first, each claimed by one hook at a time (as
    `nmem.adapters.hooks.run.drain_spool` claims local ones). Stops with Unreachable/Unauthorized, the
    event put back in its place."""

    folder = spool_dir(settings, url)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for spool_id, name in waiting(folder, names)[:BATCH]:
        claimed = os.path.join(folder, f"{spool_id}.{os.getpid()}{CLAIMED}")
        try:
            os.rename(os.path.join(folder, name), claimed)
        except OSError:
            continue  # another hook took it
        try:
            with open(claimed, "rb") as fh:
                item = json.loads(fh.read().decode("utf-8", "replace"))
            if not isinstance(item, dict) or "key" not in item or "event" not in item:
                raise ValueError("not a spooled remote event")
        except (OSError, ValueError) as exc:
            _aside(claimed, os.path.join(folder, spool_id + SET_ASIDE), log, f"unreadable: {exc}")
            continue
        try:
            send(url, token, item, ends)
        except Refused as exc:
            _aside(claimed, os.path.join(folder, spool_id + SET_ASIDE), log, str(exc))
            continue
        except (Unreachable, Unauthorized):
            try:
                os.rename(claimed, os.path.join(folder, spool_id + WAITING))
            except OSError:
                pass
            raise
        try:
            os.unlink(claimed)
        except OSError:
            pass  # sent; a repeat is a duplicate the server skips


def _aside(path: str, target: str, log: HookLog, why: str) -> None:
    try:
        os.replace(path, target)
    except OSError:
        return
    log.error(f"set aside remote spool file {os.path.basename(target)} ({why})")


def record(settings: Settings, payload: dict[str, Any], event: ev.HookEvent, url: str,
           log: HookLog) -> tuple[dict[str, Any] | None, StorageError | None]:
    """Send the event (after older ones) or keep it: (the server's answer or None, a failure the
    user must see). A refused event is an InvalidArgument: the hook exits 1."""
    _endpoint(url)  # a bad URL is bad input: nothing is kept
    token = str(settings["hooks.remote_token"])
    ends = time.monotonic() + int(settings["hooks.busy_budget_ms"]) / 1000
    item = {"url": url, "key": new_key(), "received_at": event.timestamp, "event": scrub_payload(payload)}
    try:
        drain(settings, url, token, ends, log)
        return send(url, token, item, ends), None
    except Refused as exc:
        raise InvalidArgument(str(exc)) from None
    except (Unreachable, Unauthorized) as exc:
        try:
            name = keep(settings, url, item)
        except OSError as spool_exc:
            raise StorageError(f"{exc}; the spool failed too: {spool_exc}") from None
        note = f"{exc}; spooled {event.hook_event_name} event for {url} as {name}"
        if isinstance(exc, Unauthorized):
            log.error(note)
            return None, StorageError(str(exc))
        log.warning(note)
        return None, None
