"""Writing the trail on PostgreSQL: sessions, prompts, observations, import marks, pins, purges."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nmem import jsonlite as json
from nmem.models import Session
from nmem.store.postgres.connection import SPOOL_MARK_DAYS, Connection
from nmem.store.records import OUTLINE_CHARS, ImportMark, NewObservation

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nmem.store.records import ObsOutline, PromptOutline


class TrailWrites(Connection):
    def ensure_session(self, session_id: str, project: str, started_at: int, root: str | None = None) -> Session:
        session = self.get_session(session_id)
        if session is None:
            self._exec("INSERT INTO sessions (id, project, started_at, root) VALUES (%s, %s, %s, %s) "
                       "ON CONFLICT (id) DO NOTHING", (session_id, project, started_at, root))
            session = self.get_session(session_id)
        assert session is not None
        return session

    def add_prompt(self, session_id: str, timestamp: int, source: str, content: str) -> int:
        rows = self._exec_returning(
            "INSERT INTO prompts (session_id, timestamp, source, content) VALUES (%s, %s, %s, %s) RETURNING id",
            (session_id, timestamp, source, content))
        return int(rows[0][0])

    def latest_prompt_id(self, session_id: str) -> int | None:
        rows = self._query("SELECT id FROM prompts WHERE session_id = %s AND source = 'user' "
                           "ORDER BY id DESC LIMIT 1", (session_id,))
        return int(rows[0][0]) if rows else None

    def add_observation(self, obs: NewObservation) -> int:
        rows = self._exec_returning(
            "INSERT INTO observations (session_id, project, prompt_id, timestamp, obs_type, source_event, "
            "tool_name, file_path, content, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (obs.session_id, obs.project, obs.prompt_id, obs.timestamp, obs.obs_type, obs.source_event,
             obs.tool_name, obs.file_path, obs.content,
             json.dumps(obs.metadata, sort_keys=True) if obs.metadata else None))
        return int(rows[0][0])

    def recent_duplicate(self, session_id: str, obs_type: str, file_path: str | None,
                         content: str, since: int) -> int | None:
        rows = self._query(
            "SELECT id FROM observations WHERE session_id = %s AND obs_type = %s "
            "AND file_path IS NOT DISTINCT FROM %s AND timestamp >= %s AND content = %s ORDER BY id DESC LIMIT 1",
            (session_id, obs_type, file_path, since, content))
        return int(rows[0][0]) if rows else None

    def close_session(self, session_id: str, ended_at: int, signature: dict[str, Any],
                      summary: dict[str, Any]) -> None:
        self._exec("UPDATE sessions SET ended_at = %s, signature = %s, summary = %s WHERE id = %s",
                   (ended_at, json.dumps(signature, sort_keys=True), json.dumps(summary), session_id))

    def session_outline(self, session_id: str) -> tuple[list[ObsOutline], list[PromptOutline]]:
        observations = [(str(r[0]), r[1], str(r[2]), r[3]) for r in self._query(
            f"SELECT obs_type, file_path, left(content, {OUTLINE_CHARS}), prompt_id "
            "FROM observations WHERE session_id = %s ORDER BY id", (session_id,))]
        prompts = [(int(r[0]), str(r[1]), str(r[2])) for r in self._query(
            f"SELECT id, source, left(content, {OUTLINE_CHARS}) FROM prompts WHERE session_id = %s ORDER BY id",
            (session_id,))]
        return observations, prompts

    def session_file_touches(self, session_id: str, file_path: str) -> int:
        return int(self._query("SELECT count(*) FROM observations WHERE session_id = %s AND file_path = %s "
                               "AND obs_type != 'file_error'", (session_id, file_path))[0][0])

    def has_prompt(self, session_id: str, source: str, content: str) -> bool:
        return bool(self._query("SELECT 1 FROM prompts WHERE session_id = %s AND source = %s AND content = %s "
                                "LIMIT 1", (session_id, source, content)))

    def import_marks(self, session_id: str) -> dict[str, ImportMark]:
        marks: dict[str, ImportMark] = {}
        for r in self._query("SELECT source, byte_offset, state, last_event_at FROM import_marks "
                             "WHERE session_id = %s", (session_id,)):
            state = json.loads(r["state"]) if r["state"] else None
            marks[str(r["source"])] = ImportMark(session_id, str(r["source"]), int(r["byte_offset"]),
                                                 state if isinstance(state, dict) else None, r["last_event_at"])
        return marks

    def save_import_mark(self, mark: ImportMark, updated_at: int) -> None:
        self._exec(
            "INSERT INTO import_marks (session_id, source, byte_offset, state, last_event_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, source) DO UPDATE SET "
            "byte_offset = excluded.byte_offset, state = excluded.state, "
            "last_event_at = COALESCE(excluded.last_event_at, import_marks.last_event_at), "
            "updated_at = excluded.updated_at",
            (mark.session_id, mark.source, mark.offset, json.dumps(mark.state) if mark.state else None,
             mark.last_event_at, updated_at))

    def session_last_activity(self, session_id: str) -> int | None:
        rows = self._query(
            "SELECT GREATEST((SELECT MAX(timestamp) FROM observations WHERE session_id = %s), "
            "(SELECT MAX(timestamp) FROM prompts WHERE session_id = %s), "
            "(SELECT ended_at FROM sessions WHERE id = %s))", (session_id,) * 3)
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_observation_pin(self, obs_id: int, pinned: bool) -> bool:
        return self._exec("UPDATE observations SET is_pinned = %s WHERE id = %s", (int(pinned), obs_id)) > 0

    def purge_observations(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        deleted = self._exec("DELETE FROM observations WHERE id = ANY(%s)", (list(ids),))
        self._scrub("observations")
        return deleted

    def purge_observations_where(self, obs_types: Sequence[str], older_than: int | None,
                                 project: str | None) -> int:
        clauses: list[str] = ["is_pinned = 0"]
        params: list[Any] = []
        if obs_types:
            clauses.append("obs_type = ANY(%s)")
            params.append(list(obs_types))
        if older_than is not None:
            clauses.append("timestamp < %s")
            params.append(older_than)
        if project is not None:
            clauses.append("project = %s")
            params.append(project)
        deleted = self._exec(f"DELETE FROM observations WHERE {' AND '.join(clauses)}", params)
        self._scrub("observations")
        return deleted

    def mark_spooled(self, spool_id: str, now: int) -> bool:
        """Mark a spooled event stored inside its write transaction; False when marked before."""
        self._exec("DELETE FROM spooled_events WHERE recorded_at < %s", (now - SPOOL_MARK_DAYS * 86400,))
        return self._exec("INSERT INTO spooled_events (id, recorded_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                          (spool_id, now)) == 1

    def reclaim(self) -> None:
        """After deletes made inside a caller's transactions (an import's batches)."""
        self._scrub("observations", "memories", "sync_ops")
