"""How PostgreSQL scores the curated scopes of a search of everything at a million observations
(issue 25): a memory's vector is unnested for the query's lexemes alone (BM25_WEIGHTED_SQL), not
whole (55 lexemes, each with its arrays of places and classes: about 30 µs a matching memory); a
session's hits are read a slot a lexeme off its vector cut to the query's lexemes, with no
sub-select a session, and the sessions are sorted for the page on their places and scores alone
(SESSIONS_WEIGHTED_SQL). The scores stay those of the former statements, to the bit."""

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


def _statement(store: Any, scope: str, q: str, limit: int = 50) -> tuple[str, list[Any]]:
    sql, params, _ = store._weighted_statement(SCOPES[scope], q, SearchFilters(), "relevance", limit, 0, None)
    return pg_sql(sql), params


def _rows(store: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(store.test_url, autocommit=True) as conn:
        return psycopg.RawCursor(conn).execute(sql, params).fetchall()


def _unnested(plan: dict[str, Any]) -> tuple[int, int]:
    """Rows the plan's function scans over a row's vector returned and removed by their filter,
    summed over their loops."""
    kept = removed = 0
    if plan.get("Node Type") == "Function Scan" and ".tsv" in str(plan.get("Function Call", "")):
        loops = int(plan.get("Actual Loops", 1))
        kept += int(plan["Actual Rows"]) * loops
        removed += int(plan.get("Rows Removed by Filter", 0)) * loops
    for child in plan.get("Plans", ()):
        k, r = _unnested(child)
        kept, removed = kept + k, removed + r
    return kept, removed


def _sorted_whole(plan: dict[str, Any]) -> int:
    """Rows the plan's sorts took in with their summaries (whole rows carried through a sort)."""
    n = 0
    if plan.get("Node Type") == "Sort" and any("summary" in c for c in plan.get("Output", ())):
        n += sum(int(c["Actual Rows"]) * int(c.get("Actual Loops", 1))
                 for c in plan.get("Plans", ()) if c.get("Parent Relationship") == "Outer")
    for child in plan.get("Plans", ()):
        n += _sorted_whole(child)
    return n


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


def test_a_session_is_scored_without_a_sub_select_and_sorted_whole_for_the_page_alone(filled: Any) -> None:
    import psycopg

    sql, params = _statement(filled, "sessions", str(pg_search.parse("invoice AND rotate").text), limit=5)
    with psycopg.connect(filled.test_url, autocommit=True) as conn:
        plan = psycopg.RawCursor(conn).execute("EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) " + sql,
                                               params).fetchone()[0][0]["Plan"]
    # before: the sub-select unnesting each of the 24 matching sessions' vectors ran 24 times,
    # and the 24 were sorted for the page as whole rows
    assert _unnested(plan) == (0, 0)
    assert _sorted_whole(plan) == 5


def test_scores_are_the_former_statements_to_the_bit(filled: Any) -> None:
    """Equivalence guard (passes on the old code too): each scope's scores and order as the
    statement reads them now, against its former statement (memories: the whole vector unnested;
    sessions: BM25_WEIGHTED_SQL's sub-select a session, every class set to D, then the query's
    lexemes to A), for words, an AND, an OR of three and a NOT."""
    for q in QUESTIONS:
        text = str(pg_search.parse(q).text)
        for scope in ("memories", "sessions"):
            sql, params = _statement(filled, scope, text)
            now = _rows(filled, sql, params)
            before = _rows(filled, _former(sql, scope), params)
            assert now, (scope, q)
            assert [(r[0], r[-1].hex()) for r in now] == [(r[0], r[-1].hex()) for r in before], (scope, q)


def _former(sql: str, scope: str) -> str:
    """The statement `sql` as the scope's statement was written before."""
    if scope == "memories":
        return sql.replace("FROM unnest(ts_delete(m.match_tsv, tsvector_to_array(ts_delete(m.match_tsv, w.terms)))) "
                           "AS v", "FROM unnest(m.match_tsv) AS v")
    where = sql.split("FROM sessions s CROSS JOIN weighted w WHERE ", 1)[1].split("\n), found AS", 1)[0]
    score = ("-COALESCE((SELECT sum(w.idfs[array_position(w.terms, u.lexeme)] * (array_length(u.positions, 1) * 2.2)"
             " / (array_length(u.positions, 1) + 1.2 * (1 - 0.75 + 0.75 * s.tokens / (t.tokens::float8 / t.n))))"
             " FROM unnest(ts_filter(setweight(setweight(s.match_tsv, 'D'), 'A', w.terms), '{a}')) u), 0)")
    output = ", ".join(f"s.{c}" for c in pg_search.WEIGHTED_OUTPUT["sessions"])
    head = sql.split("), weighted AS MATERIALIZED (", 1)[0]
    return head + f"""), weighted AS MATERIALIZED (
    SELECT array_agg(term) AS terms, array_agg(CASE WHEN idf <= 0 THEN 1e-6 ELSE idf END) AS idfs
    FROM (SELECT term, ln(((t.n - df)::float8 + 0.5) / (df + 0.5)) AS idf FROM terms CROSS JOIN totals t) AS raw
), found AS (
    SELECT s.*, s.tsv AS match_tsv FROM sessions s WHERE {where}
)
SELECT {output}, t.n, t.stamp, t.tokens, t.parts, NULL, NULL, {score} AS rank
FROM found s CROSS JOIN totals t CROSS JOIN weighted w
ORDER BY rank ASC, s.id COLLATE "C" DESC LIMIT $8 OFFSET $9"""


def test_a_session_s_vector_holds_classes_a_and_b_alone(filled: Any) -> None:
    """Guard of what EVEN_WEIGHTED_SCORE takes for granted (passes on the old code too): no lexeme
    of a session's vector is of class C, the class it marks the query's lexemes with."""
    classes = _rows(filled, "SELECT DISTINCT c FROM sessions, unnest(tsv) AS v, unnest(v.weights) AS c", [])
    assert sorted(c for (c,) in classes) == sorted(pg_search.SESSIONS_TSV_CLASSES)


def test_a_question_with_more_lexemes_than_slots_scores_the_same(filled: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Equivalence guard of the fallback (main has no slots to fall back from: it errors there):
    a question whose words give more lexemes than its statement's slots is scored by the former
    sub-select, to the same floats as the slots give."""
    text = str(pg_search.parse("invoice OR rotate OR export").text)
    sql, params = _statement(filled, "sessions", text)
    slotted = _rows(filled, sql, params)
    monkeypatch.setattr(pg_search, "session_slots", lambda q: 1)
    fewer, params = _statement(filled, "sessions", text)
    assert "<= 1 THEN" in fewer
    assert [(r[0], r[-1].hex()) for r in _rows(filled, fewer, params)] == [(r[0], r[-1].hex()) for r in slotted]
