"""MCP server benchmark: `nmem serve` startup and `search` latency through the stdio SDK client.

    .venv/bin/python bench/mcp_server.py               # 10 startups, 100k observations, 200 searches
    .venv/bin/python bench/mcp_server.py --json        # one JSON object with every figure
    .venv/bin/python bench/mcp_server.py --importtime  # also: which imports `nmem serve` adds to the SDK's

(The file is not called bench/mcp.py: a module named `mcp` on ruff's `src` path makes ruff file
`import mcp` as first-party everywhere, and run as a script it would shadow the SDK.)

(a) Startup: `python -m nmem serve` as a real stdio subprocess, timed from spawn to the
    answer to the first `tools/list` (initialize, initialized, tools/list written at once as
    JSON lines, the way a client does). The median of --runs is printed next to the bare
    `python -c "import mcp.server.lowlevel"` (spawn to a line printed after the import) measured
    in the same run, so a loaded machine shows in both. Target: first answer <= 1.0 s.
(b) Search: a database of --observations observations from bench/corpus.py (recorded in
    process inside one transaction), then `search` calls through the official SDK client
    (`stdio_client` + `ClientSession`) to a `nmem serve` subprocess: p50/p95 end to end, next
    to the same queries on the service API in process. Target: p50 <= 30 ms.

If the startup target is missed (or with --importtime), `python -X importtime` of a real
`nmem serve` startup is compared with that of the bare SDK import, and the modules nmem adds
are listed with their own import time. Everything runs on a throw-away NMEM_HOME.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import corpus
import nmem
from measure import emit, loadavg, machine, percentile
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.service.api import Service

STARTUP_TARGET_S = 1.0
SEARCH_P50_TARGET_MS = 30.0
WARMUP = 10
NMEM_VARS_PREFIX = "NMEM_"
HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def series(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    v = [x * scale for x in values]
    return {"n": len(v), "min": round(min(v), digits), "p50": round(statistics.median(v), digits),
            "p95": round(percentile(v, 95), digits), "max": round(max(v), digits)}


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """This environment minus NMEM_*, on `home` (children also run with `home` as their cwd)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(NMEM_VARS_PREFIX)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**env, "NMEM_HOME": str(home), **extra}


# -- (a) startup ------------------------------------------------------------------------------------


def time_first_line(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn to the first line on stdout (the interpreter's teardown is not counted)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            cwd=env["NMEM_HOME"])
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    proc.stdout.close()
    if proc.wait(timeout=30) != 0 or not line:
        raise RuntimeError(f"{argv} failed")
    return elapsed


def time_first_tools_list(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds to the initialize answer, seconds to the tools/list answer, tools listed), from spawn."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1, cwd=env["NMEM_HOME"])
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in HANDSHAKE))
        proc.stdin.flush()
        t_init = 0.0
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"nmem serve exited with {proc.wait()} before answering tools/list")
            message = json.loads(line)  # stdout must carry only JSON-RPC
            if message.get("id") == 1:
                t_init = time.perf_counter() - t0
            if message.get("id") == 2:
                return t_init, time.perf_counter() - t0, len(message["result"]["tools"])
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def startup(home: Path, runs: int, log: Callable[[str], None]) -> dict[str, Any]:
    env = child_env(home, CLAUDE_PROJECT_DIR=f"{corpus.HOME}/{corpus.project_names()[0]}")
    serve = [sys.executable, "-m", "nmem", "serve"]
    sdk = [sys.executable, "-c", "import mcp.server.lowlevel; print('imported', flush=True)"]
    floor = [sys.executable, "-c", "print('started', flush=True)"]
    # warm the page cache and bytecode once, untimed
    time_first_tools_list(serve, env)
    time_first_line(sdk, env)
    first: list[float] = []
    init: list[float] = []
    bare: list[float] = []
    python: list[float] = []
    tools = 0
    for i in range(runs):  # interleaved, so a load spike hits every series alike
        log(f"  startup run {i + 1}/{runs}")
        t_init, t_list, tools = time_first_tools_list(serve, env)
        init.append(t_init)
        first.append(t_list)
        bare.append(time_first_line(sdk, env))
        python.append(time_first_line(floor, env))
    return {"first_tools_list_s": series(first), "initialize_answer_s": series(init),
            "import_mcp_server_lowlevel_s": series(bare), "python_floor_s": series(python), "tools": tools,
            "overhead_over_sdk_import_s": round(statistics.median(first) - statistics.median(bare), 3),
            "target_s": STARTUP_TARGET_S, "meets_target": statistics.median(first) <= STARTUP_TARGET_S}


# -- imports ------------------------------------------------------------------------------------------

