"""What PostgreSQL is sent and plans for the curated scopes of a search of everything
(`search_curated`): each scope's strictest tier first, both scopes in one round trip, a looser
tier only for the scopes the stricter one found nothing in; each scope's statement one text
whatever the words and tier, prepared once and run on its generic plan while its table is small;
and no tsvector sent back with the rows. Counted from PostgreSQL's own statement log
(log_statement = all, each statement's parameters beside it) and `pg_prepared_statements`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from nmem.store import NewMemory, open_store
from nmem.store.postgres import search as pg_search
from nmem.store.postgres.connection import CUSTOM_PLANS, _planned
from nmem.store.records import SearchFilters
from search_origins_support import statement_logging
from store_engines import ENGINES

if TYPE_CHECKING:
    from collections.abc import Iterator

    from nmem.store.protocol import Store

pytest.importorskip("psycopg")
pytestmark = pytest.mark.parametrize("engine", [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"])

T0 = 1_790_000_000
SESSIONS = [("s-1", "rotate the staging keys and the invoice export"),
            ("s-2", "the invoice export drops its last page")]
MEMORIES = [("m-1", "key rotation schedule", "rotate the staging keys every monday"),
            ("m-2", "invoice export", "the invoice export pages by customer")]
BOTH = ('"invoice" AND "export"', '"invoice" OR "export"')          # the strict tier finds both scopes
MEMORIES_ONLY = ('"staging" AND "monday"', '"staging" OR "monday"')  # the strict tier finds memories alone


class Log:
    """The statements the server logged as received, each with its parameters (the DETAIL)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str]] = []

    def __call__(self, diag: Any) -> None:
        text = str(diag.message_primary or "")
        if diag.severity_nonlocalized == "LOG" and text.startswith(("statement:", "execute ")):
            self.entries.append((text, str(diag.message_detail or "")))

    def curated(self) -> list[tuple[str, str]]:
        """The statements that searched sessions or memories (their kept totals are read in each)."""
        return [(text, detail) for text, detail in self.entries
                if "tbl = 'sessions'" in text or "tbl = 'memories'" in text]


@pytest.fixture
def logged(pg_url: str, monkeypatch: pytest.MonkeyPatch, engine: str) -> Iterator[tuple[Store, Log]]:
    log = Log()
    store = open_store(statement_logging(pg_url, monkeypatch, log))
    for n, (sid, summary) in enumerate(SESSIONS):
        store.ensure_session(sid, "ledger", T0 + n)
        store.close_session(sid, T0 + n + 60, {}, {"text": summary})
    for n, (uid, summary, content) in enumerate(MEMORIES):
        store.insert_memory(NewMemory(uid, "project:ledger", "learnings", summary, content, T0 + n))
    yield store, log
    store.close()


def tiers_found(found: dict[str, tuple[list[tuple[Any, float]], str]]) -> dict[str, str]:
    return {scope: tier for scope, (_, tier) in found.items()}


def test_a_looser_tier_is_sent_only_for_the_scopes_the_stricter_one_found_nothing_in(
        logged: tuple[Store, Log]) -> None:
    store, log = logged
    log.entries.clear()
    taken = store.pool_stats()["requests_num"]   # type: ignore[attr-defined]
    found = store.search_curated(["sessions", "memories"], BOTH, SearchFilters(), 10)
    assert tiers_found(found) == {"sessions": BOTH[0], "memories": BOTH[0]}
    sent = log.curated()
    # one statement a scope, the strict tier's alone: the loose tier is in no statement's parameters
    assert [("tbl = 'sessions'" in text, "tbl = 'memories'" in text) for text, _ in sent] == [(True, False),
                                                                                               (False, True)]
    assert all("invoice'' & ''export" in detail and "|" not in detail for _, detail in sent), sent
    # both in one round trip: one connection taken from the pool for the pair
    assert store.pool_stats()["requests_num"] - taken == 1   # type: ignore[attr-defined]

    log.entries.clear()
    found = store.search_curated(["sessions", "memories"], MEMORIES_ONLY, SearchFilters(), 10)
    assert tiers_found(found) == {"sessions": MEMORIES_ONLY[1], "memories": MEMORIES_ONLY[0]}
    sent = log.curated()
    assert [("tbl = 'sessions'" in text, "|" in detail) for text, detail in sent] == [
        (True, False), (False, False), (True, True)]   # the loose tier for sessions alone


