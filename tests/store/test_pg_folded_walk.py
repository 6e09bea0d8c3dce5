"""A ranking read filtered by dates (`_folded_read`) finds each query's rows in the dates by
walking the dates' rows and testing each, or off the words' index ANDed with the dates. It walks
when the dates hold fewer rows than the words' index would pass / WALK_COST: the rarest word's
rows for an AND, the sum of the words' for an OR. A GIN posting costs about 0.3 µs, a walked row
about 0.7 µs (2.5 postings; 30 was assumed, measured where GIN skipped most postings of an AND).

The read must rank as before, whichever way it takes: the same candidates, ids and scores (the
statement's own ranks, compared exactly), windows, texts and query, for few matches in the dates
and many. And a word in 25 times the dates' rows is now walked: the words' index is never read.
"""

from __future__ import annotations

from typing import Any

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import Candidates, SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
OLD_ROWS = 1500   # before the dates: "bravo" and "build" in every one, "alpha" and "echo" only here
DATED_ROWS = 60   # in the dates: "bravo" in every other one, "delta" in most, "charlie" in three
DATED = SearchFilters(date_start=T0 + OLD_ROWS * 60, date_end=T0 + (OLD_ROWS + DATED_ROWS) * 60)
STEMS = ["alpha", "bravo", "build", "charlie", "delta", "echo"]

# The choice as it was: the sum of the words' rows / 30, for an AND as for an OR
OLD_PATHS = """bounds AS MATERIALIZED (
    SELECT i, walk, few, CASE WHEN few THEN walk ELSE {walk_rows} END AS cap FROM (
        SELECT b.i, LEAST((COALESCE(sum(tm.df), 0) / {walk_cost})::bigint, {walk_rows}) AS walk,
               COALESCE(CASE b.how WHEN 'and' THEN min(tm.df) WHEN 'or' THEN sum(tm.df) END < ?::bigint, false) AS few
        FROM unnest(?::text[]) WITH ORDINALITY AS b(how, i)
        LEFT JOIN keyed k ON (?::int[])[k.ord] = b.i LEFT JOIN terms tm ON tm.term = k.term
        GROUP BY b.i, b.how) AS q
)"""


def _text(n: int, dated: bool) -> str:
    if not dated:
        return f"bravo build step {n % 7} " + ("alpha cache" if n % 3 == 0 else "echo token" if n % 3 == 1 else "log")
    words = ["bravo" if n % 2 == 0 else "build", "delta" if n % 5 else "step", f"token {n % 4}"]
    if n in (1506, 1522, 1540):
        words.append("charlie")
    return " ".join(words)


def _fill(store: Store) -> None:
    with store.transaction():  # type: ignore[attr-defined]
        for n in range(OLD_ROWS + DATED_ROWS):
            session = f"s-{n // 20}"
            at = T0 + n * 60 + 30
            if n % 20 == 0:
                store.ensure_session(session, "proj", at)
            store.add_observation(NewObservation(session, "proj", at, "command", "PostToolUse",
                                                 _text(n, n >= OLD_ROWS), tool_name="Bash"))


# (the service's candidate queries, the one expected to find the candidates: 0 none)
QUESTIONS = [
    (['"bravo"'], 1),                                                    # many matches: walked now
    (['"bravo" OR "charlie"'], 1),                                       # many, an OR: walked now
    (['"charlie"', '"charlie" OR "bravo"'], 1),                          # few: the words' index
    (['"bravo" AND "charlie"', '"charlie"', '"bravo" OR "charlie"'], 1),  # few, an AND of a common word
    (['"bravo" AND "delta"', '"delta"', '"bravo" OR "delta"'], 1),       # many, ANDed
    (['"build" AND "bravo"'], 0),                                        # walked, and none in the dates
    (['"alpha"', '"alpha" OR "bravo"'], 2),                              # the first finds none in the dates
    (['"alpha" AND "echo"', '"echo"', '"alpha" OR "charlie"'], 3),       # nor the second; few matches
    (['"alpha"', '"echo"'], 0),                                          # none finds any
]


