"""The PostgreSQL engine's connections: a psycopg pool, transactions, migrations, query helpers.

Threads share the pool; each thread's write transaction (`with store.transaction():`) and
read snapshot hold one pooled connection until they end, and every statement the thread runs
meanwhile goes through it. Statements outside both take a connection for their own
autocommitted round trip. psycopg is imported here, never on the hook path (nmem.store
imports this package only for a postgresql:// URL).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import RowMaker
from psycopg_pool import ConnectionPool, PoolTimeout

from nmem.errors import (
    CommitUnknown,
    QuerySyntaxError,
    StorageError,
    StoreBusy,
    StoreDisconnected,
    StoreReadOnly,
    StoreUnavailable,
)
from nmem.store.postgres.dialect import DIALECT
from nmem.store.postgres.schema import LATEST_VERSION, MIGRATIONS
from nmem.store.postgres.tsquery import to_tsquery_text
from nmem.store.sql.base import SqlBase

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from psycopg._cursor_base import BaseCursor

log = logging.getLogger("nmem.store")
T = TypeVar("T")

POOL_MAX = 8

# What a sweep can shrink and `file_bytes` measures: every table nmem writes, with its indexes
# and TOAST (PostgreSQL has no single database file; the server holds other databases too).
_TABLES = ("sessions", "prompts", "observations", "memories", "vectors", "import_marks", "sync_state",
           "sync_ops", "sync_files", "spooled_events", "lifecycle_runs", "lifecycle_changes", "lifecycle_state",
           "team_users", "team_tokens", "audit")

# What every pooled session sets first. nmem's statements are short reads and writes that many
# requests run at once: JIT compiling (PostgreSQL's default past a plan cost of 100,000, which a
# ranked search passes at 1M rows) spent 205 ms of a 456 ms search compiling it, and a parallel
# plan starts worker processes per statement on cores the other requests need.
SESSION_SETTINGS = "SET jit = off; SET max_parallel_workers_per_gather = 0"

# One key for the advisory lock that serialises migrations between processes opening the same schema.
MIGRATION_LOCK = 0x6E6D656D  # "nmem"

# The change feed reads rows past a cursor in id order (`nmem.changes`), but two writers (a server's
# write lane and its spool drainer, two `--workers`, an MCP server) can commit out of id order: a
# reader between the two commits would step over the lower id for good. So every write transaction
# holds its schema's feed lock *shared* from its BEGIN (writers never wait for each other), and the
# feed reads only up to the sequences' values taken before it held the same lock *exclusively* for
# an instant: every transaction that had drawn an id up to there had ended by then. The two-key form
# keeps clear of MIGRATION_LOCK's one-key space.
# A writer takes its transaction id at BEGIN too (it would at its first write), so a writer that
# has drawn an id is in every later snapshot's in-progress list until it ends: what a reader needs
# to tell whether all it saw up to an id is settled (`SETTLED`).
FEED_LOCK = "28269, hashtext(current_schema())"
BEGIN_WRITE = f"BEGIN; SELECT pg_advisory_xact_lock_shared({FEED_LOCK}), pg_current_xact_id()"
# True in a statement when no row it cannot see can still commit with an id below one it saw:
# every writer in flight when its snapshot was taken is still in flight (else it may have
# committed rows the snapshot misses) and holds no feed lock (no other writer of this schema is).
SETTLED = ("(NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) AS x "
           "WHERE pg_xact_status(x) IS DISTINCT FROM 'in progress') "
           "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 28269 "
           "AND l.objid = hashtext(current_schema())::oid AND l.objsubid = 2 AND l.pid <> pg_backend_pid()))")
DRAWN_IDS = ("SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('observations', 'id')::regclass), 0), "
             "COALESCE(pg_sequence_last_value(pg_get_serial_sequence('prompts', 'id')::regclass), 0), "
             "COALESCE(pg_sequence_last_value(pg_get_serial_sequence('change_log', 'seq')::regclass), 0)")
FEED_WAIT_MS = 2000


class Row(tuple[Any, ...]):
    """A result row read by column name or position, as `sqlite3.Row` is (the records'
    `from_row` and nmem.store.oplog read rows by name). Each result's columns make a subclass
    (`_shaped`) whose class holds the names: a row is a bare tuple with no dict of its own,
    built by `tuple.__new__` without a Python frame (a ranked search reads thousands of rows)."""

    __slots__ = ()
    names: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


@lru_cache(maxsize=1024)   # a statement's columns are one of a few hundred shapes
def _shaped(columns: tuple[str, ...]) -> RowMaker[Row]:
    shape = type("Row", (Row,), {"__slots__": (), "names": {name: i for i, name in enumerate(columns)}})
    return partial(tuple.__new__, shape)


def row_factory(cursor: BaseCursor[Any, Any]) -> RowMaker[Row]:
    # The column names straight from the result: `cursor.description` builds a Column object for
    # each (5.6 µs for 8 columns against 0.6), on every statement a request runs.
    result = cursor.pgresult
    if result is None:
        return _shaped(())
    return _shaped(tuple((result.fname(i) or b"").decode() for i in range(result.nfields)))


def redact(url: str) -> str:
    """The URL without its password, for messages and `status`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, f"{parts.username}:***@{host}", parts.path, parts.query, parts.fragment))


