"""PostgreSQL keeps each word's rows for every process (schema step 9, `word_counts`): BM25 reads
them instead of counting the word's rows off the GIN index again. A kept count must always be
the exact count: rows added past it are counted in, a delete drops the table's counts, and a
count is kept only when no row the search could not see can still commit below the ids it saw."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
T = TypeVar("T")
TEXTS = ("the login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the cache when the token expires", "a redirect loop between login and logout")


def _add(store: Store, n: int, start: int = 0) -> list[int]:
    store.ensure_session("s-counts", "proj", T0)
    return [store.add_observation(NewObservation("s-counts", "proj", T0 + start + i, "command", "PostToolUse",
                                                 TEXTS[(start + i) % len(TEXTS)], tool_name="Bash"))
            for i in range(n)]


def _kept(store: Store) -> dict[str, tuple[int, int, int]]:
    rows = store._query("SELECT word, rows, tokens, up_to FROM word_counts "  # type: ignore[attr-defined]
                        "WHERE tbl = 'observations'")
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def _truth(store: Store, word: str) -> int:
    rows = store._query("SELECT count(*) FROM observations WHERE tsv @@ to_tsquery('nmem', ?)",  # type: ignore[attr-defined]
                        (word,))
    return int(rows[0][0])


def _search(store: Store, match: str) -> list[Any]:
    return store.search("observations", match, SearchFilters(), "relevance", 10, 0)


def _until_kept(store: Store, action: Callable[[], T], *words: str) -> T:
    """`action` (a search) run until its words' counts are kept. A count is written back only when
    no transaction in flight at the statement's snapshot has ended since (SETTLED), and that list
    is the whole database's: another test process's writes can refuse a write-back, and a later
    run finds a quiet moment. Never more than 200 runs."""
    for _ in range(200):
        result = action()
        kept = _kept(store)
        if all(word in kept for word in words):
            return result
    raise AssertionError(f"counts of {words} never kept")


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_search_keeps_its_words_counts_and_the_totals(store: Store, engine: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "WRITE_BACK_LAG", 0)   # every new row moves the kept counts on
    ids = _add(store, 12)
    assert _until_kept(store, lambda: _search(store, "login OR cache"), "", "login", "cach")
    kept = _kept(store)
    assert kept["login"][0] == _truth(store, "login") and kept["cach"][0] == _truth(store, "cache")
    total = store._query("SELECT count(*), sum(tokens), max(id) FROM observations")[0]  # type: ignore[attr-defined]
    assert kept[""] == (int(total[0]), int(total[1]), int(total[2])) == (12, int(total[1]), ids[-1])

    more = _add(store, 5, start=12)
    stats = _until_kept(store, lambda: store.fts_stats("observations", ["login", "cach", "redirect"]), "redirect")
    assert stats.docs == 17 and stats.df == {w: _truth(store, w) for w in ("login", "cach", "redirect")}
    kept = _kept(store)
    assert kept["login"] == (_truth(store, "login"), 0, more[-1]) and kept[""][0] == 17


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_delete_drops_the_tables_counts_and_the_next_search_counts_again(store: Store, engine: str) -> None:
    ids = _add(store, 8)
    _until_kept(store, lambda: _search(store, "login"), "", "login")
    epoch = int(store._query("SELECT epoch FROM word_count_epochs WHERE tbl = 'observations'")[0][0])  # type: ignore[attr-defined]
    assert store.purge_observations([i for i in ids if "login" in TEXTS[(i - ids[0]) % len(TEXTS)]][:1]) == 1
    assert _kept(store) == {}
    assert int(store._query("SELECT epoch FROM word_count_epochs WHERE tbl = 'observations'")[0][0]) == epoch + 1  # type: ignore[attr-defined]
    stats = _until_kept(store, lambda: store.fts_stats("observations", ["login"]), "", "login")
    assert stats.docs == 7 and stats.df["login"] == _truth(store, "login")
    assert _kept(store)["login"][0] == _truth(store, "login")


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_delete_of_no_row_keeps_the_counts(store: Store, engine: str) -> None:
    _add(store, 4)
    _until_kept(store, lambda: _search(store, "login"), "", "login")
    before = _kept(store)
    assert store.purge_observations([10**9]) == 0
    assert _kept(store) == before


@pytest.mark.parametrize("engine", POSTGRES)
def test_counts_taken_before_a_delete_are_not_kept(store: Store, engine: str) -> None:
    ids = _add(store, 4)
    store.purge_observations(ids[:1])   # the epoch moves on: 1
    store._write_back("observations", 0, (99, 999, ids[-1]), [("login", 42)])  # type: ignore[attr-defined]
    assert _kept(store) == {}
    store._write_back("observations", 1, (3, 30, ids[-1]), [("login", 2)])  # type: ignore[attr-defined]
    assert _kept(store)["login"] == (2, 0, ids[-1])


@pytest.mark.parametrize("engine", POSTGRES)
def test_nothing_is_kept_while_a_writer_is_in_flight(store: Store, engine: str) -> None:
    """A writer holding a drawn id open: the search's counts are right for what it sees, but a
    count kept up to a higher id would miss the writer's row once it commits."""
    _add(store, 4)
    written, let_go = threading.Event(), threading.Event()

    def writer() -> None:
        with store.transaction():
            _add(store, 1, start=4)   # the lower id, still uncommitted
            written.set()
            let_go.wait(30)

    one = threading.Thread(target=writer)
    one.start()
    assert written.wait(30)
    try:
        _add(store, 1, start=5)   # a higher id, committed first
        assert store.fts_stats("observations", ["login"]).docs == 5
        assert _kept(store) == {}
    finally:
        let_go.set()
        one.join(30)
    stats = _until_kept(store, lambda: store.fts_stats("observations", ["login"]), "", "login")
    assert stats.docs == 6 and stats.df["login"] == _truth(store, "login")
    assert _kept(store)[""][0] == 6


