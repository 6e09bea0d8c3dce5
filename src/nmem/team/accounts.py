"""The team server's users, tokens and audit trail, over any store that keeps them.

A store with no user is single-user nmem, exactly as before: the server's own token (if any)
guards it and nothing is attributed. Once `nmem user add` creates the first user, every HTTP
request must carry one user's token, and the service acts for that user (`nmem.team.access`).

Tokens are 32 random bytes shown once; the store keeps only their sha256 digest, so a copy
of the database grants nothing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, cast

from nmem.errors import ConfigError, Forbidden, InvalidArgument, NotFound, ValidationError
from nmem.store.protocol import TeamStore
from nmem.team.access import Viewer, current

TOKEN_PREFIX = "nmem_"
USER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def digest(token: str) -> str:
    return hashlib.sha256(token.strip().encode()).hexdigest()


def team_store(store: Any) -> TeamStore:
    if not hasattr(store, "team_active"):
        raise ConfigError(f"the {type(store).__name__} engine keeps no users: it serves one user only")
    return cast(TeamStore, store)


def active(store: Any) -> bool:
    """Whether users exist: the server then demands a user's token on every request."""
    return hasattr(store, "team_active") and bool(store.team_active())


def authenticate(store: Any, token: str) -> Viewer | None:
    """The user a live token belongs to, else None."""
    if not token or not hasattr(store, "token_user"):
        return None
    found = team_store(store).token_user(digest(token))
    return Viewer(found[0], found[1]) if found else None


def authenticate_digest(store: Any, token_digest: str) -> Viewer | None:
    """The user a live token (known by its digest, as the viewer's cookie holds it) belongs to."""
    if not token_digest or not hasattr(store, "token_user"):
        return None
    found = team_store(store).token_user(token_digest)
    return Viewer(found[0], found[1]) if found else None


def require_admin(what: str = "this") -> None:
    """Refuse a signed-in user who is not an admin (Forbidden, HTTP 403, an MCP error): the
    server-wide operations (users, tokens, settings, sync) are an admin's. Locally (no viewer)
    whoever may open the database may."""
    viewer = current()
    if viewer is not None and not viewer.admin:
        raise Forbidden(f"{what} is an admin's task on a team server; {viewer.name} is not an admin")


def _require_admin() -> None:
    require_admin("managing users and tokens")


def add_user(store: Any, name: str, admin: bool, now: int) -> dict[str, Any]:
    _require_admin()
    name = (name or "").strip()
    if not USER_NAME.match(name):
        raise ValidationError(f"invalid user name {name!r}: lower-case letters, digits, '.', '_' or '-' "
                              "(at most 64, starting with a letter or digit)")
    if not team_store(store).add_user(name, admin, now):
        raise InvalidArgument(f"user {name} already exists")
    return {"name": name, "admin": admin}


def users(store: Any) -> list[dict[str, Any]]:
    _require_admin()
    return team_store(store).list_users()


def create_token(store: Any, user: str, now: int) -> dict[str, Any]:
    """A new token for `user`: the secret is in the answer and nowhere else."""
    _require_admin()
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = team_store(store).add_token(user, digest(token), now)
    if token_id is None:
        raise NotFound(f"no such user: {user}")
    return {"id": token_id, "user": user, "token": token}


def revoke(store: Any, ref: str, now: int) -> dict[str, Any]:
    """Revoke one token by id (as `token list` shows it), or all of a user's by name."""
    _require_admin()
    ref = (ref or "").strip()
    if not ref:
        raise InvalidArgument("name a token id or a user")
    ts = team_store(store)
    if ref.isdigit():
        count = ts.revoke_tokens(int(ref), None, now)
    else:
        if not any(u["name"] == ref for u in ts.list_users()):
            raise NotFound(f"no such user: {ref}")
        count = ts.revoke_tokens(None, ref, now)
    if ref.isdigit() and not count:
        raise NotFound(f"no live token {ref}")
    return {"revoked": count}


def tokens(store: Any, user: str | None = None) -> list[dict[str, Any]]:
    _require_admin()
    return team_store(store).list_tokens(user)


def audit(store: Any, user: str | None = None, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
    """Audit rows oldest first after row `after`; over HTTP a non-admin reads only their own."""
    viewer = current()
    if viewer is not None and not viewer.admin:
        if user not in (None, viewer.name):
            raise Forbidden("only an admin reads other users' audit rows")
        user = viewer.name
    if limit < 1 or limit > 10_000:
        raise ValidationError("limit must be 1-10000")
    return team_store(store).audit_rows(user, max(0, after), limit)
