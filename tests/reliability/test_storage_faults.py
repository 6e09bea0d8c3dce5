"""The SQLite store under faults, on real files and real processes: another application's database,
read-only files and media, a full disk, corrupt files. Each says what happened (exit 4, one line,
no traceback) through the library, the CLI, the hook and the MCP server; nothing acknowledged is
lost and nothing that is not nmem's is ever written.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import run_nmem
from fixtures.harness import event, hook_env
from mcp_support import child_env, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.capture.claude_code import parse
from nmem.config import load_settings
from nmem.errors import ForeignDatabase, StoreCorrupt, StoreReadOnly
from nmem.service.api import Service
from nmem.store import NewObservation, SearchFilters
from nmem.store.sqlite import SqliteStore
from nmem.store.sqlite.files import APPLICATION_ID
from nmem.store.sqlite.schema import LATEST_VERSION, MIGRATIONS, split_statements

T0 = 1_790_000_000
CWD = "/home/dev/code/billing-api"
SIDE_FILES = ("-wal", "-shm", "-journal")


# -- helpers ----------------------------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def side_files(path: Path) -> list[str]:
    return [s for s in SIDE_FILES if path.with_name(path.name + s).exists()]


def nmem(home: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return run_nmem(list(args), stdin=stdin, env=hook_env(home, **env))


def assert_fails_clearly(done: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 4 and one line on stderr that says what happened, without a traceback."""
    assert done.returncode == 4, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nmem: "), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def doctor_says(home: Path, **env: str) -> str:
    """What `nmem doctor` finds wrong with the database (it must find something)."""
    done = nmem(home, "doctor", "--format", "json", **env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "database")
    assert check["status"] == "fail", check
    return str(check["detail"])


def spooled(home: Path) -> list[Path]:
    return sorted((home / "spool").glob("*.json")) if (home / "spool").exists() else []


