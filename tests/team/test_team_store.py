"""The team server's rows at the store level (nmem.team.accounts's TeamStore), on SQLite and PostgreSQL:
users, token digests, revocation, the audit trail and who wrote each memory and observation."""

from __future__ import annotations

from typing import Any

from conftest import record
from nmem.service.api import Service
from nmem.store.protocol import Store
from store_engines import both_engines, sql_rows

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

T0 = 1_790_000_000


def test_users_are_unique_and_listed_with_their_live_tokens(store: Store) -> None:
    team: Any = store
    assert not team.team_active()
    assert team.add_user("bob", False, T0) and team.add_user("alice", True, T0 + 1)
    assert not team.add_user("alice", False, T0 + 2), "a taken name is refused"
    assert team.team_active()
    assert team.add_token("alice", "digest-a1", T0 + 3) is not None
    assert team.add_token("nobody", "digest-x", T0 + 3) is None
    assert team.list_users() == [
        {"name": "alice", "admin": True, "created_at": T0 + 1, "tokens": 1},
        {"name": "bob", "admin": False, "created_at": T0, "tokens": 0},
    ]


def test_a_token_is_found_by_its_digest_until_revoked(store: Store) -> None:
    team: Any = store
    team.add_user("alice", True, T0)
    team.add_user("bob", False, T0)
    first = team.add_token("bob", "digest-b1", T0 + 1)
    second = team.add_token("bob", "digest-b2", T0 + 2)
    team.add_token("alice", "digest-a1", T0 + 3)
    assert second == first + 1
    assert team.token_user("digest-b1") == ("bob", False)
    assert team.token_user("digest-a1") == ("alice", True)
    assert team.token_user("no-such-digest") is None
    assert team.revoke_tokens(first, None, T0 + 10) == 1
    assert team.revoke_tokens(first, None, T0 + 11) == 0, "nothing live by that id"
    assert team.token_user("digest-b1") is None and team.token_user("digest-b2") == ("bob", False)
    assert [(t["id"], t["name"], t["revoked_at"]) for t in team.list_tokens("bob")] == [
        (first, "bob", T0 + 10), (second, "bob", None)]
    assert team.revoke_tokens(None, "bob", T0 + 20) == 1
    assert team.token_user("digest-b2") is None and team.token_user("digest-a1") == ("alice", True)
    assert [t["name"] for t in team.list_tokens(None)] == ["bob", "bob", "alice"]


def test_writes_are_audited_and_their_writer_kept(service: Service) -> None:
    team: Any = service.store
    record(service, "PostToolUse", now=T0, session_id="s1", tool_name="Bash",
           tool_input={"command": "pytest -q"}, tool_response={"exit_code": 0})
    ((oid,),) = sql_rows(service.store, "SELECT MAX(id) FROM observations")
    memory = service.remember("We use PostgreSQL for billing", namespace="decisions", project="demo")
    uid = memory.id
    team.record_writes("alice", T0 + 1, [("remember", memory.urn)], memories=[uid], observations=[oid])
    team.record_writes("bob", T0 + 2, [("forget", memory.urn)], memories=[uid])
    assert team.memory_writers([uid, "no-such-uid"]) == {uid: "alice"}, "the first writer stays"
    assert team.observation_writers([oid, oid + 1000]) == {oid: "alice"}
    assert team.memory_writers([]) == {} and team.observation_writers([]) == {}
    rows = team.audit_rows(None, 0, 10)
    assert [(r["user"], r["action"], r["urn"], r["at"]) for r in rows] == [
        ("alice", "remember", memory.urn, T0 + 1), ("bob", "forget", memory.urn, T0 + 2)]
    assert [r["user"] for r in team.audit_rows("bob", 0, 10)] == ["bob"]
    assert team.audit_rows(None, rows[0]["id"], 10) == rows[1:]
    assert team.audit_rows(None, 0, 1) == rows[:1]
    assert sql_rows(service.store, "SELECT writer FROM memories WHERE uid = ?", uid) == [("alice",)]


def test_every_store_method_is_filtered_for_a_viewer_or_named_as_passing_through() -> None:
    """A new store read could hand a signed-in user another's private memories: each public method
    of both engines is either filtered by `ViewerStore` or named, with why, in `PASSES_THROUGH`."""
    from nmem.store.postgres import PostgresStore
    from nmem.store.sqlite import whole_class
    from nmem.team.access import PASSES_THROUGH, ViewerStore

    public = {name for cls in (whole_class(), PostgresStore) for name in dir(cls)
              if not name.startswith("_") and callable(getattr(cls, name, None))}
    filtered = {name for name in vars(ViewerStore) if not name.startswith("_")}
    assert sorted(public - filtered - PASSES_THROUGH) == [], "classify these in nmem.team.access"
    assert sorted(PASSES_THROUGH & filtered) == [] and sorted(PASSES_THROUGH - public) == []


def test_a_viewers_nearest_memories_are_not_crowded_out_by_anothers_private_ones(service: Service) -> None:
    """The vector scan reads the newest `limit` memories: another writer's private ones are left
    out before that limit is counted, as a page of search results is cut after them."""
    from nmem.search.embedders import pack
    from nmem.search.fusion import DENSE_SCAN_ROWS
    from nmem.store.records import SearchFilters
    from nmem.team.access import Viewer, ViewerStore

    team: Any = service.store
    clock = iter(range(T0, T0 + 100))
    service.clock = lambda: float(next(clock))
    bobs = [service.remember(f"bob's note {n} on the billing export", namespace="learnings", project="demo")
            for n in range(2)]
    anns = [service.remember(f"ann's own reminder {n}", domain="user", project="demo") for n in range(5)]
    team.record_writes("bob", T0, [], memories=[m.id for m in bobs])
    team.record_writes("ann", T0, [], memories=[m.id for m in anns])
    numbers = dict(sql_rows(service.store, "SELECT uid, id FROM memories"))
    team.put_vectors("memory", "probe", 2, [(numbers[m.id], pack([1.0, 0.0])) for m in bobs + anns])
    for limit in (1, 2, 3, DENSE_SCAN_ROWS):
        ids, blobs = ViewerStore(service.store, Viewer("bob")).vector_scan("memory", "probe", SearchFilters(), limit)
        assert ids == [m.id for m in reversed(bobs)][:limit] and len(blobs) == len(ids), limit
        ids, _ = ViewerStore(service.store, Viewer("ann")).vector_scan("memory", "probe", SearchFilters(), limit)
        assert ids == [m.id for m in reversed(bobs + anns)][:limit], limit
