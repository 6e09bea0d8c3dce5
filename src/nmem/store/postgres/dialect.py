"""How PostgreSQL spells what the shared statements leave to the engine (nmem.store.sql.dialect)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nmem.store.sql.dialect import DECAY_PER_SECOND

if TYPE_CHECKING:
    from collections.abc import Sequence


class PostgresDialect:
    name = "postgres"
    same_as = "IS NOT DISTINCT FROM"
    binary = ' COLLATE "C"'
    lock_rows = " FOR UPDATE"
    keys_per_statement = 100

    @staticmethod
    def tag_match(alias: str) -> str:
        # jsonb_exists, not the `?` operator, which would read as a parameter mark.
        return f"jsonb_exists(CASE WHEN {alias}.tags LIKE '[%' THEN {alias}.tags::jsonb END, ?)"

    @staticmethod
    def recency(column: str) -> str:
        return f"exp({DECAY_PER_SECOND!r} * GREATEST(? - {column}, 0))"

    @staticmethod
    def in_ids(column: str, values: Sequence[Any]) -> tuple[str, Any]:
        return f"{column} = ANY(?)", list(values)

    @staticmethod
    def utc_day(column: str) -> str:
        return f"to_char(to_timestamp({column}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


DIALECT = PostgresDialect()
