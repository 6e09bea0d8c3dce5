"""Navigation on PostgreSQL: sessions by prefix and by time, recorded paths, purge selections."""

from __future__ import annotations

from typing import Any

from nmem.models import Session
from nmem.store.postgres.connection import Connection, tsquery
from nmem.store.postgres.filters import observation_filters
from nmem.store.records import SearchFilters, SessionListing
from nmem.store.sqlite.navigation import LIFECYCLE_TYPES


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class NavigationReads(Connection):
    def sessions_by_prefix(self, prefix: str, limit: int) -> list[Session]:
        rows = self._query("SELECT * FROM sessions WHERE id LIKE %s ESCAPE '\\' "
                           "ORDER BY started_at DESC, id COLLATE \"C\" LIMIT %s", (_like_prefix(prefix), limit))
        return [Session.from_row(r) for r in rows]

    def list_sessions(self, project: str | None, since: int | None, limit: int, *,
                      active: bool = False) -> list[SessionListing]:
        clauses: list[str] = []
        params: list[Any] = []
        if project is not None:
            clauses.append("s.project = %s")
            params.append(project)
        if since is not None:
            clauses.append("(s.started_at >= %s OR s.ended_at >= %s)")
            params.extend([since, since])
        if active:
            clauses.append("(EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id) "
                           "OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id))")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(
            "SELECT s.*, "
            "(SELECT count(*) FROM prompts p WHERE p.session_id = s.id AND p.source = 'user') AS n_prompts, "
            "(SELECT count(*) FROM observations o WHERE o.session_id = s.id "
            "AND NOT (o.obs_type = ANY(%s))) AS n_actions, "
            "(SELECT p.content FROM prompts p WHERE p.session_id = s.id AND p.source = 'user' "
            "ORDER BY p.id LIMIT 1) AS first_prompt "
            f"FROM sessions s {where} ORDER BY s.started_at DESC, s.id COLLATE \"C\" LIMIT %s",
            [list(LIFECYCLE_TYPES), *params, limit])
        return [SessionListing(Session.from_row(r), int(r["n_prompts"]), int(r["n_actions"]), r["first_prompt"])
                for r in rows]

    def recorded_paths(self, suffix: str, project: str | None, limit: int) -> list[str]:
        """Distinct recorded file paths (of `project`) equal to `suffix` or ending in `/suffix`."""
        clauses = ["file_path IS NOT NULL"]
        params: list[Any] = []
        if suffix.startswith("/"):
            clauses.append("file_path = %s")
            params.append(suffix)
        else:
            clauses.append("(file_path = %s OR right(file_path, %s) = %s)")
            params.extend([suffix, len(suffix) + 1, "/" + suffix])
        if project is not None:
            clauses.append("project = %s")
            params.append(project)
        rows = self._query(f"SELECT DISTINCT file_path COLLATE \"C\" AS path FROM observations "
                           f"WHERE {' AND '.join(clauses)} ORDER BY 1 LIMIT %s", [*params, limit])
        return [str(r[0]) for r in rows]

    def observation_ids(self, match: str | None, filters: SearchFilters, *, unpinned: bool = True) -> list[int]:
        clauses: list[str] = ["o.is_pinned = 0"] if unpinned else []
        params: list[Any] = []
        if match is not None:
            q = tsquery(match)
            if q is None:
                return []
            clauses.append("o.tsv @@ to_tsquery('nmem', %s)")
            params.append(q)
        observation_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return [int(r[0]) for r in self._query(f"SELECT o.id FROM observations o {where} ORDER BY o.id", params)]

    def purge_observations_matching(self, match: str | None, filters: SearchFilters) -> int:
        with self.transaction():
            ids = self.observation_ids(match, filters)
            deleted = self._exec("DELETE FROM observations WHERE id = ANY(%s)", (ids,)) if ids else 0
        self._scrub("observations")
        return deleted
