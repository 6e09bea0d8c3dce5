"""The SQLite engine on real files: PRAGMAs, permissions, read-only readers, WAL checkpoint, FTS sync,
BEGIN IMMEDIATE transactions."""

from __future__ import annotations

import math
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nmem.store.sqlite.connection as sqlite_store
from nmem.errors import ConfigError, StorageError, StoreBusy, StoreUnavailable
from nmem.store import NewMemory, NewObservation, SearchFilters, open_store
from nmem.store.sqlite import SqliteStore, exp_decay

T0 = 1_790_000_000

pytestmark = pytest.mark.sqlite_only("the SQLite engine's own files, PRAGMAs, WAL, locks and FTS5 tables "
                                     "(what both engines share is in test_store_engines.py)")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "nmem.db"


@pytest.fixture
def stores(db_path: Path) -> Iterator[Any]:
    """Open stores on one file; every one is closed at the end."""
    opened: list[SqliteStore] = []

    def factory(**kwargs: Any) -> SqliteStore:
        store = SqliteStore(str(kwargs.pop("path", db_path)), **kwargs)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(stores: Any) -> SqliteStore:
    return stores()


def pragma(conn: sqlite3.Connection, name: str) -> Any:
    return conn.execute(f"PRAGMA {name}").fetchone()[0]


def add_obs(store: SqliteStore, content: str, session: str = "s1", at: int = T0, **kw: Any) -> int:
    with store.transaction():
        store.ensure_session(session, "demo", at)
        return store.add_observation(NewObservation(session, "demo", at, kw.pop("obs_type", "command"),
                                                    "PostToolUse", content, "Bash", **kw))


def fts_ids(store: SqliteStore, table: str, match: str) -> list[int]:
    rows = store._reader().execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (match,))
    return [r[0] for r in rows]


def integrity_check(store: SqliteStore, table: str) -> None:
    """FTS5's own check that an external-content index matches its table (raises if not)."""
    store._writer().execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


# -- PRAGMAs ----------------------------------------------------------------------------------------


def test_writer_pragmas(store: SqliteStore) -> None:
    w = store._writer()
    assert pragma(w, "journal_mode") == "wal"
    assert pragma(w, "synchronous") == 1  # NORMAL
    assert pragma(w, "foreign_keys") == 1
    assert pragma(w, "auto_vacuum") == 2  # INCREMENTAL
    assert pragma(w, "busy_timeout") == 5000
    assert pragma(w, "temp_store") == 2  # MEMORY
    assert pragma(w, "wal_autocheckpoint") == sqlite_store.WAL_AUTOCHECKPOINT_PAGES > 1000
    # Deleted text is zeroed whatever the build's default (Debian's SQLite has it on, python.org's off).
    assert pragma(w, "secure_delete") == 1


def test_reader_pragmas(store: SqliteStore) -> None:
    r = store._reader()
    assert pragma(r, "journal_mode") == "wal"
    assert pragma(r, "busy_timeout") == 5000
    assert pragma(r, "temp_store") == 2
    # Readers map the file (its pages read in the kernel's cache, not copied in by pread); the
    # writer, which every hook opens, does not.
    assert pragma(r, "mmap_size") == sqlite_store.READ_MMAP_BYTES > 0
    assert pragma(store._writer(), "mmap_size") == 0


def test_busy_timeout_is_configurable(stores: Any) -> None:
    store = stores(busy_timeout_ms=250)
    assert pragma(store._writer(), "busy_timeout") == 250
    assert pragma(store._reader(), "busy_timeout") == 250


def test_wal_and_auto_vacuum_persist_in_the_file(store: SqliteStore, db_path: Path) -> None:
    store.close()
    conn = sqlite3.connect(db_path)
    try:
        assert pragma(conn, "journal_mode") == "wal"
        assert pragma(conn, "auto_vacuum") == 2
    finally:
        conn.close()


# -- read-only -----------------------------------------------------------------------------------------


def test_reader_connection_refuses_writes(store: SqliteStore) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly database"):
        store._reader().execute("INSERT INTO sessions (id, project, started_at) VALUES ('x', 'p', 1)")
    assert store.get_session("x") is None


