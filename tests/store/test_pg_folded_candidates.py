"""A ranking read filtered by dates sends the service's candidate queries (the rarest words' OR,
then the OR of every word, …) to PostgreSQL in one statement, and takes the first that finds a
row in the dates (`_folded_read`). It must find exactly what running the queries in turn finds:
the same candidates in the same order, their windows and texts, and the same query named."""

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
# "zebra" and "quartz" only in the first rows, before the dates asked; the others throughout
OLD = ("zebra login redirect fails", "quartz cache timeout on the login page", "zebra quartz token refresh")
TEXTS = ("the login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the cache when the token expires", "a redirect loop between login and logout",
         "login login login token", "why does the cache time out?")
DATED = SearchFilters(date_start=T0 + 100, date_end=T0 + 10_000)


def _fill(store: Store) -> None:
    store.ensure_session("s-old", "proj", T0)
    for i, text in enumerate(OLD):
        store.add_observation(NewObservation("s-old", "proj", T0 + i, "command", "PostToolUse", text, tool_name="Bash"))
        store.add_prompt("s-old", T0 + i, "user", text)
    for s in range(4):
        session = f"s-{s}"
        store.ensure_session(session, "proj", T0 + 200 + 1000 * s)
        for i in range(12):
            at = T0 + 200 + 1000 * s + 10 * i
            text = TEXTS[(s + i) % len(TEXTS)]
            store.add_observation(NewObservation(session, "proj", at, "command", "PostToolUse", text, tool_name="Bash"))
            store.add_prompt(session, at, "user" if i % 2 == 0 else "assistant", text)


def _read(store: Store, scope: str, queries: list[str], filters: SearchFilters = DATED) -> Candidates:
    stems = ["zebra", "quartz", "login", "cache", "token", "redirect"]
    return store.rank_candidates(scope, stems, lambda df: list(queries), filters, 5, 1, 2)


def _in_turn(store: Store, monkeypatch: pytest.MonkeyPatch, scope: str, queries: list[str]) -> Candidates:
    """The same read with the queries run one statement each (as before folding)."""
    with monkeypatch.context() as m:
        m.setattr(type(store), "_folds", staticmethod(lambda scope, queries, filters: []))
        return _read(store, scope, queries)


def _same(a: Candidates, b: Candidates) -> None:
    assert (a.match, a.ids, a.windows, a.texts) == (b.match, b.ids, b.windows, b.texts)
    assert sorted(a.records or {}) == sorted(b.records or {})
    assert a.stats == b.stats


QUESTIONS = [
    ['"zebra" OR "quartz"', '"zebra" OR "quartz" OR "login" OR "cache"'],   # the first finds nothing in the dates
    ['"cache" OR "token"', '"cache" OR "token" OR "zebra"'],                 # the first finds some
    ['"zebra" AND "login"', '"zebra"', '"zebra" OR "login"'],                # every word, the rarest, every word's OR
    ['"login" AND "cache"', '"cache"', '"login" OR "cache"'],
    ['"zebra"', '"quartz"'],                                                 # none finds any
    ['"zebra" OR "redirect"', '"zebra" OR "redirect" OR "redirect"'],        # a word asked twice
]


@pytest.mark.parametrize("engine", POSTGRES)
@pytest.mark.parametrize("scope", ["observations", "prompts"])
def test_a_folded_read_finds_what_the_queries_in_turn_find(store: Store, engine: str, scope: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store)
    expected = {0: '"zebra" OR "quartz" OR "login" OR "cache"', 1: '"cache" OR "token"', 2: '"zebra" OR "login"',
                3: '"login" AND "cache"', 4: '"quartz"', 5: '"zebra" OR "redirect"'}
    for n, queries in enumerate(QUESTIONS):
        folded = _read(store, scope, queries)
        _same(folded, _in_turn(store, monkeypatch, scope, queries))
        assert folded.match == expected[n], queries
        assert bool(folded.ids) == (n != 4), queries
        assert all(DATED.date_start <= folded.texts[i][2] <= DATED.date_end for i in folded.ids)  # type: ignore[operator]


