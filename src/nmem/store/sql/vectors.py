"""Vectors for the optional embeddings (nmem.search.embeddings)."""

from __future__ import annotations

from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import marks
from nmem.store.sql.filters import memory_filters, observation_filters, prompt_filters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, ClassVar

    from nmem.store.records import SearchFilters


class VectorRows(SqlBase):
    # -- vectors (optional embeddings, nmem.search.embeddings) ------------------------------

    # Per kind: the table, its integer key, the text embedded, and which rows count.
    _VECTOR_SOURCES: ClassVar[dict[str, tuple[str, str, str]]] = {
        "observation": ("observations", "content", "TRUE"),
        "prompt": ("prompts", "content", "TRUE"),
        "memory": ("memories", "summary || '\n' || content", "deleted_at IS NULL"),
    }

    def _vector_source(self, kind: str) -> tuple[str, str, str]:
        if kind not in self._VECTOR_SOURCES:
            raise ValueError(f"no vectors for kind {kind!r}")
        return self._VECTOR_SOURCES[kind]

    def count_missing_vectors(self, kind: str, model: str) -> int:
        table, _, live = self._vector_source(kind)
        return int(self._query(
            f"SELECT COUNT(*) FROM {table} t WHERE {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = ? AND v.row_id = t.id AND v.model = ?)",
            (kind, model))[0][0])

    def missing_vectors(self, kind: str, model: str, after: int, limit: int) -> list[tuple[int, str]]:
        """(row id, text) of rows past `after` without a vector for `model`, in id order."""
        table, text, live = self._vector_source(kind)
        rows = self._query(
            f"SELECT t.id, {text} AS text FROM {table} t WHERE t.id > ? AND {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = ? AND v.row_id = t.id AND v.model = ?) "
            "ORDER BY t.id LIMIT ?", (after, kind, model, limit))
        return [(int(r["id"]), str(r["text"])) for r in rows]

    def put_vectors(self, kind: str, model: str, dim: int, rows: Sequence[tuple[int, bytes]]) -> None:
        self._vector_source(kind)
        if not rows:
            return
        with self.transaction():
            self._exec_many("INSERT INTO vectors (kind, row_id, model, dim, vec) VALUES (?, ?, ?, ?, ?) "
                            "ON CONFLICT (kind, row_id, model) DO UPDATE SET dim = excluded.dim, vec = excluded.vec",
                            [(kind, row_id, model, dim, blob) for row_id, blob in rows])

    def get_vectors(self, kind: str, model: str, ids: Sequence[int | str]) -> dict[int | str, bytes]:
        self._vector_source(kind)
        if not ids:
            return {}
        if kind == "memory":
            rows = self._query(
                "SELECT m.uid AS id, v.vec FROM memories m JOIN vectors v "
                "ON v.kind = 'memory' AND v.row_id = m.id AND v.model = ? "
                f"WHERE m.uid IN ({marks(len(ids))})", [model, *(str(i) for i in ids)])
        else:
            rows = self._query(
                f"SELECT row_id AS id, vec FROM vectors WHERE kind = ? AND model = ? AND row_id IN ({marks(len(ids))})",
                [kind, model, *(int(i) for i in ids)])
        return {r["id"]: bytes(r["vec"]) for r in rows}

    def vector_scan(self, kind: str, model: str, filters: SearchFilters, limit: int
                    ) -> tuple[list[int | str], list[bytes]]:
        """Ids and vectors of the newest `limit` rows of a kind that match the search filters."""
        clauses: list[str] = []
        params: list[Any] = [kind, model]
        if kind == "observation":
            select = "SELECT o.id AS id, v.vec FROM observations o"
            key, order = "o.id", "o.id"
            observation_filters(filters, clauses, params)
        elif kind == "prompt":
            select = "SELECT p.id AS id, v.vec FROM prompts p JOIN sessions s ON s.id = p.session_id"
            key, order = "p.id", "p.id"
            prompt_filters(filters, clauses, params)
        else:
            self._vector_source(kind)
            select = "SELECT m.uid AS id, v.vec FROM memories m"
            key, order = "m.id", "m.updated_at"
            clauses.append("m.deleted_at IS NULL")
            memory_filters(filters, clauses, params, self.dialect)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(
            f"{select} JOIN vectors v ON v.kind = ? AND v.row_id = {key} AND v.model = ? {where} "
            f"ORDER BY {order} DESC LIMIT ?", [*params, limit])
        return [r["id"] for r in rows], [bytes(r["vec"]) for r in rows]

    def count_vectors(self, kind: str, model: str) -> int:
        self._vector_source(kind)
        return int(self._query("SELECT COUNT(*) FROM vectors WHERE kind = ? AND model = ?", (kind, model))[0][0])

    def delete_vectors(self, model: str | None) -> int:
        """Drop the stored vectors of one model, or of every model (None)."""
        if model is None:
            return self._exec("DELETE FROM vectors")
        return self._exec("DELETE FROM vectors WHERE model = ?", (model,))

    def prune_vectors(self) -> int:
        """Drop vectors whose row is gone (written while the row was being deleted)."""
        removed = 0
        for kind, (table, _, live) in self._VECTOR_SOURCES.items():
            removed += self._exec(
                f"DELETE FROM vectors WHERE kind = ? AND row_id NOT IN (SELECT id FROM {table} WHERE {live})",
                (kind,))
        return removed
