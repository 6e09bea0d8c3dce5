"""A term's newest ids kept beside its count on PostgreSQL (schema step 12, `word_counts.newest`):
a question of phrases joined by OR alone takes its newest matches from the union of its terms'
kept ids (FOUND_RANGED's 'kept' way). Kept ids must always be the term's newest: rows added past
them are read in, a count moved on carries them along (whatever question moved it), a delete
drops them; and the way must rank exactly the rows and scores the walk of the key ranks."""

from __future__ import annotations

from typing import Any

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from pg_kept_support import kept_lists, until_listed, walked
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
WINDOW = 5
TEXTS = ("login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the token when the login expires", "a redirect loop between login and logout",
         "logout after the cache refresh", "token refresh on the login page", "accounts and accounting")
# (question, its terms as kept: a word's lexeme, a phrase's or a prefix's tsquery text)
QUESTIONS = (("login OR cache", ("login", "cach")), ("redirect", ("redirect",)), ("acc*", ("'acc':*",)),
             ('"login page" OR logout', ("'login' <-> 'page'", "logout")), ("token OR token", ("token",)))


def _add(store: Store, n: int, start: int = 0) -> list[int]:
    store.ensure_session("s-kept", "proj", T0)
    return [store.add_observation(NewObservation("s-kept", "proj", T0 + start + i, "command", "PostToolUse",
                                                 f"{TEXTS[(start + i) % len(TEXTS)]} step {start + i}",
                                                 tool_name="Bash"))
            for i in range(n)]


def _newest(store: Store, term: str, up_to: int | None = None) -> list[int]:
    """A kept term's newest WINDOW ids (up to id `up_to`), read off the table (a word's lexeme
    is quoted)."""
    query = term if term.startswith("'") else f"'{term}'"
    rows = store._query("SELECT id FROM observations WHERE tsv @@ ?::tsquery AND id <= ? "  # type: ignore[attr-defined]
                        "ORDER BY id DESC LIMIT ?", (query, up_to or 2**62, WINDOW))
    return [int(r[0]) for r in rows]


def _by_key(plan: dict[str, Any]) -> bool:
    """Whether the ranked rows were read by their ids (the 'kept' way), not by their places."""
    if plan.get("Alias") == "z" and plan.get("Node Type") != "Tid Scan" and plan.get("Actual Rows"):
        return True
    return any(_by_key(child) for child in plan.get("Plans", ()))


def _ranked(store: Store, match: str, want: int = 3) -> tuple[list[tuple[int, float]], bool]:
    """The best `want` of the question's newest matches, and whether the 'kept' way read them."""
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    best = store._bm25_newest("observations", parse(match), SearchFilters(), want)  # type: ignore[attr-defined]
    sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                              SearchFilters(), want)
    plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
    return best, _by_key(plan)


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_kept_newest_ids_rank_as_the_walk_does(store: Store, engine: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 40)
    for match, terms in QUESTIONS:
        until_listed(store, _ranked, match, terms)
        lists = kept_lists(store)
        for term in terms:   # the newest WINDOW of each (all of a term in fewer rows)
            assert lists[term] == _newest(store, term), (match, term)
        best, kept = _ranked(store, match)
        assert kept and best and best == walked(store, match, monkeypatch), match

    # rows past the kept ids (fewer than WRITE_BACK_LAG: nothing written back) are read in
    more = _add(store, 9, start=40)
    before = kept_lists(store)
    for match, _ in QUESTIONS:
        best, kept = _ranked(store, match)
        assert kept and best == walked(store, match, monkeypatch), match
        assert {i for i, _ in best} & set(more), match   # the new rows are among the newest
    assert kept_lists(store) == before


@pytest.mark.parametrize("engine", POSTGRES)
def test_kept_ids_move_on_with_their_count_and_go_with_a_delete(store: Store, engine: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    ids = _add(store, 30)
    until_listed(store, _ranked, "login OR cache", ("login", "cach"))
    assert kept_lists(store)["login"] == _newest(store, "login")

    # a question that needs no ids (an AND) moves the counts on: the kept ids move with them
    monkeypatch.setattr(search, "WRITE_BACK_LAG", 0)
    _add(store, 6, start=30)
    for _ in range(200):
        store._bm25_newest("observations", search.parse("login AND token"), SearchFilters(), 3)  # type: ignore[attr-defined]
        kept = store._query("SELECT up_to FROM word_counts WHERE word = 'login'")  # type: ignore[attr-defined]
        if int(kept[0][0]) == max(ids) + 6:
            break
    lists = kept_lists(store)
    assert lists["login"] == _newest(store, "login") and lists["login"][0] > max(ids)
    # cache was not asked: its count and ids stay as they were, to the row they were taken at
    assert lists["cach"] == _newest(store, "cach", max(ids)) != _newest(store, "cach")
    best, kept_way = _ranked(store, "login OR cache")
    assert kept_way and best == walked(store, "login OR cache", monkeypatch)

    # a delete drops every kept count and id; the next search reads them again
    store.purge_observations([_newest(store, "login")[0]])
    assert kept_lists(store) == {}
    best, kept_way = _ranked(store, "login OR cache")
    assert kept_way and best == walked(store, "login OR cache", monkeypatch)


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_question_past_the_kept_ids_or_not_of_ors_alone_takes_another_way(
        store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 30)
    until_listed(store, _ranked, "login OR cache", ("login", "cach"))
    # more rows wanted than are kept (login is in more than WINDOW rows): not the kept ids
    best, kept = _ranked(store, "login OR cache", want=WINDOW + 3)
    assert not kept and best == walked(store, "login OR cache", monkeypatch, want=WINDOW + 3)
    for match in ("login AND cache", "login NOT cache", "NEAR(login page, 2)", "(login OR cache) AND token"):
        assert not search.disjunctive(search.parse(match)), match
        best, kept = _ranked(store, match)
        assert not kept and best == walked(store, match, monkeypatch), match


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_common_term_counted_already_gets_no_ids(store: Store, engine: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 30)
    for _ in range(200):   # counted by a question that takes no ids
        store._bm25_newest("observations", search.parse("token AND refresh"), SearchFilters(), 3)  # type: ignore[attr-defined]
        if "token" in kept_lists(store):
            break
    assert kept_lists(store)["token"] is None
    # past LIST_ROWS rows, its rows are not read again for ids: the question takes another way
    monkeypatch.setattr(search, "LIST_ROWS", 3)
    for _ in range(3):
        best, kept = _ranked(store, "token OR logout")
        assert not kept and best == walked(store, "token OR logout", monkeypatch)
    assert kept_lists(store)["token"] is None


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_read_only_store_takes_kept_ids_and_reads_none(store: Store, store_url: str, engine: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store import open_store
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 30)
    until_listed(store, _ranked, "login OR cache", ("login", "cach"))
    reader = open_store(store_url, readonly=True)
    try:
        best, kept = _ranked(reader, "login OR cache")   # kept by the writer: taken
        assert kept and best == walked(store, "login OR cache", monkeypatch)
        best, kept = _ranked(reader, "redirect OR logout")   # none kept: not read for a store that keeps none
        assert not kept and best == walked(store, "redirect OR logout", monkeypatch)
    finally:
        reader.close()
    assert kept_lists(store).get("redirect") is None
