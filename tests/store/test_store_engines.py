"""The Store contract on both engines: the query language, transactions, snapshots, change
tokens, vectors, errors. (SQLite-only behaviour, files and PRAGMAs, is in test_store_sqlite.py.)"""

from __future__ import annotations

import pytest

from nmem.errors import QuerySyntaxError, StorageError, StoreUnavailable
from nmem.store import NewMemory, NewObservation, SearchFilters, open_store
from nmem.store.protocol import Store
from store_engines import fts_count

T0 = 1_790_000_000
ALL = SearchFilters()


def add(store: Store, content: str, at: int, session: str = "s1", obs_type: str = "command") -> int:
    with store.transaction():
        store.ensure_session(session, "demo", T0)
        return store.add_observation(NewObservation(session, "demo", at, obs_type, "PostToolUse", content))


def found(store: Store, match: str) -> list[int]:
    return sorted(o.id for o, _ in store.search_observations(match, ALL, "date_desc", 50, 0))


@pytest.fixture
def texts(store: Store) -> dict[str, int]:
    rows = {"login": "fix the login redirect in src/auth.py", "logout": "logout button tests are flaky",
            "deploy": "deploying the billing service", "both": "login and deploy scripts",
            "snake": "run_migrations failed on user_id"}
    return {key: add(store, text, T0 + i) for i, (key, text) in enumerate(rows.items())}


def test_words_phrases_prefixes_and_operators_match_alike(store: Store, texts: dict[str, int]) -> None:
    t = texts
    assert found(store, "login") == sorted([t["login"], t["both"]])
    assert found(store, '"login redirect"') == [t["login"]]
    assert found(store, '"redirect login"') == []
    assert found(store, "log*") == sorted([t["login"], t["logout"], t["both"]])
    assert found(store, "login NOT deploy") == [t["login"]]
    assert found(store, "logout OR billing") == sorted([t["logout"], t["deploy"]])
    assert found(store, "(login OR logout) AND flaky") == [t["logout"]]
    assert found(store, "deploy") == sorted([t["deploy"], t["both"]]), "porter stems deploying -> deploy"
    assert found(store, '"auth.py"') == [t["login"]], "punctuation splits words as unicode61 does"
    assert found(store, "migrations") == [t["snake"]] and found(store, "user") == [t["snake"]]
    assert found(store, "NEAR(login redirect, 3)") == [t["login"]]


def test_near_matches_within_its_distance_alike(store: Store) -> None:
    """NEAR(a b, N): at most N tokens between the two phrases, in either order (FTS5's rule)."""
    apart = {n: add(store, "login " + "x " * n + "redirect", T0 + n) for n in (0, 2, 3, 4, 9)}
    turned = add(store, "redirect x x login", T0 + 20)
    phrase = add(store, "the login page x x fails to redirect", T0 + 21)
    assert found(store, "NEAR(login redirect, 3)") == sorted([apart[0], apart[2], apart[3], turned])
    assert found(store, "NEAR(login redirect, 0)") == [apart[0]]
    assert found(store, "NEAR(login redirect)") == sorted([*apart.values(), turned, phrase])
    assert found(store, 'NEAR("login page" redirect, 4)') == [phrase]
    assert found(store, 'NEAR("login page" redirect, 3)') == []
    assert found(store, "NEAR(login redirect, 3) NOT page") == sorted([apart[0], apart[2], apart[3], turned])


@pytest.mark.parametrize("bad", ["login AND", "(login OR logout", '"unterminated', "OR login", "auth.py",
                                 "bogus: login"])
def test_malformed_queries_are_the_same_error_and_change_nothing(store: Store, texts: dict[str, int],
                                                                 bad: str) -> None:
    for call in (lambda: store.search_observations(bad, ALL, "relevance", 5, 0),
                 lambda: store.search_memories(bad, ALL, "relevance", 5, 0),
                 lambda: store.purge_observations_matching(bad, ALL)):
        with pytest.raises(QuerySyntaxError, match="invalid search query"):
            call()
    assert len(store.observation_ids(None, ALL)) == len(texts)


