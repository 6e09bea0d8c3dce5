"""HTTP API benchmark: requests/s and latency of search over HTTP at 100k observations.

    .venv/bin/python bench/http_server.py                 # 100k observations, 1/4/16 clients
    .venv/bin/python bench/http_server.py --json          # one JSON object with every figure
    .venv/bin/python bench/http_server.py --keep /tmp/h   # keep (and reuse) the database
    .venv/bin/python bench/http_server.py --pg postgresql://postgres@127.0.0.1:5432/test   # on PostgreSQL
    .venv/bin/python bench/http_server.py --workers 2 --pin   # `nmem serve --workers 2`, one core each
    .venv/bin/python bench/http_server.py --set NMEM_HTTP_THREADS=4   # a setting for the server

(Not bench/http.py: run as a script, a module named `http` beside it would shadow the standard
library's, which uvicorn and httpx import.)

A database of --observations observations from bench/corpus.py (recorded in process inside one
transaction), then a real `nmem serve --transport http` subprocess on a loopback port, and a
Python load generator (httpx on asyncio, keep-alive connections) in this process: for each
concurrency level, --requests `GET /api/v1/search?query=…` in people's words (every scope, or
--scope's; half of them with
`project=<the question's project>`, half across every project), each timed from send to the
last byte of the body. Reported: requests/s (completed requests over the wall time of the
series), p50/p90/p99/max latency, and errors (any non-200; how many were 503s, the server
busy, is said beside, and the first answer of each error status is printed). `GET /health` at the same
concurrency shows what HTTP, the guard and uvicorn cost without the search, and
`Service.search` in this process what the same search (every scope, the server's project first
when the question names none) costs without HTTP, with its CPU and its PostgreSQL backends' CPU.

With --pg the SQLite database is copied (`nmem migrate`) into a fresh schema of that server
(kept, and reused, with --keep) and `nmem serve` serves it. --workers N runs `nmem serve
--workers N`; --pin pins each worker process to one core (`taskset`, worker i on core i mod
cores), to show how throughput grows with workers and cores. The load generator shares the
machine's cores with the server (and PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2

import corpus
import nmem
from mcp_server import child_env, populate
from measure import (
    cpu_seconds,
    emit,
    loadavg,
    machine,
    percentile,
    postgres_cpu_seconds,
    process_tree,
    thread_kinds,
    thread_times,
)
from nmem.config import load_settings
from nmem.service.api import Service

WARMUP = 20
PG_APP = "nmem_bench_http"   # the server's application_name on PostgreSQL: its backends' CPU is counted


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(home: Path, port: int, store: str | None = None, workers: int = 1,
                 settings: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = home / "serve.log"
    extra = {**({"NMEM_STORE_URL": store} if store else {}), **(settings or {})}
    argv = [sys.executable, "-m", "nmem", "serve", "--transport", "http", "--port", str(port)]
    if workers > 1:
        argv += ["--workers", str(workers)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=child_env(home, NMEM_HTTP_MAX_CONNECTIONS="1000", **extra), cwd=str(home),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    # Ready is answering /health, not listening: `nmem serve` binds its port first, then imports
    # the MCP SDK, builds the app and warms its read threads (seconds of CPU under load), which a
    # series begun at the first accepted connection would count as the searches' own CPU.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nmem serve exited: {log.read_text(errors='replace')}")
        with socket.socket() as s:
            listening = s.connect_ex(("127.0.0.1", port)) == 0
        if listening:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health",
                              timeout=max(1.0, deadline - time.monotonic())).status_code == 200:
                    return proc
            except httpx2.TransportError:
                pass
        time.sleep(0.05)
    stop_server(proc)
    raise RuntimeError("nmem serve did not answer /health within 60 s")


def server_processes(proc: subprocess.Popen[bytes], workers: int) -> list[int]:
    """The pids that serve: the workers of `--workers N` (the children), else the process itself."""
    if workers <= 1:
        return [proc.pid]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if len(children) >= workers:
            return [int(c) for c in children]
        time.sleep(0.05)
    raise RuntimeError(f"nmem serve --workers {workers} did not start its workers")


def pin(pids: list[int]) -> list[str]:
    """Each pid (and its threads) on one core, round robin; what `taskset` set."""
    cores = sorted(os.sched_getaffinity(0))
    placed = []
    for i, pid in enumerate(pids):
        core = cores[i % len(cores)]
        subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(pid)], check=True, capture_output=True)
        placed.append(f"{pid}->cpu{core}")
    return placed


def pg_store(home: Path, base: str, keep: bool, log: Callable[[str], None], name: str | None = None) -> str:
    """A schema on `base` holding a copy of the SQLite database (`nmem migrate`), as a store URL."""
    import psycopg

    schema = name or ("nmem_bench_http_kept" if keep else f"nmem_bench_http_{uuid.uuid4().hex[:12]}")
    sep = "&" if "?" in base else "?"
    url = f"{base}{sep}options={quote(f'-csearch_path={schema}', safe='')}&application_name={PG_APP}"
    with psycopg.connect(base, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if exists and keep:
            log(f"  (PostgreSQL schema {schema} kept from an earlier run)")
            return url
        conn.execute(f"CREATE SCHEMA {schema}")
    log(f"  copying the database into PostgreSQL schema {schema} …")
    done = subprocess.run([sys.executable, "-m", "nmem", "migrate", "--to", url], env=child_env(home),
                          cwd=str(home), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nmem migrate failed: {done.stderr}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE observations, prompts, sessions, memories")
    return url


def drop_schema(base: str, url: str) -> None:
    import psycopg

    schema = url.rsplit("search_path%3D", 1)[-1].split("&", 1)[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stats(latencies: list[float], wall: float, errors: int, results: list[int] | None = None) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    out: dict[str, Any] = {
        "requests": len(ms), "errors": errors, "requests_per_s": round(len(ms) / wall, 1) if wall else 0.0,
        "p50_ms": round(statistics.median(ms), 2), "p90_ms": round(percentile(ms, 90), 2),
        "p99_ms": round(percentile(ms, 99), 2), "max_ms": round(max(ms), 2)}
    if results is not None:
        out["mean_results"] = round(statistics.fmean(results), 1)
    return out


async def load(base: str, urls: list[str], concurrency: int) -> dict[str, Any]:
    """`concurrency` clients, each with its own keep-alive connection, taking the next URL until
    none is left; the first WARMUP requests are sent before the clock starts."""
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        for url in urls[:WARMUP]:
            (await client.get(url)).raise_for_status()
        queue = iter(urls[WARMUP:])
        latencies: list[float] = []
        counts: list[int] = []
        errors = shed = 0
        examples: dict[int, str] = {}   # the first error body of each status

        async def worker() -> None:
            nonlocal errors, shed
            for url in queue:
                t0 = time.perf_counter()
                response = await client.get(url)
                body = response.content
                latencies.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    errors += 1
                    shed += response.status_code == 503   # the server was busy
                    examples.setdefault(response.status_code, body[:300].decode(errors="replace"))
                elif b'"count"' in body:
                    counts.append(int(response.json()["count"]))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return {**stats(latencies, wall, errors, counts or None), "shed": shed,
            **({"error_examples": examples} if examples else {})}


def pool_counts(base: str) -> dict[str, float]:
    """A PostgreSQL store's pool counters from the server's /metrics (taken, waited, wait seconds;
    with --workers N, one worker's); {} on SQLite."""
    found: dict[str, float] = {}
    text = httpx2.get(f"{base}/metrics", timeout=30).text
    for line in text.splitlines():
        for name, key in (('nmem_store_pool_requests_total{outcome="taken"}', "taken"),
                          ('nmem_store_pool_requests_total{outcome="waited"}', "waited"),
                          ("nmem_store_pool_wait_seconds_total", "wait_s")):
            if line.startswith(name + " "):
                found[key] = float(line.rsplit(" ", 1)[1])
    return found


def search_urls(n: int, seed: int, scope: str = "all") -> list[str]:
    out = []
    for i, (project, query) in enumerate(corpus.project_queries(n, seed)):
        params = {"query": query, **({"scope": scope} if scope != "all" else {}),
                  **({"project": project} if i % 2 == 0 else {})}
        out.append(str(httpx2.URL("/api/v1/search", params=params)))
    return out


def in_process(home: Path, n: int, seed: int, store: str | None = None, pg: str | None = None,
               scope: str = "all") -> dict[str, Any]:
    """The same searches on the service API in this process: what HTTP adds. The same question
    the server is asked: every scope, half of them in the question's project, half in every
    project with the server's own (its working directory's, `home`'s) first."""
    env = {"NMEM_HOME": str(home), **({"NMEM_STORE_URL": store} if store else {})}
    service = Service.open(load_settings(env), readonly=True)
    own = service.project_for(str(home))
    try:
        pairs = corpus.project_queries(n, seed)
        for i, (project, query) in enumerate(pairs[:WARMUP]):
            service.search(query, scope=scope, **({"project": project} if i % 2 == 0 else {"prefer_project": own}))
        times = []
        backends = (pg, PG_APP) if store else (None, None)
        pg_cpu, cpu = postgres_cpu_seconds(*backends), time.process_time()
        t_all = time.perf_counter()
        for i, (project, query) in enumerate(pairs[WARMUP:]):
            t0 = time.perf_counter()
            service.search(query, scope=scope, **({"project": project} if i % 2 == 0 else {"prefer_project": own}))
            times.append(time.perf_counter() - t0)
        out = stats(times, time.perf_counter() - t_all, 0)
        out["server_cpu_ms"] = round((time.process_time() - cpu) * 1000 / len(times), 2)
        pg_after = postgres_cpu_seconds(*backends)
        if store and pg_cpu is not None and pg_after is not None:
            out["postgres_cpu_ms"] = round((pg_after - pg_cpu) * 1000 / len(times), 2)
        return out
    finally:
        service.close(checkpoint=False)


def run(args: argparse.Namespace, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "machine": machine(nmem=nmem.__version__, uvicorn=version("uvicorn"), starlette=version("starlette")),
        "config": {"observations": args.observations, "requests": args.requests, "seed": args.seed, "scope": args.scope,
                   "concurrency": args.concurrency}}
    home = workdir / "home"
    log(f"populating {args.observations:,} observations (one transaction) …")
    result["database"] = populate(home, args.observations, args.seed, log)
    urls = search_urls(args.requests + WARMUP, args.seed, args.scope)
    store = pg_store(home, args.pg, bool(args.keep or args.schema), log, args.schema) if args.pg else None
    result["config"].update(store="postgresql" if store else "sqlite", workers=args.workers, pinned=args.pin)
    port = free_port()
    settings = dict(pair.split("=", 1) for pair in args.set)
    result["config"]["settings"] = settings
    proc = start_server(home, port, store, args.workers, settings)
    base = f"http://127.0.0.1:{port}"
    try:
        if args.pin:
            result["config"]["placement"] = pin(server_processes(proc, args.workers))
        result["search"] = {}
        result["health"] = {}
        for c in args.concurrency:
            log(f"  {args.requests} searches, {c} concurrent clients …")
            backends = (args.pg, PG_APP) if store else (None, None)
            server_cpu, pg_cpu = cpu_seconds(proc.pid), postgres_cpu_seconds(*backends)
            threads_before = thread_times(process_tree(proc.pid))
            pool = pool_counts(base) if store and args.workers <= 1 else {}
            series = result["search"][str(c)] = asyncio.run(load(base, urls, c))
            if pool:   # connections a search took from the pool, how many waited for one, and how long
                after = pool_counts(base)
                series["pool"] = {"taken": round((after["taken"] - pool["taken"]) / len(urls), 2),
                                  "waited": round((after["waited"] - pool["waited"]) / len(urls), 3),
                                  "wait_ms": round((after["wait_s"] - pool["wait_s"]) * 1000 / len(urls), 3)}
            # CPU per request (the warm-up's included), which a shared machine's load moves far less than wall time
            served = len(urls)
            series["server_cpu_ms"] = round((cpu_seconds(proc.pid) - server_cpu) * 1000 / served, 2)
            # the same by thread (OS names: the event loop, nmem-read, nmem-check; a thread started by
            # another takes its name: the search's fan-out threads are counted as nmem-read)
            series["threads_cpu_ms"] = {name: round(cpu * 1000 / served, 2) for name, (_, cpu, _) in
                                        thread_kinds(threads_before, thread_times(process_tree(proc.pid))).items()
                                        if cpu * 1000 / served >= 0.01}
            pg_after = postgres_cpu_seconds(*backends)
            if store and pg_cpu is not None and pg_after is not None:
                series["postgres_cpu_ms"] = round((pg_after - pg_cpu) * 1000 / served, 2)
            log(f"  {args.requests} /health, {c} concurrent clients …")
            result["health"][str(c)] = asyncio.run(load(base, ["/health"] * (args.requests + WARMUP), c))
    finally:
        stop_server(proc)
    log("  the same searches in process …")
    result["in_process"] = in_process(home, args.requests + WARMUP, args.seed, store, args.pg, args.scope)
    if store and not (args.keep or args.schema):
        drop_schema(args.pg, store)
    result["machine"]["loadavg_end"] = loadavg()
    return result


def render(r: dict[str, Any]) -> str:
    m, db = r["machine"], r["database"]
    lines = [
        f"nmem HTTP benchmark  {m['date']}",
        f"machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, SQLite {m['sqlite']}, uvicorn "
        f"{m['uvicorn']}, starlette {m['starlette']}, nmem {m['nmem']}; 1-min load average "
        f"{m['loadavg_start']} at start, {m['loadavg_end']} at end",
        f"database: {db['observations']:,} observations, {db['sessions']:,} sessions, {db['prompts']:,} prompts "
        f"(bench/corpus.py seed {r['config']['seed']}); store {r['config'].get('store', 'sqlite')}, "
        f"workers {r['config'].get('workers', 1)}" + (f", pinned {' '.join(r['config']['placement'])}"
                                                      if r["config"].get("placement") else "")
        + "".join(f", {k}={v}" for k, v in r["config"].get("settings", {}).items())
        + f"; searches of scope {r['config'].get('scope', 'all')}",
        "",
        "| what | clients | requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def row(label: str, clients: str, x: dict[str, Any]) -> str:
        shed = f" ({x['shed']} of them 503 busy)" if x.get("shed") else ""
        return (f"| {label} | {clients} | {x['requests']} | {x['requests_per_s']} | {x['p50_ms']} | "
                f"{x['p90_ms']} | {x['p99_ms']} | {x['max_ms']} | {x['errors']}{shed} |")

    for c, x in r["search"].items():
        lines.append(row("GET /api/v1/search", c, x))
    errors = [f"{c} clients, HTTP {status}: {text}" for c, x in r["search"].items()
              for status, text in x.get("error_examples", {}).items()]
    cpu = [f"{c} clients: server {x['server_cpu_ms']} ms" + (f", PostgreSQL {x['postgres_cpu_ms']} ms"
                                                           if "postgres_cpu_ms" in x else "")
           for c, x in [*r["search"].items(), ("in process, 1", r["in_process"])] if "server_cpu_ms" in x]
    split = [f"{c} clients: " + ", ".join(f"{name} {ms} ms" for name, ms in x["threads_cpu_ms"].items())
             for c, x in r["search"].items() if x.get("threads_cpu_ms")]
    pools = [f"{c} clients: {x['pool']['taken']} connections taken, {x['pool']['waited']} waited for one, "
             f"{x['pool']['wait_ms']} ms waiting" for c, x in r["search"].items() if "pool" in x]
    for c, x in r["health"].items():
        lines.append(row("GET /health", c, x))
    lines.append(row("Service.search in process", "1", r["in_process"]))
    first = next(iter(r["search"].values()))
    lines.append(f"\nsearches found {first.get('mean_results', 0)} results on average")
    lines += [f"first error answer: {e}" for e in errors]
    if cpu:
        lines.append("CPU per search (all server processes; the server's PostgreSQL backends): " + "; ".join(cpu))
    if split:
        lines.append("the server's CPU per search by thread: " + "; ".join(split))
    if pools:
        lines.append("the store's pool per search (the scrapes of /metrics included): " + "; ".join(pools))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--observations", type=int, default=100_000, help="database size (default 100000)")
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per series (default 1000)")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16],
                        help="concurrent clients per series, comma-separated (default 1,4,16)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scope", default="all",
                        help="the searches' scope (default all, the API's default; observations was its default "
                             "until the redesign, and is the question issue 25's table measured)")
    parser.add_argument("--pg", metavar="URL", help="serve a copy in a PostgreSQL schema on this server")
    parser.add_argument("--schema", metavar="NAME", help="with --pg: the schema's name, kept (and reused when there)")
    parser.add_argument("--workers", type=int, default=1, help="nmem serve --workers N (default 1)")
    parser.add_argument("--pin", action="store_true", help="pin each server process to one core (taskset)")
    parser.add_argument("--set", action="append", default=[], metavar="NMEM_VAR=VALUE",
                        help="a setting for the server, e.g. NMEM_HTTP_THREADS=4 (the server gets no other NMEM_ "
                             "variable of this environment); repeatable")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--keep", metavar="DIR", help="build the database in DIR and keep it (reused when there)")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        result = run(args, Path(args.keep), log)
    else:
        with tempfile.TemporaryDirectory(prefix="nmem-bench-http-") as tmp:
            result = run(args, Path(tmp), log)
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    emit(result, render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
