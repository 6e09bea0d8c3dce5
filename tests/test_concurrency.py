"""Several real processes writing one database at once: nothing lost, nothing raised."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import record
from nmem.config import load_settings
from nmem.errors import StoreBusy
from nmem.service.api import Service
from nmem.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

WRITERS = 6
EVENTS = 150
MEMORIES_EVERY = 25  # each writer also remembers EVENTS // MEMORIES_EVERY memories

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from nmem.capture.claude_code import parse
    from nmem.config import load_settings
    from nmem.service.api import Service

    worker, events, every, go = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.002)
    session = f"sess-{worker}"
    with Service.open(load_settings()) as service:
        service.record_event(parse({"hook_event_name": "UserPromptSubmit", "session_id": session,
                                    "cwd": "/w/proj", "prompt": f"worker {worker} intent"}))
        for i in range(events):
            service.record_event(parse({
                "hook_event_name": "PostToolUse", "session_id": session, "cwd": "/w/proj",
                "tool_name": "Bash", "tool_input": {"command": f"echo w{worker}e{i}"},
                "tool_response": {"stdout": "", "exit_code": 0}}))
            if i % every == 0:
                service.remember(f"worker {worker} learned lesson {i}", namespace="learnings", project="proj")
        service.record_event(parse({"hook_event_name": "Stop", "session_id": session, "cwd": "/w/proj"}))
    print("done")
""")

READER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from nmem.config import load_settings
    from nmem.service.api import Service

    go, stop = Path(sys.argv[1]), Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.002)
    seen, reads = [], 0
    with Service.open(load_settings(), readonly=True) as service:
        while not stop.exists():
            status = service.status()
            seen.append(status["observations"])
            service.search("echo", limit=5)
            service.recent_context(project="proj", limit=10)
            reads += 1
    print(json.dumps({"reads": reads, "counts": seen}))
""")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    env["NMEM_HOME"] = str(home)
    return env


def _start(script: str, args: list[str], home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], env=_env(home), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_concurrent_writers_lose_nothing_and_raise_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    go = tmp_path / "go"
    # create the database first so the race is about writes, not migration
    SqliteStore(str(home / "nmem.db")).close()
    stop = tmp_path / "stop"
    reader = _start(READER, [str(go), str(stop)], home)
    writers = [_start(WRITER, [str(w), str(EVENTS), str(MEMORIES_EVERY), str(go)], home) for w in range(WRITERS)]
    time.sleep(0.4)
    go.touch()
    results = [p.communicate(timeout=60) for p in writers]
    stop.touch()
    reader_out, reader_err = reader.communicate(timeout=30)

    assert [p.returncode for p in writers] == [0] * WRITERS, [err for _, err in results]
    assert [(out.strip(), err) for out, err in results] == [("done", "")] * WRITERS

    conn = sqlite3.connect(home / "nmem.db")
    try:
        contents = [r[0] for r in conn.execute("SELECT content FROM observations WHERE obs_type = 'command'")]
        assert len(contents) == WRITERS * EVENTS
        assert sorted(contents) == sorted(f"echo w{w}e{i}" for w in range(WRITERS) for i in range(EVENTS))
        per_session = dict(conn.execute("SELECT session_id, COUNT(*) FROM observations GROUP BY 1").fetchall())
        assert per_session == {f"sess-{w}": EVENTS for w in range(WRITERS)}
        memories = conn.execute("SELECT COUNT(*), COUNT(DISTINCT uid) FROM memories").fetchone()
        per_writer = len(range(0, EVENTS, MEMORIES_EVERY))
        assert memories == (WRITERS * per_writer, WRITERS * per_writer)
        # every observation points at its own worker's prompt, and every session was closed
        wrong = conn.execute("SELECT COUNT(*) FROM observations o JOIN prompts p ON p.id = o.prompt_id "
                             "WHERE p.session_id != o.session_id").fetchone()[0]
        assert wrong == 0
        assert conn.execute("SELECT COUNT(*) FROM sessions WHERE ended_at IS NULL").fetchone()[0] == 0
        fts = conn.execute("SELECT COUNT(*) FROM observations_fts WHERE observations_fts MATCH 'echo'").fetchone()[0]
        assert fts == WRITERS * EVENTS
    finally:
        conn.close()

    assert reader.returncode == 0, reader_err
    report = json.loads(reader_out)
    assert report["reads"] > 0
    counts = report["counts"]
    assert counts == sorted(counts)  # a reader only ever sees committed, growing state
    assert counts[-1] <= WRITERS * EVENTS


def test_a_writer_waits_for_a_held_lock_instead_of_failing(service: Service) -> None:
    holding = threading.Event()
    release = threading.Event()
    errors: list[BaseException] = []

    def hold_lock() -> None:
        other = SqliteStore(str(service.settings.db_path))
        try:
            with other.transaction():
                other.ensure_session("holder", "demo", 1)
                holding.set()
                release.wait(5)
                time.sleep(0.3)
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)
        finally:
            other.close()

    thread = threading.Thread(target=hold_lock)
    thread.start()
    try:
        assert holding.wait(5)
        release.set()
        started = time.monotonic()
        out = record(service, "UserPromptSubmit", now=1_790_000_000, prompt="waits its turn")
        waited = time.monotonic() - started
    finally:
        thread.join(10)
    assert errors == []
    assert out.stored == "prompt"
    assert waited >= 0.2
    assert service.store.get_session("holder") is not None


def test_a_lock_held_past_the_busy_timeout_is_store_busy_and_writes_nothing(nmem_home: Path) -> None:
    svc = Service.open(load_settings(), busy_timeout_ms=100)
    holder = SqliteStore(str(svc.settings.db_path))
    try:
        with holder.transaction():
            holder.ensure_session("holder", "demo", 1)
            with pytest.raises(StoreBusy):
                record(svc, "UserPromptSubmit", now=1_790_000_000, prompt="too late")
        assert svc.store.get_session("sess-1") is None
        assert record(svc, "UserPromptSubmit", now=1_790_000_001, prompt="retry works").stored == "prompt"
    finally:
        holder.close()
        svc.close()
