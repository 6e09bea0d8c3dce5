"""`POST /api/v1/memories` (no idempotency key: sent twice, stored twice) on a real server whose
PostgreSQL connection a real TCP relay cuts at the COMMIT (`pg_proxy`): the client hears what the
database did. Committed, answer lost: 201, stored once. Cut before the COMMIT reached the server:
503 `disconnected` (nothing stored, sending it again is safe). Still running past the server's
wait: 503 `commit_unknown` (it may be stored: read before sending it again), stored once."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_support import http_server, wait_healthy
from pg_proxy import PgProxy, SlowCommits, proxy_for

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.postgres
HEADERS = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    relay = proxy_for(pg_url)
    yield relay
    relay.close()


def remember(port: int, content: str) -> tuple[int, dict[str, Any], str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/v1/memories", body=json.dumps({"content": content}), headers=HEADERS)
        response = conn.getresponse()
        return response.status, json.loads(response.read()), response.getheader("Retry-After")
    finally:
        conn.close()


def stored(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute("SELECT content FROM memories ORDER BY id")]


def test_a_memory_whose_commit_answer_is_cut_off_is_created_once(tmp_path: Path, pg_url: str,
                                                                 proxy: PgProxy) -> None:
    with http_server(tmp_path / "home", env={"NMEM_STORE_URL": proxy.url(pg_url)}) as server:
        wait_healthy(server.port)
        proxy.arm("after")
        status, answer, _ = remember(server.port, "the answer was cut off")
        assert proxy.done.is_set()
        assert status == 201 and answer["content"] == "the answer was cut off", answer
        assert stored(pg_url) == ["the answer was cut off"]
        assert remember(server.port, "and the next")[0] == 201


def test_a_memory_whose_commit_never_reached_the_server_is_refused_and_stored_when_sent_again(
        tmp_path: Path, pg_url: str, proxy: PgProxy) -> None:
    with http_server(tmp_path / "home", env={"NMEM_STORE_URL": proxy.url(pg_url)}) as server:
        wait_healthy(server.port)
        proxy.arm("before")
        status, answer, retry = remember(server.port, "cut before the commit")
        assert proxy.done.is_set()
        assert (status, answer["error"]["type"], retry) == (503, "disconnected", "2"), answer
        assert "nothing was stored" in answer["error"]["message"]
        assert stored(pg_url) == []
        assert remember(server.port, "cut before the commit")[0] == 201   # sent again, as the 503 says
        assert stored(pg_url) == ["cut before the commit"]


def test_a_memory_whose_commit_outcome_is_unknown_is_answered_so(tmp_path: Path, pg_url: str,
                                                                 proxy: PgProxy) -> None:
    """Told `disconnected` ("nothing was stored; try again") a client sends it again: twice."""
    slow = SlowCommits(pg_url, "memories")
    try:
        with http_server(tmp_path / "home", env={"NMEM_STORE_URL": proxy.url(pg_url)}) as server:
            wait_healthy(server.port)
            slow.hold()
            proxy.arm("after")
            status, answer, retry = remember(server.port, "outcome unknown")
            slow.release()
            assert proxy.done.is_set()
            assert (status, answer["error"]["type"], retry) == (503, "commit_unknown", "2"), answer
            deadline = time.monotonic() + 30
            while not stored(pg_url) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert stored(pg_url) == ["outcome unknown"]
            assert remember(server.port, "and the next")[0] == 201
    finally:
        slow.close()
