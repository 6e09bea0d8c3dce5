"""`CaptureService.merge_memory` (what every import writes memories with) and the store reads and
writes behind export and import."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Clock
from nmem.config import load_settings
from nmem.errors import ContentBlocked, ValidationError
from nmem.models import Memory
from nmem.service.api import Service
from nmem.store import NewMemory, SearchFilters, open_store

UID = "01J0000000000000000000MERG"


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Service]:
    # another database: SQLite whichever engine `service` runs on (a merge across engines, too)
    env = {k: v for k, v in os.environ.items() if k != "NMEM_STORE_URL"}
    svc = Service.open(load_settings({**env, "NMEM_HOME": str(tmp_path / "other")}))
    yield svc
    svc.close()


def memory(content: str, updated_at: int, **fields: object) -> Memory:
    values: dict[str, object] = {"id": UID, "domain": "project:demo", "namespace": "decisions", "summary": "",
                                 "content": content, "created_at": 1_700_000_000, "updated_at": updated_at}
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


def test_the_newer_copy_wins_and_a_tie_goes_the_same_way_everywhere(service: Service, other: Service) -> None:
    assert service.merge_memory(memory("TTL is 60s", 1_700_000_100)) == "added"
    assert service.merge_memory(memory("TTL is 3600s", 1_700_000_200)) == "updated"
    assert service.merge_memory(memory("TTL is 60s", 1_700_000_100)) == "kept"
    assert service.get_memory(UID).content == "TTL is 3600s"

    # two databases that changed the memory in the same second converge, whichever imports first
    service.merge_memory(memory("A: cache for 5 minutes", 1_700_000_300))
    other.merge_memory(memory("B: cache for 10 minutes", 1_700_000_300))
    mine, theirs = service.get_memory(UID), other.get_memory(UID)
    assert service.merge_memory(theirs) in ("updated", "kept") and other.merge_memory(mine) in ("updated", "kept")
    assert service.get_memory(UID).content == other.get_memory(UID).content == "B: cache for 10 minutes"


def test_a_tombstone_forgets_and_a_later_edit_brings_the_memory_back(service: Service) -> None:
    service.merge_memory(memory("Use Redis", 1_700_000_100))
    assert service.merge_memory(memory("", 1_700_000_200, deleted_at=1_700_000_200)) == "deleted"
    gone = service.store.get_memory(UID)
    assert gone is not None and gone.deleted_at == 1_700_000_200 and gone.content == ""
    assert service.merge_memory(memory("Use Redis", 1_700_000_100)) == "kept", "an older edit stays forgotten"
    assert service.merge_memory(memory("Use Redis 7", 1_700_000_300)) == "updated"
    back = service.get_memory(UID)
    assert (back.content, back.deleted_at) == ("Use Redis 7", None)
    assert [h.record.id for h in service.recall("Redis", project="demo")] == [UID]


def test_local_access_counts_stay_local(service: Service, clock: Clock) -> None:
    service.merge_memory(memory("Use WAL", 1_700_000_100, access_count=7, accessed_at=1_700_000_150))
    service.recall("WAL", project="demo")
    before = service.get_memory(UID)
    assert before.access_count == 8
    service.merge_memory(memory("Use WAL mode", 1_700_000_200, access_count=0, accessed_at=None))
    after = service.get_memory(UID)
    assert (after.content, after.access_count, after.accessed_at) == ("Use WAL mode", 8, before.accessed_at)


def test_replacing_a_memory_reindexes_its_text(service: Service) -> None:
    service.merge_memory(memory("Deploy with ansible", 1_700_000_100))
    service.merge_memory(memory("Deploy with terraform", 1_700_000_200, tags=["infra"], namespace="patterns"))
    assert service.recall("ansible", project="demo") == []
    (hit,) = service.recall("terraform", project="demo")
    assert (hit.record.namespace, hit.record.tags) == ("patterns", ["infra"])


def test_what_would_not_be_stored_is_refused(service: Service) -> None:
    with pytest.raises(ContentBlocked):
        service.merge_memory(memory("<private>all of it</private>", 1))
    with pytest.raises(ValidationError, match="needs its uid"):
        service.merge_memory(memory("", 1, id="", deleted_at=1))
    with pytest.raises(ValidationError, match="summary is 101 characters"):
        service.merge_memory(memory("x", 1, summary="s" * 101))
    stored = service.importable(memory("key AKIAIOSFODNN7EXAMPLE here", 1))
    assert "AKIAIOSFODNN7EXAMPLE" not in stored.content, "secrets are redacted as on every write"


def test_an_export_reads_one_snapshot(service: Service) -> None:
    service.remember("First", namespace="learnings", project="demo")
    writer = open_store(service.settings.store_url)  # another connection, as another process would write
    try:
        with service.store.read_snapshot():
            before = list(service.store.export_memories(SearchFilters(), deleted=False))
            writer.insert_memory(NewMemory("01J00000000000000000000NEW", "user", "context", "n", "n", 1))
            during = list(service.store.export_memories(SearchFilters(), deleted=False))
        after = list(service.store.export_memories(SearchFilters(), deleted=False))
    finally:
        writer.close()
    assert len(before) == len(during) == 1 and len(after) == 2
