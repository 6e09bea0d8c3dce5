"""What forgetting costs: `forget` and `purge` with the index rewrite that makes deleted words
leave the file (FTS5 optimize, incremental vacuum, WAL checkpoint), at 10k and 100k observations.

    .venv/bin/python bench/forget.py                  # 10k and 100k observations (~2 minutes on 2 cores)
    .venv/bin/python bench/forget.py --sizes 2000     # a quick look

Each operation runs REPEAT times on a fresh copy of the loaded database, through the service
(`nmem.service.api.Service`), as `nmem forget` / `nmem purge` do; the time of the FTS5 optimize alone
is measured on the same copies. Throw-away data directory; ~/.nmem is never touched.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import corpus
from core import ingest_bulk, open_service
from measure import emit, machine

REPEAT = 3
MEMORIES_PER_1K_OBS = 10   # curated memories beside the observations (1 for every 100)


def build(home: Path, size: int) -> tuple[Path, int]:
    """A database of `size` observations and its memories; (database file, a timestamp after it)."""
    corp = corpus.Corpus(0)
    service = open_service(home, corpus.START)
    ingest_bulk(service, corp.take(size))
    with service.store.transaction():
        for i in range(size * MEMORIES_PER_1K_OBS // 1000):
            service.remember(f"decision {i}: the billing client retries with exponential backoff, "
                             f"capped at {i % 60 + 1} seconds, because the ledger rejects bursts",
                             namespace="decisions", domain="user")
    db = Path(service.settings.db_path)
    service.close()
    return db, corp.last_timestamp + 600


def timed(db: Path, now: int, work: Callable[[Any], object]) -> float:
    """Milliseconds `work(service)` takes on a fresh copy of the database."""
    home = db.parent.parent / "copy"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    shutil.copy(db, home / "nmem.db")
    service = open_service(home, now)
    try:
        t0 = time.perf_counter()
        work(service)
        return (time.perf_counter() - t0) * 1000
    finally:
        service.close()


def optimize_only(table: str) -> Callable[[Any], object]:
    def work(service: Any) -> object:
        conn = service.store._writer()
        return conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    return work


def measure(db: Path, now: int) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    try:
        memory = str(conn.execute("SELECT uid FROM memories ORDER BY id LIMIT 1 OFFSET 3").fetchone()[0])
        observation = int(conn.execute("SELECT id FROM observations ORDER BY id LIMIT 1 OFFSET 100").fetchone()[0])
        oldest, newest = conn.execute("SELECT MIN(timestamp), MAX(timestamp) FROM observations").fetchone()
        memories = int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    finally:
        conn.close()
    tenth = now - (oldest + (newest - oldest) // 10)  # an age that selects the oldest ~10%
    operations: dict[str, Callable[[Any], object]] = {
        "forget one memory": lambda s: s.forget(memory),
        "purge one observation": lambda s: s.purge(ids=[observation], confirm=True),
        "purge the oldest 10% (by age)": lambda s: s.purge(older_than=tenth, confirm=True),
        "delete one observation, SQL only": lambda s: s.store._exec("DELETE FROM observations WHERE id = ?",
                                                                    (observation,)),
        "optimize memories_fts alone": optimize_only("memories_fts"),
        "optimize observations_fts alone": optimize_only("observations_fts"),
    }
    return {"memories": memories,
            "ms": {name: round(statistics.median(timed(db, now, op) for _ in range(REPEAT)), 1)
                   for name, op in operations.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="observation counts (comma-separated)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine(), "repeat": REPEAT, "sizes": []}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="nmem-forget-") as work:
            print(f"building {size:,} observations …", file=sys.stderr)
            db, now = build(Path(work) / "main", size)
            result["sizes"].append({"observations": size, "db_mb": round(db.stat().st_size / 1e6, 1),
                                    **measure(db, now)})
    emit(result, render, args.json)
    return 0


def render(result: dict[str, Any]) -> str:
    lines = [f"sqlite {result['machine']['sqlite']}, python {result['machine']['python']}, "
             f"median of {result['repeat']} runs, each on a fresh copy"]
    for entry in result["sizes"]:
        lines.append(f"{entry['observations']:,} observations, {entry['memories']:,} memories, {entry['db_mb']} MB:")
        lines += [f"  {name:34} {ms:9.1f} ms" for name, ms in entry["ms"].items()]
    return "\n".join(lines)

if __name__ == "__main__":
    sys.exit(main())
