"""Vectors for the optional embeddings on PostgreSQL: float32 BYTEA rows, as SQLite keeps them.

nmem scores vectors in Python (nmem.search.embeddings), so the engine only stores and reads
them; pgvector would add an index for nearest-neighbour reads, which nmem does not make (see
docs/postgres.md), so it is not required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from nmem.store.postgres.connection import Connection
from nmem.store.postgres.filters import memory_filters, observation_filters, prompt_filters
from nmem.store.records import SearchFilters

if TYPE_CHECKING:
    from collections.abc import Sequence


class VectorRows(Connection):
    _VECTOR_SOURCES: ClassVar[dict[str, tuple[str, str, str]]] = {
        "observation": ("observations", "content", "TRUE"),
        "prompt": ("prompts", "content", "TRUE"),
        "memory": ("memories", "summary || chr(10) || content", "deleted_at IS NULL"),
    }

    def _vector_source(self, kind: str) -> tuple[str, str, str]:
        if kind not in self._VECTOR_SOURCES:
            raise ValueError(f"no vectors for kind {kind!r}")
        return self._VECTOR_SOURCES[kind]

    def count_missing_vectors(self, kind: str, model: str) -> int:
        table, _, live = self._vector_source(kind)
        return int(self._query(
            f"SELECT COUNT(*) FROM {table} t WHERE {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = %s AND v.row_id = t.id AND v.model = %s)", (kind, model))[0][0])

    def missing_vectors(self, kind: str, model: str, after: int, limit: int) -> list[tuple[int, str]]:
        table, text, live = self._vector_source(kind)
        rows = self._query(
            f"SELECT t.id, {text} AS text FROM {table} t WHERE t.id > %s AND {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = %s AND v.row_id = t.id AND v.model = %s) ORDER BY t.id LIMIT %s",
            (after, kind, model, limit))
        return [(int(r[0]), str(r[1])) for r in rows]

    def put_vectors(self, kind: str, model: str, dim: int, rows: Sequence[tuple[int, bytes]]) -> None:
        self._vector_source(kind)
        if not rows:
            return
        with self.transaction():
            for row_id, blob in rows:
                self._exec("INSERT INTO vectors (kind, row_id, model, dim, vec) VALUES (%s, %s, %s, %s, %s) "
                           "ON CONFLICT (kind, row_id, model) DO UPDATE SET dim = excluded.dim, vec = excluded.vec",
                           (kind, row_id, model, dim, blob))

    def get_vectors(self, kind: str, model: str, ids: Sequence[int | str]) -> dict[int | str, bytes]:
        self._vector_source(kind)
        if not ids:
            return {}
        if kind == "memory":
            rows = self._query("SELECT m.uid AS id, v.vec FROM memories m JOIN vectors v "
                               "ON v.kind = 'memory' AND v.row_id = m.id AND v.model = %s WHERE m.uid = ANY(%s)",
                               (model, [str(i) for i in ids]))
        else:
            rows = self._query("SELECT row_id AS id, vec FROM vectors WHERE kind = %s AND model = %s "
                               "AND row_id = ANY(%s)", (kind, model, [int(i) for i in ids]))
        return {r["id"]: bytes(r["vec"]) for r in rows}

    def vector_scan(self, kind: str, model: str, filters: SearchFilters, limit: int
                    ) -> tuple[list[int | str], list[bytes]]:
        clauses: list[str] = []
        params: list[Any] = [kind, model]
        if kind == "observation":
            select, key, order = "SELECT o.id AS id, v.vec FROM observations o", "o.id", "o.id"
            observation_filters(filters, clauses, params)
        elif kind == "prompt":
            select = "SELECT p.id AS id, v.vec FROM prompts p JOIN sessions s ON s.id = p.session_id"
            key, order = "p.id", "p.id"
            prompt_filters(filters, clauses, params)
        else:
            self._vector_source(kind)
            select, key, order = "SELECT m.uid AS id, v.vec FROM memories m", "m.id", "m.updated_at"
            clauses.append("m.deleted_at IS NULL")
            memory_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(f"{select} JOIN vectors v ON v.kind = %s AND v.row_id = {key} AND v.model = %s {where} "
                           f"ORDER BY {order} DESC LIMIT %s", [*params, limit])
        return [r["id"] for r in rows], [bytes(r["vec"]) for r in rows]

    def count_vectors(self, kind: str, model: str) -> int:
        self._vector_source(kind)
        return int(self._query("SELECT COUNT(*) FROM vectors WHERE kind = %s AND model = %s", (kind, model))[0][0])

    def delete_vectors(self, model: str | None) -> int:
        if model is None:
            return self._exec("DELETE FROM vectors")
        return self._exec("DELETE FROM vectors WHERE model = %s", (model,))

    def prune_vectors(self) -> int:
        removed = 0
        for kind, (table, _, live) in self._VECTOR_SOURCES.items():
            removed += self._exec(f"DELETE FROM vectors WHERE kind = %s AND row_id NOT IN "
                                  f"(SELECT id FROM {table} WHERE {live})", (kind,))
        return removed
