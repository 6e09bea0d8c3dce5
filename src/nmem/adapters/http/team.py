"""The team server's endpoints: remote capture (`POST /api/v1/events`), the audit trail, and
user and token management for admins. Who the request acts for is `nmem.team.access.current()`,
set by the guard from the user's token (`TeamAuth`)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from nmem.adapters.http import schemas as s
from nmem.adapters.http.api import PREFIX
from nmem.adapters.http.routing import Context, Endpoint, ThenRead
from nmem.capture import events as ev
from nmem.capture.agents import parse
from nmem.context.block import render
from nmem.errors import Forbidden, NmemError
from nmem.service.api import Service
from nmem.store.protocol import Store
from nmem.team import accounts as team
from nmem.team import stamp as team_stamp
from nmem.team.access import SCOPE_KEY, Viewer, current

REMOTE_SPOOL_PREFIX = "remote:"
COOKIE = "nmem_session"
# Signs the viewer's cookies; made at start and never stored, so neither a copy of the database
# (which holds the tokens' digests) nor an old cookie after a restart signs anyone in.
_COOKIE_KEY = secrets.token_bytes(32)
CACHED_TOKENS = 10_000   # tokens kept at most (only live ones are ever kept)


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


def _token_digest(headers: Mapping[str, str]) -> str | None:
    """The digest of the request's token (a bearer token, or the one the viewer's cookie signs in)."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        token = auth[7:].strip()
        return team.digest(token) if token else None
    return _cookie_digest(headers.get("cookie", ""))


class TeamAuth:
    """The guard's user check: a user's token as `Authorization: Bearer`, or the cookie
    `/login?token=` set, looked up in the store.

    A live token's user is kept for `cache_seconds` (`http.token_cache_ms`), so the usual request
    needs no read (`cached`). A revocation through the server (any worker) or by `nmem token revoke`
    with the server's home rewrites the home's stamp (`nmem.team.stamp`), which voids every kept
    answer at once: the token is refused from the next request. One revoked elsewhere (another
    machine's CLI on the same PostgreSQL) is refused within `cache_seconds`. Unknown and revoked
    tokens are never kept: each is read again."""

    def __init__(self, store: Store, cache_seconds: float = 0.0, home: str | None = None) -> None:
        self.store = store
        self.home = home
        self.cache_seconds = max(0.0, cache_seconds) if home is not None else 0.0
        self.stamp: team_stamp.Stamp | None = None   # mapped when the first live token is kept
        self._kept: dict[str, tuple[Viewer, float, bytes]] = {}   # digest -> (user, read at, stamp)
        self._renewing: dict[str, float] = {}   # digest -> when a read to renew it was asked for
        self._lock = threading.Lock()

    def active(self) -> bool:
        return team.active(self.store)

    def cached(self, headers: Mapping[str, str]) -> tuple[Viewer | None, bool]:
        """The user of the request's token if a recent check is still good, else None (then
        `viewer` reads it); and whether the caller should read it again now, in the background
        (the check is past half its time and nobody did lately): under load a token's check is
        renewed before it runs out, rather than all its requests missing it at once. Reads
        nothing: the event loop may call it."""
        if self.stamp is None:
            return None, False
        digest = _token_digest(headers)
        kept = self._kept.get(digest) if digest else None
        if kept is None or not digest:
            return None, False
        viewer, read_at, stamp = kept
        now = time.monotonic()
        if now - read_at >= self.cache_seconds or stamp != self.stamp.read():
            return None, False
        half = self.cache_seconds / 2
        if now - read_at < half or now - self._renewing.get(digest, -half) < half:
            return viewer, False
        self._renewing[digest] = now
        return viewer, True

    def viewer(self, headers: Mapping[str, str], reuse: bool = True) -> Viewer | None:
        """The request's user, read from the store. `reuse`: a kept check younger than half its
        time answers instead (one older is what `cached` asks to renew, and is read again): the
        requests that found nothing kept and queued for the check threads meanwhile (a server
        just started, 250 clients at once on two tokens) take the first read's answer rather
        than each reading again, a whole burst's wait on two threads."""
        digest = _token_digest(headers)
        if not digest:
            return None
        mapped = self._stamp()
        if mapped is None:
            return team.authenticate_digest(self.store, digest)
        stamp, read_at = mapped.read(), time.monotonic()   # before the read: a change during it voids it
        kept = self._kept.get(digest) if reuse else None
        if kept is not None and read_at - kept[1] < self.cache_seconds / 2 and kept[2] == stamp:
            return kept[0]
        found = team.authenticate_digest(self.store, digest)
        with self._lock:
            if found is None:   # revoked meanwhile (elsewhere: the stamp unchanged): nothing kept answers for it
                self._kept.pop(digest, None)
                return None
            if len(self._kept) >= CACHED_TOKENS:
                self._kept.clear()
                self._renewing.clear()
            self._kept[digest] = (found, read_at, stamp)
        return found

    def _stamp(self) -> team_stamp.Stamp | None:
        """The home's stamp, mapped on first need (so a single-user server writes none); None when
        nothing is kept, also when the stamp cannot be had (then nothing ever is: without it a
        revocation would go unseen)."""
        if self.stamp is None and self.cache_seconds and self.home is not None:
            with self._lock:
                if self.stamp is None:
                    try:
                        self.stamp = team_stamp.Stamp(self.home)
                    except OSError:
                        self.cache_seconds = 0.0
        return self.stamp

    def close(self) -> None:
        """Keep nothing more and unmap the stamp (the server stops)."""
        self.cache_seconds = 0.0
        stamp, self.stamp = self.stamp, None
        if stamp is not None:
            stamp.close()

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
        now = self.viewer(headers, reuse=False)
        return now is not None and now.name == opened_as.name


