"""nmem's core benchmark: ingest rate, query latency and bytes per observation.

    .venv/bin/python bench/core.py            # 10k and 100k observations (a few minutes on 2 cores)
    .venv/bin/python bench/core.py --quick    # 2k and 10k (about half a minute)
    .venv/bin/python bench/core.py --json     # one JSON object with every figure
    .venv/bin/python bench/core.py --db COPY  # latency only, on a database kept by --keep (migrates it)

Everything runs in one process against the service API (`nmem.service.api.Service`), on a
throw-away data directory (`NMEM_HOME` under the system temp dir; ~/.nmem is never touched).
The corpus is the deterministic synthetic one from `bench/corpus.py`. See bench/README.md.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import Any

import corpus
from measure import emit, loadavg, machine, percentile
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.context import block as context
from nmem.errors import NmemError
from nmem.service.api import Service

BULK_BATCH = 1000          # events per transaction when bulk loading
WARMUP = 10                # untimed calls before each timed series
DAY = 86400


# -- measuring ---------------------------------------------------------------------------------

def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 3), "p95_ms": round(percentile(ms, 95), 3),
            "mean_ms": round(statistics.fmean(ms), 3), "max_ms": round(max(ms), 3)}


def open_service(home: Path, now: int) -> Service:
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    service.clock = lambda: float(now)
    return service


def record(service: Service, payload: dict[str, Any]) -> bool:
    """Parse and record one payload as the hook does in-process; True if it stored an observation."""
    outcome = service.record_event(parse(payload, now=payload[corpus.TS_KEY]))
    return outcome.observation_id is not None and outcome.skipped is None


# -- ingest --------------------------------------------------------------------------------------

def ingest_per_event(service: Service, payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """One transaction per event, as `nmem record` does: time each parse + record_event."""
    times: list[float] = []
    by_event: dict[str, list[float]] = {}
    stored = 0
    for payload in payloads:
        t0 = time.perf_counter()
        stored += record(service, payload)
        dt = (time.perf_counter() - t0) * 1000
        times.append(dt)
        by_event.setdefault(payload["hook_event_name"], []).append(dt)
    seconds = sum(times) / 1000
    return {
        "events": len(payloads), "observations": stored, "seconds": round(seconds, 3),
        "events_per_s": round(len(payloads) / seconds), "observations_per_s": round(stored / seconds),
        **{k: v for k, v in summary(times).items() if k != "n"},
        "by_event": {name: summary(ms) for name, ms in sorted(by_event.items(), key=lambda kv: -len(kv[1]))},
    }


def ingest_bulk(service: Service, payloads: Iterable[dict[str, Any]]) -> tuple[int, int, float]:
    """Record in batches of BULK_BATCH events per transaction; (events, observations, seconds)."""
    events = stored = 0
    seconds = 0.0
    stream = iter(payloads)
    while chunk := list(islice(stream, BULK_BATCH)):
        t0 = time.perf_counter()
        with service.store.transaction():
            for payload in chunk:
                stored += record(service, payload)
        seconds += time.perf_counter() - t0
        events += len(chunk)
    return events, stored, seconds


# -- size ------------------------------------------------------------------------------------------

def _group(name: str, table_of: dict[str, str]) -> str:
    for prefix, group in (("observations_fts", "observations_fts"), ("prompts_fts", "prompts"),
                          ("sessions_fts", "sessions"), ("memories", "memories")):
        if name.startswith(prefix):
            return group
    return {"observations": "observations", "prompts": "prompts", "sessions": "sessions"}.get(
        table_of.get(name, name), "other")


def database_size(db: Path, observations: int) -> dict[str, Any]:
    """File size after the store's closing checkpoint, and where the pages go (dbstat)."""
    wal = db.with_name(db.name + "-wal")
    size = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    groups: dict[str, int] = {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        table_of = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        for name, pages in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            group = _group(name, table_of)
            groups[group] = groups.get(group, 0) + int(pages)
    except sqlite3.Error:
        pass  # dbstat is a compile-time option; the total is what matters
    finally:
        conn.close()
    per_obs = {g: round(b / observations, 1) for g, b in sorted(groups.items(), key=lambda kv: -kv[1])}
    return {"bytes": size, "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "bytes_per_observation": round(size / observations, 1), "bytes_per_observation_by_part": per_obs}


# -- query workloads -------------------------------------------------------------------------------

Call = tuple[str, Callable[[], int]]

LABELS = {
    "search_plain": "search, plain language",
    "search_fts": "search, FTS5 syntax",
    "search_filtered": "search + project/type filter",
    "search_date_desc": "search, newest first",
    "search_last_7_days": "search, date range 7 days",
    "search_all_scopes": "search, all scopes",
    "recent_context_project": "recent_context(project)",
    "recent_context_all": "recent_context(all)",
    "session_start_block": "SessionStart block(project)",
    "timeline": "timeline(anchor, 5, 5)",
    "file_history": "file_history(path)",
}


def workloads(service: Service, corp: Any, n: int, seed: int, now: int) -> dict[str, list[Call]]:
    """The latency series; `corp` is the corpus (or anything with its `files` counts)."""
    rng = random.Random(seed)
    plain = corpus.plain_queries(n, seed)
    fts = corpus.fts_queries(n, seed + 1)
    projects = corpus.project_names()
    latest = service.search(None, order_by="date_desc", limit=1).hits[0].record
    max_id = int(latest.id)
    types = ("command_error", "file_edit", "command", "git_commit", None)

    def search(q: str, **kw: Any) -> Callable[[], int]:
        return lambda: len(service.search(q, **kw).hits)

    def timeline(anchor: int) -> int:
        found = service.timeline(anchor, before=5, after=5)
        return 1 + len(found["before"]) + len(found["after"])

    def history(path: str) -> int:
        return sum(len(s["touches"]) for s in service.file_history(path, limit=10)["sessions"])

    filtered: list[Call] = []
    for project, q in corpus.project_queries(n, seed + 2):
        obs_type = rng.choice(types)
        filtered.append((f"{q!r} project={project} type={obs_type}", search(q, project=project, obs_type=obs_type)))
    week = now - 7 * DAY
    return {
        "search_plain": [(repr(q), search(q)) for q in plain],
        "search_fts": [(repr(q), search(q)) for q in fts],
        "search_filtered": filtered,
        "search_date_desc": [(repr(q), search(q, order_by="date_desc")) for q in plain],
        "search_last_7_days": [(repr(q), search(q, date_start=week, date_end=now)) for q in plain],
        "search_all_scopes": [(repr(q), search(q, scope="all")) for q in plain],
        "recent_context_project": [
            (p, lambda p=p: len(service.recent_context(p, limit=30)))
            for p in (rng.choice(projects) for _ in range(n))],
        "recent_context_all": [("all", lambda: len(service.recent_context(None, limit=30)))] * n,
        "session_start_block": [
            (p, lambda p=p: len(context.render(service, p, "startup", now)))
            for p in (rng.choice(projects) for _ in range(n))],
        "timeline": [(str(a), lambda a=a: timeline(a)) for a in (rng.randint(1, max_id) for _ in range(n))],
        "file_history": [(p, lambda p=p: history(p)) for p in corpus.file_paths(corp, n, seed)],
    }


def run_series(calls: list[Call]) -> dict[str, Any]:
    for _, call in calls[:WARMUP]:
        call()
    times: list[float] = []
    hits: list[int] = []
    errors = 0
    slowest = ("", 0.0)
    for desc, call in calls:
        t0 = time.perf_counter()
        try:
            hits.append(call())
        except NmemError:
            errors += 1
            hits.append(0)
        dt = (time.perf_counter() - t0) * 1000
        times.append(dt)
        if dt > slowest[1]:
            slowest = (desc, dt)
    return {**summary(times), "mean_results": round(statistics.fmean(hits), 1),
            "empty_frac": round(sum(1 for h in hits if h == 0) / len(hits), 3), "errors": errors,
            "slowest": {"call": slowest[0], "ms": round(slowest[1], 3)}}


# -- the run -----------------------------------------------------------------------------------

def run(sizes: list[int], n_queries: int, hook_events: int, seed: int, log: Callable[[str], None],
        workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "config": {
        "sizes": sizes, "queries_per_series": n_queries, "seed": seed, "bulk_batch": BULK_BATCH,
        "corpus": "bench/corpus.py synthetic coding sessions", "projects": corpus.project_names()}}

    # (a) one transaction per event on a fresh database: what each hook pays.
    log(f"ingest: {hook_events} observations' worth of events, one transaction each, fresh database …")
    fresh = corpus.Corpus(seed + 1000)
    payloads = list(fresh.take(hook_events))
    service = open_service(workdir / "fresh", fresh.last_timestamp)
    result["ingest_per_event_fresh"] = ingest_per_event(service, payloads)
    service.close()

    # (a) bulk load to each size, then (b) and (c) at that size.
    home = workdir / "main"
    corp = corpus.Corpus(seed)
    service = open_service(home, corpus.START)
    db = Path(service.settings.db_path)  # a str since settings stopped importing pathlib
    loaded = events = 0
    bulk_seconds = 0.0
    result["sizes"] = []
    for size in sizes:
        log(f"bulk load to {size:,} observations …")
        ev, stored, seconds = ingest_bulk(service, corp.take(size - loaded))
        loaded += stored
        events += ev
        bulk_seconds += seconds
        status = service.status()
        service.close()  # checkpoints the WAL into the main file
        entry: dict[str, Any] = {
            "observations": status["observations"], "events": events, "sessions": status["sessions"],
            "prompts": status["prompts"], "days": round((corp.last_timestamp - corpus.START) / DAY, 1),
            "bulk_stage": {"events": ev, "observations": stored, "seconds": round(seconds, 3),
                           "events_per_s": round(ev / seconds), "observations_per_s": round(stored / seconds)},
            **database_size(db, status["observations"]),
        }
        now = corp.last_timestamp + 600
        service = open_service(home, now)
        log(f"queries at {size:,} observations ({n_queries} per series) …")
        entry["latency"] = {name: run_series(calls)
                            for name, calls in workloads(service, corp, n_queries, seed, now).items()}
        result["sizes"].append(entry)
    result["ingest_bulk"] = {"events": events, "observations": loaded, "seconds": round(bulk_seconds, 3),
                             "events_per_s": round(events / bulk_seconds),
                             "observations_per_s": round(loaded / bulk_seconds), "batch": BULK_BATCH}

    # (a) again, one transaction per event, into the largest database.
    log(f"ingest: {hook_events} observations' worth of events, one transaction each, at {loaded:,} obs …")
    payloads = list(corp.take(hook_events))
    result["ingest_per_event_full"] = ingest_per_event(service, payloads)
    result["ingest_per_event_full"]["database_observations"] = loaded
    service.close()
    return result


def run_existing(db: Path, n_queries: int, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Latency and size of a database built earlier (`--keep DIR` leaves DIR/main/nmem.db).

    Opening it through the service migrates it to this nmem's schema, so pass a copy when the
    original must stay as it is. The paths file_history asks for are drawn from the files the
    database holds, weighted by their reads and edits, as the corpus would have drawn them."""
    home = db.parent if db.name == "nmem.db" else db.with_suffix(".home")
    if db.name != "nmem.db":
        home.mkdir(exist_ok=True)
        link = home / "nmem.db"
        if not link.exists():
            link.symlink_to(db.resolve())
    log(f"opening {db} (migrating if older) …")
    started = time.perf_counter()
    service = open_service(home, 0)
    migrate_s = time.perf_counter() - started
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        newest = int(conn.execute("SELECT MAX(timestamp) FROM observations").fetchone()[0])
        oldest = int(conn.execute("SELECT MIN(timestamp) FROM observations").fetchone()[0])
        files = dict(conn.execute("SELECT file_path, COUNT(*) FROM observations WHERE file_path IS NOT NULL "
                                  "AND obs_type IN ('file_read', 'file_edit', 'file_write') GROUP BY file_path"))
    finally:
        conn.close()
    status = service.status()
    now = newest + 600
    service.clock = lambda: float(now)
    log(f"queries at {status['observations']:,} observations ({n_queries} per series) …")
    entry: dict[str, Any] = {
        "observations": status["observations"], "events": None, "sessions": status["sessions"],
        "prompts": status["prompts"], "days": round((newest - oldest) / DAY, 1), "open_seconds": round(migrate_s, 1),
        "latency": {name: run_series(calls) for name, calls in
                    workloads(service, argparse.Namespace(files=files), n_queries, seed, now).items()},
    }
    service.close()
    entry.update(database_size(db, status["observations"]))
    return {"machine": machine(), "config": {"database": str(db), "queries_per_series": n_queries, "seed": seed,
                                             "corpus": "bench/corpus.py synthetic coding sessions",
                                             "projects": corpus.project_names()}, "sizes": [entry]}


# -- output ------------------------------------------------------------------------------------

def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"nmem core benchmark  {m['date']}",
        f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}",
        f"         Python {m['python']}, SQLite {m['sqlite']}; 1-min load average at start "
        f"{m['loadavg_start']}, at end {m.get('loadavg_end')}",
        f"corpus:  {r['config']['corpus']}, seed {r['config']['seed']}, "
        f"projects {', '.join(r['config']['projects'])}",
        "",
    ]
    if "ingest_bulk" in r:
        lines += ["(a) ingest through Service.record_event (parse + record, in process; no process start or JSON "
                  "decode)", *render_ingest(r)]
    else:
        lines.append(f"existing database {r['config']['database']} (opened in {r['sizes'][0]['open_seconds']} s)")
    lines += render_sizes(r)
    return "\n".join(lines)


def render_ingest(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, label in (("ingest_per_event_fresh", "one transaction per event (as hooks), fresh db"),
                       ("ingest_per_event_full", "one transaction per event (as hooks), db at "
                                                  f"{r['ingest_per_event_full']['database_observations']:,} obs")):
        x = r[key]
        lines.append(f"  {label}: {x['events']:,} events in {x['seconds']:.2f} s = {x['events_per_s']:,} events/s "
                     f"({x['observations_per_s']:,} obs/s); per event p50 {x['p50_ms']:.3f} ms, "
                     f"p95 {x['p95_ms']:.3f} ms")
        lines.append("      by event: " + ", ".join(
            f"{name} p50 {s['p50_ms']:.2f}/p95 {s['p95_ms']:.2f} ms (n={s['n']})"
            for name, s in list(x["by_event"].items())[:6]))
    b = r["ingest_bulk"]
    lines.append(f"  bulk, {b['batch']:,} events per transaction: {b['events']:,} events "
                 f"({b['observations']:,} obs) in {b['seconds']:.1f} s = {b['events_per_s']:,} events/s, "
                 f"{b['observations_per_s']:,} obs/s")
    return lines


def render_sizes(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for s in r["sizes"]:
        part = ", ".join(f"{k} {v:,.0f}" for k, v in s["bytes_per_observation_by_part"].items())
        lines += [
            "",
            f"at {s['observations']:,} observations ({s['sessions']:,} sessions, {s['prompts']:,} prompts, "
            + (f"{s['events']:,} events, " if s["events"] else "") + f"{s['days']} days)",
            f"  (c) database {s['bytes'] / 1e6:.1f} MB after checkpoint = {s['bytes_per_observation']:,.0f} "
            f"bytes/observation",
            f"      by part (bytes/obs): {part}",
            f"  (b) {'operation':<32}{'p50 ms':>9}{'p95 ms':>9}{'mean':>9}{'max':>9}{'results':>9}{'empty':>8}",
        ]
        for name, x in s["latency"].items():
            lines.append(f"      {LABELS[name]:<32}{x['p50_ms']:>9.2f}{x['p95_ms']:>9.2f}{x['mean_ms']:>9.2f}"
                         f"{x['max_ms']:>9.2f}{x['mean_results']:>9.1f}{x['empty_frac']:>8.0%}"
                         + (f"  errors {x['errors']}" if x["errors"] else ""))
        worst = max(s["latency"].items(), key=lambda kv: kv[1]["slowest"]["ms"])
        lines.append(f"      slowest call: {LABELS[worst[0]]} {worst[1]['slowest']['call']} "
                     f"{worst[1]['slowest']['ms']:.1f} ms")
    lines += ["", "Queries: each series is a different set of calls, timed one by one after "
              f"{WARMUP} untimed warm-up calls; p50/p95 are over {r['config']['queries_per_series']} calls."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2k and 10k observations instead of 10k and 100k")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--sizes", help="comma-separated observation counts, e.g. 10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200, help="calls per latency series (default 200)")
    parser.add_argument("--hook-observations", type=int, default=None,
                        help="observations' worth of events recorded one transaction each (default 2000, quick 500)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", metavar="DIR", help="build the databases in DIR and keep them")
    parser.add_argument("--db", metavar="PATH", help="no ingest: time the queries on this database (a copy: "
                        "opening migrates it)")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")] if args.sizes else (
        [2_000, 10_000] if args.quick else [10_000, 100_000])
    if sizes != sorted(sizes) or sizes[0] <= 0:
        parser.error("--sizes must be increasing positive counts")
    hook_events = args.hook_observations or (500 if args.quick else 2000)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    if args.db:
        result = run_existing(Path(args.db), args.queries, args.seed, log)
    elif args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(sizes, args.queries, hook_events, args.seed, log, workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="nmem-bench-") as tmp:
            result = run(sizes, args.queries, hook_events, args.seed, log, Path(tmp))
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["machine"]["loadavg_end"] = loadavg()
    emit(result, render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
