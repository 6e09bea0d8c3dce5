"""The SQLite engine's concerns a hook never uses: navigation, vectors, the lifecycle's rows and
the change feed. `SqliteStore` becomes `WholeStore` on the first use of one of them (see
`nmem.store.sqlite`)."""

from __future__ import annotations

from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.vectors import VectorRows
from nmem.store.sqlite import SqliteStore

REST = (NavigationReads, VectorRows, LifecycleRows, ChangeReads)


class WholeStore(SqliteStore, NavigationReads, VectorRows, LifecycleRows, ChangeReads):
    """Every concern of the SQLite engine."""
