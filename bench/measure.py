"""What every benchmark here shares: percentiles, the machine a run was on, and printing a report.

Imported by name (`import measure`), as the scripts import each other when run from bench/.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def importtime_summary(stderr: str) -> dict[str, Any]:
    """A `python -X importtime` run's stderr summed: modules imported and their self time (ms), all
    of them and nmem's own, so the next change to a start-up path can be compared with this one."""
    rows = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            self_us, _cumulative, name = line[len("import time:"):].split("|")
            rows.append((name.strip(), int(self_us)))
    own = [(n, us) for n, us in rows if n == "nmem" or n.startswith("nmem.")]
    return {"modules": len(rows), "self_ms": round(sum(us for _, us in rows) / 1000, 1),
            "nmem_modules": len(own), "nmem_self_ms": round(sum(us for _, us in own) / 1000, 1),
            "names": [n for n, _ in rows]}


def loadavg() -> float | None:
    """1-minute load average: a busy machine (tests running beside) inflates every figure."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(**extra: Any) -> dict[str, Any]:
    """The machine, the versions and the time a run started, plus whatever a benchmark adds."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, **extra,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "loadavg_start": loadavg()}


def emit(result: dict[str, Any], render: Callable[[dict[str, Any]], str], as_json: bool) -> None:
    """Print a finished run: one JSON object, or the rendered report and its wall time."""
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(render(result))
    if "wall_seconds" in result:
        print(f"\nwall time {result['wall_seconds']:.0f} s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process and the children it has (the workers), so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, ValueError, IndexError):
        return total
    return total + sum(cpu_seconds(int(c)) for c in children)


def postgres_pids(base: str, application: str) -> set[int]:
    """The backends connected now to the PostgreSQL server `base` under that `application_name`."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        return {int(r[0]) for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,))}


def postgres_cpu_seconds(base: str | None = None, application: str | None = None) -> float | None:
    """CPU seconds of every process of the local PostgreSQL server (its backends included), or None.
    With `application` (and the server's URL `base`): only the backends connected now under that
    `application_name` (one benchmark's server: other work on the same PostgreSQL stays out)."""
    ticks = os.sysconf("SC_CLK_TCK")
    pids = {str(p) for p in postgres_pids(base, application)} if application and base else None
    total, seen = 0.0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        if pids is not None and stat.parent.name not in pids:
            continue
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(postgres)" in text:
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            seen = True
    return total if seen or pids is not None else None


def process_tree(pid: int) -> list[int]:
    """The process and its children (a `--workers` server's workers), recursively."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for c in children for p in process_tree(int(c)))]


ThreadTimes = dict[tuple[int, int], tuple[str, float, float]]


def thread_times(pids: list[int] | set[int], main: str = "event loop") -> ThreadTimes:
    """Every thread of these processes: (its name, CPU seconds, seconds it was runnable but waited
    for a CPU) so far, from /proc/<pid>/task/<tid>/schedstat. A process's main thread is `main`;
    the others keep the OS name their code gave them (nmem's store threads name theirs)."""
    found: ThreadTimes = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                cpu, wait, _ = (int(x) for x in (task / "schedstat").read_text().split())
                name = main if task.name == str(pid) else (task / "comm").read_text().strip()
            except (OSError, ValueError):
                continue
            found[(pid, int(task.name))] = (name, cpu / 1e9, wait / 1e9)
    return found


def thread_kinds(before: ThreadTimes, after: ThreadTimes) -> dict[str, tuple[int, float, float]]:
    """Between two `thread_times`: per thread name, (threads, CPU s, run-queue wait s), busiest first;
    a thread started in between counts from zero."""
    kinds: dict[str, tuple[int, float, float]] = {}
    for key, (name, cpu, wait) in after.items():
        _, cpu0, wait0 = before.get(key, (name, 0.0, 0.0))
        n, c, w = kinds.get(name, (0, 0.0, 0.0))
        kinds[name] = (n + 1, c + cpu - cpu0, w + wait - wait0)
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1][1]))


def pg_schema(base: str, prefix: str) -> tuple[str, str]:
    """A fresh schema on the PostgreSQL server `base`, named `<prefix>_<random>`: (its name, a store URL on it,
    whose connections are named `<prefix>` in pg_stat_activity: `postgres_cpu_seconds(base, prefix)`)."""
    import uuid
    from urllib.parse import quote

    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    return schema, f"{base}{sep}options={quote(f'-csearch_path={schema}', safe='')}&application_name={prefix}"


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