def bash_event(command: str, session: str = "s-1") -> dict[str, Any]:
    return event("PostToolUse", session, CWD, tool_name="Bash", tool_input={"command": command},
                 tool_response={"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False})


def build_unmarked(path: Path, version: int) -> None:
    """A database at `version` as the nmem releases before the application_id mark made it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        for step in range(1, version + 1):
            conn.execute("BEGIN IMMEDIATE")
            for statement in split_statements(MIGRATIONS[step - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step}")
            conn.execute("COMMIT")
        conn.execute("INSERT INTO sessions (id, project, started_at) VALUES ('old-session', 'legacy', ?)", (T0,))
    finally:
        conn.close()


def populated(home: Path) -> tuple[int, str]:
    """A database with an observation and a memory, closed cleanly; (observation id, memory id)."""
    with Service.open(load_settings(hook_env(home))) as service:
        obs = service.record_event(parse(bash_event("pytest tests/test_ledger.py -q"))).observation_id
        mem = service.remember("the ledger rounds half to even", domain="user")
    assert obs is not None
    return int(obs), mem.id


# -- another application's database --------------------------------------------------------------------


def _sqlite_file(path: Path, *statements: str, wal: bool = False) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def other_app_marked(path: Path) -> None:
    _sqlite_file(path, "PRAGMA application_id = 1196444487",  # 'GPKG', GeoPackage's mark
                 "CREATE TABLE features (id INTEGER PRIMARY KEY, name TEXT)",
                 "INSERT INTO features (name) VALUES ('river')")


def other_app_tables(path: Path) -> None:
    _sqlite_file(path, "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)",
                 "INSERT INTO users (email) VALUES ('ann@example.com')")


def other_app_versioned(path: Path) -> None:
    """An application that keeps its own schema number in user_version, in nmem's range."""
    _sqlite_file(path, "CREATE TABLE sessions (token TEXT PRIMARY KEY)", "CREATE TABLE carts (id INTEGER)",
                 "PRAGMA user_version = 3")


def other_app_in_wal_mode(path: Path) -> None:
    _sqlite_file(path, "CREATE TABLE events (at INTEGER, what TEXT)", "INSERT INTO events VALUES (1, 'boot')",
                 wal=True)


def nmem_tables_and_more(path: Path) -> None:
    """nmem's v3 tables beside one it never creates: not a database nmem made."""
    build_unmarked(path, 3)
    _sqlite_file(path, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")


def version_without_tables(path: Path) -> None:
    _sqlite_file(path, "PRAGMA user_version = 2")


def not_sqlite(path: Path) -> None:
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 64)  # a zip archive, say


def other_text_file(path: Path) -> None:
    path.write_text("[settings]\ntheme = dark\n" * 20, encoding="utf-8")


FOREIGN: dict[str, Callable[[Path], None]] = {
    "application_id": other_app_marked, "tables": other_app_tables, "user_version": other_app_versioned,
    "wal": other_app_in_wal_mode, "extra_table": nmem_tables_and_more, "bare_version": version_without_tables,
    "zip": not_sqlite, "text": other_text_file,
}


@pytest.mark.parametrize("make", FOREIGN.values(), ids=FOREIGN.keys())
@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
def test_another_applications_file_is_refused_and_never_written(tmp_path: Path, make: Callable[[Path], None],
                                                                 readonly: bool) -> None:
    path = tmp_path / "app.db"
    make(path)
    path.chmod(0o644)
    before = digest(path)
    with pytest.raises(ForeignDatabase) as err:
        SqliteStore(str(path), readonly=readonly)
    assert err.value.exit_code == 4
    assert err.value.message.startswith(f"{path} is not an nmem database: ")
    assert digest(path) == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not even made private: it is not nmem's
    assert side_files(path) == []


def test_the_refusal_reasons_say_why(tmp_path: Path) -> None:
    reasons = {}
    for name, make in FOREIGN.items():
        path = tmp_path / f"{name}.db"
        make(path)
        with pytest.raises(ForeignDatabase) as err:
            SqliteStore(str(path))
        reasons[name] = err.value.message.split(": ", 1)[1]
    assert reasons["application_id"].startswith("it belongs to another application (application_id 0x47504b47)")
    assert reasons["tables"].startswith("it holds tables nmem did not create (users)")
    assert reasons["user_version"].startswith("it holds tables nmem did not create (carts)")
    assert reasons["extra_table"].startswith("it holds tables nmem did not create (invoices)")
    assert reasons["bare_version"].startswith("it has no tables but user_version 2")
    assert reasons["zip"].startswith("file is not a database")
    assert reasons["text"].startswith("file is not a database")


def test_a_foreign_database_fails_every_interface_and_stays_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = tmp_path / "shop.db"
    other_app_tables(path)
    before = digest(path)
    for args in (["status"], ["remember", "a note"]):
        assert_fails_clearly(nmem(home, *args, NMEM_DB=str(path)),
                             str(path), "is not an nmem database", "tables nmem did not create (users)")
    assert doctor_says(home, NMEM_DB=str(path)).startswith(f"{path} is not an nmem database")
    done = nmem(home, "serve", NMEM_DB=str(path))  # the MCP server refuses to start on it
    assert_fails_clearly(done, "is not an nmem database")
    done = nmem(home, "record", stdin=json.dumps(bash_event("make deploy")), NMEM_DB=str(path))
    assert_fails_clearly(done, "is not an nmem database")
    assert len(spooled(home)) == 1  # the event waits for a usable database
    assert "is not an nmem database" in (home / "logs" / "nmem.log").read_text(encoding="utf-8")
    assert digest(path) == before and side_files(path) == []


@pytest.mark.parametrize("content", [None, b""], ids=["missing", "empty"])
def test_a_missing_or_empty_file_becomes_a_marked_nmem_database(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "data" / "nmem.db"
    if content is not None:
        path.parent.mkdir()
        path.write_bytes(content)
    SqliteStore(str(path)).close()
    header = path.read_bytes()[:100]
    assert header[68:72] == b"nmem"  # the mark is readable in a hex dump of the file
    assert int.from_bytes(header[68:72], "big") == APPLICATION_ID
    assert int.from_bytes(header[60:64], "big") == LATEST_VERSION


def test_an_empty_sqlite_database_becomes_an_nmem_database(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    _sqlite_file(path, "PRAGMA user_version = 0", "VACUUM")  # a valid SQLite file without a table
    assert path.stat().st_size > 0
    store = SqliteStore(str(path))
    try:
        assert store.schema_version() == LATEST_VERSION
    finally:
        store.close()
    assert path.read_bytes()[68:72] == b"nmem"


@pytest.mark.parametrize("version", range(1, LATEST_VERSION + 1))
def test_a_database_an_older_nmem_made_is_recognised_marked_and_upgraded(tmp_path: Path, version: int) -> None:
    path = tmp_path / "nmem.db"
    build_unmarked(path, version)
    assert path.read_bytes()[68:72] == b"\0\0\0\0"
    store = SqliteStore(str(path))
    try:
        assert store.schema_version() == LATEST_VERSION
        assert store.get_session("old-session") is not None
        assert int(store._writer().execute("PRAGMA application_id").fetchone()[0]) == APPLICATION_ID
    finally:
        store.close()
    assert path.read_bytes()[68:72] == b"nmem"


def test_an_older_database_left_with_a_hot_wal_is_recognised(tmp_path: Path) -> None:
    """A crash left the older nmem's last steps in the WAL: the file's header alone does not show them."""
    path = tmp_path / "nmem.db"
    build_unmarked(path, 5)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA wal_autocheckpoint = 0")
    for step in (6, 7):
        holder.execute("BEGIN IMMEDIATE")
        for statement in split_statements(MIGRATIONS[step - 1]):
            holder.execute(statement)
        holder.execute(f"PRAGMA user_version = {step}")
        holder.execute("COMMIT")
    assert int.from_bytes(path.read_bytes()[60:64], "big") == 5  # v7 lives in the WAL only
    try:
        store = SqliteStore(str(path))
        try:
            assert store.schema_version() == LATEST_VERSION
            assert store.get_session("old-session") is not None
        finally:
            store.close()
    finally:
        holder.close()


# -- read-only files and media ---------------------------------------------------------------------------


def test_a_read_only_file_is_read_but_never_chmodded_or_written(tmp_path: Path) -> None:
    path = tmp_path / "nmem.db"
    writer = SqliteStore(str(path))
    with writer.transaction():
        writer.ensure_session("s-1", "billing", T0)
        obs_id = writer.add_observation(NewObservation("s-1", "billing", T0, "command", "PostToolUse",
                                                       "pytest tests/test_ledger.py", "Bash"))
    writer.close()
    path.chmod(0o444)
    before = digest(path)
    store = SqliteStore(str(path))
    try:
        assert store.readonly
        assert [o.id for o in store.get_observations([obs_id])] == [obs_id]
        found = store.search_observations('"ledger"', SearchFilters(), "relevance", 10, 0)
        assert [o.id for o, _ in found] == [obs_id]
        assert store.status().observations == 1
        with pytest.raises(StoreReadOnly, match=r"database is read-only: cannot write .*nmem\.db: "
                                                r"the file is read-only \(mode 0444\)") as err:
            store.ensure_session("s-2", "billing", T0)
        assert err.value.exit_code == 4
    finally:
        store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert digest(path) == before
    assert side_files(path) == []


def test_a_read_only_database_serves_the_cli_and_keeps_hook_events_for_later(tmp_path: Path) -> None:
    home = tmp_path / "home"
    obs_id, mem_id = populated(home)
    db = home / "nmem.db"
    db.chmod(0o400)
    before = digest(db)
    assert json.loads(nmem(home, "search", "ledger", "--scope", "observations", "--format", "json").stdout)[0]["id"] \
        == obs_id
    got = nmem(home, "get", str(obs_id), mem_id, "--format", "json")
    assert got.returncode == 0, got.stderr
    status = nmem(home, "status", "--format", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["observations"] == 1
    assert_fails_clearly(nmem(home, "remember", "one more"), "database is read-only", str(db), "mode 0400")
    assert_fails_clearly(nmem(home, "record", stdin=json.dumps(bash_event("cargo test"))), "read-only")
    assert len(spooled(home)) == 1
    start = {**bash_event("x"), "hook_event_name": "SessionStart", "source": "startup", "session_id": "s-next"}
    for key in ("tool_name", "tool_input", "tool_response"):
        start.pop(key, None)
    done = nmem(home, "record", stdin=json.dumps(start))  # reads still work: the new session gets its context
    assert done.returncode == 0 and "<nmem-context>" in done.stdout and done.stderr == "", done
    assert len(spooled(home)) == 2
    assert digest(db) == before and stat.S_IMODE(db.stat().st_mode) == 0o400 and side_files(db) == []

    db.chmod(0o600)  # writable again: the next hook stores the kept event first
    assert nmem(home, "record", stdin=json.dumps(bash_event("cargo build"))).returncode == 0
    assert spooled(home) == []
    conn = sqlite3.connect(db)
    try:
        assert [r[0] for r in conn.execute("SELECT content FROM observations ORDER BY id")] == \
            ["pytest tests/test_ledger.py -q", "cargo test", "session_start (startup)", "cargo build"]
    finally:
        conn.close()


@pytest.mark.anyio
async def test_a_read_only_database_through_the_mcp_server(nmem_home: Path) -> None:
    _, mem_id = populated(nmem_home)
    (nmem_home / "nmem.db").chmod(0o444)
    service = Service.open(load_settings())
    try:
        async with Client(NmemServer(service, project="billing-api").server, mode="legacy") as client:
            found = structured(await client.call_tool("recall", {"query": "ledger"}))
            assert [m["id"] for m in found["results"]] == [mem_id]
            message = tool_error(await client.call_tool("remember", {"content": "a new note"}))
            assert message == "database is read-only: cannot write <database>: the file is read-only (mode 0444)"
    finally:
        service.close()


def test_a_read_only_database_of_an_older_schema_says_how_to_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "nmem.db"
    build_unmarked(path, 4)
    path.chmod(0o444)
    before = digest(path)
    with pytest.raises(StoreReadOnly, match=r"is at schema v4, older than this nmem's v\d+ and read-only "
                                            r"\(the file is read-only \(mode 0444\)\): open it once with write"):
        SqliteStore(str(path))
    assert digest(path) == before and side_files(path) == []


def test_a_writable_database_shared_with_the_group_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "nmem.db"
    SqliteStore(str(path)).close()
    path.chmod(0o640)
    SqliteStore(str(path)).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- scenarios in a mount namespace of their own (tmpfs, read-only remounts) ------------------------------


@cache
def _mount_namespace_problem() -> str | None:
    """Why this machine cannot give a child process a tmpfs of its own, or None when it can."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    with tempfile.TemporaryDirectory() as where:
        try:
            done = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where],
                                  capture_output=True, text=True, timeout=30, check=False)
        except OSError as exc:
            return f"unshare failed: {exc}"
    return None if done.returncode == 0 else f"cannot mount a tmpfs here: {done.stderr.strip()}"


def in_mount_namespace(tmp_path: Path, script: str) -> dict[str, Any]:
    """Run a scenario as root of its own user and mount namespaces (`unshare -rm`): the tmpfs it
    mounts on `tmp_path/mnt` vanishes with it. Its last stdout line is the JSON it found."""
    problem = _mount_namespace_problem()
    if problem:
        pytest.skip(problem)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NMEM_")}
    done = subprocess.run(["unshare", "-rm", sys.executable, "-c", SCENARIO_PRELUDE + textwrap.dedent(script),
                           str(mnt)], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


SCENARIO_PRELUDE = textwrap.dedent("""
    import json, os, sqlite3, subprocess, sys
    mnt = sys.argv[1]
    home = os.path.join(mnt, "home")
    db = os.path.join(home, "nmem.db")
    env = {**os.environ, "NMEM_HOME": home}

    def sh(*argv):
        subprocess.run(argv, check=True)

    def nmem(*args, stdin=""):
        done = subprocess.run([sys.executable, "-m", "nmem", *args], input=stdin, capture_output=True,
                              text=True, env=env)
        return [done.returncode, done.stdout, done.stderr]
""")


def test_read_only_media_still_serve_reads(tmp_path: Path) -> None:
    found = in_mount_namespace(tmp_path, """
        sh("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt)
        out = {"remember": nmem("remember", "the ledger rounds half to even")}
        sh("mount", "-o", "remount,ro", mnt)
        out["recall"] = nmem("recall", "ledger", "--format", "json")
        out["status"] = nmem("status", "--format", "json")
        out["write"] = nmem("remember", "one more")
        out["files"] = sorted(os.listdir(home))
        print(json.dumps(out))
    """)
    assert found["remember"][0] == 0, found["remember"]
    assert found["recall"][0] == 0, found["recall"]
    assert json.loads(found["recall"][1])["results"][0]["summary"] == "the ledger rounds half to even"
    assert found["status"][0] == 0 and json.loads(found["status"][1])["memories"] == 1
    code, _, err = found["write"]
    assert code == 4 and err.startswith("nmem: database is read-only: cannot write ") and \
        err.rstrip().endswith("it is on a read-only file system"), err
    assert found["files"] == ["nmem.db"]


def test_a_full_disk_fails_cleanly_loses_nothing_and_recovers(tmp_path: Path) -> None:
    found = in_mount_namespace(tmp_path, """
        sh("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt)
        out = {"acked": [nmem("remember", f"acknowledged note {i} about the ledger") for i in range(3)]}
        vfs = os.statvfs(mnt)
        with open(os.path.join(mnt, "filler"), "wb") as fh:  # leave room to open, not to write 400 kB
            fh.write(bytes(vfs.f_bavail * vfs.f_frsize - 160 * 1024))
        out["full"] = nmem("remember", "--stdin", stdin="ledger entry " * 32_000)
        fd = os.open(os.path.join(mnt, "filler-2"), os.O_WRONLY | os.O_CREAT)  # now not a byte left
        try:
            while os.write(fd, bytes(4096)):
                pass
        except OSError:
            os.close(fd)
        out["hook"] = nmem("record", stdin=json.dumps({
            "session_id": "s-full", "transcript_path": "", "cwd": "/home/dev/code/billing-api",
            "hook_event_name": "UserPromptSubmit", "prompt": "fix the ledger rounding"}))
        os.unlink(os.path.join(mnt, "filler-2"))  # room to read again (SQLite's WAL index), not to write much
        conn = sqlite3.connect(db)
        out["integrity"] = conn.execute("PRAGMA integrity_check").fetchone()[0]
        out["memories"] = [r[0] for r in conn.execute("SELECT content FROM memories ORDER BY id")]
        conn.close()
        out["still_full"] = nmem("remember", "--stdin", stdin="ledger entry " * 32_000)
        os.unlink(os.path.join(mnt, "filler"))
        out["after"] = nmem("remember", "written once space is free")
        out["recall"] = nmem("recall", "ledger OR space", "--format", "json")
        print(json.dumps(out))
    """)
    assert [a[0] for a in found["acked"]] == [0, 0, 0], found["acked"]
    code, _, err = found["full"]
    assert code == 4 and err.startswith("nmem: disk full while writing ") and "Traceback" not in err, err
    assert found["hook"][0] == 4 and "Traceback" not in found["hook"][2], found["hook"]
    assert found["integrity"] == "ok"
    assert found["still_full"][0] == 4 and found["still_full"][2].startswith("nmem: disk full while writing ")
    assert found["memories"] == [f"acknowledged note {i} about the ledger" for i in range(3)]
    assert found["after"][0] == 0, found["after"]
    assert len(json.loads(found["recall"][1])["results"]) == 4


# -- a file size limit (RLIMIT_FSIZE): the disk-full test that runs everywhere ---------------------------

LIMITED = ("import resource, sys; limit = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
           "from nmem.__main__ import main; sys.exit(main(sys.argv[1:]))")
FILE_LIMIT = 512 * 1024


def limited(home: Path, *args: str, stdin: str = "", limit: int = FILE_LIMIT) -> subprocess.CompletedProcess[str]:
    """`nmem ARGS` in a process whose files may not grow past `limit` (writes fail with EFBIG)."""
    return subprocess.run([sys.executable, "-c", LIMITED, str(limit), *args], input=stdin,
                          capture_output=True, text=True, env=hook_env(home), timeout=60, check=False)


def test_a_write_past_the_file_size_limit_fails_cleanly_and_the_database_recovers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    obs_id, mem_id = populated(home)
    db = home / "nmem.db"
    assert_fails_clearly(limited(home, "remember", "--stdin", stdin="ledger entry " * 50_000),
                         f"I/O error on {db}: disk I/O error (SQLITE_IOERR_WRITE)")
    # A hook writes a few pages; under a limit below the WAL index's 32 kB it cannot even open.
    done = limited(home, "record", stdin=json.dumps(bash_event("make release")), limit=16 * 1024)
    assert_fails_clearly(done, f"I/O error on {db}")
    assert len(spooled(home)) == 1  # kept: the spool file is under the limit
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    got = json.loads(nmem(home, "get", str(obs_id), mem_id, "--format", "json").stdout)
    assert [r["id"] for r in got] == [obs_id, mem_id]
    assert nmem(home, "remember", "--stdin", stdin="ledger entry " * 50_000).returncode == 0  # room again


ACKNOWLEDGED = textwrap.dedent("""
    import json, resource, sys
    from nmem.errors import StorageError
    from nmem.service.api import Service
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
    acked, error = [], None
    with Service.open() as service:
        for i in range(10_000):
            try:
                acked.append(service.remember(f"note {i} " + "ledger " * 400).id)
            except StorageError as exc:
                error = [type(exc).__name__, exc.exit_code, exc.message]
                break
    print(json.dumps({"acked": acked, "error": error}))
""")


def test_every_acknowledged_write_survives_running_out_of_room(tmp_path: Path) -> None:
    home = tmp_path / "home"
    populated(home)
    done = subprocess.run([sys.executable, "-c", ACKNOWLEDGED, str(FILE_LIMIT)], capture_output=True, text=True,
                          env=hook_env(home), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert len(found["acked"]) > 5
    assert found["error"][:2] == ["StoreIOError", 4], found["error"]
    conn = sqlite3.connect(home / "nmem.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {r[0] for r in conn.execute("SELECT uid FROM memories")}
    finally:
        conn.close()
    assert set(found["acked"]) <= stored


@pytest.mark.anyio
async def test_a_full_disk_through_the_mcp_server_is_an_error_result(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    home = tmp_path / "home"
    populated(home)
    server = StdioServerParameters(command=sys.executable, args=["-c", LIMITED, str(FILE_LIMIT), "serve"],
                                   env=child_env(home, CLAUDE_PROJECT_DIR=CWD), cwd=str(tmp_path))
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            message = tool_error(await session.call_tool("remember", {"content": "ledger entry " * 50_000}))
            assert message == "I/O error on <database>: disk I/O error (SQLITE_IOERR_WRITE); check the disk " \
                              "(full, failing or unmounted)"
            assert structured(await session.call_tool("recall", {"query": "ledger"}))["results"]
    assert "Traceback" not in (tmp_path / "stderr.log").read_text(encoding="utf-8")


# -- corrupt files ---------------------------------------------------------------------------------------------


def flip_bytes(path: Path) -> None:
    """Overwrite every page but the first (the schema) with noise, as a failing disk might."""
    data = bytearray(path.read_bytes())
    noise = random.Random(12).randbytes(len(data) - 4096)
    data[4096:] = noise
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 3 // 4096 * 4096)


@pytest.mark.parametrize("damage", [flip_bytes, truncate], ids=["byte-flipped", "truncated"])
def test_a_corrupt_database_says_so_on_the_cli_and_the_hook(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    home = tmp_path / "home"
    obs_id, _ = populated(home)
    with Service.open(load_settings(hook_env(home))) as service:  # pages enough that damage hits every table
        for i in range(40):
            service.remember(f"note {i} " + "about the ledger " * 60, domain="user")
    db = home / "nmem.db"
    damage(db)
    for args in (["recall", "ledger"], ["get", str(obs_id)], ["remember", "fresh"]):
        assert_fails_clearly(nmem(home, *args), f"database is corrupt: {db}: ", "nmem doctor")
    assert_fails_clearly(nmem(home, "record", stdin=json.dumps(bash_event("make"))), "database is corrupt")
    assert len(spooled(home)) == 1
    assert doctor_says(home).startswith(f"database is corrupt: {db}: ")


def test_a_file_cut_inside_its_header_is_corrupt_not_foreign(tmp_path: Path) -> None:
    path = tmp_path / "nmem.db"
    SqliteStore(str(path)).close()
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(StoreCorrupt, match=r"database is corrupt: .*nmem\.db is truncated \(60 bytes\)"):
        SqliteStore(str(path))
    assert path.stat().st_size == 60


@pytest.mark.anyio
async def test_a_corrupt_database_through_the_mcp_server_is_an_error_result(nmem_home: Path) -> None:
    populated(nmem_home)
    service = Service.open(load_settings())
    try:
        server = NmemServer(service, project="billing-api")
        flip_bytes(nmem_home / "nmem.db")  # under the running server, as a failing disk would
        async with Client(server.server, mode="legacy") as client:
            for tool, args in (("search", {"query": "ledger"}), ("recall", {"query": "ledger"}),
                               ("remember", {"content": "a note"}), ("status", {})):
                message = tool_error(await client.call_tool(tool, args))
                assert message.startswith("database is corrupt: <database>: "), (tool, message)
    finally:
        service.close()

