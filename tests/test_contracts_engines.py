"""The contracts' store methods on both engines: `status --verify` (integrity and the full-text
indexes against their tables), `capture` saying whether the memory was indexed, and `forget` by
the integer number `recall` shows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from nmem.service.api import Service
from store_engines import both_engines, sql_rows
from test_cli_support import as_json, invoke, ok

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL


@pytest.fixture(autouse=True)
def project_demo(nmem_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_PROJECT", "demo")


@pytest.fixture
def memories(service: Service) -> dict[str, str]:
    lite = service.remember("SQLite in WAL mode for local development databases", namespace="decisions")
    cache = service.remember("Redis caches sessions for one hour", namespace="learnings", domain="user")
    return {"lite": lite.id, "cache": cache.id}


def break_memories_index(service: Service, engine: str, nmem_home: Path) -> None:
    """Make the memories' full-text index disagree with the table behind nmem's back."""
    if engine == "sqlite":
        conn = sqlite3.connect(nmem_home / "nmem.db")
        with conn:  # an index row lost
            conn.execute("DELETE FROM memories_fts_docsize WHERE id = (SELECT MIN(id) FROM memories)")
        conn.close()
    else:  # the text-search configuration changed after the rows were written: stored tsvectors are stale
        sql_rows(service.store, "ALTER TEXT SEARCH CONFIGURATION nmem ALTER MAPPING FOR asciiword WITH simple")


def test_status_verify_finds_an_index_out_of_step(memories: dict[str, str], service: Service, engine: str,
                                                  nmem_home: Path) -> None:
    good = as_json("status", "--verify")
    assert good["verify"] == {"ok": True, "integrity": "ok",
                              "fts": {"observations_fts": "ok", "prompts_fts": "ok", "memories_fts": "ok"}}
    assert "result:           ok" in ok("status", "--verify").stdout
    assert service.store.memory_indexed(memories["lite"]) is True
    break_memories_index(service, engine, nmem_home)
    bad = invoke("status", "--verify", "--format", "json")
    assert bad.exit_code == 4
    verify = json.loads(bad.stdout)["verify"]
    assert verify["ok"] is False and verify["integrity"] == "ok"
    assert verify["fts"]["memories_fts"] != "ok" and verify["fts"]["prompts_fts"] == "ok"
    assert bad.stderr.startswith("nmem: status --verify found problems: memories_fts: ")
    assert service.store.memory_indexed(memories["lite"]) is False
    assert invoke("status").exit_code == 0  # only --verify checks


def test_capture_says_the_memory_is_indexed(service: Service) -> None:
    data = as_json("capture", "decisions", "API versioning", "--content", "version in the path")
    assert data["indexed"] is True and data["warning"] is None
    assert service.store.memory_indexed(str(data["id"])) is True
    assert service.store.memory_indexed("01NOSUCHMEMORY0000000000000") is False


def test_forget_takes_the_number_recall_shows(memories: dict[str, str], service: Service) -> None:
    row = next(r for r in as_json("recall", "Redis")["results"] if r["id"] == memories["cache"])
    assert row["number"] == service.store.memory_numbers([memories["cache"]])[memories["cache"]]
    assert service.store.memory_uid(row["number"]) == memories["cache"]
    gone = as_json("forget", str(row["number"]))
    assert gone["id"] == memories["cache"]
    assert all(r["id"] != memories["cache"] for r in as_json("recall")["results"])
    again = invoke("forget", str(row["number"]))
    assert again.exit_code == 10 and again.stderr == f"nmem: memory not found: {row['number']}\n"
    assert invoke("forget", "0").exit_code == 11
    assert service.store.memory_uid(0) is None and service.store.memory_numbers([]) == {}
    assert service.get_memory(memories["lite"])  # nothing else touched