def storage_error(exc: psycopg.Error, what: str = "database error") -> StorageError:
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction | pg_errors.InsufficientPrivilege):
        return StoreReadOnly(f"{what}: {exc}")
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.DeadlockDetected | pg_errors.SerializationFailure):
        return StoreBusy(f"database is busy: {exc}")
    if _connection_lost(exc):
        # the caller fails (a 503): the server's log says why, the client's answer does not
        log.error("%s: the database server closed the connection (%s)", what, _cause(exc))
        return StoreDisconnected(f"{what}: the database server closed the connection; try again")
    if isinstance(exc, psycopg.OperationalError):
        log.error("%s: %s", what, _cause(exc))
        return StoreUnavailable(f"{what}: {exc}")
    return StorageError(f"{what}: {exc}")


def _cause(exc: BaseException) -> str:
    """The first line of what the server or libpq said, with its SQLSTATE when there is one."""
    text = str(exc).strip().splitlines()
    state = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}{f' {state}' if state else ''}: {text[0] if text else 'no message'}"


@lru_cache(maxsize=2048)
def pg_sql(sql: str) -> str:
    """The shared statements' text with PostgreSQL's own marks: each `?` outside quoted text
    becomes `$1`, `$2`, … in order, the rest (a `%` too) sent as it is, through psycopg 3.2's
    RawCursor. psycopg's `%s` form is split and rebuilt by psycopg at every run of a statement
    longer than 4 kB (its cache holds shorter ones only): the ranking reads are 10-20 kB.
    Statements are few and repeat, so each is translated once."""
    if "?" not in sql:
        return sql
    out: list[str] = []
    quote = ""
    n = 0
    for ch in sql:
        if quote:
            out.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


def array_text(values: Iterable[Any]) -> str:
    """The text of a PostgreSQL array of `values` (str, int, bool or None), for a mark cast to
    its array type (`?::text[]`): psycopg dumps a list in Python, element by element, looking
    up each one's type (a ranking read sends eight to ten lists: a tenth of its client CPU);
    a str is sent as it is. Every text is quoted: a word, a tsquery's `'it''s'`, an empty one."""
    out = []
    for value in values:
        if value is None:
            out.append("NULL")
        elif value is True or value is False:
            out.append("t" if value else "f")
        elif isinstance(value, int):
            out.append(str(value))
        else:
            out.append('"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(out) + "}"


def _connection_lost(exc: psycopg.Error) -> bool:
    """The server went away under the statement (restart, pg_terminate_backend, a dropped link),
    or refuses connections while it starts or stops: class 08 and 57P01-57P03."""
    state = getattr(exc, "sqlstate", None) or ""
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return True
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not state


def tsquery(match: str) -> str | None:
    """The tsquery text of an FTS5 expression (QuerySyntaxError when malformed), None when it
    matches nothing."""
    return to_tsquery_text(match)


def _configure(conn: psycopg.Connection[Row]) -> None:
    conn.execute(SESSION_SETTINGS)


def _begin_write(conn: psycopg.Connection[Row]) -> str | None:
    """BEGIN a write transaction on `conn`; its transaction id."""
    cur = conn.execute(BEGIN_WRITE)
    cur.nextset()
    result = cur.pgresult   # read off the result: no row built, on every write
    value = result.get_value(0, 1) if result is not None else None
    return value.decode() if value is not None else None


_TUPLES = psycopg.pq.ExecStatus.TUPLES_OK
_IDLE = psycopg.pq.TransactionStatus.IDLE
_IN_TRANSACTION = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)


def _begin_snapshot(conn: psycopg.Connection[Row]) -> None:
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")


def _settle(conn: psycopg.Connection[Row]) -> bool:
    """Hold the feed lock exclusively for an instant: False when the writers outlasted the wait."""
    try:
        conn.execute(f"BEGIN; SET LOCAL lock_timeout = {FEED_WAIT_MS}; "
                     f"SELECT pg_advisory_xact_lock({FEED_LOCK}); COMMIT")
    except pg_errors.LockNotAvailable:
        return False   # the connection is left in its failed transaction: `_put` ends it
    return True


def _execute(conn: psycopg.Connection[Row], sql: str, params: Sequence[Any] | None, fetch: bool,
             plans: str | None) -> tuple[list[Row], int]:
    """One statement run as `plans` says (`_planned`)."""
    return _planned(conn, [(sql, params, plans)], fetch)[0]


def _execute_many(conn: psycopg.Connection[Row],
                  statements: Sequence[tuple[str, Sequence[Any], str | None]]) -> list[list[Row]]:
    """Several reads sent together (a pipeline: one round trip), each run as `_execute` runs
    it alone (`plans`), their rows in order."""
    return [rows for rows, _ in _planned(conn, statements, True)]


