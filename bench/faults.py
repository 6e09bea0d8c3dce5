"""Fault scenarios for the hook path, at scale: parallel spool drains, SIGKILLed hooks, SIGKILLed imports.

Every scenario runs real processes (`python -m nmem record`, `python -m nmem import
claude-code`) against a database in a temporary NMEM_HOME, then counts what reached the
database. Each event carries a unique Bash command (`echo <tag>`), so a stored row names the
event it came from. A row of the table says:

- tried: events sent (hooks started; for imports, the rows a clean import stores);
- stored: distinct events found in the database afterwards;
- lost: events acknowledged (the hook exited 0) but not stored, or imported rows missing
  after the import was run again to completion;
- duplicated: extra copies of any event;
- errors: hooks that failed without being killed, ERROR lines in the nmem log, files left
  in the spool, and a database failing `PRAGMA integrity_check`.

    .venv/bin/python bench/faults.py                      # 200 kills, 16 drainers over 2,000 spooled events
    .venv/bin/python bench/faults.py --kills 20 --drainers 4 --spooled 200 --import-kills 5   # a quick run
    .venv/bin/python bench/faults.py --json

The test suite runs the same scenarios at a small scale (tests/reliability/).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CWD = "/home/dev/code/faults"

# Runs hook events in one process through the hook entry (`nmem.adapters.hooks.run.run`), one fresh
# service per event exactly as a hook process does: how the scenarios fill a spool quickly.
DRIVER = """
import io, json, sys
from nmem.adapters.hooks import run as hooks
env = json.loads(sys.argv[1])
failures = 0
for line in sys.stdin:
    out, err = io.StringIO(), io.StringIO()
    if hooks.run(["record"], io.StringIO(line), out, err, env=env) != 0 or err.getvalue():
        failures += 1
        print(err.getvalue().strip(), file=sys.stderr)
