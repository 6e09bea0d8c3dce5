"""CLI start-up: the common commands as whole processes, beside the bare interpreter.

Builds a database of N observations (default 20,000, with some memories) in a temporary
NMEM_HOME, then runs `nmem search`, `recall`, `get`, `status` and `capture` through the `nmem`
console script, interleaved R times each (default 30), twice: the light path users get
(`nmem.adapters.cli.light`) and the full click CLI (`NMEM_CLI_LIGHT=0`, what every command cost
before), beside `python -c pass` and `python -S -c pass` measured in the same rounds. It prints
p50 wall and CPU time (user + system, which other load on the machine moves much less than
wall time) per command, the ratio to `python -c pass`, and what one run of each imports
(`-X importtime`: modules, nmem's among them, and their self time). With `--callgrind` (and
valgrind installed) it also counts the instructions of one run of each (callgrind's Ir), which
other load on the machine does not move: the figure to compare across runs and machines.

    .venv/bin/python bench/cli.py [--runs 30] [--observations 20000] [--callgrind] [--json]

subcog budgets a CLI command at 50 ms; nmem's target is well under twice the interpreter's
own start-up (`python -c pass`), as the hook's is.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nmem
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.service.api import Service

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hooks import synthetic_events  # the hook benchmark's sessions (bench scripts import each other)
from measure import importtime_summary

COMMANDS: dict[str, list[str]] = {
    "search": ["search", "export rows"],
    "recall": ["recall", "streaming"],
    "get": ["get", "42", "p7"],
    "status": ["status"],
    "capture": ["capture", "learnings", "Stream the export", "--content", "iter() keeps memory flat", "--tags",
                "bench"],
}


def populate(home: Path, n_observations: int) -> dict[str, Any]:
    started = time.perf_counter()
    service = Service.open(load_settings({"NMEM_HOME": str(home)}))
    try:
        with service.store.transaction():
            for payload, ts in synthetic_events(n_observations, int(time.time()) - 60):
                service.record_event(parse(payload, now=ts))
        for i in range(40):
            service.capture(f"Export streaming note {i}: iter() instead of list() keeps memory flat",
                            summary=f"Streaming export {i}", namespace="learnings", domain="project:billing-api")
        status = service.status()
    finally:
        service.close()
    return {"observations": status["observations"], "db_bytes": status["size_bytes"],
            "seconds": round(time.perf_counter() - started, 1)}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one process that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=env.get("BENCH_CWD"), check=False,
                          stdin=subprocess.DEVNULL)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"bench/cli.py: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def importtime(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What one run imports: modules, nmem's modules, and the self time of each group (ms)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env,
                          cwd=env.get("BENCH_CWD"), check=False, stdin=subprocess.DEVNULL)
    summary = importtime_summary(done.stderr)
    summary["click"] = "click" in summary.pop("names")
    return summary


def instructions(argv: list[str], env: dict[str, str]) -> int | None:
    """Instructions one run executes (callgrind's Ir), or None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
                              capture_output=True, text=True, env=env, cwd=env.get("BENCH_CWD"), check=False,
                              stdin=subprocess.DEVNULL)
    found = [line.rsplit(":", 1)[1] for line in done.stderr.splitlines() if "Collected :" in line]
    return int(found[-1].strip()) if found else None


