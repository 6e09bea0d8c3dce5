"""A connection keeps the plan mode (`plan_cache_mode`) its last statement needed, and a SET goes
out only before a statement that needs another (nmem.store.postgres.connection `_planned`): a run
of ranking reads on their generic plans is one statement each, where each was sent between a SET
to generic plans and one back. Counted off libpq's own trace of what the client sent."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nmem.store import NewObservation
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
TEXTS = ("the login redirect fails after the token refresh", "cache timeout on the login page",
         "refresh the cache when the token expires", "a redirect loop between login and logout")


def _add(store: Store, n: int) -> list[int]:
    store.ensure_session("s-modes", "proj", T0)
    return [store.add_observation(NewObservation("s-modes", "proj", T0 + i, "command", "PostToolUse",
                                                 TEXTS[i % len(TEXTS)], tool_name="Bash")) for i in range(n)]


def _search(store: Store, match: str) -> list[Any]:
    return store.search("observations", match, SearchFilters(), "relevance", 10, 0)


@contextlib.contextmanager
def _traced(conns: Sequence[Any], where: Path) -> Iterator[Counter[str]]:
    """What the client sends on `conns` (libpq's trace): `statements` run (an Execute of the
    extended protocol, a simple Query), and `sets` of them setting `plan_cache_mode`."""
    from psycopg import pq

    files = []
    for i, conn in enumerate(conns):
        out = (where / f"trace-{i}.txt").open("w")
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        files.append(out)
    sent: Counter[str] = Counter()
    try:
        yield sent
    finally:
        for conn, out in zip(conns, files, strict=True):
            conn.pgconn.untrace()
            out.close()
        for out in files:
            for line in Path(out.name).read_text().splitlines():
                parts = line.split("\t")
                if len(parts) < 3 or parts[0] != "F":
                    continue
                if parts[2] in ("Execute", "Query"):
                    sent["statements"] += 1
                if parts[2] in ("Parse", "Query") and "SET" in line and "plan_cache_mode" in line:
                    sent["sets"] += 1


def _pooled(store: Store) -> list[Any]:
    """Every connection the store's pool holds (given back at once: only their trace is wanted)."""
    pool = store._pool  # type: ignore[attr-defined]
    held = [pool.getconn() for _ in range(max(1, store.pool_stats()["pool_size"]))]  # type: ignore[attr-defined]
    for conn in held:
        pool.putconn(conn)
    return held


def _large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past CUSTOM_PLAN_ROWS a ranking read without a filter runs its generic plan (GENERIC_PLANS)."""
    from nmem.store.postgres import search

    monkeypatch.setattr(search, "CUSTOM_PLAN_ROWS", 4)


@pytest.mark.parametrize("engine", POSTGRES)
def test_ranking_reads_in_a_row_send_no_set_between_them(store: Store, engine: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    _large(monkeypatch)
    _add(store, 8)
    for _ in range(2 * POOL_TRIES):   # the counts kept (no write-back beside the reads), every connection set
        assert _search(store, "login OR cache")
    with _traced(_pooled(store), tmp_path) as sent:
        for _ in range(5):
            assert _search(store, "login OR cache")
    # one statement a search, as the connection was left by the search before (main sent three:
    # SET plan_cache_mode = force_generic_plan, the read, SET plan_cache_mode = force_custom_plan)
    assert sent == Counter(statements=5)


POOL_TRIES = 8   # POOL_MAX: a single thread's reads take the pool's connections in turn


@pytest.mark.parametrize("engine", POSTGRES)
def test_in_a_snapshot_one_set_local_serves_every_read_after_it(store: Store, engine: str,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    _large(monkeypatch)
    _add(store, 8)
    for _ in range(3):
        assert _search(store, "login OR cache")
    with store.read_snapshot():  # type: ignore[attr-defined]
        conn = store._held.snap  # type: ignore[attr-defined]
        with _traced([conn], tmp_path) as sent:
            for _ in range(5):
                assert _search(store, "login OR cache")
            mode = store._query("SHOW plan_cache_mode")[0][0]  # type: ignore[attr-defined]
    # a SET LOCAL before the first read (whatever the connection's own mode), none after it until
    # a read that needs another (SHOW, with no mode of its own: never on a generic plan left by
    # another); main sent a SET before and after each read (15 statements for the five)
    assert sent["statements"] - sent["sets"] == 6
    assert sent["sets"] <= 2
    assert mode == "force_custom_plan"


@pytest.mark.parametrize("engine", POSTGRES)
def test_the_mode_a_connection_is_known_in_is_its_own(store: Store, engine: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An equivalence guard (main kept no such record): after generic reads, a write transaction
    (SET LOCAL, committed or rolled back) and a read of rows by key, the mode each pooled
    connection is recorded in is the one PostgreSQL reports for it, and a statement with no mode
    of its own never runs on a generic plan another left."""
    from nmem.store.postgres import connection

    _large(monkeypatch)
    ids = _add(store, 8)
    for _ in range(4):
        assert _search(store, "login OR cache")
    with store.transaction():  # type: ignore[attr-defined]
        assert store._query("SHOW plan_cache_mode")[0][0] == "force_custom_plan"  # type: ignore[attr-defined]
        store._exec("UPDATE observations SET is_pinned = 1 WHERE id = ?", (ids[0],))  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError), store.transaction():  # type: ignore[attr-defined]
        assert _search(store, "login OR cache")
        raise RuntimeError("rolled back")
    assert [o.id for o in store.get_observations(ids[:2])] == ids[:2]
    assert store._query("SHOW plan_cache_mode")[0][0] != "force_generic_plan"  # type: ignore[attr-defined]
    for conn in _pooled(store):
        actual = str(conn.execute("SHOW plan_cache_mode").fetchone()[0])
        assert connection._MODES.get(conn, "auto") == actual
