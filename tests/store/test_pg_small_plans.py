"""A small store (no table it ranks past CUSTOM_PLAN_ROWS) runs its ranking reads on their generic
plans and every other statement in the mode its connection is in (connection.ANY_PLANS): each
pooled connection goes to generic plans once and stays, so a search's statements are planned once a
connection, not at every run, and no SET goes out between them whatever reads, writes and
searches of other scopes come in between. Counted off libpq's own trace and PostgreSQL's own
`pg_prepared_statements` on the real server."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_pg_plan_modes import POOL_TRIES, _pooled, _traced

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import NewMemory, SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
TEXTS = ("the login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the cache when the token expires", "a redirect loop between login and logout")


def _observe(store: Store, i: int) -> int:
    return store.add_observation(NewObservation("s-small", "proj", T0 + i, "command", "PostToolUse",
                                                TEXTS[i % len(TEXTS)], tool_name="Bash"))


def _fill(store: Store, n: int) -> list[int]:
    store.ensure_session("s-small", "proj", T0)
    ids = [_observe(store, i) for i in range(n)]
    for i in range(3):
        with store.transaction():  # type: ignore[attr-defined]
            store.insert_memory(NewMemory(uid=uuid.uuid4().hex, domain="user", namespace="notes",  # type: ignore[attr-defined]
                                          summary=f"login cache note {i}", content=TEXTS[i], timestamp=T0 + i))
    return ids


def _round(store: Store, ids: list[int], n: int) -> None:
    """What a team server's searches and writes send: a ranked read of observations, the curated
    scopes (memories and sessions, not seen by a viewer: their own generic statements), a write,
    a page's rows by key."""
    assert store.search("observations", "login OR cache", SearchFilters(), "relevance", 10, 0)
    assert store.search("observations", "token", SearchFilters(project="proj"), "relevance", 10, 0)
    found = store.search_curated(["memories", "sessions"], ["login"], SearchFilters(), 10)  # type: ignore[attr-defined]
    assert found["memories"][0]
    ids.append(_observe(store, n))
    assert [o.id for o in store.get_observations(ids[:3])] == ids[:3]


def _modes(store: Store) -> list[str]:
    return [str(conn.execute("SHOW plan_cache_mode").fetchone()[0]) for conn in _pooled(store)]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_small_store_keeps_its_connections_on_generic_plans_and_sends_no_set(
        store: Store, engine: str, tmp_path: Path) -> None:
    ids = _fill(store, 12)
    for n in range(2 * POOL_TRIES):   # every pooled connection has served a round
        _round(store, ids, 100 + n)
    with _traced(_pooled(store), tmp_path) as sent:
        for n in range(6):
            _round(store, ids, 200 + n)
    # main: the curated scopes' generic statement sent SET plan_cache_mode = force_generic_plan
    # and the next statement SET plan_cache_mode = force_custom_plan, on every connection in turn
    assert sent["statements"] > 6 * 5
    assert sent["sets"] == 0, sent
    # main left the other connections in PostgreSQL's `auto` (the ranked reads planned for their
    # values at every run) or custom plans
    assert set(_modes(store)) == {"force_generic_plan"}


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_small_stores_ranking_reads_are_planned_once_a_connection(store: Store, engine: str) -> None:
    ids = _fill(store, 12)
    _round(store, ids, 100)   # the tables' rows counted: the store knows it is small
    with store.read_snapshot():  # type: ignore[attr-defined]   # one connection: every run on it
        for _ in range(8):
            assert store.search("observations", "login OR cache", SearchFilters(), "relevance", 10, 0)
            assert store.search("observations", "token", SearchFilters(project="proj"), "relevance", 10, 0)
            assert store.search_curated(["memories", "sessions"], ["login"],  # type: ignore[attr-defined]
                                        SearchFilters(), 10)["memories"][0]
        prepared = [(str(r[0]), int(r[1]), int(r[2])) for r in store._query(  # type: ignore[attr-defined]
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")]
    ranking = [p for p in prepared if p[0].lstrip().startswith("WITH")]   # reads of the words' counts
    assert len(ranking) >= 3, [" ".join(p[0].split())[:60] for p in prepared]
    # main: PostgreSQL's `auto` planned each for its values at its first five runs at least
    assert all(custom == 0 and generic >= 1 for _, generic, custom in ranking), [p[1:] for p in ranking]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_store_grown_past_the_bound_plans_as_a_large_one(store: Store, engine: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An equivalence guard (main passes it too): once a table is known past CUSTOM_PLAN_ROWS the
    store's statements with no mode of their own never run on a generic plan another left, and
    its filtered ranking reads are planned for their values again."""
    from nmem.store.postgres import search

    ids = _fill(store, 12)
    for n in range(POOL_TRIES):
        _round(store, ids, 100 + n)
    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)
    for n in range(2 * POOL_TRIES):   # the totals read again, then every connection serves a round
        _round(store, ids, 200 + n)
    assert store._query("SHOW plan_cache_mode")[0][0] == "force_custom_plan"  # type: ignore[attr-defined]
    with store.read_snapshot():  # type: ignore[attr-defined]
        for _ in range(3):
            assert store.search("observations", "token", SearchFilters(project="proj"), "relevance", 10, 0)
        prepared: list[Any] = store._query(  # type: ignore[attr-defined]
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%o.project = $%'")
    assert prepared and all(int(r[1]) >= 1 for r in prepared), prepared


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_small_store_opens_its_connections_on_generic_plans(store: Store, engine: str, store_url: str,
                                                              tmp_path: Path) -> None:
    """A store opened on a small schema knows it is small before any search (`_size_up`): every
    connection its pool makes is set to generic plans as it is made, so its first searches, on
    connections none of its searches used before, send no SET (main: each in `auto` until a
    read asked otherwise)."""
    from nmem.store import open_store

    ids = _fill(store, 12)
    opened = open_store(store_url)
    try:
        opened.reserve_connections(4, ready=4)  # type: ignore[attr-defined]
        # the pool opens them in the background: a connection it adds later would go untraced
        deadline = time.monotonic() + 30
        while opened.pool_stats()["pool_size"] < 4 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.02)
        conns = _pooled(opened)
        assert len(conns) >= 4
        assert set(_modes(opened)) == {"force_generic_plan"}
        with _traced(conns, tmp_path) as sent:
            for n in range(3):
                _round(opened, ids, 300 + n)
        assert sent["statements"] > 3 * 5
        assert sent["sets"] == 0, sent
    finally:
        opened.close()
