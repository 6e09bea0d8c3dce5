"""The team server under load (`make bench-team`): one `nmem serve --transport http` on loopback,
50 concurrent writers posting hook events and 200 concurrent searches, all at once.

Writers are HTTP clients posting to `/api/v1/events` (`--writers http`, the default: one thread
and one keep-alive connection each) or real `nmem record --remote` hook processes
(`--writers hooks`). Each writer opens its own session and sends its prompts in order under
its own user's token; searchers query `/api/v1/search` and `/api/v1/memories` as another user.

Afterwards every event is looked for on the server: `lost` counts events that are not stored,
`duplicated` events stored twice. Every event is then sent again with its key (a retry after a
lost answer), which must store nothing. Errors are any non-2xx answer or a failed connection.
Prints p50/p99 per operation, how the writer thread committed the events (group commit,
`http.write_batch`) and, on PostgreSQL, the connections the store took from its pool and how many
waited for one (from /metrics, read as an admin user of its own; one worker's with --workers).
CPU is the server's (every worker's), its own PostgreSQL backends' (found by application_name, so
other work on the same PostgreSQL stays out) and the clients'; then each kind of thread (the event
loop, the read threads, the writer, the token checks, the backends) with its CPU time and the time
it was runnable but waited for a CPU (/proc/<pid>/task/<tid>/schedstat): on a shared machine the
second is what the other work on it costs, and no arrangement of threads in the server gives it back.

A 503 with Retry-After (the server's admission control, `http.max_wait_ms`) is counted as shed
and the request sent again after the pause it asks for, as a hook does; a request's latency runs
from its first send to the answer served, so each shed adds its second (the table counts them per
operation). --pg serves a fresh schema on that PostgreSQL server, --workers N runs
`nmem serve --workers N` (0: one per core, as a team server runs; `make bench-team` runs one
process, then that). --dump FILE writes every request's send time, latency and operation
and how often it was shed (where in the run the slow ones were, and why).

    .venv/bin/python bench/team.py [--writers http|hooks] [--events 20] [--searches 10] [--pg URL] [--workers N]
                                   [--dump FILE]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from measure import (
    cpu_seconds,
    drop_schema,
    pg_schema,
    postgres_cpu_seconds,
    postgres_pids,
    process_tree,
    thread_kinds,
    thread_times,
)
from nmem.adapters.net import usable_cores

ROOT = Path(__file__).resolve().parent.parent
WRITERS = 50
SEARCHERS = 200
PG_APP = "nmem_bench_team"   # the schema's prefix and the server's application_name on PostgreSQL
WORDS = ("deploy", "cache", "migration", "token", "index", "retry", "schema", "budget", "spool", "audit")


def nmem(home: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, "NMEM_HOME": str(home), **(env or {})}, check=False, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"nmem {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])




class Client:
    """One keep-alive connection; records each request's latency under its operation."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.shed = 0   # 503s with Retry-After the last request met (each waited out, then sent again)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The answer, after waiting out and retrying each 503 that carries Retry-After."""
        self.shed = 0
        while True:
            status, answer, retry_after = self._once(method, path, body)
            if status != 503 or retry_after is None:
                return status, answer
            self.shed += 1
            time.sleep(float(retry_after))

    def _once(self, method: str, path: str, body: Any) -> tuple[int, Any, str | None]:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                text = response.read()
                if response.getheader("connection", "").lower() == "close":
                    self.conn.close()
                return response.status, json.loads(text) if text else None, response.getheader("retry-after")
            except (OSError, http.client.HTTPException):
                self.conn.close()  # reconnect once (a keep-alive the server closed); a 2nd failure is an error
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def event(session: str, i: int, writer: int) -> dict[str, Any]:
    if i == 0:
        return {"hook_event_name": "SessionStart", "session_id": session, "cwd": f"/work/team/proj{writer % 5}",
                "source": "startup", "transcript_path": ""}
    word = WORDS[(writer + i) % len(WORDS)]
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": f"/work/team/proj{writer % 5}",
            "prompt": f"writer {writer} prompt {i} about the {word} path", "transcript_path": ""}


