"""The team server's endpoints: remote capture (`POST /api/v1/events`), the audit trail, and
user and token management for admins. Who the request acts for is `nmem.team.access.current()`,
set by the guard from the user's token (`TeamAuth`)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from nmem.adapters.http import schemas as s
from nmem.adapters.http.api import PREFIX
from nmem.adapters.http.routing import Context, Endpoint
from nmem.capture import events as ev
from nmem.capture.agents import parse
from nmem.errors import Forbidden, NmemError
from nmem.store.protocol import Store
from nmem.team import accounts as team
from nmem.team.access import SCOPE_KEY, Viewer, current

REMOTE_SPOOL_PREFIX = "remote:"
COOKIE = "nmem_session"
# Signs the viewer's cookies; made at start and never stored, so neither a copy of the database
# (which holds the tokens' digests) nor an old cookie after a restart signs anyone in.
_COOKIE_KEY = secrets.token_bytes(32)


def session_cookie(token: str) -> str:
    """The viewer cookie for a user's token: its digest (as the store keeps it) and a signature,
    never the token itself."""
    digest = team.digest(token)
    return f"{digest}.{hmac.new(_COOKIE_KEY, digest.encode(), hashlib.sha256).hexdigest()}"


def _cookie_digest(header: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == COOKIE:
            digest, _, signature = value.partition(".")
            wanted = hmac.new(_COOKIE_KEY, digest.encode(), hashlib.sha256).hexdigest()
            if signature and hmac.compare_digest(signature.encode(), wanted.encode()):
                return digest
    return None


class TeamAuth:
    """The guard's user check: a user's token as `Authorization: Bearer`, or the cookie
    `/login?token=` set, looked up on every request, so a revoked token is refused at once."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def active(self) -> bool:
        return team.active(self.store)

    def viewer(self, headers: Mapping[str, str]) -> Viewer | None:
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return team.authenticate(self.store, auth[7:].strip())
        digest = _cookie_digest(headers.get("cookie", ""))
        return team.authenticate_digest(self.store, digest) if digest else None

    def login(self, token: str) -> str | None:
        """The cookie for a live user token, else None."""
        return session_cookie(token) if team.authenticate(self.store, token) is not None else None

    def still_signed_in(self, scope: Mapping[str, Any]) -> bool:
        """Whether the user a long-lived request (a WebSocket, an event stream) was opened for
        still holds a live token: streams ask again on every message and event."""
        opened_as = scope.get(SCOPE_KEY)
        if opened_as is None:
            return True
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        now = self.viewer(headers)
        return now is not None and now.name == opened_as.name


class OtherStore(NmemError):
    """A local hook's event names a store this server does not serve."""

    http_status = 409
    kind = "other_store"


def record_event(ctx: Context, _: None, b: s.RemoteEvent) -> dict[str, Any]:
    """Store one hook event sent by a remote `nmem record --remote`; a repeated key stores nothing."""
    service = ctx.service
    if b.store is not None and b.store != service.settings.store_digest():
        raise OtherStore("this server serves another store than the sender's (store.url differs)")
    event = parse(dict(b.event), now=b.received_at)
    outcome = service.record_event(event, spool_id=REMOTE_SPOOL_PREFIX + b.key)
    answer: dict[str, Any] = {"session_id": outcome.session_id, "project": outcome.project,
                              "stored": outcome.stored, "skipped": outcome.skipped,
                              "observation_id": outcome.observation_id, "prompt_id": outcome.prompt_id}
    if event.kind == ev.SESSION_START and outcome.skipped != "disabled":
        from nmem.context.block import render

        answer["context"] = render(service, outcome.project, event.source, event.timestamp,
                                   session_id=event.session_id or None, cwd=event.cwd or None)
    return answer


def claude_code_hook(ctx: Context, _: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's own HTTP hook (`"type": "http"`) POSTs the bare hook input: stored without a
    key (a retry stores again) and never spooled (the event is gone while the server is down).
    Answers in the hook output format: a SessionStart's context as `additionalContext`."""
    event = parse(body)
    service = ctx.service
    outcome = service.record_event(event)
    if event.kind == ev.SESSION_START and outcome.skipped != "disabled":
        from nmem.context.block import render

        text = render(service, outcome.project, event.source, event.timestamp,
                      session_id=event.session_id or None, cwd=event.cwd or None)
        if text:
            return {"hookSpecificOutput": {"hookEventName": event.hook_event_name, "additionalContext": text}}
    return {}


def audit(ctx: Context, p: s.AuditParams, _: None) -> dict[str, Any]:
    rows = team.audit(ctx.service.store, p.user, p.after, min(p.limit, 10_000))
    return {"results": rows, "count": len(rows)}


def _signed_in_admin() -> None:
    """Over HTTP users are managed by a signed-in admin; a single-user server uses the CLI."""
    viewer = current()
    if viewer is None or not viewer.admin:
        raise Forbidden("managing users needs an admin's token (or `nmem user` on the server)")


def users(ctx: Context, _: None, __: None) -> dict[str, Any]:
    _signed_in_admin()
    rows = team.users(ctx.service.store)
    return {"results": rows, "count": len(rows)}


def add_user(ctx: Context, _: None, b: s.NewUser) -> dict[str, Any]:
    _signed_in_admin()
    return team.add_user(ctx.service.store, b.name, b.admin, ctx.service.now())


def create_token(ctx: Context, p: s.UserPath, _: None) -> dict[str, Any]:
    _signed_in_admin()
    return team.create_token(ctx.service.store, p.name, ctx.service.now())


def revoke_token(ctx: Context, p: s.TokenPath, _: None) -> dict[str, Any]:
    _signed_in_admin()
    return team.revoke(ctx.service.store, p.target, ctx.service.now())


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", f"{PREFIX}/events", "Record a hook event sent from another machine", record_event,
             body=s.RemoteEvent, tag="team", grouped=True,
             description="What `nmem record --remote URL` sends. `key` makes a retry harmless; a "
                         "SessionStart answers with the context block to inject."),
    Endpoint("POST", f"{PREFIX}/hook", "Record a hook event from Claude Code's HTTP hook", claude_code_hook,
             tag="team", grouped=True,
             body_schema={"type": "object", "required": ["hook_event_name", "session_id", "cwd"]},
             description="The target of a `\"type\": \"http\"` hook in Claude Code's settings: the body is the "
                         "hook input itself. Nothing is spooled while the server is down; `nmem record --remote` "
                         "is the lossless way."),
    Endpoint("GET", f"{PREFIX}/audit", "Who wrote and forgot what (oldest first)", audit, s.AuditParams, tag="team"),
    Endpoint("GET", f"{PREFIX}/users", "Users and their live token counts (admin)", users, tag="team"),
    Endpoint("POST", f"{PREFIX}/users", "Add a user (admin)", add_user, body=s.NewUser, tag="team", status=201),
    Endpoint("POST", f"{PREFIX}/users/{{name}}/tokens", "Create a token; the secret is shown only here (admin)",
             create_token, s.UserPath, tag="team", status=201, path_params=("name",)),
    Endpoint("DELETE", f"{PREFIX}/tokens/{{target}}", "Revoke a token by id, or all of a user's (admin)",
             revoke_token, s.TokenPath, tag="team", path_params=("target",)),
)