def test_each_scope_runs_one_prepared_statement_on_its_generic_plan_for_every_tier_and_question(
        logged: tuple[Store, Log]) -> None:
    store, _ = logged
    questions = [BOTH, MEMORIES_ONLY, ('"kiwi" AND "page"', '"kiwi" OR "page"'), ('"last" AND "page"',)]
    with store.read_snapshot():   # every statement on one connection, whose prepared statements are listed
        store.search_curated(["sessions", "memories"], BOTH, SearchFilters(), 10)   # the tables' sizes learnt
        before = prepared(store)
        for tiers in questions:
            store.search_curated(["sessions", "memories"], tiers, SearchFilters(), 10)
        after = prepared(store)
    # sessions: BOTH 1 run, MEMORIES_ONLY 2, kiwi/page 2 (the strict tier finds none), last/page 1
    # memories: BOTH 1, MEMORIES_ONLY 1, kiwi/page 2, last/page 1
    runs = {"sessions": 6, "memories": 5}
    for table, n in runs.items():
        mine = [(generic, custom) for text, generic, custom in after if f"tbl = '{table}'" in text]
        assert len(mine) == 1, after   # one text for every tier and question
        old = [(generic, custom) for text, generic, custom in before if f"tbl = '{table}'" in text]
        generic, custom = mine[0][0] - (old[0][0] if old else 0), mine[0][1] - (old[0][1] if old else 0)
        assert (generic, custom) == (n, 0), (table, mine, old)


def prepared(store: Store) -> list[tuple[str, int, int]]:
    rows = store._query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")  # type: ignore[attr-defined]
    return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def test_weighted_rows_come_without_their_tsvectors(logged: tuple[Store, Log]) -> None:
    """The rows a relevance search of sessions or memories returns: every column of the table
    but its tsvector (neither the row's nor the copy the score reads), the records whole."""
    store, _ = logged
    found = store.search_curated(["sessions", "memories"], BOTH, SearchFilters(), 10)
    assert {r.id for r, _ in found["sessions"][0]} == {"s-1", "s-2"}
    assert {r.id for r, _ in found["memories"][0]} == {"m-2"}
    for name in ("sessions", "memories"):
        scope = pg_search.SCOPES[name]
        sql, params, plans = store._weighted_statement(  # type: ignore[attr-defined]
            scope, "'invoice' & 'export'", SearchFilters(), "relevance", 10, 0, None)
        rows = store._query(sql, params, plans=plans)  # type: ignore[attr-defined]
        assert rows
        columns = set(rows[0].keys())
        assert not {"tsv", "match_tsv"} & columns
        table = {str(r[0]) for r in store._query(  # type: ignore[attr-defined]
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(?) AND attnum > 0 "
            "AND NOT attisdropped", (name,))}
        assert table - {"tsv"} <= columns


def test_reads_by_key_run_their_generic_plan_from_the_first(logged: tuple[Store, Log]) -> None:
    """A page's observations and the prompts' turns, read by their ids: one plan whatever the
    ids, prepared at the first read and never planned again on a connection the ranking reads
    set to plan every run (force_custom_plan)."""
    from nmem.store import NewObservation

    store, _ = logged
    ids = [store.add_observation(NewObservation(session_id="s-1", project="ledger", timestamp=T0 + n, obs_type="note",
                                                source_event="PostToolUse", tool_name="Edit", file_path=None,
                                                content=f"note {n}")) for n in range(3)]
    # every pooled connection as a ranking read on a large table leaves it (CUSTOM_PLANS)
    pool = store._pool  # type: ignore[attr-defined]
    held = [pool.getconn() for _ in range(max(1, store.pool_stats()["pool_size"]))]  # type: ignore[attr-defined]
    for conn in held:
        _planned(conn, [("SELECT 1", None, CUSTOM_PLANS)], False)   # set to plan every run, as the store knows
        pool.putconn(conn)
    with store.read_snapshot():
        for n in range(3):
            assert [o.id for o in store.get_observations(ids[n:])] == ids[n:]
            store.prompt_turns([n + 1], [n + 1], 60)  # type: ignore[attr-defined]
        runs = {text: (generic, custom) for text, generic, custom in prepared(store)}
    by_key = [plans for text, plans in runs.items() if "o.id = ANY" in text or "WITH replies AS" in text]
    assert sorted(by_key) == [(3, 0), (3, 0)], runs
