"""Search latency on SQLite and PostgreSQL side by side, in the same run, on the same rows.

    .venv/bin/python bench/engines.py                    # 100k observations
    .venv/bin/python bench/engines.py --rows 1000000     # 1M (loading takes a while on 2 cores)
    .venv/bin/python bench/engines.py --json
    .venv/bin/python bench/engines.py --workdir DIR --schema NAME   # keep both; a second run reuses them

The synthetic corpus (bench/corpus.py) is recorded into SQLite through the service, as hooks
record it; `nmem migrate` (nmem.store.migrate) then copies every row into a fresh PostgreSQL
schema and verifies it, so both engines hold identical rows and ids. The same query series
(bench/core.py's search workloads) then run against a Service on each engine, one engine after
the other. PostgreSQL comes from NMEM_BENCH_PG, else NMEM_TEST_PG, else the local server.

Beside wall-clock latency, each series reports what one search costs: the CPU time of this
process (SQLite's whole search; PostgreSQL's client side), the statements sent to PostgreSQL
(round trips, counted at psycopg's cursor), and the PostgreSQL backends' CPU time, read from
/proc/<pid>/schedstat of the server processes serving this run's connections (found by their
application_name; reported only when the server runs on this machine). On a shared machine
these CPU figures move far less with load than wall time does.

With `--per-question`, each question of the FTS-syntax and last-7-days series (those timed) is
asked again (least wall time of five; this process's CPU, SQLite's whole search, and the
PostgreSQL backends' CPU a search over the five), question by question on both engines.

Last, each engine answers the plain, FTS-syntax and all-scopes questions once more with
`limit=10`, and `identical_top10` counts the questions whose ten hits are the same, in the same
order, on both: the redesign's equivalence (identical top 10s for at least 95% of questions).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

import corpus
from core import WARMUP, ingest_bulk, run_series, workloads
from measure import emit, loadavg, machine
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.store.migrate import migrate

SERIES = ("search_plain", "search_fts", "search_filtered", "search_date_desc", "search_last_7_days",
          "search_all_scopes")
# the series `--per-question` times question by question, when they are timed
QUESTION_SERIES = ("search_fts", "search_last_7_days")
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def open_service(home: Path, url: str, now: int) -> Service:
    service = Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": url}))
    service.clock = lambda: float(now)
    return service


class Statements:
    """Statements sent to PostgreSQL, counted at psycopg's cursor (each one round trip); those
    sent together in a pipeline count as one."""

    count = 0
    piped = threading.local()   # this thread's open pipelines

    def __init__(self) -> None:
        for method in ("execute", "executemany"):
            original = getattr(psycopg.Cursor, method)

            def counted(cursor: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                Statements.count += 0 if getattr(Statements.piped, "n", 0) else 1
                return _original(cursor, *args, **kwargs)

            setattr(psycopg.Cursor, method, counted)
        pipeline = psycopg.Connection.pipeline

        @contextlib.contextmanager
        def piped(conn: Any) -> Any:
            Statements.count += 1
            Statements.piped.n = getattr(Statements.piped, "n", 0) + 1
            try:
                with pipeline(conn) as p:
                    yield p
            finally:
                Statements.piped.n -= 1

        psycopg.Connection.pipeline = piped  # type: ignore[assignment,method-assign]


def backend_cpu_ns(pg_url: str, app: str) -> dict[int, int] | None:
    """CPU nanoseconds each PostgreSQL backend serving `app` has run, by pid; None when the
    server's processes are not readable here (another machine, another user's /proc)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        pids = [int(r[0]) for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                                                (app,))]
    out: dict[int, int] = {}
    for pid in pids:
        try:
            out[pid] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return out


def measured(calls: list[Any], engine: str, pg_url: str, app: str) -> dict[str, Any]:
    """run_series, plus CPU per search (this process; PostgreSQL's backends) and statements per search."""
    pg = engine == "postgres"
    before = backend_cpu_ns(pg_url, app) if pg else None
    sent, cpu = Statements.count, time.process_time()
    series = run_series(calls)
    calls_made = len(calls) + min(WARMUP, len(calls))
    series["client_cpu_ms"] = round((time.process_time() - cpu) * 1000 / calls_made, 3)
    if pg:
        series["round_trips"] = round((Statements.count - sent) / calls_made, 2)
        after = backend_cpu_ns(pg_url, app)
        if before is not None and after is not None:
            spent = sum(ns - before.get(pid, 0) for pid, ns in after.items())
            series["backend_cpu_ms"] = round(spent / 1e6 / calls_made, 3)
    return series


