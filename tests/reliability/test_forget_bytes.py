"""Forgetting means gone: after `forget` (a memory) and `purge` (observations) the words are in
neither the database file nor its WAL, byte for byte, while the rest stays searchable.

Each test first finds the word in the raw bytes (so the scan can fail), then deletes, then scans
again with the store still open, as a long-running MCP server holds it: the delete path itself
must scrub, not a later close.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import run_nmem
from fixtures.harness import event, hook_env
from mcp_support import structured
from nmem.adapters.mcp.server import NmemServer
from nmem.capture.claude_code import parse
from nmem.config import Settings, load_settings
from nmem.service.api import Service
from nmem.store.sqlite import SqliteStore

T0 = 1_790_000_000
CWD = "/home/dev/code/billing-api"
WORD = "zqxvbrrkt"          # no English suffix: the porter stemmer indexes it as written
PATH_WORD = "qwkkzvpltt"    # a word that only a file path carries
FILLER = 300                # rows either side of the secret: the FTS5 index holds merged segments


@pytest.fixture
def db(nmem_home: Path) -> Path:
    return nmem_home / "nmem.db"


@pytest.fixture
def bystander(settings: Settings, db: Path) -> Iterator[SqliteStore]:
    """Another process's connection (an MCP server, a hook): SQLite cannot just delete the WAL."""
    Service.open(settings).close()
    store = SqliteStore(str(db))
    store.get_session("warm-up")
    yield store
    store.close()


def raw(db: Path) -> bytes:
    """Every byte of the database and of its WAL."""
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def remember_around(service: Service, secret: str) -> str:
    for i in range(FILLER):
        service.remember(f"note {i} about the billing ledger and its rounding rules", domain="user")
    memory = service.remember(f"the staging vault hint is {secret}, keep it out of git",
                              summary=f"{secret} hint", tags=[secret], domain="user")
    for i in range(FILLER, 2 * FILLER):
        service.remember(f"note {i} about the billing ledger and its rounding rules", domain="user")
    return memory.id


def bash(service: Service, command: str, at: int, file_path: str | None = None) -> int:
    tool, tool_input = ("Bash", {"command": command}) if file_path is None else \
        ("Read", {"file_path": file_path})
    payload = event("PostToolUse", "s-1", CWD, tool_name=tool, tool_input=tool_input,
                    tool_response={"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False})
    obs = service.record_event(parse(payload, now=at)).observation_id
    assert obs is not None
    return int(obs)


def record_around(service: Service) -> list[int]:
    """Ordinary observations with three holding the secret (command, output-free command, file path)."""
    secret: list[int] = []
    for i in range(FILLER):
        bash(service, f"pytest tests/test_ledger.py -k case_{i}", T0 + i)
    secret.append(bash(service, f"curl -H 'X-Trace: {WORD}' https://staging.example/health", T0 + FILLER))
    secret.append(bash(service, f"grep -r {WORD} config/", T0 + FILLER + 1))
    secret.append(bash(service, "", T0 + FILLER + 2, file_path=f"/home/dev/code/billing-api/{PATH_WORD}/keys.py"))
    for i in range(FILLER, 2 * FILLER):
        bash(service, f"pytest tests/test_ledger.py -k case_{i}", T0 + 10 + FILLER + i)
    return secret


def fts_integrity(db: Path, table: str) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        conn.commit()
    finally:
        conn.close()


def test_a_forgotten_memory_leaves_no_trace_in_the_file(service: Service, bystander: SqliteStore,
                                                        db: Path) -> None:
    memory_id = remember_around(service, WORD)
    assert WORD.encode() in raw(db)
    service.forget(memory_id)
    assert WORD.encode() not in raw(db)
    assert db.with_name("nmem.db-wal").stat().st_size == 0  # folded into the file and truncated
    assert service.recall(WORD) == []
    assert len(service.recall("ledger", limit=100)) == 100  # the rest is still found
    fts_integrity(db, "memories_fts")


def test_purged_observations_leave_no_trace_in_the_file(service: Service, bystander: SqliteStore,
                                                        db: Path) -> None:
    ids = record_around(service)
    assert WORD.encode() in raw(db) and PATH_WORD.encode() in raw(db)
    assert service.purge(ids=ids, confirm=True) == 3
    data = raw(db)
    assert WORD.encode() not in data and PATH_WORD.encode() not in data
    assert service.store.get_observations(ids) == []
    assert len(service.store.get_observations(list(range(1, 2 * FILLER + 4)))) == 2 * FILLER
    fts_integrity(db, "observations_fts")


def test_observations_purged_by_age_leave_no_trace_in_the_file(service: Service, bystander: SqliteStore,
                                                               db: Path) -> None:
    record_around(service)
    service.clock = lambda: float(T0 + 10 * FILLER)
    assert WORD.encode() in raw(db)
    deleted = service.purge(obs_type="command", older_than=10 * FILLER - FILLER - 5, confirm=True)
    assert deleted == FILLER + 2  # every command up to and including the secret ones
    assert WORD.encode() not in raw(db)
    fts_integrity(db, "observations_fts")


def test_observations_purged_by_query_leave_no_trace_in_the_file(service: Service, bystander: SqliteStore,
                                                                 db: Path) -> None:
    record_around(service)
    assert WORD.encode() in raw(db)
    assert service.purge(query=WORD, confirm=True) == 2  # the command and the grep that hold the word
    assert WORD.encode() not in raw(db)
    assert db.with_name("nmem.db-wal").stat().st_size == 0
    fts_integrity(db, "observations_fts")


@pytest.mark.anyio
async def test_forget_through_the_mcp_server_scrubs_while_the_server_runs(service: Service, db: Path) -> None:
    memory_id = remember_around(service, WORD)
    assert WORD.encode() in raw(db)
    async with Client(NmemServer(service, project="billing-api").server, mode="legacy") as client:
        assert structured(await client.call_tool("forget", {"id": memory_id}))["id"] == memory_id
        assert WORD.encode() not in raw(db)


def test_forget_and_purge_on_the_command_line(nmem_home: Path, db: Path) -> None:
    with Service.open(load_settings(hook_env(nmem_home))) as service:
        memory_id = remember_around(service, WORD)
        ids = record_around(service)
    assert WORD.encode() in raw(db)
    watcher = SqliteStore(str(db))  # a server reading the same file all along
    try:
        watcher.get_session("s-1")
        for args in (["forget", memory_id], ["purge", *(a for i in ids for a in ("--id", str(i))), "--confirm"]):
            done = run_nmem(args, env=hook_env(nmem_home))
            assert done.returncode == 0, done.stderr
        assert WORD.encode() not in raw(db) and PATH_WORD.encode() not in raw(db)
        found: list[dict[str, Any]] = json.loads(run_nmem(["search", "ledger", "--format", "json"],
                                                          env=hook_env(nmem_home)).stdout)
        assert found
    finally:
        watcher.close()
