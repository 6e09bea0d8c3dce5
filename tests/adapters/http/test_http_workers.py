"""`nmem serve --transport http --workers 2`: two real worker processes behind one port, on
SQLite and on PostgreSQL. A change written through one worker reaches SSE and WebSocket
subscribers connected to the other, each exactly once; a dead worker is started again; the
parent's SIGTERM stops them all.

Which worker serves a connection is read from the kernel (Linux's /proc: the worker holding the
accepted socket), so the test knows it covered both directions."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from websockets.sync.client import ClientConnection, connect

from mcp_support import HttpServer, http_server, wait_healthy
from store_engines import both_engines

__all__ = ["both_engines"]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the worker")
CSRF = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}


def workers_of(server: HttpServer, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        if len(children) >= count:
            return [int(c) for c in children]
        time.sleep(0.1)
    raise AssertionError(f"{count} workers did not start")




def serving_pid(client: socket.socket, port: int, pids: list[int]) -> int:
    """The worker holding the server side of `client`'s connection (after it was accepted)."""
    mine = client.getsockname()[1]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        inode = ""
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and int(fields[2].split(":")[1], 16) == mine:
                inode = fields[9]
        for pid in pids:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                        return pid
                except OSError:
                    continue
        time.sleep(0.05)
    raise AssertionError("no worker holds the connection")


class SseClient:
    """`GET /stream/changes` on a raw socket; keeps the URN of every `change` event."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(b"GET /stream/changes HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.file = self.sock.makefile("rb")
        self.urns: list[str] = []
        started = threading.Event()
        self.reader = threading.Thread(target=self._read, args=(started,), daemon=True)
        self.reader.start()
        assert started.wait(30), "the stream did not start"

    def _read(self, started: threading.Event) -> None:
        try:
            for raw in self.file:
                line = raw.decode("utf-8", "replace").strip()
                if line == "event: start":
                    started.set()
                elif line.startswith("data: {") and '"urn"' in line and '"kind"' in line:
                    self.urns.append(json.loads(line[6:])["urn"])
        except OSError:
            pass

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.reader.join(10)
        self.file.close()
        self.sock.close()


class WsClient:
    """A WebSocket subscribed to every user memory; keeps the URN of each change."""

    def __init__(self, port: int) -> None:
        self.ws: ClientConnection = connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30).__enter__()
        self.ws.send(json.dumps({"op": "subscribe", "urn": "nmem://user"}))
        assert json.loads(self.ws.recv(timeout=30))["event"] == "subscribed"
        self.sock = self.ws.socket
        self.urns: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for text in self.ws:
                message = json.loads(text)
                if message.get("event") == "change":
                    self.urns.append(message["data"]["urn"])
        except Exception:  # closed
            pass

    def close(self) -> None:
        self.ws.close()


def on_every_worker(open_one: type[SseClient] | type[WsClient], port: int, pids: list[int],
                    stack: ExitStack) -> dict[int, SseClient | WsClient]:
    """Open clients until each worker serves one (the kernel picks the worker)."""
    placed: dict[int, SseClient | WsClient] = {}
    for _ in range(60):
        client = open_one(port)
        stack.callback(client.close)
        placed.setdefault(serving_pid(client.sock, port, pids), client)
        if len(placed) == len(pids):
            return placed
    raise AssertionError(f"{open_one.__name__}: 60 connections all reached the same worker")


def write_through_every_worker(port: int, pids: list[int], per_worker: int) -> dict[int, list[str]]:
    """POST memories, each on a new connection, until every worker stored `per_worker`."""
    stored: dict[int, list[str]] = {pid: [] for pid in pids}
    for i in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/api/v1/memories", body=json.dumps({"content": f"cross-worker note {i}",
                                                                  "domain": "user"}), headers=CSRF)
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 201, body
        pid = serving_pid(conn.sock, port, pids)
        conn.close()
        if len(stored[pid]) < per_worker:
            stored[pid].append(body["urn"])
        else:
            stored.setdefault(-1, []).append(body["urn"])  # written all the same: subscribers see it too
        if all(len(stored[p]) >= per_worker for p in pids):
            return stored
    raise AssertionError("200 writes never reached every worker")


@pytest.fixture
def two_workers(tmp_path: Path, store_url: str) -> Iterator[tuple[HttpServer, list[int]]]:
    with http_server(tmp_path / "home", "--workers", "2",
                     env={"NMEM_STORE_URL": store_url, "NMEM_STREAMING_POLL_MS": "50"}) as server:
        pids = workers_of(server, 2)
        wait_healthy(server.port)
        yield server, pids


def test_a_change_written_through_one_worker_reaches_subscribers_on_every_worker_once(
        two_workers: tuple[HttpServer, list[int]]) -> None:
    server, pids = two_workers
    with ExitStack() as stack:
        sse = on_every_worker(SseClient, server.port, pids, stack)
        ws = on_every_worker(WsClient, server.port, pids, stack)
        stored = write_through_every_worker(server.port, pids, per_worker=3)
        written = [urn for urns in stored.values() for urn in urns]
        subscribers = [*sse.values(), *ws.values()]
        deadline = time.monotonic() + 30
        while any(set(written) - set(s.urns) for s in subscribers) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a duplicate would arrive with a later poll
        named = [(f"{kind} on worker {pid}", s) for kind, group in (("sse", sse), ("ws", ws))
                 for pid, s in group.items()]
        for on, subscriber in named:
            seen = [u for u in subscriber.urns if u in set(written)]
            assert sorted(seen) == sorted(written), on  # every change, once, whichever worker stored it


def test_a_killed_worker_is_started_again_and_sigterm_stops_them_all(
        two_workers: tuple[HttpServer, list[int]]) -> None:
    server, pids = two_workers
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        now = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        if len(now) == 2 and str(pids[0]) not in now:
            break
        assert time.monotonic() < deadline, "the killed worker was not replaced"
        time.sleep(0.1)
    for _ in range(10):  # every connection is served, whichever worker takes it
        wait_healthy(server.port)
    server.proc.terminate()
    assert server.proc.wait(timeout=30) == 0
    for pid in map(int, now):
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and "zombie" not in Path(f"/proc/{pid}/status").read_text():
            assert time.monotonic() < deadline, f"worker {pid} still runs"
            time.sleep(0.1)


def test_workers_need_the_http_transport(tmp_path: Path) -> None:
    import subprocess

    from mcp_support import child_env, nmem_argv

    for workers in ("2", "0"):
        done = subprocess.run(nmem_argv("serve", "--workers", workers), env=child_env(tmp_path / "home"),
                              capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and "--workers needs --transport http" in done.stderr, (workers, done.stderr)


def test_workers_0_runs_one_worker_per_core(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    with http_server(tmp_path / "home", "--workers", "0") as server:
        wait_healthy(server.port)
        if cores == 1:   # one process serves alone, as --workers 1 does
            assert Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split() == []
        else:
            assert len(workers_of(server, cores)) == cores
            time.sleep(1)   # no more come later
            assert len(Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()) == cores
