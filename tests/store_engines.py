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


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty schema on the test server; dropped after the test."""
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import psycopg

    base = os.environ["NMEM_TEST_PG"]
    schema = f"nmem_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=ENGINES, name="engine")
def both_engines(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if engine == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'engine' / 'nmem.db'}"


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
