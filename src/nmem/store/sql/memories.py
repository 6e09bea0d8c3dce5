"""Curated memories: inserts, edits, tombstones, and whole rows for exports and imports."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.models import Memory, Session
from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import marks
from nmem.store.sql.filters import memory_filters
from nmem.store.sql.scopes import SCOPES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

    from nmem.store.records import NewMemory, SearchFilters


# The memories a team server's user may not see (nmem.team.access): `user`-domain ones another
# writer wrote, or none recorded (written without a server). Tombstones too: the full-text index
# still holds their namespace, so they count in its statistics. Read off idx_memories_private alone
# (schema step 18 on SQLite, 11 on PostgreSQL), with each one's write time.
HIDDEN_MEMORIES_SQL = ("SELECT id, updated_at FROM memories WHERE domain = 'user' "
                       "AND (writer IS NULL OR writer <> ?)")


# A condition that memory `m` is not one of those (its parameter: the viewer's name): the subquery
# is read once per statement (a hashed subplan; an ephemeral index on SQLite).
VISIBLE_TO = f"m.id NOT IN (SELECT h.id FROM ({HIDDEN_MEMORIES_SQL}) h)"


def listed_visible(store: SqlBase, viewer: str, filters: SearchFilters, order: str, limit: int,
                   offset: int) -> list[tuple[Memory, float]]:
    """`search_memories` without a match (a page in date order) as `viewer` sees the memories:
    those hidden from them are left out before the page is cut."""
    scope = SCOPES["memories"]
    clauses, params = scope.where(filters, store.dialect)
    rows = store._query(f"SELECT {scope.columns} FROM {scope.source} WHERE {' AND '.join([*clauses, VISIBLE_TO])} "
                        f"ORDER BY {scope.order(order, False, store.dialect.binary)} LIMIT ? OFFSET ?",
                        [*params, viewer, limit, offset])
    return [(Memory.from_row(r), 0.0) for r in rows]


class MemoryRows(SqlBase):
    # -- curated memories --------------------------------------------------------------------

    def insert_memory(self, mem: NewMemory) -> Memory:
        with self.transaction():
            self._exec(
                "INSERT INTO memories (uid, domain, namespace, summary, content, tags, source, "
                "relates_to, tier, is_pinned, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (mem.uid, mem.domain, mem.namespace, mem.summary, mem.content,
                 json.dumps(list(mem.tags)), mem.source, json.dumps(list(mem.relates_to)),
                 mem.tier, int(mem.is_pinned), mem.timestamp, mem.timestamp),
            )
            self._log_memory_op(mem.uid, mem.timestamp)
        stored = self.get_memory(mem.uid)
        assert stored is not None
        return stored

    _MEMORY_FIELDS = ("domain", "namespace", "summary", "content", "tags", "source",
                      "relates_to", "tier", "is_pinned")

    def update_memory(self, uid: str, fields: dict[str, Any], timestamp: int) -> Memory | None:
        sets: list[str] = ["updated_at = ?"]
        params: list[Any] = [timestamp]
        for name, raw in fields.items():
            if name not in self._MEMORY_FIELDS:
                raise ValueError(f"not an updatable memory field: {name}")
            if name in ("tags", "relates_to"):
                params.append(json.dumps(list(raw)))
            elif name == "is_pinned":
                params.append(int(raw))
            else:
                params.append(raw)
            sets.append(f"{name} = ?")
        params.append(uid)
        with self.transaction():
            changed = self._exec(f"UPDATE memories SET {', '.join(sets)} WHERE uid = ? AND deleted_at IS NULL",
                                 params)
            if changed:
                self._log_memory_op(uid, timestamp)
        return self.get_memory(uid) if changed else None

    def tombstone_memory(self, uid: str, timestamp: int) -> bool:
        with self.transaction():
            changed = self._exec(
                "UPDATE memories SET summary = '', content = '', tags = '[]', relates_to = '[]', "
                "deleted_at = ?, updated_at = ? WHERE uid = ? AND deleted_at IS NULL",
                (timestamp, timestamp, uid),
            )
            if changed:
                self._log_memory_op(uid, timestamp)
                self._forget_sync_lines(uid)
                self._forget_bytes("memories")
        if changed:
            self._scrub("memories", "sync_ops")
        return changed > 0

    def hidden_memory_uids(self, viewer: str) -> set[str]:
        """The ids of the memories a team server's `viewer` may not see (HIDDEN_MEMORIES_SQL)."""
        return {str(r[0]) for r in self._query(
            f"SELECT uid FROM memories WHERE id IN (SELECT h.id FROM ({HIDDEN_MEMORIES_SQL}) h)", (viewer,))}

    def get_memory(self, uid: str) -> Memory | None:
        rows = self._query("SELECT * FROM memories WHERE uid = ?", (uid,))
        return Memory.from_row(rows[0]) if rows else None

    def touch_memories(self, uids: Sequence[str], timestamp: int, times: int = 1) -> None:
        if not uids or self.readonly:
            return  # access counts are bookkeeping: a read-only handle reads without them
        self._exec(f"UPDATE memories SET accessed_at = ?, access_count = access_count + ? "
                   f"WHERE uid IN ({marks(len(uids))})", [timestamp, int(times), *uids])

    def iter_memories(self, domain: str | None, namespace: str | None) -> Iterator[Memory]:
        clauses: list[str] = ["deleted_at IS NULL"]
        params: list[Any] = []
        if domain:
            clauses.append("domain = ?")
            params.append(domain)
        if namespace:
            clauses.append("namespace = ?")
            params.append(namespace)
        for row in self._query(
            f"SELECT * FROM memories WHERE {' AND '.join(clauses)} ORDER BY updated_at DESC, id DESC", params
        ):
            yield Memory.from_row(row)

    # -- curated memories by their integer row id (srvrmgr's `forget(id: integer)`) -----------

    def memory_numbers(self, uids: Sequence[str]) -> dict[str, int]:
        if not uids:
            return {}
        where = self.dialect.in_ids("uid", uids)
        rows = self._query(f"SELECT uid, id FROM memories WHERE {where[0]}", (where[1],))
        return {str(r[0]): int(r[1]) for r in rows}

    def memory_uid(self, number: int) -> str | None:
        rows = self._query("SELECT uid FROM memories WHERE id = ?", (number,))
        return str(rows[0][0]) if rows else None

    # -- moving memory: exports read a snapshot, imports write whole rows --------------------

    def export_memories(self, filters: SearchFilters, deleted: bool) -> Iterator[Memory]:
        """Memories the filters select (domains, namespaces, updated since `date_start`;
        archived ones too), tombstones only with `deleted`, in uid order."""
        clauses: list[str] = [] if deleted else ["m.deleted_at IS NULL"]
        params: list[Any] = []
        memory_filters(filters.replace(include_archived=True), clauses, params, self.dialect)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        for row in self._query(f"SELECT m.* FROM memories m {where} ORDER BY m.uid{self.dialect.binary}", params):
            yield Memory.from_row(row)

    def export_sessions(self, project: str | None, since: int | None) -> list[Session]:
        """Sessions (of `project`), oldest first; with `since`, those started, ended or holding
        a prompt or observation at or after it."""
        clauses: list[str] = []
        params: list[Any] = []
        if project is not None:
            clauses.append("s.project = ?")
            params.append(project)
        if since is not None:
            clauses.append("(s.started_at >= ? OR s.ended_at >= ? "
                           "OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id AND p.timestamp >= ?) "
                           "OR EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id "
                           "AND o.timestamp >= ?))")
            params.extend([since] * 4)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        order = f"s.started_at, s.id{self.dialect.binary}"
        return [Session.from_row(r) for r in self._query(f"SELECT * FROM sessions s {where} ORDER BY {order}", params)]

    def put_memory(self, memory: Memory) -> None:
        """Write a whole memory row by its uid (insert, or replace every field): what an import
        decided to keep. Tombstones are written as they come. Like every memory write it is
        logged for sync, and a tombstone forgets as `tombstone_memory` does."""
        with self.transaction():
            self._put_memory_row(memory)
            self._log_memory_op(memory.id, memory.updated_at)
            if memory.deleted_at is not None:
                self._forget_sync_lines(memory.id)
                self._forget_bytes("memories")
        if memory.deleted_at is not None:
            self._scrub("memories", "sync_ops")

    def _put_memory_row(self, memory: Memory) -> None:
        self._exec(
            "INSERT INTO memories (uid, domain, namespace, summary, content, tags, source, relates_to, tier, "
            "is_pinned, created_at, updated_at, accessed_at, access_count, deleted_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid) DO UPDATE SET "
            "domain = excluded.domain, namespace = excluded.namespace, summary = excluded.summary, "
            "content = excluded.content, tags = excluded.tags, source = excluded.source, "
            "relates_to = excluded.relates_to, tier = excluded.tier, is_pinned = excluded.is_pinned, "
            "created_at = excluded.created_at, updated_at = excluded.updated_at, "
            "accessed_at = excluded.accessed_at, access_count = excluded.access_count, "
            "deleted_at = excluded.deleted_at",
            (memory.id, memory.domain, memory.namespace, memory.summary, memory.content,
             json.dumps(list(memory.tags)), memory.source, json.dumps(list(memory.relates_to)), memory.tier,
             int(memory.is_pinned), memory.created_at, memory.updated_at, memory.accessed_at,
             memory.access_count, memory.deleted_at),
        )

    def put_session(self, session: Session) -> None:
        """Write a whole session row by its id (insert, or replace its times, signature and
        summary; a session keeps its project)."""
        self._exec(
            "INSERT INTO sessions (id, project, started_at, ended_at, signature, summary) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "signature = excluded.signature, summary = excluded.summary",
            (session.id, session.project, session.started_at, session.ended_at,
             None if session.signature is None else json.dumps(session.signature, sort_keys=True),
             None if session.summary is None else json.dumps(session.summary)),
        )
