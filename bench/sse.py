"""Live feed latency: N concurrent SSE clients of `nmem serve --transport http` on loopback, and
real `nmem record` hook processes writing observations; how soon each client gets each one.

    .venv/bin/python bench/sse.py                     # 100 clients, 20 hook writes
    .venv/bin/python bench/sse.py --clients 200 --writes 50 --json
    .venv/bin/python bench/sse.py --pg postgresql://postgres@127.0.0.1:5432/test --workers 2

Latency is measured per client and per write from the moment the hook process exits (its
transaction is committed by then) to the moment the client has read the `change` event; the
figure "from hook start" adds the hook's own run time (process start, import, write). The
server polls `PRAGMA data_version` every `streaming.poll_ms` (default 100 ms) for all clients.

--workers N runs `nmem serve --workers N` and --pg URL serves a fresh schema on that PostgreSQL
server; then the hooks post to the server (`nmem record --remote`, each on a new connection, so
the kernel hands each write to any worker) and every client must see every change exactly once
whichever worker stored it: `duplicated` counts a change a client got more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import drop_schema, emit, loadavg, machine, percentile, pg_schema


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nmem_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    return {**env, "NMEM_HOME": str(home), **extra}


class Client:
    """One SSE client on a raw socket: the time each marked command's change arrived."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.times: dict[str, int] = {}   # how often each marked change arrived
        self.ready = asyncio.Event()
        self.failed: str | None = None

    async def run(self, port: int) -> None:
        writer = None
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /stream/changes HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
            await writer.drain()
            status = await reader.readline()
            if b" 200 " not in status:
                self.failed = status.decode().strip()
                self.ready.set()
                return
            event = ""
            while True:
                line = (await reader.readline()).decode()
                if not line:
                    return
                if line.startswith("event: "):
                    event = line[7:].strip()
                    if event == "start":
                        self.ready.set()
                elif line.startswith("data: ") and event == "change":
                    now = time.perf_counter()
                    change = json.loads(line[6:])
                    preview = str(change.get("record", {}).get("content_preview", ""))
                    if preview.startswith("echo sse-bench-"):
                        marker = preview.split()[1]
                        self.arrived.setdefault(marker, now)
                        self.times[marker] = self.times.get(marker, 0) + 1
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.failed = str(exc)
            self.ready.set()
        finally:
            if writer is not None:
                writer.close()


async def hook(home: Path, marker: str, remote: str | None = None) -> tuple[float, float]:
    """A real PostToolUse hook process (posting to `remote` when given); (start, exit) on the
    perf_counter clock."""
    payload = {"hook_event_name": "PostToolUse", "session_id": "sse-bench", "cwd": "/work/bench",
               "transcript_path": "/tmp/sse-bench.jsonl", "tool_name": "Bash",
               "tool_input": {"command": f"echo {marker}"}, "tool_response": {"stdout": marker, "exit_code": 0}}
    start = time.perf_counter()
    argv = ["record", *(["--remote", remote] if remote else [])]
    # a remote hook waits up to 30 s for the server rather than spooling (the write must reach a worker)
    env = nmem_env(home, **({"NMEM_BUSY_BUDGET_MS": "30000"} if remote else {}))
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "nmem", *argv, env=env,
                                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    await process.communicate(json.dumps(payload).encode())
    end = time.perf_counter()
    if process.returncode != 0:
        raise RuntimeError(f"nmem record exited {process.returncode}")
    return start, end


