"""The SQLite engine's concerns a hook never uses: navigation, vectors, the lifecycle's rows and
the change feed. A `SqliteStore` takes them on the first use of one of them (`whole_class()`
in `nmem.store.sqlite`)."""

from __future__ import annotations

from nmem.store.sql.changes import ChangeReads
from nmem.store.sql.lifecycle import LifecycleRows
from nmem.store.sql.navigation import NavigationReads
from nmem.store.sql.vectors import VectorRows

REST = (NavigationReads, VectorRows, LifecycleRows, ChangeReads)
