"""Retention: per-type TTLs for the trail, `nmem sweep [--dry-run]`, pinned rows exempt, space reclaimed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import record
from nmem.config import load_settings
from nmem.errors import ConfigError
from nmem.lifecycle.retention import ttl_policy
from nmem.models import OBS_TYPES
from nmem.service.api import Service
from store_engines import both_engines, sql_rows
from test_cli_support import as_json, invoke, ok

__all__ = ["both_engines"]  # every service test here runs on SQLite and PostgreSQL

DAY = 86400


def read(service: Service, path: str, at: float) -> int:
    out = record(service, "PostToolUse", now=at, tool_name="Read", tool_input={"file_path": path},
                 tool_response={"file": {"content": "x"}})
    return int(out.observation_id)


def bash(service: Service, command: str, at: float) -> int:
    out = record(service, "PostToolUse", now=at, tool_name="Bash", tool_input={"command": command},
                 tool_response={"stdout": "ok", "exit_code": 0})
    return int(out.observation_id)


def test_ttl_policy_reads_type_age_pairs_and_a_default() -> None:
    assert ttl_policy([]) == {}
    assert ttl_policy(["file_read=30d"]) == {"file_read": 30 * DAY}
    policy = ttl_policy(["*=1y", "file_read=2w"])
    assert policy["file_read"] == 14 * DAY and policy["command"] == 365 * DAY and set(policy) == set(OBS_TYPES)
    for bad in (["file_read"], ["nonsense=3d"], ["file_read=soon"], ["=3d"]):
        with pytest.raises(ConfigError):
            ttl_policy(bad)


@pytest.fixture
def trail(service: Service) -> dict[str, list[int]]:
    """Reads and commands, 100 and 5 days old, each with its own words."""
    now = service.now()
    old = now - 100 * DAY
    ids = {
        "old_reads": [read(service, f"/work/demo/src/ancient_{i}.py", old + i) for i in range(30)],
        "new_reads": [read(service, f"/work/demo/src/recent_{i}.py", now - 5 * DAY + i) for i in range(3)],
        "old_commands": [bash(service, f"make zebracommand{i}", old + 100 + i) for i in range(4)],
    }
    service.pin(f"o{ids['old_reads'][0]}")
    return ids


def test_sweep_without_a_policy_deletes_nothing(service: Service, trail: dict[str, list[int]]) -> None:
    report = service.sweep()
    assert report["policy"] == {} and report["deleted"] == 0
    assert service.status()["observations"] >= 37


def test_dry_run_counts_per_type_and_changes_nothing(nmem_home: Path, service: Service,
                                                       trail: dict[str, list[int]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_RETENTION_TTL", "file_read=30d,command=1y")
    before = service.status()["observations"]
    data = as_json("sweep", "--dry-run")
    assert data["by_type"] == {"file_read": 29}          # 30 old reads, one pinned; commands are younger than 1y
    assert data["would_delete"] == 29 and data["deleted"] == 0
    assert data["policy"] == {"file_read": "30d", "command": "1y"}
    assert service.status()["observations"] == before
    text = ok("sweep", "--dry-run").stdout
    assert "would delete: 29 observations" in text and "file_read  29" in text


def test_sweep_deletes_expired_rows_the_way_purge_does(nmem_home: Path, service: Service,
                                                        trail: dict[str, list[int]], engine: str) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home), "NMEM_RETENTION_TTL": "file_read=30d,*=60d"})
    svc = Service(service.store, settings)
    report = svc.sweep()
    assert report["by_type"] == {"file_read": 29, "command": 4}
    assert report["deleted"] == 33
    found = {o.id for o in service.get_observations([*trail["old_reads"], *trail["new_reads"],
                                                     *trail["old_commands"]])}
    assert found == {trail["old_reads"][0], *trail["new_reads"]}      # pinned and young rows stay
    assert service.search("zebracommand3", strict=True).hits == []                # gone from the index too
    assert service.search("ancient_5", strict=True).hits == []
    assert [h.record.id for h in service.search("ancient_0", strict=True).hits] == [trail["old_reads"][0]]
    assert report["reclaimed_bytes"] == max(0, report["bytes_before"] - report["bytes_after"])
    if engine == "sqlite":
        assert report["bytes_after"] <= report["bytes_before"]   # PostgreSQL's VACUUM keeps a table's files
        db = sqlite3.connect(service.store.path)
        try:
            assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # incremental vacuum gave pages back
            blob = Path(service.store.path).read_bytes()
            assert b"zebracommand2" not in blob                             # secure delete: not in the file
        finally:
            db.close()
    else:  # the sweep vacuumed the table (how many dead versions VACUUM may remove depends on
        # other sessions' open snapshots, e.g. a parallel test's, so the count is not asserted)
        assert sql_rows(service.store, "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relid = "
                                       "to_regclass('observations')")[0][0] is True
    assert svc.sweep()["deleted"] == 0                                     # nothing left to do


def test_bad_policy_is_a_config_error_and_changes_nothing(nmem_home: Path, service: Service,
                                                          trail: dict[str, list[int]]) -> None:
    before = service.status()["observations"]
    result = invoke("sweep", env={"NMEM_RETENTION_TTL": "file_reads=30d"})
    assert result.exit_code == 3
    assert "unknown observation type 'file_reads'" in result.stderr
    assert service.status()["observations"] == before
