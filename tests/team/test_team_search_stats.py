"""A memory search's scores for a team server's user count only what that user may see, on SQLite
and PostgreSQL: BM25's statistics (rows, tokens, each phrase's rows) leave out other writers'
private (`user`) memories, so no score tells bob whether ann's private notes hold a word, how many
she has, or how long they are. With nobody signed in, nothing changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nmem.store import NewMemory, open_store
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from nmem.team.access import Viewer, ViewerStore
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL, but the one comparing them

T0 = 1_790_000_000

BOBS = [  # (summary, content, tags): project memories of bob's, and one private note of his own
    ("key rotation schedule", "rotate the staging keys every monday; the rotation schedule lives in ops", ("ops",)),
    ("rotation of logs", "log rotation keeps seven days of logs on the staging hosts", ("logs",)),
    ("billing export", "the billing export runs nightly and writes a csv per customer", ("billing",)),
    ("schedule for backups", "backups follow the same schedule as the key rotation, one hour later", ("ops",)),
    ("plan for the migration", "the migration plan moves billing to the new cluster before rotation", ("plan",)),
    ("rotary encoder notes", "the rotary encoder driver reads the dial; nothing about keys", ("hardware",)),
    ("kiwi release", "the kiwi release froze the schedule for two weeks", ("release",)),
]
FILLER = ["lunch order", "printer jam on the third floor", "the wiki moved to a new host", "coffee machine descaling",
          "office plants need water", "parking permits renew in june", "holiday calendar for the team",
          "desk booking works through the portal", "the fire drill is on friday", "new hires get a laptop on day one",
          "the vpn client needs an update", "meeting rooms on the second floor"]
BOB_PRIVATE = ("my rotation reminder", "remind me of the rotation schedule and the kiwi plan", ("me",))

ANN_PRIVATE = [  # words bob asks for, and long texts: they must move none of his scores
    ("rotation secret", "the rotation of the production keys " * 6, ("secret",)),
    ("schedule", "rotation schedule rotation schedule kiwi kiwi plan", ("ops",)),
    ("unrelated", "a grocery list: apples, pears and bread", ()),
]

QUERIES = ["rotation", "rotation schedule", "rotation OR kiwi", '"rotation schedule"', "rot*", "rotation NOT kiwi",
           "schedule AND (rotation OR plan)", '"key rotation" OR backups', "summary: rotation",
           "{summary tags}: rotation OR ops", "- content : rotation", "^rotation", "tags: (ops OR logs) AND rotation"]
# A NEAR's phrases: their hits are counted without the NEAR's distance (docs/team.md), with the
# viewer's statistics all the same
ROUGH = ["NEAR(rotation schedule, 2)", "NEAR(key rotation) OR kiwi"]


def add(store: Store, writer: str | None, uid: str, domain: str, memory: tuple[str, str, tuple[str, ...]],
        at: int) -> None:
    summary, content, tags = memory
    store.insert_memory(NewMemory(uid, domain, "learnings", summary, content, at, tags=tags))
    if writer is not None:
        store.record_writes(writer, at, [], memories=[uid])   # type: ignore[attr-defined]


def fill(store: Store) -> None:
    for n, memory in enumerate(BOBS):
        add(store, "bob", f"bob-{n}", "project:demo", memory, T0 + n)
    for n, text in enumerate(FILLER):
        add(store, "dan", f"dan-{n}", "org", (text, f"{text}, as the office manager wrote", ("office",)), T0 + 100 + n)
    add(store, "bob", "bob-private", "user", BOB_PRIVATE, T0 + 20)
    for n, memory in enumerate(ANN_PRIVATE):
        add(store, "ann", f"ann-{n}", "user", memory, T0 + 30 + n)
    add(store, None, "nobodys-note", "user", ("rotation", "rotation written without a server", ()), T0 + 40)


def seen_by(store: Store, viewer: str, query: str, order: str = "relevance") -> list[tuple[str, float]]:
    rows = ViewerStore(store, Viewer(viewer)).search_memories(query, SearchFilters(), order, 50, 0)
    return [(m.id, score) for m, score in rows]


def plain(store: Store, query: str, order: str = "relevance") -> list[tuple[str, float]]:
    return [(m.id, score) for m, score in store.search_memories(query, SearchFilters(), order, 50, 0)]


def delete_memories(store: Store, where: str) -> None:
    with store.transaction():
        store._exec(f"DELETE FROM memories WHERE {where}")   # type: ignore[attr-defined]


@pytest.mark.parametrize("query", QUERIES)
def test_bobs_scores_are_those_of_the_store_holding_only_what_he_may_see(store: Store, query: str) -> None:
    """The whole rule at once: bob's scores as a viewer are the scores nmem gives with nobody
    signed in once every memory he may not see is gone from the store."""
    fill(store)
    as_bob = seen_by(store, "bob", query)
    assert as_bob, "every query finds some of bob's memories"
    assert not [uid for uid, _ in as_bob if uid.startswith(("ann", "nobody"))]
    delete_memories(store, "domain = 'user' AND (writer IS NULL OR writer <> 'bob')")
    alone = plain(store, query)
    assert [uid for uid, _ in as_bob] == [uid for uid, _ in alone]
    assert [score for _, score in as_bob] == pytest.approx([score for _, score in alone], rel=1e-9)


@pytest.mark.parametrize("order", ["relevance", "date_desc"])
def test_anns_private_memories_coming_and_going_never_move_bobs_scores(store: Store, order: str) -> None:
    """Ann writes private notes that hold bob's words or none of them, long and short, and forgets
    one: how many she has, how long they are and which words they hold change none of his scores."""
    fill(store)
    before = {q: seen_by(store, "bob", q, order) for q in QUERIES + ROUGH}
    assert all(before.values())
    add(store, "ann", "ann-more", "user", ("rotation", "rotation kiwi schedule " * 20, ("rotation",)), T0 + 50)
    add(store, "ann", "ann-short", "user", ("x", "y", ()), T0 + 51)
    add(store, "carol", "carol-0", "user", ("backups plan", "key rotation backups " * 3, ()), T0 + 52)
    ViewerStore(store, Viewer("ann"))._store.tombstone_memory("ann-0", T0 + 60)
    after = {q: seen_by(store, "bob", q, order) for q in QUERIES + ROUGH}
    assert after == before
    assert plain(store, "rotation", order) != before["rotation"], "with nobody signed in, every memory counts"


def test_a_viewer_with_nothing_hidden_gets_the_single_user_scores(store: Store) -> None:
    """With no other writer's private memory in the store, a viewer's search is the plain one."""
    for n, memory in enumerate(BOBS):
        add(store, "bob", f"bob-{n}", "project:demo", memory, T0 + n)
    add(store, "ann", "ann-public", "project:demo", ANN_PRIVATE[0], T0 + 30)
    for query in QUERIES + ROUGH:
        assert seen_by(store, "bob", query) == plain(store, query), query


def test_a_page_of_bobs_results_is_cut_after_the_hidden_are_left_out(store: Store) -> None:
    fill(store)
    whole = seen_by(store, "bob", "rotation OR kiwi OR schedule")
    pages = [(m.id, s) for offset in range(0, len(whole), 2) for m, s in ViewerStore(store, Viewer("bob"))
             .search_memories("rotation OR kiwi OR schedule", SearchFilters(), "relevance", 2, offset)]
    assert pages == whole and len(whole) == len({uid for uid, _ in whole})
    listed = ViewerStore(store, Viewer("bob")).search_memories(None, SearchFilters(), "date_desc", 50, 0)
    assert {m.id for m, _ in listed} == ({f"bob-{n}" for n in range(len(BOBS))} | {"bob-private"}
                                         | {f"dan-{n}" for n in range(len(FILLER))})


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    opened = open_store(pg_url)
    try:
        yield opened
    finally:
        opened.close()


# The queries both engines weigh alike (PostgreSQL counts a phrase's or a prefix's words one by one,
# with nobody signed in as well: docs/postgres.md)
PARITY = ["rotation", "rotation schedule", "rotation OR kiwi", "rotation NOT kiwi", "schedule AND (rotation OR plan)",
          "kiwi OR plan OR billing OR backups"]


@pytest.mark.postgres
@pytest.mark.sqlite_only("compares the engines itself: the same memories on SQLite and on PostgreSQL")
def test_both_engines_give_bob_the_same_scores(tmp_path: Path, pg_store: Store) -> None:
    on_sqlite = open_store(f"sqlite:///{tmp_path / 'nmem.db'}")
    try:
        for opened in (on_sqlite, pg_store):
            fill(opened)
        for query in PARITY:
            a: list[tuple[str, Any]] = seen_by(on_sqlite, "bob", query)
            b: list[tuple[str, Any]] = seen_by(pg_store, "bob", query)
            assert [uid for uid, _ in a] == [uid for uid, _ in b], query
            assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9), query
    finally:
        on_sqlite.close()


@pytest.mark.no_store
@pytest.mark.parametrize(("match", "listed"), [
    ("rotation schedule", ['"rotation"', '"schedule"']),
    ('"key rotation" OR rot*', ['"key rotation"', '"rot"*']),
    ("a NOT (b OR c) d", ['"a"', '"d"']),   # a NOT's phrases have no hits in a match
    ("rotation rotation", ['"rotation"', '"rotation"']),   # FTS5 sums a repeat twice
    ("summary: rotation OR {summary tags}: ops", ['summary : "rotation"', '{summary tags} : "ops"']),
    ("- content : x AND tags: (a OR b)", ['- content : "x"', 'tags : "a"', 'tags : "b"']),
    ('^start NEAR("a b" c*, 3)', ['^ "start"', '"a b"', '"c"*']),
    ('"he said ""hi""" + there', ['"he said ""hi"" there"']),
])
def test_the_phrases_fts5_sums_over_are_listed_as_queries_of_their_own(match: str, listed: list[str]) -> None:
    from nmem.store.sqlite.fts5query import phrases

    assert phrases(match) == listed


@pytest.mark.parametrize("bad", ['"rotation', "rotation AND", "nosuchcolumn: rotation", "(rotation"])
def test_a_malformed_query_is_the_same_clear_error_for_a_viewer(store: Store, bad: str) -> None:
    from nmem.errors import QuerySyntaxError

    fill(store)
    with pytest.raises(QuerySyntaxError):
        store.search_memories(bad, SearchFilters(), "relevance", 10, 0)
    with pytest.raises(QuerySyntaxError):
        seen_by(store, "bob", bad)
