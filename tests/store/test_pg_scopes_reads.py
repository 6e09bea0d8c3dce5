"""How PostgreSQL scores the curated scopes of a search of everything (sessions, memories:
BM25_WEIGHTED_SQL) at a million observations (issue 25): each matching row's vector is read for
the query's lexemes alone, not unnested whole. Unnesting a memory's whole vector (55 lexemes,
each with its arrays of places and classes) cost about 30 µs a matching memory; a session's
vector was copied twice more than needed. The scores stay those of the former expressions, to
the bit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from nmem.store import NewMemory, open_store
from nmem.store.postgres import search as pg_search
from nmem.store.postgres.connection import pg_sql
from nmem.store.records import SearchFilters
from nmem.store.sql.scopes import SCOPES
from store_engines import ENGINES

if TYPE_CHECKING:
    from collections.abc import Iterator

pytest.importorskip("psycopg")
pytestmark = pytest.mark.parametrize("engine", [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"])

T0 = 1_790_000_000
FILLER = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
# the words asked, spread over every weight class of a memory (summary A, tags B, content C,
# namespace D) and of a session (summary A, project B), some repeated in a row
QUESTIONS = ("invoice", "invoice AND export", "invoice OR ledger OR rotate", "export NOT charlie")


def _memory(n: int) -> NewMemory:
    words = " ".join(FILLER[(n + k) % len(FILLER)] for k in range(20))
    return NewMemory(f"m-{n}", "learnings", f"project:ledger{'-invoice' if n % 3 == 0 else ''}",
                     f"invoice export {'invoice ' * (n % 3)}note {n}",
                     f"{words} rotate the ledger {'export ' * (n % 4)}{words}", T0 + n,
                     tags=("invoice",) if n % 2 else ("ledger", "rotate"))


@pytest.fixture
def filled(pg_url: str, engine: str) -> Iterator[Any]:
    store = open_store(pg_url)
    for n in range(24):
        store.insert_memory(_memory(n))
        sid = f"s-{n}"
        store.ensure_session(sid, "ledger-invoice" if n % 2 else "ledger", T0 + n)
        words = " ".join(FILLER[(n + k) % len(FILLER)] for k in range(15))
        store.close_session(sid, T0 + n + 60, {}, {"text": f"invoice {'export ' * (n % 3)}{words} rotate {n}"})
    store.test_url = pg_url
    yield store
    store.close()


def _statement(store: Any, scope: str, q: str) -> tuple[str, list[Any]]:
    sql, params, _ = store._weighted_statement(SCOPES[scope], q, SearchFilters(), "relevance", 50, 0, None)
    return pg_sql(sql), params


def _rows(store: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(store.test_url, autocommit=True) as conn:
        return psycopg.RawCursor(conn).execute(sql, params).fetchall()


def _unnested(plan: dict[str, Any]) -> tuple[int, int]:
    """Rows the plan's function scans over a memory's vector returned and removed by their
    filter, summed over their loops."""
    kept = removed = 0
    if plan.get("Node Type") == "Function Scan" and ".tsv" in str(plan.get("Function Call", "")):
        loops = int(plan.get("Actual Loops", 1))
        kept += int(plan["Actual Rows"]) * loops
        removed += int(plan.get("Rows Removed by Filter", 0)) * loops
    for child in plan.get("Plans", ()):
        k, r = _unnested(child)
        kept, removed = kept + k, removed + r
    return kept, removed


def test_a_memory_s_vector_is_unnested_for_the_query_s_lexemes_alone(filled: Any) -> None:
    import psycopg

    sql, params = _statement(filled, "memories", str(pg_search.parse("invoice AND export").text))
    with psycopg.connect(filled.test_url, autocommit=True) as conn:
        plan = psycopg.RawCursor(conn).execute("EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) " + sql,
                                               params).fetchone()[0][0]["Plan"]
    kept, removed = _unnested(plan)
    # 24 matches, two lexemes each: before, every lexeme of each vector (about 25) was unnested
    # and all but the query's removed by the filter
    assert kept == 24 * 2
    assert removed == 0


@pytest.mark.parametrize("scope", ["memories", "sessions"])
def test_scores_are_the_former_expressions_to_the_bit(filled: Any, scope: str) -> None:
    """Equivalence guard (passes on the old code too): the scores and order of the statement as
    it is, against the statement with each scope's former expression (the whole vector unnested
    for memories; every class set to D, then the query's lexemes to A, for sessions)."""
    former = {"memories": "FROM unnest(m.match_tsv) AS v",
              "sessions": "FROM unnest(ts_filter(setweight(setweight(s.match_tsv, 'D'), 'A', w.terms), '{a}')) u"}
    current = {"memories": "FROM unnest(ts_delete(m.match_tsv, "
                           "tsvector_to_array(ts_delete(m.match_tsv, w.terms)))) AS v",
               "sessions": "FROM unnest(ts_filter(setweight(s.match_tsv, 'C', w.terms), '{c}')) u"}
    for q in QUESTIONS:
        sql, params = _statement(filled, scope, str(pg_search.parse(q).text))
        assert current[scope] in sql
        now = _rows(filled, sql, params)
        before = _rows(filled, sql.replace(current[scope], former[scope]), params)
        assert now, q
        assert [(r[0], r[-1].hex()) for r in now] == [(r[0], r[-1].hex()) for r in before], q


def test_a_session_s_vector_holds_classes_a_and_b_alone(filled: Any) -> None:
    """Guard of what EVEN_WEIGHTED_SCORE takes for granted (passes on the old code too): no lexeme
    of a session's vector is of class C, the class it marks the query's lexemes with."""
    classes = _rows(filled, "SELECT DISTINCT c FROM sessions, unnest(tsv) AS v, unnest(v.weights) AS c", [])
    assert sorted(c for (c,) in classes) == sorted(pg_search.SESSIONS_TSV_CLASSES)