print(failures)
"""


@dataclass
class Outcome:
    """One row of the table."""

    scenario: str
    tried: int = 0
    stored: int = 0
    lost: int = 0
    duplicated: int = 0
    errors: int = 0
    killed: int = 0
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return self.lost == self.duplicated == self.errors == 0


# -- processes and the database -------------------------------------------------------------------


def bash(tag: str, session: str = "faults") -> dict[str, Any]:
    """A PostToolUse hook payload whose stored content is `echo <tag>`."""
    return {"session_id": session, "transcript_path": "", "cwd": CWD, "hook_event_name": "PostToolUse",
            "tool_name": "Bash", "tool_input": {"command": f"echo {tag}"},
            "tool_response": {"stdout": tag, "stderr": "", "interrupted": False}}


def env_for(home: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env["NMEM_HOME"] = str(home)
    env.update(overrides)
    return env


def start_hook(home: Path, payload: dict[str, Any], **env: str) -> subprocess.Popen[bytes]:
    """A `nmem record` process with its input written and closed; the caller waits for it or kills it."""
    proc = subprocess.Popen([sys.executable, "-m", "nmem", "record"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(home, **env))
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(payload).encode())
    proc.stdin.close()
    proc.stdin = None  # written and closed: communicate() has nothing to send
    return proc


def finish(proc: subprocess.Popen[bytes], timeout: float = 120) -> tuple[int, str]:
    """Exit code and stderr of a started process."""
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.decode("utf-8", "replace")


def run_hook(home: Path, payload: dict[str, Any], **env: str) -> tuple[int, str]:
    return finish(start_hook(home, payload, **env))


def run_in_one_process(home: Path, payloads: list[dict[str, Any]], **env: str) -> int:
    """Run hook events through `nmem.adapters.hooks.run.run` in one process; returns how many failed."""
    stdin = "".join(json.dumps(p) + "\n" for p in payloads)
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(env_for(home, **env))], input=stdin,
                          capture_output=True, text=True, env=env_for(home, **env), timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"driver failed: {done.stderr[-2000:]}")
    return int(done.stdout.strip())


def db_path(home: Path) -> Path:
    return home / "nmem.db"


def hold_write_lock(home: Path) -> sqlite3.Connection:
    """Take the write lock the way another writer does (`BEGIN IMMEDIATE`); roll back to let go."""
    conn = sqlite3.connect(db_path(home), isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def query(home: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db_path(home))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def stored_tags(home: Path) -> Counter[str]:
    """How many times each `echo <tag>` event is stored."""
    rows = query(home, "SELECT content FROM observations WHERE obs_type = 'command'")
    return Counter(str(r[0]).split("\n")[0].removeprefix("echo ") for r in rows)


def integrity(home: Path) -> str:
    return str(query(home, "PRAGMA integrity_check")[0][0])


def spool_left(home: Path) -> list[str]:
    """Files still in the spool: events waiting or claimed, set aside, or half written."""
    spool = home / "spool"
    return sorted(p.name for p in spool.iterdir()) if spool.is_dir() else []


def log_lines(home: Path, level: str) -> list[str]:
    log = home / "logs" / "nmem.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line for line in lines if f" {level} " in line]


def settle(home: Path, label: str, max_runs: int = 50) -> list[str]:
    """Run plain hooks until the spool is empty (each drains up to 200 events); their tags."""
    tags = []
    for i in range(max_runs):
        if not spool_left(home):
            break
        tag = f"{label}-settle-{i}"
        code, err = run_hook(home, bash(tag))
        if code != 0 or err:
            raise RuntimeError(f"a settling hook failed ({code}): {err}")
        tags.append(tag)
    return tags


def count(outcome: Outcome, home: Path, acknowledged: list[str], sent: list[str]) -> Outcome:
    """Fill in stored, lost, duplicated; add log, spool and integrity trouble to errors."""
    stored = stored_tags(home)
    outcome.tried = len(sent)
    outcome.stored = sum(1 for tag in sent if stored[tag])
    outcome.lost = sum(1 for tag in acknowledged if not stored[tag])
    outcome.duplicated = sum(n - 1 for n in stored.values() if n > 1)
    errors = log_lines(home, "ERROR")
    left = spool_left(home)
    check = integrity(home)
    outcome.errors += len(errors) + len(left) + (check != "ok")
    if errors:
        outcome.notes.append(f"log: {errors[-1][:200]}")
    if left:
        outcome.notes.append(f"spool: {left[:5]}")
    if check != "ok":
        outcome.notes.append(f"integrity: {check[:200]}")
    return outcome


# -- scenarios ------------------------------------------------------------------------------------


def parallel_drains(home: Path, drainers: int = 16, spooled: int = 2000, hold_s: float = 0.5) -> Outcome:
    """`spooled` events wait in the spool; `drainers` hooks start while a long transaction holds
    the write lock and all drain at once when it ends. Every event must be stored exactly once."""
    started = time.perf_counter()
    outcome = Outcome(f"parallel drains ({drainers} hooks, {spooled} spooled)")
    code, err = run_hook(home, bash("init"))
    if code != 0:
        raise RuntimeError(f"first hook failed: {err}")
    spool_tags = [f"spooled-{i}" for i in range(spooled)]
    lock = hold_write_lock(home)
    try:
        failed = run_in_one_process(home, [bash(t) for t in spool_tags], NMEM_BUSY_BUDGET_MS="0")
        waiting = [n for n in spool_left(home) if n.endswith(".json")]
        if failed or len(waiting) != spooled:
            raise RuntimeError(f"spooling failed: {failed} failures, {len(waiting)} files for {spooled} events")
        drain_tags = [f"drainer-{i}" for i in range(drainers)]
        procs = [start_hook(home, bash(t)) for t in drain_tags]
        time.sleep(hold_s)
    finally:
        lock.rollback()
        lock.close()
    acknowledged = ["init", *spool_tags]
    for tag, proc in zip(drain_tags, procs, strict=True):
        code, err = finish(proc)
        if code == 0 and not err:
            acknowledged.append(tag)
        else:
            outcome.errors += 1
            outcome.notes.append(f"{tag} exited {code}: {err.strip()[:200]}")
    acknowledged += settle(home, "drains")
    outcome = count(outcome, home, acknowledged, acknowledged)
    outcome.seconds = time.perf_counter() - started
    return outcome


class LockFlapper:
    """Takes and lets go of the write lock at random, so hooks wait, spool and drain."""

    def __init__(self, home: Path, rng: random.Random, held: tuple[float, float] = (0.05, 0.2),
                 free: tuple[float, float] = (0.02, 0.1)) -> None:
        self.home, self.rng, self.held, self.free = home, rng, held, free
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LockFlapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(db_path(self.home), isolation_level=None, timeout=30)
        try:
            while not self.stop.is_set():
                conn.execute("BEGIN IMMEDIATE")
                time.sleep(self.rng.uniform(*self.held))
                conn.execute("ROLLBACK")
                time.sleep(self.rng.uniform(*self.free))
        finally:
            conn.close()


def hook_seconds(home: Path, runs: int = 5) -> float:
    """A hook's typical wall time here, to aim kills inside its run."""
    times = []
    for i in range(runs):
        start = time.perf_counter()
        code, err = run_hook(home, bash(f"warmup-{i}"))
        if code != 0:
            raise RuntimeError(f"warm-up hook failed: {err}")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def killed_hooks(home: Path, kills: int = 200, parallel: int = 4, seed: int = 1) -> Outcome:
    """Hooks SIGKILLed at random moments of their run (start-up, open, drain, write, commit,
    close) while the write lock comes and goes, so some spool and some drain. Every
    acknowledged event must be stored once; no event twice; the database stays intact."""
    started = time.perf_counter()
    rng = random.Random(seed)
    outcome = Outcome(f"SIGKILL during hook writes ({kills} kills)")
    typical = hook_seconds(home)
    warmups = [f"warmup-{i}" for i in range(5)]
    sent: list[str] = list(warmups)
    acknowledged: list[str] = list(warmups)
    killed = 0
    n = 0
    with LockFlapper(home, rng):
        while killed < kills:
            wave = []
            for _ in range(parallel):
                tag = f"hook-{n}"
                n += 1
                sent.append(tag)
                kill_at = rng.uniform(0.3, 1.2) * typical if rng.random() < 0.6 else None
                wave.append((tag, start_hook(home, bash(tag, f"s{n % 3}"), NMEM_BUSY_BUDGET_MS="80"), kill_at))
            t0 = time.perf_counter()
            for tag, proc, kill_at in sorted(wave, key=lambda w: w[2] or 1e9):
                if kill_at is not None:
                    time.sleep(max(0.0, t0 + kill_at - time.perf_counter()))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                code, err = finish(proc)
                if code == -signal.SIGKILL:
                    killed += 1
                elif code == 0 and not err:
                    acknowledged.append(tag)
                else:
                    outcome.errors += 1
                    outcome.notes.append(f"{tag} exited {code}: {err.strip()[:200]}")
    left = spool_left(home)
    claims = sum(name.endswith(".claim.json") for name in left)
    settled = settle(home, "kills")
    sent += settled
    acknowledged += settled
    outcome = count(outcome, home, acknowledged, sent)
    outcome.killed = killed
    spooled = sum("; spooled " in line for line in log_lines(home, "WARNING"))
    outcome.notes.insert(0, f"{killed} killed, {len(acknowledged)} acknowledged of {len(sent)} hooks; "
                            f"{spooled} events spooled on a busy database and drained by later hooks; at the end "
                            f"{len(left) - claims} waited in the spool and {claims} claims of killed drainers")
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- imports ----------------------------------------------------------------------------------------


