"""Latency of claude-mem's operations (`nmem.compat.claude_mem.OPERATIONS`) on nmem, beside nmem's
own search, over the synthetic corpus of bench/corpus.py plus curated memories.

    .venv/bin/python bench/claude_mem_ops.py                   # 10k and 100k observations
    .venv/bin/python bench/claude_mem_ops.py --sizes 2000 --queries 20 --json

Each call is what an MCP tool call or a worker request runs after parsing: the operation
with claude-mem's parameters, and the markdown its tool returns (`render.text`). In one
process, on a throw-away NMEM_HOME; see bench/README.md.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import corpus
from core import ingest_bulk, open_service, run_series
from measure import emit, loadavg, machine
from nmem.compat.claude_mem import OPERATIONS, render
from nmem.models import NAMESPACES
from nmem.service.api import Service

Call = tuple[str, Callable[[], int]]
MEMORIES_PER_1K = 5        # curated memories per 1,000 observations (a busy user's rate)
TYPES = ("decision", "bugfix", "feature", "refactor", "discovery", "change")


def add_memories(service: Service, n: int, seed: int, now: int) -> None:
    rng = random.Random(seed)
    projects = corpus.project_names()
    words = corpus.plain_queries(n, seed)
    with service.store.transaction():
        for i in range(n):
            kind = rng.choice(TYPES)
            service.remember(f"{words[i]}: what we settled on and why (#{i}).", summary=words[i][:90],
                             namespace=rng.choice(NAMESPACES), project=rng.choice(projects),
                             tags=["claude-mem", kind, rng.choice(("how-it-works", "gotcha", "pattern"))],
                             at=now - rng.randint(0, 90 * 86400))


def workloads(service: Service, corp: Any, n: int, seed: int) -> dict[str, list[Call]]:
    rng = random.Random(seed)
    plain = corpus.plain_queries(n, seed)
    projects = corpus.project_names()
    paths = corpus.file_paths(corp, n, seed)
    max_id = int(service.search(None, order_by="date_desc", limit=1).hits[0].record.id)

    def op(name: str, args: dict[str, Any]) -> Callable[[], int]:
        def call() -> int:
            answer = OPERATIONS[name](service, args, rng.choice(projects))
            render.text(name, answer)
            return int(answer.get("totalResults", 0))
        return call

    return {
        "nmem search(q)": [(q, lambda q=q: len(service.search(q).hits)) for q in plain],
        "search(q) all kinds": [(q, op("search", {"query": q})) for q in plain],
        "search(q, obs_type=bugfix)": [(q, op("search", {"query": q, "type": "observations", "obs_type": "bugfix"}))
                                       for q in plain],
        "decisions(q)": [(q, op("decisions", {"query": q})) for q in plain],
        "changes(project)": [(p, op("changes", {"project": p})) for p in (rng.choice(projects) for _ in range(n))],
        "how_it_works()": [("", op("how_it_works", {}))] * n,
        "find_by_type(bugfix,change)": [("", op("find_by_type", {"type": "bugfix,change", "limit": 20}))] * n,
        "find_by_file(path)": [(p, op("find_by_file", {"files": p})) for p in paths],
        "find_by_concept(how-it-works)": [("", op("find_by_concept", {"concepts": "how-it-works"}))] * n,
        "get_recent_context(project)": [(p, op("get_recent_context", {"project": p}))
                                        for p in (rng.choice(projects) for _ in range(n))],
        "get_context_timeline(anchor)": [(str(a), op("get_context_timeline", {"anchor": a, "depth_before": 10}))
                                         for a in (rng.randint(1, max_id) for _ in range(n))],
        "get_timeline_by_query(q)": [(q, op("get_timeline_by_query", {"query": q})) for q in plain],
    }


def run(sizes: list[int], n: int, seed: int, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "config": {"sizes": sizes, "queries_per_series": n,
                                                                "seed": seed}, "sizes": []}
    corp = corpus.Corpus(seed)
    service = open_service(workdir, corpus.START)
    loaded = 0
    for size in sizes:
        log(f"bulk load to {size:,} observations …")
        _, stored, _ = ingest_bulk(service, corp.take(size - loaded))
        now = corp.last_timestamp + 600
        add_memories(service, (stored * MEMORIES_PER_1K) // 1000, seed + size, now)
        loaded += stored
        service.close()
        service = open_service(workdir, now)
        status = service.status()
        log(f"queries at {size:,} observations ({n} per series) …")
        result["sizes"].append({"observations": status["observations"], "memories": status["memories"],
                                "latency": {name: run_series(calls)
                                            for name, calls in workloads(service, corp, n, seed).items()}})
    service.close()
    result["machine"]["loadavg_end"] = loadavg()
    return result


def render_result(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [f"claude-mem operations on nmem — {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             f"SQLite {m['sqlite']}, load {m['loadavg_start']} → {m.get('loadavg_end')}"]
    for size in r["sizes"]:
        lines += ["", f"{size['observations']:,} observations, {size['memories']} memories", "",
                  "| operation | p50 ms | p95 ms | max ms | mean results | errors |", "|---|---|---|---|---|---|"]
        for name, s in size["latency"].items():
            lines.append(f"| {name} | {s['p50_ms']} | {s['p95_ms']} | {s['max_ms']} | {s['mean_results']} | "
                         f"{s['errors']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="observation counts, comma-separated")
    parser.add_argument("--queries", type=int, default=50, help="calls per series")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nmem-bench-cm-") as tmp:
        result = run(sizes, args.queries, args.seed, Path(tmp), lambda msg: print(msg, file=sys.stderr))
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    emit(result, render_result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