# How a connection plans the runs of its prepared statements (`plan_cache_mode`). psycopg prepares
# a statement after five runs on a connection, and PostgreSQL may then keep one generic plan for
# it: for the ranking statements on a large table those lost, on a server's many connections,
# about half of what a search costs (docs/benchmarks/postgres.md), so those run on a connection that plans
# every run for its values (CUSTOM_PLANS; its other statements are small, and planning them costs
# little). Preparing still saves parsing them each time. A ranking read whose plan does not depend
# on its values (GENERIC_PLANS, nmem.store.postgres.search `_generic_plan`) runs its generic plan,
# prepared at its first run (not psycopg's fifth: a question's statement seldom runs five times on
# one connection, and parsing and planning it unprepared cost 2-3.5 ms at 1M rows): planning a
# ranking statement costs about a millisecond, most of a search filtered to the last days.
CUSTOM_PLANS = "force_custom_plan"
GENERIC_PLANS = "force_generic_plan"
# A read of rows by their keys (`id = ANY(?)`), whose plan is the same whatever the ids: its generic
# plan on a connection set to plan every run (which planned it at every run: 0.3 ms for a page's
# observations, 0.6 for the prompts' turns at 100k), else as the connection does (PostgreSQL's
# own choice settles on the generic plan after five runs; no SET spent on it).
KEYED_PLANS = "keyed"
# A statement of a small store (`Connection._plans`, nmem.store.postgres.search `CUSTOM_PLAN_ROWS`)
# runs in whatever mode its connection is in, a generic one too: there its ranking reads run on
# their generic plans (planning them at every run cost more than running them), and a statement
# that asked a connection back to custom plans before each of them cost a SET per statement
# (docs/benchmarks/postgres.md, 2026-11-30, pg-plan). So a small store's connections are set to
# generic plans as the pool makes them (`Connection._configure_pooled`; else at their first ranking
# read) and stay there.
ANY_PLANS = "any"
# The mode a connection is known to be in: at the session level (`_MODES`, set outside a
# transaction), and within its transaction (`_LOCAL`, SET LOCAL: gone at its end, commit or
# rollback, when `_put` forgets it). A connection missing from `_MODES` was never set
# (PostgreSQL's `auto`); UNKNOWN_PLANS: a SET may or may not have run (its pipeline failed).
# A connection keeps the mode its last statement needed, and a SET goes out only before a
# statement that needs another: a run of ranking reads on their generic plans sends none, where a
# SET before each and one back after cost two statements a search (client and backend CPU:
# docs/benchmarks/postgres.md, 2026-11-29, pg-1m).
UNKNOWN_PLANS = "unknown"
_MODES: weakref.WeakKeyDictionary[psycopg.Connection[Row], str] = weakref.WeakKeyDictionary()
_LOCAL: weakref.WeakKeyDictionary[psycopg.Connection[Row], str] = weakref.WeakKeyDictionary()


def _generic_session(conn: psycopg.Connection[Row]) -> None:
    """`conn`'s session set to generic plans (an idle connection), and known to be."""
    conn.execute(f"SET plan_cache_mode = {GENERIC_PLANS}")
    _MODES[conn] = GENERIC_PLANS


def _needs(mode: str | None, plans: str | None) -> str | None:
    """The mode a statement of `plans` needs on a connection in `mode` (None: any)."""
    if plans == ANY_PLANS:
        return None
    if plans == KEYED_PLANS:
        return None if mode is None or mode == GENERIC_PLANS else GENERIC_PLANS
    if plans is not None:
        return plans
    # as the connection plans, but never on a generic plan another statement's mode left (that
    # mode holds unprepared statements too)
    return CUSTOM_PLANS if mode in (GENERIC_PLANS, UNKNOWN_PLANS) else None


def _planned(conn: psycopg.Connection[Row], statements: Sequence[tuple[str, Sequence[Any] | None, str | None]],
             fetch: bool) -> list[tuple[list[Row], int]]:
    """Statements (sql with $n marks, params, plans) run in order on `conn`, each in the plan
    mode it needs (`_needs`), a SET sent before one only when the connection is in another mode
    (SET LOCAL inside a transaction); a statement on its generic plan is prepared at its first run.
    One statement alone is sent as it is; several (or one after a SET) go together in a pipeline:
    one round trip. The connection keeps the last mode, known for the next statements."""
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    known = _MODES if idle else _LOCAL
    start = mode = _MODES.get(conn) if idle else _LOCAL.get(conn, _MODES.get(conn))
    steps: list[tuple[str, Sequence[Any] | None, bool | None, bool]] = []   # sql, params, prepare, a result
    for sql, params, plans in statements:
        need = _needs(mode, plans)
        if need is not None and need != mode:
            steps.append((f"SET {'' if idle else 'LOCAL '}plan_cache_mode = {need}", None, False, False))
            mode = need
        generic = mode == GENERIC_PLANS and plans in (GENERIC_PLANS, KEYED_PLANS)
        steps.append((sql, params, True if generic else None, True))
    cursors = []
    try:
        if len(steps) == 1:
            sql, params, prepare, _ = steps[0]
            cursors.append(psycopg.RawCursor(conn).execute(sql, params, prepare=prepare))
        else:
            with conn.pipeline():
                for sql, params, prepare, result in steps:
                    cur = psycopg.RawCursor(conn).execute(sql, params, prepare=prepare)
                    if result:
                        cursors.append(cur)
    except BaseException:
        if mode != start:
            known[conn] = UNKNOWN_PLANS   # a SET may not have run: set again next time
        raise
    if mode != start and mode is not None:
        known[conn] = mode
    # a result's rows when it has some (`cur.description` would build a Column for each column)
    return [((cur.fetchall() if fetch and cur.pgresult is not None and cur.pgresult.status == _TUPLES else []),
             cur.rowcount) for cur in cursors]