async def wait_for_server(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not start")



async def measure(n_clients: int, writes: int, gap: float, poll_ms: int, max_connections: int,
                  pg: str | None = None, workers: int = 1) -> dict[str, Any]:
    result = machine(clients=n_clients, writes=writes, poll_ms=poll_ms, max_connections=max_connections,
                     store="postgresql" if pg else "sqlite", workers=workers)
    schema, store = pg_schema(pg, "nmem_bench_sse") if pg else (None, None)
    try:
        return await measured(result, n_clients, writes, gap, poll_ms, max_connections, store, workers)
    finally:
        if pg and schema:
            drop_schema(pg, schema)


async def measured(result: dict[str, Any], n_clients: int, writes: int, gap: float, poll_ms: int,
                   max_connections: int, store: str | None, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nmem-sse-") as tmp:
        home = Path(tmp) / "home"
        port = free_port()
        env = nmem_env(home, NMEM_STREAMING_POLL_MS=str(poll_ms), NMEM_HTTP_MAX_CONNECTIONS=str(max_connections),
                       **({"NMEM_STORE_URL": store} if store else {}))
        argv = ["serve", "--transport", "http", "--port", str(port),
                *(["--workers", str(workers)] if workers > 1 else [])]
        server = subprocess.Popen([sys.executable, "-m", "nmem", *argv],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # with a PostgreSQL store or several workers the hooks post to the server, as a team's do
        remote = f"http://127.0.0.1:{port}" if store or workers > 1 else None
        writer_home = Path(tmp) / "laptop" if remote else home
        try:
            await wait_for_server(port, time.monotonic() + 30)
            await hook(writer_home, "sse-bench-warmup", remote)  # the session exists before clients come
            clients = [Client() for _ in range(n_clients)]
            tasks = [asyncio.create_task(c.run(port)) for c in clients]
            await asyncio.wait_for(asyncio.gather(*(c.ready.wait() for c in clients)), 60)
            refused = [c.failed for c in clients if c.failed]
            times: dict[str, tuple[float, float]] = {}
            for i in range(writes):
                marker = f"sse-bench-{i}"
                times[marker] = await hook(writer_home, marker, remote)
                await asyncio.sleep(gap)
            await asyncio.sleep(1.5)  # the last write's stragglers
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                raise RuntimeError("the server did not stop within 15 s of SIGTERM") from None
    since_exit: list[float] = []
    since_start: list[float] = []
    got = missed = late = 0
    duplicated = sum(n - 1 for c in clients for m, n in c.times.items() if m in times)
    for marker, (start, end) in times.items():
        for client in clients:
            arrived = client.arrived.get(marker)
            if arrived is None:
                missed += 1
                continue
            got += 1
            since_exit.append((arrived - end) * 1000)
            since_start.append((arrived - start) * 1000)
            late += (arrived - end) > 1.0
    if os.environ.get("SSE_DEBUG"):
        print({m: sum(m in c.arrived for c in clients) for m in times}, file=sys.stderr)
    deliveries = len(times) * n_clients
    result.update(
        deliveries=deliveries, received=got, missed=missed, duplicated=duplicated, over_1s=late,
        refused_clients=len(refused),
        refusals=refused[:3],
        per_write_all_clients=sum(all(marker in c.arrived for c in clients) for marker in times),
        latency_ms={"p50": round(percentile(since_exit, 50), 1), "p99": round(percentile(since_exit, 99), 1),
                    "max": round(max(since_exit), 1)} if since_exit else None,
        latency_from_hook_start_ms={"p50": round(percentile(since_start, 50), 1),
                                    "p99": round(percentile(since_start, 99), 1),
                                    "max": round(max(since_start), 1)} if since_start else None,
        loadavg_end=loadavg())
    return result


def render(r: dict[str, Any]) -> str:
    lines = [f"# SSE live feed: {r['clients']} clients, {r['writes']} hook writes, poll {r['poll_ms']} ms; "
             f"store {r['store']}, {r['workers']} worker(s)",
             f"machine: {r['cpu']} ({r['cores']} cores), Python {r['python']}, SQLite {r['sqlite']}, "
             f"load {r['loadavg_start']} → {r['loadavg_end']}", "",
             "| measure | value |", "|---|---|",
             f"| deliveries expected (writes × clients) | {r['deliveries']} |",
             f"| received | {r['received']} |",
             f"| missed | {r['missed']} |",
             f"| received more than once | {r['duplicated']} |",
             f"| later than 1 s after the hook exited | {r['over_1s']} |",
             f"| writes every client received | {r['per_write_all_clients']} / {r['writes']} |",
             f"| clients refused at connect | {r['refused_clients']} |"]
    for key, label in (("latency_ms", "after the hook exited"),
                       ("latency_from_hook_start_ms", "after the hook started")):
        lat = r[key]
        if lat:
            lines.append(f"| latency {label}, p50 / p99 / max | {lat['p50']} / {lat['p99']} / {lat['max']} ms |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.25, help="seconds between hook writes")
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--max-connections", type=int, default=200,
                        help="http.max_connections of the server: each client holds one connection, and uvicorn "
                             "refuses a request once that many are open (the setting's default, 100, serves 99)")
    parser.add_argument("--pg", metavar="URL", help="serve a fresh schema on this PostgreSQL server")
    parser.add_argument("--workers", type=int, default=1, help="nmem serve --workers N")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(measure(args.clients, args.writes, args.gap, args.poll_ms, args.max_connections,
                                 args.pg, args.workers))
    result["wall_seconds"] = time.perf_counter() - started
    emit(result, render, args.json)


if __name__ == "__main__":
    main()
