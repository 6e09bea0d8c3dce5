"""The MCP change watcher of a real `nmem serve` on PostgreSQL reads the change feed off the event
loop: its read first takes the feed lock for an instant (`settled_heads`), which waits while a
writer's transaction holds it (up to 2 s). Run on the loop, that wait stopped every request of
the server: under `make bench-team --pg` the first 200 searches were all answered at once, behind
the first batch of SessionStarts. Here a transaction of the test's own holds the lock as a
writer does; while the watcher waits for it, the server still answers."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from mcp_support import http_server

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.postgres
HEADERS = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}
# the watcher's waits for the feed lock (its `_settle`): (pid, when its statement began)
FEED_WAITS = ("SELECT pid, query_start FROM pg_stat_activity WHERE application_name = %s "
              "AND wait_event_type = 'Lock' AND wait_event = 'advisory'")


def request(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=HEADERS)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def memory(port: int, text: str) -> int:
    return request(port, "POST", "/api/v1/memories", {"content": text, "domain": "user"})[0]


def test_the_server_answers_while_its_change_watcher_waits_for_the_feed_lock(tmp_path: Path, pg_url: str) -> None:
    app = f"nmem-feed-wait-{uuid.uuid4().hex[:8]}"
    env = {"NMEM_STORE_URL": f"{pg_url}&application_name={quote(app)}", "NMEM_SERVER_DRAIN_MS": "0"}
    with http_server(tmp_path / "home", env=env) as server, \
            psycopg.connect(pg_url, autocommit=True) as admin, psycopg.connect(pg_url) as writer:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert memory(server.port, "first") == 201
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        # a writer's transaction under way: it holds the feed lock shared, as the server's writer does
        writer.execute("SELECT pg_advisory_xact_lock_shared(28269, hashtext(current_schema()))")
        # a commit the watcher will read (the server's own writer shares the lock)
        assert memory(server.port, "second") == 201
        deadline = time.monotonic() + 30
        while not (waits := admin.execute(FEED_WAITS, (app,)).fetchall()):
            assert time.monotonic() < deadline, "the change watcher never waited for the feed lock"
            time.sleep(0.01)
        status, body = request(server.port, "GET", "/api/v1/search?query=second&scope=memories")
        assert status == 200 and body["count"] == 1
        # answered during that very wait: the watcher's read did not hold the loop
        assert set(waits) <= set(admin.execute(FEED_WAITS, (app,)).fetchall())
        writer.rollback()
