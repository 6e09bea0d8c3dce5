"""PostgreSQL keeps the sessions' and memories' totals (schema step 13, `table_totals`): every write
to them adds what it changed in its own transaction, and a ranked search sums those few rows
instead of scanning the table. The sums must always be the table's own (rows, tokens), `writes`
must move whenever a row's words change (the words' counts each process keeps are keyed by it),
and the ranking must be the one a search that counts everything afresh gives."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from nmem.store import open_store
from nmem.store.postgres.schema import MIGRATIONS
from nmem.store.protocol import Store
from nmem.store.records import NewMemory, SearchFilters
from store_engines import ENGINES, pg_unavailable, schema_url

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000
TABLES = ("sessions", "memories")


def _kept(store: Store, table: str) -> tuple[int, int, int, int]:
    """(rows, tokens, writes, how many rows of table_totals hold them)"""
    row = store._query("SELECT COALESCE(sum(rows), 0), COALESCE(sum(tokens), 0), COALESCE(sum(writes), 0), "  # type: ignore[attr-defined]
                       "count(*) FROM table_totals WHERE tbl = ?", (table,))[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def _truth(store: Store, table: str) -> tuple[int, int]:
    row = store._query(f"SELECT count(*), COALESCE(sum(tokens), 0) FROM {table}")[0]  # type: ignore[attr-defined]
    return int(row[0]), int(row[1])


def _memory(store: Store, n: int, text: str) -> str:
    uid = f"01M{n:023d}"
    store.insert_memory(NewMemory(uid=uid, domain="org", namespace="team", summary=f"note {n} on {text}",
                                  content=f"{text} seen again in run {n}", timestamp=T0 + n, tags=("ops",)))
    return uid


def _session(store: Store, n: int, summary: str) -> str:
    sid = f"s-{n}"
    store.ensure_session(sid, "proj", T0 + n)
    store.close_session(sid, T0 + n + 60, {}, {"text": summary})
    return sid


def _ranks(rows: list[tuple[Any, float]]) -> list[tuple[str, float]]:
    return [(str(getattr(r, "uid", None) or r.id), score) for r, score in rows]


@pytest.mark.parametrize("engine", POSTGRES)
def test_every_write_keeps_the_totals_and_moves_writes_only_when_words_change(store: Store, engine: str) -> None:
    for table in TABLES:
        assert _kept(store, table)[:3] == (0, 0, 0)
    uids = [_memory(store, n, "cache timeout") for n in range(3)]
    sids = [_session(store, n, f"fixed the login redirect {n}") for n in range(3)]
    store.ensure_session(sids[0], "proj", T0)   # already there: no row written
    for table in TABLES:
        assert _kept(store, table)[:2] == _truth(store, table)
    writes = _kept(store, "memories")[2]
    store.touch_memories(uids[:2], T0 + 100)   # no word changes
    assert _kept(store, "memories")[2] == writes
    store.update_memory(uids[0], {"content": "a much longer text about the cache and its timeout"}, T0 + 200)
    assert _kept(store, "memories")[2] == writes + 1
    assert _kept(store, "memories")[:2] == _truth(store, "memories")
    store.tombstone_memory(uids[1], T0 + 300)
    store._exec("DELETE FROM memories WHERE uid = ?", (uids[2],))  # type: ignore[attr-defined]
    store._exec("DELETE FROM memories WHERE uid = 'none such'")  # type: ignore[attr-defined]
    assert _kept(store, "memories")[:2] == _truth(store, "memories") == (2, _truth(store, "memories")[1])
    store._exec("UPDATE sessions SET summary = ? WHERE id = ?", ('{"text": "redirect loop"}', sids[1]))  # type: ignore[attr-defined]
    assert _kept(store, "sessions")[:2] == _truth(store, "sessions")
    store._exec("TRUNCATE memories")  # type: ignore[attr-defined]
    before = _kept(store, "memories")
    assert before[:2] == (0, 0) and before[2] > writes + 1


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_write_rolled_back_leaves_the_totals(store: Store, engine: str) -> None:
    _memory(store, 1, "cache")
    kept = _kept(store, "memories")
    with pytest.raises(RuntimeError), store.transaction():  # type: ignore[attr-defined]
        _memory(store, 2, "cache")
        raise RuntimeError("rolled back")
    assert _kept(store, "memories") == kept


@pytest.mark.parametrize("engine", POSTGRES)
def test_ranks_are_those_of_totals_counted_afresh_through_writes_and_folds(store: Store, engine: str) -> None:
    """A viewer's search counts the totals and every word from the rows (nothing hidden here:
    every memory is the team's), so it is what the kept totals must give."""
    for n in range(6):
        _memory(store, n, "cache timeout" if n % 2 else "login redirect cache")
        _session(store, n, "the cache timeout broke the login" if n % 3 else "redirect loop")
    match, none = "cache OR redirect", SearchFilters()

    def same() -> list[tuple[str, float]]:
        kept = store.search_memories(match, none, "relevance", 10, 0)
        assert _ranks(kept) == _ranks(store.search_memories_seen_by("nobody", match, none, "relevance", 10, 0))
        return _ranks(kept)

    first = same()
    assert first and _ranks(store.search_sessions(match, none, "relevance", 10, 0))
    for n in range(6, 30):   # one row of totals a write: more than a search lets stand
        _memory(store, n, "redirect")
    assert _kept(store, "memories")[3] > 16
    grown = same()   # every word counted again: a memory was written since
    assert grown != first
    assert _kept(store, "memories")[3] == 1   # the search folded them
    assert _kept(store, "memories")[:2] == _truth(store, "memories")
    assert same() == grown


@pytest.mark.no_store   # a schema of its own, made by the steps before this one
@pytest.mark.postgres
def test_the_step_keeps_the_totals_of_a_populated_store() -> None:
    """Step 13 on a store made by steps 1-12 with sessions and memories in it."""
    reason = pg_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import os

    import psycopg

    base = os.environ["NMEM_TEST_PG"]
    schema = f"nmem_t_totals_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                         "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            for step in range(1, 13):
                conn.execute(MIGRATIONS[step - 1])
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (step,))
            for n in range(5):
                conn.execute("INSERT INTO sessions (id, project, started_at, ended_at, summary) "
                             "VALUES (%s, 'proj', %s, %s, %s)",
                             (f"s-{n}", T0 + n, T0 + n + 1, f'{{"text": "run {n} ok"}}'))
                conn.execute("INSERT INTO memories (uid, domain, namespace, summary, content, tags, created_at, "
                             "updated_at) VALUES (%s, 'org', 'team', %s, 'the cache', '', %s, %s)",
                             (f"m-{n}", f"note {n} on the login page", T0, T0))
            store = open_store(schema_url(base, schema))
            try:
                for table in TABLES:
                    assert _kept(store, table) == (*_truth(store, table), 0, 1)
                    assert _truth(store, table)[0] == 5
                _memory(store, 9, "cache")
                assert _kept(store, "memories")[:2] == _truth(store, "memories")
            finally:
                store.close()
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
