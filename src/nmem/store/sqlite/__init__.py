"""The SQLite engine, nmem's embedded default: one file, WAL, FTS5.

`SqliteStore` is this engine's `Connection` (connections, transactions, migrations, the
engine hooks of `nmem.store.sql.base.SqlBase`) and its full-text search, with the concern
mixins both engines share from `nmem.store.sql`, which run here exactly as written:

    connection.py  PRAGMAs, WAL, writer and reader, BEGIN IMMEDIATE, status and integrity
    dialect.py     how SQLite spells what the shared statements leave open
    search.py      FTS5 MATCH and bm25(), the newest-match windows, ranking statistics
    schema.py      the numbered migrations; files.py: the file's identity and permissions;
    driver.py      the standard library's sqlite3 or SQLCipher, and what a failure (its result code) means
    rest.py        the concerns a hook never needs (navigation, vectors, lifecycle, the change feed)

A hook is a process per event, and each module it imports costs it: `SqliteStore` is built from
what hooks use (the trail, memories, search and context reads, sync, team rows), and becomes
`whole_class()` (the same object with the four mixins of `rest.py` added) the first time
anything asks it for a public attribute it lacks. Every caller sees the whole engine; a hook loads four modules
fewer. None of the four overrides a method of another mixin (a test checks it), so which class
an object is never changes what a method does.
"""

from __future__ import annotations

from nmem.store.sql.context import ContextReads
from nmem.store.sql.memories import MemoryRows
from nmem.store.sql.sync import SyncRows
from nmem.store.sql.team import TeamRows
from nmem.store.sql.trail import SPOOL_MARK_DAYS, TrailWrites
from nmem.store.sqlite.connection import exp_decay
from nmem.store.sqlite.search import SearchReads

TYPE_CHECKING = False

__all__ = ["SPOOL_MARK_DAYS", "SqliteStore", "exp_decay", "whole_class"]

if TYPE_CHECKING:
    from nmem.store.sql.changes import ChangeReads
    from nmem.store.sql.lifecycle import LifecycleRows
    from nmem.store.sql.navigation import NavigationReads
    from nmem.store.sql.vectors import VectorRows

    class SqliteStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                      LifecycleRows, TeamRows, ChangeReads):
        """The Store protocol on one SQLite file (see nmem.store.protocol)."""
else:
    class SqliteStore(TrailWrites, MemoryRows, SearchReads, ContextReads, SyncRows, TeamRows):
        """The Store protocol on one SQLite file (see nmem.store.protocol); what the type checker
        sees above is what an instance answers, the rest loading on first use."""

        def __getattr__(self, name: str) -> object:
            # Only reached for a name the class lacks: a public one may be the rest's.
            if name.startswith("_") or type(self) is not SqliteStore:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self.__class__ = whole_class()
            return getattr(self, name)


_whole: list[type[SqliteStore]] = []


def whole_class() -> type[SqliteStore]:
    """`SqliteStore` with the rest of the engine (`rest.REST`), made once per process."""
    if not _whole:
        from nmem.store.sqlite.rest import REST

        _whole.append(type("WholeStore", (SqliteStore, *REST), {"__module__": __name__,
                                                                 "__doc__": "Every concern of the SQLite engine."}))
    return _whole[0]
