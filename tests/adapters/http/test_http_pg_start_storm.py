"""A team server started while PostgreSQL ends its backends over and over (`pg_terminate_backend`
every few milliseconds, as a failover or an administrator's clean-up does): once the storm is over
it serves (its first write stored, its change feed going), or it has exited saying why. It never
hangs half-started: listening but not serving, or neither listening nor gone."""

from __future__ import annotations

import http.client
import json
import random
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from mcp_support import child_env, free_port, nmem_argv, stop

psycopg = pytest.importorskip("psycopg")
pytestmark = pytest.mark.postgres
HEADERS = {"X-Nmem-CSRF": "1", "Content-Type": "application/json"}
STORM_SECONDS = 4.0
SETTLE_SECONDS = 60.0   # after the storm: long enough for any bounded wait of the store or the server


def _storm(pg_url: str, app: str, ended: list[int], round_: int) -> None:
    """From the server's first backend on, end every backend named `app` every 0-30 ms for
    STORM_SECONDS (0.3 s later each round: the storm meets another moment of the start)."""
    sql = ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
           "WHERE application_name = %s AND pid <> pg_backend_pid()")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        waited = time.monotonic() + 60
        while not admin.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchall():
            if time.monotonic() > waited:
                return
            time.sleep(0.005)
        time.sleep(0.3 * round_)
        stop_at = time.monotonic() + STORM_SECONDS
        while time.monotonic() < stop_at:
            ended.append(len(admin.execute(sql, (app,)).fetchall()))
            time.sleep(random.uniform(0, 0.03))


def _request(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=HEADERS)
        response = conn.getresponse()
        text = response.read()
        return response.status, json.loads(text) if text else None
    finally:
        conn.close()


def _serving(port: int) -> bool:
    try:
        return _request(port, "GET", "/health")[0] == 200
    except OSError:
        return False


@pytest.mark.parametrize("round_", range(3))
def test_a_server_started_during_a_backend_storm_serves_or_exits_saying_why(tmp_path: Path, pg_url: str,
                                                                          round_: int) -> None:
    app = f"nmem-start-storm-{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    ended: list[int] = []
    storm = threading.Thread(target=_storm, args=(pg_url, app, ended, round_))
    storm.start()
    log = home / "serve.log"
    with log.open("wb") as out:
        env = child_env(home, NMEM_STORE_URL=f"{pg_url}&application_name={quote(app)}", NMEM_STREAMING_POLL_MS="50")
        proc = subprocess.Popen(nmem_argv("serve", "--transport", "http", "--port", str(port)), env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        storm.join()
        assert sum(ended), "the storm ended none of the server's backends"
        deadline = time.monotonic() + SETTLE_SECONDS
        while proc.poll() is None and not _serving(port):
            assert time.monotonic() < deadline, f"the server hangs, neither serving nor gone: {log.read_text()}"
            time.sleep(0.1)
        said = log.read_text(errors="replace")
        if proc.poll() is not None:
            assert proc.returncode != 0 and "Traceback" not in said and "cannot connect" in said, said
            return
        status, memory = _request(port, "POST", "/api/v1/memories", {"content": "after the storm"})
        assert status == 201, (memory, said)
        changed: list[str] = []
        deadline = time.monotonic() + 10
        while memory["urn"] not in changed and time.monotonic() < deadline:   # the change feed goes too
            status, found = _request(port, "GET", "/api/v1/changes?since=0&wait=1")
            assert status == 200, (found, said)
            changed += [c["urn"] for c in found["changes"]]
        assert memory["urn"] in changed, (changed, said)
    finally:
        stop(proc)
