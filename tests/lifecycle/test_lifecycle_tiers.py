"""Tiers: computed from recency, use and importance, off the hot path; archived hidden from recall."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import Clock
from nmem.lifecycle import tiers
from nmem.lifecycle.tiers import DAY, tier_of
from nmem.service.api import Service
from store_engines import both_engines
from test_cli_support import as_json, ok

__all__ = ["both_engines"]  # every service test here runs on SQLite and PostgreSQL

NOW = 1_790_000_000
THREADS = 4


def tier_at(days: float, namespace: str = "learnings", count: int = 0, pinned: bool = False,
            tags: list[str] | None = None, current: str = "warm", accessed: int | None = None) -> str:
    return tier_of(namespace, int(NOW - days * DAY), accessed, count, pinned, tags or [], current, NOW, 30.0)


def test_recency_moves_an_untouched_memory_down_the_tiers() -> None:
    assert [tier_at(d) for d in (0, 21, 30, 59, 61, 150, 160, 2000)] == \
        ["hot", "hot", "warm", "warm", "cold", "cold", "cold", "cold"]     # knowledge never archives by age
    assert [tier_at(d, namespace="progress") for d in (0, 10, 30, 80, 150)] == \
        ["hot", "warm", "warm", "cold", "archived"]                        # notes on work in flight do


def test_use_and_importance_keep_a_memory_up() -> None:
    assert tier_at(45) == "warm"
    assert tier_at(45, count=8) == "hot"                     # recalled often
    assert (tier_at(30), tier_at(30, namespace="decisions")) == ("warm", "hot")   # decisions weigh more
    assert tier_at(45, namespace="progress") == "cold"       # notes on work in flight weigh less
    assert tier_at(400, pinned=True) == "hot"                # a pin keeps it hot, whatever its age


def test_archived_stays_archived_until_read_again() -> None:
    assert tier_at(0, current="archived") == "archived"                            # archived by hand today
    assert tier_at(10, current="archived", accessed=NOW - 60) == "hot"             # read since
    merged = [tiers.MERGED_TAG]
    assert tier_at(10, current="archived", accessed=NOW - 60, tags=merged) == "archived"  # consolidation's
    assert tier_at(10, current="warm", tags=merged) == "hot"  # its tier edited back: computed again


def test_recompute_stores_changed_tiers_without_a_sync_operation(service: Service, clock: Clock) -> None:
    old = service.remember("Retry the billing client with backoff", namespace="learnings", project="demo")
    clock.advance(70 * DAY)
    fresh = service.remember("The invoice worker needs TZ=UTC", namespace="learnings", project="demo")
    ops = service.store.sync_outbox()
    moves = service.recompute_tiers()
    assert moves == {"warm>cold": 1, "warm>hot": 1}
    assert service.get_memory(old.id).tier == "cold" and service.get_memory(fresh.id).tier == "hot"
    assert service.get_memory(old.id).updated_at == old.updated_at   # bookkeeping, not an edit
    assert service.store.sync_outbox() == ops
    assert service.status()["by_tier"] == {"hot": 1, "warm": 0, "cold": 1, "archived": 0}
    assert service.status()["tiers_computed_at"] == service.now()


def test_recall_recomputes_stale_tiers_and_hides_archived(service: Service, clock: Clock) -> None:
    gone = service.remember("Staging uses the blue cluster", namespace="context", project="demo")
    lasting = service.remember("The blue cluster runs Debian 12", namespace="learnings", project="demo")
    clock.advance(200 * DAY)
    assert [h.record.id for h in service.recall("cluster", project="demo")] == [lasting.id]   # computed first
    assert service.get_memory(gone.id).tier == "archived" and service.get_memory(lasting.id).tier == "cold"
    hits = service.recall("staging cluster", project="demo", include_archived=True)
    assert [h.record.id for h in hits] == [gone.id]
    assert service.get_memory(gone.id).access_count == 1
    clock.advance(2 * DAY)                       # the next day's recall recomputes: read again, it is back
    assert [h.record.id for h in service.recall("staging cluster", project="demo")] == [gone.id]
    assert service.get_memory(gone.id).tier == "hot"


def test_get_counts_an_access(service: Service, clock: Clock) -> None:
    memory = service.remember("Use ruff for linting", namespace="conventions", project="demo")
    clock.advance(60)
    records, missing = service.get([memory.id, "o999"])
    assert [r.id for r in records] == [memory.id] and missing == ["o999"]
    stored = service.get_memory(memory.id)
    assert stored.access_count == 1 and stored.accessed_at == service.now()


def test_status_shows_every_tier_as_bars_and_json(nmem_home: Path, service: Service,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_PROJECT", "demo")
    service.remember("Pinned rule", namespace="decisions", pinned=True)
    service.remember("Old note", namespace="context", tier="archived")
    data = as_json("status")
    assert data["by_tier"] == {"hot": 0, "warm": 1, "cold": 0, "archived": 1}   # as stored until recomputed
    assert data["llm"] == "disabled"
    ok("sweep")                                                                    # recomputes tiers
    text = ok("status").stdout
    block = text[text.index("By tier:"):].splitlines()[:5]
    assert block[0] == "By tier:"
    assert [line.split()[:2] for line in block[1:]] == [["hot", "1"], ["warm", "0"], ["cold", "0"],
                                                        ["archived", "1"]]
    assert "█" in block[1] and "█" in block[4]


def test_recalls_at_once_recompute_stale_tiers_once(service: Service, clock: Clock) -> None:
    """A server's read threads recalling together on stale tiers: one recomputes and stores them,
    the others take its tiers (each used to store them again, a write transaction apiece)."""
    service.remember("Staging uses the blue cluster", namespace="context", project="demo")
    clock.advance(200 * DAY)
    stored: list[int] = []
    arrived = threading.Barrier(THREADS)
    store_tiers = service.store.set_tiers

    def counted(changed: Any, now: int) -> None:   # the real write, counted
        stored.append(len(changed))
        try:   # held until every thread recalls: none can find the tiers stored by another meanwhile
            arrived.wait(timeout=1)
        except threading.BrokenBarrierError:
            pass   # the others wait for this one: it alone recomputes
        store_tiers(changed, now)

    service.store.set_tiers = counted   # type: ignore[method-assign]
    found: list[int] = []

    def recall() -> None:
        found.append(len(service.recall("cluster", project="demo")))

    threads = [threading.Thread(target=recall) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stored == [1] and found == [0] * THREADS   # archived once, hidden from every recall
