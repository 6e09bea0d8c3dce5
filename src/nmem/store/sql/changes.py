"""What was written since a cursor, by any process: the change feed's reads (nmem.changefeed),
the versions MCP subscriptions compare, and activity by day."""

from __future__ import annotations

from nmem.models import Observation, Prompt
from nmem.store.records import day_counts
from nmem.store.sql.base import OBS_COLUMNS, PROMPT_COLUMNS, SqlBase


class ChangeReads(SqlBase):
    def change_heads(self) -> tuple[int, int, int]:
        """The newest observation id, prompt id and change-log sequence: the feed's "now"."""
        row = self._query("SELECT (SELECT COALESCE(MAX(id), 0) FROM observations), "
                          "(SELECT COALESCE(MAX(id), 0) FROM prompts), "
                          "(SELECT COALESCE(MAX(seq), 0) FROM change_log)")[0]
        return int(row[0]), int(row[1]), int(row[2])

    def observations_since(self, obs_id: int, limit: int) -> list[Observation]:
        rows = self._query(f"SELECT {OBS_COLUMNS} FROM observations WHERE id > ? ORDER BY id LIMIT ?",
                           (obs_id, limit))
        return [Observation.from_row(r) for r in rows]

    def prompts_since(self, prompt_id: int, limit: int) -> list[Prompt]:
        rows = self._query(f"SELECT {PROMPT_COLUMNS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           "WHERE p.id > ? ORDER BY p.id LIMIT ?", (prompt_id, limit))
        return [Prompt.from_row(r) for r in rows]

    def logged_changes_since(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """(seq, kind, key, created|updated) of memories and sessions written after `seq`, oldest first."""
        rows = self._query("SELECT seq, kind, key, action FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?",
                           (seq, limit))
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def activity_by_day(self, since: int, project: str | None) -> list[tuple[str, int, int]]:
        """(UTC day, observations, prompts) for each day since `since` that has any."""
        params: list[object] = [since] if project is None else [since, project]
        obs = self._query(f"SELECT {self.dialect.utc_day('timestamp')} AS day, COUNT(*) FROM observations "
                          f"WHERE timestamp >= ?{'' if project is None else ' AND project = ?'} GROUP BY day",
                          params)
        prompts = self._query(f"SELECT {self.dialect.utc_day('p.timestamp')} AS day, COUNT(*) FROM prompts p "
                              "JOIN sessions s ON s.id = p.session_id "
                              f"WHERE p.timestamp >= ?{'' if project is None else ' AND s.project = ?'} "
                              "GROUP BY day", params)
        return day_counts(obs, prompts)
