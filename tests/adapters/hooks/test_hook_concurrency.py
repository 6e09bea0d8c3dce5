"""Several agent sessions write at once: every event is stored, no spool is left, no error is logged.

Two shapes: 8 real `nmem record` processes in parallel (8 × 25 events, the way several
Claude Code sessions fire hooks), and 8 processes × 200 events each calling the hook entry
(`nmem.adapters.hooks.run.run`, one fresh Service per event, exactly as a hook process does) in a loop, so
the write lock is contended thousands of times within the time budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fixtures.harness import event, hook, hook_env, query

WORKERS = 8
CWD = "/home/dev/code/concurrency"


def payloads(worker: int, count: int) -> list[dict[str, Any]]:
    """One session per worker: a prompt every tenth event, Bash commands in between (never deduplicated)."""
    out = []
    for i in range(count):
        sid = f"w{worker}"
        if i % 10 == 0:
            out.append(event("UserPromptSubmit", sid, CWD, prompt=f"w{worker} step {i}: run the next batch"))
        else:
            out.append(event("PostToolUse", sid, CWD, tool_name="Bash", tool_input={"command": f"echo w{worker}-{i}"},
                             tool_response={"stdout": f"w{worker}-{i}", "stderr": "", "interrupted": False}))
    return out


def assert_everything_stored(home: Path, count: int) -> None:
    # A writer that waited past the busy budget spools its event (a logged warning, not an error) and the
    # next run ingests it; one more run makes sure nothing is left waiting before counting.
    assert hook(home, event("Notification", "init", CWD, message="drain")).returncode == 0
    prompts_per = len(range(0, count, 10))
    obs_per = count - prompts_per
    rows = query(home, "SELECT session_id, COUNT(*) AS n FROM observations GROUP BY session_id ORDER BY session_id")
    assert rows == [{"session_id": f"w{w}", "n": obs_per} for w in range(WORKERS)]
    prompts = query(home, "SELECT session_id, COUNT(*) AS n FROM prompts GROUP BY session_id ORDER BY session_id")
    assert prompts == [{"session_id": f"w{w}", "n": prompts_per} for w in range(WORKERS)]
    linked = query(home, "SELECT o.content, p.session_id, p.content AS prompt FROM observations o "
                         "LEFT JOIN prompts p ON p.id = o.prompt_id")
    assert len({row["content"] for row in linked}) == WORKERS * obs_per
    # Each command links to its own session's latest prompt, never another worker's.
    for row in linked:
        worker, index = row["content"].removeprefix("echo ").split("-")
        assert row["session_id"] == worker, row
        assert row["prompt"].startswith(f"{worker} step {int(index) // 10 * 10}:"), row
    spool = home / "spool"
    assert not spool.exists() or list(spool.iterdir()) == []
    log = home / "logs" / "nmem.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    assert [line for line in lines if " ERROR " in line] == []
    assert query(home, "PRAGMA integrity_check") == [{"integrity_check": "ok"}]


def test_parallel_nmem_record_processes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    count = 25
    # Create and migrate the database first, as an installed nmem's first event would.
    assert hook(home, event("Notification", "init", CWD, message="hello")).returncode == 0

    def worker(w: int) -> list[tuple[int, str]]:
        failures = []
        for payload in payloads(w, count):
            done = hook(home, payload)
            if done.returncode != 0 or done.stderr:
                failures.append((done.returncode, done.stderr))
        return failures

    with ThreadPoolExecutor(WORKERS) as pool:
        failures = [f for result in pool.map(worker, range(WORKERS)) for f in result]
    assert failures == []
    assert_everything_stored(home, count)


DRIVER = """
import io, json, sys
from nmem.adapters.hooks import run as hooks
env = json.loads(sys.argv[1])
failures = 0
for line in sys.stdin:
    out, err = io.StringIO(), io.StringIO()
    code = hooks.run(["record"], io.StringIO(line), out, err, env=env)
    if code != 0 or err.getvalue():
        failures += 1
        print(code, err.getvalue().strip(), file=sys.stderr)
print(failures)
"""


def test_eight_writers_two_hundred_events_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    count = 200
    env = hook_env(home)
    assert hook(home, event("Notification", "init", CWD, message="hello")).returncode == 0
    procs = []
    for w in range(WORKERS):
        stdin = "".join(json.dumps(p) + "\n" for p in payloads(w, count))
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps({"NMEM_HOME": str(home)})],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        procs.append((proc, stdin))
    results = [proc.communicate(stdin, timeout=120) for proc, stdin in procs]
    for (proc, _), (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert out.strip() == "0", err[-2000:]
    assert_everything_stored(home, count)