def measure(home: Path, runs: int, warmup: int = 2, callgrind: bool = False) -> dict[str, Any]:
    script = str(Path(sys.executable).parent / "nmem")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(NMEM_HOME=str(home))
    env["BENCH_CWD"] = str(home.parent)  # the commands' working directory: a project of its own
    full_env = {**env, "NMEM_CLI_LIGHT": "0"}
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env),
        "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], env),
    }
    for name, args in COMMANDS.items():
        cases[f"{name}|light"] = ([script, *args], env)
        cases[f"{name}|full"] = ([script, *args], full_env)
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(-warmup, runs):
        order = list(cases) if i % 2 == 0 else list(reversed(cases))
        for name in order:
            argv, case_env = cases[name]
            w, c = timed(argv, case_env)
            if i >= 0:
                wall[name].append(w)
                cpu[name].append(c)
    results: dict[str, Any] = {}
    for name in cases:
        results[name] = {"p50": round(statistics.median(wall[name]), 1),
                         "cpu_p50": round(statistics.median(cpu[name]), 1), "min": round(min(wall[name]), 1)}
    for name, args in COMMANDS.items():
        results[f"{name}|light"]["imports"] = importtime([script, *args], env)
        results[f"{name}|full"]["imports"] = importtime([script, *args], full_env)
    if callgrind:
        for name, (argv, case_env) in cases.items():
            results[name]["ir"] = instructions(argv, case_env)
    return results


def text_report(db: dict[str, Any], results: dict[str, Any], runs: int) -> str:
    floor = results["python -c pass"]
    lines = [f"nmem CLI benchmark: {db['observations']:,} observations ({db['db_bytes'] / 1e6:.0f} MB); {runs} runs "
             f"each, interleaved; python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f} on "
             f"{os.cpu_count()} cores", "",
             f"{'process':22} {'p50 ms':>8} {'cpu p50':>8} {'x floor':>8} {'cpu x':>6}   {'imports':>7} {'nmem':>5} "
             f"{'self ms':>8} {'nmem ms':>8}" + (f" {'Ir (M)':>8} {'Ir x':>6}" if "ir" in floor else "")]

    def ir(s: dict[str, Any]) -> str:
        if "ir" not in s:
            return ""
        if s["ir"] is None or floor["ir"] is None:
            return f" {'-':>8} {'-':>6}"
        return f" {s['ir'] / 1e6:8.1f} {s['ir'] / floor['ir']:6.2f}"

    for name in ("python -c pass", "python -S -c pass"):
        s = results[name]
        lines.append(f"{name:22} {s['p50']:8.1f} {s['cpu_p50']:8.1f} {s['p50'] / floor['p50']:8.2f} "
                     f"{s['cpu_p50'] / floor['cpu_p50']:6.2f}   {'':7} {'':5} {'':8} {'':8}{ir(s)}")
    for command in COMMANDS:
        for path in ("light", "full"):
            s = results[f"{command}|{path}"]
            imp = s["imports"]
            label = f"nmem {command}" + (" (full)" if path == "full" else "")
            lines.append(f"{label:22} {s['p50']:8.1f} {s['cpu_p50']:8.1f} {s['p50'] / floor['p50']:8.2f} "
                         f"{s['cpu_p50'] / floor['cpu_p50']:6.2f}   "
                         f"{imp['modules']:7d} {imp['nmem_modules']:5d} {imp['self_ms']:8.1f} "
                         f"{imp['nmem_self_ms']:8.1f}{ir(s)}")
    lines += ["", "light: what `nmem <command>` runs (nmem.adapters.cli.light); "
                  "full: the click CLI (NMEM_CLI_LIGHT=0).",
              "x floor: p50 wall over `python -c pass`'s; cpu x: p50 CPU over its; imports: one `-X importtime` "
              "run (modules, nmem's, self time)"
              + ("; Ir: instructions of one run (callgrind), x: over `python -c pass`'s." if "ir" in floor else ".")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="measured runs per process (default 30)")
    parser.add_argument("--observations", type=int, default=20_000, help="database size (default 20000)")
    parser.add_argument("--callgrind", action="store_true",
                        help="also count each process's instructions once (valgrind's callgrind; load-independent)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    compileall.compile_dir(str(Path(nmem.__file__).parent), quiet=1)
    home = Path(tempfile.mkdtemp(prefix="nmem-bench-cli-")) / "home"
    try:
        db = populate(home, args.observations)
        results = measure(home, args.runs, callgrind=args.callgrind)
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
    if args.json:
        print(json.dumps({"database": db, "runs": args.runs, "python": sys.version.split()[0], **results}, indent=2))
    else:
        print(text_report(db, results, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
