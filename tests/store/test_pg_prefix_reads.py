"""A prefix's hits in a row on PostgreSQL (`PREFIX_HITS`): read back from ts_rank where the row
holds one lexeme the prefix begins, and counted by ts_rank_cd (three times ts_rank's cost) only
where it holds two or more. At 1M rows a single prefix's window is 2,000 rows, nearly all of
them of one lexeme (docs/benchmarks/postgres.md, pg-prefix)."""

from __future__ import annotations

import pytest

from nmem.store import NewObservation, open_store
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from pg_counted_support import COUNTED_RANK_CD, counted_newest, notices
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000

def _hits(store: Store, expr: str, vector: str, query: str) -> float:
    sql = f"SELECT {expr.format(q='r.q')} FROM (SELECT ?::tsvector AS tsv, ?::tsquery AS q) AS r"
    return float(store._query(sql, (vector, query))[0][0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_prefixs_hits_are_ts_rank_cds_for_one_lexeme_or_several(store: Store, engine: str) -> None:
    """An equivalence guard (it passes on the code before too, where PREFIX_HITS was ts_rank_cd
    itself): every count of one lexeme a vector keeps (1…256, and past it), of two and three
    lexemes the prefix begins, of none, and beside lexemes it does not begin."""
    from nmem.store.postgres.search import PREFIX_HITS

    def places(first: int, n: int) -> str:
        return ",".join(str(p) for p in range(first, first + n))

    vectors = []
    for n in (*range(1, 40), 63, 64, 65, 127, 128, 200, 255, 256, 257, 300):
        vectors.append(f"'login':{places(1, n)} 'other':400")
        vectors.append(f"'blog':401 'login':{places(1, n)} 'logout':500")
        vectors.append(f"'log':600,601 'login':{places(1, n)}")
        vectors.append(f"'log':{places(1, n)} 'login':700 'logout':701,702,703")
    vectors += ["'other':1", "'blog':1,2 'lo':3", "'log':1"]
    for vector in vectors:
        counted = _hits(store, "pg_catalog.ts_rank_cd('{{1,1,1,1}}', r.tsv, {q})::float8", vector, "'log':*")
        assert _hits(store, PREFIX_HITS, vector, "'log':*") == counted, vector


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_prefix_counts_with_ts_rank_cd_only_rows_holding_two_of_its_lexemes(
        store_url: str, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Of ten rows of `log*`, two hold two of its lexemes (login, logout): ranking the question
    calls ts_rank_cd for those two alone (the code before: for all ten; counted by a ts_rank_cd
    of the test's schema, put before pg_catalog's), and ranks them as with pg_catalog's."""
    from nmem.store.postgres.tsquery import parse

    calls = notices(monkeypatch)
    store = open_store(store_url)
    try:
        store.ensure_session("s-prefix", "proj", T0)
        texts = ["login fails on the page", "the login page login again", "login", "login login login retry",
                 "cache miss after login", "login then logout", "a login loop", "logout before login login",
                 "login redirect", "the login form"]
        ids = [store.add_observation(NewObservation("s-prefix", "proj", T0 + i, "command", "PostToolUse", text,
                                                    tool_name="Bash")) for i, text in enumerate(texts)]
        store._exec(COUNTED_RANK_CD)  # type: ignore[attr-defined]
        before = store._bm25_newest("observations", parse("log*"), SearchFilters(), 10)  # type: ignore[attr-defined]
        schema = store._query("SELECT current_schema()")[0][0]  # type: ignore[attr-defined]
    finally:
        store.close()
    assert "nmem_test ts_rank_cd" not in calls   # pg_catalog's, first in the search path
    after = counted_newest(store_url, schema, "log*", 10)

    assert after == before
    assert sorted(i for i, _ in after) == sorted(ids)
    assert calls.count("nmem_test ts_rank_cd") == 2