class OtherStore(NmemError):
    """A local hook's event names a store this server does not serve."""

    http_status = 409
    kind = "other_store"


def record_event(ctx: Context, _: None, b: s.RemoteEvent) -> dict[str, Any] | ThenRead:
    """Store one hook event sent by a remote `nmem record --remote`; a repeated key stores nothing.
    A SessionStart answers with its context block, rendered once the event is committed."""
    service = ctx.service
    if b.store is not None and b.store != service.settings.store_digest():
        raise OtherStore("this server serves another store than the sender's (store.url differs)")
    event = parse(dict(b.event), now=b.received_at)
    outcome = service.record_event(event, spool_id=REMOTE_SPOOL_PREFIX + b.key)
    answer: dict[str, Any] = {"session_id": outcome.session_id, "project": outcome.project,
                              "stored": outcome.stored, "skipped": outcome.skipped,
                              "observation_id": outcome.observation_id, "prompt_id": outcome.prompt_id}
    if event.kind != ev.SESSION_START or outcome.skipped == "disabled":
        return answer

    def with_context() -> dict[str, Any]:
        return {**answer, "context": _context(service, outcome.project, event)}
    return ThenRead(with_context)


def claude_code_hook(ctx: Context, _: Any, body: dict[str, Any]) -> dict[str, Any] | ThenRead:
    """Claude Code's own HTTP hook (`"type": "http"`) POSTs the bare hook input: stored without a
    key (a retry stores again) and never spooled (the event is gone while the server is down).
    Answers in the hook output format: a SessionStart's context as `additionalContext`."""
    event = parse(body)
    service = ctx.service
    outcome = service.record_event(event)
    if event.kind != ev.SESSION_START or outcome.skipped == "disabled":
        return {}

    def hook_output() -> dict[str, Any]:
        text = _context(service, outcome.project, event)
        if not text:
            return {}
        return {"hookSpecificOutput": {"hookEventName": event.hook_event_name, "additionalContext": text}}
    return ThenRead(hook_output)


def _context(service: Service, project: str, event: ev.HookEvent) -> str:
    """A SessionStart's context block. Runs on a read thread after the event is committed
    (`ThenRead`): rendering it on the writer thread held every write behind it, and its
    transaction open, 40-90 ms a SessionStart under load. Read in one snapshot: a block of one
    moment, and on PostgreSQL one connection for its dozen reads rather than one each."""
    try:
        with service.store.read_snapshot():
            return render(service, project, event.source, event.timestamp,
                          session_id=event.session_id or None, cwd=event.cwd or None)
    except NmemError:
        return ""   # as `render`: a store that cannot answer never fails the hook


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
    try:
        return team.revoke(ctx.service.store, p.target, ctx.service.now())
    finally:   # committed (or not at all): every worker's kept checks are void before the answer
        team_stamp.bump(ctx.service.settings.home)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("POST", f"{PREFIX}/events", "Record a hook event sent from another machine", record_event,
             body=s.RemoteEvent, tag="team", grouped=True, write_kind=lambda b: str(b.event.get("hook_event_name")),
             description="What `nmem record --remote URL` sends. `key` makes a retry harmless; a "
                         "SessionStart answers with the context block to inject."),
    Endpoint("POST", f"{PREFIX}/hook", "Record a hook event from Claude Code's HTTP hook", claude_code_hook,
             tag="team", grouped=True, write_kind=lambda b: str(b.get("hook_event_name")),
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
