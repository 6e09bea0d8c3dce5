"""The SQLite engine, nmem's embedded default: one file, WAL, FTS5.

`SqliteStore` is this engine's `Connection` (connections, transactions, migrations, the
engine hooks of `nmem.store.sql.base.SqlBase`) and its full-text search, with the concern
mixins both engines share from `nmem.store.sql`, which run here exactly as written:

    connection.py  PRAGMAs, WAL, writer and reader, BEGIN IMMEDIATE, status and integrity
    dialect.py     how SQLite spells what the shared statements leave open
    search.py      FTS5 MATCH and bm25(), the newest-match windows, ranking statistics
    schema.py      the numbered migrations; files.py: the file's identity and permissions;
    driver.py      the standard library's sqlite3 or SQLCipher, and what a failure (its result code) means
    concerns.py    which concern module holds which public method (`CONCERNS`)

A hook is a process per event, and each module it imports costs it (~0.15 ms, more with the
classes it defines): a tool call writes the trail and needs nothing else, a SessionStart reads
the context, a marked prompt writes a memory. So `SqliteStore` is the connection and the trail
(`TrailWrites`); every other concern joins the object the first time anything asks it for a
public name that concern provides (`concerns.CONCERNS`): its class becomes one with that mixin
added, made once per process for each set of concerns. Every caller sees the whole engine; a
tool call loads nine modules fewer. No concern redefines a name of the connection, the trail
or another concern (a test checks it, and checks `CONCERNS` against the classes), so which
class an object is never changes what a method does.
"""

from __future__ import annotations

from _thread import allocate_lock

from nmem.store.sql.trail import SPOOL_MARK_DAYS, TrailWrites
from nmem.store.sqlite.concerns import CONCERNS, NEEDS
from nmem.store.sqlite.connection import Connection, exp_decay

TYPE_CHECKING = False

__all__ = ["SPOOL_MARK_DAYS", "SqliteStore", "exp_decay", "whole_class"]

if TYPE_CHECKING:
    from nmem.store.sql.changes import ChangeReads
    from nmem.store.sql.context import ContextReads
    from nmem.store.sql.lifecycle import LifecycleRows
    from nmem.store.sql.memories import MemoryRows
    from nmem.store.sql.navigation import NavigationReads
    from nmem.store.sql.sync import SyncRows
    from nmem.store.sql.team import TeamRows
    from nmem.store.sql.vectors import VectorRows
    from nmem.store.sqlite.search import SearchReads

    class SqliteStore(TrailWrites, MemoryRows, SearchReads, ContextReads, NavigationReads, SyncRows, VectorRows,
                      LifecycleRows, TeamRows, ChangeReads):
        """The Store protocol on one SQLite file (see nmem.store.protocol)."""
else:
    class SqliteStore(TrailWrites, Connection):
        """The Store protocol on one SQLite file (see nmem.store.protocol); what the type checker
        sees above is what an instance answers, each concern loading on its first use."""

        _concerns: frozenset[str] = frozenset()   # the modules of `CONCERNS` this class holds

        def __getattr__(self, name: str) -> object:
            # Only reached for a name the class lacks: a public one may be a concern's not yet loaded.
            module = None if name.startswith("_") else _concern_of(name)
            if module is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            if module in type(self)._concerns:   # another thread loaded it since this lookup missed
                return object.__getattribute__(self, name)
            with _growing:   # threads of a server share a store: each adds to what the other added
                self.__class__ = _with_concerns(type(self)._concerns | {module, *NEEDS.get(module, ())})
            return getattr(self, name)


def _concern_of(name: str) -> str | None:
    for module, (_, names) in CONCERNS.items():
        if name in names:
            return module
    return None


_growing = allocate_lock()
_classes: dict[frozenset[str], type[SqliteStore]] = {}


def _with_concerns(modules: frozenset[str]) -> type[SqliteStore]:
    """`SqliteStore` with the mixins of these concern modules, made once per process for each set."""
    cls = _classes.get(modules)
    if cls is None:
        mixins = tuple(getattr(__import__(m, fromlist=[klass]), klass)   # no importlib on the hook path
                       for m, (klass, _) in CONCERNS.items() if m in modules)
        cls = type("SqliteStore", (SqliteStore, *mixins), {"__module__": __name__, "_concerns": modules,
                                                            "__doc__": SqliteStore.__doc__})
        _classes[modules] = cls
    return cls


def whole_class() -> type[SqliteStore]:
    """`SqliteStore` with every concern of the engine."""
    return _with_concerns(frozenset(CONCERNS))
