"""`nmem backup` / `nmem restore` through SQLite's online backup API, with hooks writing meanwhile."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import dumps, hook_payload, record, run_nmem
from nmem.portable import backup as backups
from nmem.service.api import Service
from nmem.store.sqlite.schema import LATEST_VERSION
from test_cli_support import CWD, invoke, ok, seed
from test_migrations import apply_steps

# A background process writing hook events through the service, as fast as it can, until told to stop.
WRITER = """
import os, sys, time
from nmem.capture.claude_code import parse
from nmem.service.core import CaptureService

stop = sys.argv[1]
with CaptureService.open() as service:
    n = 0
    while not os.path.exists(stop):
        n += 1
        service.record_event(parse({"hook_event_name": "PostToolUse", "session_id": "writer", "cwd": "/work/demo",
                                    "tool_name": "Bash", "tool_input": {"command": f"echo {n}"},
                                    "tool_response": {"stdout": str(n), "exit_code": 0}}, now=time.time()))
"""


def rows(path: Path | str, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def count(path: Path | str, table: str = "observations") -> int:
    return int(rows(path, f"SELECT count(*) FROM {table}")[0][0])


def db_path(service: Service) -> str:
    return service.settings.db_path


def populated(service: Service) -> Service:
    seed(service)
    service.remember("Use WAL", namespace="decisions", project="demo")
    service.forget(service.remember("Gone soon", namespace="learnings", project="demo").id)
    return service


def test_backup_is_a_checked_private_single_file(service: Service, tmp_path: Path) -> None:
    populated(service)
    target = tmp_path / "nmem-copy.db"
    report = json.loads(ok("backup", str(target), "--format", "json").stdout)
    assert report["path"] == str(target) and report["integrity"] == "ok"
    assert report["counts"] == {"sessions": 2, "prompts": 1, "observations": 6, "memories": 2}
    assert report["schema_version"] == LATEST_VERSION and report["size_bytes"] == target.stat().st_size
    assert target.stat().st_mode & 0o777 == 0o600
    assert rows(target, "PRAGMA journal_mode") == [("delete",)], "one self-contained file"
    assert not list(tmp_path.glob(".*tmp")), "no temporary file left"
    assert rows(target, "SELECT summary FROM memories WHERE deleted_at IS NULL") == [("Use WAL",)]

    # a directory gets a dated file; an existing file is not replaced unless asked
    dated = json.loads(ok("backup", str(tmp_path), "--format", "json").stdout)["path"]
    assert Path(dated).parent == tmp_path and Path(dated).name.startswith("nmem-")
    refused = invoke("backup", str(target))
    assert refused.exit_code == 2 and "exists: pass --force" in refused.stderr
    ok("backup", str(target), "--force")
    assert invoke("backup", db_path(service)).exit_code == 2, "never over the database itself"


def test_restore_brings_the_backup_back_and_keeps_the_database_it_replaces(service: Service, tmp_path: Path) -> None:
    populated(service)
    saved = tmp_path / "saved.db"
    ok("backup", str(saved))
    service.remember("Written after the backup", namespace="learnings", project="demo")
    service.close()

    report = json.loads(ok("restore", str(saved), "--format", "json").stdout)
    assert report["counts"] == {"sessions": 2, "prompts": 1, "observations": 6, "memories": 2}
    live = db_path(service)
    assert rows(live, "SELECT count(*) FROM memories WHERE summary = 'Written after the backup'") == [(0,)]
    previous = Path(report["previous_saved_to"])
    assert previous.parent == Path(service.settings.home) / "backups"
    assert rows(previous, "SELECT count(*) FROM memories WHERE summary = 'Written after the backup'") == [(1,)]
    assert rows(live, "PRAGMA journal_mode") == [("wal",)]
    assert rows(live, "PRAGMA integrity_check") == [("ok",)]
    assert json.loads(ok("search", "Use WAL", "--scope", "memories", "--format", "json").stdout)[0]["summary"] == (
        "Use WAL")


def test_restore_into_a_new_data_dir(service: Service, tmp_path: Path) -> None:
    populated(service)
    saved = tmp_path / "saved.db"
    ok("backup", str(saved))
    fresh = tmp_path / "new-machine"
    ok("--home", str(fresh), "restore", str(saved))
    assert count(fresh / "nmem.db") == 6 and count(fresh / "nmem.db", "memories") == 2


def test_restore_upgrades_an_older_backup(service: Service, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    apply_steps(conn, 0, 3)  # the first schema with memories, as nmem then left it (WAL)
    conn.execute("INSERT INTO sessions (id, project, started_at) VALUES ('old-s', 'legacy', 1)")
    conn.close()
    assert rows(old, "PRAGMA user_version") == [(3,)]
    report = json.loads(ok("restore", str(old), "--format", "json").stdout)
    assert report["schema_version"] == LATEST_VERSION
    assert rows(db_path(service), "SELECT id FROM sessions") == [("old-s",)]


@pytest.mark.parametrize("case", ["text", "other-sqlite", "newer", "damaged"])
def test_restore_refuses_what_is_not_an_nmem_database(service: Service, tmp_path: Path, case: str) -> None:
    populated(service)
    bad = tmp_path / "bad.db"
    if case == "text":
        bad.write_text("not a database at all", encoding="utf-8")
        message = "not an SQLite file"
    elif case == "other-sqlite":
        sqlite3.connect(bad).execute("CREATE TABLE notes (x)").connection.close()
        message = "is not an nmem database (it has no memories, observations, prompts, sessions table)"
    elif case == "newer":
        ok("backup", str(bad))
        conn = sqlite3.connect(bad)
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
        conn.close()
        message = "newer than this nmem"
    else:
        ok("backup", str(bad))
        root = rows(bad, "SELECT rootpage FROM sqlite_master WHERE name = 'idx_obs_time'")[0][0]
        data = bytearray(bad.read_bytes())
        at = (root - 1) * 4096
        data[at + 8: at + 4096] = b"\x07" * (4096 - 8)  # scribble over an index page's cells
        bad.write_bytes(bytes(data))
        message = "is damaged"
    before = (count(db_path(service)), count(db_path(service), "memories"))
    result = invoke("restore", str(bad))
    assert result.exit_code in (2, 4), result.stderr
    assert message in result.stderr
    assert (count(db_path(service)), count(db_path(service), "memories")) == before
    assert not (Path(service.settings.home) / "backups").exists(), "nothing was replaced, so nothing set aside"


def test_backup_under_writes_holds_every_row_committed_before_it(service: Service, tmp_path: Path) -> None:
    populated(service)
    for i in range(300):  # enough pages that the copy takes many steps
        record(service, "PostToolUse", now=1_790_000_000 + i, session_id="bulk", cwd=CWD, tool_name="Bash",
               tool_input={"command": f"make target-{i} " + "x" * 400}, tool_response={"stdout": "ok", "exit_code": 0})
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(stop)], env=os.environ.copy())
    live = db_path(service)
    try:
        deadline = time.monotonic() + 30
        while count(live) < 320 and time.monotonic() < deadline:  # the writer is writing
            time.sleep(0.01)
        committed = int(rows(live, "SELECT max(id) FROM observations")[0][0])
        grew: list[int] = []

        def during(done: int, total: int) -> None:
            if not grew:  # hold the copy until the writer has committed more rows
                start = count(live)
                while count(live) < start + 5 and time.monotonic() < deadline:
                    time.sleep(0.01)
                grew.append(count(live) - start)

        report = backups.backup(live, str(tmp_path / "hot.db"), progress=during, pages_per_step=8)
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert writer.returncode == 0
    assert grew and grew[0] >= 5, "hooks kept writing while the backup ran"
    copy = tmp_path / "hot.db"
    assert report.integrity == "ok" and rows(copy, "PRAGMA integrity_check") == [("ok",)]
    before = f"SELECT id FROM observations WHERE id <= {committed} ORDER BY id"
    assert rows(copy, before) == rows(live, before), "every row committed before the backup is in it"
    assert count(copy) == report.counts["observations"] < count(live), "a snapshot, not what came after"
    assert rows(copy, "SELECT count(*) FROM observations o WHERE NOT EXISTS "
                      "(SELECT 1 FROM sessions s WHERE s.id = o.session_id)") == [(0,)]
    conn = sqlite3.connect(copy)
    conn.execute("INSERT INTO observations_fts(observations_fts) VALUES ('integrity-check')")  # raises if torn
    conn.close()


def test_no_hook_writes_into_a_half_restored_database(service: Service, tmp_path: Path) -> None:
    """While the restore copies, a real hook process finds the database locked and spools its
    event; the next hook records it into the restored database."""
    populated(service)
    saved = tmp_path / "saved.db"
    ok("backup", str(saved))
    live = db_path(service)
    service.close()
    env = {**os.environ, "NMEM_BUSY_BUDGET_MS": "200"}
    hooks: list[subprocess.CompletedProcess[str]] = []

    def during(done: int, total: int) -> None:
        if not hooks:
            payload = hook_payload("UserPromptSubmit", session_id="during", cwd=CWD, prompt="typed during the restore")
            hooks.append(run_nmem(["record"], stdin=dumps(payload), env=env))

    backups.restore(live, str(saved), str(tmp_path / "set-aside"), progress=during)
    assert hooks[0].returncode == 0, hooks[0].stderr
    spool = Path(os.environ["NMEM_HOME"]) / "spool"
    assert len(list(spool.glob("*.json"))) == 1, "the hook spooled its event instead of writing mid-restore"
    assert rows(live, "SELECT count(*) FROM prompts WHERE content = 'typed during the restore'") == [(0,)]
    after = hook_payload("UserPromptSubmit", session_id="after", cwd=CWD, prompt="typed after")
    assert run_nmem(["record"], stdin=dumps(after), env=env).returncode == 0
    assert rows(live, "SELECT content FROM prompts WHERE session_id IN ('during', 'after') ORDER BY id") == [
        ("typed during the restore",), ("typed after",)]
    assert not list(spool.glob("*.json"))


# Another process opening the database and closing it again, as every hook does.
OPEN_AND_CLOSE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
conn.close()
"""


