"""A SessionStart sent to a real `nmem serve` (`POST /api/v1/events`, `POST /api/v1/hook`): the
answer carries the context block, rendered once the event is committed and on a read thread,
never on the one writer thread, which meanwhile stores the next writes."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import event
from mcp_support import http_server, wait_healthy
from store_engines import ENGINES

pytestmark = [pytest.mark.slow]

CWD = "/home/dev/code/teamproj"
T0 = 1_790_000_000
QUIET = {"NMEM_MCP_POLL_MS": "600000", "NMEM_SERVER_DRAIN_MS": "0"}   # no reads of the server's own meanwhile


def post(port: int, path: str, body: Any, timeout: float = 30) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", "X-Nmem-CSRF": "1"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()




def remote(port: int, key: str, at: int, name: str, session: str, **fields: Any) -> dict[str, Any]:
    status, body = post(port, "/api/v1/events", {"key": key, "received_at": at,
                                                 "event": event(name, session, CWD, **fields)})
    assert status == 200, body
    return dict(body)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_resumed_sessions_block_shows_the_session_the_event_just_stored(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The session ended, then is resumed: the block leads with it as resumed and active again,
    which only the SessionStart just stored says (read before it, the session had ended)."""
    env = {"NMEM_STORE_URL": request.getfixturevalue("pg_url")} if engine == "postgres" else {}
    with http_server(tmp_path / "home", env={**env, **QUIET}) as server:
        port = server.port
        wait_healthy(port)
        first = remote(port, "start-0001", T0, "SessionStart", "sess-one-abc", source="startup")
        assert first["stored"] == "observation"
        remote(port, "prompt-0001", T0 + 5, "UserPromptSubmit", "sess-one-abc", prompt="fix the flaky deploy")
        remote(port, "end-00001", T0 + 60, "SessionEnd", "sess-one-abc", reason="exit")
        resumed = remote(port, "start-0002", T0 + 3 * 86400, "SessionStart", "sess-one-abc", source="resume")
        assert resumed["stored"] == "observation" and resumed["session_id"] == "sess-one-abc"
        block = resumed["context"]
        assert block.startswith("<nmem-context>") and "Asked: fix the flaky deploy (p1)" in block
        assert "## This session (resumed) ssess-one · last active" in block, block
        # Claude Code's own HTTP hook: its answer carries the same block as additionalContext
        status, hooked = post(port, "/api/v1/hook", event("SessionStart", "sess-one-abc", CWD, source="resume"))
        assert status == 200, hooked
        assert "## This session (resumed) ssess-one · last active" in \
            hooked["hookSpecificOutput"]["additionalContext"]
        # a repeated key stores nothing and still answers with the block
        again = remote(port, "start-0002", T0 + 3 * 86400, "SessionStart", "sess-one-abc", source="resume")
        assert again["skipped"] == "duplicate" and "ssess-one" in again["context"]


@pytest.mark.postgres
def test_the_writer_stores_other_events_while_a_session_start_renders(tmp_path: Path, pg_url: str) -> None:
    """A SessionStart's block is rendered after its commit, off the writer thread: while its
    render is held (another connection holds a lock on the memories table, which the block
    reads and recording events does not touch), the writer stores the next events. Rendered on
    the writer thread, the render held them all: the next prompt waited for the lock."""
    import psycopg

    with http_server(tmp_path / "home", env={"NMEM_STORE_URL": pg_url, **QUIET}) as server:
        port = server.port
        wait_healthy(port)
        remote(port, "warm-0001", T0, "SessionStart", "sess-warm-1", source="startup")   # the first pays once
        remote(port, "warm-0002", T0 + 1, "UserPromptSubmit", "sess-warm-1", prompt="deploy the cache")
        answers: dict[str, Any] = {}
        with psycopg.connect(pg_url, autocommit=True) as holder, psycopg.connect(pg_url, autocommit=True) as watch:
            with holder.transaction():
                holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")

                def start() -> None:
                    answers["start"] = remote(port, "start-0003", T0 + 10, "SessionStart", "sess-two-def",
                                              source="startup")

                starting = threading.Thread(target=start)
                starting.start()
                waiting_for_lock(watch)
                status, prompt = post(port, "/api/v1/events", {
                    "key": "prompt-0003", "received_at": T0 + 11,
                    "event": event("UserPromptSubmit", "sess-three", CWD, prompt="stored meanwhile")}, timeout=20)
                assert status == 200 and prompt["stored"] == "prompt", prompt
                assert "start" not in answers   # its render is still held
                # the SessionStart itself is committed: its session is readable already
                row = watch.execute("SELECT project FROM sessions WHERE id = 'sess-two-def'").fetchone()
                assert row == ("teamproj",)
            # the lock is released (also when an assertion failed): the render goes on
            starting.join(timeout=30)
        assert answers["start"]["stored"] == "observation"
        assert "## Last session ssess-war " in answers["start"]["context"]


def waiting_for_lock(conn: Any) -> None:
    """Until a backend of the server waits for the lock on the memories table."""
    ends = time.monotonic() + 30
    while conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'memories'::regclass"
                       ).fetchone()[0] == 0:
        assert time.monotonic() < ends, "no render waited for the memories table"
        time.sleep(0.02)
