"""Writing the trail: sessions, prompts, observations, import marks, pins and purges."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.models import Session
from nmem.store.records import OUTLINE_CHARS, ImportMark
from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import marks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from nmem.store.records import NewObservation, ObsOutline, PromptOutline

SPOOL_MARK_DAYS = 30


class TrailWrites(SqlBase):
    # -- trail writes --------------------------------------------------------------------

    def get_session(self, session_id: str) -> Session | None:
        return self.get_sessions([session_id]).get(session_id)

    def get_sessions(self, session_ids: Sequence[str]) -> dict[str, Session]:
        """Several sessions in one read, by id (an unknown id is left out)."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return {}
        rows = self._query(f"SELECT * FROM sessions WHERE id IN ({marks(len(ids))})", ids)
        return {str(r["id"]): Session.from_row(r) for r in rows}

    def ensure_session(self, session_id: str, project: str, started_at: int, root: str | None = None,
                       agent: str | None = None) -> Session:
        session = self.get_session(session_id)  # most events belong to a session already stored
        if session is None:
            self._exec(
                "INSERT INTO sessions (id, project, started_at, root, agent) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO NOTHING",
                (session_id, project, started_at, root, agent),
            )
            session = self.get_session(session_id)
        assert session is not None
        return session

    def add_prompt(self, session_id: str, timestamp: int, source: str, content: str) -> int:
        prompt_id = self._insert_id(
            "INSERT INTO prompts (session_id, timestamp, source, content) VALUES (?, ?, ?, ?)",
            (session_id, timestamp, source, content),
        )
        known = self._known_prompts()
        if source == "user" and known is not None:
            known[session_id] = prompt_id
        return prompt_id

    def latest_prompt_id(self, session_id: str) -> int | None:
        known = self._known_prompts()
        if known is not None and session_id in known:
            return known[session_id]
        rows = self._query(
            # The user's directive frames what follows; agent reasoning does not replace it.
            "SELECT id FROM prompts WHERE session_id = ? AND source = 'user' ORDER BY id DESC LIMIT 1",
            (session_id,)
        )
        found = int(rows[0]["id"]) if rows else None
        if known is not None:
            known[session_id] = found
        return found

    def prompt_time(self, prompt_id: int) -> int | None:
        """When the prompt was stored (None for an unknown id): what a Stop needs of its turn's
        prompt, read here so the hook does not load the search concern for `get_prompts`."""
        rows = self._query("SELECT timestamp FROM prompts WHERE id = ?", (prompt_id,))
        return int(rows[0][0]) if rows else None

    def add_observation(self, obs: NewObservation) -> int:
        return self._insert_id(
            "INSERT INTO observations (session_id, project, prompt_id, timestamp, obs_type, "
            "source_event, tool_name, file_path, content, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (obs.session_id, obs.project, obs.prompt_id, obs.timestamp, obs.obs_type,
             obs.source_event, obs.tool_name, obs.file_path, obs.content,
             json.dumps(obs.metadata, sort_keys=True) if obs.metadata else None),
        )

    def recent_duplicate(self, session_id: str, obs_type: str, file_path: str | None,
                         content: str, since: int) -> int | None:
        rows = self._query(
            "SELECT id FROM observations WHERE session_id = ? AND obs_type = ? "
            f"AND file_path {self.dialect.same_as} ? AND timestamp >= ? AND content = ? ORDER BY id DESC LIMIT 1",
            (session_id, obs_type, file_path, since, content),
        )
        return int(rows[0]["id"]) if rows else None

    def close_session(self, session_id: str, ended_at: int, signature: dict[str, Any],
                      summary: dict[str, Any]) -> None:
        self._exec(
            "UPDATE sessions SET ended_at = ?, signature = ?, summary = ? WHERE id = ?",
            (ended_at, json.dumps(signature, sort_keys=True), json.dumps(summary), session_id),
        )

    # What a session summary reads: the first OUTLINE_CHARS of each text, no metadata. Stop
    # runs on every turn, so it must not re-read and re-decode a long session's full rows.
    def session_outline(self, session_id: str) -> tuple[list[ObsOutline], list[PromptOutline]]:
        observations = [
            (str(r[0]), r[1], str(r[2]), r[3]) for r in self._query(
                f"SELECT obs_type, file_path, substr(content, 1, {OUTLINE_CHARS}), prompt_id "
                "FROM observations WHERE session_id = ? ORDER BY id", (session_id,))
        ]
        prompts = [
            (int(r[0]), str(r[1]), str(r[2])) for r in self._query(
                f"SELECT id, source, substr(content, 1, {OUTLINE_CHARS}) FROM prompts "
                "WHERE session_id = ? ORDER BY id", (session_id,))
        ]
        return observations, prompts

    def session_file_touches(self, session_id: str, file_path: str) -> int:
        rows = self._query("SELECT count(*) FROM observations WHERE session_id = ? AND file_path = ? "
                           "AND obs_type != 'file_error'", (session_id, file_path))
        return int(rows[0][0])

    # -- transcript imports -----------------------------------------------------------------

    def import_marks(self, session_id: str) -> dict[str, ImportMark]:
        marks: dict[str, ImportMark] = {}
        for r in self._query("SELECT source, byte_offset, state, last_event_at FROM import_marks "
                             "WHERE session_id = ?", (session_id,)):
            state = json.loads(r["state"]) if r["state"] else None
            marks[str(r["source"])] = ImportMark(session_id, str(r["source"]), int(r["byte_offset"]),
                                                 state if isinstance(state, dict) else None, r["last_event_at"])
        return marks

    def save_import_mark(self, mark: ImportMark, updated_at: int) -> None:
        self._exec(
            "INSERT INTO import_marks (session_id, source, byte_offset, state, last_event_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_id, source) DO UPDATE SET "
            "byte_offset = excluded.byte_offset, state = excluded.state, "
            "last_event_at = COALESCE(excluded.last_event_at, import_marks.last_event_at), "
            "updated_at = excluded.updated_at",
            (mark.session_id, mark.source, mark.offset, json.dumps(mark.state) if mark.state else None,
             mark.last_event_at, updated_at),
        )

    def session_last_activity(self, session_id: str) -> int | None:
        rows = self._query(
            "SELECT MAX(t) FROM (SELECT MAX(timestamp) AS t FROM observations WHERE session_id = ? "
            "UNION ALL SELECT MAX(timestamp) FROM prompts WHERE session_id = ? "
            "UNION ALL SELECT ended_at FROM sessions WHERE id = ?) AS times", (session_id,) * 3)
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_observation_pin(self, obs_id: int, pinned: bool) -> bool:
        return self._exec("UPDATE observations SET is_pinned = ? WHERE id = ?", (int(pinned), obs_id)) > 0

    def purge_observations(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        where = self.dialect.in_ids("id", ids)
        with self.transaction():
            deleted = self._exec(f"DELETE FROM observations WHERE {where[0]}", (where[1],))
            if deleted:
                self._forget_bytes("observations")
        self._scrub("observations")
        return deleted

    def purge_observations_where(self, obs_types: Sequence[str], older_than: int | None,
                                 project: str | None) -> int:
        clauses: list[str] = ["is_pinned = 0"]  # pins exempt a row from retention
        params: list[Any] = []
        if obs_types:
            clauses.append(f"obs_type IN ({marks(len(obs_types))})")
            params.extend(obs_types)
        if older_than is not None:
            clauses.append("timestamp < ?")
            params.append(older_than)
        if project is not None:
            clauses.append("project = ?")
            params.append(project)
        with self.transaction():
            deleted = self._exec(f"DELETE FROM observations WHERE {' AND '.join(clauses)}", params)
            if deleted:
                self._forget_bytes("observations")
        self._scrub("observations")
        return deleted

    # Forgetting means gone: a deleted row's words must not stay readable in the file.
    # - secure_delete (set on the writer) zeroes the row, its index entries and freed pages;
    # - an FTS5 delete only appends a "deleted" marker: the word stays in the old segment until a
    #   merge rewrites it, so the index is optimized (merged into one segment) in the delete's own
    #   transaction. FTS5's 'secure-delete' option (SQLite 3.42+) would avoid the rewrite, but it
    #   bumps the index format for good: an SQLite before 3.42 (Debian 12's, this project's CI)
    #   could no longer read the file. Never on the hook path: forget and purge are commands;
    # - the WAL still holds the old pages: after the commit a checkpoint folds it into the file
    #   and truncates it.

    def mark_spooled(self, spool_id: str, now: int) -> bool:
        """Mark a spooled event stored, inside its own write transaction; False when it was marked
        before (a hook killed after committing it but before unlinking its spool file: the
        replay stores nothing). Marks older than SPOOL_MARK_DAYS go: a claim left behind is
        replayed by the next drain long before."""
        self._exec("DELETE FROM spooled_events WHERE recorded_at < ?", (now - SPOOL_MARK_DAYS * 86400,))
        return self._exec("INSERT INTO spooled_events (id, recorded_at) VALUES (?, ?) ON CONFLICT(id) DO NOTHING",
                          (spool_id, now)) == 1

    def reclaim(self) -> None:
        """After deletes made inside a caller's transactions (an import's batches): what each
        delete does on its own once its transaction ends (see `_scrub`)."""
        self._scrub("observations", "memories", "sync_ops")
