"""The SQLite engine, nmem's embedded default: one file, WAL, FTS5.

`SqliteStore` is this engine's `Connection` (connections, transactions, migrations, the
engine hooks of `nmem.store.sql.base.SqlBase`) and its full-text search, with the concern
mixins both engines share from `nmem.store.sql` (trail, memories, context, navigation, sync,
changes, vectors, team, lifecycle), which run here exactly as written:

    connection.py  PRAGMAs, WAL, writer and reader, BEGIN IMMEDIATE, status and integrity
    dialect.py     how SQLite spells what the shared statements leave open
    search.py      FTS5 MATCH and bm25(), the newest-match windows, ranking statistics
    schema.py      the numbered migrations; files.py: the file's identity and permissions;
    driver.py      the standard library's sqlite3 or SQLCipher; errors.py: result codes
"""

from __future__ import annotations

from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.context import ContextReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.memories import MemoryRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.sync import SyncRows
from nmem.store.sql.team import TeamRows
from nmem.store.sql.trail import SPOOL_MARK_DAYS, TrailWrites
from nmem.store.sql.vectors import VectorRows
from nmem.store.sqlite.connection import exp_decay
from nmem.store.sqlite.search import SearchReads

__all__ = ["SPOOL_MARK_DAYS", "SqliteStore", "exp_decay"]


class SqliteStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                  LifecycleRows, TeamRows, ChangeReads):
    """The Store protocol on one SQLite file (see nmem.store.protocol)."""