def test_readonly_store_reads_but_refuses_writes(stores: Any) -> None:
    writer = stores()
    oid = add_obs(writer, "pytest -q")
    reader = stores(readonly=True)
    assert [o.content for o in reader.get_observations([oid])] == ["pytest -q"]
    assert reader.schema_version() == writer.schema_version()
    with pytest.raises(StorageError, match="store opened read-only"):
        reader.ensure_session("s2", "demo", T0)
    with pytest.raises(StorageError, match="store opened read-only"):
        reader.transaction().__enter__()


def test_readonly_store_on_a_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    with pytest.raises(StorageError, match="database does not exist"):
        SqliteStore(str(missing), readonly=True)
    assert not missing.exists()


def test_readonly_store_after_clean_close_of_the_writer(stores: Any, db_path: Path) -> None:
    writer = stores()
    oid = add_obs(writer, "make")
    writer.close()
    assert not db_path.with_name("nmem.db-wal").exists()
    reader = stores(readonly=True)
    assert [o.id for o in reader.get_observations([oid])] == [oid]


# -- files ----------------------------------------------------------------------------------------------


def test_database_file_is_0600_in_a_0700_directory(store: SqliteStore, db_path: Path) -> None:
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700


def test_wal_and_shm_files_are_private_too(store: SqliteStore, db_path: Path) -> None:
    add_obs(store, "make")
    for suffix in ("-wal", "-shm"):
        side = db_path.with_name(db_path.name + suffix)
        assert side.exists()
        assert stat.S_IMODE(side.stat().st_mode) & 0o077 == 0, suffix


def test_unwritable_location_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StorageError, match="cannot create database"):
        SqliteStore(str(blocker / "sub" / "nmem.db"))


# -- checkpoint on close -----------------------------------------------------------------------------------


def test_clean_close_truncates_the_wal(stores: Any, db_path: Path) -> None:
    wal = db_path.with_name("nmem.db-wal")
    writer = stores()
    bystander = stores()  # keeps the file open, so SQLite cannot simply delete the WAL on close
    bystander.get_session("warm-up")
    for i in range(50):
        add_obs(writer, f"command {i} " + "x" * 500)
    assert wal.stat().st_size > 0
    writer.close()
    assert wal.stat().st_size == 0
    assert len(bystander.get_observations(list(range(1, 51)))) == 50


def test_close_without_checkpoint_leaves_the_wal(stores: Any, db_path: Path) -> None:
    wal = db_path.with_name("nmem.db-wal")
    writer = stores()
    bystander = stores()
    bystander.get_session("warm-up")
    add_obs(writer, "make")
    writer.close(checkpoint=False)
    assert wal.stat().st_size > 0


def test_close_is_idempotent(store: SqliteStore) -> None:
    store.close()
    store.close()


# -- transactions -------------------------------------------------------------------------------------------


def test_transaction_takes_the_write_lock_at_begin(stores: Any) -> None:
    first = stores()
    second = stores(busy_timeout_ms=50)
    with first.transaction():
        assert first._writer().in_transaction
        # BEGIN IMMEDIATE: the lock is held before any write, so the second writer waits, then fails
        with pytest.raises(StoreBusy, match="database is busy"), second.transaction():
            pass
    with second.transaction():
        second.ensure_session("after", "demo", T0)
    assert first.get_session("after") is not None


def test_readers_are_not_blocked_by_a_writer_and_do_not_see_uncommitted_rows(stores: Any) -> None:
    writer = stores()
    reader = stores()
    with writer.transaction():
        writer.ensure_session("pending", "demo", T0)
        assert writer.get_session("pending") is not None  # the writer sees its own write
        assert reader.get_session("pending") is None
    assert reader.get_session("pending") is not None


def test_observation_fts_follows_insert_update_delete(store: SqliteStore) -> None:
    oid = add_obs(store, "deploy with helm")
    other = add_obs(store, "helm lint")
    assert fts_ids(store, "observations_fts", "helm") == [oid, other]
    store._exec("UPDATE observations SET content = 'deploy with kustomize' WHERE id = ?", (oid,))
    assert fts_ids(store, "observations_fts", "helm") == [other]
    assert fts_ids(store, "observations_fts", "kustomize") == [oid]
    store.set_observation_pin(oid, True)  # non-content update leaves the index alone
    assert fts_ids(store, "observations_fts", "kustomize") == [oid]
    store.purge_observations([oid])
    assert fts_ids(store, "observations_fts", "kustomize") == []
    integrity_check(store, "observations_fts")