@pytest.mark.parametrize("engine", POSTGRES)
@pytest.mark.parametrize("path", ["walk", "fetch", "neither", "first only"])
def test_walking_the_dates_or_reading_the_words_index_finds_the_same(store: Store, engine: str, path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Each query's matches in the dates are found by walking the dates' rows (fewer of them than
    # its words' counts bound its matches) or off the words' index (a low bound), or, when
    # neither suits, that query and the ones after it run in turn (after the first, read folded,
    # found nothing: "first only"): all give the same.
    from nmem.store.postgres import search

    _fill(store)
    walk, decided = "d.n < b.walk AS walk", "d.n < b.walk OR b.few OR d.n < {walk_rows} AS decided"
    assert walk in search.FOLDED_FOUND and decided in search.FOLDED_FOUND
    forced = {"walk": ("true", "true"), "fetch": ("false", "true"), "neither": ("false", "false"),
              "first only": ("b.i = 1", "b.i = 1")}[path]
    monkeypatch.setattr(search, "_FOLDED_SQL", {})   # texts kept by shape, built from the patched template
    monkeypatch.setattr(search, "FOLDED_FOUND", search.FOLDED_FOUND.replace(walk, f"{forced[0]} AS walk").replace(
        decided, f"{forced[1]} AS decided"))
    for queries in QUESTIONS:
        _same(_read(store, "observations", queries), _in_turn(store, monkeypatch, "observations", queries))


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_folded_read_ranks_each_candidate_as_its_query_alone_does(store: Store, engine: str) -> None:
    # A phrase of another query than the one that found the rows adds nothing to a score: the
    # candidates come in the order of the finding query's own read, which ranks only its words.
    _fill(store)
    for queries in QUESTIONS:
        folded = _read(store, "observations", queries)
        if folded.ids:
            alone = _read(store, "observations", [folded.match])
            assert (folded.ids, folded.match) == (alone.ids, alone.match), queries


def _ranking_runs(store: Store) -> list[tuple[str, int, int]]:
    """The ranking statements prepared on this connection, and how often each ran since with its
    generic plan and with a plan made for its values."""
    return [(str(r[0]), int(r[1]), int(r[2])) for r in store._query(  # type: ignore[attr-defined]
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%word_counts%' AND statement LIKE '%o.timestamp >= $%'")]


@pytest.mark.parametrize("engine", POSTGRES)
@pytest.mark.parametrize("large", [True, False])
def test_a_dated_read_whose_first_query_finds_nothing_is_one_statement(
        store: Store, engine: str, large: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Read back from the server: on one connection (psycopg prepares a statement run five times),
    # the dated searches ran one ranking statement each, not one a query; on a large table
    # (CUSTOM_PLAN_ROWS) with its generic plan, whose paths follow from the statement alone.
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4 if large else 10**9)
    _fill(store)
    queries = QUESTIONS[0]
    runs = 12
    with store.read_snapshot():  # type: ignore[attr-defined]   # one connection: every run on it
        found: list[Any] = [_read(store, "observations", queries) for _ in range(runs)]
        prepared = _ranking_runs(store)
    assert all(f.ids and f.match == queries[1] for f in found)
    assert len(prepared) == 1 and "picked AS MATERIALIZED" in prepared[0][0], prepared
    _, generic, custom = prepared[0]
    assert generic + custom >= runs - 5, prepared   # each run one execution of the one statement
    if large:
        assert generic >= runs - 5 and custom == 0, prepared


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_read_without_dates_still_runs_its_queries_in_turn(store: Store, engine: str) -> None:
    # Without dates the first query finds rows whenever its words are in the index (their counts
    # are the whole index's): folding would only add the later ones' phrases to every read.
    _fill(store)
    found = _read(store, "observations", ['"zebra" OR "quartz"', '"zebra" OR "login"'], SearchFilters())
    assert found.match == '"zebra" OR "quartz"' and len(found.ids) == 3
    with store.read_snapshot():  # type: ignore[attr-defined]
        for _ in range(7):
            _read(store, "observations", ['"zebra" OR "quartz"', '"zebra" OR "login"'], SearchFilters())
        folded = [s for s, _ in store._query(  # type: ignore[attr-defined]
            "SELECT statement, 0 FROM pg_prepared_statements WHERE statement LIKE '%picked AS MATERIALIZED%'")]
    assert not folded
