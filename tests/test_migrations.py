"""Migrations: a populated database from every earlier step opens, migrates, and keeps every row."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nmem.config import load_settings
from nmem.errors import StorageError
from nmem.service.api import Service
from nmem.store import NewObservation, SearchFilters, open_store
from nmem.store.sqlite import SqliteStore
from nmem.store.sqlite.files import APPLICATION_ID
from nmem.store.sqlite.schema import LATEST_VERSION, MIGRATIONS, split_statements

T0 = 1_790_000_000
SUMMARY = {"intent": "fix the login bug", "intents": ["fix the login bug"], "files_changed": ["/w/demo/auth.py"],
           "commands": ["pytest -q"], "errors": [], "commits": [],
           "text": "Intents: fix the login bug\nFiles changed: /w/demo/auth.py\nCommands: pytest -q"}

V1_SESSIONS = [
    ("sess-a", "demo", T0, T0 + 3600, json.dumps({"events": {"file_edit": 1}}), json.dumps(SUMMARY)),
    ("sess-b", "ops", T0 + 7200, None, None, None),
]
V1_PROMPTS = [
    (1, "sess-a", T0 + 10, "user", "fix the login bug"),
    (2, "sess-a", T0 + 40, "agent", "The redirect loses the token"),
    (3, "sess-b", T0 + 7210, "user", "deploy the staging cluster"),
]
V1_OBSERVATIONS = [
    (1, "sess-a", None, T0, "session_start", "SessionStart", None, None, "session_start (startup)",
     json.dumps({"source": "startup"})),
    (2, "sess-a", 1, T0 + 20, "file_read", "PostToolUse", "Read", "/w/demo/auth.py", "/w/demo/auth.py", None),
    (3, "sess-a", 1, T0 + 30, "file_edit", "PostToolUse", "Edit", "/w/demo/auth.py", "/w/demo/auth.py",
     json.dumps({"new_sha256": "abc"})),
    (4, "sess-a", 2, T0 + 50, "command", "PostToolUse", "Bash", None, "pytest -q", json.dumps({"exit_code": 0})),
    (5, "sess-b", 3, T0 + 7220, "command_error", "PostToolUse", "Bash", None,
     "kubectl apply -f staging.yaml\nerror: unauthorized", json.dumps({"exit_code": 1})),
]
SESSION_COLS = "id, project, started_at, ended_at, signature, summary"
PROMPT_COLS = "id, session_id, timestamp, source, content"
OBS_COLS = "id, session_id, prompt_id, timestamp, obs_type, source_event, tool_name, file_path, content, metadata"


def apply_steps(conn: sqlite3.Connection, start: int, stop: int) -> None:
    """Run migration steps start+1..stop the way a released nmem of that version would have."""
    if start == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
    for step in range(start + 1, stop + 1):
        conn.execute("BEGIN IMMEDIATE")
        for statement in split_statements(MIGRATIONS[step - 1]):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {step}")
        conn.execute("COMMIT")


def build_populated(path: Path, version: int) -> None:
    """A database at `version`, holding the v1 rows (inserted right after step 1, as an old nmem would)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        apply_steps(conn, 0, 1)
        conn.executemany(f"INSERT INTO sessions ({SESSION_COLS}) VALUES (?, ?, ?, ?, ?, ?)", V1_SESSIONS)
        conn.executemany(f"INSERT INTO prompts ({PROMPT_COLS}) VALUES (?, ?, ?, ?, ?)", V1_PROMPTS)
        conn.executemany(f"INSERT INTO observations ({OBS_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         V1_OBSERVATIONS)
        apply_steps(conn, 1, version)
    finally:
        conn.close()


def user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def select(store: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store._reader().execute(sql).fetchall()]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "home" / "nmem.db"


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    stores: list[Any] = []
    yield stores
    for store in stores:
        store.close()


def open_latest(db: Path, opened: list[Any]) -> Any:
    store = open_store(f"sqlite:///{db}")
    opened.append(store)
    return store


@pytest.mark.parametrize("start", range(1, LATEST_VERSION))
def test_populated_database_from_step_n_migrates_to_latest_keeping_every_row(
        db: Path, opened: list[Any], start: int) -> None:
    build_populated(db, start)
    assert user_version(db) == start
    store = open_latest(db, opened)
    assert store.schema_version() == LATEST_VERSION == user_version(db)
    assert select(store, f"SELECT {SESSION_COLS} FROM sessions ORDER BY id") == V1_SESSIONS
    assert select(store, f"SELECT {PROMPT_COLS} FROM prompts ORDER BY id") == V1_PROMPTS
    assert select(store, f"SELECT {OBS_COLS} FROM observations ORDER BY id") == V1_OBSERVATIONS


@pytest.mark.parametrize("start", range(1, LATEST_VERSION))
def test_migrated_rows_are_searchable_and_backfilled(db: Path, opened: list[Any], start: int) -> None:
    build_populated(db, start)
    store = open_latest(db, opened)
    assert select(store, "SELECT id, project, is_pinned FROM observations ORDER BY id") == [
        (1, "demo", 0), (2, "demo", 0), (3, "demo", 0), (4, "demo", 0), (5, "ops", 0)]
    f = SearchFilters()
    assert [o.id for o, _ in store.search_observations('"kubectl"', f, "relevance", 10, 0)] == [5]
    assert [o.id for o, _ in store.search_observations('"auth"', f, "date_asc", 10, 0)] == [2, 3]
    assert [o.id for o, _ in store.search_observations(None, SearchFilters(project="ops"), "date_desc", 10, 0)] == [5]
    assert [p.id for p, _ in store.search_prompts('"staging"', f, "relevance", 10, 0)] == [3]
    assert [s.id for s, _ in store.search_sessions('"login"', f, "relevance", 10, 0)] == ["sess-a"]
    # step 5: session summaries are indexed by their prose, not their JSON keys
    assert store.search_sessions('"errors"', f, "relevance", 10, 0) == []
    assert select(store, "SELECT COUNT(*) FROM memories") == [(0,)]


def test_migrated_database_works_through_the_service(nmem_home: Path) -> None:
    build_populated(nmem_home / "nmem.db", 1)
    with Service.open(load_settings()) as service:
        assert service.status()["schema_version"] == LATEST_VERSION
        trace = service.session_trace("sess-a")
        assert [(p["prompt_id"], p["observation_count"]) for p in trace["prompts"]] == [
            (None, 1), (1, 2), (2, 1)]
        history = service.file_history("/w/demo/auth.py")
        assert history["sessions"][0]["summary_intent"] == "fix the login bug"
        assert [t["prompt_content"] for t in history["sessions"][0]["touches"]] == [
            "fix the login bug", "fix the login bug"]
        mem = service.remember("migrated databases take memories", project="demo")
        assert [h.record.id for h in service.search("migrated", scope="memories").hits] == [mem.id]
        # new writes after the upgrade land next to the old rows
        service.store.ensure_session("sess-c", "demo", T0 + 9000)
        assert service.status()["sessions"] == 3


def test_each_step_in_turn_keeps_the_rows(db: Path) -> None:
    build_populated(db, 1)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for step in range(2, LATEST_VERSION + 1):
            apply_steps(conn, step - 1, step)
            assert conn.execute("PRAGMA user_version").fetchone()[0] == step
            assert [tuple(r) for r in conn.execute(f"SELECT {OBS_COLS} FROM observations ORDER BY id")] == \
                V1_OBSERVATIONS
            assert [tuple(r) for r in conn.execute(f"SELECT {PROMPT_COLS} FROM prompts ORDER BY id")] == V1_PROMPTS
            assert [tuple(r) for r in conn.execute(f"SELECT {SESSION_COLS} FROM sessions ORDER BY id")] == \
                V1_SESSIONS
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if step >= 2:
                cols = {r[1] for r in conn.execute("PRAGMA table_info(observations)")}
                assert {"is_pinned", "project"} <= cols
            if step >= 3:
                assert {"memories", "memories_fts"} <= tables
            if step >= 4:
                assert "sessions_fts" in tables
                assert conn.execute("SELECT COUNT(*) FROM sessions_fts").fetchone()[0] == 2
            if step >= 5:
                hits = conn.execute("SELECT rowid FROM sessions_fts WHERE sessions_fts MATCH 'errors'").fetchall()
                assert hits == []
                assert conn.execute("SELECT COUNT(*) FROM sessions_fts WHERE sessions_fts MATCH 'login'"
                                    ).fetchone()[0] == 1
            if step >= 8:
                assert "import_marks" in tables
            for fts in ("observations_fts", "prompts_fts"):
                conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def test_fresh_database_gets_every_step(db: Path, opened: list[Any]) -> None:
    store = open_latest(db, opened)
    assert store.schema_version() == LATEST_VERSION
    names = {r[0] for r in select(store, "SELECT name FROM sqlite_master")}
    assert {"sessions", "prompts", "observations", "memories", "observations_fts", "prompts_fts",
            "memories_fts", "sessions_fts", "observations_ai", "observations_ad", "observations_au",
            "prompts_ai", "prompts_ad", "prompts_au", "memories_ai", "memories_ad", "memories_au",
            "sessions_ai", "sessions_ad", "sessions_au", "idx_obs_session", "idx_obs_prompt",
            "idx_obs_type_project", "idx_obs_file_time", "idx_prompts_session", "observations_late",
            "observations_late_ai", "observations_late_au", "observations_late_ad"} <= names
    # step 7 folded the dedup index into the session index
    assert not {"idx_obs_dedup", "idx_obs_type", "idx_obs_file"} & names


def test_reopening_a_current_database_changes_nothing(db: Path, opened: list[Any]) -> None:
    first = open_latest(db, opened)
    first.ensure_session("s", "p", T0)
    first.close()
    again = open_latest(db, opened)
    assert again.schema_version() == LATEST_VERSION
    assert again.get_session("s") is not None


def test_migrate_to_is_a_no_op_at_or_below_the_current_version(db: Path, opened: list[Any]) -> None:
    store = open_latest(db, opened)
    store.migrate_to(1)
    store.migrate_to(LATEST_VERSION)
    assert store.schema_version() == LATEST_VERSION


def _open_fds(path: Path) -> list[str]:
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        pytest.skip("needs /proc")
    found = []
    for fd in fd_dir.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_database_newer_than_the_code_is_refused_untouched(db: Path, opened: list[Any]) -> None:
    build_populated(db, LATEST_VERSION)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")  # a later nmem marks its files
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    digest = _file_digest(db)
    with pytest.raises(StorageError, match=rf"database schema v{LATEST_VERSION + 1} is newer than this nmem "
                                           rf"\(v{LATEST_VERSION}\)") as err:
        open_store(f"sqlite:///{db}")
    assert err.value.exit_code == 4
    assert _file_digest(db) == digest
    assert _open_fds(db) == []  # the refused store closed its connection
    assert user_version(db) == LATEST_VERSION + 1


def test_a_failing_step_rolls_back_to_the_previous_version(db: Path) -> None:
    build_populated(db, 1)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE INDEX idx_obs_time ON observations(timestamp)")  # step 2 creates this name too
    conn.close()
    with pytest.raises(StorageError, match="idx_obs_time already exists"):
        SqliteStore(str(db))
    assert user_version(db) == 1
    conn = sqlite3.connect(db)
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(observations)")}
        assert "is_pinned" not in cols and "project" not in cols  # the ALTERs were rolled back too
        assert [tuple(r) for r in conn.execute(f"SELECT {OBS_COLS} FROM observations ORDER BY id")] == \
            V1_OBSERVATIONS
    finally:
        conn.close()


OPEN_AT_ONCE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from nmem.store import open_store
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    store = open_store("sqlite:///" + sys.argv[1])
    store.ensure_session("s-" + sys.argv[3], "race", 1)
    print(store.schema_version())
    store.close()
""")


def test_processes_opening_a_fresh_database_at_once_all_succeed(tmp_path: Path) -> None:
    db = tmp_path / "race" / "nmem.db"
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE, str(db), str(go), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    time.sleep(0.5)  # let every interpreter start and wait on the flag
    go.touch()
    results = [p.communicate(timeout=30) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in results]
    assert [out.strip() for out, _ in results] == [str(LATEST_VERSION)] * 4
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        assert sorted(r[0] for r in conn.execute("SELECT id FROM sessions")) == ["s-0", "s-1", "s-2", "s-3"]
    finally:
        conn.close()


def test_a_read_only_open_of_an_older_database_upgrades_it_first(db: Path, opened: list[Any]) -> None:
    build_populated(db, 1)
    reader = open_store(f"sqlite:///{db}", readonly=True)
    opened.append(reader)
    assert reader.schema_version() == LATEST_VERSION
    assert [o.project for o in reader.get_observations([2, 5])] == ["demo", "ops"]
    assert [o.id for o, _ in reader.search_observations('"kubectl"', SearchFilters(), "relevance", 10, 0)] == [5]
    with pytest.raises(StorageError, match="store opened read-only"):
        reader.ensure_session("x", "demo", T0)


def test_a_read_only_open_of_a_newer_database_is_refused(db: Path) -> None:
    build_populated(db, LATEST_VERSION)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 3}")
    conn.close()
    with pytest.raises(StorageError, match=f"database schema v{LATEST_VERSION + 3} is newer"):
        open_store(f"sqlite:///{db}", readonly=True)
    assert _open_fds(db) == []


def test_step_7_lists_the_rows_already_out_of_time_order(db: Path, opened: list[Any]) -> None:
    build_populated(db, 6)
    conn = sqlite3.connect(db, isolation_level=None)
    try:  # an import of older transcripts into a v6 database: ids 6 and 7 are older than id 5
        conn.executemany(f"INSERT INTO observations ({OBS_COLS}, project) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            (6, "sess-a", None, T0 + 5, "command", "PostToolUse", "Bash", None, "make import", None, "demo"),
            (7, "sess-a", None, T0 + 7220, "command", "PostToolUse", "Bash", None, "make same-second", None, "demo"),
            (8, "sess-b", None, T0 + 3000, "command", "PostToolUse", "Bash", None, "make older", None, "ops"),
            (9, "sess-b", None, T0 + 9000, "command", "PostToolUse", "Bash", None, "make newest", None, "ops")])
    finally:
        conn.close()
    store = open_latest(db, opened)
    assert select(store, "SELECT id, timestamp FROM observations_late ORDER BY id") == [(6, T0 + 5), (8, T0 + 3000)]
    assert select(store, f"SELECT {OBS_COLS} FROM observations WHERE id <= 5 ORDER BY id") == V1_OBSERVATIONS
    assert [o.id for o, _ in store.search_observations('"make"', SearchFilters(), "date_desc", 3, 0)] == [9, 7, 8]
    names = {r[0] for r in select(store, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_obs_session", "idx_obs_file_time", "idx_obs_type_project", "idx_obs_late_time"} <= names
    assert not {"idx_obs_dedup", "idx_obs_file", "idx_obs_type"} & names
    # new rows keep the list up to date: one from the past joins it, one from now does not
    store.ensure_session("sess-c", "demo", T0)
    late = store.add_observation(NewObservation("sess-c", "demo", T0 + 1, "command", "PostToolUse", "make late"))
    store.add_observation(NewObservation("sess-c", "demo", T0 + 9500, "command", "PostToolUse", "make now"))
    assert select(store, "SELECT id FROM observations_late ORDER BY id") == [(6,), (8,), (late,)]


def test_step_9_moves_failed_file_rows_to_file_error(db: Path, opened: list[Any]) -> None:
    """Failed or refused file tools stored before `file_error` existed stop reading as reads and changes."""
    build_populated(db, 8)
    denial = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
              "file edit, the new_string was NOT written to the file).")
    rows = [
        (6, "sess-a", None, T0 + 60, "file_edit", "PostToolUseFailure", "Edit", "/w/demo/auth.py", "/w/demo/auth.py",
         json.dumps({"old_sha256": "a1", "error": "String to replace not found in file.\nString: tokn"})),
        (7, "sess-a", None, T0 + 61, "file_write", "PostToolUseFailure", "Write", "/w/demo/auth.py",
         "/w/demo/auth.py", json.dumps({"sha256": "b2", "error": denial})),
        (8, "sess-a", None, T0 + 62, "file_read", "PostToolUseFailure", "Read", "/w/demo/gone.py", "/w/demo/gone.py",
         None),
        (9, "sess-a", None, T0 + 63, "file_read", "PostToolUse", "Read", "/w/demo/odd.py", "/w/demo/odd.py",
         "not json"),
        (10, "sess-a", None, T0 + 64, "command_error", "PostToolUseFailure", "Bash", None, "make\nboom",
         json.dumps({"error": "boom"})),
    ]
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.executemany(f"INSERT INTO observations ({OBS_COLS}, project) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'demo')", rows)
    finally:
        conn.close()
    store = open_latest(db, opened)
    got = {o.id: o for o in store.get_observations([3, 6, 7, 8, 9, 10])}
    assert [(i, got[i].obs_type) for i in sorted(got)] == [
        (3, "file_edit"), (6, "file_error"), (7, "file_error"), (8, "file_error"), (9, "file_read"),
        (10, "command_error")]
    assert got[6].metadata == {"old_sha256": "a1", "error": "String to replace not found in file.\nString: tokn",
                               "tool": "Edit"}
    assert got[6].content == "Edit /w/demo/auth.py\n→ String to replace not found in file.\nString: tokn"
    assert got[6].preview() == "Edit /w/demo/auth.py → ✗ String to replace not found in file."
    assert got[7].metadata == {"sha256": "b2", "error": denial, "tool": "Write", "denied": True}
    assert got[8].metadata == {"tool": "Read", "error": "failed"}
    assert got[8].preview() == "Read /w/demo/gone.py → ✗ failed"
    assert (got[9].content, got[10].content) == ("/w/demo/odd.py", "make\nboom")  # untouched
    assert select(store, f"SELECT {OBS_COLS} FROM observations WHERE id <= 5 ORDER BY id") == V1_OBSERVATIONS
    # the error's words are searchable now, and the edit row's FTS entry still matches its path
    f = SearchFilters()
    assert [o.id for o, _ in store.search_observations('"replace not found"', f, "relevance", 10, 0)] == [6]
    assert [o.id for o, _ in store.search_observations('"auth"', f, "date_asc", 10, 0)] == [2, 3, 6, 7]
    assert [o.id for o, _ in store.search_observations(None, SearchFilters(obs_types=("file_error",)),
                                                       "date_asc", 10, 0)] == [6, 7, 8]
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO observations_fts(observations_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def test_step_17_counts_the_rows_already_there_and_keeps_counting(db: Path, opened: list[Any]) -> None:
    build_populated(db, 16)
    store = open_latest(db, opened)
    assert select(store, "SELECT tbl, key, n FROM trail_counts ORDER BY tbl, key") == [
        ("observations", "command", 1), ("observations", "command_error", 1), ("observations", "file_edit", 1),
        ("observations", "file_read", 1), ("observations", "session_start", 1),
        ("prompts", "agent", 1), ("prompts", "user", 2)]
    store.add_observation(NewObservation("sess-b", "ops", T0 + 7300, "command", "PostToolUse", "kubectl get pods"))
    store.purge_observations([2])
    st = store.status()
    assert (st.observations, st.prompts) == (5, 3)
    assert st.by_obs_type == {"command": 2, "command_error": 1, "file_edit": 1, "session_start": 1}
    assert st.by_prompt_source == {"user": 2, "agent": 1}
