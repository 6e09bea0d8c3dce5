"""Keyless writes (sent twice, stored twice) on a real server whose PostgreSQL connection a real
TCP relay cuts at the COMMIT (`pg_proxy`): the client hears what the database did. `POST
/api/v1/memories`, alone in its transaction: committed, answer lost: 201, stored once; cut before
the COMMIT reached the server: 503 `disconnected` (nothing stored, sending it again is safe);
still running past the server's wait: 503 `commit_unknown` (it may be stored: read before
sending it again), stored once. Claude Code's `POST /api/v1/hook` events, grouped in one
transaction by the writer: stored once each whatever became of their COMMIT."""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
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


# -- Claude Code's HTTP hook: keyless events the writer groups into one transaction -------------

CWD = "/home/dev/code/outcome"
EVENTS = [{"hook_event_name": "SessionStart", "session_id": "s1", "cwd": CWD, "source": "startup"},
          {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": CWD, "prompt": "s1 prompt 1"},
          {"hook_event_name": "SessionStart", "session_id": "s2", "cwd": CWD, "source": "startup"},
          {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": CWD, "prompt": "s1 prompt 2"},
          {"hook_event_name": "UserPromptSubmit", "session_id": "s2", "cwd": CWD, "prompt": "s2 prompt 1"}]


def post_hook(port: int, event: dict[str, Any]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/api/v1/hook", body=json.dumps({**event, "transcript_path": ""}), headers=HEADERS)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def prompts(pg_url: str) -> dict[str, int]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return {str(c): int(n) for c, n in conn.execute("SELECT content, COUNT(*) FROM prompts GROUP BY content")}


def shared_writes(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("nmem_shared_transaction_writes_total"))


def hooks_grouped(pg_url: str, port: int, app: str, slow: SlowCommits | None) -> list[tuple[int, Any]]:
    """EVENTS sent while the writer thread is held (a memory's write waits for a table lock the
    test holds), so the writer takes them in one transaction once the lock goes; their answers."""
    answers: list[Any] = [None] * len(EVENTS)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("BEGIN")
        admin.execute("LOCK TABLE memories IN EXCLUSIVE MODE")
        holder = threading.Thread(target=remember, args=(port, "holds the writer"))
        holder.start()
        deadline = time.monotonic() + 30
        while not admin.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
                                "AND wait_event_type = 'Lock'", (app,)).fetchall():
            assert time.monotonic() < deadline, "the memory's write never waited for the lock"
            time.sleep(0.02)

        def send(i: int) -> None:
            answers[i] = post_hook(port, EVENTS[i])
        senders = [threading.Thread(target=send, args=(i,)) for i in range(len(EVENTS))]
        for sender in senders:
            sender.start()
        time.sleep(2)   # the five reach the writer's queue (checked below: one shared transaction)
        admin.execute("COMMIT")
        holder.join(60)
    for sender in senders:
        sender.join(20)   # then the slowed COMMITs go on: a lane that ran the writes again waits on them
    if slow is not None:
        slow.release()
    for sender in senders:
        sender.join(120)
    return answers


@pytest.mark.parametrize("cut", ["after", "before", "unknown"])
def test_grouped_keyless_hook_events_are_stored_once_whatever_became_of_their_commit(
        tmp_path: Path, pg_url: str, proxy: PgProxy, cut: str) -> None:
    """after: committed, the answer lost: all stored once, answered 200. before: aborted: each runs
    again alone, stored once, 200. unknown (the COMMIT still running past the server's wait):
    each answered 503 `commit_unknown`, none run again, stored once by that COMMIT: run again
    alone as any failed batch, all five were stored twice."""
    app = f"nmem-outcome-{uuid.uuid4().hex[:8]}"
    url = f"{proxy.url(pg_url)}&application_name={app}"
    slow = SlowCommits(pg_url, "prompts") if cut == "unknown" else None
    try:
        with http_server(tmp_path / "home", env={"NMEM_STORE_URL": url}) as server:
            wait_healthy(server.port)
            if slow is not None:
                slow.hold()
            proxy.arm("before" if cut == "before" else "after", skip=1)   # the memory's COMMIT goes through
            answers = hooks_grouped(pg_url, server.port, app, slow)
            assert proxy.done.is_set()
            # Grouped, or one event alone would have met the cut (a 503 below); committed, the metrics tell
            assert cut != "after" or shared_writes(server.port) == len(EVENTS), "the events were not grouped"
            deadline = time.monotonic() + 30
            while sum(prompts(pg_url).values()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            assert prompts(pg_url) == {"s1 prompt 1": 1, "s1 prompt 2": 1, "s2 prompt 1": 1}
            statuses = [status for status, _ in answers]
            if cut == "unknown":
                assert statuses == [503] * len(EVENTS), answers
                assert {a["error"]["type"] for _, a in answers} == {"commit_unknown"}, answers
            else:
                assert statuses == [200] * len(EVENTS), answers
    finally:
        if slow is not None:
            slow.close()