@pytest.mark.parametrize("engine", POSTGRES)
@pytest.mark.parametrize("large", [True, False])
def test_on_a_large_table_the_statements_that_read_kept_counts_are_planned_for_their_values(
        store: Store, engine: str, large: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # psycopg prepares a statement after five runs on a connection and PostgreSQL may then keep
    # one generic plan for it: past CUSTOM_PLAN_ROWS the statements that read the kept counts are
    # still prepared (parsed once) but planned for their values at every run (a server's
    # connections each kept generic plans that doubled a search's cost at 100k rows,
    # docs/benchmarks/postgres.md); on a small store every one keeps its generic plan, prepared
    # at its first run (planning each run cost more than a generic plan loses there; main left
    # PostgreSQL to choose, which planned these at every run for their values). `fts_stats` (its words come as
    # arrays, no value its plan could follow) and a read without a filter (FOUND_RANGED: the
    # statement picks how its matches are read) keep their generic plans, the connection set
    # back to planning every run after them.
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4 if large else 10**9)
    _add(store, 8)
    project = SearchFilters(project="proj")
    with store.read_snapshot():  # type: ignore[attr-defined]   # one connection: every run on it
        for _ in range(12):
            assert _search(store, "login OR cache")
            assert _search(store, "log*")
            assert store.search("observations", "login OR cache", project, "relevance", 10, 0)
            assert store.fts_stats("observations", ["login", "token"]).docs == 8  # type: ignore[attr-defined]
        prepared = [(str(r[0]), int(r[1]), int(r[2])) for r in store._query(  # type: ignore[attr-defined]
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")]
        mode = store._query("SHOW plan_cache_mode")[0][0]  # type: ignore[attr-defined]
    kept = [p for p in prepared if "word_counts" in p[0]]
    for marker in ("choice AS MATERIALIZED", "ts_rank_cd(", "unnest($1::text[], $2::text[])", "o.project = $"):
        assert [p for p in kept if marker in p[0]], f"{marker}: prepared on every table"
    assert mode == ("force_custom_plan" if large else "force_generic_plan")
    if not large:
        assert all(c == 0 and g >= 6 for _, g, c in kept), kept
    if large:
        generic = [p for p in kept if "unnest($1::text[], $2::text[])" in p[0] or "matching AS MATERIALIZED" in p[0]]
        assert len(generic) == 3 and all(g >= 6 and c == 0 for _, g, c in generic), generic
        planned = [p for p in kept if p not in generic]
        assert planned and all(g == 0 and c >= 6 for _, g, c in planned), kept


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_read_filtered_by_dates_alone_keeps_a_generic_plan_once_its_words_bound_its_matches(
        store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past CUSTOM_PLAN_ROWS a ranking read is planned for its values at every run, except one that
    # dates alone filter and whose words' counts (from its last run) bound its matches below
    # fetch_bound: its plan ANDs the GIN index with the time index whatever the values, so it keeps
    # a generic plan (planning is most of such a search's cost). Same rows either way; a phrase
    # (its words bound nothing) stays planned at every run; a read without a filter keeps its
    # generic plan (FOUND_RANGED: the statement picks how its matches are read).
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    ids = _add(store, 16)
    dated = SearchFilters(date_start=T0 + 3, date_end=T0 + 12)
    questions = ("login OR cache", "token AND refresh", '"login page"')

    def read(match: str, filters: SearchFilters = dated) -> tuple[list[int], Any, list[int]]:
        found = store.rank_candidates("observations", [], lambda df: [match], filters, 10, 1, 1)
        return found.ids, found.windows, sorted(found.texts)

    planned = {match: read(match) for match in questions}   # no bound known yet: planned for its values
    truth = {i for n, i in enumerate(ids) if 3 <= n <= 12 and ("login" in TEXTS[n % 4] or "cache" in TEXTS[n % 4])}
    assert set(planned["login OR cache"][0]) == truth
    assert set(planned["token AND refresh"][0]) == {i for n, i in enumerate(ids) if 3 <= n <= 12 and n % 4 in (0, 2)}
    with store.read_snapshot():  # type: ignore[attr-defined]   # one connection: every run on it
        for _ in range(8):
            for match in questions:
                assert read(match) == planned[match], match
            assert read("login OR cache", SearchFilters())[0]
        prepared = [(str(r[0]), int(r[1]), int(r[2])) for r in store._query(  # type: ignore[attr-defined]
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%word_counts%'")]
    dated_words = [p for p in prepared if "o.timestamp >= $" in p[0] and " AS nq" not in p[0]]
    dated_phrase = [p for p in prepared if "o.timestamp >= $" in p[0] and " AS nq" in p[0]]
    undated = [p for p in prepared if "o.timestamp >= $" not in p[0] and "choice AS MATERIALIZED" in p[0]]
    assert dated_words and all(generic > 0 and custom == 0 for _, generic, custom in dated_words), dated_words
    assert dated_phrase and all(generic == 0 for _, generic, _ in dated_phrase), dated_phrase
    assert undated and all(generic > 0 and custom == 0 for _, generic, custom in undated), undated


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_read_filtered_by_dates_whose_words_bound_too_many_matches_is_planned_at_every_run(
        store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A wide range of many matches is read best by walking the key, which only a plan made for the
    # dates and words picks: past the bound, and with more rows in the dates than a walk of them
    # takes (WALK_ROWS, `_folded_read`), the read is planned at every run.
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "fetch_bound", lambda docs: 1)
    monkeypatch.setattr(search, "WALK_ROWS", 0)
    _add(store, 16)
    dated = SearchFilters(date_start=T0 + 3, date_end=T0 + 12)
    with store.read_snapshot():  # type: ignore[attr-defined]
        for _ in range(8):
            assert store.rank_candidates("observations", [], lambda df: ["login OR cache"], dated, 10, 1, 1).ids
        prepared = [(int(r[0]), int(r[1])) for r in store._query(  # type: ignore[attr-defined]
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%word_counts%' AND statement LIKE '%o.timestamp >= $%' "
            "AND statement NOT LIKE '%picked AS MATERIALIZED%'")]
    assert prepared and all(generic == 0 and custom > 0 for generic, custom in prepared), prepared
