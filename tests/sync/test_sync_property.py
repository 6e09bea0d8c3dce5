"""Property: whatever three replicas write, and in whatever order they sync, once each has
synced after the last write they hold one identical state, and no write is lost: each
write's operation is the memory's current version, or was superseded by a later one."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmem.errors import NotFound
from sync_support import Replica, bare_remote

# (replica, action, memory slot, clock step): slot picks one of a few memories so that
# replicas write to the same ones; a slot a replica has not seen yet becomes a new memory.
STEP = st.tuples(st.integers(0, 2), st.sampled_from(["remember", "update", "update", "forget", "pin", "sync"]),
                 st.integers(0, 2), st.integers(-3, 5))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=12), final_order=st.permutations([0, 1, 2]))
def test_random_writes_and_sync_orders_converge_with_nothing_lost(steps: list[tuple[int, str, int, int]],
                                                                  final_order: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        remote = bare_remote(root / "remote.git")
        replicas = [Replica(root / name, remote) for name in "abc"]
        try:
            slots: dict[int, str] = {}  # slot -> uid, once some replica created it
            for n, (who, action, slot, step) in enumerate(steps):
                replica = replicas[who]
                replica.clock.advance(step)  # clocks drift apart, and some go backwards
                if action == "sync":
                    replica.sync()
                    continue
                uid = slots.get(slot)
                live = uid is not None and _live(replica, uid)
                if action == "remember" or uid is None:
                    slots.setdefault(slot, replica.remember(f"memory {slot}, written at step {n}"))
                elif not live:
                    continue  # this replica has not seen it, or it is forgotten here
                elif action == "update":
                    replica.service.update(uid, content=f"memory {slot}, edited at step {n} by {who}")
                elif action == "forget":
                    replica.service.forget(uid)
                else:
                    replica.service.pin(uid, pinned=n % 2 == 0)
            for who in [*final_order, *final_order[:2]]:  # the last one has read everything after one round
                replicas[who].sync()
            states = [r.state() for r in replicas]
            assert states[0] == states[1] == states[2]
            # nothing lost: every write of every replica is the winner of its memory or older than it
            winners = {uid: row[-1] for uid, row in states[0].items()}
            written = [(op["uid"], op["version"]) for r in replicas for op in r.outbox()]
            for uid, version in written:
                assert uid in winners and version <= winners[uid]
            # and the winner is the greatest version ever written for that memory (the fold)
            for uid, winner in winners.items():
                assert winner == max(v for u, v in written if u == uid)
            assert all(not r.service.store.sync_pending() for r in replicas)
        finally:
            for replica in replicas:
                replica.close()


def _live(replica: Replica, uid: str) -> bool:
    try:
        replica.service.get_memory(uid)
    except NotFound:
        return False
    return True
