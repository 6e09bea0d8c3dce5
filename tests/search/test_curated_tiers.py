"""A search of everything reads the curated scopes (sessions, memories) for the strictest tier
that finds anything in each, in one read of the store (`search_curated`: on PostgreSQL a round
trip a tier, the looser one only for the scopes the stricter found nothing in). What it finds is
what searching each scope a tier at a time finds: the same records, scores and order, the same
tier; a team server's user sees only what they may see."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from nmem.store import NewMemory, NewObservation
from nmem.store.records import SearchFilters
from nmem.team.access import Viewer, ViewerStore, acting_as
from search_origins_support import logged
from store_engines import both_engines
from trail_support import Without

if TYPE_CHECKING:
    from nmem.service.api import Service
    from nmem.store.protocol import Store
    from search_origins_support import Received

__all__ = ["both_engines", "logged"]

T0 = 1_790_000_000

SESSIONS = [("s-1", "ledger", "rotate the staging keys and the invoice export"),
            ("s-2", "ledger", "the invoice export drops its last page"),
            ("s-3", "billing", "kiwi release notes and the export schedule")]
MEMORIES = [("m-1", "project:ledger", "key rotation schedule", "rotate the staging keys every monday"),
            ("m-2", "project:ledger", "invoice export", "the invoice export pages by customer"),
            ("m-3", "org", "kiwi release", "the kiwi release froze the schedule"),
            ("m-4", "project:billing", "zebra crossing", "nothing about keys here")]

# (tiers, what each scope should be found by): the first tier that finds anything in a scope is its
TIERS = [
    ('"invoice" AND "export"', '"invoice" OR "export"'),           # both scopes: the first
    ('"kiwi" AND "monday"', '"kiwi" OR "monday"'),                  # both: the second
    ('"staging" AND "monday"', '"staging" OR "monday"'),            # memories the first, sessions the second
    ('"page" AND "last"', '"page" OR "last"', '"zebra"'),          # sessions the first, memories the second
    ('"nowhere" AND "found"', '"nowhere" OR "found"'),              # neither
    ('"zebra"',),
]


def fill(store: Store) -> None:
    for n, (sid, project, summary) in enumerate(SESSIONS):
        store.ensure_session(sid, project, T0 + n)
        store.close_session(sid, T0 + n + 60, {}, {"text": summary})
    for n, (uid, domain, summary, content) in enumerate(MEMORIES):
        store.insert_memory(NewMemory(uid, domain, "learnings", summary, content, T0 + n))


def one_tier_at_a_time(store: Store, scope: str, tiers: tuple[str, ...], filters: SearchFilters,
                       limit: int) -> tuple[list[tuple[str, float]], str]:
    """The way a search of everything read them before: a statement a tier, until one finds any."""
    search = store.search_sessions if scope == "sessions" else store.search_memories
    for tier in tiers:
        rows = search(tier, filters, "relevance", limit, 0)
        if rows:
            return [(str(r.id), score) for r, score in rows], tier
    return [], ""


def ids(found: dict[str, tuple[list[tuple[Any, float]], str]]) -> dict[str, tuple[list[tuple[str, float]], str]]:
    return {scope: ([(str(r.id), score) for r, score in rows], tier) for scope, (rows, tier) in found.items()}


@pytest.mark.parametrize("tiers", TIERS)
@pytest.mark.parametrize("filters", [SearchFilters(), SearchFilters(project="ledger")], ids=["all", "ledger"])
def test_each_scope_gets_the_strictest_tier_that_finds_any_as_a_tier_at_a_time(
        store: Store, tiers: tuple[str, ...], filters: SearchFilters) -> None:
    fill(store)
    found = ids(store.search_curated(["sessions", "memories"], tiers, filters, 10))
    assert found == {scope: one_tier_at_a_time(store, scope, tiers, filters, 10) for scope in ("sessions", "memories")}


def test_the_tiers_fall_back_per_scope(store: Store) -> None:
    """Memories found by the strict tier, sessions only by the loose one: each keeps its own."""
    fill(store)
    found = ids(store.search_curated(["sessions", "memories"], TIERS[2], SearchFilters(), 10))
    assert found["memories"][1] == TIERS[2][0] and [uid for uid, _ in found["memories"][0]] == ["m-1"]
    assert found["sessions"][1] == TIERS[2][1] and [sid for sid, _ in found["sessions"][0]] == ["s-1"]
    only = ids(store.search_curated(["memories"], TIERS[4], SearchFilters(), 10))
    assert only == {"memories": ([], "")}
    assert store.search_curated([], TIERS[0], SearchFilters(), 10) == {}


def test_a_viewer_never_finds_another_users_private_memories(store: Store) -> None:
    """Through the team filter, whoever the caller names: bob's view, scored as his memory search."""
    fill(store)
    store.insert_memory(NewMemory("ann-note", "user", "learnings", "invoice export secret",
                                  "ann's invoice export notes " * 4, T0 + 9))
    store.record_writes("ann", T0 + 9, [], memories=["ann-note"])   # type: ignore[attr-defined]
    bob = ViewerStore(store, Viewer("bob"))
    for viewer in (None, "ann"):
        found = ids(bob.search_curated(["sessions", "memories"], TIERS[0], SearchFilters(), 10, viewer=viewer))
        memories = [(m.id, s) for m, s in bob.search_memories(TIERS[0][0], SearchFilters(), "relevance", 10, 0)]
        assert found["memories"] == (memories, TIERS[0][0])
        assert "ann-note" not in {uid for uid, _ in found["memories"][0]}
    assert "ann-note" in {uid for uid, _ in ids(store.search_curated(["memories"], TIERS[0], SearchFilters(),
                                                                     10))["memories"][0]}


