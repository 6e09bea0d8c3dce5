"""What timelines, traces, file histories and the SessionStart block read."""

from __future__ import annotations

from nmem.models import Memory, Observation, Prompt, Session
from nmem.store.records import OUTLINE_CHARS, Status
from nmem.store.sql.base import OBS_COLUMNS, OBS_COLUMNS_O, PROMPT_COLUMNS, SqlBase
from nmem.store.sql.dialect import each_of, marks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


# Rows considered by recent-context scoring: recency decays fast, so older rows cannot win
# (the newest 1,000 rows of a scope span days to weeks of work; deduplication by file needs headroom).
RECENT_CANDIDATES = 1000

INTENT_SCAN_BATCH = 256        # observations read per step while looking for recent intents

INTENT_SCAN_LIMIT = 4096       # ... and in all, before grouping the project's prompts instead

INTENT_CLOCK_SLACK = 600       # seconds a prompt may be stamped after its own actions

# One session's newest observations, and its newest prompt from a source: bounded index reads
TAIL_SQL = f"SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ? ORDER BY timestamp DESC, id DESC LIMIT ?"
LAST_PROMPT_SQL = (f"SELECT {PROMPT_COLUMNS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                   "WHERE p.session_id = ? AND p.source = ? ORDER BY p.id DESC LIMIT 1")

TYPE_WEIGHT_SQL = """CASE {col}
    WHEN 'file_edit' THEN 1.0 WHEN 'file_write' THEN 1.0
    WHEN 'command' THEN 0.67 WHEN 'command_error' THEN 0.67
    WHEN 'git_commit' THEN 0.67 WHEN 'file_error' THEN 0.5
    WHEN 'session_compact' THEN 0.5 WHEN 'mcp_call' THEN 0.33
    ELSE 0.17 END"""


class ContextReads(SqlBase):
    def session_prompts(self, session_id: str, before: int | None, after: int | None
                        ) -> list[Prompt]:
        clauses: list[str] = ["p.session_id = ?"]
        params: list[Any] = [session_id]
        if before is not None:
            clauses.append("p.timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("p.timestamp > ?")
            params.append(after)
        rows = self._query(
            f"SELECT {PROMPT_COLUMNS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
            f"WHERE {' AND '.join(clauses)} ORDER BY p.id", params,
        )
        return [Prompt.from_row(r) for r in rows]

    def sessions_prompts(self, windows: Sequence[tuple[str, int, int]],
                         source: str | None = None) -> dict[str, list[Prompt]]:
        """For each (session, before, after), its prompts strictly between the two times, in
        order: `session_prompts` of several sessions in one statement; only `source`'s when given
        (a search's turns read only the user's: the agent's long replies stay in the table)."""
        if not windows:
            return {}
        clauses = " OR ".join(["(p.session_id = ? AND p.timestamp < ? AND p.timestamp > ?)"] * len(windows))
        params: list[Any] = [v for window in windows for v in window]
        if source is not None:
            clauses = f"({clauses}) AND p.source = ?"
            params.append(source)
        rows = self._query(f"SELECT {PROMPT_COLUMNS} FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           f"WHERE {clauses} ORDER BY p.id", params)
        out: dict[str, list[Prompt]] = {session: [] for session, _, _ in windows}
        for r in rows:
            out[r["session_id"]].append(Prompt.from_row(r))
        return out

    def session_observations(self, session_id: str, before: int | None, after: int | None
                             ) -> list[Observation]:
        clauses: list[str] = ["session_id = ?"]
        params: list[Any] = [session_id]
        if before is not None:
            clauses.append("timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("timestamp > ?")
            params.append(after)
        rows = self._query(
            f"SELECT {OBS_COLUMNS} FROM observations WHERE {' AND '.join(clauses)} ORDER BY id",
            params,
        )
        return [Observation.from_row(r) for r in rows]

    def file_touches(self, file_path: str, before: int | None, after: int | None,
                     limit: int) -> list[tuple[Observation, str | None]]:
        clauses: list[str] = ["o.file_path = ?"]
        params: list[Any] = [file_path]
        if before is not None:
            clauses.append("o.timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("o.timestamp > ?")
            params.append(after)
        rows = self._query(
            f"SELECT {OBS_COLUMNS_O}, p.content AS prompt_content FROM observations o "
            "LEFT JOIN prompts p ON p.id = o.prompt_id AND p.source = 'user' "
            f"WHERE {' AND '.join(clauses)} ORDER BY o.timestamp DESC, o.id DESC LIMIT ?",
            [*params, limit],
        )
        return [(Observation.from_row(r), r["prompt_content"]) for r in rows]

    def recent_scored(self, project: str | None, limit: int, now: int, *, where: str = "any",
                      exclude_types: Sequence[str] = ()) -> list[tuple[Observation, float]]:
        """ADR-006 composite score, deduplicated by file_path.

        `where`: "any" ranks every project with the project match as a boost; "local" keeps
        only `project`; "other" only the rest (so a busy project cannot starve the backfill).
        """
        cols = OBS_COLUMNS_O
        weight = TYPE_WEIGHT_SQL.format(col="o.obs_type")
        recency = self.dialect.recency("o.timestamp")
        skip = f"AND obs_type NOT IN ({marks(len(exclude_types))})" if exclude_types else ""
        if project and where == "any":
            candidates = (
                f"SELECT id FROM (SELECT id FROM observations WHERE TRUE {skip} ORDER BY timestamp DESC LIMIT ?) "
                f"AS anywhere UNION SELECT id FROM (SELECT id FROM observations WHERE project = ? {skip} "
                "ORDER BY timestamp DESC LIMIT ?) AS here"
            )
            cand_params: list[Any] = [*exclude_types, RECENT_CANDIDATES, project, *exclude_types,
                                      RECENT_CANDIDATES]
            score = (f"{recency} * 0.5 + ({weight}) * 0.3 + "
                     "(CASE WHEN o.project = ? THEN 1.0 ELSE 0.3 END) * 0.2")
            score_params: list[Any] = [now, project]
        else:
            scope = {"local": "project = ?", "other": "project != ?"}.get(where) if project else None
            filter_sql = f"WHERE {scope} {skip}" if scope else f"WHERE TRUE {skip}"
            candidates = f"SELECT id FROM observations {filter_sql} ORDER BY timestamp DESC LIMIT ?"
            cand_params = [*([project] if scope else []), *exclude_types, RECENT_CANDIDATES]
            score = f"{recency} * 0.6 + ({weight}) * 0.4"
            score_params = [now]
        sql = f"""
            WITH scored AS (
                SELECT {cols}, {score} AS score FROM observations o
                WHERE o.id IN ({candidates})
            ), ranked AS (
                SELECT *, CASE WHEN file_path IS NULL THEN 1 ELSE
                    ROW_NUMBER() OVER (PARTITION BY file_path ORDER BY score DESC, id DESC) END AS rn
                FROM scored
            )
            SELECT * FROM ranked WHERE rn = 1 ORDER BY score DESC, id DESC LIMIT ?"""
        rows = self._query(sql, [*score_params, *cand_params, limit])
        return [(Observation.from_row(r), float(r["score"])) for r in rows]

    def recent_intents(self, project: str, limit: int) -> list[tuple[Prompt, int]]:
        """The project's newest user prompts that led to at least one action, with their counts.

        Walks the project's newest observations to the prompts they belong to, and stops once
        `limit` of those are newer (by more than INTENT_CLOCK_SLACK, for clocks that step) than
        every observation left unread: a prompt's actions are recorded after it, so a prompt
        not met yet is older than the unread actions. Grouping every prompt of the project with
        its actions cost 0.1-0.4 s at a million observations, on every SessionStart; the walk
        reads a few hundred rows. A project whose newest actions name few prompts (agent work,
        private prompts) would make the walk long, and grouping is cheap there: after
        INTENT_SCAN_LIMIT rows it groups instead.
        """
        if limit <= 0:
            return []
        intents: dict[int, Prompt] = {}
        seen: set[int] = set()
        cursor = (2**63 - 1, 2**63 - 1)
        read = 0
        while read < INTENT_SCAN_LIMIT:
            rows = self._query(
                "SELECT id, timestamp, prompt_id FROM observations WHERE project = ? AND (timestamp, id) < (?, ?) "
                "ORDER BY timestamp DESC, id DESC LIMIT ?", (project, *cursor, INTENT_SCAN_BATCH))
            read += len(rows)
            fresh = list(dict.fromkeys(r["prompt_id"] for r in rows if r["prompt_id"] is not None
                                       and r["prompt_id"] not in seen))
            seen.update(fresh)
            for row in self._query(  # CROSS JOIN: by prompt id, not through every session of the project
                    f"SELECT {PROMPT_COLUMNS} FROM prompts p CROSS JOIN sessions s WHERE s.id = p.session_id "
                    f"AND p.id IN ({marks(len(fresh))}) AND p.source = 'user' AND s.project = ?",
                    (*fresh, project)) if fresh else ():
                intents[int(row["id"])] = Prompt.from_row(row)
            newest = sorted(intents.values(), key=lambda p: (p.timestamp, p.id), reverse=True)[:limit]
            if len(rows) < INTENT_SCAN_BATCH:
                break
            cursor = (rows[-1]["timestamp"], rows[-1]["id"])
            if len(newest) == limit and cursor[0] < newest[-1].timestamp - INTENT_CLOCK_SLACK:
                break
        else:
            return self._intents_by_grouping(project, limit)
        if not newest:
            return []
        counts: dict[int, int] = {int(row[0]): int(row[1]) for row in self._query(
            f"SELECT prompt_id, COUNT(*) FROM observations WHERE prompt_id IN ({marks(len(newest))}) "
            f"GROUP BY prompt_id", [p.id for p in newest])}
        return [(p, int(counts.get(p.id, 0))) for p in newest]

    def _intents_by_grouping(self, project: str, limit: int) -> list[tuple[Prompt, int]]:
        rows = self._query(
            f"SELECT {PROMPT_COLUMNS}, COUNT(o.id) AS actions FROM prompts p "
            "JOIN sessions s ON s.id = p.session_id "
            "JOIN observations o ON o.prompt_id = p.id "
            "WHERE s.project = ? AND p.source = 'user' "
            "GROUP BY p.id, s.project ORDER BY p.timestamp DESC, p.id DESC LIMIT ?",
            (project, limit),
        )
        return [(Prompt.from_row(r), int(r["actions"])) for r in rows]

    # -- what the context block reads ----------------------------------------------------------

    def active_sessions(self, project: str, limit: int, exclude_types: Sequence[str] = (),
                        include: str | None = None) -> list[tuple[Session, int]]:
        """The project's sessions that did something (a user prompt, or an observation not of
        `exclude_types`), most recently active first, each with the time of its last such act.

        Candidates are the `limit` sessions started last, the session of the project's newest
        observation (a long session started before many empty ones) and `include`.
        """
        kinds = f"AND obs_type NOT IN ({marks(len(exclude_types))})" if exclude_types else ""
        newest = self._query(
            f"SELECT session_id FROM observations WHERE project = ? {kinds} ORDER BY timestamp DESC, id DESC LIMIT 1",
            (project, *exclude_types))
        extra = [r[0] for r in newest] + ([include] if include else [])
        candidates = ("SELECT id FROM (SELECT id FROM sessions WHERE project = ? ORDER BY started_at DESC LIMIT ?) "
                      "AS latest" + " UNION SELECT ?" * len(extra))
        rows = self._query(
            f"""SELECT s.*,
                (SELECT timestamp FROM observations WHERE session_id = s.id {kinds}
                  ORDER BY timestamp DESC LIMIT 1) AS last_obs,
                (SELECT p.timestamp FROM prompts p WHERE p.session_id = s.id AND p.source = 'user'
                  ORDER BY p.id DESC LIMIT 1) AS last_prompt,
                (SELECT max(o.id) FROM observations o WHERE o.session_id = s.id) AS last_obs_id,
                (SELECT max(p.id) FROM prompts p WHERE p.session_id = s.id) AS last_prompt_id
            FROM sessions s WHERE s.id IN ({candidates})""",
            (*exclude_types, project, limit, *extra))
        found = []
        for row in rows:
            times = [t for t in (row["last_obs"], row["last_prompt"]) if t is not None]
            if times and row["project"] == project:
                # within one second (sessions in a script, a test), the newer rows tell which came last
                order = (int(max(times)), int(row["started_at"]), int(row["last_obs_id"] or 0),
                         int(row["last_prompt_id"] or 0))
                found.append((order, Session.from_row(row)))
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [(session, order[0]) for order, session in found]

    def session_roots(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The project root each session recorded (sessions from before roots were kept have none)."""
        if not session_ids:
            return {}
        ids = list(dict.fromkeys(session_ids))
        rows = self._query(f"SELECT id, root FROM sessions WHERE id IN ({marks(len(ids))}) "
                           "AND root IS NOT NULL", ids)
        return {str(r[0]): str(r[1]) for r in rows}

    def session_origins(self, session_ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """Each session's coding agent and project root (None where unrecorded), in one read: what
        a listing of trail rows names beside them (an unknown id is left out)."""
        if not session_ids:
            return {}
        ids = list(dict.fromkeys(session_ids))
        rows = self._query(f"SELECT id, agent, root FROM sessions WHERE id IN ({marks(len(ids))})", ids)
        return {str(r[0]): (r[1], r[2]) for r in rows}

    def project_root(self, project: str) -> str | None:
        """The root of the project's newest session that recorded one."""
        rows = self._query("SELECT root FROM sessions WHERE project = ? AND root IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1", (project,))
        return str(rows[0][0]) if rows else None

    def project_roots(self, projects: Sequence[str]) -> dict[str, str]:
        """`project_root` of each project in one read (a project no session recorded a root for is left out)."""
        names = list(dict.fromkeys(projects))
        if not names:
            return {}
        rows = self._query("SELECT project, root FROM (SELECT project, root, ROW_NUMBER() OVER ("
                           "PARTITION BY project ORDER BY started_at DESC) AS newest FROM sessions "
                           f"WHERE project IN ({marks(len(names))}) AND root IS NOT NULL) AS roots "
                           "WHERE newest = 1", names)
        return {str(r[0]): str(r[1]) for r in rows}

    def session_tail(self, session_id: str, limit: int) -> list[Observation]:
        """The session's newest `limit` observations, oldest first."""
        return self.session_tails([session_id], limit).get(session_id, [])

    def session_tails(self, session_ids: Sequence[str], limit: int,
                      obs_types: Sequence[str] = ()) -> dict[str, list[Observation]]:
        """Each session's newest `limit` observations, oldest first (a session without any is left
        out); with `obs_types`, only those of these types among them (the newest `limit` still
        counted over every type)."""
        select = TAIL_SQL if not obs_types else (
            f"SELECT * FROM ({TAIL_SQL}) AS tail WHERE obs_type IN ({marks(len(obs_types))})")
        out: dict[str, list[Observation]] = {}
        for r in self._each_session(select, session_ids, limit, *obs_types):
            o = Observation.from_row(r)
            out.setdefault(o.session_id, []).append(o)
        for tail in out.values():
            tail.sort(key=lambda o: (o.timestamp, o.id))
        return out

    def last_prompt(self, session_id: str, source: str) -> Prompt | None:
        """The session's newest prompt from `source` (`user` or `agent`)."""
        return self.last_prompts([session_id], source).get(session_id)

    def last_prompts(self, session_ids: Sequence[str], source: str) -> dict[str, Prompt]:
        """`last_prompt` of each session (a session without one is left out)."""
        prompts = [Prompt.from_row(r) for r in self._each_session(LAST_PROMPT_SQL, session_ids, source)]
        return {p.session_id: p for p in prompts}

    def _each_session(self, select: str, session_ids: Sequence[str], *rest: Any) -> list[Any]:
        """The rows of `select` (a bounded read; its `?`s: a session id, then `rest`) for each
        session, in as few statements as the engine reads best (`Dialect.keys_per_statement`)."""
        ids = list(dict.fromkeys(session_ids))
        per = self.dialect.keys_per_statement
        rows: list[Any] = []
        for start in range(0, len(ids), per):
            chunk = ids[start:start + per]
            rows += self._query(each_of(select, len(chunk)), [v for sid in chunk for v in (sid, *rest)])
        return rows

    def recent_observations(self, project: str, limit: int, *, where: str = "local",
                            exclude_types: Sequence[str] = (),
                            exclude_session: str | None = None) -> list[Observation]:
        """The newest observations of `project` (`where="local"`) or of every other project
        (`"other"`), newest first, without `exclude_types` and `exclude_session`'s rows.

        What a listing of them needs, read fast: content cut to OUTLINE_CHARS, and metadata only
        on failures (`command_error`, `file_error`), whose error it names."""
        clauses = ["project = ?" if where == "local" else "project != ?"]
        params: list[Any] = [project]
        if exclude_types:
            clauses.append(f"obs_type NOT IN ({marks(len(exclude_types))})")
            params.extend(exclude_types)
        if exclude_session is not None:
            clauses.append("session_id != ?")
            params.append(exclude_session)
        rows = self._query(
            "SELECT id, session_id, project, prompt_id, timestamp, obs_type, source_event, tool_name, file_path, "
            f"substr(content, 1, {OUTLINE_CHARS}) AS content, is_pinned, "
            "CASE WHEN obs_type IN ('command_error', 'file_error') THEN metadata END AS metadata "
            f"FROM observations WHERE {' AND '.join(clauses)} ORDER BY timestamp DESC, id DESC LIMIT ?",
            [*params, limit])
        return [Observation.from_row(r) for r in rows]

    def curated_memories(self, project: str, limit: int) -> list[Memory]:
        """Live memories a project sees (its own, the user's, the organisation's) that people or
        agents chose to keep: automatic checkpoints (tag `checkpoint`) and archived ones left out.
        Pinned first, then newest."""
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.tier != 'archived' "
            f"AND m.domain IN (?, 'user', 'org') AND NOT COALESCE({self.dialect.tag_match('m')}, FALSE) "
            "ORDER BY m.is_pinned DESC, m.updated_at DESC, m.id DESC LIMIT ?",
            (f"project:{project}", "checkpoint", limit))
        return [Memory.from_row(r) for r in rows]

    def latest_checkpoint(self, project: str, session_id: str) -> Memory | None:
        """The newest automatic checkpoint (tag `checkpoint`) a session left in its project."""
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.domain = ? AND m.source = ? "
            f"AND {self.dialect.tag_match('m')} ORDER BY m.created_at DESC, m.id DESC LIMIT 1",
            (f"project:{project}", f"session:{session_id}", "checkpoint"))
        return Memory.from_row(rows[0]) if rows else None

    def status(self) -> Status:
        """Each table's rows, and by what they are told apart: every total is the sum of its
        groups (exact, and one read less), the trail's groups as the engine keeps them (`_counts`)."""
        def group(sql: str) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in self._query(sql)}

        by_obs_type, by_source = self._counts("observations"), self._counts("prompts")
        live = "FROM memories WHERE deleted_at IS NULL GROUP BY 1 ORDER BY 2 DESC, 1"
        by_namespace = group(f"SELECT namespace, COUNT(*) {live}")
        by_project = group("SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 2 DESC, 1")
        return Status(
            url=self.url,
            schema_version=self.schema_version(),
            size_bytes=self._size_bytes(),
            sessions=sum(by_project.values()),
            prompts=sum(by_source.values()),
            observations=sum(by_obs_type.values()),
            memories=sum(by_namespace.values()),
            by_obs_type=by_obs_type,
            by_namespace=by_namespace,
            by_tier=group(f"SELECT tier, COUNT(*) {live}"),
            by_project=by_project,
            by_prompt_source=by_source,
        )