def _read(store: Store, monkeypatch: pytest.MonkeyPatch, old: bool,
          queries: list[str]) -> tuple[Candidates, list[tuple[int, float]], list[tuple[str, Any]]]:
    """The read (with the choice as it was, when `old`), the (id, rank) rows of its last ranking
    statement, and every ranking statement it ran with its parameters."""
    from nmem.store.postgres import search

    ranks: list[tuple[int, float]] = []
    sent: list[tuple[str, Any]] = []
    original = store._query_kept  # type: ignore[attr-defined]

    def kept(table: str, sql: str, params: Any, generic: bool = False) -> list[Any]:
        rows = original(table, sql, params, generic)
        if "\nSELECT 0 AS kind" in sql:
            sent.append((sql, params))
            ranks[:] = [(int(r[1]), float(r[2])) for r in rows if r[0] == 1]
        return rows

    with monkeypatch.context() as m:
        # the statement's text is kept once a process by its shape (`_FOLDED_SQL`), which does not
        # name the templates: each read here builds it from the templates in place, old or new
        m.setattr(search, "_FOLDED_SQL", {})
        if old:
            m.setattr(search, "FOLDED_PATHS", OLD_PATHS)
            m.setattr(search, "WALK_COST", 30)
        m.setattr(store, "_query_kept", kept)
        found = store.rank_candidates("observations", STEMS, lambda df: list(queries), DATED, 5, 1, 2)
    return found, ranks, sent


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_dated_read_ranks_as_it_did(store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store)
    for queries, finder in QUESTIONS:
        new, new_ranks, new_sent = _read(store, monkeypatch, False, queries)
        old, old_ranks, old_sent = _read(store, monkeypatch, True, queries)
        assert [sql for sql, _ in new_sent] != [sql for sql, _ in old_sent], queries   # two choices compared
        assert (new.match, new.ids, new.windows, new.texts) == (old.match, old.ids, old.windows, old.texts), queries
        assert sorted(new.records or {}) == sorted(old.records or {}) and new.stats == old.stats
        assert new_ranks == old_ranks and len(new_ranks) == len(new.ids), queries   # ids and scores, exactly
        assert new.match == (queries[finder - 1] if finder else queries[-1]), queries
        assert bool(new.ids) == bool(finder), queries
        assert all(DATED.date_start <= new.texts[i][2] <= DATED.date_end for i in new.ids)  # type: ignore[operator]
    assert len(_read(store, monkeypatch, False, QUESTIONS[0][0])[0].ids) == 5       # many matches (want 5)
    assert len(_read(store, monkeypatch, False, QUESTIONS[2][0])[0].ids) == 3       # and few


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", ()) for node in _nodes(child))]


def _ways(store: Store, monkeypatch: pytest.MonkeyPatch, queries: list[str]) -> tuple[int, int]:
    """How the read's one statement found its rows, from its plan run (EXPLAIN ANALYZE): the rows
    its walks of the dates tested, and the times it took the other way (the words' index)."""
    _, _, sent = _read(store, monkeypatch, False, queries)
    assert len(sent) == 1 and "picked AS MATERIALIZED" in sent[0][0]
    sql, params = sent[0]
    explained = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0]  # type: ignore[attr-defined]
    nodes = _nodes(explained[0]["Plan"])
    # the walks test each row with the query made once (a sub-select: `$n`) by ts_match_vq,
    # which no index serves; the other way asks `tsv @@ $n`, off the words' index on a large
    # table (the kept counts' own reads of a word, `(w.query)::tsquery`, are not the dates')
    walked = sum(int(n["Actual Rows"]) + int(n.get("Rows Removed by Filter", 0)) for n in nodes
                 if "ts_match_vq(tsv, $" in n.get("Filter", "") and int(n["Actual Loops"]))
    read = sum(int(n["Actual Loops"]) for n in nodes
               if any("tsv @@ $" in n.get(key, "") for key in ("Index Cond", "Recheck Cond", "Filter")))
    return walked, read


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_word_in_many_rows_is_walked_in_the_dates(store: Store, engine: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # "bravo" is in 1,530 rows, 25 times the dates' 60: the walk (60 rows tested) costs less
    # than its 1,530 postings; an AND with "charlie" (3 rows) reads the words' index (3 postings).
    _fill(store)
    assert _ways(store, monkeypatch, ['"bravo"']) == (DATED_ROWS, 0)
    assert _ways(store, monkeypatch, ['"bravo" OR "charlie"']) == (DATED_ROWS, 0)
    walked, read = _ways(store, monkeypatch, ['"bravo" AND "charlie"', '"charlie"', '"bravo" OR "charlie"'])
    assert walked == 0 and read >= 1