def test_a_process_closing_the_database_mid_restore_leaves_the_restores_wal_alone(
        service: Service, tmp_path: Path) -> None:
    """The restore keeps its locks on the database from its first step to its commit, the safety
    copy of the current database included. Closing a descriptor of a file drops every POSIX lock
    the process holds on it: had saving that copy read the file through a descriptor of its own,
    the next process to close the database (a hook exiting) would find no lock left, take itself
    for the last one, checkpoint and delete the write-ahead log the restore is writing into."""
    populated(service)
    saved = tmp_path / "saved.db"
    ok("backup", str(saved))
    live = db_path(service)
    service.close()
    seen: list[bool] = []

    def during(done: int, total: int) -> None:
        if not seen:   # the current database is saved by now; the restore has copied a page
            subprocess.run([sys.executable, "-c", OPEN_AND_CLOSE, live], check=True, timeout=60)
            seen.append(os.path.exists(live + "-wal"))

    report = backups.restore(live, str(saved), str(tmp_path / "set-aside"), progress=during)
    assert seen == [True], "a process closing the database deleted the log the restore was writing"
    assert report.counts == {"sessions": 2, "prompts": 1, "observations": 6, "memories": 2}
    assert rows(live, "PRAGMA integrity_check") == [("ok",)]
    assert count(live) == 6


