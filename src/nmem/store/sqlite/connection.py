"""The SQLite engine's connections: ADR-001 PRAGMAs, WAL, one writer connection, a read-only
reader per thread, `BEGIN IMMEDIATE` transactions, migrations on open, and the query helpers every
part uses.

Threads may share one store (a server's request threads do): each thread reads through its own
reader connection, and the writer is held by one thread's transaction at a time (the others
wait for it, up to the busy timeout), as other processes wait for SQLite's write lock.

Every hook process opens this engine, so it imports like the rest of the hook path: the
`_sqlite3` extension itself (the `sqlite3` package adds only datetime adapters nmem never
uses, and `datetime` with them, ~2 ms), nmem's JSON codec, and no typing at run time.
"""

from __future__ import annotations

import _thread  # threading's C core, loaded in every interpreter: the hook path imports this module
import math
import os
import time

from nmem.errors import (
    EncryptionError,
    ForeignDatabase,
    QuerySyntaxError,
    StorageError,
    StoreBusy,
    StoreReadOnly,
    StoreUnavailable,
)
from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import HALF_LIFE_DAYS, LN2
from nmem.store.sqlite import driver
from nmem.store.sqlite.dialect import DIALECT
from nmem.store.sqlite.driver import is_locked, result_code, storage_error
from nmem.store.sqlite.files import (
    APPLICATION_ID,
    NEW,
    SQLITE_MAGIC,
    UNMARKED,
    classify_header,
    file_uri,
    inspect_unmarked,
    judge,
    look_inside,
    looks_encrypted,
    make_private,
    read_header,
    read_only_query,
    read_only_reason,
    store_closed,
    store_opened,
)
from nmem.store.sqlite.schema import LATEST_VERSION, MIGRATIONS, split_statements, tables_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _sqlite3 as sqlite3
    from collections.abc import Sequence
    from typing import Any

    from nmem.store.keys import DatabaseKey


# Pages the WAL may hold before a commit folds it into the database (SQLite's default is 1,000).
# A checkpoint writes each page changed since the last one and syncs the file; a bulk load
# rewrites the same pages (index tails, FTS5 segments and structure) in every transaction, so
# checkpointing every ~4 MB wrote them over and over: ~64 MB between checkpoints halves the time
# a bulk load at 1M rows spends committing (43 -> 22 us an event). A clean close still truncates
# the WAL.
WAL_AUTOCHECKPOINT_PAGES = 16_000

# Bytes of the file a reader maps into memory rather than reading page by page. Without a map
# every page a search touches past the connection's 2 MB cache is a pread() into that cache: at
# 100k observations 2.5 ms of system time in a 12 ms search (bench/http_server.py). Mapped, the
# kernel's page cache is read in place and the readers share it. SQLite still writes through
# write() and remaps when the file grows or shrinks; WAL mode already asks for a local file
# system, the only place where a map is safe. SQLCipher ignores it (pages are decrypted).
READ_MMAP_BYTES = 256 * 1024 * 1024




def exp_decay(age_seconds: float | None) -> float:
    """Recency in 0..1 with a 7-day half-life; future timestamps count as now."""
    if age_seconds is None:
        return 0.0
    age_days = max(float(age_seconds), 0.0) / 86400.0
    return math.exp(-LN2 * age_days / HALF_LIFE_DAYS)


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """SQLite's big-endian varint (FTS5 writes its sizes and totals with it): value, next pos."""
    value = 0
    for i in range(9):
        if pos >= len(data):
            break
        byte = data[pos]
        pos += 1
        if i == 8:
            return (value << 8) | byte, pos
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value, pos


class _PerThread(_thread._local):
    """What each thread holds of a store: its reader and its open read_snapshot() blocks. Only
    this holds a reader: it closes when its thread ends, or when the store closes (`close`)."""

    reader: sqlite3.Connection | None = None
    snapshots = 0


def _fts_error(exc: BaseException) -> QuerySyntaxError | None:
    text = str(exc)
    markers = ("fts5", "syntax error", "unterminated string", "no such column", "unknown special query")
    if any(m in text for m in markers):
        return QuerySyntaxError(f"invalid search query: {text}")
    return None