def test_relevance_prefers_the_summary_of_a_memory(store: Store) -> None:
    in_body = store.insert_memory(NewMemory("01J000000000000000000000A1", "user", "notes", "about caches",
                                            "postgres is the shared store", T0))
    in_summary = store.insert_memory(NewMemory("01J000000000000000000000A2", "user", "notes", "postgres",
                                               "the shared store for the team", T0))
    ranked = store.search_memories("postgres", ALL, "relevance", 5, 0)
    assert [m.id for m, _ in ranked] == [in_summary.id, in_body.id]
    assert ranked[0][1] > ranked[1][1]


def test_a_failed_transaction_leaves_nothing_and_nested_ones_join(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        add(store, "rolled back", T0)
        with store.transaction():
            store.ensure_session("inner", "demo", T0)
        raise RuntimeError("boom")
    assert store.observation_ids(None, ALL) == []
    assert store.get_session("inner") is None
    with store.transaction():
        first = add(store, "outer", T0)
        with store.transaction():
            second = add(store, "inner", T0 + 1)
    assert store.observation_ids(None, ALL) == [first, second]


def test_a_failed_savepoint_undoes_only_its_own_writes(store: Store, store_url: str) -> None:
    """Group commit's unit: parts of one transaction, each undone alone by its error (a database
    error included, which on PostgreSQL aborts the transaction up to the savepoint)."""
    other = open_store(store_url)
    try:
        with store.transaction():
            with store.savepoint():
                first = add(store, "first part", T0)
            with pytest.raises(RuntimeError), store.savepoint():
                add(store, "failed part", T0 + 1, session="gone")
                raise RuntimeError("boom")
            with pytest.raises(StorageError), store.savepoint():
                store.ensure_session("also gone", "demo", T0)
                store._exec("INSERT INTO no_such_table VALUES (1)")  # type: ignore[attr-defined]
            with store.savepoint():
                with store.savepoint():  # nested, same name: the inner one is undone alone
                    third = add(store, "third part", T0 + 2)
                with pytest.raises(RuntimeError), store.savepoint():
                    add(store, "inner failure", T0 + 3)
                    raise RuntimeError("inner")
            assert other.observation_ids(None, ALL) == []  # nothing visible before the one commit
        assert other.observation_ids(None, ALL) == [first, third]
        assert store.get_session("gone") is None and store.get_session("also gone") is None
        with store.savepoint():  # outside a transaction: a transaction of its own
            alone = add(store, "alone", T0 + 4)
        assert other.observation_ids(None, ALL) == [first, third, alone]
    finally:
        other.close()


def test_a_snapshot_does_not_see_later_commits(store: Store, store_url: str) -> None:
    add(store, "before", T0)
    other = open_store(store_url)
    try:
        with store.read_snapshot():
            assert len(store.observation_ids(None, ALL)) == 1
            add(other, "during", T0 + 1)
            assert len(store.observation_ids(None, ALL)) == 1
        assert len(store.observation_ids(None, ALL)) == 2
        with store.read_snapshot():  # a write of its own inside a snapshot commits; the snapshot reads on
            assert len(store.observation_ids(None, ALL)) == 2
            add(store, "mine", T0 + 2)
            assert len(store.observation_ids(None, ALL)) == 2
        assert len(store.observation_ids(None, ALL)) == 3
    finally:
        other.close()


def test_the_change_token_moves_when_another_connection_writes(store: Store, store_url: str) -> None:
    add(store, "first", T0)
    before = store.change_token()
    assert store.change_token() == before
    other = open_store(store_url)
    try:
        add(other, "second", T0 + 1)
    finally:
        other.close()
    assert store.change_token() != before


def test_vectors_go_with_their_row(store: Store) -> None:
    kept, gone = add(store, "kept", T0), add(store, "gone", T0 + 1)
    store.put_vectors("observation", "m", 2, [(kept, b"\x00" * 8), (gone, b"\x01" * 8)])
    assert store.count_missing_vectors("observation", "m") == 0
    assert store.purge_observations([gone]) == 1
    assert store.get_vectors("observation", "m", [kept, gone]) == {kept: b"\x00" * 8}
    assert store.count_vectors("observation", "m") == 1


def test_constraints_hold_and_say_so(store: Store) -> None:
    with pytest.raises(StorageError, match="constraint"):
        store.add_prompt("no-such-session", T0, "user", "hi")   # a foreign key
    with pytest.raises(StorageError, match="constraint"):
        store.insert_memory(NewMemory("u1", "user", "context", "s", "c", T0, tier="boiling"))   # a CHECK
    assert store.get_memory("u1") is None and store.observation_ids(None, ALL) == []


def test_a_purge_inside_an_outer_transaction_stays_atomic(store: Store) -> None:
    ids = [add(store, f"row {i}", T0 + i) for i in range(3)]
    with pytest.raises(RuntimeError), store.transaction():
        store.purge_observations(ids[:1])
        store.purge_observations_where(["command"], None, None)
        raise RuntimeError("abort")
    assert [o.id for o in store.get_observations(ids)] == ids


def test_the_full_text_index_follows_each_write(store: Store) -> None:
    oid, other = add(store, "deploy with helm", T0), add(store, "helm lint", T0 + 1)
    assert fts_count(store, "observations", "helm") == 2
    store._exec("UPDATE observations SET content = 'deploy with kustomize' WHERE id = ?", (oid,))  # type: ignore[attr-defined]
    assert (fts_count(store, "observations", "helm"), fts_count(store, "observations", "kustomize")) == (1, 1)
    store.set_observation_pin(oid, True)
    assert found(store, "kustomize") == [oid]
    store.purge_observations([oid])
    assert found(store, "kustomize") == [] and found(store, "helm") == [other]
    mem = store.insert_memory(NewMemory("u1", "user", "decisions", "use postgres", "for the team server", T0,
                                        tags=("db",)))
    assert fts_count(store, "memories", "postgres") == 1
    store.update_memory(mem.id, {"summary": "use sqlite"}, T0 + 1)
    assert (fts_count(store, "memories", "postgres"), fts_count(store, "memories", "sqlite")) == (0, 1)
    store.touch_memories([mem.id], T0 + 2)
    assert [m.id for m, _ in store.search_memories("sqlite", ALL, "relevance", 5, 0)] == [mem.id]
    assert store.tombstone_memory(mem.id, T0 + 3) is True
    assert store.search_memories("sqlite OR team OR db", ALL, "relevance", 5, 0) == []
    store.ensure_session("s2", "demo", T0)
    store.close_session("s2", T0 + 5, {"events": {}}, {"intent": "x", "text": "Intents: tune the cache"})
    assert [s.id for s, _ in store.search_sessions('"cache"', ALL, "relevance", 10, 0)] == ["s2"]
    store.close_session("s2", T0 + 9, {"events": {}}, {"intent": "y", "text": "Intents: rotate keys"})
    assert store.search_sessions('"cache"', ALL, "relevance", 10, 0) == []
    assert [s.id for s, _ in store.search_sessions('"rotate"', ALL, "relevance", 10, 0)] == ["s2"]
    assert store.integrity() == "ok" and set(store.fts_consistency().values()) == {"ok"}


def test_a_read_only_store_reads_but_neither_writes_nor_keeps_access_counts(store: Store, store_url: str) -> None:
    oid = add(store, "pytest -q", T0)
    mem = store.insert_memory(NewMemory("u1", "user", "context", "s", "c", T0))
    reader = open_store(store_url, readonly=True)
    try:
        assert [o.content for o in reader.get_observations([oid])] == ["pytest -q"]
        assert reader.schema_version() == store.schema_version()
        reader.touch_memories([mem.id], T0 + 5)
        assert store.get_memory(mem.id) == mem
        with pytest.raises(StorageError, match="read-only"):
            reader.ensure_session("s2", "demo", T0)
    finally:
        reader.close()
    assert store.get_session("s2") is None


def test_reopening_migrates_nothing_twice(store: Store, store_url: str) -> None:
    version = store.schema_version()
    again = open_store(store_url)
    try:
        assert again.schema_version() == version > 0
        assert again.integrity() == "ok"
    finally:
        again.close()


@pytest.mark.no_store  # the server is not there: nothing opens
def test_an_unreachable_server_is_a_clear_storage_error() -> None:
    with pytest.raises(StoreUnavailable, match=r"cannot connect to postgresql://nmem@127\.0\.0\.1:1/nmem"):
        open_store("postgresql://nmem@127.0.0.1:1/nmem?connect_timeout=1", busy_timeout_ms=500)
