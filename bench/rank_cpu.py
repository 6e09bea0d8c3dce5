"""The Python CPU of a ranked search, and a digest of what it found: the check that a speed-up
left the ranking as it was.

    .venv/bin/python bench/rank_cpu.py --home /work/data/h100k/home --scope observations
    .venv/bin/python bench/rank_cpu.py --home /work/data/h100k/home --pg postgresql://postgres@127.0.0.1:5432/test \
        --schema nmem_bench_h100k --scope all
    .venv/bin/python bench/rank_cpu.py ... --profile /tmp/prof.out    # cProfile (timer: process CPU)

The questions are bench/http_server.py `in_process()`'s: `corpus.project_queries(n, seed)`, the
even ones filtered to their project, the odd ones in every project with the home's own first
(`prefer_project`). The service's clock is fixed (`--now`), so a question naming a time ranks the
same on every run. One pass over every question prints the digest (sha256 of each hit's
kind, id, repr(score) and the search's FTS5 expression, question by question) and warms the
caches; `--repeat` more passes are timed with `time.process_time()`: this process's CPU per
search (SQLite's whole search; PostgreSQL's client side), and the PostgreSQL backends' CPU
(this run's connections, by application_name) when the server is local. The stores are
opened read only: the shared bench data stays as it is.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import corpus
from measure import loadavg, postgres_cpu_seconds
from nmem.config import load_settings
from nmem.service.api import Service

PG_APP = "nmem_bench_rank_cpu"
NOW = 1_790_000_000   # the service's clock for every run (2026-09-21)


def digest_lines(service: Service, pairs: list[tuple[str, str]], own: str, scope: str) -> list[str]:
    """One line per hit: question, place, kind, id, repr(score), the search's expression."""
    lines = []
    for q, (project, query) in enumerate(pairs):
        result = search(service, q, project, query, own, scope)
        lines += [f"{q}\t{n}\t{h.kind}\t{h.record.id}\t{h.score!r}\t{result.match}" for n, h in enumerate(result.hits)]
        if not result.hits:
            lines.append(f"{q}\t-\t{result.match}")
    return lines


def search(service: Service, q: int, project: str, query: str, own: str, scope: str) -> Any:
    return service.search(query, scope=scope, **({"project": project} if q % 2 == 0 else {"prefer_project": own}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="NMEM_HOME holding nmem.db")
    ap.add_argument("--pg", help="PostgreSQL server URL (with --schema): search its copy instead")
    ap.add_argument("--schema", help="the PostgreSQL schema holding the copy")
    ap.add_argument("--scope", default="observations")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=1, help="timed passes after the digest's")
    ap.add_argument("--now", type=int, default=NOW)
    ap.add_argument("--profile", help="write a cProfile of the timed passes here")
    ap.add_argument("--lines", help="write the digest's lines here (to compare two runs)")
    args = ap.parse_args()
    env = {"NMEM_HOME": str(args.home)}
    if args.pg:
        sep = "&" if "?" in args.pg else "?"
        env["NMEM_STORE_URL"] = (f"{args.pg}{sep}options={quote(f'-csearch_path={args.schema}', safe='')}"
                                 f"&application_name={PG_APP}")
    service = Service.open(load_settings(env), readonly=True)
    service.clock = lambda: float(args.now)
    own = service.project_for(str(args.home))
    pairs = corpus.project_queries(args.questions, args.seed)
    try:
        lines = digest_lines(service, pairs, own, args.scope)
        if args.lines:
            Path(args.lines).write_text("\n".join(lines) + "\n")
        profile = cProfile.Profile(time.process_time) if args.profile else None
        backend = (args.pg, PG_APP) if args.pg else (None, None)
        pg0, cpu0, wall0 = postgres_cpu_seconds(*backend), time.process_time(), time.perf_counter()
        if profile:
            profile.enable()
        for _ in range(args.repeat):
            for q, (project, query) in enumerate(pairs):
                search(service, q, project, query, own, args.scope)
        if profile:
            profile.disable()
            profile.dump_stats(args.profile)
        n = args.repeat * len(pairs)
        cpu, wall, pg1 = time.process_time() - cpu0, time.perf_counter() - wall0, postgres_cpu_seconds(*backend)
    finally:
        service.close(checkpoint=False)
    out: dict[str, Any] = {
        "engine": "postgresql" if args.pg else "sqlite", "scope": args.scope, "questions": len(pairs),
        "hits": sum(1 for line in lines if line.split("\t")[1] != "-"),
        "digest": hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16],
        "cpu_ms": round(cpu * 1000 / n, 2), "wall_ms": round(wall * 1000 / n, 2), "load": loadavg(),
        "pid": os.getpid()}
    if args.pg and pg0 is not None and pg1 is not None:
        out["postgres_cpu_ms"] = round((pg1 - pg0) * 1000 / n, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
