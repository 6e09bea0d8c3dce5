"""Group commit on the REST server's writer thread, on SQLite and PostgreSQL: hook events waiting
together are stored in one transaction, each in its own savepoint. A failing write gets its own
error and leaves nothing; every other is stored exactly once; no caller hears "stored" before the
commit; change-feed subscribers see each committed change once and never an undone one; a server
killed after answering has kept every write it acknowledged."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_http_workers import SseClient

from http_support import queued_behind_one_write
from mcp_support import http_server
from nmem.adapters.http.threads import WriteLane
from nmem.capture.agents import parse
from nmem.config import Settings, load_settings
from nmem.errors import Forbidden
from nmem.models import prompt_urn
from nmem.service.api import Service
from nmem.store import open_store
from store_engines import both_engines, sql_rows

__all__ = ["both_engines"]
CSRF = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}
CWD = "/home/dev/code/grouped"


def hook_event(session: str, i: int) -> dict[str, Any]:
    if i == 0:
        return {"hook_event_name": "SessionStart", "session_id": session, "cwd": CWD, "source": "startup",
                "transcript_path": ""}
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": CWD,
            "prompt": f"{session} prompt {i} about the cache", "transcript_path": ""}


def stored_prompts(store_url: str) -> dict[str, int]:
    store = open_store(store_url)
    try:
        rows = sql_rows(store, "SELECT content, COUNT(*) FROM prompts GROUP BY content")
    finally:
        store.close()
    return {str(content): int(str(n)) for content, n in rows}


def post(port: int, body: dict[str, Any]) -> tuple[int, Any]:
    """POST one keyed event as `nmem record --remote` does: a 503 with Retry-After (the write
    queue turned it away under load, nothing stored) is sent again after the wait it names."""
    for _ in range(30):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("POST", "/api/v1/events", body=json.dumps(body), headers=CSRF)
            response = conn.getresponse()
            status, answer, wait = response.status, json.loads(response.read()), response.getheader("Retry-After")
        finally:
            conn.close()
        if status != 503 or wait is None:
            return status, answer
        time.sleep(min(float(wait), 2.0))
    return status, answer


def test_waiting_writes_share_one_commit_and_a_failing_one_is_undone_alone(settings: Settings) -> None:
    """The lane itself, made to batch for certain: a first write holds the writer thread while
    the others queue behind it."""
    service = Service.open(settings)
    store = service.store
    try:
        def record(session: str, i: int, key: str) -> Callable[[], Any]:
            return lambda: service.record_event(parse(hook_event(session, i)), spool_id=key)

        def fails_after_writing() -> None:
            service.record_event(parse(hook_event("undone", 0)), spool_id="k-undone-0")
            service.record_event(parse(hook_event("undone", 1)), spool_id="k-undone-1")
            raise Forbidden("refused after writing")

        async def scenario() -> list[Any]:
            lane = WriteLane(store, 64, 1000, float("inf"), service.forget_uncommitted)
            answers = await queued_behind_one_write(lane, [
                record("s1", 0, "k1-0"), record("s1", 1, "k1-1"), fails_after_writing,
                record("s2", 0, "k2-0"), record("s1", 2, "k1-2"),
                record("s1", 2, "k1-2"),  # the same key again in the same batch: stored once
                record("s2", 1, "k2-1")])
            assert (lane.commits, lane.shared) == (1, 7), "the seven waiting writes took one transaction"
            alone = await lane.run(record("s2", 2, "k2-2"), grouped=True)  # nothing waiting: as before
            assert (lane.commits, lane.alone) == (1, 2) and alone.stored
            lane.close()
            return answers

        answers = asyncio.run(scenario())
        assert isinstance(answers[2], Forbidden)
        assert [getattr(a, "skipped", None) for i, a in enumerate(answers) if i != 2] == \
            [None, None, None, None, "duplicate", None]
        stored = {f"s{s} prompt {i} about the cache": 1 for s in (1, 2) for i in (1, 2)}
        assert stored_prompts(settings.store_url) == stored
        assert store.get_session("undone") is None and store.get_session("s2") is not None
    finally:
        service.close()


def test_concurrent_events_over_http_are_stored_once_and_streamed_once(tmp_path: Path, store_url: str) -> None:
    writers, events = 12, 6
    with http_server(tmp_path / "home", env={"NMEM_STORE_URL": store_url, "NMEM_STREAMING_POLL_MS": "50"}) as server:
        sse = SseClient(server.port)
        try:
            answers: list[tuple[int, Any]] = []
            lock = threading.Lock()
            start = threading.Barrier(writers + 1)

            def writer(w: int) -> None:
                start.wait()
                for i in range(events):
                    body = {"key": f"key-w{w}-{i}", "event": hook_event(f"sess{w}", i)}
                    for _ in range(2 if i == 3 else 1):  # one event each sent twice, as a retry would
                        answer = post(server.port, body)
                        with lock:
                            answers.append(answer)

            def refused() -> None:
                start.wait()
                answer = post(server.port, {"key": "key-other", "store": "0123456789abcdef",
                                            "event": hook_event("sess0", 9)})
                with lock:
                    answers.append(answer)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
            threads.append(threading.Thread(target=refused))
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            statuses = sorted(status for status, _ in answers)
            assert statuses == [200] * (writers * (events + 1)) + [409], [a for a in answers if a[0] != 200]
            prompts = stored_prompts(store_url)
            expected = {f"sess{w} prompt {i} about the cache" for w in range(writers) for i in range(1, events)}
            assert prompts == dict.fromkeys(expected, 1)  # each once; the refused one never
            written = {prompt_urn(a["project"], a["prompt_id"]) for s, a in answers
                       if s == 200 and a.get("prompt_id") is not None}
            assert len(written) == len(expected)
            deadline = time.monotonic() + 30
            while written - set(sse.urns) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # a duplicate would come with a later poll
            seen = [u for u in sse.urns if "/prompts/" in u]
            assert sorted(seen) == sorted(written)  # every committed prompt once, nothing else
        finally:
            sse.close()


def test_a_killed_server_keeps_every_write_it_acknowledged(tmp_path: Path, store_url: str) -> None:
    acknowledged: list[str] = []
    lock = threading.Lock()
    with http_server(tmp_path / "home", env={"NMEM_STORE_URL": store_url}) as server:
        stop = threading.Event()

        def writer(w: int) -> None:
            for i in range(1000):
                if stop.is_set():
                    return
                event = hook_event(f"kill{w}", i)
                try:
                    status, _ = post(server.port, {"key": f"key-kill{w}-{i}", "event": event})
                except (OSError, http.client.HTTPException):
                    return  # the server is gone: this one was never acknowledged
                if status != 200:
                    return
                if i:
                    with lock:
                        acknowledged.append(event["prompt"])

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(16)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 150 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(server.proc.pid, signal.SIGKILL)  # mid-stream: writes in flight, batches open
        stop.set()
        for t in threads:
            t.join(60)
    assert len(acknowledged) >= 150
    prompts = stored_prompts(store_url)
    assert [p for p in acknowledged if prompts.get(p) != 1] == []


def test_a_batch_whose_connection_dies_is_stored_write_by_write(settings: Settings, store_url: str) -> None:
    """On PostgreSQL, a part that loses the transaction's connection takes the whole transaction
    with it: nothing of the batch is stored, then each write runs alone as without grouping (the
    others are stored once; the one that kills its connection fails again, alone)."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite's transaction cannot lose its connection to another process")
    service = Service.open(settings)
    store = service.store
    try:
        def record(i: int) -> Callable[[], Any]:
            return lambda: service.record_event(parse(hook_event("lost", i)), spool_id=f"k-lost-{i}")

        def kills_its_connection() -> None:
            store._exec("SELECT pg_terminate_backend(pg_backend_pid())")  # type: ignore[attr-defined]

        async def scenario() -> list[Any]:
            lane = WriteLane(store, 64, 1000, float("inf"), service.forget_uncommitted)
            calls = [record(0), record(1), kills_its_connection, record(2)]
            answers = await queued_behind_one_write(lane, calls)
            assert lane.commits == 0 and lane.alone == 1 + len(calls)
            lane.close()
            return answers

        answers = asyncio.run(scenario())
        assert [type(a).__name__ for a in answers] == ["RecordOutcome", "RecordOutcome", "StoreDisconnected",
                                                       "RecordOutcome"], answers
        assert stored_prompts(settings.store_url) == {f"lost prompt {i} about the cache": 1 for i in (1, 2)}
    finally:
        service.close()


