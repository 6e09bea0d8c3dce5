"""A memory search as a team server's signed-in user against the same search with nobody signed in.

Builds a store of `--memories` curated memories (words drawn with Zipf frequencies; `--private`
of them in the `user` domain, split between ann and carol; the rest project memories of bob's),
then asks `--queries` plain-language questions through the service (`Service.search`,
scope memories) twice each: as nobody (single-user nmem) and as bob (`acting_as`), whose search
must leave ann's and carol's private memories out of its statistics. Prints the CPU time
(process time, which on a shared machine the other work does not add to) and the wall time of
a search, median and p90 of `--rounds` rounds, with the load average beside them.

    .venv/bin/python bench/viewer_search.py [--memories 10000] [--private 2000] [--queries 40] [--pg URL]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import drop_schema, pg_schema, postgres_cpu_seconds
from nmem.config import load_settings
from nmem.service.api import Service
from nmem.store import NewMemory, open_store
from nmem.team.access import Viewer, acting_as

T0 = 1_760_000_000
SYLLABLES = ("ka", "lo", "mi", "ten", "ro", "vas", "quel", "dor", "pin", "sha", "tu", "ber", "gal", "nix", "po")


def vocabulary(rng: random.Random, n: int) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def build(url: str, memories: int, private: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(rng, 4000)
    weights = [1.0 / (r + 1) ** 1.07 for r in range(len(words))]
    store = open_store(url)
    owners: dict[str, list[str]] = {"bob": [], "ann": [], "carol": []}
    try:
        with store.transaction():
            for n in range(memories):
                mine = n % max(1, memories // max(private, 1)) == 0 and private > 0
                owner = ("ann", "carol")[n % 2] if mine else "bob"
                uid = f"m{n:06d}"
                text = " ".join(rng.choices(words, weights=weights, k=rng.randint(8, 60)))
                store.insert_memory(NewMemory(uid, "user" if mine else "project:demo", "learnings",
                                              " ".join(rng.choices(words, weights=weights, k=6)), text,
                                              T0 + n, tags=tuple(rng.sample(words[:200], 2))))
                owners[owner].append(uid)
        for user, uids in owners.items():
            store.record_writes(user, T0, [], memories=uids)
    finally:
        store.close()
    return words


def questions(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    return [" ".join(rng.choice(words[:40]) if rng.random() < 0.5 else rng.choice(words[:1500])
                     for _ in range(rng.choice((1, 2, 2, 3)))) for _ in range(n)]


def timed(service: Service, asked: list[str], viewer: Viewer | None) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    with acting_as(viewer):
        for q in asked:
            c0, w0 = time.process_time(), time.perf_counter()
            service.search(q, scope="memories", limit=10)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
    return cpu, wall


def backend_cpu(pg: str | None) -> float:
    """CPU seconds of this benchmark's PostgreSQL backends so far (0 on SQLite)."""
    return (postgres_cpu_seconds(pg, "nmem_viewer_bench") or 0.0) if pg else 0.0


def summary(name: str, cpu: list[float], wall: list[float]) -> str:
    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(len(xs) * 0.9)] * 1000

    return (f"{name:<10} cpu p50 {statistics.median(cpu) * 1000:7.2f} ms  p90 {p90(cpu):7.2f} ms   "
            f"wall p50 {statistics.median(wall) * 1000:7.2f} ms  p90 {p90(wall):7.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--private", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pg", default=None, help="a PostgreSQL URL: serve a fresh schema on it instead of SQLite")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nmem-viewer-") as tmp:
        home = Path(tmp)
        schema = None
        if args.pg:
            schema, url = pg_schema(args.pg, "nmem_viewer_bench")
        else:
            url = f"sqlite:///{home / 'nmem.db'}"
        try:
            t = time.perf_counter()
            words = build(url, args.memories, args.private, args.seed)
            print(f"built {args.memories} memories ({args.private} private to ann and carol) "
                  f"in {time.perf_counter() - t:.1f} s on {'PostgreSQL' if args.pg else 'SQLite'}")
            asked = questions(words, args.queries, args.seed)
            service = Service.open(load_settings({"NMEM_HOME": str(home), "NMEM_STORE_URL": url}))
            try:
                timed(service, asked, None)
                timed(service, asked, Viewer("bob"))   # warm both paths
                runs: dict[str, tuple[list[float], list[float]]] = {"nobody": ([], []), "bob": ([], [])}
                backend = {"nobody": 0.0, "bob": 0.0}
                for _ in range(args.rounds):   # alternating, so load drifts hit both alike
                    for name, viewer in (("nobody", None), ("bob", Viewer("bob"))):
                        before = backend_cpu(args.pg)
                        cpu, wall = timed(service, asked, viewer)
                        backend[name] += backend_cpu(args.pg) - before
                        runs[name][0].extend(cpu)
                        runs[name][1].extend(wall)
            finally:
                service.close()
            for name, (cpu, wall) in runs.items():
                per = f"   PostgreSQL CPU {backend[name] / len(cpu) * 1000:.2f} ms a search" if args.pg else ""
                print(summary(name, cpu, wall) + per)
            print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {os.cpu_count()} cores; "
                  f"python {sys.version.split()[0]}")
        finally:
            if schema:
                drop_schema(args.pg, schema)


if __name__ == "__main__":
    main()