def transcript_line(sid: str, clock: int, n: int, kind: str, content: Any, **extra: Any) -> str:
    """The n-th line of a session's transcript, in the shape Claude Code writes."""
    return json.dumps({"type": kind, "uuid": f"{sid}-{n}", "sessionId": sid, "cwd": CWD, "version": "2.1.90",
                       "gitBranch": "main", "isSidechain": False,
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(clock + n)),
                       "message": {"role": kind, "content": content}, **extra})


def write_transcripts(root: Path, sessions: int = 40, calls: int = 60) -> list[Path]:
    """Claude Code transcripts (`<root>/<project dir>/<session>.jsonl`): a prompt, then `calls`
    Bash calls with their results and the agent's thinking, then a closing message."""
    project = root / CWD.replace("/", "-")
    project.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(sessions):
        sid, clock = f"import-{s:04d}-{'0' * 8}", 1_790_000_000 + s * 3600
        lines = [transcript_line(sid, clock, 0, "user", f"session {s}: run the export checks one by one")]
        for c in range(calls):
            tag = f"import-{s}-{c}"
            lines.append(transcript_line(sid, clock, 2 * c + 1, "assistant", [
                {"type": "thinking", "thinking": f"check {c} of session {s} comes next"},
                {"type": "tool_use", "id": f"toolu_{s}_{c}", "name": "Bash", "input": {"command": f"echo {tag}"}},
            ]))
            lines.append(transcript_line(sid, clock, 2 * c + 2, "user",
                                         [{"type": "tool_result", "tool_use_id": f"toolu_{s}_{c}", "content": tag}],
                                         toolUseResult={"stdout": tag, "stderr": "", "interrupted": False}))
        lines.append(transcript_line(sid, clock, 2 * calls + 1, "assistant",
                                     [{"type": "text", "text": f"Session {s}: all checks ran."}]))
        path = project / f"{sid}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def import_command(home: Path, root: Path) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, "-m", "nmem", "import", "claude-code", str(root), "--format", "json"], env_for(home)