_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def importtime(argv: list[str], env: dict[str, str], stdin: str | None) -> dict[str, tuple[int, int, int]]:
    """module -> (self µs, cumulative µs, depth) from `python -X importtime`."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, input=stdin, capture_output=True,
                          text=True, timeout=60, check=False, cwd=env["NMEM_HOME"])
    out: dict[str, tuple[int, int, int]] = {}
    for line in done.stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            out[m.group(4)] = (int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2)
    return out


def importtime_min(argv: list[str], env: dict[str, str], stdin: str | None,
                   runs: int) -> dict[str, tuple[int, int, int]]:
    """The fastest of `runs` importtime reports, module by module (one run alone is noisy)."""
    best: dict[str, tuple[int, int, int]] = {}
    for _ in range(runs):
        for name, t in importtime(argv, env, stdin).items():
            if name not in best or t[0] < best[name][0]:
                best[name] = t
    return best


def imports(home: Path, runs: int = 5) -> dict[str, Any]:
    env = child_env(home)
    handshake = "".join(json.dumps(m) + "\n" for m in HANDSHAKE)
    serve = importtime_min(["-m", "nmem", "serve"], env, handshake, runs)
    sdk = importtime_min(["-c", "import mcp.server.lowlevel"], env, None, runs)
    added = {name: t for name, t in serve.items() if name not in sdk}
    by_package: dict[str, int] = {}
    for name, (self_us, _, _) in added.items():
        by_package[name.split(".")[0]] = by_package.get(name.split(".")[0], 0) + self_us
    top = sorted(added.items(), key=lambda kv: -kv[1][0])[:15]
    return {
        "serve_total_ms": round(sum(t[0] for t in serve.values()) / 1000, 1),
        "sdk_total_ms": round(sum(t[0] for t in sdk.values()) / 1000, 1),
        "added_by_nmem_serve_ms": round(sum(t[0] for t in added.values()) / 1000, 1),
        "added_modules": len(added),
        "added_by_package_ms": {k: round(v / 1000, 1) for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])
                                if v >= 1000},
        "added_top_modules_ms": {name: round(t[0] / 1000, 1) for name, t in top},
    }


# -- (b) search ---------------------------------------------------------------------------------------


def populate(home: Path, n: int, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    t0 = time.perf_counter()
    events = 0
    if service.status()["observations"]:
        log("  (database kept from an earlier run: not recorded again)")
        n = 0
    with service.store.transaction():
        for payload in (corpus.generate(n, seed) if n else ()):
            service.record_event(parse(payload, now=payload[corpus.TS_KEY]))
            events += 1
            if events % 20000 == 0:
                log(f"  {events:,} events recorded")
    seconds = time.perf_counter() - t0
    status = service.status()
    service.close()
    return {"observations": status["observations"], "sessions": status["sessions"], "prompts": status["prompts"],
            "memories": status["memories"], "events": events, "seconds": round(seconds, 1)}


async def search_latency(home: Path, n: int, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    pairs = corpus.project_queries(n + WARMUP, seed)
    params = StdioServerParameters(command=sys.executable, args=["-m", "nmem", "serve"], env=child_env(home),
                                   cwd=str(home))
    results: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for label, make in (
                ("project", lambda p, q: {"query": q, "project": p}),
                ("all_projects", lambda p, q: {"query": q, "project": None}),
            ):
                log(f"  {n} searches through the stdio client ({label}) …")
                times: list[float] = []
                hits: list[int] = []
                for i, (project, query) in enumerate(pairs):
                    t0 = time.perf_counter()
                    result = await session.call_tool("search", make(project, query))
                    dt = time.perf_counter() - t0
                    if result.is_error:
                        raise RuntimeError(f"search {query!r} failed: {result.content}")
                    if i >= WARMUP:
                        times.append(dt)
                        hits.append(int((result.structured_content or {}).get("count", 0)))
                results[label] = {**series(times, 1000), "mean_results": round(statistics.fmean(hits), 1)}
    # the same calls on the service API in this process: what the protocol and transport add
    service = Service.open(load_settings({"NMEM_HOME": str(home)}), readonly=True)
    try:
        for project, query in pairs[:WARMUP]:
            service.search(query, project=project)
        times = []
        for project, query in pairs[WARMUP:]:
            t0 = time.perf_counter()
            service.search(query, project=project)
            times.append(time.perf_counter() - t0)
        results["in_process_service_project"] = series(times, 1000)
    finally:
        service.close(checkpoint=False)
    results["target_p50_ms"] = SEARCH_P50_TARGET_MS
    results["meets_target"] = results["project"]["p50"] <= SEARCH_P50_TARGET_MS
    return results


# -- the run --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, workdir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    # nmem's bytecode compiled as `pip install` would, so startup is not measured cold
    compileall.compile_dir(str(Path(nmem.__file__).parent), quiet=1)
    result: dict[str, Any] = {"machine": machine(mcp=version("mcp"), nmem=nmem.__version__), "config": {
        "runs": args.runs, "observations": args.observations, "queries": args.queries, "seed": args.seed}}
    home = workdir / "home"
    log(f"populating {args.observations:,} observations (one transaction) …")
    result["database"] = populate(home, args.observations, args.seed, log)
    log(f"startup: {args.runs} runs of `nmem serve` to the first tools/list …")
    result["startup"] = startup(home, args.runs, log)
    if args.importtime or not result["startup"]["meets_target"]:
        log("imports: python -X importtime of nmem serve vs import mcp.server.lowlevel …")
        result["imports"] = imports(home)
    result["search"] = asyncio.run(search_latency(home, args.queries, args.seed, log))
    result["machine"]["loadavg_end"] = loadavg()
    return result


def render(r: dict[str, Any]) -> str:
    m, s, q = r["machine"], r["startup"], r["search"]
    db = r["database"]

    def row(label: str, x: dict[str, float], unit: str, fmt: str = ".3f") -> str:
        return (f"  {label:<50} p50 {x['p50']:{fmt}} {unit}   min {x['min']:{fmt}}   p95 {x['p95']:{fmt}}   "
                f"max {x['max']:{fmt}}")

    ok = {True: "meets", False: "MISSES"}
    lines = [
        f"nmem MCP benchmark  {m['date']}",
        f"machine: {m['cpu']}, {m['cores']} cores; Python {m['python']}, SQLite {m['sqlite']}, mcp {m['mcp']}, "
        f"nmem {m['nmem']}; 1-min load average {m['loadavg_start']} at start, {m['loadavg_end']} at end",
        f"database: {db['observations']:,} observations, {db['sessions']:,} sessions, {db['prompts']:,} prompts, "
        f"{db['memories']:,} memories (bench/corpus.py seed {r['config']['seed']}; recorded in {db['seconds']} s)",
        "",
        f"(a) startup, spawn to answer, {s['first_tools_list_s']['n']} runs interleaved",
        row("nmem serve → first tools/list answer", s["first_tools_list_s"], "s"),
        row("nmem serve → initialize answer", s["initialize_answer_s"], "s"),
        row('python -c "import mcp.server.lowlevel; print()"', s["import_mcp_server_lowlevel_s"], "s"),
        row('python -c "print()"', s["python_floor_s"], "s"),
        f"  nmem serve over the bare SDK import: {s['overhead_over_sdk_import_s']:+.3f} s (medians); "
        f"target first answer ≤ {s['target_s']} s: {ok[s['meets_target']]}",
    ]
    if "imports" in r:
        i = r["imports"]
        lines += [
            "",
            "    -X importtime (fastest of 5 runs per module): nmem serve imports "
            f"{i['serve_total_ms']:.0f} ms, the bare SDK {i['sdk_total_ms']:.0f} ms; "
            f"{i['added_modules']} modules only in nmem serve: {i['added_by_nmem_serve_ms']:.0f} ms",
            "    added, by package (ms): " + ", ".join(f"{k} {v}" for k, v in i["added_by_package_ms"].items()),
            "    added, slowest modules (ms, self): " + ", ".join(
                f"{k} {v}" for k, v in list(i["added_top_modules_ms"].items())[:10]),
        ]
    lines += [
        "",
        f"(b) search through the stdio SDK client, {q['project']['n']} calls after {WARMUP} warm-up "
        "(bench/corpus.py questions)",
        row("search(query, project=P), end to end", q["project"], "ms", ".2f")
        + f"   results {q['project']['mean_results']}",
        row("search(query, project=null), end to end", q["all_projects"], "ms", ".2f")
        + f"   results {q['all_projects']['mean_results']}",
        row("Service.search(query, project=P), in process", q["in_process_service_project"], "ms", ".2f"),
        f"  target p50 ≤ {q['target_p50_ms']:.0f} ms: {ok[q['meets_target']]}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="startups to time (default 10)")
    parser.add_argument("--observations", type=int, default=100_000, help="database size (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="timed search calls per series (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--importtime", action="store_true", help="always compare import times with the SDK's")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--keep", metavar="DIR", help="build the database in DIR and keep it")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        result = run(args, Path(args.keep), log)
    else:
        with tempfile.TemporaryDirectory(prefix="nmem-bench-mcp-") as tmp:
            result = run(args, Path(tmp), log)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    emit(result, render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