def accesses(store_url: str) -> tuple[int, int]:
    store = open_store(store_url)
    try:
        rows = sql_rows(store, "SELECT access_count, accessed_at FROM memories WHERE summary = 'wombat cache rule'")
    finally:
        store.close()
    return int(str(rows[0][0])), int(str(rows[0][1] or 0))


def test_concurrent_recalls_count_every_access_once_on_the_writer_thread(tmp_path: Path, store_url: str) -> None:
    """Recalls (and gets) answered at once on the read threads; their accesses are counted on the
    writer thread, many requests' in one transaction: every access once, none lost when the server
    stops with some still waiting."""
    home = tmp_path / "home"
    with Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": store_url})) as service:
        urn = service.remember("Wombat caches expire after an hour.", summary="wombat cache rule",
                               domain="org", namespace="decisions").urn
    readers, rounds = 8, 5

    def get(port: int, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            found = json.loads(response.read())
            assert response.status == 200, found
            return len(found["results"]) if "results" in found else 1
        finally:
            conn.close()

    with http_server(home, env={"NMEM_STORE_URL": store_url}) as server:
        start = threading.Barrier(readers)
        found: list[int] = []

        def reader() -> None:
            start.wait()
            for _ in range(rounds):
                found.append(get(server.port, "/api/v1/memories?query=wombat&project=*"))
            found.append(get(server.port, f"/api/v1/records/{urn}"))

        threads = [threading.Thread(target=reader) for _ in range(readers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert found == [1] * len(found) and len(found) == readers * (rounds + 1)
        deadline = time.monotonic() + 30
        while accesses(store_url)[0] < len(found) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert accesses(store_url)[0] == len(found), "every access counted once, soon after its answer"
        for _ in range(3):   # the last ones still waiting when the server stops
            get(server.port, "/api/v1/memories?query=wombat&project=*")
    count, at = accesses(store_url)
    assert count == len(found) + 3 and at > 0
