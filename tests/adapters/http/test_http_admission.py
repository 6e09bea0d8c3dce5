"""Admission control on a real `nmem serve`: past `http.max_queue` requests waiting for a store
thread, or past `http.max_wait_ms` of expected wait, the next one is answered 503 with
Retry-After at once, and the admitted ones are served."""

from __future__ import annotations

import contextvars
import http.client
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_support import HttpServer, http_server
from nmem.adapters.http.threads import Overloaded, ReadLane, WriteLane, _Write

CSRF = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}
Answer = tuple[int, dict[str, str], Any]


def post_memory(port: int, text: str) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/v1/memories", body=json.dumps({"content": text, "domain": "user"}), headers=CSRF)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())
    finally:
        conn.close()


def stored_memories(port: int, query: str) -> set[str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", f"/api/v1/memories?query={query}&limit=50")
        return {m["content"] for m in json.loads(conn.getresponse().read())["results"]}
    finally:
        conn.close()


@contextmanager
def serving(tmp_path: Path, env: dict[str, str]) -> Iterator[HttpServer]:
    """A server that has stored a first memory (so it is up, and its writer has a connection)."""
    with http_server(tmp_path / "home", env=env) as server:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert post_memory(server.port, "first note")[0] == 201
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        yield server


@contextmanager
def write_lock_held(home: Path) -> Iterator[None]:
    """Another process holds SQLite's write lock: the writer thread waits on it meanwhile."""
    holder = sqlite3.connect(home / "nmem.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


class Posts:
    """Memories posted at once, each from a thread of its own; `answers` fills as they come back."""

    def __init__(self, port: int, texts: list[str]) -> None:
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._send, args=(port, text)) for text in texts]
        for t in self._threads:
            t.start()

    def _send(self, port: int, text: str) -> None:
        answer = post_memory(port, text)
        with self._lock:
            self.answers.append(answer)

    def wait_for(self, condition: Callable[[list[Answer]], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition(self.answers):
            assert time.monotonic() < deadline, self.answers
            time.sleep(0.02)

    def join(self) -> list[Answer]:
        for t in self._threads:
            t.join(60)
        return self.answers


def test_writes_past_the_queue_get_503_with_retry_after_while_the_admitted_wait(tmp_path: Path) -> None:
    with serving(tmp_path, {"NMEM_HTTP_MAX_QUEUE": "1", "NMEM_HTTP_THREADS": "1"}) as server:
        # The writer thread waits on the lock: the first write is running, the second waits in
        # the queue, and the rest find it full.
        with write_lock_held(server.home):
            posts = Posts(server.port, [f"note {i}" for i in range(6)])
            posts.wait_for(lambda answers: sum(a[0] == 503 for a in answers) >= 4)  # refused while held
        answers = posts.join()
        refused = [a for a in answers if a[0] == 503]
        served = [a for a in answers if a[0] == 201]
        assert len(refused) == 4 and len(served) == 2, answers
        for _, headers, body in refused:
            assert headers["retry-after"] == "1"
            assert body["error"]["type"] == "busy" and "http.max_queue" in body["error"]["message"]
        contents = stored_memories(server.port, "note")
        accepted = {body["content"] for _, _, body in served}
        assert accepted <= contents
        assert ({f"note {i}" for i in range(6)} - accepted).isdisjoint(contents), "a refused write stores nothing"


def test_a_write_that_would_wait_past_max_wait_gets_503_while_the_one_ahead_is_served(tmp_path: Path) -> None:
    with serving(tmp_path, {"NMEM_HTTP_MAX_WAIT_MS": "50"}) as server:
        # A write held a second behind another process's lock teaches the server that a write
        # takes long (its recent mean passes 50 ms)...
        with write_lock_held(server.home):
            slow = Posts(server.port, ["slow note"])
            time.sleep(1.0)
        assert [a[0] for a in slow.join()] == [201]
        # ...so of two writes sent while the lock is held again, the one that finds the writer
        # thread taken would wait past 50 ms: refused at once, not queued.
        with write_lock_held(server.home):
            posts = Posts(server.port, [f"late note {i}" for i in range(2)])
            posts.wait_for(lambda answers: any(a[0] == 503 for a in answers))
        answers = posts.join()
        assert sorted(a[0] for a in answers) == [201, 503], answers
        refused = next(a for a in answers if a[0] == 503)
        assert refused[1]["retry-after"] == "1"
        assert refused[2]["error"]["type"] == "busy" and "http.max_wait_ms" in refused[2]["error"]["message"]
        served = next(a for a in answers if a[0] == 201)[2]["content"]
        assert stored_memories(server.port, "late") == {served}, "the refused write stored nothing"


def test_a_burst_of_hook_events_is_admitted_by_the_transactions_it_will_take_not_by_writes() -> None:
    """A transaction's own part (BEGIN, the commit's flush) is paid once by all it holds: fifty
    events arriving at once fit in one transaction and are admitted on that, while a queue of
    writes that cannot share one is counted transaction by transaction."""
    lane = WriteLane(store=None, batch=64, max_queue=1024, max_wait=1.0)
    try:
        lane.costs, lane.overhead = {"event": 0.002}, 0.05
        lane.taken = 50          # 49 writes waiting behind the running one
        lane.pending.extend(_Write(contextvars.copy_context(), lambda: None, True, "event") for _ in range(49))
        assert lane.kind_wait("event", True) == pytest.approx(0.05 + 0.002 * 50)
        lane.admit(lane.kind_wait("event", True))     # admitted
        lane.pending.clear()
        lane.pending.extend(_Write(contextvars.copy_context(), lambda: None, False, "event") for _ in range(49))
        assert lane.kind_wait("event", False) == pytest.approx(0.052 * 50)   # each alone: 2.6 s
        with pytest.raises(Overloaded, match=r"http\.max_wait_ms"):
            lane.admit(lane.kind_wait("event", False))
        lane.pending.clear()
        lane.taken = 0
        assert lane.kind_wait("event", True) == 0.0   # the writer idle: no wait
    finally:
        lane.close()


def test_a_read_lane_sheds_by_the_rate_its_queue_clears_and_only_when_coming_back_beats_waiting() -> None:
    """The read lane's queue speed is what its threads took in the last window. A server warming
    up sheds nothing for time; past `max_wait`, a request is sent back when recent requests waited
    that long too, or when it would wait longer than the Retry-After second plus a recent wait."""
    lane = ReadLane("read", threads=2, max_queue=1024, max_wait=1.0)
    try:
        lane.taken = 2 + 400                   # both threads busy, 400 waiting
        lane.admit()                           # nothing taken yet: warming up, admitted
        now = time.perf_counter()
        lane._started(now - 1.5, 0.0)          # the first request, a window and a half ago
        assert lane.expected_wait() == lane.call_time * 401 / 2 == 0.0   # too few taken lately: the mean call
        lane.call_time = 0.01
        assert lane.expected_wait() == pytest.approx(401 * 0.01 / 2)
        for i in range(100):                   # 100 taken over the last half second: 200 a second
            lane._started(now - 0.5 + i * 0.005, 0.0)
        assert lane.expected_wait() == pytest.approx(401 / 200, rel=0.05)   # about 2 s
        lane.waited = 0.5                      # recent requests waited half a second: come back later
        with pytest.raises(Overloaded, match=r"http\.max_wait_ms"):
            lane.admit()
        lane.taken = 2 + 250                   # 1.25 s: past max_wait, but less than a second more
        lane.admit()                           # than coming back would take: served
        lane.waited = 1.0                      # the queue has been that slow for a while: sent back
        with pytest.raises(Overloaded):
            lane.admit()
        lane.taken = 1                         # a thread free: no wait at all
        assert lane.expected_wait() == 0.0
    finally:
        lane.executor.shutdown()


def test_a_read_lane_counts_a_queue_of_cheap_reads_at_their_cost_not_at_the_rate_of_dear_ones() -> None:
    """The window's rate is weighed by what waits: 250 recalls behind a window of searches that
    cost ten times as much clear in a tenth of the time those would; 250 searches are still shed.
    (Under `bench/team.py` the searchers' recalls came in a wave right after their searches, and
    were shed at the searches' rate while the ones let in waited under a second.)"""
    lane = ReadLane("read", threads=2, max_queue=1024, max_wait=1.0)
    try:
        now = time.perf_counter()
        lane._started(now - 1.5, 0.0, "search")   # the first request, a window and a half ago
        for kind, seconds in (("search", 0.02), ("recall", 0.002)):   # a search takes 20 ms, a recall 2
            lane._spent(1.0, kind)                 # (a kind's first call on a thread teaches nothing)
            lane._spent(seconds, kind)
        for i in range(100):                       # 100 searches taken over the last half second: 200 a second
            lane._started(now - 0.5 + i * 0.005, 0.0, "search")
        lane.waited = 1.0                          # the queue has been slow for a while: past max_wait, shed
        lane.taken = 2 + 250
        recalls = [lane._queued("recall") for _ in range(250)]   # 250 recalls waiting
        assert lane.expected_wait("recall") == pytest.approx(251 / 200 / 10, rel=0.05)   # ~0.13 s, not 1.26
        lane.admit(kind="recall")
        for cost in recalls:                       # the threads took them
            lane._dequeued(cost)
        searches = [lane._queued("search") for _ in range(250)]   # 250 searches waiting: 1.26 s
        with pytest.raises(Overloaded, match=r"http\.max_wait_ms"):
            lane.admit(kind="recall")
        for cost in searches:
            lane._dequeued(cost)
        assert lane.queued_cost == 0.0 and lane.queued_counted == 0
        lane._queued("unmeasured")                 # a kind not run yet counts as nothing
        assert lane.expected_wait("unmeasured") == 0.0
    finally:
        lane.executor.shutdown()


def test_a_kinds_first_call_on_each_thread_is_not_its_cost() -> None:
    """The first call of a kind on each read thread pays what is done once per thread (statements
    prepared; on a fresh store the tiers recomputed, one thread storing them while the others
    wait): its time is left out of the kind's cost, which the later calls teach."""
    lane = ReadLane("read", threads=3, max_queue=1024, max_wait=1.0)

    together = threading.Barrier(3)   # all alive at once: no thread's id is taken over by the next

    def calls(seconds: list[float]) -> None:
        together.wait(timeout=30)
        for each in seconds:
            lane._spent(each, "recall")

    try:
        threads = [threading.Thread(target=calls, args=([0.4, 0.002, 0.002],)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert lane.costs["recall"] == pytest.approx(0.002)   # the three 0.4 s first calls left out
    finally:
        lane.executor.shutdown()


def post_event(port: int, body: dict[str, Any]) -> int:
    """One hook event, sent once (a 503 is not sent again): its status."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/v1/events", body=json.dumps(body), headers=CSRF)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def hook(session: str, i: int) -> dict[str, Any]:
    event: dict[str, Any] = {"session_id": session, "cwd": "/home/dev/code/burst", "transcript_path": ""}
    if i == 0:
        return {"key": f"key-{session}-0", "event": {**event, "hook_event_name": "SessionStart", "source": "startup"}}
    return {"key": f"key-{session}-{i}",
            "event": {**event, "hook_event_name": "UserPromptSubmit", "prompt": f"{session} prompt {i}"}}


@contextmanager
def table_locked(pg_url: str, table: str) -> Iterator[None]:
    """Another PostgreSQL session holds `table` against writes: a write to it waits meanwhile."""
    import psycopg

    with psycopg.connect(pg_url) as holder:
        holder.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        yield
        holder.rollback()


def test_prompts_after_a_slow_batch_of_session_starts_are_counted_at_a_prompts_cost_not_shed(
        tmp_path: Path, pg_url: str) -> None:
    """A batch of SessionStarts that took long (here: a table lock held by another session while
    the writer stored them, as rendering fifty context blocks takes long) does not make the lane
    refuse the burst of cheap prompts that follows: each kind of write is counted at its own cost,
    and the writer clears twenty prompts well within `http.max_wait_ms`.

    That wait is 2.5 s here, not the default 1 s: on a loaded machine twenty prompts cost up to a
    second of the writer's time for real (four of them were shed so at a load of 6). The batch is
    held ~5 s, so twenty prompts counted at its writes' cost would still wait past it."""
    writers = 20
    with serving(tmp_path, {"NMEM_STORE_URL": pg_url, "NMEM_HTTP_MAX_WAIT_MS": "2500"}) as server:
        for i in range(4):   # a session's first events: the lane has measured a prompt
            assert post_event(server.port, hook("warm", i)) == 200
        sessions = [f"burst{w}" for w in range(writers)]
        with table_locked(pg_url, "sessions"):
            with table_locked(pg_url, "memories"):
                # the writer waits on a memory write while the SessionStarts queue behind it...
                first = Posts(server.port, ["held note"])
                starts = [threading.Thread(target=post_event, args=(server.port, hook(s, 0))) for s in sessions]
                for t in starts:
                    t.start()
                time.sleep(0.5)
            # ...then stores them in one transaction, which waits for the sessions table
            time.sleep(4.5)
        for t in starts:
            t.join(60)
        assert [a[0] for a in first.join()] == [201]
        statuses: list[int] = []
        lock = threading.Lock()

        def prompts(session: str) -> None:
            for i in range(1, 6):
                status = post_event(server.port, hook(session, i))
                with lock:
                    statuses.append(status)

        burst = [threading.Thread(target=prompts, args=(s,)) for s in sessions]
        for t in burst:
            t.start()
        for t in burst:
            t.join(60)
        assert statuses.count(503) == 0 and statuses == [200] * len(statuses), statuses
        assert len(statuses) == 5 * writers


def test_a_write_lane_counts_each_kind_of_write_at_its_own_cost() -> None:
    """Fifty writes of a costly kind waiting are past `max_wait`; fifty cheap ones are not, whatever
    a batch of costly ones took before them. A kind's first write (one-time costs) teaches nothing;
    a kind not measured yet counts as nothing."""
    lane = WriteLane(store=None, batch=64, max_queue=1024, max_wait=1.0)
    try:
        for kind, seconds in (("start", 1.0), ("start", 0.06), ("prompt", 0.5), ("prompt", 0.002)):
            lane._learn(kind, seconds)
        assert lane.costs == {"start": 0.06, "prompt": 0.002}
        lane.taken = 50
        lane.pending.extend(_Write(contextvars.copy_context(), lambda: None, True, "prompt") for _ in range(49))
        assert lane.kind_wait("prompt", True) == pytest.approx(0.002 * 50)   # 49 waiting, then its own
        lane.admit(lane.kind_wait("prompt", True))   # admitted: the writer clears them in 0.1 s
        assert lane.kind_wait("new kind", True) == pytest.approx(0.002 * 49)
        lane.pending.clear()
        lane.pending.extend(_Write(contextvars.copy_context(), lambda: None, True, "start") for _ in range(49))
        assert lane.kind_wait("start", True) == pytest.approx(0.06 * 50)
        with pytest.raises(Overloaded, match=r"http\.max_wait_ms"):
            lane.admit(lane.kind_wait("start", True))   # 3 s: shed at once
        lane.pending.clear()
        lane.taken = 0
        assert lane.kind_wait("start", True) == 0.0   # the writer idle: no wait
    finally:
        lane.close()


def test_a_writes_wait_is_counted_while_the_writer_thread_takes_the_waiting_writes() -> None:
    """`kind_wait` reads the waiting writes on the event loop while the writer thread takes them
    (`_take`) from the same queue. Iterating the queue there failed ("deque mutated during
    iteration"): under `make bench-team` a hook event was answered 500 and not stored."""
    lane = WriteLane(store=None, batch=64, max_queue=100_000, max_wait=60.0)
    lane.costs, lane.taken = {"prompt": 0.001}, 1
    stop = threading.Event()

    def writer_thread() -> None:
        while not stop.is_set():
            lane._take()

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # hand Python's lock between the two threads as often as it can
    thread = threading.Thread(target=writer_thread)
    thread.start()
    try:
        for _ in range(50):
            lane.pending.extend(_Write(contextvars.copy_context(), lambda: None, True, "prompt") for _ in range(500))
            for _ in range(10):
                assert lane.kind_wait("prompt", True) >= 0.001
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switching)
        lane.close()
