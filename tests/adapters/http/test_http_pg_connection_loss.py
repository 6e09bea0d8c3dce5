"""A real `nmem serve` on PostgreSQL whose backends the server ends (`pg_terminate_backend`) where
a request does not see it: under the change watch's read. The server goes on serving: every write
after it is stored and answered 201, as before."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import pytest

from http_support import CSRF
from mcp_support import http_server

psycopg = pytest.importorskip("psycopg")


def _admin(pg_url: str) -> Any:
    return psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True)


@pytest.mark.postgres
def test_a_server_whose_change_watch_lost_its_backend_serves_every_later_write(tmp_path: Path,
                                                                              pg_url: str) -> None:
    """Once, in CI: 12 writes answered 201, then 48 answered 500. The change watch's read of what
    has settled waits for the writers' lock; its backend ended there raised psycopg's own error,
    which ended the watch, the server's lifespan and its threads with it, while uvicorn kept
    answering: 500 to every request after."""
    app = f"nmem-watch-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema = str(conn.execute("SELECT current_schema()").fetchone()[0])
    env = {"NMEM_STORE_URL": f"{pg_url}&application_name={quote(app)}", "NMEM_MCP_POLL_MS": "50"}
    with http_server(tmp_path / "home", env=env) as server, \
            httpx2.Client(base_url=f"http://127.0.0.1:{server.port}", headers=CSRF, timeout=30) as client:
        def write(text: str) -> int:
            return client.post("/api/v1/memories", json={"content": text, "domain": "user"}).status_code

        with _admin(pg_url) as admin, _admin(pg_url) as writer:
            writer.execute("BEGIN")   # a writer in flight holds the feed lock shared, as nmem's writers do
            writer.execute("SELECT pg_advisory_xact_lock_shared(28269, hashtext(%s))", (schema,))
            waiting = ("SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                       "AND wait_event_type = 'Lock' AND wait_event = 'advisory'")
            # A commit: the watch reads the feed, and waits for the lock. A watch that read the
            # change token only after this write (a server slow to start its lifespan under load)
            # sees nothing new, so write again until it waits.
            before: list[str] = []
            deadline = time.monotonic() + 20
            while True:
                before.append(f"before {len(before)}")
                assert write(before[-1]) == 201
                settle = time.monotonic() + 1
                while not (pids := [r[0] for r in admin.execute(waiting, (app,))]) and time.monotonic() < settle:
                    time.sleep(0.02)
                if pids:
                    break
                assert time.monotonic() < deadline, "the change watch never waited for the feed lock"
            admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
            writer.execute("COMMIT")
        answers = []
        for i in range(10):   # the broken server's lifespan ends within moments: keep writing a while
            answers.append(write(f"after {i}"))
            time.sleep(0.1)
        log = server.log.read_text(errors="replace")
    assert answers == [201] * 10, (answers, log[-3000:])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stored = {r[0] for r in conn.execute("SELECT content FROM memories")}
    assert stored == {*before, *(f"after {i}" for i in range(10))}
    assert "Traceback" not in log, log[-3000:]
