"""`open_store(url)` picks an engine; the records the store takes and returns are in
`nmem.store.records` (re-exported here).

Engines own their full-text search, schema and connections; the SQL they share is written once
in `nmem.store.sql`. The service layer speaks the protocol in `nmem.store.protocol`. SQLite
(`sqlite:///path`) is the embedded default; PostgreSQL (`postgresql://`) serves a team.
"""

from __future__ import annotations

from nmem.errors import ConfigError
from nmem.store.records import (
    OUTLINE_CHARS,
    FileMark,
    FtsStats,
    ImportMark,
    NewMemory,
    NewObservation,
    ObsOutline,
    OutboxOp,
    PromptOutline,
    SearchFilters,
    SessionListing,
    Status,
    day_counts,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.store.keys import DatabaseKey
    from nmem.store.protocol import Store

__all__ = ["OUTLINE_CHARS", "FileMark", "FtsStats", "ImportMark", "NewMemory", "NewObservation", "ObsOutline",
           "OutboxOp", "PromptOutline", "SearchFilters", "SessionListing", "Status", "day_counts", "open_store"]


def open_store(url: str, *, busy_timeout_ms: int = 5000, readonly: bool = False,
               key: DatabaseKey | None = None) -> Store:
    """Open (creating and migrating if needed) the store a URL names; `key` opens (or creates)
    an encrypted SQLite database (docs/encryption.md)."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        from nmem.store.sqlite import SqliteStore  # engines load only when chosen

        # sqlite:///relative.db and sqlite:////absolute/path.db, as SQLAlchemy spells them
        return SqliteStore(url.removeprefix("sqlite:///"), busy_timeout_ms=busy_timeout_ms,
                           readonly=readonly, key=key)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from nmem.store.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError("the PostgreSQL engine needs psycopg: pip install 'nmem-memory[postgres]'") from exc
        return PostgresStore(url, busy_timeout_ms=busy_timeout_ms, readonly=readonly)
    raise ConfigError(f"unsupported store URL: {url!r} (expected sqlite:///path or postgresql://...)")