def test_a_search_of_everything_as_bob_leaves_anns_private_memories_out(service: Service) -> None:
    fill(service.store)
    service.store.insert_memory(NewMemory("ann-note", "user", "learnings", "invoice export secret",
                                          "ann's invoice export notes", T0 + 9))
    service.store.record_writes("ann", T0 + 9, [], memories=["ann-note"])   # type: ignore[attr-defined]
    with acting_as(Viewer("bob")):
        hits = service.search("invoice export", scope="all", limit=20).hits
    assert {h.record.id for h in hits if h.kind == "memory"} == {"m-2"}
    with acting_as(Viewer("ann")):
        hits = service.search("invoice export", scope="all", limit=20).hits
    assert {h.record.id for h in hits if h.kind == "memory"} == {"m-2", "ann-note"}


def curated_reads(received: Received) -> list[str]:
    """The statements that searched sessions or memories (their kept totals are read in each)."""
    return [s for s in received.statements if "tbl = 'sessions'" in s or "tbl = 'memories'" in s]


@pytest.mark.postgres
def test_a_search_of_everything_reads_sessions_and_memories_a_tier_at_a_time(
        logged: tuple[Service, Received]) -> None:
    """Neither finds the question's every word, so both fall back to the next tier: a statement
    a scope, both scopes' strict ones first, then both loose ones (tests/store/test_pg_plan_cost.py:
    each pair in one round trip, a loose one only for a scope the strict one found nothing in)."""
    service, received = logged
    fill(service.store)
    store = service.store
    store.ensure_session("s-t", "ledger", T0 + 100)
    store.add_observation(NewObservation(session_id="s-t", project="ledger", timestamp=T0 + 101, obs_type="note",
                                         source_event="PostToolUse", tool_name="Edit", file_path=None,
                                         content="the kiwi build failed"))
    received.statements.clear()
    result = service.search("kiwi monday", scope="all", limit=10)
    kinds = {h.kind for h in result.hits}
    assert {"memory", "observation"} <= kinds
    reads = curated_reads(received)
    assert len(reads) == 4, reads
    assert ["tbl = 'sessions'" in r for r in reads] == [True, False, True, False]
    assert ["tbl = 'memories'" in r for r in reads] == [False, True, False, True]


def seed_chat(service: Service) -> None:
    """Sessions of user prompts and agent replies, some replies hours after their question (past
    the turns' lookback), some sessions opened by a reply."""
    import random

    rng = random.Random(5)
    words = ("invoice", "export", "drops", "rows", "page", "retry", "ledger", "total", "cache", "timeout")
    store = service.store
    with store.transaction():
        for s in range(6):
            sid, at = f"c{s}", T0 + s * 100_000
            store.ensure_session(sid, "ledger", at)
            for k in range(14):
                at += rng.choice((5, 60, 3600, 7 * 3600))
                source = "agent" if (k == 0 and s % 2) or rng.random() < 0.6 else "user"
                store.add_prompt(sid, at, source, " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))))


def ranked(service: Service, query: str, scope: str, **kw: Any) -> list[tuple[str, str, str]]:
    return [(h.kind, str(h.record.id), h.score.hex()) for h in service.search(query, scope=scope, **kw).hits]


@pytest.mark.parametrize("scope", ["prompts", "all"])
def test_the_replies_turns_read_with_the_rows_arrange_as_read_apart(service: Service, scope: str) -> None:
    if not hasattr(service.store, "prompt_turns"):
        pytest.skip("PostgreSQL reads the turns with the rows; SQLite reads them apart")
    seed_chat(service)
    queries = ["invoice export drops rows", "retry timeout", "ledger total cache", "page", "why does the export drop"]
    pages: list[dict[str, Any]] = [{}, {"limit": 5}, {"limit": 5, "offset": 5}, {"project": "ledger"}]
    together = [ranked(service, q, scope, **page) for q in queries for page in pages]
    service.store = Without(service.store, "prompt_turns")   # type: ignore[assignment]
    apart = [ranked(service, q, scope, **page) for q in queries for page in pages]
    assert together == apart
    assert sum(len(h) for h in together) > 50


@pytest.mark.postgres
def test_a_search_of_prompts_reads_the_rows_and_the_turns_in_one_statement(
        logged: tuple[Service, Received]) -> None:
    service, received = logged
    seed_chat(service)
    received.statements.clear()
    assert service.search("invoice export drops rows", scope="prompts", limit=10).hits
    turns = [s for s in received.statements if "nmem_turn" in s]
    apart = [s for s in received.statements if "p.timestamp < $2 AND p.timestamp > $3" in s]
    assert len(turns) == 1 and apart == []
