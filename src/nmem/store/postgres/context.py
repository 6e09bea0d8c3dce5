"""What timelines, traces, file histories and the SessionStart block read on PostgreSQL; status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nmem.models import Memory, Observation, Prompt, Session
from nmem.store.postgres.connection import OBS_COLUMNS, Connection
from nmem.store.postgres.dialect import DIALECT
from nmem.store.postgres.schema import LATEST_VERSION
from nmem.store.records import OUTLINE_CHARS, Status
from nmem.store.sql.dialect import HALF_LIFE_DAYS, LN2
from nmem.store.sqlite.context import (
    INTENT_CLOCK_SLACK,
    INTENT_SCAN_BATCH,
    INTENT_SCAN_LIMIT,
    RECENT_CANDIDATES,
    TYPE_WEIGHT_SQL,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

PROMPT_COLS = "p.id, p.session_id, s.project, p.timestamp, p.source, p.content"
OBS_COLS_O = ", ".join("o." + c.strip() for c in OBS_COLUMNS.split(","))
CHECKPOINT = DIALECT.tag_match("m").replace("?", "'checkpoint'")


def _time_clauses(col: str, before: int | None, after: int | None, clauses: list[str], params: list[Any]) -> None:
    if before is not None:
        clauses.append(f"{col} < ?")
        params.append(before)
    if after is not None:
        clauses.append(f"{col} > ?")
        params.append(after)


class ContextReads(Connection):
    def session_prompts(self, session_id: str, before: int | None, after: int | None) -> list[Prompt]:
        clauses, params = ["p.session_id = ?"], [session_id]
        _time_clauses("p.timestamp", before, after, clauses, params)
        rows = self._query(f"SELECT {PROMPT_COLS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           f"WHERE {' AND '.join(clauses)} ORDER BY p.id", params)
        return [Prompt.from_row(r) for r in rows]

    def session_observations(self, session_id: str, before: int | None, after: int | None) -> list[Observation]:
        clauses, params = ["session_id = ?"], [session_id]
        _time_clauses("timestamp", before, after, clauses, params)
        rows = self._query(f"SELECT {OBS_COLUMNS} FROM observations WHERE {' AND '.join(clauses)} ORDER BY id",
                           params)
        return [Observation.from_row(r) for r in rows]

    def file_touches(self, file_path: str, before: int | None, after: int | None,
                     limit: int) -> list[tuple[Observation, str | None]]:
        clauses: list[str] = ["o.file_path = ?"]
        params: list[Any] = [file_path]
        _time_clauses("o.timestamp", before, after, clauses, params)
        rows = self._query(
            f"SELECT {OBS_COLS_O}, p.content AS prompt_content FROM observations o "
            "LEFT JOIN prompts p ON p.id = o.prompt_id AND p.source = 'user' "
            f"WHERE {' AND '.join(clauses)} ORDER BY o.timestamp DESC, o.id DESC LIMIT ?", [*params, limit])
        return [(Observation.from_row(r), r["prompt_content"]) for r in rows]

    def recent_scored(self, project: str | None, limit: int, now: int, *, where: str = "any",
                      exclude_types: Sequence[str] = ()) -> list[tuple[Observation, float]]:
        """ADR-006 composite score, deduplicated by file_path (as the SQLite engine scores it)."""
        weight = TYPE_WEIGHT_SQL.format(col="o.obs_type")
        recency = f"exp({-LN2 / (HALF_LIFE_DAYS * 86400.0)!r} * GREATEST(? - o.timestamp, 0))"
        skip = "AND NOT (obs_type = ANY(?))" if exclude_types else ""
        skip_params: list[Any] = [list(exclude_types)] if exclude_types else []
        if project and where == "any":
            candidates = (f"(SELECT id FROM observations WHERE TRUE {skip} ORDER BY timestamp DESC LIMIT ?) "
                          f"UNION (SELECT id FROM observations WHERE project = ? {skip} "
                          "ORDER BY timestamp DESC LIMIT ?)")
            cand_params: list[Any] = [*skip_params, RECENT_CANDIDATES, project, *skip_params, RECENT_CANDIDATES]
            score = f"{recency} * 0.5 + ({weight}) * 0.3 + (CASE WHEN o.project = ? THEN 1.0 ELSE 0.3 END) * 0.2"
            score_params: list[Any] = [now, project]
        else:
            scope = {"local": "project = ?", "other": "project != ?"}.get(where) if project else None
            filter_sql = f"WHERE {scope} {skip}" if scope else f"WHERE TRUE {skip}"
            candidates = f"SELECT id FROM observations {filter_sql} ORDER BY timestamp DESC LIMIT ?"
            cand_params = [*([project] if scope else []), *skip_params, RECENT_CANDIDATES]
            score = f"{recency} * 0.6 + ({weight}) * 0.4"
            score_params = [now]
        rows = self._query(f"""
            WITH scored AS (
                SELECT {OBS_COLS_O}, {score} AS score FROM observations o WHERE o.id IN ({candidates})
            ), ranked AS (
                SELECT *, CASE WHEN file_path IS NULL THEN 1 ELSE
                    ROW_NUMBER() OVER (PARTITION BY file_path ORDER BY score DESC, id DESC) END AS rn
                FROM scored
            )
            SELECT * FROM ranked WHERE rn = 1 ORDER BY score DESC, id DESC LIMIT ?""",
                           [*score_params, *cand_params, limit])
        return [(Observation.from_row(r), float(r["score"])) for r in rows]

    def recent_intents(self, project: str, limit: int) -> list[tuple[Prompt, int]]:
        """The project's newest user prompts that led to an action, with their counts (walks the
        newest observations to their prompts, as the SQLite engine does; see its docstring)."""
        if limit <= 0:
            return []
        intents: dict[int, Prompt] = {}
        seen: set[int] = set()
        cursor = (2**63 - 1, 2**63 - 1)
        read = 0
        newest: list[Prompt] = []
        while read < INTENT_SCAN_LIMIT:
            rows = self._query(
                "SELECT id, timestamp, prompt_id FROM observations WHERE project = ? AND (timestamp, id) < (?, ?) "
                "ORDER BY timestamp DESC, id DESC LIMIT ?", (project, *cursor, INTENT_SCAN_BATCH))
            read += len(rows)
            fresh = list(dict.fromkeys(r["prompt_id"] for r in rows
                                       if r["prompt_id"] is not None and r["prompt_id"] not in seen))
            seen.update(fresh)
            if fresh:
                for row in self._query(
                        f"SELECT {PROMPT_COLS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                        "WHERE p.id = ANY(?) AND p.source = 'user' AND s.project = ?", (fresh, project)):
                    intents[row["id"]] = Prompt.from_row(row)
            newest = sorted(intents.values(), key=lambda p: (p.timestamp, p.id), reverse=True)[:limit]
            if len(rows) < INTENT_SCAN_BATCH:
                break
            cursor = (rows[-1]["timestamp"], rows[-1]["id"])
            if len(newest) == limit and cursor[0] < newest[-1].timestamp - INTENT_CLOCK_SLACK:
                break
        else:
            rows = self._query(
                f"SELECT {PROMPT_COLS}, COUNT(o.id) AS actions FROM prompts p JOIN sessions s ON s.id = p.session_id "
                "JOIN observations o ON o.prompt_id = p.id WHERE s.project = ? AND p.source = 'user' "
                "GROUP BY p.id, s.project ORDER BY p.timestamp DESC, p.id DESC LIMIT ?", (project, limit))
            return [(Prompt.from_row(r), int(r["actions"])) for r in rows]
        if not newest:
            return []
        counts = {int(r[0]): int(r[1]) for r in self._query(
            "SELECT prompt_id, COUNT(*) FROM observations WHERE prompt_id = ANY(?) GROUP BY prompt_id",
            ([p.id for p in newest],))}
        return [(p, counts.get(p.id, 0)) for p in newest]

    def active_sessions(self, project: str, limit: int, exclude_types: Sequence[str] = (),
                        include: str | None = None) -> list[tuple[Session, int]]:
        kinds = "AND NOT (obs_type = ANY(?))" if exclude_types else ""
        kind_params: list[Any] = [list(exclude_types)] if exclude_types else []
        newest = self._query(f"SELECT session_id FROM observations WHERE project = ? {kinds} "
                             "ORDER BY timestamp DESC, id DESC LIMIT 1", (project, *kind_params))
        extra = [r[0] for r in newest] + ([include] if include else [])
        rows = self._query(
            f"""SELECT s.*,
                (SELECT timestamp FROM observations WHERE session_id = s.id {kinds}
                  ORDER BY timestamp DESC LIMIT 1) AS last_obs,
                (SELECT p.timestamp FROM prompts p WHERE p.session_id = s.id AND p.source = 'user'
                  ORDER BY p.id DESC LIMIT 1) AS last_prompt
            FROM sessions s WHERE s.id IN (SELECT id FROM sessions WHERE project = ? ORDER BY started_at DESC
                                           LIMIT ?) OR s.id = ANY(?)""",
            (*kind_params, project, limit, extra))
        found = []
        for row in rows:
            times = [t for t in (row["last_obs"], row["last_prompt"]) if t is not None]
            if times and row["project"] == project:
                found.append((Session.from_row(row), int(max(times))))
        found.sort(key=lambda pair: (pair[1], pair[0].started_at), reverse=True)
        return found

    def session_roots(self, session_ids: Sequence[str]) -> dict[str, str]:
        if not session_ids:
            return {}
        rows = self._query("SELECT id, root FROM sessions WHERE id = ANY(?) AND root IS NOT NULL",
                           (list(dict.fromkeys(session_ids)),))
        return {str(r[0]): str(r[1]) for r in rows}

    def project_root(self, project: str) -> str | None:
        rows = self._query("SELECT root FROM sessions WHERE project = ? AND root IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1", (project,))
        return str(rows[0][0]) if rows else None

    def session_tail(self, session_id: str, limit: int) -> list[Observation]:
        rows = self._query(f"SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ? "
                           "ORDER BY timestamp DESC, id DESC LIMIT ?", (session_id, limit))
        return [Observation.from_row(r) for r in reversed(rows)]

    def last_prompt(self, session_id: str, source: str) -> Prompt | None:
        rows = self._query(f"SELECT {PROMPT_COLS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           "WHERE p.session_id = ? AND p.source = ? ORDER BY p.id DESC LIMIT 1", (session_id, source))
        return Prompt.from_row(rows[0]) if rows else None

    def recent_observations(self, project: str, limit: int, *, where: str = "local",
                            exclude_types: Sequence[str] = (),
                            exclude_session: str | None = None) -> list[Observation]:
        clauses = ["project = ?" if where == "local" else "project != ?"]
        params: list[Any] = [project]
        if exclude_types:
            clauses.append("NOT (obs_type = ANY(?))")
            params.append(list(exclude_types))
        if exclude_session is not None:
            clauses.append("session_id != ?")
            params.append(exclude_session)
        rows = self._query(
            "SELECT id, session_id, project, prompt_id, timestamp, obs_type, source_event, tool_name, file_path, "
            f"left(content, {OUTLINE_CHARS}) AS content, is_pinned, "
            "CASE WHEN obs_type IN ('command_error', 'file_error') THEN metadata END AS metadata "
            f"FROM observations WHERE {' AND '.join(clauses)} ORDER BY timestamp DESC, id DESC LIMIT ?",
            [*params, limit])
        return [Observation.from_row(r) for r in rows]

    def curated_memories(self, project: str, limit: int) -> list[Memory]:
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.tier != 'archived' "
            f"AND m.domain IN (?, 'user', 'org') AND NOT COALESCE({CHECKPOINT}, FALSE) "
            "ORDER BY m.is_pinned DESC, m.updated_at DESC, m.id DESC LIMIT ?", (f"project:{project}", limit))
        return [Memory.from_row(r) for r in rows]

    def latest_checkpoint(self, project: str, session_id: str) -> Memory | None:
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.domain = ? AND m.source = ? "
            f"AND {CHECKPOINT} ORDER BY m.created_at DESC, m.id DESC LIMIT 1",
            (f"project:{project}", f"session:{session_id}"))
        return Memory.from_row(rows[0]) if rows else None

    def status(self) -> Status:
        def count(sql: str) -> int:
            return int(self._query(sql)[0][0])

        def group(sql: str) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in self._query(sql)}

        tables = ("sessions", "prompts", "observations", "memories", "vectors", "sync_ops")
        return Status(
            url=self.url,
            schema_version=self.schema_version(),
            size_bytes=count("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                             f"WHERE c.oid IN ({', '.join(f'to_regclass({t!r})' for t in tables)})"),
            sessions=count("SELECT COUNT(*) FROM sessions"),
            prompts=count("SELECT COUNT(*) FROM prompts"),
            observations=count("SELECT COUNT(*) FROM observations"),
            memories=count("SELECT COUNT(*) FROM memories WHERE deleted_at IS NULL"),
            by_obs_type=group("SELECT obs_type, COUNT(*) FROM observations GROUP BY 1 ORDER BY 2 DESC, 1"),
            by_namespace=group("SELECT namespace, COUNT(*) FROM memories WHERE deleted_at IS NULL "
                               "GROUP BY 1 ORDER BY 2 DESC, 1"),
            by_tier=group("SELECT tier, COUNT(*) FROM memories WHERE deleted_at IS NULL GROUP BY 1 ORDER BY 2 DESC, 1"),
            by_project=group("SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 2 DESC, 1"),
        )

    def integrity(self) -> str:
        """`ok` when the schema is this nmem's and every table answers (PostgreSQL checks its own pages)."""
        version = self.schema_version()
        if version != LATEST_VERSION:
            return f"schema v{version}, expected v{LATEST_VERSION}"
        self._query("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM memories)")
        return "ok"

    def fts_consistency(self) -> dict[str, str]:
        """Per full-text index (named as SQLite's FTS5 tables, so `status --verify` reads the same
        on both engines): `ok`, or how it disagrees with its table: the GIN index is missing or
        invalid (a failed CREATE INDEX CONCURRENTLY, say), or stored tsvectors differ from what
        the rows' text gives now (the text-search configuration changed after they were written)."""
        out: dict[str, str] = {}
        for table in ("observations", "prompts", "memories"):
            name = f"{table}_fts"
            valid = self._query("SELECT i.indisvalid AND i.indisready FROM pg_index i "
                                "JOIN pg_am a ON a.oid = (SELECT relam FROM pg_class WHERE oid = i.indexrelid) "
                                "JOIN pg_attribute t ON t.attrelid = i.indrelid AND t.attnum = ANY(i.indkey) "
                                "WHERE i.indrelid = to_regclass(?) AND a.amname = 'gin' AND t.attname = 'tsv'",
                                (table,))
            if not valid:
                out[name] = f"no GIN index on {table}.tsv"
                continue
            if not any(bool(r[0]) for r in valid):
                out[name] = f"the GIN index on {table}.tsv is invalid (REINDEX it)"
                continue
            expr = self._tsv_expression(table)
            rows = self._query(f"SELECT COUNT(*), COUNT(*) FILTER (WHERE tsv IS DISTINCT FROM ({expr})) FROM {table}")
            have, stale = int(rows[0][0]), int(rows[0][1])
            out[name] = "ok" if not stale else f"{have - stale} rows indexed, {have} in {table}"
        return out