class Results:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.timeline: list[tuple[float, float, str, int]] = []   # (sent at, seconds, operation, shed), for --dump
        self.shed: dict[str, int] = {}
        self.errors: list[str] = []

    def add(self, op: str, seconds: float, shed: int = 0) -> None:
        with self.lock:
            self.latency.setdefault(op, []).append(seconds)
            self.timeline.append((time.perf_counter() - seconds, seconds, op, shed))
            self.shed[op] = self.shed.get(op, 0) + shed

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def http_writer(port: int, token: str, writer: int, events: int, keys: list[tuple[str, dict[str, Any]]],
                results: Results, start: threading.Barrier) -> None:
    client = Client(port, token)
    session = f"bench-{writer}-{secrets.token_hex(4)}"
    start.wait()
    for i in range(events + 1):
        key = f"w{writer}-{i}-{secrets.token_hex(8)}"
        payload = event(session, i, writer)
        began = time.perf_counter()
        try:
            status, body = client.request("POST", "/api/v1/events", {"key": key, "event": payload})
        except Exception as exc:
            results.error(f"writer {writer}: {type(exc).__name__}: {exc}")
            continue
        results.add("write (POST /events)", time.perf_counter() - began, client.shed)
        if status != 200:
            results.error(f"writer {writer}: HTTP {status} {body}")
        keys.append((key, payload))


def hook_writer(home: Path, url: str, token: str, writer: int, events: int, results: Results,
                start: threading.Barrier) -> None:
    session = f"bench-{writer}-{secrets.token_hex(4)}"
    env = {**os.environ, "NMEM_HOME": str(home / f"laptop{writer}"), "NMEM_REMOTE_TOKEN": token,
           "NMEM_BUSY_BUDGET_MS": "30000"}
    start.wait()
    for i in range(events + 1):
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "nmem", "record", "--remote", url],
                              input=json.dumps(event(session, i, writer)), capture_output=True, text=True,
                              env=env, check=False)
        results.add("write (nmem record --remote)", time.perf_counter() - began)
        if done.returncode != 0:
            results.error(f"hook writer {writer}: exit {done.returncode}: {done.stderr.strip()}")


def searcher(port: int, token: str, n: int, results: Results, start: threading.Barrier, idx: int) -> None:
    client = Client(port, token)
    start.wait()
    for i in range(n):
        word = WORDS[(idx + i) % len(WORDS)]
        op, path = (("search (GET /search)", f"/api/v1/search?query={word}&scope=all&project=*&limit=10")
                    if i % 2 == 0 else ("recall (GET /memories)", f"/api/v1/memories?query={word}&project=*"))
        began = time.perf_counter()
        try:
            status, body = client.request("GET", path)
        except Exception as exc:
            results.error(f"searcher {idx}: {type(exc).__name__}: {exc}")
            continue
        results.add(op, time.perf_counter() - began, client.shed)
        if status != 200:
            results.error(f"searcher {idx}: HTTP {status} {body}")


def scrape(port: int, admin_token: str) -> dict[str, float]:
    """The server's /metrics samples, by name with labels (with --workers N, one worker's)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {admin_token}"})
    text = conn.getresponse().read().decode()
    conn.close()
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def write_transactions(found: dict[str, float]) -> tuple[int, int, int]:
    """The writer thread's counters: writes alone, shared transactions, writes in them."""
    return (int(found.get('nmem_write_transactions_total{kind="alone"}', 0)),
            int(found.get('nmem_write_transactions_total{kind="shared"}', 0)),
            int(found.get("nmem_shared_transaction_writes_total", 0)))


POOL = ('nmem_store_pool_requests_total{outcome="taken"}', 'nmem_store_pool_requests_total{outcome="waited"}',
        "nmem_store_pool_wait_seconds_total")


def pool_used(before: dict[str, float], after: dict[str, float]) -> tuple[float, float, float] | None:
    """A PostgreSQL store's pool during the load: connections taken, those that waited, seconds waited."""
    if POOL[0] not in after:
        return None
    taken, waited, seconds = (after[k] - before.get(k, 0.0) for k in POOL)
    return taken, waited, seconds


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


