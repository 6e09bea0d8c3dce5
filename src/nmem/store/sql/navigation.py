"""Navigation: a timeline's neighbours, sessions by prefix and by time, recorded paths, purge
selections."""

from __future__ import annotations

from nmem.models import Observation, Session
from nmem.store.records import SessionListing
from nmem.store.sql.base import OBS_COLUMNS_O, SqlBase
from nmem.store.sql.filters import agent_match, observation_filters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.store.records import SearchFilters


LAST_CHAR = chr(0x10FFFF)  # sorts after any character: `id < prefix + LAST_CHAR` bounds a prefix scan

LIFECYCLE_TYPES = ("session_start", "session_resume", "session_compact", "session_clear", "session_end")

PURGE_BATCH = 10_000


class NavigationReads(SqlBase):
    # -- navigation: neighbours, sessions by prefix and by time, recorded paths, purges -----

    def neighbours(self, anchor: Observation, before: int, after: int, filters: SearchFilters | None = None
                   ) -> tuple[list[Observation], list[Observation]]:
        """The `before` observations of the anchor's session just before it (by id) and the
        `after` just after it, oldest first, of those that pass `filters` (the nearest that
        pass, not the nearest overall; the session is the anchor's whatever `filters` say)."""
        clauses, params = ["o.session_id = ?"], [anchor.session_id]
        if filters is not None:
            observation_filters(filters.replace(session_id=None), clauses, params)
        where = " AND ".join(clauses)
        prev = self._query(f"SELECT {OBS_COLUMNS_O} FROM observations o WHERE {where} AND o.id < ? "
                           "ORDER BY o.id DESC LIMIT ?", [*params, anchor.id, before])
        nxt = self._query(f"SELECT {OBS_COLUMNS_O} FROM observations o WHERE {where} AND o.id > ? "
                          "ORDER BY o.id LIMIT ?", [*params, anchor.id, after])
        return [Observation.from_row(r) for r in reversed(prev)], [Observation.from_row(r) for r in nxt]

    def sessions_by_prefix(self, prefix: str, limit: int) -> list[Session]:
        """Sessions whose id starts with `prefix`, newest first: a range scan of the key."""
        b = self.dialect.binary
        rows = self._query(f"SELECT * FROM sessions WHERE id{b} >= ? AND id{b} < ? "
                           f"ORDER BY started_at DESC, id{b} LIMIT ?", (prefix, prefix + LAST_CHAR, limit))
        return [Session.from_row(r) for r in rows]

    def list_sessions(self, project: str | None, since: int | None, limit: int, *,
                      active: bool = False, agents: tuple[str, ...] = ()) -> list[SessionListing]:
        """Sessions newest first (by start), with their user prompts and actions counted;
        `since` keeps those started or ended at or after it, `active` those with content (a
        prompt or an observation other than a session's start, resume, compaction, clear or end),
        `agents` those one of these agents ran."""
        clauses: list[str] = []
        params: list[Any] = []
        if project is not None:
            clauses.append("s.project = ?")
            params.append(project)
        if since is not None:
            clauses.append("(s.started_at >= ? OR s.ended_at >= ?)")
            params.extend([since, since])
        if agents:
            clauses.append(agent_match("s", agents))
            params.extend(agents)
        lifecycle = ", ".join(f"'{t}'" for t in LIFECYCLE_TYPES)
        if active:  # content: a prompt or an action; a session that only started has none
            clauses.append(f"(EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id "
                           f"AND o.obs_type NOT IN ({lifecycle})) "
                           "OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id))")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(
            "SELECT s.*, "
            "(SELECT count(*) FROM prompts p WHERE p.session_id = s.id AND p.source = 'user') AS n_prompts, "
            "(SELECT count(*) FROM observations o WHERE o.session_id = s.id "
            f"AND o.obs_type NOT IN ({lifecycle})) AS n_actions, "
            "(SELECT p.content FROM prompts p WHERE p.session_id = s.id AND p.source = 'user' "
            "ORDER BY p.id LIMIT 1) AS first_prompt "
            f"FROM sessions s {where} ORDER BY s.started_at DESC, s.id{self.dialect.binary} LIMIT ?", [*params, limit])
        return [SessionListing(Session.from_row(r), int(r["n_prompts"]), int(r["n_actions"]), r["first_prompt"])
                for r in rows]

    def recorded_paths(self, suffix: str, project: str | None, limit: int) -> list[str]:
        """Distinct recorded file paths (of `project`, if given) equal to `suffix` or, for a
        relative one, ending in `/suffix` (a whole path component: "auth.py" is not
        "oauth.py"), sorted."""
        in_project = "" if project is None else " AND EXISTS (SELECT 1 FROM observations o " \
                                                 "WHERE o.file_path = paths.path AND o.project = ?)"
        tail = "/" + suffix
        if suffix.startswith("/"):
            rows = self._query("SELECT path FROM (SELECT DISTINCT file_path AS path FROM observations "
                               f"WHERE file_path = ?) paths WHERE TRUE{in_project} LIMIT ?",
                               [suffix, *([project] if project is not None else []), limit])
        else:
            # A skip scan of the file_path index, one seek per distinct path: rows outnumber paths
            # (a path is read again and again), so reading every row would cost far more.
            rows = self._query(
                "WITH RECURSIVE paths(path) AS ("
                "SELECT MIN(file_path) FROM observations WHERE file_path IS NOT NULL "
                "UNION ALL SELECT (SELECT MIN(file_path) FROM observations WHERE file_path > paths.path) "
                "FROM paths WHERE paths.path IS NOT NULL) "
                "SELECT path FROM paths WHERE (path = ? OR substr(path, length(path) - ?) = ?)"
                f"{in_project} ORDER BY path{self.dialect.binary} LIMIT ?",
                [suffix, len(tail) - 1, tail, *([project] if project is not None else []), limit])
        return [str(r[0]) for r in rows]

    def observation_ids(self, match: str | None, filters: SearchFilters, *, unpinned: bool = True) -> list[int]:
        """Every observation the full-text match (all rows when None) and the filters select,
        in id order, pinned rows left out when `unpinned`: what a purge by query takes."""
        clauses: list[str] = ["o.is_pinned = 0"] if unpinned else []
        params: list[Any] = []
        if match is not None:
            found = self._text_match("observations", "o", match)
            if found is None:
                return []
            clauses.append(found[0])
            params.append(found[1])
        observation_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return [int(r[0]) for r in self._query(f"SELECT o.id FROM observations o {where} ORDER BY o.id", params)]

    def purge_observations_matching(self, match: str | None, filters: SearchFilters) -> int:
        """Delete what `observation_ids` selects (pinned rows kept), in one transaction."""
        deleted = 0
        with self.transaction():
            ids = self.observation_ids(match, filters)
            for start in range(0, len(ids), PURGE_BATCH):
                batch = self.dialect.in_ids("id", ids[start:start + PURGE_BATCH])
                deleted += self._exec(f"DELETE FROM observations WHERE {batch[0]}", (batch[1],))
            if deleted:
                self._forget_bytes("observations")
        if deleted:
            self._scrub("observations")
        return deleted
