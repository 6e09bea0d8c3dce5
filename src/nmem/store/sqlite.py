"""The SQLite engine: ADR-001 PRAGMAs, WAL, one writer connection, one read-only reader.

Writes run in `BEGIN IMMEDIATE` transactions so concurrent writers queue on the busy
timeout instead of deadlocking; readers never block writers.

Every hook process opens this engine, so it imports like the rest of the hook path: the
`_sqlite3` extension itself (the `sqlite3` package adds only datetime adapters nmem never
uses, and `datetime` with them, ~2 ms), nmem's JSON codec, and no typing at run time.
"""

from __future__ import annotations

import _sqlite3 as sqlite3
import math
import os
import time

from nmem import jsonlite as json
from nmem.errors import (
    ForeignDatabase,
    QuerySyntaxError,
    StorageError,
    StoreBusy,
    StoreReadOnly,
    StoreUnavailable,
)
from nmem.models import Memory, Observation, Prompt, Session
from nmem.store import (
    OUTLINE_CHARS,
    FileMark,
    FtsStats,
    ImportMark,
    NewMemory,
    NewObservation,
    OutboxOp,
    SearchFilters,
    SessionListing,
    Status,
)
from nmem.store.sqlite_errors import is_locked, result_code, storage_error
from nmem.store.sqlite_files import (
    APPLICATION_ID,
    NEW,
    NMEM,
    file_uri,
    identify,
    make_private,
    read_only_query,
    read_only_reason,
)
from nmem.store.sqlite_schema import LATEST_VERSION, MIGRATIONS, split_statements, tables_at
from nmem.sync import oplog

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any, ClassVar

    from nmem.store import ObsOutline, PromptOutline

LN2 = math.log(2)
HALF_LIFE_DAYS = 7.0
# Rows considered by recent-context scoring: recency decays fast, so older rows cannot win
# (the newest 1,000 rows of a scope span days to weeks of work; deduplication by file needs headroom).
RECENT_CANDIDATES = 1000

# scope -> (table, its FTS5 table, the column after session_id that orders a session)
RANKED_TABLES = {"prompts": ("prompts", "prompts_fts", "id"),
                 "observations": ("observations", "observations_fts", "timestamp")}

# Pages the WAL may hold before a commit folds it into the database (SQLite's default is 1,000).
# A checkpoint writes each page changed since the last one and syncs the file; a bulk load
# rewrites the same pages (index tails, FTS5 segments and structure) in every transaction, so
# checkpointing every ~4 MB wrote them over and over: ~64 MB between checkpoints halves the time
# a bulk load at 1M rows spends committing (43 -> 22 us an event). A clean close still truncates
# the WAL.
WAL_AUTOCHECKPOINT_PAGES = 16_000

INTENT_SCAN_BATCH = 256        # observations read per step while looking for recent intents
INTENT_SCAN_LIMIT = 4096       # ... and in all, before grouping the project's prompts instead
INTENT_CLOCK_SLACK = 600       # seconds a prompt may be stamped after its own actions
DF_CACHE_DRIFT = 0.05     # reuse a term's row count while the index size stays within 5%
DF_CACHE_SIZE = 20_000

OBS_COLUMNS = ("id, session_id, project, prompt_id, timestamp, obs_type, source_event, "
               "tool_name, file_path, content, metadata, is_pinned")
OBS_COLS_O = ", ".join("o." + c.strip() for c in OBS_COLUMNS.split(","))

# Relevance-ordered full-text reads rank the newest RELEVANCE_WINDOW matching rows that pass the
# filters: FTS5 hands matches over by rowid and stops there, and BM25 costs ~1 µs a match, so a
# word found in a third of a million rows no longer costs half a second.
RELEVANCE_WINDOW = 2000
# Under a type filter, a match with at least this many rows is checked against the ids of the type
# read once off idx_obs_type_project; a smaller one row by row, which costs less than reading the
# ids of a common type (65k for file_edit in one project at 1M rows: ~15 ms).
TYPE_IDS_MIN_MATCHES = 2500
SPOOL_MARK_DAYS = 30
ROWID_MIN, ROWID_MAX = -(2**63), 2**63 - 1
LAST_CHAR = chr(0x10FFFF)  # sorts after any character: `id < prefix + LAST_CHAR` bounds a prefix scan
LIFECYCLE_TYPES = ("session_start", "session_resume", "session_compact", "session_clear", "session_end")
PURGE_BATCH = 10_000

TYPE_WEIGHT_SQL = """CASE {col}
    WHEN 'file_edit' THEN 1.0 WHEN 'file_write' THEN 1.0
    WHEN 'command' THEN 0.67 WHEN 'command_error' THEN 0.67
    WHEN 'git_commit' THEN 0.67 WHEN 'file_error' THEN 0.5
    WHEN 'session_compact' THEN 0.5 WHEN 'mcp_call' THEN 0.33
    ELSE 0.17 END"""


def exp_decay(age_seconds: float | None) -> float:
    """Recency in 0..1 with a 7-day half-life; future timestamps count as now."""
    if age_seconds is None:
        return 0.0
    age_days = max(float(age_seconds), 0.0) / 86400.0
    return math.exp(-LN2 * age_days / HALF_LIFE_DAYS)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
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


def _fts_error(exc: sqlite3.Error) -> QuerySyntaxError | None:
    text = str(exc)
    markers = ("fts5", "syntax error", "unterminated string", "no such column", "unknown special query")
    if any(m in text for m in markers):
        return QuerySyntaxError(f"invalid search query: {text}")
    return None


# Stores open in this process, by the database file's real path: see SqliteStore.__init__.
_OPEN_HERE: dict[str, int] = {}


