"""The PostgreSQL engine: the same Store protocol on a server many machines can share.

`PostgresStore` is this engine's `Connection` (a psycopg pool, transactions, migrations, and
`pg_sql`, which turns the shared statements' `?` marks into PostgreSQL's `$1`, `$2`, …) and its full-text
search, with the concern mixins both engines share from `nmem.store.sql`:

    connection.py  the pool, transactions, pg_sql, status and integrity
    dialect.py     how PostgreSQL spells what the shared statements leave open
    search.py      tsvector matches ranked by FTS5's BM25, ranking statistics
    schema.py      the numbered migrations; tsquery.py: nmem's query language as a tsquery
"""

from __future__ import annotations

from nmem.store.postgres.search import SearchReads
from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.context import ContextReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.memories import MemoryRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.sync import SyncRows
from nmem.store.sql.team import TeamRows
from nmem.store.sql.trail import TrailWrites
from nmem.store.sql.vectors import VectorRows

__all__ = ["PostgresStore"]


class PostgresStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                    LifecycleRows, TeamRows, ChangeReads):
    """The Store protocol on one PostgreSQL database (or schema: `?options=-csearch_path%3D...`)."""