class Connection(SqlBase):
    """The engine's connections and transactions; the other parts of SqliteStore build on it."""

    dialect = DIALECT

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, readonly: bool = False,
                 key: DatabaseKey | None = None) -> None:
        self.path = os.path.expanduser(path)
        self.key = key
        self.encrypted = False   # set by _identify: SQLCipher with `key`, else the standard library
        self._db = driver.plain()
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self._w: sqlite3.Connection | None = None
        self._this_thread = _PerThread()
        self._write_lock = _thread.allocate_lock()
        self._owner: int | None = None   # the thread whose write transaction holds the writer
        self._tx_depth = 0
        # Why this store cannot write (None: it can, or was opened read-only on purpose), and
        # the URI query its reader opens the file with (see nmem.store.sqlite.files).
        self._read_only_reason: str | None = None
        self._reader_query = "mode=ro"
        # Each session's latest user prompt, known while this store holds the write lock (no
        # other writer can add one then): a bulk import or a batch of events looks it up once.
        self._latest_prompts: dict[str, int | None] = {}
        self._df_cache: dict[tuple[str, str], tuple[int, int]] = {}   # (fts, term) -> (rows, docs then)
        # viewer -> ((FTS5 averages record, hidden ids and times), (hidden rows, their tokens)): search.py
        self._hidden_sizes: dict[str, tuple[tuple[bytes, tuple[str, str]], tuple[int, int]]] = {}
        if readonly and not os.path.exists(self.path):
            raise StorageError(f"database does not exist: {self.path}")
        state = self._identify()  # refuses another application's file (or a wrong key) before any write
        reason = read_only_reason(self.path)
        if reason is not None:
            # A read-only file, directory or file system still serves reads; writes say why not.
            self.readonly = True
            self._read_only_reason = reason
            self._reader_query = read_only_query(self.path)
            self._check_readable(state)
        elif readonly:
            self._check_readable(state)
        else:
            self._prepare_files()
            try:
                self._migrate(self._writer())
            except BaseException:
                self.close(checkpoint=False)  # a refused open must not leak its connection
                raise
        store_opened(self.path)
        self._counted = True

    # -- connections -------------------------------------------------------------------

    def _identify(self) -> str:
        """NEW or NMEM, choosing the library: a plain SQLite file opens plain (a key may be set
        before `nmem encrypt`), a new file with a key is created encrypted, and a file without
        the SQLite header is opened with the key and must then show nmem's mark or tables."""
        head = read_header(self.path)
        if head.startswith(SQLITE_MAGIC) or (head and self.key is None):
            if self.key is None and looks_encrypted(self.path, head):
                raise EncryptionError(
                    f"{self.path} has no SQLite header: it is an encrypted database (or not a database at all); "
                    "set its key (NMEM_KEY, encryption.key_file or encryption.keyring, see docs/encryption.md)")
            state = classify_header(self.path, head)
            return inspect_unmarked(self.path, tables_at) if state == UNMARKED else state
        if self.key is None:
            return NEW
        self._db = driver.cipher()
        self.encrypted = True
        if not head:
            return NEW
        try:
            conn = self._db.connect(file_uri(self.path, read_only_query(self.path)), uri=True,
                                    isolation_level=None)
            try:
                driver.apply_key(conn, self.key.value)
                found = look_inside(conn)
            finally:
                conn.close()
        except driver.DATABASE_ERRORS as exc:
            if result_code(exc) in (26, 11):  # SQLITE_NOTADB, SQLITE_CORRUPT: the key does not decrypt it
                raise EncryptionError(
                    f"cannot open {self.path} with the key from {self.key.source}: the key is wrong, "
                    "or the file is not an nmem database") from exc
            raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc
        return judge(self.path, *found, tables_at)

    def _connect(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        conn = self._db.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
        if self.key is not None and self.encrypted:
            driver.apply_key(conn, self.key.value)
        return conn  # type: ignore[no-any-return]

    def _check_readable(self, state: str) -> None:
        """A read-only store reads the latest schema: an older file is upgraded first (the one
        write a read-only open makes) when nmem may write it; a newer one is refused."""
        try:
            version = 0 if state == NEW else self.schema_version()
        except BaseException:
            self.close()
            raise
        if version == LATEST_VERSION:
            return
        self.close()
        if version > LATEST_VERSION:
            raise StorageError(f"database schema v{version} is newer than this nmem (v{LATEST_VERSION})")
        if self._read_only_reason is not None:
            what = "is empty" if version == 0 else f"is at schema v{version}, older than this nmem's v{LATEST_VERSION}"
            raise StoreReadOnly(f"database {self.path} {what} and read-only ({self._read_only_reason}): "
                                "open it once with write access so nmem can set it up")
        Connection(self.path, busy_timeout_ms=self.busy_timeout_ms, key=self.key).close(checkpoint=False)  # migrates

    def _prepare_files(self) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            if os.path.exists(self.path):
                make_private(self.path)  # a file made by an older tool: prompts are private
            else:
                os.makedirs(directory, mode=0o700, exist_ok=True)  # several processes may race here
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise StoreUnavailable(f"cannot create database {self.path}: {exc.strerror}") from exc

    def _configure(self, conn: sqlite3.Connection, writer: bool) -> None:
        conn.row_factory = self._db.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if writer:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted and overwritten content is zeroed, not left in free space: what is
            # forgotten or purged cannot be read back from the file.
            conn.execute("PRAGMA secure_delete = ON")
        else:
            conn.execute(f"PRAGMA mmap_size = {READ_MMAP_BYTES}")
        conn.create_function("exp_decay", 1, exp_decay, deterministic=True)
        try:
            conn.execute("SELECT exp(0.0)")
        except driver.OPERATIONAL:  # an SQLite built without math functions
            conn.create_function("exp", 1, math.exp, deterministic=True)

    def _writer(self) -> sqlite3.Connection:
        if self.readonly:
            if self._read_only_reason is not None:
                raise StoreReadOnly(f"database is read-only: cannot write {self.path}: {self._read_only_reason}")
            raise StoreReadOnly("store opened read-only")
        if self._w is None:
            try:
                conn = self._connect(self.path)
                self._configure(conn, writer=True)
            except driver.ERRORS as exc:
                raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc
            self._w = conn
        return self._w

    def _reader(self) -> sqlite3.Connection:
        """This thread's read-only connection."""
        conn = self._this_thread.reader
        if conn is None:
            uri = file_uri(self.path, self._reader_query)
            try:
                conn = self._connect(uri, uri=True)
                self._configure(conn, writer=False)
            except driver.ERRORS as exc:
                raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc
            self._this_thread.reader = conn
        return conn

    @property
    def _depth(self) -> int:
        """This thread's nested transaction() blocks (0 while another thread holds the writer)."""
        return self._tx_depth if self._owner == _thread.get_ident() else 0

    def close(self, checkpoint: bool = True) -> None:
        if getattr(self, "_counted", False):
            self._counted = False
            store_closed(self.path)
        # CPython's sqlite3 crashes the process when a connection is closed while another thread
        # is inside one of its statements (a server's change watch mid-poll as the server stops
        # did). So only this thread's reader is closed here; another thread's is let go, and
        # closes when its last reference does: at once if that thread is idle, else when its
        # statement (or its read_snapshot() block) is done.
        mine = self._this_thread.reader
        self._this_thread = _PerThread()
        if mine is not None:
            mine.close()
        if self._w is None:
            return
        # The writer likewise: a write under way on another thread ends (commits or rolls back)
        # before its connection closes. One that outlasts the busy timeout keeps it.
        held = self._owner == _thread.get_ident() or self._write_lock.acquire(True, self.busy_timeout_ms / 1000)
        if not held:
            return
        try:
            if checkpoint:
                try:
                    self._w.execute("PRAGMA busy_timeout = 100")
                    self._w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except driver.ERRORS:
                    pass  # another connection is active; the next clean close folds the WAL
            self._w.close()
            self._w = None
        finally:
            if self._owner != _thread.get_ident():
                self._write_lock.release()

    # -- transactions and migrations -----------------------------------------------------

    def transaction(self) -> _Transaction:
        """A write transaction (`with store.transaction():`); nested uses join the outer one."""
        return _Transaction(self)

    def _in_write(self) -> bool:
        return self._depth > 0

    def _undone_part(self) -> None:
        self._latest_prompts.clear()

    def _begin(self) -> None:
        me = _thread.get_ident()
        if self._owner == me:
            self._tx_depth += 1
            return
        self._hold_writer()
        try:
            conn = self._writer()
            conn.execute("BEGIN IMMEDIATE")
        except driver.ERRORS as exc:
            self._write_lock.release()
            if is_locked(exc):
                raise StoreBusy(f"database is busy (waited {self.busy_timeout_ms} ms)") from exc
            raise storage_error(exc, self.path, "cannot start a write") from exc
        except BaseException:
            self._write_lock.release()
            raise
        self._owner, self._tx_depth = me, 1

    def _hold_writer(self) -> None:
        """Wait (up to the busy timeout) while another thread's write transaction holds the writer."""
        if not self._write_lock.acquire(True, self.busy_timeout_ms / 1000):
            raise StoreBusy(f"database is busy (waited {self.busy_timeout_ms} ms for another thread's write)")

    def _end(self, failed: bool) -> None:
        self._tx_depth -= 1
        if self._tx_depth:
            return
        try:
            self._latest_prompts.clear()
            conn = self._writer()
            if failed:
                self._rollback(conn)
                return
            try:
                conn.execute("COMMIT")
            except driver.ERRORS as exc:
                self._rollback(conn)
                raise storage_error(exc, self.path, "cannot commit") from exc
        finally:
            self._owner = None
            self._write_lock.release()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Undo the open transaction, if SQLite has not already (it does on a full disk or an
        I/O error). If even that fails, closing the connection rolls back; the error on its way
        out is the one to report."""
        if not conn.in_transaction:
            return
        try:
            conn.execute("ROLLBACK")
        except driver.ERRORS:
            conn.close()
            self._w = None

    def schema_version(self) -> int:
        conn = self._reading()
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        except driver.ERRORS as exc:
            raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc

    def _migrate(self, conn: sqlite3.Connection, target: int = LATEST_VERSION) -> None:
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > LATEST_VERSION:
                raise StorageError(
                    f"database schema v{version} is newer than this nmem (v{LATEST_VERSION})")
            marked = int(conn.execute("PRAGMA application_id").fetchone()[0]) == APPLICATION_ID
            if version >= target and marked:
                return
            if version == 0:
                # Only effective while the file has no table yet (a no-op if a racing opener
                # created them first); it cannot be set inside a transaction.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            if not marked:
                self._mark(conn)
            for step in range(version + 1, target + 1):
                with self.transaction():
                    # Re-read inside the lock: another process may have migrated meanwhile.
                    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
                    if current >= step:
                        continue
                    for statement in split_statements(MIGRATIONS[step - 1]):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {step}")
            self._ensure_wal(conn)
        except driver.ERRORS as exc:
            raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc

    def _mark(self, conn: sqlite3.Connection) -> None:
        """Stamp nmem's application_id on a new database (before its first table) or on one an
        older nmem made (identified by its tables), checking again under the write lock."""
        with self.transaction():
            app = int(conn.execute("PRAGMA application_id").fetchone()[0])
            if app not in (0, APPLICATION_ID):
                raise ForeignDatabase(f"{self.path} is not an nmem database: another application marked it "
                                      f"(application_id {app:#010x}) while nmem was opening it")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _ensure_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL (persistent); another opener may hold a lock for a moment, so retry."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except driver.OPERATIONAL as exc:
                if not is_locked(exc) or time.monotonic() > deadline:
                    raise
                mode = None
            if str(mode).lower() == "wal" or time.monotonic() > deadline:
                return
            time.sleep(0.01)

    def migrate_to(self, target: int) -> None:
        """Apply migrations up to `target` (tests use it to build older databases)."""
        self._migrate(self._writer(), target)

    # -- shared by several parts: sessions by id, index rewrites, the sync outbox -------------

    def _forget_bytes(self, table: str) -> None:
        """FTS5 keeps a deleted row's terms in its index segments until they are merged: rewrite."""
        fts = f"{table}_fts"
        self._exec(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")

    def _scrub(self, *tables: str) -> None:
        """After a delete: give free pages back and fold the WAL into the file, truncated."""
        if self._depth:
            return  # executescript() would commit the caller's open transaction; its caller scrubs
        try:
            self._hold_writer()
        except StoreBusy:
            return  # another thread writes now; a later scrub or clean close folds the WAL
        try:
            # incremental_vacuum frees one page per step and its rows have no columns, so
            # execute() stops after the first page; executescript() steps it to the end.
            self._writer().executescript("PRAGMA incremental_vacuum(1000);")
            # Waits (busy timeout) for readers of older snapshots; if one stays, its pages are
            # zeroed already and the next clean close truncates the WAL.
            self._writer().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except driver.ERRORS:
            pass  # the delete is committed; space comes back and the WAL folds on a later close
        finally:
            self._write_lock.release()

    def file_bytes(self) -> int:
        """Bytes the database file's pages take (free pages included: what a vacuum gives back)."""
        return int(self._query("PRAGMA page_count")[0][0]) * int(self._query("PRAGMA page_size")[0][0])

    def _known_prompts(self) -> dict[str, int | None] | None:
        return self._latest_prompts if self._depth else None

    def change_token(self) -> int:
        """Changes whenever any connection (another process included) commits to the database."""
        try:
            return int(self._reader().execute("PRAGMA data_version").fetchone()[0])
        except driver.ERRORS as exc:
            raise storage_error(exc, self.path) from exc

    def read_snapshot(self) -> Snapshot:
        """`with store.read_snapshot():` — every read inside sees the database as of the first
        one (a read transaction on the reader), whatever other processes commit meanwhile."""
        return Snapshot(self)

    def _counts(self, table: str) -> dict[str, int]:
        """As the triggers of schema step 17 keep them (`trail_counts`): no row of `table` read."""
        return {str(r[0]): int(r[1]) for r in self._query(
            "SELECT key, n FROM trail_counts WHERE tbl = ? AND n > 0 ORDER BY 2 DESC, 1", (table,))}

    def _size_bytes(self) -> int:
        """The database file's pages and its WAL."""
        pages = int(self._query("PRAGMA page_count")[0][0]) * int(self._query("PRAGMA page_size")[0][0])
        wal = self.path + "-wal"
        return pages + (os.path.getsize(wal) if os.path.exists(wal) else 0)

    def integrity(self) -> str:
        """`ok`, or what SQLite's quick_check found wrong."""
        rows = self._query("PRAGMA quick_check")
        return "; ".join(str(r[0]) for r in rows) or "ok"

    def fts_consistency(self) -> dict[str, str]:
        """Per full-text index: `ok`, or how it disagrees with its table (FTS5's own
        integrity-check, then indexed rows against table rows)."""
        checks = {"observations_fts": "observations", "prompts_fts": "prompts", "memories_fts": "memories"}
        out: dict[str, str] = {}
        for fts, table in checks.items():
            try:  # a command written as an INSERT: it needs the writer, and changes nothing
                with self.transaction():
                    self._writer().execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")
            except driver.ERRORS as exc:
                out[fts] = f"integrity-check failed: {exc}"
                continue
            rows = self._query(f"SELECT (SELECT COUNT(*) FROM {table}), (SELECT COUNT(*) FROM {fts}_docsize)")
            have, indexed = int(rows[0][0]), int(rows[0][1])
            out[fts] = "ok" if have == indexed else f"{indexed} rows indexed, {have} in {table}"
        return out

    def _cursor(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        conn = self._writer()
        try:
            if self._depth:
                return conn.execute(sql, params)
            with self.transaction():
                return conn.execute(sql, params)
        except driver.ERRORS as exc:
            raise storage_error(exc, self.path) from exc

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._cursor(sql, params).rowcount)

    def _exec_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.transaction():
            try:
                self._writer().executemany(sql, rows)
            except driver.ERRORS as exc:
                raise storage_error(exc, self.path) from exc

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        return int(self._cursor(sql, params).lastrowid or 0)

    def _reading(self) -> sqlite3.Connection:
        """The connection a read goes through: inside a write transaction the writer's, so the
        transaction sees its own writes; else this thread's read connection."""
        return self._w if (self._depth and self._w is not None) else self._reader()

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        conn = self._reading()
        try:
            return conn.execute(sql, params).fetchall()
        except driver.ERRORS as exc:
            raise self._read_error(exc) from exc

    def _tuples(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`_query`'s rows as plain tuples: a read of many rows spared a `Row` object each."""
        conn = self._reading()
        try:
            cursor = conn.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()
        except driver.ERRORS as exc:
            raise self._read_error(exc) from exc

    def _read_error(self, exc: BaseException) -> Exception:
        if result_code(exc) == 1:  # SQLITE_ERROR
            fts = _fts_error(exc)
            if fts is not None:
                return fts
        return storage_error(exc, self.path)


class Snapshot:
    """`with store.read_snapshot():` — BEGIN on the read-only connection, COMMIT on the way out
    (nested uses join the outer one)."""

    __slots__ = ("store",)

    def __init__(self, store: Connection) -> None:
        self.store = store

    def __enter__(self) -> None:
        store = self.store
        mine = store._this_thread
        if mine.snapshots == 0:
            store._reader().execute("BEGIN")
        mine.snapshots += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        mine = self.store._this_thread
        mine.snapshots -= 1
        if mine.snapshots == 0 and mine.reader is not None and mine.reader.in_transaction:
            mine.reader.execute("COMMIT")


class _Transaction:
    """`with store.transaction():` — BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any exception.

    A class rather than `contextlib.contextmanager`, which costs the hook path ~3 ms to import.
    """

    __slots__ = ("store",)

    def __init__(self, store: Connection) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._begin()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.store._end(failed=kind is not None)
