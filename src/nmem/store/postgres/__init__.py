"""The PostgreSQL engine: the same Store protocol on a server many machines can share.

`PostgresStore` is assembled like SqliteStore, one class per concern over the shared
`Connection` (a psycopg 3 pool, transactions, numbered migrations):

    trail.py       writing sessions, prompts, observations, import marks, purges
    memories.py    curated memories, whole rows for export and import
    search.py      records by id and by tsvector match, ts_rank, ranking statistics
    context.py     timelines, traces, file histories, the SessionStart block, status
    navigation.py  sessions by prefix and time, recorded paths, purge selections
    sync.py        sync bookkeeping and change tokens
    lifecycle.py   tiers, retention sweeps, consolidation runs and their undo log
    vectors.py     vectors for the optional embeddings
    team.py        the team server's users, token digests, audit trail and writers
    schema.py      the numbered migrations; tsquery.py: nmem's query language as a tsquery
"""

from __future__ import annotations

from nmem.store.postgres.search import SearchReads
from nmem.store.postgres.sync import SyncRows
from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.context import ContextReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.memories import MemoryRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.team import TeamRows
from nmem.store.sql.trail import TrailWrites
from nmem.store.sql.vectors import VectorRows

__all__ = ["PostgresStore"]


class PostgresStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                    LifecycleRows, TeamRows, ChangeReads):
    """The Store protocol on one PostgreSQL database (or schema: `?options=-csearch_path%3D...`)."""
