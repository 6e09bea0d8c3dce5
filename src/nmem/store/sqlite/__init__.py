"""The SQLite engine, nmem's embedded default: one file, WAL, FTS5.

`SqliteStore` is assembled from one class per concern, each in its own module over the shared
`Connection` (connections, transactions, migrations, query helpers):

    trail.py       writing sessions, prompts, observations, import marks, purges
    memories.py    curated memories, whole rows for export and import
    search.py      records by id and by FTS5 match, ranking statistics
    context.py     timelines, traces, file histories, the SessionStart block, status
    navigation.py  sessions by prefix and time, recorded paths, purge selections
    sync.py        sync bookkeeping and change tokens
    vectors.py     vectors for the optional embeddings
    team.py        the team server's users, tokens, audit trail and writers
    lifecycle.py   tiers, retention sweeps, consolidation runs and their undo log
    schema.py      the numbered migrations; files.py: the file's identity and permissions;
    errors.py      SQLite result codes as nmem's storage errors
"""

from __future__ import annotations

from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.context import ContextReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.memories import MemoryRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.team import TeamRows
from nmem.store.sql.trail import SPOOL_MARK_DAYS, TrailWrites
from nmem.store.sql.vectors import VectorRows
from nmem.store.sqlite.connection import exp_decay
from nmem.store.sqlite.search import SearchReads
from nmem.store.sqlite.sync import SyncRows

__all__ = ["SPOOL_MARK_DAYS", "SqliteStore", "exp_decay"]


class SqliteStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                  LifecycleRows, TeamRows, ChangeReads):
    """The Store protocol on one SQLite file (see nmem.store.protocol)."""