def test_prompt_fts_follows_insert_update_delete(store: SqliteStore) -> None:
    with store.transaction():
        store.ensure_session("s1", "demo", T0)
        pid = store.add_prompt("s1", T0, "user", "fix the flaky test")
    assert fts_ids(store, "prompts_fts", "flaky") == [pid]
    store._exec("UPDATE prompts SET content = 'fix the slow test' WHERE id = ?", (pid,))
    assert fts_ids(store, "prompts_fts", "flaky") == []
    assert fts_ids(store, "prompts_fts", "slow") == [pid]
    store._exec("DELETE FROM prompts WHERE id = ?", (pid,))
    assert fts_ids(store, "prompts_fts", "slow") == []
    integrity_check(store, "prompts_fts")


def test_memory_fts_follows_update_and_tombstone(store: SqliteStore) -> None:
    mem = store.insert_memory(NewMemory("u1", "user", "decisions", "use postgres", "for the team server",
                                        T0, tags=("db",)))
    rowid = store._reader().execute("SELECT id FROM memories WHERE uid = 'u1'").fetchone()[0]
    assert fts_ids(store, "memories_fts", "postgres") == [rowid]
    assert fts_ids(store, "memories_fts", "tags:db") == [rowid]
    store.update_memory(mem.id, {"summary": "use sqlite"}, T0 + 1)
    assert fts_ids(store, "memories_fts", "postgres") == []
    assert fts_ids(store, "memories_fts", "sqlite") == [rowid]
    store.touch_memories([mem.id], T0 + 2)  # access bookkeeping does not touch the index
    assert fts_ids(store, "memories_fts", "sqlite") == [rowid]
    assert store.tombstone_memory(mem.id, T0 + 3) is True
    assert fts_ids(store, "memories_fts", "sqlite OR team OR db") == []
    integrity_check(store, "memories_fts")


def test_session_fts_follows_summary_updates(store: SqliteStore) -> None:
    store.ensure_session("s1", "demo", T0)
    store.close_session("s1", T0 + 5, {"events": {}}, {"intent": "x", "text": "Intents: tune the cache"})
    assert [s.id for s, _ in store.search_sessions('"cache"', _filters(), "relevance", 10, 0)] == ["s1"]
    store.close_session("s1", T0 + 9, {"events": {}}, {"intent": "y", "text": "Intents: rotate keys"})
    assert store.search_sessions('"cache"', _filters(), "relevance", 10, 0) == []
    assert [s.id for s, _ in store.search_sessions('"rotate"', _filters(), "relevance", 10, 0)] == ["s1"]


def test_full_text_rebuild_matches_the_triggers(store: SqliteStore) -> None:
    for i in range(20):
        add_obs(store, f"event number {i}")
    store._exec("DELETE FROM observations WHERE id % 3 = 0")
    store._exec("UPDATE observations SET content = content || ' edited' WHERE id % 2 = 0")
    before = fts_ids(store, "observations_fts", "edited")
    store._exec("INSERT INTO observations_fts(observations_fts) VALUES ('rebuild')")
    assert fts_ids(store, "observations_fts", "edited") == before == [2, 4, 8, 10, 14, 16, 20]
    integrity_check(store, "observations_fts")


def _filters() -> SearchFilters:
    return SearchFilters()


# -- misc ---------------------------------------------------------------------------------------------------------


def test_purge_reclaims_pages_with_incremental_vacuum(store: SqliteStore) -> None:
    ids = [add_obs(store, "y" * 4000, at=T0 + i) for i in range(100)]
    pages = pragma(store._writer(), "page_count")
    assert store.purge_observations(ids) == 100
    assert pragma(store._writer(), "freelist_count") == 0
    assert pragma(store._writer(), "page_count") < pages - 90


def test_exp_decay_half_life_is_seven_days() -> None:
    day = 86400
    assert exp_decay(0) == 1.0
    assert exp_decay(7 * day) == pytest.approx(0.5)
    assert exp_decay(14 * day) == pytest.approx(0.25)
    assert exp_decay(21 * day) == pytest.approx(0.125)
    assert exp_decay(-5 * day) == 1.0
    assert exp_decay(None) == 0.0
    assert exp_decay(3.5 * day) == pytest.approx(math.sqrt(0.5))


def test_exp_decay_is_registered_in_sql(store: SqliteStore) -> None:
    assert store._reader().execute("SELECT exp_decay(?)", (7 * 86400,)).fetchone()[0] == pytest.approx(0.5)


