"""Admission control on a real `nmem serve`: past `http.max_queue` requests waiting for a store
thread, the next one is answered 503 with Retry-After at once, and the admitted ones are served."""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from mcp_support import http_server

CSRF = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}


def post_memory(port: int, text: str) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/api/v1/memories", body=json.dumps({"content": text, "domain": "user"}), headers=CSRF)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())
    finally:
        conn.close()


def test_writes_past_the_queue_get_503_with_retry_after_while_the_admitted_wait(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with http_server(home, env={"NMEM_HTTP_MAX_QUEUE": "1", "NMEM_HTTP_THREADS": "1"}) as server:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert post_memory(server.port, "first note")[0] == 201
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        # Another process holds SQLite's write lock: the writer thread waits on it, so the
        # first write is running, the second waits in the queue, and the rest find it full.
        holder = sqlite3.connect(home / "nmem.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        answers: list[tuple[int, dict[str, str], Any]] = []
        lock = threading.Lock()

        def send(i: int) -> None:
            answer = post_memory(server.port, f"note {i}")
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 30
            while sum(a[0] == 503 for a in answers) < 4:  # refused while the lock is still held
                assert time.monotonic() < deadline, answers
                time.sleep(0.02)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        for t in threads:
            t.join(60)
        refused = [a for a in answers if a[0] == 503]
        served = [a for a in answers if a[0] == 201]
        assert len(refused) == 4 and len(served) == 2, answers
        for _, headers, body in refused:
            assert headers["retry-after"] == "1"
            assert body["error"]["type"] == "busy" and "http.max_queue" in body["error"]["message"]
        stored = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        stored.request("GET", "/api/v1/memories?query=note&limit=50")
        contents = {m["content"] for m in json.loads(stored.getresponse().read())["results"]}
        stored.close()
        accepted = {body["content"] for _, _, body in served}
        assert accepted <= contents
        assert ({f"note {i}" for i in range(6)} - accepted).isdisjoint(contents), "a refused write stores nothing"


def test_a_write_that_would_wait_past_max_wait_gets_503_while_the_one_ahead_is_served(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with http_server(home, env={"NMEM_HTTP_MAX_WAIT_MS": "50"}) as server:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert post_memory(server.port, "first note")[0] == 201
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        holder = sqlite3.connect(home / "nmem.db", isolation_level=None)
        # A write held a second behind another process's lock teaches the server that a write
        # takes long (its recent mean passes 50 ms)...
        holder.execute("BEGIN IMMEDIATE")
        slow: list[int] = []
        first = threading.Thread(target=lambda: slow.append(post_memory(server.port, "slow note")[0]))
        first.start()
        time.sleep(1.0)
        holder.execute("ROLLBACK")
        first.join(60)
        assert slow == [201]
        # ...so of two writes sent while the lock is held again, the one that finds the writer
        # thread taken would wait past 50 ms: refused at once, not queued.
        holder.execute("BEGIN IMMEDIATE")
        answers: list[tuple[int, dict[str, str], Any]] = []
        lock = threading.Lock()

        def send(i: int) -> None:
            answer = post_memory(server.port, f"late note {i}")
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 30
            while not any(a[0] == 503 for a in answers):
                assert time.monotonic() < deadline, answers
                time.sleep(0.02)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        for t in threads:
            t.join(60)
        assert sorted(a[0] for a in answers) == [201, 503], answers
        refused = next(a for a in answers if a[0] == 503)
        assert refused[1]["retry-after"] == "1"
        assert refused[2]["error"]["type"] == "busy" and "http.max_wait_ms" in refused[2]["error"]["message"]
        served = next(a for a in answers if a[0] == 201)[2]["content"]
        stored = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        stored.request("GET", "/api/v1/memories?query=late&limit=50")
        contents = {m["content"] for m in json.loads(stored.getresponse().read())["results"]}
        stored.close()
        assert contents == {served}, "the refused write stored nothing"
