"""Lifecycle rows: tier bookkeeping, trail retention sweeps, consolidation runs and their undo log."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.models import Session
from nmem.store.sql.base import SqlBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

class LifecycleRows(SqlBase):
    # -- tiers: local bookkeeping like access counts, so no sync operation and no updated_at bump --

    def tier_inputs(self) -> list[tuple[str, str, int, int | None, int, bool, list[str], str]]:
        """(uid, namespace, updated_at, accessed_at, access_count, pinned, tags, tier) of live memories."""
        rows = self._query("SELECT uid, namespace, updated_at, accessed_at, access_count, is_pinned, tags, tier "
                           "FROM memories WHERE deleted_at IS NULL")
        return [(r["uid"], r["namespace"], int(r["updated_at"]),
                 None if r["accessed_at"] is None else int(r["accessed_at"]), int(r["access_count"]),
                 bool(r["is_pinned"]), list(json.loads(r["tags"] or "[]")), r["tier"]) for r in rows]

    def set_tiers(self, tiers: Mapping[str, str], now: int) -> None:
        """Store computed tiers and when they were computed (a read-only handle skips both)."""
        if self.readonly:
            return
        with self.transaction():
            self._exec_many("UPDATE memories SET tier = ? WHERE uid = ? AND deleted_at IS NULL AND tier <> ?",
                            [(tier, uid, tier) for uid, tier in tiers.items()])
            self._exec("INSERT INTO lifecycle_state (key, value) VALUES ('tiers_at', ?) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(now),))

    def tiers_computed_at(self) -> int | None:
        rows = self._query("SELECT value FROM lifecycle_state WHERE key = 'tiers_at'")
        return int(rows[0][0]) if rows else None

    # -- retention ---------------------------------------------------------------------------

    def expired_counts(self, cutoffs: Mapping[str, int]) -> dict[str, int]:
        """Per observation type, the unpinned rows recorded before its cutoff."""
        out: dict[str, int] = {}
        for obs_type, cutoff in sorted(cutoffs.items()):
            n = int(self._query("SELECT COUNT(*) FROM observations WHERE obs_type = ? AND timestamp < ? "
                                "AND is_pinned = 0", (obs_type, cutoff))[0][0])
            if n:
                out[obs_type] = n
        return out

    def delete_expired(self, cutoffs: Mapping[str, int]) -> dict[str, int]:
        """Delete what `expired_counts` counts in one transaction, as `purge_observations_where`
        does (the text's bytes forgotten, the space given back)."""
        out: dict[str, int] = {}
        with self.transaction():
            for obs_type, cutoff in sorted(cutoffs.items()):
                n = self._exec("DELETE FROM observations WHERE obs_type = ? AND timestamp < ? AND is_pinned = 0",
                               (obs_type, cutoff))
                if n:
                    out[obs_type] = n
            if out:
                self._forget_bytes("observations")
        if out:
            self._scrub("observations", "vectors")
        return out

    # -- sessions a roll-up summarises -----------------------------------------------------------

    def summarised_sessions(self, per_project: int) -> dict[str, list[Session]]:
        """project → its newest ended sessions that have a summary, newest first, at most `per_project`."""
        rows = self._query(
            "SELECT * FROM (SELECT s.*, ROW_NUMBER() OVER (PARTITION BY project ORDER BY started_at DESC, id) AS n "
            "FROM sessions s WHERE ended_at IS NOT NULL AND summary IS NOT NULL) AS ranked WHERE n <= ? "
            "ORDER BY project, started_at DESC, id", (per_project,))
        out: dict[str, list[Session]] = {}
        for r in rows:
            out.setdefault(r["project"], []).append(Session.from_row(r))
        return out

    # -- consolidation runs: what each changed, before and after, for undo ------------------------

    def start_run(self, kind: str, now: int) -> int:
        return self._insert_id("INSERT INTO lifecycle_runs (kind, started_at) VALUES (?, ?)", (kind, now))

    def record_change(self, run_id: int, uid: str, action: str, before: dict[str, Any] | None,
                      after: dict[str, Any] | None) -> None:
        self._exec("INSERT INTO lifecycle_changes (run_id, uid, action, before, after) VALUES (?, ?, ?, ?, ?)",
                   (run_id, uid, action, None if before is None else json.dumps(before),
                    None if after is None else json.dumps(after)))

    def finish_run(self, run_id: int, report: dict[str, Any], now: int) -> None:
        self._exec("UPDATE lifecycle_runs SET finished_at = ?, report = ? WHERE id = ?",
                   (now, json.dumps(report), run_id))

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM lifecycle_runs WHERE id = ?", (run_id,))
        return _run(rows[0]) if rows else None

    def run_changes(self, run_id: int) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]:
        """(uid, action, before, after) of a run, in the order they were made."""
        rows = self._query("SELECT uid, action, before, after FROM lifecycle_changes WHERE run_id = ? ORDER BY id",
                           (run_id,))
        return [(r["uid"], r["action"], None if r["before"] is None else json.loads(r["before"]),
                 None if r["after"] is None else json.loads(r["after"])) for r in rows]

    def mark_run_undone(self, run_id: int, now: int) -> None:
        self._exec("UPDATE lifecycle_runs SET undone_at = ? WHERE id = ?", (now, run_id))

    def recent_runs(self, limit: int) -> list[dict[str, Any]]:
        return [_run(r) for r in self._query("SELECT * FROM lifecycle_runs ORDER BY id DESC LIMIT ?", (limit,))]


def _run(r: Any) -> dict[str, Any]:
    return {"id": int(r["id"]), "kind": r["kind"], "started_at": int(r["started_at"]),
            "finished_at": None if r["finished_at"] is None else int(r["finished_at"]),
            "undone_at": None if r["undone_at"] is None else int(r["undone_at"]),
            "report": json.loads(r["report"] or "{}")}
