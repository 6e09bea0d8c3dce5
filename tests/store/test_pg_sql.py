"""`pg_sql`: the shared statements' `?` marks as PostgreSQL's `$1`, `$2`, …, a `%` and quoted text kept."""

from __future__ import annotations

import pytest

from store_engines import ENGINES

psycopg = pytest.importorskip("psycopg")

from nmem.store.postgres.connection import pg_sql  # noqa: E402

pytestmark = pytest.mark.no_store  # pg_sql's text; its one PostgreSQL test names its engine


def test_marks_become_numbered_marks() -> None:
    assert pg_sql("SELECT * FROM t WHERE a = ? AND b IN (?,?)") == "SELECT * FROM t WHERE a = $1 AND b IN ($2,$3)"


def test_a_statement_without_marks_is_kept() -> None:
    sql = "SELECT count(*) % 2 FROM observations"
    assert pg_sql(sql) is sql


def test_a_literal_percent_is_kept() -> None:
    assert (pg_sql("SELECT id % 3 FROM t WHERE p LIKE ? ESCAPE '\\'")
            == "SELECT id % 3 FROM t WHERE p LIKE $1 ESCAPE '\\'")
    assert pg_sql("SELECT 1 WHERE tags LIKE '[%' AND x = ?") == "SELECT 1 WHERE tags LIKE '[%' AND x = $1"


def test_a_question_mark_inside_quotes_is_text() -> None:
    assert pg_sql("SELECT '?' , \"odd?name\" FROM t WHERE a = ?") == "SELECT '?' , \"odd?name\" FROM t WHERE a = $1"
    # a doubled quote stays inside the literal
    assert pg_sql("SELECT 'it''s ?' WHERE a = ? AND b = ?") == "SELECT 'it''s ?' WHERE a = $1 AND b = $2"


def test_each_distinct_statement_is_translated_once() -> None:
    pg_sql.cache_clear()
    for _ in range(3):
        pg_sql("SELECT ? + ?")
    info = pg_sql.cache_info()
    assert (info.misses, info.hits) == (1, 2)


@pytest.mark.parametrize("engine", [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"])
def test_the_server_reads_the_translated_text_as_meant(store: object, engine: str) -> None:
    rows = store._query("SELECT ? || '?' || '%' AS a, 7 % 4 AS b, ? AS c",  # type: ignore[attr-defined]
                        ("x", "%y"))
    assert (rows[0]["a"], rows[0]["b"], rows[0]["c"]) == ("x?%", 3, "%y")
    store._exec("CREATE TABLE pg_sql_marks (k TEXT, v TEXT)")  # type: ignore[attr-defined]
    store._exec_many("INSERT INTO pg_sql_marks (k, v) VALUES (?, ? || '%')",  # type: ignore[attr-defined]
                     [("a?", "1"), ("b", "2")])
    rows = store._query("SELECT k, v FROM pg_sql_marks WHERE k LIKE '%' ORDER BY k")  # type: ignore[attr-defined]
    assert [(r["k"], r["v"]) for r in rows] == [("a?", "1%"), ("b", "2%")]
