"""One store test suite on both engines: fixtures that open SQLite always and PostgreSQL when
NMEM_TEST_PG names a reachable server (`.ci/postgres.sh` exports it), else skip saying why.

Each PostgreSQL test gets a schema of its own (xdist workers run side by side in one database),
dropped afterwards. A test module runs on both engines by importing `both_engines`; the
`store` fixture (conftest) and `service` (through NMEM_STORE_URL) then follow the engine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from nmem.store import open_store
from nmem.store.protocol import Store

ENGINES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@cache
def pg_unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    url = os.environ.get("NMEM_TEST_PG", "")
    if not url:
        return "NMEM_TEST_PG is not set (source .ci/postgres.sh, or export NMEM_TEST_PG=postgresql://...)"
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'nmem-memory[postgres]')"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at NMEM_TEST_PG is not reachable: {str(exc).strip()}"
    return None


def schema_url(base: str, schema: str) -> str:
    """`base` with the search_path set to `schema` (libpq's `options` parameter)."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


# The catalog a test may change behind the store's back (a table, a column, an index, a trigger,
# a function, the text-search configuration's mapping): a schema whose shape differs from the one
# it was made with is dropped and made anew rather than emptied.
_SHAPE = """
SELECT md5(string_agg(x, '|' ORDER BY x)) FROM (
  SELECT format('rel %%s %%s', c.relname, c.relkind) FROM pg_class c WHERE c.relnamespace = %(ns)s::text::regnamespace
  UNION ALL SELECT format('col %%s.%%s %%s %%s %%s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                          a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE c.relnamespace = %(ns)s::text::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL SELECT format('idx %%s', indexdef) FROM pg_indexes WHERE schemaname = %(ns)s::text
  UNION ALL SELECT format('con %%s %%s', conname, pg_get_constraintdef(oid)) FROM pg_constraint
   WHERE connamespace = %(ns)s::text::regnamespace
  UNION ALL SELECT format('trg %%s %%s', tgname, tgenabled) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = %(ns)s::text::regnamespace
  UNION ALL SELECT format('fn %%s %%s', proname, md5(prosrc)) FROM pg_proc
   WHERE pronamespace = %(ns)s::text::regnamespace
  UNION ALL SELECT format('ts %%s %%s %%s %%s', c.cfgname, m.maptokentype, m.mapseqno, m.mapdict::regdictionary)
    FROM pg_ts_config c JOIN pg_ts_config_map m ON m.mapcfg = c.oid WHERE c.cfgnamespace = %(ns)s::text::regnamespace
) shape(x)
"""


class PgSchemas:
    """This test process's PostgreSQL schema: migrated once, emptied before each test.

    A fresh schema costs about a second (nmem's migrations: tables, GIN indexes, triggers), so each
    xdist worker keeps one and a test gets it back empty: every table's rows deleted (those the
    migrations wrote, such as `sync_state`'s device id, put back) and every sequence restarted, which
    takes milliseconds. A schema is made anew when a test changed its shape (see `_SHAPE`) or left
    a lock that emptying would wait on; all are dropped when the process ends.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.schema = ""
        self.made: list[str] = []
        self.shape = ""
        self.seeds: dict[str, tuple[str, list[tuple[object, ...]]]] = {}   # table -> (insert, rows)
        self.tables: list[str] = []
        self.sequences: list[str] = []
        self._conn: Any = None

    def connect(self) -> Any:
        """The process's own connection to the server (made again if it was lost)."""
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.base, autocommit=True)
        return self._conn

    def take(self) -> str:
        """The URL of an empty, migrated schema for one test."""
        if not (self.schema and self._empty()):
            self._make()
        return schema_url(self.base, self.schema)

    def give_back(self) -> None:
        """After the test: a schema whose shape changed is not used again."""
        if self.schema and self._shape() != self.shape:
            self._retire()

    def close(self) -> None:
        import psycopg

        with self.connect() as conn:
            conn.execute("SET lock_timeout = '5s'")
            for schema in self.made:
                try:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                except psycopg.Error:
                    pass  # a leftover schema is harmless: every run's names differ

    def _make(self) -> None:
        self._retire()
        schema = f"nmem_t_{uuid.uuid4().hex[:16]}"
        conn = self.connect()
        conn.execute(f"CREATE SCHEMA {schema}")
        self.made.append(schema)
        open_store(schema_url(self.base, schema)).close()
        self.tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'schema_migrations'",
            (schema,))]
        self.sequences = [r[0] for r in conn.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,))]
        self.seeds = {}
        for table in self.tables:
            columns = [r[0] for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (f"{schema}.{table}",))]
            names = ", ".join(columns)
            rows = conn.execute(f"SELECT {names} FROM {schema}.{table}").fetchall()
            if rows:
                marks = ", ".join(["%s"] * len(columns))
                self.seeds[table] = (f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
        self.schema = schema
        self.shape = self._shape()

    def _empty(self) -> bool:
        """Delete every row and restart every sequence; False when a lock held it up."""
        import psycopg

        try:
            conn = self.connect()
            with conn.transaction():
                conn.execute(f"SET LOCAL search_path = {self.schema}")   # the triggers name their sequence bare
                conn.execute("SET LOCAL lock_timeout = '2s'")
                conn.execute("SET LOCAL session_replication_role = replica")   # no triggers, no FK checks
                conn.execute("; ".join(f"DELETE FROM {t}" for t in self.tables))
                for insert, rows in self.seeds.values():
                    conn.cursor().executemany(insert, rows)
                conn.execute("; ".join(f"SELECT setval('{s}', 1, false)" for s in self.sequences))
        except psycopg.Error:
            self._retire()
            return False
        return True

    def _shape(self) -> str:
        return str(self.connect().execute(_SHAPE, {"ns": self.schema}).fetchone()[0])

    def _retire(self) -> None:
        self.schema = ""


@pytest.fixture(scope="session")
def pg_schemas() -> Iterator[PgSchemas]:
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schemas = PgSchemas(os.environ["NMEM_TEST_PG"])
    yield schemas
    schemas.close()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty, migrated schema on the test server, for this test alone (see PgSchemas)."""
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    schemas: PgSchemas = request.getfixturevalue("pg_schemas")
    yield schemas.take()
    schemas.give_back()


class SqliteTemplate:
    """This test process's SQLite database, migrated once: a test's own database is a copy of it.

    Made by nmem's migrations, a new database costs one commit a step, each synced to disk (a
    quarter of a second here, most of a store or service test's setup); a copy costs a file's
    bytes. The copy gets a device id of its own (`sync_state`), as a database made anew does.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        open_store(f"sqlite:///{path}").close()
        self.data = path.read_bytes()

    def copy_to(self, path: Path) -> None:
        """A migrated database at `path`, as `open_store` would make it (directory 0700, file 0600)."""
        import sqlite3

        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(self.data)
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous = OFF")   # the test's store syncs its own writes
            conn.execute("UPDATE sync_state SET device = lower(hex(randomblob(8)))")
        finally:
            conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplate:
    return SqliteTemplate(tmp_path_factory.mktemp("sqlite-template") / "nmem.db")


@pytest.fixture(params=ENGINES, name="engine")
def both_engines(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if engine == "postgres":
        return str(request.getfixturevalue("pg_url"))
    path = tmp_path / "engine" / "nmem.db"
    request.getfixturevalue("sqlite_template").copy_to(path)
    return f"sqlite:///{path}"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def sql_rows(store: Store, sql: str, *params: object) -> list[tuple[object, ...]]:
    """Rows of a raw SQL read (written with SQLite's `?` marks) on either engine."""
    from nmem.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return [tuple(r) for r in store._reader().execute(sql, params).fetchall()]
    return [tuple(r) for r in store._query(sql, params)]  # type: ignore[attr-defined]


def sql_dicts(store: Store, sql: str, *params: object) -> list[dict[str, object]]:
    from nmem.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return [dict(r) for r in store._reader().execute(sql, params).fetchall()]
    return [dict(zip(r.keys(), r, strict=True)) for r in store._query(sql, params)]  # type: ignore[attr-defined]


def fts_count(store: Store, table: str, word: str) -> int:
    """Rows of `table` whose full-text index holds `word`: FTS5's table, or the tsvector column."""
    from nmem.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return int(store._reader().execute(f"SELECT COUNT(*) FROM {table}_fts WHERE {table}_fts MATCH ?",
                                           (word,)).fetchone()[0])
    return int(store._query(f"SELECT COUNT(*) FROM {table} WHERE tsv @@ to_tsquery('nmem', ?)",  # type: ignore[attr-defined]
                            (word,))[0][0])
