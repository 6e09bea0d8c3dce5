"""A NOT question, or one with a prefix, on PostgreSQL takes its newest matches from the kept
newest ids of a term every match holds (FOUND_RANGED's 'sieve' way): those ids' rows, tested
against the whole question, and, when they hold too few, the matches below the ids they prove
(a range, then the walk). It must rank exactly what the walk of the key ranks: with the kept
ids short of the window, with none of them matching, for a NOT of a word in every row, for a
prefix that matches nothing; and keep the guards of the kept ids (a term in too many rows gets
none; a read-only store takes kept ids and reads none)."""

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
         "logout after the cache refresh", "token refresh on the login page")
# the newest twelve rows hold the fifth text (logout and cache) twice in three, the first between:
# `logout NOT cache` finds none of its matches among logout's kept ids, `log* NOT cache` some


def _add(store: Store, n: int) -> list[int]:
    store.ensure_session("s-sieve", "proj", T0)
    ids = []
    for i in range(n):
        text = (TEXTS[4] if i % 3 else TEXTS[0]) if i >= n - 12 else TEXTS[i % len(TEXTS)]
        ids.append(store.add_observation(NewObservation("s-sieve", "proj", T0 + i, "command", "PostToolUse",
                                                        f"{text} step {i}", tool_name="Bash")))
    return ids


def _rows(plan: dict[str, Any], name: str) -> int | None:
    """The rows the CTE `name` gave in an EXPLAIN (ANALYZE, FORMAT JSON) plan, None when it did not run."""
    if plan.get("Subplan Name") == f"CTE {name}":
        return int(plan["Actual Rows"]) if plan.get("Actual Loops") else None
    for child in plan.get("Plans", ()):
        found = _rows(child, name)
        if found is not None:
            return found
    return None


def _sieved(plan: dict[str, Any]) -> bool:
    """Whether the kept ids' rows were read by id and sieved (the 'sieve' way)."""
    if plan.get("Alias") == "sv" and plan.get("Actual Loops"):
        return True
    return any(_sieved(child) for child in plan.get("Plans", ()))


def _ranked(store: Store, match: str, want: int = 3) -> tuple[list[tuple[int, float]], str]:
    """The best `want` of the question's newest matches, and the way that read them ('sieve',
    or 'other')."""
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    best = store._bm25_newest("observations", parse(match), SearchFilters(), want)  # type: ignore[attr-defined]
    sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                              SearchFilters(), want)
    plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
    return best, "sieve" if _sieved(plan) else "other"


def _newest(store: Store, match: str) -> list[int]:
    from nmem.store.postgres.tsquery import parse

    rows = store._query("SELECT id FROM observations WHERE tsv @@ to_tsquery('nmem', ?) "  # type: ignore[attr-defined]
                        "ORDER BY id DESC LIMIT ?", (str(parse(match).text), WINDOW))
    return [int(r[0]) for r in rows]


# (question, how many of its newest matches the sieved kept ids hold: all, some or none). A term
# in fewer rows than the window (zzzq*: none) has all its rows kept: the fetch of its matches off
# the GIN index reads no more rows, and each for less than by id, so it takes the ways before
FETCHED = ("login AND zzzq*",)
QUESTIONS = (("login NOT cache", "all"), ("log* NOT cache", "some"), ("logout NOT cache", "none"),
             ("token AND refresh*", "all"), ("(login OR cache) NOT redirect", "all"), ("login NOT step", "no match"),
             ("login AND zzzq*", "no match"), ("cache NOT (login OR logout)", "no match"))


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_not_or_a_prefix_ranks_the_sieved_kept_ids_as_the_walk_does(store: Store, engine: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)   # planned at every run, as past 10,000 rows
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 40)
    for match, held in QUESTIONS:
        assert search.sievable(search.parse(match)), match
        best, way = _ranked(store, match)
        assert way == ("other" if match in FETCHED else "sieve"), match
        assert best == walked(store, match, monkeypatch), match
        assert (not best) == (held == "no match"), match
        assert {i for i, _ in best} <= set(_newest(store, match)), match
    # as the kept ids are taken once kept (none read again), and with the rest below them walked
    until_listed(store, _ranked, "log* NOT cache", ("'log':*",))
    for margin in (1.2, 1e-6):
        monkeypatch.setattr(search, "SIEVE_MARGIN", margin)
        for match, _ in QUESTIONS:
            best, way = _ranked(store, match)
            assert way == ("other" if match in FETCHED else "sieve"), (match, margin)
            assert best == walked(store, match, monkeypatch), (match, margin)


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_sieved_ids_hold_what_they_prove_and_the_rest_comes_from_below(store: Store, engine: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 40)
    for match, held in QUESTIONS:
        sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                                  SearchFilters(), 3)
        plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
        sieved, near, far = (_rows(plan, name) or 0 for name in ("sieved", "near", "far"))
        newest = len(_newest(store, match))
        assert sieved + near + far == newest, match
        assert {"all": sieved == newest, "some": 0 < sieved < newest, "none": sieved == 0 < newest,
                "no match": newest == 0}[held], (match, sieved, newest)


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_term_in_too_many_rows_gets_no_ids_and_the_question_takes_another_way(
        store: Store, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 30)
    for _ in range(200):   # counted by a question that takes no ids
        store._bm25_newest("observations", search.parse("login AND page"), SearchFilters(), 3)  # type: ignore[attr-defined]
        if "login" in kept_lists(store):
            break
    assert kept_lists(store)["login"] is None
    monkeypatch.setattr(search, "LIST_ROWS", 3)
    for _ in range(3):
        best, way = _ranked(store, "login NOT cache")
        assert way == "other" and best == walked(store, "login NOT cache", monkeypatch)
    assert kept_lists(store)["login"] is None


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_read_only_store_sieves_kept_ids_and_reads_none(store: Store, store_url: str, engine: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store import open_store
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)
    _add(store, 30)
    until_listed(store, _ranked, "login NOT cache", ("login",))
    reader = open_store(store_url, readonly=True)
    try:
        best, way = _ranked(reader, "login NOT cache")   # kept by the writer: taken
        assert way == "sieve" and best == walked(store, "login NOT cache", monkeypatch)
        best, way = _ranked(reader, "redirect NOT cache")   # none kept: not read by a store that keeps none
        assert way == "other" and best == walked(store, "redirect NOT cache", monkeypatch)
    finally:
        reader.close()
    assert kept_lists(store).get("redirect") is None
