"""How SQLite spells what the shared statements leave to the engine (nmem.store.sql.dialect)."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.store.sql.dialect import DECAY_PER_SECOND

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class SqliteDialect:
    name = "sqlite"
    same_as = "IS"
    binary = ""
    lock_rows = ""   # BEGIN IMMEDIATE already holds the one write lock
    keys_per_statement = 1

    @staticmethod
    def tag_match(alias: str) -> str:
        return f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE value = ?)"

    @staticmethod
    def recency(column: str) -> str:
        # Built-in exp() (SQLite's math functions) keeps the scoring in C, no Python call a row.
        return f"exp({DECAY_PER_SECOND!r} * max(? - {column}, 0))"

    @staticmethod
    def in_ids(column: str, values: Sequence[Any]) -> tuple[str, Any]:
        # One JSON parameter: a purge of 100k ids stays under SQLite's limit on marks.
        return f"{column} IN (SELECT value FROM json_each(?))", json.dumps(list(values))

    @staticmethod
    def utc_day(column: str) -> str:
        return f"date({column}, 'unixepoch')"


DIALECT = SqliteDialect()