def stored_prompts(home: Path, pg: str | None = None) -> dict[str, int]:
    """Prompt texts on the server and how often each is stored (read from its database)."""
    sql = "SELECT content, COUNT(*) FROM prompts WHERE content LIKE 'writer %%' GROUP BY content"
    if pg:
        import psycopg

        with psycopg.connect(pg) as pg_conn:
            return {r[0]: r[1] for r in pg_conn.execute(sql).fetchall()}
    import sqlite3

    conn = sqlite3.connect(home / "nmem.db")
    try:
        rows = conn.execute(sql.replace("%%", "%")).fetchall()
    finally:
        conn.close()
    return {r[0]: r[1] for r in rows}



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", choices=("http", "hooks"), default="http")
    parser.add_argument("--events", type=int, default=20, help="prompts per writer (after its SessionStart)")
    parser.add_argument("--searches", type=int, default=10, help="requests per searcher")
    parser.add_argument("--pg", metavar="URL", help="serve a fresh schema on this PostgreSQL server")
    parser.add_argument("--workers", type=int, default=1, help="nmem serve --workers N (0: one per core)")
    parser.add_argument("--dump", metavar="FILE", help="write each request's send time (s from the start), "
                                                       "latency (ms) and operation, tab-separated")
    args = parser.parse_args()
    if args.workers == 0:   # as `nmem serve` counts them
        args.workers = usable_cores()
    schema, store = pg_schema(args.pg, PG_APP) if args.pg else (None, None)
    try:
        return run(args, store)
    finally:
        if args.pg and schema:
            drop_schema(args.pg, schema)