def imported_rows(home: Path) -> Counter[tuple[Any, ...]]:
    """Every row an import stores, as comparable tuples (ids and times left out)."""
    rows: Counter[tuple[Any, ...]] = Counter()
    if not db_path(home).exists():
        return rows
    rows.update(("observation", *r) for r in query(
        home, "SELECT session_id, obs_type, content, file_path FROM observations"))
    rows.update(("prompt", *r) for r in query(home, "SELECT session_id, source, content FROM prompts"))
    rows.update(("session", *r) for r in query(
        home, "SELECT id, project, ended_at IS NOT NULL, summary FROM sessions"))
    return rows


def killed_imports(work: Path, kills: int = 20, sessions: int = 40, calls: int = 60, seed: int = 2) -> Outcome:
    """`nmem import claude-code` SIGKILLed at random moments and started again until it completes,
    round after round on fresh databases: each must end holding exactly what one clean import
    stores, and pass integrity_check."""
    started = time.perf_counter()
    rng = random.Random(seed)
    outcome = Outcome(f"SIGKILL during import ({kills} kills, {sessions} transcripts)")
    root = work / "projects"
    write_transcripts(root, sessions, calls)
    argv, env = import_command(work / "reference", root)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    typical = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"reference import failed: {done.stderr[-2000:]}")
    reference = imported_rows(work / "reference")
    killed = rounds = 0
    while killed < kills:
        home = work / f"round-{rounds}"
        rounds += 1
        argv, env = import_command(home, root)
        for _ in range(kills + 10):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            try:
                proc.wait(timeout=rng.uniform(0.05, 1.0) * typical if killed < kills else None)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=600)
            if proc.returncode == -signal.SIGKILL:
                killed += 1
                continue
            if proc.returncode != 0:
                outcome.errors += 1
                outcome.notes.append(f"an import exited {proc.returncode}: {err.decode()[-200:]}")
            break
        rows = imported_rows(home)
        outcome.tried += sum(reference.values())
        outcome.stored += sum(min(n, rows[key]) for key, n in reference.items())
        outcome.duplicated += sum(max(0, n - reference[key]) for key, n in rows.items())
        check = integrity(home)
        if check != "ok":
            outcome.errors += 1
            outcome.notes.append(f"integrity: {check[:200]}")
    outcome.lost = outcome.tried - outcome.stored
    outcome.killed = killed
    outcome.notes.insert(0, f"{killed} imports killed over {rounds} imports run to completion "
                            f"({sum(reference.values())} rows each)")
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- the table --------------------------------------------------------------------------------------


COLUMNS = ("scenario", "tried", "stored", "lost", "duplicated", "errors")


def table(outcomes: list[Outcome]) -> str:
    width = max(len(o.scenario) for o in outcomes)
    lines = [f"{'scenario':<{width}}  " + "  ".join(f"{c:>10}" for c in COLUMNS[1:]) + "   seconds"]
    for o in outcomes:
        values = (o.tried, o.stored, o.lost, o.duplicated, o.errors)
        lines.append(f"{o.scenario:<{width}}  " + "  ".join(f"{v:>10,}" for v in values) + f"  {o.seconds:8.1f}")
    notes = [f"- {o.scenario}: {note}" for o in outcomes for note in o.notes]
    return "\n".join(lines + (["", *notes] if notes else []))


def scenarios(args: argparse.Namespace, work: Path) -> Iterator[Outcome]:
    yield parallel_drains(work / "drains", args.drainers, args.spooled)
    yield killed_hooks(work / "kills", args.kills, seed=args.seed)
    (work / "import").mkdir()
    yield killed_imports(work / "import", args.import_kills, seed=args.seed + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="hooks to SIGKILL (default 200)")
    parser.add_argument("--drainers", type=int, default=16, help="hooks draining at once (default 16)")
    parser.add_argument("--spooled", type=int, default=2000, help="events waiting in the spool (default 2000)")
    parser.add_argument("--import-kills", type=int, default=20, help="imports to SIGKILL (default 20)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nmem-faults-"))
    outcomes = []
    try:
        for outcome in scenarios(args, work):
            outcomes.append(outcome)
            print(f"done: {outcome.scenario} ({outcome.seconds:.1f} s)", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps([asdict(o) for o in outcomes], indent=2))
    else:
        print(f"nmem fault scenarios: python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
              f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
        print(table(outcomes))
    sys.exit(0 if all(o.clean for o in outcomes) else 1)


if __name__ == "__main__":
    main()
