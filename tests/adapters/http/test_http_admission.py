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