def run(args: argparse.Namespace, store: str | None) -> int:
    extra = {"NMEM_STORE_URL": store} if store else {}
    with tempfile.TemporaryDirectory(prefix="nmem-bench-team-") as tmp:
        home = Path(tmp) / "server"
        home.mkdir()
        nmem(home, "user", "add", "writer", env=extra)
        nmem(home, "user", "add", "reader", env=extra)
        nmem(home, "user", "add", "ops", "--admin", env=extra)   # reads /metrics only
        writer_token = nmem(home, "token", "create", "writer", env=extra).strip()
        reader_token = nmem(home, "token", "create", "reader", env=extra).strip()
        ops_token = nmem(home, "token", "create", "ops", env=extra).strip()
        for word in WORDS:  # something for recall to find
            nmem(home, "remember", f"the team's rule for the {word} path", "--domain", "org", env=extra)
        port = free_port()
        log = open(home / "serve.log", "wb")  # noqa: SIM115 - closed after the server stops
        argv = [sys.executable, "-m", "nmem", "serve", "--transport", "http", "--port", str(port)]
        server = subprocess.Popen([*argv, *(["--workers", str(args.workers)] if args.workers != 1 else [])],
                                  env={**os.environ, "NMEM_HOME": str(home), "NMEM_HTTP_MAX_CONNECTIONS": "1000",
                                       **extra},
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            ends = time.monotonic() + 60
            while True:
                try:
                    if Client(port, reader_token).request("GET", "/health")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > ends or server.poll() is not None:
                    raise SystemExit("server did not start: " + (home / "serve.log").read_text())
                time.sleep(0.1)
            results = Results()
            keys: list[tuple[str, dict[str, Any]]] = []
            start = threading.Barrier(WRITERS + SEARCHERS)
            threads = []
            for w in range(WRITERS):
                target = (lambda w=w: http_writer(port, writer_token, w, args.events, keys, results, start)) \
                    if args.writers == "http" else \
                    (lambda w=w: hook_writer(Path(tmp), f"http://127.0.0.1:{port}", writer_token, w, args.events,
                                             results, start))
                threads.append(threading.Thread(target=target))
            for s in range(SEARCHERS):
                threads.append(threading.Thread(target=searcher,
                                                args=(port, reader_token, args.searches, results, start, s)))
            began = time.perf_counter()
            backends = (args.pg, PG_APP) if args.pg else (None, None)   # the server's own PostgreSQL backends
            cpu_before, pg_before, own_before = (cpu_seconds(server.pid), postgres_cpu_seconds(*backends),
                                                 time.process_time())
            threads_before = server_threads(server.pid, args.pg)
            metrics_before = scrape(port, ops_token)
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - began
            server_cpu, own_cpu = cpu_seconds(server.pid) - cpu_before, time.process_time() - own_before
            pg_after = postgres_cpu_seconds(*backends)
            kinds = thread_kinds(threads_before, server_threads(server.pid, args.pg))
            pg_cpu = pg_after - pg_before if pg_after is not None and pg_before is not None else None
            metrics_after = scrape(port, ops_token)
            batching, pool = write_transactions(metrics_after), pool_used(metrics_before, metrics_after)
            expected = {f"writer {w} prompt {i} about the {WORDS[(w + i) % len(WORDS)]} path"
                        for w in range(WRITERS) for i in range(1, args.events + 1)}
            stored = stored_prompts(home, store)
            lost = len(expected - set(stored))
            duplicated = sum(n - 1 for n in stored.values() if n > 1)
            retried = 0
            if keys:  # every event again under its key, as a retry after a lost answer
                client = Client(port, writer_token)
                for key, payload in keys:
                    status, body = client.request("POST", "/api/v1/events", {"key": key, "event": payload})
                    retried += 1
                    if status != 200 or body.get("skipped") != "duplicate":
                        results.error(f"retry of {key}: HTTP {status} {body}")
                again = stored_prompts(home, store)
                duplicated += sum(n - 1 for n in again.values() if n > 1)
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.close()
    if args.dump:
        with open(args.dump, "w") as out:
            out.writelines(f"{sent - began:.3f}\t{seconds * 1000:.1f}\t{op}\t{shed}\n"
                           for sent, seconds, op, shed in sorted(results.timeline))
    writes = WRITERS * (args.events + 1)
    print(f"team server bench: {WRITERS} writers ({args.writers}, {args.events + 1} events each = {writes}), "
          f"{SEARCHERS} searchers ({args.searches} requests each), all concurrent; wall {wall:.1f} s; "
          f"store {'postgresql' if store else 'sqlite'}, {args.workers} worker(s); load {os.getloadavg()[0]:.2f}")
    print()
    print("| operation | requests | p50 ms | p99 ms | max ms | shed (503) |")
    print("|---|---:|---:|---:|---:|---:|")
    for op, values in sorted(results.latency.items()):
        print(f"| {op} | {len(values)} | {pct(values, 50):.1f} | {pct(values, 99):.1f} | {max(values) * 1000:.1f} "
              f"| {results.shed.get(op, 0)} |")
    print()
    print("| events sent | prompts expected | lost | duplicated | retried with same key | errors |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {writes} | {len(expected)} | {lost} | {duplicated} | {retried} | {len(results.errors)} |")
    for line in results.errors[:10]:
        print("error:", line)
    throughput = sum(len(v) for v in results.latency.values()) / wall
    searches = results.latency.get("search (GET /search)", [0.0])
    print(f"\n{throughput:.0f} requests/s overall; mean search {statistics.mean(searches) * 1000:.1f} ms; "
          f"{sum(results.shed.values())} answers were 503 with Retry-After (shed, then sent again)")
    alone, shared, held = batching
    print(f"writer thread during the load: {shared} shared transactions held {held} writes "
          f"(mean {held / shared if shared else 0:.1f}), {alone} writes alone (http.write_batch)")
    requests = sum(len(v) for v in results.latency.values())
    if pool is not None:
        taken, waited, seconds = pool
        print(f"the store's connection pool during the load: {taken:.0f} connections taken "
              f"({taken / requests:.1f} a request), {waited:.0f} waited for one, {seconds:.2f} s in all")
    print(f"CPU during the load: server {server_cpu:.1f} s ({server_cpu / requests * 1000:.2f} ms a request), "
          + (f"PostgreSQL (the server's backends) {pg_cpu:.1f} s ({pg_cpu / requests * 1000:.2f} ms a request), "
             if store and pg_cpu is not None else "")
          + f"this benchmark's clients {own_cpu:.1f} s")
    print("time of the server's threads during the load, CPU / runnable but waiting for a CPU: " + "; ".join(
        f"{name} ×{n} {cpu:.2f} / {wait:.2f} s" for name, (n, cpu, wait) in kinds.items() if cpu + wait >= 0.01))
    return 1 if lost or duplicated or results.errors else 0


def server_threads(pid: int, pg: str | None) -> Any:
    """The server's threads (every worker's) and, on PostgreSQL, its backends (by application_name):
    how long each ran and how long it waited for a CPU (the machine's other work: time no thread
    arrangement in the server gives back)."""
    found = thread_times(process_tree(pid))
    if pg:
        found.update(thread_times(postgres_pids(pg, PG_APP), main="PostgreSQL backend"))
    return found


if __name__ == "__main__":
    sys.exit(main())