def per_question(calls: list[Any], engine: str, pg_url: str, app: str, runs: int = 5) -> list[dict[str, Any]]:
    """Each question of a series asked `runs` times more: least wall time, and PostgreSQL's
    backend CPU a search (the backends found once: /proc read around each question)."""
    pids: list[int] = []
    if engine == "postgres":
        with psycopg.connect(pg_url, autocommit=True) as conn:
            pids = [int(r[0]) for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()", (app,))]

    def cpu() -> int | None:
        try:
            return sum(int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) for pid in pids)
        except (OSError, ValueError, IndexError):
            return None

    out = []
    for desc, call in calls:
        walls, before, own = [], cpu(), time.process_time()
        for _ in range(runs):
            t0 = time.perf_counter()
            call()
            walls.append((time.perf_counter() - t0) * 1000)
        after = cpu()
        row: dict[str, Any] = {"question": desc, "min_ms": round(min(walls), 2),
                               "client_cpu_ms": round((time.process_time() - own) * 1000 / runs, 2)}
        if pids and before is not None and after is not None:
            row["backend_cpu_ms"] = round((after - before) / 1e6 / runs, 2)
        out.append(row)
    return out


def top_tens(service: Service, n: int, seed: int) -> dict[str, list[list[tuple[str, str]]]]:
    """The first ten hits (kind, id) of each question of the ranked series, to compare the
    engines' rankings on the same rows (the redesign's equivalence: identical top 10s)."""
    plain, fts = corpus.plain_queries(n, seed), corpus.fts_queries(n, seed + 1)

    def top(q: str, **kw: Any) -> list[tuple[str, str]]:
        return [(h.kind, str(h.record.id)) for h in service.search(q, limit=10, **kw).hits]

    now = int(service.now())
    return {"search_plain": [top(q) for q in plain], "search_fts": [top(q) for q in fts],
            "search_last_7_days": [top(q, date_start=now - 7 * 86400, date_end=now) for q in plain],
            "search_all_scopes": [top(q, scope="all") for q in plain]}


def pg_schema_url(pg_base: str, schema: str, app: str) -> str:
    sep = "&" if "?" in pg_base else "?"
    return f"{pg_base}{sep}options=-csearch_path%3D{schema}&application_name={app}"