class _Held(threading.local):
    conn: psycopg.Connection[Row] | None = None   # the write transaction's connection
    xid: str | None = None                        # and its transaction id (what became of a lost COMMIT)
    snap: psycopg.Connection[Row] | None = None   # the read snapshot's connection
    depth = 0          # nested transaction() blocks
    snapshots = 0      # nested read_snapshot() blocks


class Connection(SqlBase):
    """The engine's connections and transactions; the other parts of PostgresStore build on it."""

    dialect = DIALECT

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000, readonly: bool = False) -> None:
        self.url = redact(url)
        self.readonly = readonly
        self.busy_timeout_ms = busy_timeout_ms
        self._held = _Held()
        self._df_cache: dict[tuple[str, str], tuple[int, int]] = {}   # (table, term) -> (rows, docs then)
        self._totals: dict[str, tuple[int, int, int]] = {}   # table -> (rows, tokens, newest id then)
        self._bounds: dict[tuple[str, str], tuple[int, int]] = {}   # (table, tsquery) -> (most matches, docs then)
        self._weighted: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}   # memories, sessions
        # memories, sessions -> (signature, the words' counts at it, the two arrays' texts or [])
        self._weighted_dfs: dict[str, tuple[tuple[int, int], dict[str, int], list[str]]] = {}
        self._projects: dict[str, tuple[int, dict[str, float], float]] = {}   # table -> (docs then, shares, other's)
        self._past: dict[str, bool] = {}   # ranked table -> past CUSTOM_PLAN_ROWS when the store opened
        conninfo = self._conninfo = url.replace("postgres://", "postgresql://", 1)
        # a read-only store's sessions refuse writes server-side too (kept beside the URL's own options)
        options = ""
        if readonly:
            given = str(conninfo_to_dict(conninfo).get("options") or "")
            options = f"{given} -c default_transaction_read_only=on".strip()
        try:
            # One plain connection first: a wrong host, database or role fails at once with the
            # server's own reason (the pool would retry in the background until its timeout).
            psycopg.connect(conninfo, connect_timeout=max(1, busy_timeout_ms // 1000)).close()
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreUnavailable(f"cannot connect to {self.url}: {reason}") from exc
        try:
            # reconnect_timeout 0: a connection the pool could not make is given up at once (after a
            # second try), not retried on a back-off that doubles up to minutes while the server is
            # down; the next request that finds the pool empty connects again, so the first request
            # after the server is back is served (`_acquire`).
            self._pool: ConnectionPool[psycopg.Connection[Row]] = ConnectionPool(
                conninfo, min_size=1, max_size=POOL_MAX, open=False, name="nmem", configure=self._configure_pooled,
                timeout=max(busy_timeout_ms / 1000, 1.0), reconnect_timeout=0,
                kwargs={"autocommit": True, "row_factory": row_factory,
                        **({"options": options} if options else {})})
            # Not waited for: the migration check below takes the first connection (or fails with
            # why none came); a first connection ended while it was made is made again on demand.
            self._pool.open()
        except (PoolTimeout, psycopg.Error) as exc:
            self._close_pool()
            raise StoreUnavailable(f"cannot connect to {self.url}: {exc}") from exc
        try:
            if readonly:
                self._check_readable()
            else:
                self._migrate_anew()
            self._size_up()
        except BaseException:
            self._close_pool()
            raise

    def _configure_pooled(self, conn: psycopg.Connection[Row]) -> None:
        """A new pooled connection's session: SESSION_SETTINGS, then, on a small store (`_plans`),
        generic plans at once, so that none of its searches sends a SET for it. Until the store
        knows its size, the new connection finds it out itself (`_size_up`): a connection the
        pool made while the store sized up at open, and put in the pool after, is set too."""
        _configure(conn)
        if not self._past:
            self._size_up(conn)
        if self._plans() == ANY_PLANS:
            _generic_session(conn)

    def _size_up(self, conn: psycopg.Connection[Row] | None = None) -> None:
        """What the store learns of its tables' sizes, when it opens or through a new pooled
        connection `conn` (nmem.store.postgres.search)."""

    def _generic_pool(self) -> None:
        """Every idle pooled connection set to generic plans (a store found small as it opened:
        the connections made before it knew; no one else holds the pool yet). One that cannot
        be is set by its first ranking read."""
        held = []
        try:
            for _ in range(self._pool.get_stats().get("pool_available", 0)):
                conn = self._pool.getconn(timeout=1.0)
                held.append(conn)
                if _MODES.get(conn) != GENERIC_PLANS and conn.info.transaction_status == _IDLE:
                    _generic_session(conn)
        except (psycopg.Error, PoolTimeout):
            pass
        finally:
            for conn in held:
                self._pool.putconn(conn)

    def _close_pool(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def close(self, checkpoint: bool = True) -> None:
        self._close_pool()

    def reserve_connections(self, connections: int, ready: int = 0) -> None:
        """Let the pool grow to `connections` (a server's request threads each hold one while
        they read; POOL_MAX stays the floor), and keep `ready` of them open from now on (opened in
        the background at once). Left to grow on demand, the pool opens one connection at a time
        while requests wait, and a connection opened under load costs its backend's start and
        cold caches in the middle of the burst: `make bench-team --pg`'s first wave of 200
        searches, sent to a server just started, waited 1.7 s on average against 0.75-1.2 s with
        the read threads' connections open before it came (bench/team.py, docs/team.md)."""
        most = max(connections, self._pool.max_size)
        least = max(self._pool.min_size, min(ready, most))
        if (least, most) != (self._pool.min_size, self._pool.max_size):
            self._pool.resize(least, most)

    def pool_stats(self) -> dict[str, int]:
        """The connection pool's counters and sizes (psycopg_pool's `get_stats`): `requests_num`
        connections taken (one for each statement outside a transaction or snapshot, one for each
        of those), `requests_queued` of them waited for one, `requests_wait_ms` in all, and
        `pool_size` open, `pool_available` idle, `pool_max`, `requests_waiting` now."""
        return self._pool.get_stats()

    # -- transactions and migrations ---------------------------------------------------------

    def transaction(self) -> _Transaction:
        """A write transaction on this thread's connection; nested uses join the outer one.

        What its end tells: a normal exit, committed (also when COMMIT's answer was lost and the
        server says it committed); CommitUnknown, the answer lost and the outcome unknown (it may
        have committed: not to be written again blindly); any other error, nothing committed."""
        return _Transaction(self)

    def _in_write(self) -> bool:
        return self._held.depth > 0

    def settled_heads(self) -> tuple[int, int, int] | None:
        if self._in_write():   # this thread's own transaction holds the lock shared: it would wait for itself
            return None
        drawn = tuple(int(v) for v in self._query(DRAWN_IDS)[0])
        try:   # the lock taken later than `drawn` (a retry) still tells the same
            settled = self._once(_settle, "the change feed's read of settled ids")
        except psycopg.Error as exc:
            raise storage_error(exc, "cannot read the change feed") from exc
        if not settled:
            return (0, 0, 0)   # nothing is known settled yet: the next read tries again
        return drawn[0], drawn[1], drawn[2]

    def read_snapshot(self) -> _Snapshot:
        """`with store.read_snapshot():` — every read inside sees the database as of its first
        statement (REPEATABLE READ), whatever other sessions commit meanwhile."""
        return _Snapshot(self)

    # -- connections: every one is taken and given back here ----------------------------------
    #
    # The server may end any backend at any moment (a restart, pg_terminate_backend, a dropped
    # link). What that costs depends on where it lands, and is handled here alone:
    # - on a connection idle in the pool: its first statement fails before doing anything, so
    #   `_take` checks the pool (the others likely went too) and runs it once more on another;
    # - under a read (a statement of its own, a snapshot's BEGIN, the feed's lock): read again;
    # - inside a write transaction: nothing of it committed; the caller hears StoreDisconnected
    #   (503, Retry-After) and the next write takes a fresh connection;
    # - under COMMIT: the answer is lost, not the outcome: `_commit_outcome` asks the server, and
    #   raises CommitUnknown when it cannot tell (never StoreDisconnected, which promises nothing
    #   was stored);
    # - while connecting: the pool gives the attempt up, and the next request connects again.
    # Nothing but nmem's own errors leaves this class, and the server's log names each cause.

    def _acquire(self) -> psycopg.Connection[Row]:
        try:
            return self._pool.getconn()
        except PoolTimeout as exc:
            why = self._no_connection()
            if not (isinstance(why, StoreBusy) and self._short_of_connections()):
                raise why from exc
        # The pool was not out of connections: it could not make one (the server refused it or
        # ended it as it was made, as in a failover) and waits for none after it gave up on that
        # attempt (reconnect_timeout 0); the server takes connections again now, so asking once
        # more makes one. A server started during a storm of ended backends otherwise exited
        # on "no database connection free" a moment after the storm.
        try:
            return self._pool.getconn()
        except PoolTimeout as exc:
            raise self._no_connection() from exc

    def _short_of_connections(self) -> bool:
        """Whether the pool holds fewer connections than it may make: a wait for one that timed
        out then was not for a busy pool but for a connection it could not make."""
        stats = self._pool.get_stats()
        return stats.get("pool_size", 0) < stats.get("pool_max", 0)

    def _no_connection(self) -> StorageError:
        """Why the pool had no connection within the timeout: the server refuses new ones (down,
        restarting, too many clients), or every connection is busy."""
        try:
            psycopg.connect(self._conninfo, connect_timeout=max(1, self.busy_timeout_ms // 1000)).close()
        except psycopg.Error as exc:
            log.error("cannot connect to %s: %s", self.url, _cause(exc))
            return StoreDisconnected(f"cannot connect to {self.url}; try again")
        return StoreBusy(f"no database connection free within {self.busy_timeout_ms} ms")

    def _put(self, conn: psycopg.Connection[Row]) -> None:
        """Back to the pool, out of any transaction (a dropped connection is discarded there)."""
        _LOCAL.pop(conn, None)   # its transaction's SET LOCAL ends with it
        if conn.pgconn.transaction_status in _IN_TRANSACTION:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                pass   # dropped: BAD, which the pool discards and replaces
        self._pool.putconn(conn)

    def _take(self, first: Callable[[psycopg.Connection[Row]], T], what: str) -> tuple[psycopg.Connection[Row], T]:
        """A pooled connection and what `first` returned on it. `first` must be safe to run again:
        a read, or the BEGIN of a transaction. When the server had ended the connection (it sat in
        the pool, or the read was under way), the pool is checked and `first` runs on another, at
        once the first time, then for up to `busy_timeout`: a server ending backends over and over
        (a failover, an administrator's clean-up) fails a second try too, and a server starting
        then would exit on its first read."""
        deadline = 0.0
        while True:
            conn = self._acquire()
            try:
                return conn, first(conn)
            except psycopg.Error as exc:
                self._put(conn)
                if not _connection_lost(exc):
                    raise
                now = time.monotonic()
                if deadline and now > deadline:
                    raise
                if deadline:
                    time.sleep(0.01)   # ended again: the server is ending backends over and over
                else:   # logged once a call: a storm of ended backends would flood the log
                    log.warning("%s: the database server had closed the connection (%s); on another",
                                what, _cause(exc))
                    deadline = now + self.busy_timeout_ms / 1000
                self._drop_dead()
            except BaseException:
                self._put(conn)
                raise

    def _once(self, first: Callable[[psycopg.Connection[Row]], T], what: str) -> T:
        """`first` on a pooled connection (`_take`), the connection given back after it."""
        conn, result = self._take(first, what)
        self._put(conn)
        return result

    def _drop_dead(self) -> None:
        """After one pooled connection turned out dropped (a server restart, pg_terminate_backend),
        the others idle beside it likely are too: the pool tests each and replaces the dead."""
        try:
            self._pool.check()
        except (PoolTimeout, psycopg.Error):
            pass  # the server is not back yet: the retry reports it

    def _release(self) -> None:
        conn, self._held.conn, self._held.xid = self._held.conn, None, None
        if conn is not None:
            self._put(conn)

    def _reading(self) -> psycopg.Connection[Row] | None:
        """The connection this thread's statements go through: its write transaction's (which
        sees its own writes), else its snapshot's, else None (a pooled one per statement)."""
        held = self._held
        return held.conn if held.conn is not None else held.snap

    def fan_out_reads(self) -> bool:
        """Reads outside a transaction or snapshot take a pooled connection each."""
        return self._reading() is None

    def _begin(self) -> None:
        held = self._held
        if self.readonly:
            raise StoreReadOnly("store opened read-only")
        if held.depth:
            held.depth += 1
            return
        try:
            held.conn, held.xid = self._take(_begin_write, "start a write")
        except psycopg.Error as exc:
            raise storage_error(exc, "cannot start a write") from exc
        held.depth = 1

    def _end(self, failed: bool) -> None:
        held = self._held
        held.depth -= 1
        if held.depth:
            return
        conn, xid = held.conn, held.xid
        assert conn is not None
        try:
            conn.execute("ROLLBACK" if failed else "COMMIT")
            return
        except psycopg.Error as exc:
            if failed:
                return   # a ROLLBACK that failed: the transaction is gone either way
            if not _connection_lost(exc):
                raise storage_error(exc, "cannot commit") from exc
            lost = exc
        finally:
            self._release()
        self._commit_outcome(xid, lost)

    def _commit_outcome(self, xid: str | None, lost: psycopg.Error) -> None:
        """After a COMMIT whose connection was lost, the server may have committed or not: told
        "try again" after it did, a caller would store the write twice. So the server is asked
        what became of the transaction (its id was taken at BEGIN): return when it committed,
        StoreDisconnected when it did not (nothing stored: writing again is safe), CommitUnknown
        when that cannot be known within `busy_timeout` (the transaction still running, or the
        server unreachable): the write may be stored, so nothing may write it again blindly."""
        status = self._xact_status(xid)
        if status == "committed":
            log.warning("commit: the database server closed the connection (%s) after the transaction "
                        "committed; answered as committed", _cause(lost))
            return
        if status == "aborted":
            error = storage_error(lost, "cannot commit")   # logged there
            raise StoreDisconnected(f"{error.message} (nothing was stored)") from lost
        log.error("commit: the database server closed the connection (%s); whether transaction %s "
                  "committed is unknown (%s)", _cause(lost), xid, status or "the server did not answer")
        raise CommitUnknown("cannot commit: the database server closed the connection, and whether "
                            "the write was stored is unknown; check before writing it again") from lost

    def _xact_status(self, xid: str | None) -> str | None:
        """What the server says became of transaction `xid`: `committed` or `aborted`, or what it
        last said (`in progress`; None: not asked, or no answer) when it did not end within
        `busy_timeout`. Asked on a connection of its own, not a pooled one: the pool's may have
        gone with the lost one (a dropped link), or all be busy. A backend whose client went away
        ends its transaction within moments (it commits what it had received COMMIT for, aborts
        the rest); one still running past the wait is waiting for something (a lock, a
        synchronous replica)."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        status: str | None = None
        conn: psycopg.Connection[Any] | None = None
        unanswered = 0
        try:
            while xid is not None:
                try:
                    conn = conn if conn is not None and not conn.closed else psycopg.connect(
                        self._conninfo, autocommit=True, connect_timeout=max(1, self.busy_timeout_ms // 1000))
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                    status = row[0] if row else None
                except psycopg.Error as exc:
                    if not unanswered:   # the first alone: the server may stay unreachable throughout
                        log.warning("commit: cannot ask the server what became of transaction %s (%s)",
                                    xid, _cause(exc))
                    unanswered += 1
                    status = None
                if status in ("committed", "aborted") or time.monotonic() > deadline:
                    return status
                time.sleep(0.02)
        finally:
            if conn is not None:
                conn.close()
        return status

    def _open_snapshot(self) -> None:
        held = self._held
        if held.snapshots:
            held.snapshots += 1
            return
        try:
            held.snap, _ = self._take(_begin_snapshot, "start a read")
        except psycopg.Error as exc:
            raise storage_error(exc, "cannot start a read") from exc
        held.snapshots = 1

    def _close_snapshot(self) -> None:
        held = self._held
        held.snapshots -= 1
        if held.snapshots:
            return
        conn, held.snap = held.snap, None
        if conn is not None:
            self._put(conn)   # ROLLBACK: a read-only transaction has nothing to keep

    def schema_version(self) -> int:
        rows = self._query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations "
                           "WHERE to_regclass('schema_migrations') IS NOT NULL")
        return int(rows[0][0])

    def _current_version(self) -> int:
        exists = self._query("SELECT to_regclass('schema_migrations') IS NOT NULL")[0][0]
        return self.schema_version() if exists else 0

    def _check_readable(self) -> None:
        """A read-only store reads the latest schema: an older one is migrated first through a
        writable connection (the one write a read-only open makes, as on SQLite)."""
        version = self._current_version()
        if version < LATEST_VERSION:
            try:
                Connection(self._conninfo, busy_timeout_ms=self.busy_timeout_ms).close()
            except StoreReadOnly:
                pass
            version = self._current_version()
        if version != LATEST_VERSION:
            raise StorageError(f"database schema v{version} is not this nmem's v{LATEST_VERSION}: "
                               "open it once with write access so nmem can set it up")

    def _migrate_anew(self) -> None:
        """`_migrate`, run again while the server ends its backends (the steps are one transaction,
        so a lost one left nothing), for up to `busy_timeout`: a server opening its store during a
        database restart starts once the database is back."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                self._migrate()
                return
            except StoreDisconnected:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _migrate(self, target: int = LATEST_VERSION) -> None:
        with self.transaction():
            # Serialises openers: the second waits here, then finds the steps applied.
            self._exec("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            self._exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                       "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            version = self.schema_version()
            if version > LATEST_VERSION:
                raise StorageError(f"database schema v{version} is newer than this nmem (v{LATEST_VERSION})")
            for step in range(version + 1, target + 1):
                self._exec(MIGRATIONS[step - 1])
                self._exec("INSERT INTO schema_migrations (version) VALUES (?)", (step,))

    # -- shared by several parts -------------------------------------------------------------

    def _scrub(self, *tables: str) -> None:
        """Forgetting means gone: a deleted row's text stays in its table's pages (and the GIN
        index's) until VACUUM reclaims them, so a forget or purge vacuums the tables at once.
        A VACUUM cannot run inside a transaction: inside one, the caller scrubs after it."""
        if self._held.depth:
            return
        self._totals.clear()   # rows went: count the index's totals again
        for table in tables:
            try:
                self._run(f"VACUUM {table}", None, fetch=False)
            except StorageError:
                pass  # the delete is committed; autovacuum reclaims the space later

    def file_bytes(self) -> int:
        """Bytes the data of nmem's tables takes: their main forks, their indexes' and TOAST's.
        The free-space and visibility maps are left out: the VACUUM after a sweep creates them,
        so counting them would show a sweep growing the store. A plain VACUUM gives back only
        empty pages at a table's end, so a sweep shrinks this less than an SQLite file."""
        names = ", ".join(f"to_regclass('{t}')" for t in _TABLES)
        return int(self._query(
            "SELECT COALESCE(SUM(pg_relation_size(rel)), 0) FROM ("
            f"SELECT c.oid AS rel FROM pg_class c WHERE c.oid IN ({names}) "
            f"UNION ALL SELECT c.reltoastrelid FROM pg_class c WHERE c.oid IN ({names}) AND c.reltoastrelid <> 0 "
            f"UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid IN ({names})) AS parts")[0][0])

    def _size_bytes(self) -> int:
        """What nmem's main tables take, with their indexes and TOAST."""
        tables = ("sessions", "prompts", "observations", "memories", "vectors", "sync_ops")
        return int(self._query("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                               f"WHERE c.oid IN ({', '.join(f'to_regclass({t!r})' for t in tables)})")[0][0])

    def integrity(self) -> str:
        """`ok` when the schema is this nmem's and every table answers (PostgreSQL checks its own pages)."""
        version = self.schema_version()
        if version != LATEST_VERSION:
            return f"schema v{version}, expected v{LATEST_VERSION}"
        self._query("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM memories)")
        return "ok"

    def fts_consistency(self) -> dict[str, str]:
        """Per full-text index (named as SQLite's FTS5 tables, so `status --verify` reads the same
        on both engines): `ok`, or how it disagrees with its table: the GIN index is missing or
        invalid (a failed CREATE INDEX CONCURRENTLY, say), or stored tsvectors differ from what
        the rows' text gives now (the text-search configuration changed after they were written)."""
        out: dict[str, str] = {}
        for table in ("observations", "prompts", "memories"):
            name = f"{table}_fts"
            valid = self._query("SELECT i.indisvalid AND i.indisready FROM pg_index i "
                                "JOIN pg_am a ON a.oid = (SELECT relam FROM pg_class WHERE oid = i.indexrelid) "
                                "JOIN pg_attribute t ON t.attrelid = i.indrelid AND t.attnum = ANY(i.indkey) "
                                "WHERE i.indrelid = to_regclass(?) AND a.amname = 'gin' AND t.attname = 'tsv'",
                                (table,))
            if not valid:
                out[name] = f"no GIN index on {table}.tsv"
                continue
            if not any(bool(r[0]) for r in valid):
                out[name] = f"the GIN index on {table}.tsv is invalid (REINDEX it)"
                continue
            expr = self._tsv_expression(table)
            rows = self._query(f"SELECT COUNT(*), COUNT(*) FILTER (WHERE tsv IS DISTINCT FROM ({expr})) FROM {table}")
            have, stale = int(rows[0][0]), int(rows[0][1])
            out[name] = "ok" if not stale else f"{have - stale} rows indexed, {have} in {table}"
        return out

    def change_token(self) -> int:
        """Moves whenever any session writes a watched table (the nmem_changes sequence)."""
        row = self._query("SELECT last_value, is_called FROM nmem_changes")[0]
        return int(row[0]) if row[1] else 0

    def _tsv_expression(self, table: str) -> str:
        """The SQL that generates `table.tsv`, as the server holds it (so checks recompute
        exactly what the column stores, without a second copy of the expression here)."""
        rows = self._query("SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d "
                           "JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
                           "WHERE d.adrelid = to_regclass(?) AND a.attname = 'tsv'", (table,))
        if not rows:
            raise StorageError(f"{table} has no generated tsv column: is the schema nmem's?")
        return str(rows[0][0])

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] | None, fetch: bool,
             plans: str | None = None) -> tuple[list[Row], int]:
        """Run one statement written with `?` marks (translated by `pg_sql`); `params` None
        sends the text as it is (VACUUM, which takes no marks). `plans`: how the connection
        plans the runs of its prepared statements (CUSTOM_PLANS, GENERIC_PLANS, KEYED_PLANS;
        None: as it does)."""
        if params is not None:
            sql = pg_sql(sql)
        if plans is None:
            plans = self._plans()
        return self._on_reader(lambda c: _execute(c, sql, params, fetch, plans))

    def _plans(self) -> str | None:
        """How a statement with no mode of its own is planned: as its connection plans (None),
        or in any mode on a small store (ANY_PLANS: nmem.store.postgres.search says which)."""
        return None

    def _on_reader(self, call: Callable[[psycopg.Connection[Row]], T]) -> T:
        """`call` on this thread's connection (its transaction's or snapshot's), else on a pooled
        one (`_once`): outside a transaction a statement is a read (writes run in transactions)
        or a VACUUM, safe to run again. psycopg's errors leave as nmem's."""
        conn = self._reading()
        try:
            return call(conn) if conn is not None else self._once(call, "a read")
        except pg_errors.SyntaxError as exc:
            raise QuerySyntaxError(f"invalid search query: {exc}") from exc
        except psycopg.Error as exc:
            raise storage_error(exc) from exc

    def _query_many(self, statements: Sequence[tuple[str, Sequence[Any], str | None]]) -> list[list[Row]]:
        """The rows of several reads written with `?` marks, each (sql, params, plans) run as
        `_query` runs it, all in one round trip (`_execute_many`) on this thread's connection or
        one pooled connection."""
        default = self._plans()
        sent = [(pg_sql(sql), params, plans if plans is not None else default) for sql, params, plans in statements]
        return self._on_reader(lambda c: _execute_many(c, sent)) if sent else []

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a write; returns the rows it changed. Outside a transaction it is its own."""
        if self._held.depth:
            return self._run(sql, params, fetch=False)[1]
        with self.transaction():
            return self._run(sql, params, fetch=False)[1]

    def _exec_aside(self, sql: str, params: Sequence[Any]) -> bool:
        """A write that may be lost (a cache kept in the database): one autocommitted statement
        on a pooled connection of its own, beside whatever this thread holds, not retried.
        False when it failed."""
        if self.readonly:
            return False
        try:
            with self._pool.connection(timeout=max(self.busy_timeout_ms / 1000, 1.0)) as conn:
                _planned(conn, [(pg_sql(sql), params, self._plans())], False)
            return True
        except (psycopg.Error, PoolTimeout):
            return False

    def _exec_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.transaction():
            conn = self._held.conn
            assert conn is not None
            try:
                psycopg.RawCursor(conn).executemany(pg_sql(sql), rows)
            except psycopg.Error as exc:
                raise storage_error(exc) from exc

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        return int(self._exec_returning(f"{sql} RETURNING id", params)[0][0])

    def _exec_returning(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self.transaction():
            return self._run(sql, params, fetch=True)[0]

    def _query(self, sql: str, params: Sequence[Any] = (), *, plans: str | None = None) -> list[Row]:
        return self._run(sql, params, fetch=True, plans=plans)[0]

    def _stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[Row]:
        yield from self._query(sql, params)


class _Transaction:
    __slots__ = ("store",)

    def __init__(self, store: Connection) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._begin()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.store._end(failed=kind is not None)


class _Snapshot:
    __slots__ = ("store",)

    def __init__(self, store: Connection) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._open_snapshot()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.store._close_snapshot()
