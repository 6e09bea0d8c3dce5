"""The team server's rows (nmem.team): users, token digests, the audit trail, writers."""

from __future__ import annotations

from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import marks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class TeamRows(SqlBase):
    # -- users and tokens ----------------------------------------------------------------------

    def team_active(self) -> bool:
        return bool(self._query("SELECT 1 FROM team_users LIMIT 1"))

    def add_user(self, name: str, admin: bool, now: int) -> bool:
        """False when the name is taken."""
        return self._exec("INSERT INTO team_users (name, is_admin, created_at) VALUES (?, ?, ?) "
                          "ON CONFLICT (name) DO NOTHING", (name, int(admin), now)) > 0

    def list_users(self) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT u.name, u.is_admin, u.created_at, "
            "(SELECT COUNT(*) FROM team_tokens t WHERE t.user_id = u.id AND t.revoked_at IS NULL) AS tokens "
            "FROM team_users u ORDER BY u.name")
        return [{"name": r["name"], "admin": bool(r["is_admin"]), "created_at": int(r["created_at"]),
                 "tokens": int(r["tokens"])} for r in rows]

    def add_token(self, user: str, digest: str, now: int) -> int | None:
        """The new token's id, or None when there is no such user."""
        with self.transaction():
            rows = self._query("SELECT id FROM team_users WHERE name = ?", (user,))
            if not rows:
                return None
            return self._insert_id("INSERT INTO team_tokens (user_id, digest, created_at) VALUES (?, ?, ?)",
                                   (rows[0]["id"], digest, now))

    def revoke_tokens(self, token_id: int | None, user: str | None, now: int) -> int:
        """Revoke one token by id, or every live token of a user; how many were revoked."""
        if token_id is not None:
            return self._exec("UPDATE team_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                              (now, token_id))
        return self._exec("UPDATE team_tokens SET revoked_at = ? WHERE revoked_at IS NULL AND user_id = "
                          "(SELECT id FROM team_users WHERE name = ?)", (now, user))

    def list_tokens(self, user: str | None) -> list[dict[str, Any]]:
        where, params = ("WHERE u.name = ?", (user,)) if user else ("", ())
        rows = self._query("SELECT t.id, u.name, t.created_at, t.revoked_at FROM team_tokens t "
                           f"JOIN team_users u ON u.id = t.user_id {where} ORDER BY t.id", params)
        return [{"id": int(r["id"]), "name": r["name"], "created_at": int(r["created_at"]),
                 "revoked_at": None if r["revoked_at"] is None else int(r["revoked_at"])} for r in rows]

    def token_user(self, digest: str) -> tuple[str, bool] | None:
        """(user name, is admin) of a live token, by its digest."""
        rows = self._query("SELECT u.name, u.is_admin FROM team_tokens t JOIN team_users u ON u.id = t.user_id "
                           "WHERE t.digest = ? AND t.revoked_at IS NULL", (digest,))
        return (rows[0]["name"], bool(rows[0]["is_admin"])) if rows else None

    # -- writers and the audit trail -----------------------------------------------------------

    def record_writes(self, user: str, now: int, writes: Sequence[tuple[str, str]],
                      memories: Sequence[str] = (), observations: Sequence[int] = ()) -> None:
        """Audit rows `(action, urn)` and the writer of the memories and observations named."""
        with self.transaction():
            for action, urn in writes:
                self._exec("INSERT INTO audit (at, username, action, urn) VALUES (?, ?, ?, ?)",
                           (now, user, action, urn))
            for uid in memories:
                self._exec("UPDATE memories SET writer = ? WHERE uid = ? AND writer IS NULL", (user, uid))
            for oid in observations:
                self._exec("UPDATE observations SET writer = ? WHERE id = ? AND writer IS NULL", (user, oid))

    def memory_writers(self, uids: Sequence[str]) -> dict[str, str | None]:
        if not uids:
            return {}
        return {r["uid"]: r["writer"] for r in
                self._query(f"SELECT uid, writer FROM memories WHERE uid IN ({marks(len(uids))})", list(uids))}

    def observation_writers(self, ids: Sequence[int]) -> dict[int, str | None]:
        if not ids:
            return {}
        return {int(r["id"]): r["writer"] for r in
                self._query(f"SELECT id, writer FROM observations WHERE id IN ({marks(len(ids))})", list(ids))}

    def audit_rows(self, user: str | None, after: int, limit: int) -> list[dict[str, Any]]:
        where = ["id > ?"]
        params: list[Any] = [after]
        if user:
            where.append("username = ?")
            params.append(user)
        params.append(limit)
        rows = self._query(f"SELECT id, at, username, action, urn FROM audit WHERE {' AND '.join(where)} "
                           "ORDER BY id LIMIT ?", params)
        return [{"id": int(r["id"]), "at": int(r["at"]), "user": r["username"], "action": r["action"],
                 "urn": r["urn"]} for r in rows]
