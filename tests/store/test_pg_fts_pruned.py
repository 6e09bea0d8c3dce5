"""A question of several terms joined by OR takes its newest matches from the terms' kept ids on
PostgreSQL (FOUND_RANGED's 'kept' way); of those, only the rows whose score can still reach the
page have their vectors read (PRUNED_ROWS): a row lacking the rare term scores below 2.2 × the
common term's IDF, under the page's last row that holds the rare one. The rows read are counted
off EXPLAIN ANALYZE (on the old code every row of the window was read by id), and the ranking is
the whole window's: the same ids and scores as the walk of the key and the unpruned 'kept' way,
for every page size, whether the first rows proved the page or the rest had to be read too."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
WINDOW = 20   # RELEVANCE_WINDOW here: the newest 20 matches are ranked
QUESTIONS = ("login OR cache", "cache OR login", "login OR cache OR timeout", "login OR login OR cache",
             '"login page" OR cache', "log* OR cache", "login OR deploy", "cache OR warmup")
WANTS = (1, 3, 10, 25)


def _add(store: Store) -> dict[str, list[int]]:
    """login in most rows, cache in a few (some with login), deploy in others; newest last."""
    store.ensure_session("s-pruned", "proj", T0)
    ids: dict[str, list[int]] = {"login": [], "cache": []}
    for i in range(90):
        if i % 9 == 4:
            text = f"cache timeout on the login page step {i}"
        elif i % 13 == 7:
            text = f"cache warmup finished step {i}"
        elif i % 3 == 2:
            text = f"deploy the service again step {i}"
        else:
            text = f"login page redirect after the token refresh, login again step {i}" if i % 4 else \
                f"login fails step {i}"
        oid = store.add_observation(NewObservation("s-pruned", "proj", T0 + i, "command", "PostToolUse", text,
                                                   tool_name="Bash"))
        for word, holding in ids.items():
            if word in text:
                holding.append(oid)
    return ids


def _ran(plan: dict[str, Any], name: str) -> bool:
    """Whether the CTE `name` ran in an EXPLAIN (ANALYZE, FORMAT JSON) plan."""
    if plan.get("Subplan Name") == f"CTE {name}":
        return bool(plan.get("Actual Loops"))
    return any(_ran(child, name) for child in plan.get("Plans", ()))


def _read_by_id(plan: dict[str, Any]) -> int:
    """The rows the statement read by their ids or places (alias z; z_1, z_2, … as EXPLAIN names
    the others), over every loop: for the 'kept' way, its rows of the window."""
    mine = re.fullmatch(r"z(_\d+)?", str(plan.get("Alias", "")))
    own = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 0)) if mine else 0
    return own + sum(_read_by_id(child) for child in plan.get("Plans", ()))


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)   # planned as past 10,000 rows
    monkeypatch.setattr(search, "RELEVANCE_WINDOW", WINDOW)


@pytest.mark.parametrize("engine", POSTGRES)
def test_an_or_reads_only_the_rows_that_can_reach_the_page(store: Store, engine: str, small_window: None) -> None:
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    ids = _add(store)
    match = "login OR cache"
    newest = sorted(set(ids["login"]) | set(ids["cache"]), reverse=True)[:WINDOW]
    with_cache = [i for i in newest if i in ids["cache"]]
    assert 3 <= len(with_cache) < WINDOW // 2
    store.search_observations(match, SearchFilters(), "relevance", 3, 0)   # the terms' newest ids kept
    sql, params = store._bm25(search.BM25_IDS_SQL, "observations", parse(match),  # type: ignore[attr-defined]
                              SearchFilters(), 3)
    plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
    # the window's rows holding cache, not its 20 (a row of login alone scores under 2.2 × login's IDF)
    assert _read_by_id(plan) == len(with_cache)


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_pruned_ranking_is_the_whole_windows(store: Store, engine: str, small_window: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Equivalence guard: for each question and page size, the pruned 'kept' way (with its level
    chosen as the store chooses it, and forced to the highest level, so that the first rows often
    prove too little and the rest are read) ranks exactly what the unpruned way and the walk do."""
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    _add(store)
    for match in QUESTIONS:
        store.search_observations(match, SearchFilters(), "relevance", 3, 0)   # the terms' newest ids kept
    disjunctive, pruned = search.disjunctive, search.pruned
    ways = {"pruned": (disjunctive, pruned, 2.2), "pruned from the highest level": (disjunctive, pruned, 0.0),
            "kept": (disjunctive, lambda parsed: False, 2.2),
            "walk": (lambda parsed: False, lambda parsed: False, 2.2)}
    ranked: dict[str, dict[tuple[str, int], list[tuple[int, float]]]] = {}
    read: dict[str, dict[tuple[str, int], int]] = {}
    first: dict[str, dict[tuple[str, int], bool]] = {}   # whether the first rows were ranked apart
    for way, (lists, prune, likely) in ways.items():
        monkeypatch.setattr(search, "disjunctive", lists)
        monkeypatch.setattr(search, "pruned", prune)
        monkeypatch.setattr(search, "PRUNE_LIKELY", likely)
        ranked[way], read[way], first[way] = {}, {}, {}
        for match in QUESTIONS:
            for want in WANTS:
                ranked[way][(match, want)] = store._bm25_newest(  # type: ignore[attr-defined]
                    "observations", parse(match), SearchFilters(), want)
                sql, params = store._bm25(search.BM25_IDS_SQL, "observations",  # type: ignore[attr-defined]
                                          parse(match), SearchFilters(), want)
                plan = store._query("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)[0][0][0]["Plan"]  # type: ignore[attr-defined]
                read[way][(match, want)] = _read_by_id(plan)
                first[way][(match, want)] = _ran(plan, "pre")
    for key, best in ranked["walk"].items():
        assert best, key
        assert all(ranked[way][key] == best for way in ways), (key, {w: ranked[w][key] for w in ways})
    # each way reads a row of the window once at most; the pruned ones fewer for some questions,
    # and where the first rows proved too little, the rest after them (every row of the window)
    kept = [key for key, n in read["kept"].items() if n and key[1] <= WINDOW]   # (more wanted: another way)
    assert kept and all(read["kept"][key] <= WINDOW for key in kept)
    assert all(read[way][key] <= read["kept"][key] for way in ways for key in kept)
    assert any(read["pruned"][key] < read["kept"][key] for key in kept)
    highest = "pruned from the highest level"
    assert any(first[highest][key] and read[highest][key] == read["kept"][key] for key in kept)
    assert not any(first["kept"].values())