def kept_counts(pg_url: str, forget: bool) -> int:
    """The words' counts PostgreSQL keeps for every process (schema step 9, `word_counts`), emptied
    first when `forget`: a schema reused from an earlier run holds the counts of its questions'
    words, so its searches count no word's rows again (as a server that has run a while)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('word_counts')").fetchone() == (None,):
            return 0
        if forget:
            conn.execute("DELETE FROM word_counts")
        return int(conn.execute("SELECT count(*) FROM word_counts").fetchone()[0])  # type: ignore[index]


def run(rows: int, n_queries: int, seed: int, pg_base: str, workdir: Path, keep: bool,
        log: Any, schema: str | None = None, cold: bool = False, questions: bool = False,
        series: tuple[str, ...] = SERIES) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "config": {
        "observations": rows, "queries_per_series": n_queries, "seed": seed,
        "corpus": "bench/corpus.py synthetic coding sessions"}}
    db = workdir / "nmem.db"
    sqlite_url = f"sqlite:///{db}"
    corp = corpus.Corpus(seed)
    if db.exists():   # kept by an earlier run with this --workdir: only the corpus's timestamps are needed
        log(f"reusing {db} …")
        for _ in corp.take(rows):
            pass
    else:
        service = open_service(workdir / "home", sqlite_url, corpus.START)
        log(f"loading {rows:,} observations into SQLite …")
        events, stored, seconds = ingest_bulk(service, corp.take(rows))
        result["sqlite_load"] = {"events": events, "observations": stored, "seconds": round(seconds, 1)}
        service.close()

    schema = schema or f"nmem_bench_{uuid.uuid4().hex[:12]}"
    app = f"nmem_engines_{uuid.uuid4().hex[:8]}"
    pg_url = pg_schema_url(pg_base, schema, app)
    with psycopg.connect(pg_base, autocommit=True) as conn:
        fresh = not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if fresh:
            conn.execute(f"CREATE SCHEMA {schema}")
    Statements()
    try:
        if fresh:
            log(f"nmem migrate into PostgreSQL schema {schema} …")
            t0 = time.perf_counter()
            checks = migrate(sqlite_url, pg_url)
            result["migrate"] = {"seconds": round(time.perf_counter() - t0, 1),
                                 "rows": {c.table: c.rows for c in checks if c.rows}}
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")  # fresh statistics, as autovacuum would leave them
        else:
            log(f"reusing PostgreSQL schema {schema} …")
        now = corp.last_timestamp + 600
        result["config"]["kept_word_counts"] = kept_counts(pg_url, cold)
        result["latency"] = {}
        tops: dict[str, dict[str, list[list[tuple[str, str]]]]] = {}
        for engine, url in (("sqlite", sqlite_url), ("postgres", pg_url)):
            log(f"queries on {engine} ({n_queries} per series) …")
            service = open_service(workdir / "home", url, now)
            try:
                calls = workloads(service, corp, n_queries, seed, now)
                result["latency"][engine] = {name: measured(calls[name], engine, pg_url, app) for name in series}
                for name in (n for n in QUESTION_SERIES if n in series) if questions else ():
                    result.setdefault("questions", {}).setdefault(name, {})[engine] = per_question(
                        calls[name], engine, pg_url, app)
                tops[engine] = top_tens(service, n_queries, seed)
            finally:
                service.close()
        result["identical_top10"] = {
            name: f"{sum(a == b for a, b in zip(tops['sqlite'][name], tops['postgres'][name], strict=True))}"
                  f"/{len(tops['sqlite'][name])}" for name in tops["sqlite"]}
    finally:
        if not keep:
            with psycopg.connect(pg_base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    result["loadavg_end"] = loadavg()
    return result


def render(r: dict[str, Any]) -> str:
    cfg = r["config"]
    load = (f"load {r['sqlite_load']['seconds']} s into SQLite" if "sqlite_load" in r else "SQLite file reused")
    move = (f"migrate {r['migrate']['seconds']} s into PostgreSQL" if "migrate" in r else "PostgreSQL schema reused")
    lines = [f"# Search latency, SQLite vs PostgreSQL, {cfg['observations']:,} observations",
             f"({cfg['queries_per_series']} queries per series; {load}, {move}; "
             f"load average {r['machine']['loadavg_start']} at the start, {r.get('loadavg_end')} at the end; "
             f"{cfg.get('kept_word_counts', 0)} word counts kept by PostgreSQL at the start)", "",
             "| series | SQLite p50 | SQLite p95 | PostgreSQL p50 | PostgreSQL p95 | p50 PG/SQLite "
             "| results (sqlite/pg) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lite, pg = r["latency"]["sqlite"], r["latency"]["postgres"]
    for name in lite:
        a, b = lite[name], pg[name]
        ratio = f"{b['p50_ms'] / a['p50_ms']:.2f}x" if a["p50_ms"] else "n/a"
        lines.append(f"| {name} | {a['p50_ms']} ms | {a['p95_ms']} ms | {b['p50_ms']} ms | {b['p95_ms']} ms | "
                     f"{ratio} | {a['mean_results']} / {b['mean_results']} |")
    lines += ["", "CPU per search (mean over the series): SQLite's whole search in this process; PostgreSQL's "
              "backend and client, and its statements (round trips)", "",
              "| series | SQLite CPU | PostgreSQL backend CPU | backend/SQLite | PostgreSQL client CPU | round trips |",
              "|---|---:|---:|---:|---:|---:|"]
    for name in lite:
        a, b = lite[name], pg[name]
        backend = f"{b['backend_cpu_ms']} ms" if "backend_cpu_ms" in b else "n/a"
        share = (f"{b['backend_cpu_ms'] / a['client_cpu_ms']:.2f}x"
                 if "backend_cpu_ms" in b and a["client_cpu_ms"] else "n/a")
        lines.append(f"| {name} | {a['client_cpu_ms']} ms | {backend} | {share} | {b['client_cpu_ms']} ms | "
                     f"{b['round_trips']} |")
    for name, asked in r.get("questions", {}).items():
        lines += ["", f"{name}: questions one by one (least wall time of five; PostgreSQL backend CPU a search)", "",
                  "| question | SQLite | PostgreSQL | PG ÷ SQLite | SQLite CPU | PostgreSQL backend CPU "
                  "| PostgreSQL client CPU |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for a, b in zip(asked["sqlite"], asked["postgres"], strict=True):
            share = f"{b['min_ms'] / a['min_ms']:.2f}x" if a["min_ms"] else "n/a"
            lines.append(f"| `{a['question'].strip(chr(39))}` | {a['min_ms']} ms | {b['min_ms']} ms | {share} | "
                         f"{a['client_cpu_ms']} ms | {b.get('backend_cpu_ms', 'n/a')} ms | {b['client_cpu_ms']} ms |")
    if "identical_top10" in r:
        lines += ["", "Identical top 10s (the same hits in the same order on both engines): " + ", ".join(
            f"{name} {share}" for name, share in r["identical_top10"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="observations to load (default 100k)")
    parser.add_argument("--queries", type=int, default=100, help="queries per series")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL schema and the SQLite file")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workdir", type=Path, help="keep the SQLite file here; reuse it when it exists")
    parser.add_argument("--schema", help="the PostgreSQL schema to fill and keep; reuse it when it exists")
    parser.add_argument("--cold", action="store_true",
                        help="forget the words' counts PostgreSQL keeps (word_counts) before its queries: every "
                             "word's rows are counted again, as on a fresh schema")
    parser.add_argument("--per-question", action="store_true",
                        help="time each question of the FTS-syntax and last-7-days series again, one by one, "
                             "on both engines")
    parser.add_argument("--series", help=f"the series to time, comma-separated (default all: {', '.join(SERIES)})")
    args = parser.parse_args(argv)
    series = tuple(n for n in SERIES if n in args.series.split(",")) if args.series else SERIES
    pg_base = os.environ.get("NMEM_BENCH_PG") or os.environ.get("NMEM_TEST_PG") or DEFAULT_PG

    def log(message: str) -> None:
        print(f"engines: {message}", file=sys.stderr, flush=True)

    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    tmp = str(args.workdir) if args.workdir is not None else tempfile.mkdtemp(prefix="nmem-engines-")
    keep = args.keep or args.workdir is not None
    try:
        result = run(args.rows, args.queries, args.seed, pg_base, Path(tmp), args.keep or args.schema is not None,
                     log, args.schema, args.cold, args.per_question, series)
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    emit(result, render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