class SqliteStore:
    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, readonly: bool = False) -> None:
        self.path = os.path.expanduser(path)
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self._w: sqlite3.Connection | None = None
        self._r: sqlite3.Connection | None = None
        self._depth = 0
        # Why this store cannot write (None: it can, or was opened read-only on purpose), and
        # the URI query its reader opens the file with (see nmem.store.sqlite_files).
        self._read_only_reason: str | None = None
        self._reader_query = "mode=ro"
        self._snapshots = 0   # nested read_snapshot() blocks open on the reader
        # Each session's latest user prompt, known while this store holds the write lock (no
        # other writer can add one then): a bulk import or a batch of events looks it up once.
        self._latest_prompts: dict[str, int | None] = {}
        self._df_cache: dict[tuple[str, str], tuple[int, int]] = {}   # (fts, term) -> (rows, docs then)
        if readonly and not os.path.exists(self.path):
            raise StorageError(f"database does not exist: {self.path}")
        # Reading the header opens and closes the file, and POSIX drops every lock this process
        # holds on a file when any descriptor of it closes: SQLite's locks of a store already open
        # here would go, so another process closing last deletes the WAL under its feet and that
        # store reads a stale snapshot from then on. A file a live store opened is nmem's already.
        self._key = os.path.realpath(self.path)
        # identify() refuses another application's file before any write.
        state = NMEM if _OPEN_HERE.get(self._key) else identify(self.path, tables_at)
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
        _OPEN_HERE[self._key] = _OPEN_HERE.get(self._key, 0) + 1
        self._counted = True

    # -- connections -------------------------------------------------------------------

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
        SqliteStore(self.path, busy_timeout_ms=self.busy_timeout_ms).close(checkpoint=False)

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
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if writer:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted and overwritten content is zeroed, not left in free space: what is
            # forgotten or purged cannot be read back from the file.
            conn.execute("PRAGMA secure_delete = ON")
        conn.create_function("exp_decay", 1, exp_decay, deterministic=True)
        try:
            conn.execute("SELECT exp(0.0)")
        except sqlite3.OperationalError:  # an SQLite built without math functions
            conn.create_function("exp", 1, math.exp, deterministic=True)

    def _writer(self) -> sqlite3.Connection:
        if self.readonly:
            if self._read_only_reason is not None:
                raise StoreReadOnly(f"database is read-only: cannot write {self.path}: {self._read_only_reason}")
            raise StoreReadOnly("store opened read-only")
        if self._w is None:
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                self._configure(conn, writer=True)
            except sqlite3.Error as exc:
                raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc
            self._w = conn
        return self._w

    def _reader(self) -> sqlite3.Connection:
        if self._r is None:
            uri = file_uri(self.path, self._reader_query)
            try:
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
                self._configure(conn, writer=False)
            except sqlite3.Error as exc:
                raise storage_error(exc, self.path, f"cannot open database {self.path}") from exc
            self._r = conn
        return self._r

    def close(self, checkpoint: bool = True) -> None:
        if getattr(self, "_counted", False):
            self._counted = False
            left = _OPEN_HERE.get(self._key, 1) - 1
            if left > 0:
                _OPEN_HERE[self._key] = left
            else:
                _OPEN_HERE.pop(self._key, None)
        if self._r is not None:
            self._r.close()
            self._r = None
        if self._w is not None:
            if checkpoint:
                try:
                    self._w.execute("PRAGMA busy_timeout = 100")
                    self._w.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass  # another connection is active; the next clean close folds the WAL
            self._w.close()
            self._w = None

    # -- transactions and migrations -----------------------------------------------------

    def transaction(self) -> _Transaction:
        """A write transaction (`with store.transaction():`); nested uses join the outer one."""
        return _Transaction(self)

    def _begin(self) -> None:
        conn = self._writer()
        if self._depth:
            self._depth += 1
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if is_locked(exc):
                raise StoreBusy(f"database is busy (waited {self.busy_timeout_ms} ms)") from exc
            raise storage_error(exc, self.path, "cannot start a write") from exc
        self._depth = 1

    def _end(self, failed: bool) -> None:
        self._depth -= 1
        if self._depth:
            return
        self._latest_prompts.clear()
        conn = self._writer()
        if failed:
            self._rollback(conn)
            return
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise storage_error(exc, self.path, "cannot commit") from exc

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """Undo the open transaction, if SQLite has not already (it does on a full disk or an
        I/O error). If even that fails, closing the connection rolls back; the error on its way
        out is the one to report."""
        if not conn.in_transaction:
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            conn.close()
            self._w = None

    def schema_version(self) -> int:
        conn = self._w if self._w is not None else self._reader()
        try:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as exc:
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
        except sqlite3.Error as exc:
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
            except sqlite3.OperationalError as exc:
                if not is_locked(exc) or time.monotonic() > deadline:
                    raise
                mode = None
            if str(mode).lower() == "wal" or time.monotonic() > deadline:
                return
            time.sleep(0.01)

    def migrate_to(self, target: int) -> None:
        """Apply migrations up to `target` (tests use it to build older databases)."""
        self._migrate(self._writer(), target)

    # -- helpers ---------------------------------------------------------------------------

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        conn = self._writer()
        try:
            if self._depth:
                return conn.execute(sql, params)
            with self.transaction():
                return conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise storage_error(exc, self.path) from exc

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        # Inside a write transaction, read through the writer so we see our own writes.
        conn = self._w if (self._depth and self._w is not None) else self._reader()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if result_code(exc) == sqlite3.SQLITE_ERROR:
                fts = _fts_error(exc)
                if fts is not None:
                    raise fts from exc
            raise storage_error(exc, self.path) from exc

    # -- trail writes --------------------------------------------------------------------

    def ensure_session(self, session_id: str, project: str, started_at: int, root: str | None = None) -> Session:
        session = self.get_session(session_id)  # most events belong to a session already stored
        if session is None:
            self._exec(
                "INSERT INTO sessions (id, project, started_at, root) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO NOTHING",
                (session_id, project, started_at, root),
            )
            session = self.get_session(session_id)
        assert session is not None
        return session

    def add_prompt(self, session_id: str, timestamp: int, source: str, content: str) -> int:
        cur = self._exec(
            "INSERT INTO prompts (session_id, timestamp, source, content) VALUES (?, ?, ?, ?)",
            (session_id, timestamp, source, content),
        )
        prompt_id = int(cur.lastrowid or 0)
        if source == "user" and self._depth:
            self._latest_prompts[session_id] = prompt_id
        return prompt_id

    def latest_prompt_id(self, session_id: str) -> int | None:
        if self._depth and session_id in self._latest_prompts:
            return self._latest_prompts[session_id]
        rows = self._query(
            # The user's directive frames what follows; agent reasoning does not replace it.
            "SELECT id FROM prompts WHERE session_id = ? AND source = 'user' ORDER BY id DESC LIMIT 1",
            (session_id,)
        )
        found = int(rows[0]["id"]) if rows else None
        if self._depth:
            self._latest_prompts[session_id] = found
        return found

    def add_observation(self, obs: NewObservation) -> int:
        cur = self._exec(
            "INSERT INTO observations (session_id, project, prompt_id, timestamp, obs_type, "
            "source_event, tool_name, file_path, content, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (obs.session_id, obs.project, obs.prompt_id, obs.timestamp, obs.obs_type,
             obs.source_event, obs.tool_name, obs.file_path, obs.content,
             json.dumps(obs.metadata, sort_keys=True) if obs.metadata else None),
        )
        return int(cur.lastrowid or 0)

    def recent_duplicate(self, session_id: str, obs_type: str, file_path: str | None,
                         content: str, since: int) -> int | None:
        rows = self._query(
            "SELECT id FROM observations WHERE session_id = ? AND obs_type = ? "
            "AND file_path IS ? AND timestamp >= ? AND content = ? ORDER BY id DESC LIMIT 1",
            (session_id, obs_type, file_path, since, content),
        )
        return int(rows[0]["id"]) if rows else None

    def close_session(self, session_id: str, ended_at: int, signature: dict[str, Any],
                      summary: dict[str, Any]) -> None:
        self._exec(
            "UPDATE sessions SET ended_at = ?, signature = ?, summary = ? WHERE id = ?",
            (ended_at, json.dumps(signature, sort_keys=True), json.dumps(summary), session_id),
        )

    # What a session summary reads: the first OUTLINE_CHARS of each text, no metadata. Stop
    # runs on every turn, so it must not re-read and re-decode a long session's full rows.
    def session_outline(self, session_id: str) -> tuple[list[ObsOutline], list[PromptOutline]]:
        observations = [
            (str(r[0]), r[1], str(r[2]), r[3]) for r in self._query(
                f"SELECT obs_type, file_path, substr(content, 1, {OUTLINE_CHARS}), prompt_id "
                "FROM observations WHERE session_id = ? ORDER BY id", (session_id,))
        ]
        prompts = [
            (int(r[0]), str(r[1]), str(r[2])) for r in self._query(
                f"SELECT id, source, substr(content, 1, {OUTLINE_CHARS}) FROM prompts "
                "WHERE session_id = ? ORDER BY id", (session_id,))
        ]
        return observations, prompts

    def session_file_touches(self, session_id: str, file_path: str) -> int:
        rows = self._query("SELECT count(*) FROM observations WHERE session_id = ? AND file_path = ? "
                           "AND obs_type != 'file_error'", (session_id, file_path))
        return int(rows[0][0])

    def has_prompt(self, session_id: str, source: str, content: str) -> bool:
        return bool(self._query("SELECT 1 FROM prompts WHERE session_id = ? AND source = ? AND content = ? LIMIT 1",
                                (session_id, source, content)))

    # -- transcript imports -----------------------------------------------------------------

    def import_marks(self, session_id: str) -> dict[str, ImportMark]:
        marks: dict[str, ImportMark] = {}
        for r in self._query("SELECT source, byte_offset, state, last_event_at FROM import_marks "
                             "WHERE session_id = ?", (session_id,)):
            state = json.loads(r["state"]) if r["state"] else None
            marks[str(r["source"])] = ImportMark(session_id, str(r["source"]), int(r["byte_offset"]),
                                                 state if isinstance(state, dict) else None, r["last_event_at"])
        return marks

    def save_import_mark(self, mark: ImportMark, updated_at: int) -> None:
        self._exec(
            "INSERT INTO import_marks (session_id, source, byte_offset, state, last_event_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_id, source) DO UPDATE SET "
            "byte_offset = excluded.byte_offset, state = excluded.state, "
            "last_event_at = COALESCE(excluded.last_event_at, import_marks.last_event_at), "
            "updated_at = excluded.updated_at",
            (mark.session_id, mark.source, mark.offset, json.dumps(mark.state) if mark.state else None,
             mark.last_event_at, updated_at),
        )

    def session_last_activity(self, session_id: str) -> int | None:
        rows = self._query(
            "SELECT MAX(t) FROM (SELECT MAX(timestamp) AS t FROM observations WHERE session_id = ?1 "
            "UNION ALL SELECT MAX(timestamp) FROM prompts WHERE session_id = ?1 "
            "UNION ALL SELECT ended_at FROM sessions WHERE id = ?1)", (session_id,))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def set_observation_pin(self, obs_id: int, pinned: bool) -> bool:
        cur = self._exec("UPDATE observations SET is_pinned = ? WHERE id = ?", (int(pinned), obs_id))
        return cur.rowcount > 0

    def purge_observations(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self.transaction():
            cur = self._exec(f"DELETE FROM observations WHERE id IN ({marks})", list(ids))
            if cur.rowcount:
                self._rewrite_index("observations_fts")
        self._scrub()
        return cur.rowcount

    def purge_observations_where(self, obs_types: Sequence[str], older_than: int | None,
                                 project: str | None) -> int:
        clauses: list[str] = ["is_pinned = 0"]  # pins exempt a row from retention
        params: list[Any] = []
        if obs_types:
            clauses.append(f"obs_type IN ({','.join('?' * len(obs_types))})")
            params.extend(obs_types)
        if older_than is not None:
            clauses.append("timestamp < ?")
            params.append(older_than)
        if project is not None:
            clauses.append("project = ?")
            params.append(project)
        with self.transaction():
            cur = self._exec(f"DELETE FROM observations WHERE {' AND '.join(clauses)}", params)
            if cur.rowcount:
                self._rewrite_index("observations_fts")
        self._scrub()
        return cur.rowcount

    # Forgetting means gone: a deleted row's words must not stay readable in the file.
    # - secure_delete (set on the writer) zeroes the row, its index entries and freed pages;
    # - an FTS5 delete only appends a "deleted" marker: the word stays in the old segment until a
    #   merge rewrites it, so the index is optimized (merged into one segment) in the delete's own
    #   transaction. FTS5's 'secure-delete' option (SQLite 3.42+) would avoid the rewrite, but it
    #   bumps the index format for good: an SQLite before 3.42 (Debian 12's, this project's CI)
    #   could no longer read the file. Never on the hook path: forget and purge are commands;
    # - the WAL still holds the old pages: after the commit a checkpoint folds it into the file
    #   and truncates it.

    def _rewrite_index(self, fts: str) -> None:
        self._exec(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")

    def mark_spooled(self, spool_id: str, now: int) -> bool:
        """Mark a spooled event stored, inside its own write transaction; False when it was marked
        before (a hook killed after committing it but before unlinking its spool file: the
        replay stores nothing). Marks older than SPOOL_MARK_DAYS go: a claim left behind is
        replayed by the next drain long before."""
        self._exec("DELETE FROM spooled_events WHERE recorded_at < ?", (now - SPOOL_MARK_DAYS * 86400,))
        cur = self._exec("INSERT INTO spooled_events (id, recorded_at) VALUES (?, ?) ON CONFLICT(id) DO NOTHING",
                         (spool_id, now))
        return cur.rowcount == 1

    def reclaim(self) -> None:
        """After deletes made inside a caller's transactions (an import's batches): what each
        delete does on its own once its transaction ends (see `_scrub`)."""
        self._scrub()

    def _scrub(self) -> None:
        """After a delete: give free pages back and fold the WAL into the file, truncated."""
        if self._depth:
            return  # executescript() would commit the caller's open transaction; its caller scrubs
        try:
            # incremental_vacuum frees one page per step and its rows have no columns, so
            # execute() stops after the first page; executescript() steps it to the end.
            self._writer().executescript("PRAGMA incremental_vacuum(1000);")
            # Waits (busy timeout) for readers of older snapshots; if one stays, its pages are
            # zeroed already and the next clean close truncates the WAL.
            self._writer().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # the delete is committed; space comes back and the WAL folds on a later close

    # -- curated memories --------------------------------------------------------------------

    def insert_memory(self, mem: NewMemory) -> Memory:
        with self.transaction():
            self._exec(
                "INSERT INTO memories (uid, domain, namespace, summary, content, tags, source, "
                "relates_to, tier, is_pinned, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (mem.uid, mem.domain, mem.namespace, mem.summary, mem.content,
                 json.dumps(list(mem.tags)), mem.source, json.dumps(list(mem.relates_to)),
                 mem.tier, int(mem.is_pinned), mem.timestamp, mem.timestamp),
            )
            self._log_memory_op(mem.uid, mem.timestamp)
        stored = self.get_memory(mem.uid)
        assert stored is not None
        return stored

    _MEMORY_FIELDS = ("domain", "namespace", "summary", "content", "tags", "source",
                      "relates_to", "tier", "is_pinned")

    def update_memory(self, uid: str, fields: dict[str, Any], timestamp: int) -> Memory | None:
        sets: list[str] = ["updated_at = ?"]
        params: list[Any] = [timestamp]
        for name, raw in fields.items():
            if name not in self._MEMORY_FIELDS:
                raise ValueError(f"not an updatable memory field: {name}")
            if name in ("tags", "relates_to"):
                params.append(json.dumps(list(raw)))
            elif name == "is_pinned":
                params.append(int(raw))
            else:
                params.append(raw)
            sets.append(f"{name} = ?")
        params.append(uid)
        with self.transaction():
            cur = self._exec(
                f"UPDATE memories SET {', '.join(sets)} WHERE uid = ? AND deleted_at IS NULL", params
            )
            if cur.rowcount:
                self._log_memory_op(uid, timestamp)
        return self.get_memory(uid) if cur.rowcount else None

    def tombstone_memory(self, uid: str, timestamp: int) -> bool:
        with self.transaction():
            cur = self._exec(
                "UPDATE memories SET summary = '', content = '', tags = '[]', relates_to = '[]', "
                "deleted_at = ?, updated_at = ? WHERE uid = ? AND deleted_at IS NULL",
                (timestamp, timestamp, uid),
            )
            if cur.rowcount:
                self._log_memory_op(uid, timestamp)
                self._forget_sync_lines(uid)
                self._rewrite_index("memories_fts")
        if cur.rowcount:
            self._scrub()
        return cur.rowcount > 0

    def _log_memory_op(self, uid: str, timestamp: int) -> None:
        """The sync outbox's line for the write just made to `uid`, in the same transaction."""
        row = self._query("SELECT * FROM memories WHERE uid = ?", (uid,))[0]
        state = self._query("SELECT device, wall, counter FROM sync_state")[0]
        wall, counter = oplog.tick(state["wall"], state["counter"], timestamp * 1000)
        clock = oplog.hlc(wall, counter, state["device"])
        if row["deleted_at"] is None:
            line = oplog.line_for(clock, oplog.PUT, uid, row["sync_version"], oplog.put_payload(row))
        else:
            line = oplog.line_for(clock, oplog.DELETE, uid, row["sync_version"], oplog.delete_payload(row))
        version = oplog.version(clock, line)
        self._exec("UPDATE sync_state SET wall = ?, counter = ?", (wall, counter))
        self._exec("INSERT INTO sync_ops (version, uid, domain, line, created_at) VALUES (?, ?, ?, ?, ?)",
                   (version, uid, row["domain"], line, timestamp))
        self._exec("UPDATE memories SET sync_version = ? WHERE uid = ?", (version, uid))

    def _forget_sync_lines(self, uid: str) -> None:
        """A tombstone supersedes every earlier operation on the memory: their lines, which hold
        its text, leave the outbox (pushed or not), so a forgotten text is not kept there."""
        self._exec("DELETE FROM sync_ops WHERE uid = ? AND version <> "
                   "(SELECT sync_version FROM memories WHERE uid = ?)", (uid, uid))

    def get_memory(self, uid: str) -> Memory | None:
        rows = self._query("SELECT * FROM memories WHERE uid = ?", (uid,))
        return Memory.from_row(rows[0]) if rows else None

    def touch_memories(self, uids: Sequence[str], timestamp: int) -> None:
        if not uids or self.readonly:
            return  # access counts are bookkeeping: a read-only handle reads without them
        marks = ",".join("?" * len(uids))
        self._exec(
            f"UPDATE memories SET accessed_at = ?, access_count = access_count + 1 "
            f"WHERE uid IN ({marks})",
            [timestamp, *uids],
        )

    def iter_memories(self, domain: str | None, namespace: str | None) -> Iterator[Memory]:
        clauses: list[str] = ["deleted_at IS NULL"]
        params: list[Any] = []
        if domain:
            clauses.append("domain = ?")
            params.append(domain)
        if namespace:
            clauses.append("namespace = ?")
            params.append(namespace)
        for row in self._query(
            f"SELECT * FROM memories WHERE {' AND '.join(clauses)} ORDER BY updated_at DESC", params
        ):
            yield Memory.from_row(row)

    # -- moving memory: exports read a snapshot, imports write whole rows --------------------

    def read_snapshot(self) -> _Snapshot:
        """`with store.read_snapshot():` — every read inside sees the database as of the first
        one (a read transaction on the reader), whatever other processes commit meanwhile."""
        return _Snapshot(self)

    def export_memories(self, filters: SearchFilters, deleted: bool) -> Iterator[Memory]:
        """Memories the filters select (domains, namespaces, updated since `date_start`;
        archived ones too), tombstones only with `deleted`, in uid order."""
        clauses: list[str] = [] if deleted else ["m.deleted_at IS NULL"]
        params: list[Any] = []
        self._memory_filters(filters.replace(include_archived=True), clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        for row in self._query(f"SELECT m.* FROM memories m {where} ORDER BY m.uid", params):
            yield Memory.from_row(row)

    def export_sessions(self, project: str | None, since: int | None) -> list[Session]:
        """Sessions (of `project`), oldest first; with `since`, those started, ended or holding
        a prompt or observation at or after it."""
        clauses: list[str] = []
        params: list[Any] = []
        if project is not None:
            clauses.append("s.project = ?")
            params.append(project)
        if since is not None:
            clauses.append("(s.started_at >= ? OR s.ended_at >= ? "
                           "OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id AND p.timestamp >= ?) "
                           "OR EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id "
                           "AND o.timestamp >= ?))")
            params.extend([since] * 4)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return [Session.from_row(r) for r in
                self._query(f"SELECT * FROM sessions s {where} ORDER BY s.started_at, s.id", params)]

    def put_memory(self, memory: Memory) -> None:
        """Write a whole memory row by its uid (insert, or replace every field): what an import
        decided to keep. Tombstones are written as they come. Like every memory write it is
        logged for sync, and a tombstone forgets as `tombstone_memory` does."""
        with self.transaction():
            self._put_memory_row(memory)
            self._log_memory_op(memory.id, memory.updated_at)
            if memory.deleted_at is not None:
                self._forget_sync_lines(memory.id)
                self._rewrite_index("memories_fts")
        if memory.deleted_at is not None:
            self._scrub()

    def _put_memory_row(self, memory: Memory) -> None:
        self._exec(
            "INSERT INTO memories (uid, domain, namespace, summary, content, tags, source, relates_to, tier, "
            "is_pinned, created_at, updated_at, accessed_at, access_count, deleted_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid) DO UPDATE SET "
            "domain = excluded.domain, namespace = excluded.namespace, summary = excluded.summary, "
            "content = excluded.content, tags = excluded.tags, source = excluded.source, "
            "relates_to = excluded.relates_to, tier = excluded.tier, is_pinned = excluded.is_pinned, "
            "created_at = excluded.created_at, updated_at = excluded.updated_at, "
            "accessed_at = excluded.accessed_at, access_count = excluded.access_count, "
            "deleted_at = excluded.deleted_at",
            (memory.id, memory.domain, memory.namespace, memory.summary, memory.content,
             json.dumps(list(memory.tags)), memory.source, json.dumps(list(memory.relates_to)), memory.tier,
             int(memory.is_pinned), memory.created_at, memory.updated_at, memory.accessed_at,
             memory.access_count, memory.deleted_at),
        )

    def put_session(self, session: Session) -> None:
        """Write a whole session row by its id (insert, or replace its times, signature and
        summary; a session keeps its project)."""
        self._exec(
            "INSERT INTO sessions (id, project, started_at, ended_at, signature, summary) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "signature = excluded.signature, summary = excluded.summary",
            (session.id, session.project, session.started_at, session.ended_at,
             None if session.signature is None else json.dumps(session.signature, sort_keys=True),
             None if session.summary is None else json.dumps(session.summary)),
        )

    # -- reads ---------------------------------------------------------------------------

    def get_observations(self, ids: Sequence[int]) -> list[Observation]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self._query(f"SELECT {OBS_COLUMNS} FROM observations WHERE id IN ({marks})", list(ids))
        by_id = {row["id"]: Observation.from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def get_prompts(self, ids: Sequence[int]) -> list[Prompt]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self._query(
            f"SELECT p.*, s.project FROM prompts p JOIN sessions s ON s.id = p.session_id "
            f"WHERE p.id IN ({marks})", list(ids),
        )
        by_id = {row["id"]: Prompt.from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def get_session(self, session_id: str) -> Session | None:
        rows = self._query("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return Session.from_row(rows[0]) if rows else None

    @staticmethod
    def _order(order: str, time_col: str, has_match: bool) -> str:
        if order == "date_asc":
            return f"{time_col} ASC"
        if order == "date_desc" or not has_match:
            return f"{time_col} DESC"
        return "rank ASC"

    def search_observations(self, match: str | None, filters: SearchFilters, order: str,
                            limit: int, offset: int) -> list[tuple[Observation, float]]:
        if match is None:
            clauses: list[str] = []
            params: list[Any] = []
            self._observation_filters(filters, clauses, params)
            where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
            rows = self._query(f"SELECT {OBS_COLS_O}, 0.0 AS rank FROM observations o {where} "
                               f"ORDER BY {self._order(order, 'o.timestamp', False)}, o.id DESC LIMIT ? OFFSET ?",
                               [*params, limit, offset])
            return [(Observation.from_row(r), 0.0) for r in rows]
        ids = self._observation_id_range(filters)
        if ids is None:
            return []
        if order == "relevance":
            ranked = self._observations_by_bm25(match, filters, ids, offset + limit)[offset:]
            found = {o.id: o for o in self.get_observations([i for i, _ in ranked])}
            return [(found[i], 0.0 - rank) for i, rank in ranked if i in found]
        if order == "date_desc":
            rows = self._newest_observations(match, filters, ids, offset + limit)
        else:
            rows = self._observation_matches(match, filters, ids, "o.timestamp ASC, o.id DESC", offset + limit)
        return [(Observation.from_row(r), 0.0 - float(r["rank"])) for r in rows[offset:offset + limit]]

    # -- reading FTS5 matches by rowid ------------------------------------------------------
    #
    # FTS5 walks a match's doclists in rowid order and takes rowid bounds, so a read that
    # wants the newest rows, or rows of a time range, can stop early instead of scoring and
    # sorting every match (a word found in a third of a million rows costs ~0.5 s to rank).

    def _observations_by_bm25(self, match: str, filters: SearchFilters, ids: tuple[int, int],
                              want: int) -> list[tuple[int, float]]:
        """(id, bm25) of the best `want` among the newest RELEVANCE_WINDOW matching rows that
        pass the filters. Each match is checked against its row, except under a type filter
        when the match is large: then the ids of that type (and project) are read off
        idx_obs_type_project once and each match checked against them, at a fifth of the cost,
        which matters when a broad word meets a rare type (every match of "py" checked to find
        a project's commits)."""
        clauses: list[str] = []
        params: list[Any] = []
        self._observation_filters(filters, clauses, params)
        join = ""
        if filters.obs_types and self._has_matches("observations_fts", match, ids, TYPE_IDS_MIN_MATCHES):
            # `+` keeps SQLite from handing the id set to FTS5 as one rowid lookup per id.
            clauses = ["+f.rowid IN (SELECT o.id FROM observations o INDEXED BY idx_obs_type_project "
                       f"WHERE o.id BETWEEN ? AND ? AND {' AND '.join(clauses)})"]
            params = [*ids, *params]
        elif clauses:
            join = " CROSS JOIN observations o ON o.id = f.rowid"
        rows = self._rank_newest("observations_fts", match, ids, join, clauses, params, want)
        return [(int(r["id"]), float(r["rank"])) for r in rows]

    def _has_matches(self, fts: str, match: str, ids: tuple[int, int], n: int) -> bool:
        """Whether the match holds at least `n` rows within `ids`: a walk of the doclists that
        stops at `n`, without BM25 (whose IDF pass reads every doclist to its end)."""
        rows = self._query(f"SELECT count(*) FROM (SELECT 1 FROM {fts} f WHERE {fts} MATCH ? "
                           "AND f.rowid BETWEEN ? AND ? LIMIT ?)", [match, *ids, n])
        return int(rows[0][0]) >= n

    def _rank_newest(self, fts: str, match: str, ids: tuple[int, int], join: str, clauses: Sequence[str],
                     params: Sequence[Any], want: int, select: str = "r.id, r.rank",
                     rows: str = "") -> list[sqlite3.Row]:
        """The best `want` rows by BM25 among the newest RELEVANCE_WINDOW matches within `ids`
        that pass `clauses`, best first: FTS5 reads the match by rowid, newest first, and
        stops at the window. `select` and `rows` (joins on `r.id`) say what to return of them.

        `join` brings the table the clauses name; CROSS JOIN keeps FTS5 the outer loop, since
        driven by a filter's index SQLite would run the MATCH once per row (seconds at 1M)."""
        where = " AND ".join([f"{fts} MATCH ?", "f.rowid BETWEEN ? AND ?", *clauses])
        newest = (f"SELECT f.rowid AS id, bm25({fts}) AS rank FROM {fts} f{join} WHERE {where} "
                  "ORDER BY f.rowid DESC LIMIT ?")
        return self._query(f"SELECT {select} FROM (SELECT id, rank FROM ({newest}) ORDER BY rank, id DESC LIMIT ?) r "
                           f"{rows} ORDER BY r.rank, r.id DESC",
                           [match, *ids, *params, max(RELEVANCE_WINDOW, want), want])

    def _observation_matches(self, match: str, filters: SearchFilters, ids: tuple[int, int], order: str,
                             n: int, since: int | None = None) -> list[sqlite3.Row]:
        clauses = ["observations_fts MATCH ?", "f.rowid BETWEEN ? AND ?"]
        params: list[Any] = [match, *ids]
        if since is not None:
            clauses.append("o.timestamp >= ?")
            params.append(since)
        self._observation_filters(filters, clauses, params)
        return self._query(
            f"SELECT {OBS_COLS_O}, bm25(observations_fts) AS rank FROM observations_fts f "
            f"CROSS JOIN observations o ON o.id = f.rowid WHERE {' AND '.join(clauses)} "
            f"ORDER BY {order} LIMIT ?", [*params, n])

    def _newest_observations(self, match: str, filters: SearchFilters, ids: tuple[int, int],
                             want: int) -> list[sqlite3.Row]:
        """The `want` newest matches (timestamp, then id): read by rowid, newest first, which
        stops at the LIMIT. Rows inserted out of time order (observations_late) are the only
        ones that could be newer than the oldest row read while having a smaller id; when
        one exists, the rows from the first that could be are read again and sorted."""
        rows = self._observation_matches(match, filters, ids, "f.rowid DESC", want)
        if len(rows) == want:
            oldest = min(int(r["timestamp"]) for r in rows)
            if self._query("SELECT 1 FROM observations_late WHERE timestamp >= ? LIMIT 1", (oldest,)):
                floor = self._first_id_since(oldest)
                lo = ids[0] if floor is None else max(ids[0], floor)
                rows = self._observation_matches(match, filters, (lo, ids[1]), "o.timestamp DESC, o.id DESC",
                                                 want, since=oldest)
        return sorted(rows, key=lambda r: (-r["timestamp"], -r["id"]))

    def _observation_id_range(self, filters: SearchFilters) -> tuple[int, int] | None:
        """Bounds on the ids of rows the filters can pass (dates, session); None if none can."""
        lo, hi = ROWID_MIN, ROWID_MAX
        if filters.date_start is not None:
            first = self._first_id_since(filters.date_start)
            if first is None:
                return None
            lo = first
        if filters.date_end is not None:
            last = self._last_id_until(filters.date_end)
            if last is None:
                return None
            hi = last
        if filters.session_id:
            first, last = self._query("SELECT MIN(id), MAX(id) FROM observations WHERE session_id = ?",
                                      (filters.session_id,))[0]
            if first is None:
                return None
            lo, hi = max(lo, int(first)), min(hi, int(last))
        return (lo, hi) if lo <= hi else None

    def _first_id_since(self, timestamp: int) -> int | None:
        """The smallest id of a row at or after `timestamp`. Rows in time order have ids in
        time order too, so the first of them by time has it; late rows are looked up apart."""
        row = self._query(
            "SELECT MIN(id) FROM ("
            "SELECT id FROM (SELECT id FROM observations WHERE timestamp >= ?1 "
            "AND id NOT IN (SELECT id FROM observations_late) ORDER BY timestamp, id LIMIT 1) "
            "UNION ALL SELECT MIN(id) FROM observations_late WHERE timestamp >= ?1)", (timestamp,))
        return None if row[0][0] is None else int(row[0][0])

    def _last_id_until(self, timestamp: int) -> int | None:
        """The largest id of a row at or before `timestamp` (ROWID_MAX when that is every row)."""
        newest = self._query("SELECT MAX(timestamp) FROM observations")[0][0]
        if newest is not None and timestamp >= newest:
            return ROWID_MAX
        row = self._query(
            "SELECT MAX(id) FROM ("
            "SELECT id FROM (SELECT id FROM observations WHERE timestamp <= ?1 "
            "AND id NOT IN (SELECT id FROM observations_late) ORDER BY timestamp DESC, id DESC LIMIT 1) "
            "UNION ALL SELECT MAX(id) FROM observations_late WHERE timestamp <= ?1)", (timestamp,))
        return None if row[0][0] is None else int(row[0][0])

    @classmethod
    def _observation_filters(cls, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
        """WHERE clauses (on alias `o`) for the filters that apply to observations."""
        if filters.project:
            clauses.append("o.project = ?")
            params.append(filters.project)
        if filters.obs_types:
            clauses.append(f"o.obs_type IN ({','.join('?' * len(filters.obs_types))})")
            params.extend(filters.obs_types)
        if filters.files:
            ors = []
            for f in filters.files:
                if f.startswith("/"):  # a whole path (the service resolves relative ones)
                    ors.append("o.file_path = ?")
                    params.append(f)
                    continue
                ors.append("(o.file_path = ? OR o.file_path LIKE ? ESCAPE '\\')")
                # a suffix must start at a path separator: "auth.py" is not "oauth.py"
                params.extend([f, "%/" + f.replace("%", "\\%").replace("_", "\\_")])
            clauses.append("(" + " OR ".join(ors) + ")")
        if filters.session_id:
            clauses.append("o.session_id = ?")
            params.append(filters.session_id)
        cls._date_clauses("o.timestamp", filters, clauses, params)

    @classmethod
    def _prompt_filters(cls, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
        """WHERE clauses (aliases `p`, `s`) for the filters that apply to prompts."""
        if filters.project:
            clauses.append("s.project = ?")
            params.append(filters.project)
        if filters.session_id:
            clauses.append("p.session_id = ?")
            params.append(filters.session_id)
        if filters.source:
            clauses.append("p.source = ?")
            params.append(filters.source)
        cls._date_clauses("p.timestamp", filters, clauses, params)

    @classmethod
    def _memory_filters(cls, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
        """WHERE clauses (alias `m`) for the filters that apply to memories."""
        if filters.domains:
            clauses.append(f"m.domain IN ({','.join('?' * len(filters.domains))})")
            params.extend(filters.domains)
        elif filters.project:
            # A project sees its own memories plus the user's and the organisation's.
            clauses.append("m.domain IN (?, 'user', 'org')")
            params.append(f"project:{filters.project}")
        if filters.namespaces:
            clauses.append(f"m.namespace IN ({','.join('?' * len(filters.namespaces))})")
            params.extend(filters.namespaces)
        for tag in filters.tags:
            clauses.append("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)")
            params.append(tag)
        if not filters.include_archived:
            clauses.append("m.tier != 'archived'")
        cls._date_clauses("m.updated_at", filters, clauses, params)

    @staticmethod
    def _date_clauses(col: str, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
        if filters.date_start is not None:
            clauses.append(f"{col} >= ?")
            params.append(filters.date_start)
        if filters.date_end is not None:
            clauses.append(f"{col} <= ?")
            params.append(filters.date_end)

    def search_prompts(self, match: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int) -> list[tuple[Prompt, float]]:
        if match is not None and order == "relevance":
            rows = self._prompts_by_bm25(match, filters, self._prompt_id_range(filters), offset + limit)
            return [(Prompt.from_row(r), 0.0 - float(r["rank"])) for r in rows[offset:offset + limit]]
        clauses: list[str] = []
        params: list[Any] = []
        if match is not None:
            source = ("prompts_fts f JOIN prompts p ON p.id = f.rowid "
                      "JOIN sessions s ON s.id = p.session_id")
            clauses.append("prompts_fts MATCH ?")
            params.append(match)
            rank = "bm25(prompts_fts)"
        else:
            source, rank = "prompts p JOIN sessions s ON s.id = p.session_id", "0.0"
        self._prompt_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = (f"SELECT p.id, p.session_id, s.project, p.timestamp, p.source, p.content, "
               f"{rank} AS rank FROM {source} {where} "
               f"ORDER BY {self._order(order, 'p.timestamp', match is not None)}, p.id DESC "
               f"LIMIT ? OFFSET ?")
        rows = self._query(sql, [*params, limit, offset])
        return [(Prompt.from_row(r), 0.0 - float(r["rank"])) for r in rows]

    def _prompt_id_range(self, filters: SearchFilters) -> tuple[int, int]:
        if not filters.session_id:
            return ROWID_MIN, ROWID_MAX
        first, last = self._query("SELECT MIN(id), MAX(id) FROM prompts WHERE session_id = ?",
                                  (filters.session_id,))[0]
        return (1, 0) if first is None else (int(first), int(last))

    def _prompts_by_bm25(self, match: str, filters: SearchFilters, ids: tuple[int, int], want: int,
                         select: str = "p.id, p.session_id, s.project, p.timestamp, p.source, p.content, r.rank",
                         rows: str = "JOIN prompts p ON p.id = r.id JOIN sessions s ON s.id = p.session_id",
                         ) -> list[sqlite3.Row]:
        clauses: list[str] = []
        params: list[Any] = []
        self._prompt_filters(filters, clauses, params)
        join = " CROSS JOIN prompts p ON p.id = f.rowid CROSS JOIN sessions s ON s.id = p.session_id" if clauses else ""
        return self._rank_newest("prompts_fts", match, ids, join, clauses, params, want, select, rows)

    @classmethod
    def _session_filters(cls, filters: SearchFilters, clauses: list[str], params: list[Any]) -> None:
        if filters.project:
            clauses.append("s.project = ?")
            params.append(filters.project)
        if filters.session_id:
            clauses.append("s.id = ?")
            params.append(filters.session_id)
        cls._date_clauses("s.started_at", filters, clauses, params)

    def _sessions_by_bm25(self, match: str, filters: SearchFilters, want: int) -> list[sqlite3.Row]:
        clauses: list[str] = []
        params: list[Any] = []
        self._session_filters(filters, clauses, params)
        join = " CROSS JOIN sessions s ON s.rowid = f.rowid" if clauses else ""
        return self._rank_newest("sessions_fts", match, (ROWID_MIN, ROWID_MAX), join, clauses, params, want,
                                 "s.*, r.rank", "JOIN sessions s ON s.rowid = r.id")

    def search_sessions(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Session, float]]:
        if match is not None and order == "relevance":
            rows = self._sessions_by_bm25(match, filters, offset + limit)
            return [(Session.from_row(r), 0.0 - float(r["rank"])) for r in rows[offset:offset + limit]]
        clauses: list[str] = []
        params: list[Any] = []
        if match is not None:
            source = "sessions_fts f JOIN sessions s ON s.rowid = f.rowid"
            clauses.append("sessions_fts MATCH ?")
            params.append(match)
            rank = "bm25(sessions_fts)"
        else:
            source, rank = "sessions s", "0.0"
        self._session_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        sql = (f"SELECT s.*, {rank} AS rank FROM {source} {where} "
               f"ORDER BY {self._order(order, 's.started_at', match is not None)} "
               f"LIMIT ? OFFSET ?")
        rows = self._query(sql, [*params, limit, offset])
        return [(Session.from_row(r), 0.0 - float(r["rank"])) for r in rows]

    def search_memories(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Memory, float]]:
        clauses = ["m.deleted_at IS NULL"]
        params: list[Any] = []
        if match is not None:
            source = "memories_fts f JOIN memories m ON m.id = f.rowid"
            clauses.append("memories_fts MATCH ?")
            params.append(match)
            # Summary and tags say what a memory is about: weigh them above the body.
            rank = "bm25(memories_fts, 3.0, 1.0, 2.0, 0.5)"
        else:
            source, rank = "memories m", "0.0"
        self._memory_filters(filters, clauses, params)
        sql = (f"SELECT m.*, {rank} AS rank FROM {source} WHERE {' AND '.join(clauses)} "
               f"ORDER BY m.is_pinned DESC, "
               f"{self._order(order, 'm.updated_at', match is not None)} LIMIT ? OFFSET ?")
        rows = self._query(sql, [*params, limit, offset])
        return [(Memory.from_row(r), 0.0 - float(r["rank"])) for r in rows]

    def neighbours(self, anchor: Observation, before: int, after: int
                   ) -> tuple[list[Observation], list[Observation]]:
        prev = self._query(
            f"SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ? AND id < ? "
            "ORDER BY id DESC LIMIT ?", (anchor.session_id, anchor.id, before),
        )
        nxt = self._query(
            f"SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ? AND id > ? "
            "ORDER BY id ASC LIMIT ?", (anchor.session_id, anchor.id, after),
        )
        return ([Observation.from_row(r) for r in reversed(prev)],
                [Observation.from_row(r) for r in nxt])

    # -- ranking support: context windows and index statistics ------------------------------

    def _ranked(self, scope: str) -> tuple[str, str, str]:
        try:
            return RANKED_TABLES[scope]
        except KeyError:
            raise ValueError(f"no ranking support for scope {scope!r}") from None

    def session_windows(self, scope: str, ids: Sequence[int], span: int
                        ) -> dict[int, list[tuple[int, int]]]:
        """For each id, the ids up to `span` records before (-1, -2, …) and after (1, 2, …) it
        in its session, in session order: (timestamp, id) for observations, id for prompts.
        Each side is one index range scan on (session_id, order column)."""
        if not ids or span <= 0:
            return {}
        table, _, col = self._ranked(scope)
        key, anchor = ("n.id", "a.id") if col == "id" else ("n.timestamp, n.id", "a.timestamp, a.id")
        # "<order key, zero-padded>:<id>" items sort as text in session order
        side = ("(SELECT group_concat(printf('%019d:%d', k, id)) FROM (SELECT n.{col} AS k, n.id FROM {table} n "
                "WHERE n.session_id = a.session_id AND ({key}) {op} ({anchor}) ORDER BY {order} LIMIT ?))")
        before = side.format(col=col, table=table, key=key, anchor=anchor, op="<",
                             order=", ".join(f"{k.strip()} DESC" for k in key.split(",")))
        after = side.format(col=col, table=table, key=key, anchor=anchor, op=">", order=key)
        rows = self._query(f"SELECT a.id, {before} AS before, {after} AS after FROM {table} a "
                           f"WHERE a.id IN (SELECT value FROM json_each(?))",
                           (span, span, json.dumps([int(i) for i in ids])))

        out: dict[int, list[tuple[int, int]]] = {}
        for anchor, before_items, after_items in rows:
            earlier = sorted(before_items.split(",")) if before_items else []   # farthest first
            later = sorted(after_items.split(",")) if after_items else []
            out[int(anchor)] = ([(int(item[20:]), d - len(earlier)) for d, item in enumerate(earlier)]
                                + [(int(item[20:]), d + 1) for d, item in enumerate(later)])
        return out

    def match_ids(self, scope: str, match: str, filters: SearchFilters, want: int) -> list[int]:
        """Ids of the best `want` rows by FTS5 BM25, best first, among the newest
        RELEVANCE_WINDOW matches that pass the filters: what `search_*` ranks by relevance,
        without reading the rows (ranking reads only the texts, and the page's rows at the end)."""
        self._ranked(scope)  # a ValueError for a scope without ranking support
        if scope == "prompts":
            return [int(r[0]) for r in self._prompts_by_bm25(match, filters, self._prompt_id_range(filters),
                                                             want, "r.id", "")]
        ids = self._observation_id_range(filters)
        return [] if ids is None else [i for i, _ in self._observations_by_bm25(match, filters, ids, want)]

    def fts_texts(self, scope: str, ids: Sequence[int]) -> dict[int, tuple[str, int, int]]:
        """The indexed text of each row, how many tokens FTS5 counted in it (`docsize`), and its time."""
        if not ids:
            return {}
        table, fts, _ = self._ranked(scope)
        rows = self._query(f"SELECT t.id, t.content, d.sz, t.timestamp FROM {table} t "
                           f"LEFT JOIN {fts}_docsize d ON d.id = t.id "
                           f"WHERE t.id IN (SELECT value FROM json_each(?)) ORDER BY t.id",
                           (json.dumps([int(i) for i in ids]),))
        return {int(r[0]): (str(r[1]), _varint(bytes(r[2]), 0)[0] if r[2] else 0, int(r[3])) for r in rows}

    def fts_stats(self, scope: str, terms: Sequence[str]) -> FtsStats:
        """Rows and tokens indexed (FTS5's averages record), and rows holding each term."""
        _, fts, _ = self._ranked(scope)
        conn = self._w if (self._depth and self._w is not None) else self._reader()
        docs = tokens = 0
        block = self._query(f"SELECT block FROM {fts}_data WHERE id = 1")
        if block and block[0]["block"]:
            data = bytes(block[0]["block"])
            docs, pos = _varint(data, 0)
            tokens, _ = _varint(data, pos)
        # fts5vocab counts a term's rows by reading its whole list (10 ms for a word in a third
        # of a million rows), so counts are kept while the index grows or shrinks under 5%.
        df: dict[str, int] = {}
        stale = []
        for term in dict.fromkeys(terms):
            cached = self._df_cache.get((fts, term))
            if cached is not None and abs(docs - cached[1]) <= docs * DF_CACHE_DRIFT:
                if cached[0]:
                    df[term] = cached[0]
            else:
                stale.append(term)
        if stale:
            vocab = f"nmem_{fts}_vocab"
            # fts5vocab reads the index in place; a temp table costs nothing and needs no write.
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {fts}, row)")
            rows = self._query(f"SELECT term, doc FROM temp.{vocab} WHERE term IN "
                               f"({','.join('?' * len(stale))})", stale)
            counted = {str(r["term"]): int(r["doc"]) for r in rows}
            if len(self._df_cache) > DF_CACHE_SIZE:
                self._df_cache.clear()
            for term in stale:
                self._df_cache[(fts, term)] = (counted.get(term, 0), docs)
            df.update(counted)
        return FtsStats(docs, tokens, df)

    def session_prompts(self, session_id: str, before: int | None, after: int | None
                        ) -> list[Prompt]:
        clauses: list[str] = ["p.session_id = ?"]
        params: list[Any] = [session_id]
        if before is not None:
            clauses.append("p.timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("p.timestamp > ?")
            params.append(after)
        rows = self._query(
            "SELECT p.id, p.session_id, s.project, p.timestamp, p.source, p.content "
            "FROM prompts p JOIN sessions s ON s.id = p.session_id "
            f"WHERE {' AND '.join(clauses)} ORDER BY p.id", params,
        )
        return [Prompt.from_row(r) for r in rows]

    def session_observations(self, session_id: str, before: int | None, after: int | None
                             ) -> list[Observation]:
        clauses: list[str] = ["session_id = ?"]
        params: list[Any] = [session_id]
        if before is not None:
            clauses.append("timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("timestamp > ?")
            params.append(after)
        rows = self._query(
            f"SELECT {OBS_COLUMNS} FROM observations WHERE {' AND '.join(clauses)} ORDER BY id",
            params,
        )
        return [Observation.from_row(r) for r in rows]

    def file_touches(self, file_path: str, before: int | None, after: int | None,
                     limit: int) -> list[tuple[Observation, str | None]]:
        clauses: list[str] = ["o.file_path = ?"]
        params: list[Any] = [file_path]
        if before is not None:
            clauses.append("o.timestamp < ?")
            params.append(before)
        if after is not None:
            clauses.append("o.timestamp > ?")
            params.append(after)
        rows = self._query(
            f"SELECT {', '.join('o.' + c.strip() for c in OBS_COLUMNS.split(','))}, "
            "p.content AS prompt_content FROM observations o "
            "LEFT JOIN prompts p ON p.id = o.prompt_id AND p.source = 'user' "
            f"WHERE {' AND '.join(clauses)} ORDER BY o.timestamp DESC, o.id DESC LIMIT ?",
            [*params, limit],
        )
        return [(Observation.from_row(r), r["prompt_content"]) for r in rows]

    def recent_scored(self, project: str | None, limit: int, now: int, *, where: str = "any",
                      exclude_types: Sequence[str] = ()) -> list[tuple[Observation, float]]:
        """ADR-006 composite score, deduplicated by file_path.

        `where`: "any" ranks every project with the project match as a boost; "local" keeps
        only `project`; "other" only the rest (so a busy project cannot starve the backfill).
        """
        cols = ", ".join("o." + c.strip() for c in OBS_COLUMNS.split(","))
        weight = TYPE_WEIGHT_SQL.format(col="o.obs_type")
        # Built-in exp() (SQLite math functions) keeps the scoring in C; no Python callback per row.
        recency = f"exp({-LN2 / (HALF_LIFE_DAYS * 86400.0)!r} * max(? - o.timestamp, 0))"
        skip = f"AND obs_type NOT IN ({','.join('?' * len(exclude_types))})" if exclude_types else ""
        if project and where == "any":
            candidates = (
                f"SELECT id FROM (SELECT id FROM observations WHERE 1 {skip} ORDER BY timestamp DESC LIMIT ?) "
                f"UNION SELECT id FROM (SELECT id FROM observations WHERE project = ? {skip} "
                "ORDER BY timestamp DESC LIMIT ?)"
            )
            cand_params: list[Any] = [*exclude_types, RECENT_CANDIDATES, project, *exclude_types,
                                      RECENT_CANDIDATES]
            score = (f"{recency} * 0.5 + ({weight}) * 0.3 + "
                     "(CASE WHEN o.project = ? THEN 1.0 ELSE 0.3 END) * 0.2")
            score_params: list[Any] = [now, project]
        else:
            scope = {"local": "project = ?", "other": "project != ?"}.get(where) if project else None
            filter_sql = f"WHERE {scope} {skip}" if scope else f"WHERE 1 {skip}"
            candidates = f"SELECT id FROM observations {filter_sql} ORDER BY timestamp DESC LIMIT ?"
            cand_params = [*([project] if scope else []), *exclude_types, RECENT_CANDIDATES]
            score = f"{recency} * 0.6 + ({weight}) * 0.4"
            score_params = [now]
        sql = f"""
            WITH scored AS (
                SELECT {cols}, {score} AS score FROM observations o
                WHERE o.id IN ({candidates})
            ), ranked AS (
                SELECT *, CASE WHEN file_path IS NULL THEN 1 ELSE
                    ROW_NUMBER() OVER (PARTITION BY file_path ORDER BY score DESC, id DESC) END AS rn
                FROM scored
            )
            SELECT * FROM ranked WHERE rn = 1 ORDER BY score DESC, id DESC LIMIT ?"""
        rows = self._query(sql, [*score_params, *cand_params, limit])
        return [(Observation.from_row(r), float(r["score"])) for r in rows]

    def recent_intents(self, project: str, limit: int) -> list[tuple[Prompt, int]]:
        """The project's newest user prompts that led to at least one action, with their counts.

        Walks the project's newest observations to the prompts they belong to, and stops once
        `limit` of those are newer (by more than INTENT_CLOCK_SLACK, for clocks that step) than
        every observation left unread: a prompt's actions are recorded after it, so a prompt
        not met yet is older than the unread actions. Grouping every prompt of the project with
        its actions cost 0.1-0.4 s at a million observations, on every SessionStart; the walk
        reads a few hundred rows. A project whose newest actions name few prompts (agent work,
        private prompts) would make the walk long, and grouping is cheap there: after
        INTENT_SCAN_LIMIT rows it groups instead.
        """
        if limit <= 0:
            return []
        intents: dict[int, Prompt] = {}
        seen: set[int] = set()
        cursor = (2**63 - 1, 2**63 - 1)
        read = 0
        while read < INTENT_SCAN_LIMIT:
            rows = self._query(
                "SELECT id, timestamp, prompt_id FROM observations WHERE project = ? AND (timestamp, id) < (?, ?) "
                "ORDER BY timestamp DESC, id DESC LIMIT ?", (project, *cursor, INTENT_SCAN_BATCH))
            read += len(rows)
            fresh = list(dict.fromkeys(r["prompt_id"] for r in rows if r["prompt_id"] is not None
                                       and r["prompt_id"] not in seen))
            seen.update(fresh)
            for row in self._query(  # CROSS JOIN: by prompt id, not through every session of the project
                    f"SELECT p.*, s.project FROM prompts p CROSS JOIN sessions s ON s.id = p.session_id "
                    f"WHERE p.id IN ({','.join('?' * len(fresh))}) AND p.source = 'user' AND s.project = ?",
                    (*fresh, project)):
                intents[row["id"]] = Prompt.from_row(row)
            newest = sorted(intents.values(), key=lambda p: (p.timestamp, p.id), reverse=True)[:limit]
            if len(rows) < INTENT_SCAN_BATCH:
                break
            cursor = (rows[-1]["timestamp"], rows[-1]["id"])
            if len(newest) == limit and cursor[0] < newest[-1].timestamp - INTENT_CLOCK_SLACK:
                break
        else:
            return self._intents_by_grouping(project, limit)
        if not newest:
            return []
        counts: dict[int, int] = {row[0]: row[1] for row in self._query(
            f"SELECT prompt_id, COUNT(*) FROM observations WHERE prompt_id IN ({','.join('?' * len(newest))}) "
            f"GROUP BY prompt_id", [p.id for p in newest])}
        return [(p, int(counts.get(p.id, 0))) for p in newest]

    def _intents_by_grouping(self, project: str, limit: int) -> list[tuple[Prompt, int]]:
        rows = self._query(
            "SELECT p.id, p.session_id, s.project, p.timestamp, p.source, p.content, "
            "COUNT(o.id) AS actions FROM prompts p "
            "JOIN sessions s ON s.id = p.session_id "
            "JOIN observations o ON o.prompt_id = p.id "
            "WHERE s.project = ? AND p.source = 'user' "
            "GROUP BY p.id ORDER BY p.timestamp DESC, p.id DESC LIMIT ?",
            (project, limit),
        )
        return [(Prompt.from_row(r), int(r["actions"])) for r in rows]

    # -- what the context block reads ----------------------------------------------------------

    def active_sessions(self, project: str, limit: int, exclude_types: Sequence[str] = (),
                        include: str | None = None) -> list[tuple[Session, int]]:
        """The project's sessions that did something (a user prompt, or an observation not of
        `exclude_types`), most recently active first, each with the time of its last such act.

        Candidates are the `limit` sessions started last, the session of the project's newest
        observation (a long session started before many empty ones) and `include`.
        """
        marks = ",".join("?" * len(exclude_types))
        kinds = f"AND obs_type NOT IN ({marks})" if marks else ""
        newest = self._query(
            f"SELECT session_id FROM observations WHERE project = ? {kinds} ORDER BY timestamp DESC, id DESC LIMIT 1",
            (project, *exclude_types))
        extra = [r[0] for r in newest] + ([include] if include else [])
        candidates = ("SELECT id FROM (SELECT id FROM sessions WHERE project = ? ORDER BY started_at DESC LIMIT ?)"
                      + " UNION SELECT ?" * len(extra))
        rows = self._query(
            f"""SELECT s.*,
                (SELECT timestamp FROM observations WHERE session_id = s.id {kinds}
                  ORDER BY timestamp DESC LIMIT 1) AS last_obs,
                (SELECT p.timestamp FROM prompts p WHERE p.session_id = s.id AND p.source = 'user'
                  ORDER BY p.id DESC LIMIT 1) AS last_prompt
            FROM sessions s WHERE s.id IN ({candidates})""",
            (*exclude_types, project, limit, *extra))
        found = []
        for row in rows:
            times = [t for t in (row["last_obs"], row["last_prompt"]) if t is not None]
            if times and row["project"] == project:
                found.append((Session.from_row(row), int(max(times))))
        found.sort(key=lambda pair: (pair[1], pair[0].started_at), reverse=True)
        return found

    def session_roots(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The project root each session recorded (sessions from before roots were kept have none)."""
        if not session_ids:
            return {}
        ids = list(dict.fromkeys(session_ids))
        rows = self._query(f"SELECT id, root FROM sessions WHERE id IN ({','.join('?' * len(ids))}) "
                           "AND root IS NOT NULL", ids)
        return {str(r[0]): str(r[1]) for r in rows}

    def project_root(self, project: str) -> str | None:
        """The root of the project's newest session that recorded one."""
        rows = self._query("SELECT root FROM sessions WHERE project = ? AND root IS NOT NULL "
                           "ORDER BY started_at DESC LIMIT 1", (project,))
        return str(rows[0][0]) if rows else None

    def session_tail(self, session_id: str, limit: int) -> list[Observation]:
        """The session's newest `limit` observations, oldest first."""
        rows = self._query(
            f"SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ? ORDER BY timestamp DESC, id DESC LIMIT ?",
            (session_id, limit))
        return [Observation.from_row(r) for r in reversed(rows)]

    def last_prompt(self, session_id: str, source: str) -> Prompt | None:
        """The session's newest prompt from `source` (`user` or `agent`)."""
        rows = self._query(
            "SELECT p.id, p.session_id, s.project, p.timestamp, p.source, p.content "
            "FROM prompts p JOIN sessions s ON s.id = p.session_id "
            "WHERE p.session_id = ? AND p.source = ? ORDER BY p.id DESC LIMIT 1", (session_id, source))
        return Prompt.from_row(rows[0]) if rows else None

    def recent_observations(self, project: str, limit: int, *, where: str = "local",
                            exclude_types: Sequence[str] = (),
                            exclude_session: str | None = None) -> list[Observation]:
        """The newest observations of `project` (`where="local"`) or of every other project
        (`"other"`), newest first, without `exclude_types` and `exclude_session`'s rows.

        What a listing of them needs, read fast: content cut to OUTLINE_CHARS, and metadata only
        on failures (`command_error`, `file_error`), whose error it names."""
        clauses = ["project = ?" if where == "local" else "project != ?"]
        params: list[Any] = [project]
        if exclude_types:
            clauses.append(f"obs_type NOT IN ({','.join('?' * len(exclude_types))})")
            params.extend(exclude_types)
        if exclude_session is not None:
            clauses.append("session_id != ?")
            params.append(exclude_session)
        rows = self._query(
            "SELECT id, session_id, project, prompt_id, timestamp, obs_type, source_event, tool_name, file_path, "
            f"substr(content, 1, {OUTLINE_CHARS}) AS content, is_pinned, "
            "CASE WHEN obs_type IN ('command_error', 'file_error') THEN metadata END AS metadata "
            f"FROM observations WHERE {' AND '.join(clauses)} ORDER BY timestamp DESC, id DESC LIMIT ?",
            [*params, limit])
        return [Observation.from_row(r) for r in rows]

    _CHECKPOINT = "EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = 'checkpoint')"

    def curated_memories(self, project: str, limit: int) -> list[Memory]:
        """Live memories a project sees (its own, the user's, the organisation's) that people or
        agents chose to keep: automatic checkpoints (tag `checkpoint`) and archived ones left out.
        Pinned first, then newest."""
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.tier != 'archived' "
            f"AND m.domain IN (?, 'user', 'org') AND NOT {self._CHECKPOINT} "
            "ORDER BY m.is_pinned DESC, m.updated_at DESC LIMIT ?", (f"project:{project}", limit))
        return [Memory.from_row(r) for r in rows]

    def latest_checkpoint(self, project: str, session_id: str) -> Memory | None:
        """The newest automatic checkpoint (tag `checkpoint`) a session left in its project."""
        rows = self._query(
            "SELECT m.* FROM memories m WHERE m.deleted_at IS NULL AND m.domain = ? AND m.source = ? "
            f"AND {self._CHECKPOINT} ORDER BY m.created_at DESC, m.id DESC LIMIT 1",
            (f"project:{project}", f"session:{session_id}"))
        return Memory.from_row(rows[0]) if rows else None

    def status(self) -> Status:
        def count(sql: str) -> int:
            return int(self._query(sql)[0][0])

        def group(sql: str) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in self._query(sql)}

        page_count = count("PRAGMA page_count")
        page_size = count("PRAGMA page_size")
        wal = self.path + "-wal"
        wal_bytes = os.path.getsize(wal) if os.path.exists(wal) else 0
        return Status(
            url=self.url,
            schema_version=self.schema_version(),
            size_bytes=page_count * page_size + wal_bytes,
            sessions=count("SELECT COUNT(*) FROM sessions"),
            prompts=count("SELECT COUNT(*) FROM prompts"),
            observations=count("SELECT COUNT(*) FROM observations"),
            memories=count("SELECT COUNT(*) FROM memories WHERE deleted_at IS NULL"),
            by_obs_type=group("SELECT obs_type, COUNT(*) FROM observations GROUP BY 1 ORDER BY 2 DESC"),
            by_namespace=group("SELECT namespace, COUNT(*) FROM memories WHERE deleted_at IS NULL "
                               "GROUP BY 1 ORDER BY 2 DESC"),
            by_tier=group("SELECT tier, COUNT(*) FROM memories WHERE deleted_at IS NULL "
                          "GROUP BY 1 ORDER BY 2 DESC"),
            by_project=group("SELECT project, COUNT(*) FROM sessions GROUP BY 1 ORDER BY 2 DESC"),
        )

    def integrity(self) -> str:
        """`ok`, or what SQLite's quick_check found wrong."""
        rows = self._query("PRAGMA quick_check")
        return "; ".join(str(r[0]) for r in rows) or "ok"

    # -- sync (nmem.sync): the device's clock, its outbox, how far each remote file is applied ---

    def sync_device(self) -> str:
        return str(self._query("SELECT device FROM sync_state")[0]["device"])

    def sync_pending(self) -> bool:
        return bool(self._query("SELECT 1 FROM sync_ops WHERE pushed = 0 LIMIT 1"))

    def sync_outbox(self) -> list[OutboxOp]:
        rows = self._query("SELECT seq, version, uid, domain, line FROM sync_ops WHERE pushed = 0 ORDER BY seq")
        return [OutboxOp(r["seq"], r["version"], r["uid"], r["domain"], r["line"]) for r in rows]

    def sync_log_unlogged(self, timestamp: int) -> int:
        """Give every memory written before sync existed its operation; returns how many."""
        with self.transaction():
            uids = [r["uid"] for r in self._query("SELECT uid FROM memories WHERE sync_version IS NULL ORDER BY id")]
            for uid in uids:
                self._log_memory_op(uid, timestamp)
        return len(uids)

    def sync_files(self) -> dict[str, tuple[str, int]]:
        return {r["path"]: (r["blob"], r["byte_offset"])
                for r in self._query("SELECT path, blob, byte_offset FROM sync_files")}

    def sync_apply(self, ops: Sequence[oplog.Op], files: Sequence[FileMark]) -> list[tuple[str, str | None]]:
        """Apply remote operations in the order given (by version) and record how far each file
        was read, in one transaction. Per operation: ("applied" | "same" | "stale", the version
        the memory had). An operation of this device marks its outbox row pushed."""
        outcomes: list[tuple[str, str | None]] = []
        forgotten = False
        with self.transaction():
            state = self._query("SELECT wall, counter FROM sync_state")[0]
            wall, counter = state["wall"], state["counter"]
            for op in ops:
                wall, counter = oplog.witness(wall, counter, op.clock)
                self._exec("UPDATE sync_ops SET pushed = 1 WHERE version = ? AND pushed = 0", (op.version,))
                rows = self._query("SELECT sync_version FROM memories WHERE uid = ?", (op.uid,))
                met = rows[0]["sync_version"] if rows else None
                if met is not None and op.version <= met:
                    outcomes.append(("same" if op.version == met else "stale", met))
                    continue
                self._apply_op(op, exists=bool(rows))
                if op.op == oplog.DELETE:
                    self._forget_sync_lines(op.uid)
                    forgotten = True
                outcomes.append(("applied", met))
            self._exec("UPDATE sync_state SET wall = ?, counter = ?", (wall, counter))
            for mark in files:
                self._exec("INSERT OR REPLACE INTO sync_files (path, blob, byte_offset) VALUES (?, ?, ?)",
                           (mark.path, mark.blob, mark.offset))
            if forgotten:
                self._rewrite_index("memories_fts")
        if forgotten:
            self._scrub()
        return outcomes

    def _apply_op(self, op: oplog.Op, exists: bool) -> None:
        m = op.memory
        if op.op == oplog.DELETE:  # a tombstone: the text erased, as `tombstone_memory` leaves it
            if exists:
                self._exec("UPDATE memories SET domain = ?, namespace = ?, summary = '', content = '', tags = '[]', "
                           "relates_to = '[]', created_at = ?, updated_at = ?, deleted_at = ?, sync_version = ? "
                           "WHERE uid = ?", (m["domain"], m["namespace"], m["created_at"], m["deleted_at"],
                                             m["deleted_at"], op.version, op.uid))
            else:
                self._exec("INSERT INTO memories (uid, domain, namespace, summary, content, created_at, updated_at, "
                           "deleted_at, sync_version) VALUES (?, ?, ?, '', '', ?, ?, ?, ?)",
                           (op.uid, m["domain"], m["namespace"], m["created_at"], m["deleted_at"],
                            m["deleted_at"], op.version))
            return
        values = (m["domain"], m["namespace"], m["summary"], m["content"], json.dumps(m["tags"]), m["source"],
                  json.dumps(m["relates_to"]), m["tier"], int(m["is_pinned"]), m["created_at"], m["updated_at"],
                  op.version)
        if exists:
            self._exec("UPDATE memories SET domain = ?, namespace = ?, summary = ?, content = ?, tags = ?, "
                       "source = ?, relates_to = ?, tier = ?, is_pinned = ?, created_at = ?, updated_at = ?, "
                       "deleted_at = NULL, sync_version = ? WHERE uid = ?", (*values, op.uid))
        else:
            self._exec("INSERT INTO memories (domain, namespace, summary, content, tags, source, relates_to, tier, "
                       "is_pinned, created_at, updated_at, sync_version, uid) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (*values, op.uid))

    def sync_pushed(self, seqs: Sequence[int], files: Sequence[FileMark]) -> None:
        """After a push the remote took: its operations are pushed, and this device's files are read."""
        with self.transaction():
            for start in range(0, len(seqs), 500):
                chunk = seqs[start:start + 500]
                self._exec(f"UPDATE sync_ops SET pushed = 1 WHERE seq IN ({','.join('?' * len(chunk))})", chunk)
            for mark in files:
                self._exec("INSERT OR REPLACE INTO sync_files (path, blob, byte_offset) VALUES (?, ?, ?)",
                           (mark.path, mark.blob, mark.offset))

    def sync_reset(self) -> None:
        """Read every remote file again and recheck every operation against the remote (`sync --force`)."""
        with self.transaction():
            self._exec("DELETE FROM sync_files")
            self._exec("UPDATE sync_ops SET pushed = 0 WHERE pushed = 1")

    # -- change detection (MCP subscriptions) ------------------------------------------------

    def change_token(self) -> int:
        """Changes whenever any connection (another process included) commits to the database."""
        try:
            return int(self._reader().execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise storage_error(exc, self.path) from exc

    def memory_versions(self) -> dict[str, tuple[str, str, int, int | None]]:
        """uid → (domain, namespace, version, deleted_at) for every memory, tombstones included.

        The version hashes what a reader sees, so two edits within one second still differ.
        """
        rows = self._query("SELECT uid, domain, namespace, summary, content, tags, tier, is_pinned, "
                           "updated_at, deleted_at FROM memories")
        return {r["uid"]: (r["domain"], r["namespace"],
                           hash((r["summary"], r["content"], r["tags"], r["tier"], r["is_pinned"], r["updated_at"])),
                           r["deleted_at"]) for r in rows}

    def session_versions(self) -> dict[str, tuple[str, int]]:
        """session id → (project, version of its ended_at/summary)."""
        rows = self._query("SELECT id, project, ended_at, summary FROM sessions")
        return {r["id"]: (r["project"], hash((r["ended_at"], r["summary"]))) for r in rows}

    def max_prompt_id(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(id), 0) FROM prompts")[0][0])

    def prompts_after(self, prompt_id: int) -> list[tuple[int, str, str]]:
        """(id, project, session_id) of prompts newer than `prompt_id`."""
        rows = self._query("SELECT p.id, s.project, p.session_id FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           "WHERE p.id > ? ORDER BY p.id", (prompt_id,))
        return [(int(r["id"]), str(r["project"]), str(r["session_id"])) for r in rows]

    def max_observation_id(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(id), 0) FROM observations")[0][0])

    def observations_after(self, obs_id: int) -> list[tuple[int, str, str]]:
        """(id, project, session_id) of observations newer than `obs_id`."""
        rows = self._query("SELECT id, project, session_id FROM observations WHERE id > ? ORDER BY id", (obs_id,))
        return [(int(r["id"]), str(r["project"]), str(r["session_id"])) for r in rows]

    # -- the change feed (nmem.changefeed) ---------------------------------------------------

    def change_heads(self) -> tuple[int, int, int]:
        """The newest observation id, prompt id and change-log sequence: the feed's "now"."""
        row = self._query("SELECT (SELECT COALESCE(MAX(id), 0) FROM observations), "
                          "(SELECT COALESCE(MAX(id), 0) FROM prompts), "
                          "(SELECT COALESCE(MAX(seq), 0) FROM change_log)")[0]
        return int(row[0]), int(row[1]), int(row[2])

    def observations_since(self, obs_id: int, limit: int) -> list[Observation]:
        rows = self._query(f"SELECT {OBS_COLUMNS} FROM observations WHERE id > ? ORDER BY id LIMIT ?",
                           (obs_id, limit))
        return [Observation.from_row(r) for r in rows]

    def prompts_since(self, prompt_id: int, limit: int) -> list[Prompt]:
        rows = self._query("SELECT p.*, s.project FROM prompts p JOIN sessions s ON s.id = p.session_id "
                           "WHERE p.id > ? ORDER BY p.id LIMIT ?", (prompt_id, limit))
        return [Prompt.from_row(r) for r in rows]

    def logged_changes_since(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """(seq, kind, key, created|updated) of memories and sessions written after `seq`, oldest first."""
        rows = self._query("SELECT seq, kind, key, action FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?",
                           (seq, limit))
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def activity_by_day(self, since: int, project: str | None) -> list[tuple[str, int, int]]:
        """(UTC day, observations, prompts) for each day since `since` that has any."""
        where, params = ("timestamp >= ?", [since]) if project is None else \
            ("timestamp >= ? AND project = ?", [since, project])
        obs = self._query(f"SELECT date(timestamp, 'unixepoch') AS day, COUNT(*) FROM observations WHERE {where} "
                          "GROUP BY day", params)
        prompt_where = "p.timestamp >= ?" + ("" if project is None else " AND s.project = ?")
        prompts = self._query("SELECT date(p.timestamp, 'unixepoch') AS day, COUNT(*) FROM prompts p "
                              f"JOIN sessions s ON s.id = p.session_id WHERE {prompt_where} GROUP BY day", params)
        days: dict[str, list[int]] = {}
        for row in obs:
            days.setdefault(str(row[0]), [0, 0])[0] = int(row[1])
        for row in prompts:
            days.setdefault(str(row[0]), [0, 0])[1] = int(row[1])
        return [(day, counts[0], counts[1]) for day, counts in sorted(days.items())]

    # -- navigation: sessions by prefix and by time, recorded paths, purge selections -------

    def sessions_by_prefix(self, prefix: str, limit: int) -> list[Session]:
        """Sessions whose id starts with `prefix`, newest first: a range scan of the key."""
        rows = self._query("SELECT * FROM sessions WHERE id >= ? AND id < ? ORDER BY started_at DESC, id LIMIT ?",
                           (prefix, prefix + LAST_CHAR, limit))
        return [Session.from_row(r) for r in rows]

    def list_sessions(self, project: str | None, since: int | None, limit: int, *,
                      active: bool = False) -> list[SessionListing]:
        """Sessions newest first (by start), with their user prompts and actions counted;
        `since` keeps those started or ended at or after it, `active` those with any prompt
        or observation."""
        clauses: list[str] = []
        params: list[Any] = []
        if project is not None:
            clauses.append("s.project = ?")
            params.append(project)
        if since is not None:
            clauses.append("(s.started_at >= ? OR s.ended_at >= ?)")
            params.extend([since, since])
        if active:
            clauses.append("(EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id) "
                           "OR EXISTS (SELECT 1 FROM prompts p WHERE p.session_id = s.id))")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        lifecycle = ", ".join(f"'{t}'" for t in LIFECYCLE_TYPES)
        rows = self._query(
            "SELECT s.*, "
            "(SELECT count(*) FROM prompts p WHERE p.session_id = s.id AND p.source = 'user') AS n_prompts, "
            "(SELECT count(*) FROM observations o WHERE o.session_id = s.id "
            f"AND o.obs_type NOT IN ({lifecycle})) AS n_actions, "
            "(SELECT p.content FROM prompts p WHERE p.session_id = s.id AND p.source = 'user' "
            "ORDER BY p.id LIMIT 1) AS first_prompt "
            f"FROM sessions s {where} ORDER BY s.started_at DESC, s.id LIMIT ?", [*params, limit])
        return [SessionListing(Session.from_row(r), int(r["n_prompts"]), int(r["n_actions"]), r["first_prompt"])
                for r in rows]

    def recorded_paths(self, suffix: str, project: str | None, limit: int) -> list[str]:
        """Distinct recorded file paths (of `project`, if given) equal to `suffix` or, for a
        relative one, ending in `/suffix` (a whole path component: "auth.py" is not
        "oauth.py"), sorted."""
        in_project = "" if project is None else " AND EXISTS (SELECT 1 FROM observations o " \
                                                 "WHERE o.file_path = paths.path AND o.project = ?)"
        tail = "/" + suffix
        if suffix.startswith("/"):
            rows = self._query("SELECT path FROM (SELECT DISTINCT file_path AS path FROM observations "
                               f"WHERE file_path = ?) paths WHERE 1{in_project} LIMIT ?",
                               [suffix, *([project] if project is not None else []), limit])
        else:
            # A skip scan of the file_path index, one seek per distinct path: rows outnumber paths
            # (a path is read again and again), so reading every row would cost far more.
            rows = self._query(
                "WITH RECURSIVE paths(path) AS ("
                "SELECT MIN(file_path) FROM observations WHERE file_path IS NOT NULL "
                "UNION ALL SELECT (SELECT MIN(file_path) FROM observations WHERE file_path > paths.path) "
                "FROM paths WHERE paths.path IS NOT NULL) "
                f"SELECT path FROM paths WHERE (path = ? OR substr(path, ?) = ?){in_project} ORDER BY path LIMIT ?",
                [suffix, -len(tail), tail, *([project] if project is not None else []), limit])
        return [str(r[0]) for r in rows]

    def observation_ids(self, match: str | None, filters: SearchFilters, *, unpinned: bool = True) -> list[int]:
        """Every observation the full-text match (all rows when None) and the filters select,
        in id order, pinned rows left out when `unpinned`: what a purge by query takes."""
        clauses: list[str] = ["o.is_pinned = 0"] if unpinned else []
        params: list[Any] = []
        self._observation_filters(filters, clauses, params)
        if match is None:
            source = "observations o"
        else:
            source = "observations_fts f CROSS JOIN observations o ON o.id = f.rowid"
            clauses.insert(0, "observations_fts MATCH ?")
            params.insert(0, match)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return [int(r[0]) for r in self._query(f"SELECT o.id FROM {source} {where} ORDER BY o.id", params)]

    def purge_observations_matching(self, match: str | None, filters: SearchFilters) -> int:
        """Delete what `observation_ids` selects (pinned rows kept), in one transaction."""
        deleted = 0
        with self.transaction():
            ids = self.observation_ids(match, filters)
            for start in range(0, len(ids), PURGE_BATCH):
                cur = self._exec("DELETE FROM observations WHERE id IN (SELECT value FROM json_each(?))",
                                 (json.dumps(ids[start:start + PURGE_BATCH]),))
                deleted += cur.rowcount
            if deleted:
                self._rewrite_index("observations_fts")
        self._scrub()
        return deleted

    # -- vectors (optional embeddings, nmem.search.embeddings) ------------------------------

    # Per kind: the table, its integer key, the text embedded, and which rows count.
    _VECTOR_SOURCES: ClassVar[dict[str, tuple[str, str, str]]] = {
        "observation": ("observations", "content", "1"),
        "prompt": ("prompts", "content", "1"),
        "memory": ("memories", "summary || char(10) || content", "deleted_at IS NULL"),
    }

    def _vector_source(self, kind: str) -> tuple[str, str, str]:
        if kind not in self._VECTOR_SOURCES:
            raise ValueError(f"no vectors for kind {kind!r}")
        return self._VECTOR_SOURCES[kind]

    def count_missing_vectors(self, kind: str, model: str) -> int:
        table, _, live = self._vector_source(kind)
        return int(self._query(
            f"SELECT COUNT(*) FROM {table} t WHERE {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = ? AND v.row_id = t.id AND v.model = ?)",
            (kind, model))[0][0])

    def missing_vectors(self, kind: str, model: str, after: int, limit: int) -> list[tuple[int, str]]:
        """(row id, text) of rows past `after` without a vector for `model`, in id order."""
        table, text, live = self._vector_source(kind)
        rows = self._query(
            f"SELECT t.id, {text} AS text FROM {table} t WHERE t.id > ? AND {live} AND NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.kind = ? AND v.row_id = t.id AND v.model = ?) "
            "ORDER BY t.id LIMIT ?", (after, kind, model, limit))
        return [(int(r["id"]), str(r["text"])) for r in rows]

    def put_vectors(self, kind: str, model: str, dim: int, rows: Sequence[tuple[int, bytes]]) -> None:
        self._vector_source(kind)
        if not rows:
            return
        with self.transaction():
            try:
                self._writer().executemany(
                    "INSERT OR REPLACE INTO vectors (kind, row_id, model, dim, vec) VALUES (?, ?, ?, ?, ?)",
                    [(kind, row_id, model, dim, blob) for row_id, blob in rows])
            except sqlite3.Error as exc:
                raise storage_error(exc, self.path) from exc

    def get_vectors(self, kind: str, model: str, ids: Sequence[int | str]) -> dict[int | str, bytes]:
        self._vector_source(kind)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        if kind == "memory":
            rows = self._query(
                "SELECT m.uid AS id, v.vec FROM memories m JOIN vectors v "
                "ON v.kind = 'memory' AND v.row_id = m.id AND v.model = ? "
                f"WHERE m.uid IN ({marks})", [model, *ids])
        else:
            rows = self._query(
                f"SELECT row_id AS id, vec FROM vectors WHERE kind = ? AND model = ? AND row_id IN ({marks})",
                [kind, model, *ids])
        return {r["id"]: bytes(r["vec"]) for r in rows}

    def vector_scan(self, kind: str, model: str, filters: SearchFilters, limit: int
                    ) -> tuple[list[int | str], list[bytes]]:
        """Ids and vectors of the newest `limit` rows of a kind that match the search filters."""
        clauses: list[str] = []
        params: list[Any] = [kind, model]
        if kind == "observation":
            select = "SELECT o.id AS id, v.vec FROM observations o"
            key, order = "o.id", "o.id"
            self._observation_filters(filters, clauses, params)
        elif kind == "prompt":
            select = "SELECT p.id AS id, v.vec FROM prompts p JOIN sessions s ON s.id = p.session_id"
            key, order = "p.id", "p.id"
            self._prompt_filters(filters, clauses, params)
        else:
            self._vector_source(kind)
            select = "SELECT m.uid AS id, v.vec FROM memories m"
            key, order = "m.id", "m.updated_at"
            clauses.append("m.deleted_at IS NULL")
            self._memory_filters(filters, clauses, params)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(
            f"{select} JOIN vectors v ON v.kind = ? AND v.row_id = {key} AND v.model = ? {where} "
            f"ORDER BY {order} DESC LIMIT ?", [*params, limit])
        return [r["id"] for r in rows], [bytes(r["vec"]) for r in rows]

    def count_vectors(self, kind: str, model: str) -> int:
        self._vector_source(kind)
        return int(self._query("SELECT COUNT(*) FROM vectors WHERE kind = ? AND model = ?", (kind, model))[0][0])

    def delete_vectors(self, model: str | None) -> int:
        """Drop the stored vectors of one model, or of every model (None)."""
        if model is None:
            cur = self._exec("DELETE FROM vectors")
        else:
            cur = self._exec("DELETE FROM vectors WHERE model = ?", (model,))
        return cur.rowcount

    def prune_vectors(self) -> int:
        """Drop vectors whose row is gone (written while the row was being deleted)."""
        removed = 0
        for kind, (table, _, live) in self._VECTOR_SOURCES.items():
            cur = self._exec(
                f"DELETE FROM vectors WHERE kind = ? AND row_id NOT IN (SELECT id FROM {table} WHERE {live})",
                (kind,))
            removed += cur.rowcount
        return removed


class _Snapshot:
    """`with store.read_snapshot():` — BEGIN on the read-only connection, COMMIT on the way out
    (nested uses join the outer one)."""

    __slots__ = ("store",)

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        store = self.store
        if store._snapshots == 0:
            store._reader().execute("BEGIN")
        store._snapshots += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        store = self.store
        store._snapshots -= 1
        if store._snapshots == 0 and store._r is not None and store._r.in_transaction:
            store._r.execute("COMMIT")


class _Transaction:
    """`with store.transaction():` — BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any exception.

    A class rather than `contextlib.contextmanager`, which costs the hook path ~3 ms to import.
    """

    __slots__ = ("store",)

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.store._begin()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.store._end(failed=kind is not None)