def test_open_store_urls(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/a/b.db")
    try:
        assert store.url == f"sqlite:///{tmp_path}/a/b.db"
        assert (tmp_path / "a" / "b.db").exists()
    finally:
        store.close()
    # a postgresql:// URL opens the PostgreSQL engine (tests/store/test_store_engines.py); no server here
    with pytest.raises(StoreUnavailable, match=r"cannot connect to postgresql://nmem@127\.0\.0\.1:1/nmem: .*refused"):
        open_store("postgresql://nmem@127.0.0.1:1/nmem")
    for bad in ("mysql://x", "sqlite:///", "nmem.db"):
        with pytest.raises(ConfigError, match="unsupported store URL"):
            open_store(bad)


def test_readonly_store_on_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite" * 200)
    with pytest.raises(StorageError, match="file is not a database"):
        SqliteStore(str(junk), readonly=True)


def test_an_existing_world_readable_database_is_made_private(tmp_path: Path, stores: Any) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.close()
    path.chmod(0o644)
    stores(path=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- the trail's counts (schema step 17) ------------------------------------------------------------

def kept_counts(store: SqliteStore) -> tuple[dict[str, int], dict[str, int]]:
    return store.status().by_obs_type, store.status().by_prompt_source


def counted_rows(store: SqliteStore) -> tuple[dict[str, int], dict[str, int]]:
    conn = store._reader()
    return ({str(t): int(n) for t, n in conn.execute(
                "SELECT obs_type, COUNT(*) FROM observations GROUP BY 1 ORDER BY 2 DESC, 1")},
            {str(s): int(n) for s, n in conn.execute(
                "SELECT source, COUNT(*) FROM prompts GROUP BY 1 ORDER BY 2 DESC, 1")})


def test_status_reads_the_kept_counts_and_no_trail_row(store: SqliteStore) -> None:
    for i in range(5):
        add_obs(store, f"make {i}", obs_type="command" if i % 2 else "file_read")
    store.add_prompt("s1", T0, "user", "ship it")
    statements: list[str] = []
    store._reader().set_trace_callback(statements.append)
    try:
        st = store.status()
    finally:
        store._reader().set_trace_callback(None)
    assert (st.observations, st.prompts, st.by_obs_type, st.by_prompt_source) == (
        5, 1, {"file_read": 3, "command": 2}, {"user": 1})
    assert any("trail_counts" in s for s in statements), statements
    read = [s for s in statements if "FROM observations" in s or "FROM prompts" in s]
    assert read == [], "status counted trail rows"


def test_the_kept_counts_follow_writes_of_every_shape(store: SqliteStore) -> None:
    """Whatever the statement (an outer conflict policy, an upsert, a type changed, a raw delete),
    the triggers keep the counts equal to the rows."""
    add_obs(store, "make a")
    ids = [add_obs(store, f"cat {i}", obs_type="file_read") for i in range(3)]
    store.add_prompt("s1", T0, "user", "first")
    conn = store._writer()
    columns = "session_id, project, timestamp, obs_type, source_event, content"
    with store.transaction():
        conn.execute(f"INSERT OR IGNORE INTO observations ({columns}) VALUES ('s1', 'demo', ?, 'command', 'x', 'b')",
                     (T0,))
        conn.execute(f"INSERT OR REPLACE INTO observations ({columns}) VALUES ('s1', 'demo', ?, 'search', 'x', 'c')",
                     (T0,))
        conn.execute(f"INSERT INTO observations ({columns}) VALUES ('s1', 'demo', ?, 'command', 'x', 'd') "
                     "ON CONFLICT DO NOTHING", (T0,))
        conn.execute("UPDATE observations SET obs_type = 'file_edit' WHERE id = ?", (ids[0],))
        conn.execute("UPDATE observations SET obs_type = obs_type WHERE id = ?", (ids[1],))
        conn.execute("DELETE FROM observations WHERE id = ?", (ids[2],))
        conn.execute("INSERT INTO prompts (session_id, timestamp, source, content) VALUES ('s1', ?, 'agent', 'ok')",
                     (T0,))
        conn.execute("UPDATE prompts SET source = 'thinking' WHERE source = 'user'")
    assert kept_counts(store) == counted_rows(store) == (
        {"command": 3, "file_edit": 1, "file_read": 1, "search": 1}, {"agent": 1, "thinking": 1})
    with store.transaction():
        conn.execute("DELETE FROM observations")
        conn.execute("DELETE FROM prompts")
    assert kept_counts(store) == counted_rows(store) == ({}, {})