def test_backup_as_a_process_while_hook_processes_write(service: Service, tmp_path: Path) -> None:
    populated(service)
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(stop)], env=os.environ.copy())
    try:
        result = run_nmem(["backup", str(tmp_path / "proc.db"), "--format", "json"])
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "no progress bar on a pipe"
    assert json.loads(result.stdout)["integrity"] == "ok"


def test_backup_restore_and_encryption_need_the_sqlite_store(nmem_home: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_STORE_URL", "postgresql://nmem@db/nmem")
    copy = tmp_path / "x.db"
    copy.write_bytes(b"")
    copying = "nmem: backup and restore copy the SQLite database; use your database server's tools for postgresql\n"
    at_rest = ("nmem: encryption at rest is for the SQLite database; postgresql keeps its data encrypted with its "
               "server's own tools\n")
    for args, refusal in ((("backup", str(tmp_path / "new.db")), copying), (("restore", str(copy)), copying),
                          (("encrypt",), at_rest), (("decrypt",), at_rest)):
        result = invoke(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (3, "", refusal), args
    assert not (tmp_path / "new.db").exists() and copy.read_bytes() == b""


def test_backup_into_a_directory_that_does_not_exist_yet_creates_it(service: Service, tmp_path: Path) -> None:
    populated(service)
    target = tmp_path / "nightly" / "nmem"
    result = run_nmem(["backup", f"{target}/", "--format", "json"])
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert os.path.dirname(report["path"]) == str(target)
    assert os.path.basename(report["path"]).startswith("nmem-")
    assert report["integrity"] == "ok"
    assert count(report["path"]) == count(db_path(service))
    assert (target.stat().st_mode & 0o777) == 0o700


def test_backup_into_a_directory_named_like_an_existing_file_is_refused(service: Service, tmp_path: Path) -> None:
    populated(service)
    (tmp_path / "taken").write_text("not a directory")
    result = run_nmem(["backup", f"{tmp_path / 'taken'}/"])
    assert result.returncode == 2, result.stderr
    assert "is a file" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "taken").read_text() == "not a directory"
