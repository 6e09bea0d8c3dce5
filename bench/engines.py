"""Search latency on SQLite and PostgreSQL side by side, in the same run, on the same rows.

    .venv/bin/python bench/engines.py                    # 100k observations
    .venv/bin/python bench/engines.py --rows 1000000     # 1M (loading takes a while on 2 cores)
    .venv/bin/python bench/engines.py --json

The synthetic corpus (bench/corpus.py) is recorded into SQLite through the service, as hooks
record it; `nmem migrate` (nmem.store.migrate) then copies every row into a fresh PostgreSQL
schema and verifies it, so both engines hold identical rows and ids. The same query series
(bench/core.py's search workloads) then run against a Service on each engine, one engine after
the other. PostgreSQL comes from NMEM_BENCH_PG, else NMEM_TEST_PG, else the local server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

import corpus
from core import ingest_bulk, run_series, workloads
from measure import emit, machine
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.store.migrate import migrate

SERIES = ("search_plain", "search_fts", "search_filtered", "search_date_desc", "search_last_7_days",
          "search_all_scopes")
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def open_service(home: Path, url: str, now: int) -> Service:
    service = Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": url}))
    service.clock = lambda: float(now)
    return service


def run(rows: int, n_queries: int, seed: int, pg_base: str, workdir: Path, keep: bool,
        log: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "config": {
        "observations": rows, "queries_per_series": n_queries, "seed": seed,
        "corpus": "bench/corpus.py synthetic coding sessions"}}
    sqlite_url = f"sqlite:///{workdir / 'nmem.db'}"
    corp = corpus.Corpus(seed)
    service = open_service(workdir / "home", sqlite_url, corpus.START)
    log(f"loading {rows:,} observations into SQLite …")
    events, stored, seconds = ingest_bulk(service, corp.take(rows))
    result["sqlite_load"] = {"events": events, "observations": stored, "seconds": round(seconds, 1)}
    service.close()

    schema = f"nmem_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg_base else "?"
    pg_url = f"{pg_base}{sep}options=-csearch_path%3D{schema}"
    try:
        log(f"nmem migrate into PostgreSQL schema {schema} …")
        t0 = time.perf_counter()
        checks = migrate(sqlite_url, pg_url)
        result["migrate"] = {"seconds": round(time.perf_counter() - t0, 1),
                             "rows": {c.table: c.rows for c in checks if c.rows}}
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # fresh statistics, as autovacuum would leave them
        now = corp.last_timestamp + 600
        result["latency"] = {}
        for engine, url in (("sqlite", sqlite_url), ("postgres", pg_url)):
            log(f"queries on {engine} ({n_queries} per series) …")
            service = open_service(workdir / "home", url, now)
            try:
                calls = workloads(service, corp, n_queries, seed, now)
                result["latency"][engine] = {name: run_series(calls[name]) for name in SERIES}
            finally:
                service.close()
    finally:
        if not keep:
            with psycopg.connect(pg_base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return result


def render(r: dict[str, Any]) -> str:
    cfg = r["config"]
    lines = [f"# Search latency, SQLite vs PostgreSQL, {cfg['observations']:,} observations",
             f"({cfg['queries_per_series']} queries per series; load {r['sqlite_load']['seconds']} s into SQLite, "
             f"migrate {r['migrate']['seconds']} s into PostgreSQL)", "",
             "| series | SQLite p50 | SQLite p95 | PostgreSQL p50 | PostgreSQL p95 | results (sqlite/pg) |",
             "|---|---:|---:|---:|---:|---:|"]
    lite, pg = r["latency"]["sqlite"], r["latency"]["postgres"]
    for name in SERIES:
        a, b = lite[name], pg[name]
        lines.append(f"| {name} | {a['p50_ms']} ms | {a['p95_ms']} ms | {b['p50_ms']} ms | {b['p95_ms']} ms | "
                     f"{a['mean_results']} / {b['mean_results']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="observations to load (default 100k)")
    parser.add_argument("--queries", type=int, default=100, help="queries per series")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL schema and the SQLite file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    pg_base = os.environ.get("NMEM_BENCH_PG") or os.environ.get("NMEM_TEST_PG") or DEFAULT_PG

    def log(message: str) -> None:
        print(f"engines: {message}", file=sys.stderr, flush=True)

    tmp = tempfile.mkdtemp(prefix="nmem-engines-")
    try:
        result = run(args.rows, args.queries, args.seed, pg_base, Path(tmp), args.keep, log)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    emit(result, render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
