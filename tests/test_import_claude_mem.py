"""`nmem import claude-mem`: a claude-mem-shaped SQLite database (its schema, from claude-mem's
SessionStore migrations) becomes memories and trail sessions, idempotently."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import record
from nmem.service.api import Service
from test_cli_support import invoke, ok

MS = 1_790_000_000_000  # claude-mem stamps *_epoch columns in JavaScript milliseconds

# claude-mem's tables as its migrations leave them today (the columns nmem reads, and a few it ignores).
SCHEMA = """
CREATE TABLE sdk_sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT NOT NULL, memory_session_id TEXT UNIQUE,
    project TEXT NOT NULL, platform_source TEXT NOT NULL DEFAULT 'claude', user_prompt TEXT,
    started_at TEXT NOT NULL, started_at_epoch INTEGER NOT NULL, completed_at TEXT, completed_at_epoch INTEGER,
    status TEXT NOT NULL DEFAULT 'active', worker_port INTEGER, prompt_counter INTEGER DEFAULT 0, custom_title TEXT);
CREATE TABLE observations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL, text TEXT,
    type TEXT NOT NULL, title TEXT, subtitle TEXT, facts TEXT, narrative TEXT, concepts TEXT, files_read TEXT,
    files_modified TEXT, prompt_number INTEGER, discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL,
    created_at_epoch INTEGER NOT NULL, content_hash TEXT);
CREATE TABLE session_summaries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL, request TEXT,
    investigated TEXT, learned TEXT, completed TEXT, next_steps TEXT, files_read TEXT, files_edited TEXT, notes TEXT,
    prompt_number INTEGER, discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL,
    created_at_epoch INTEGER NOT NULL);
CREATE TABLE user_prompts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_db_id INTEGER, content_session_id TEXT NOT NULL,
    prompt_number INTEGER NOT NULL, prompt_text TEXT NOT NULL, created_at TEXT NOT NULL,
    created_at_epoch INTEGER NOT NULL);
"""

OBSERVATIONS: list[dict[str, Any]] = [
    {"type": "decision", "title": "Use SQLite WAL for the cache", "subtitle": "Concurrency choice",
     "narrative": "Readers must never block the writer.", "facts": ["WAL allows one writer", "busy_timeout 5s"],
     "concepts": ["trade-off", "why-it-exists"], "files_read": ["src/cache.py"], "files_modified": ["src/db.py"]},
    {"type": "bugfix", "title": "Token refresh raced the logout", "narrative": "A lock around refresh fixed it.",
     "facts": [], "concepts": ["problem-solution"], "files_read": [], "files_modified": ["src/auth.py"]},
    {"type": "discovery", "title": "The API paginates with cursors", "narrative": "Offsets are ignored.",
     "facts": ["cursor in Link header"], "concepts": ["how-it-works"], "files_read": [], "files_modified": []},
    {"type": "feature", "title": "Added CSV export", "narrative": "Streams rows.", "facts": [], "concepts": [],
     "files_read": [], "files_modified": ["src/export.py"]},
    {"type": "refactor", "title": "Split the billing module", "narrative": "", "facts": [], "concepts": [],
     "files_read": [], "files_modified": []},
    {"type": "change", "title": "Bumped the CI image", "narrative": "Python 3.13.", "facts": [], "concepts": [],
     "files_read": [], "files_modified": []},
]


def build_claude_mem(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")  # as claude-mem runs it
    conn.executescript(SCHEMA)
    conn.execute("INSERT INTO sdk_sessions (content_session_id, memory_session_id, project, started_at, "
                 "started_at_epoch, completed_at, completed_at_epoch, status) VALUES "
                 "('cc-1111', 'mem-aaaa', 'shop', 'x', ?, 'x', ?, 'completed')", (MS, MS + 600_000))
    conn.execute("INSERT INTO sdk_sessions (content_session_id, memory_session_id, project, started_at, "
                 "started_at_epoch) VALUES ('cc-2222', 'mem-bbbb', 'shop', 'x', ?)", (MS + 3_600_000,))
    for i, obs in enumerate(OBSERVATIONS):
        conn.execute(
            "INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative, concepts, "
            "files_read, files_modified, prompt_number, created_at, created_at_epoch) "
            "VALUES (?, 'shop', ?, ?, ?, ?, ?, ?, ?, ?, 1, 'x', ?)",
            ("mem-aaaa" if i < 4 else "mem-bbbb", obs["type"], obs["title"], obs.get("subtitle"),
             json.dumps(obs["facts"]), obs["narrative"], json.dumps(obs["concepts"]), json.dumps(obs["files_read"]),
             json.dumps(obs["files_modified"]), MS + 1000 * (i + 1)))
    conn.execute("INSERT INTO observations (memory_session_id, project, type, text, created_at, created_at_epoch) "
                 "VALUES ('mem-bbbb', 'shop', 'discovery', NULL, 'x', ?)", (MS + 9000,))  # nothing to keep
    conn.execute("INSERT INTO session_summaries (memory_session_id, project, request, investigated, learned, "
                 "completed, next_steps, files_edited, created_at, created_at_epoch) VALUES ('mem-aaaa', 'shop', "
                 "'Make the cache safe under load', 'lock contention', 'WAL fixes it', 'switched to WAL', "
                 "'benchmark', '[\"src/db.py\"]', 'x', ?)", (MS + 500_000,))
    for n, (sid, text) in enumerate([("cc-1111", "why does the cache deadlock?"), ("cc-1111", "switch it to WAL"),
                                     ("cc-2222", "split billing <private>acct 42</private>please")], start=1):
        conn.execute("INSERT INTO user_prompts (content_session_id, prompt_number, prompt_text, created_at, "
                     "created_at_epoch) VALUES (?, ?, ?, 'x', ?)", (sid, n, text, MS + 100_000 * n))
    conn.commit()
    conn.close()
    return path


def db(service: Service, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in service.store._reader().execute(sql).fetchall()]  # type: ignore[attr-defined]


def test_observations_become_memories_and_sessions_trail(service: Service, tmp_path: Path) -> None:
    source = build_claude_mem(tmp_path / "claude-mem.db")
    original = source.read_bytes()
    report = json.loads(ok("--format", "json", "import", "claude-mem", str(source)).stdout)
    assert source.read_bytes() == original, "claude-mem's database is only read"
    assert report["imported"]["memories"]["added"] == 6
    assert report["skipped"] == ["observation 7: no text"]
    assert report["imported"]["sessions"]["added"] == 2
    assert report["imported"]["prompts"]["added"] == 3

    memories = {m.summary: m for m in service.store.iter_memories("project:shop", None)}
    assert {m.summary: m.namespace for m in memories.values()} == {
        "Use SQLite WAL for the cache": "decisions", "Token refresh raced the logout": "gotchas",
        "The API paginates with cursors": "learnings", "Added CSV export": "progress",
        "Split the billing module": "progress", "Bumped the CI image": "progress"}
    wal = memories["Use SQLite WAL for the cache"]
    assert wal.content == ("Concurrency choice\n\nReaders must never block the writer.\n\n"
                           "Facts:\n- WAL allows one writer\n- busy_timeout 5s\n\n"
                           "Files read: src/cache.py\n\nFiles modified: src/db.py")
    assert wal.tags == ["claude-mem", "decision", "trade-off", "why-it-exists"]
    assert wal.source == "session:cc-1111"
    assert (wal.created_at, wal.updated_at) == (MS // 1000 + 1, MS // 1000 + 1)
    assert memories["Split the billing module"].source == "session:cc-2222"

    done = service.store.get_session("cc-1111")
    assert (done.project, done.started_at, done.ended_at) == ("shop", MS // 1000, MS // 1000 + 600)
    assert done.summary["intent"] == "Make the cache safe under load"
    assert done.summary["files_changed"] == ["src/db.py"]
    assert "Learned: WAL fixes it" in done.summary["text"]
    assert service.store.get_session("cc-2222").ended_at is None
    prompts = db(service, "SELECT session_id, source, content FROM prompts ORDER BY id")
    assert prompts == [("cc-1111", "user", "why does the cache deadlock?"), ("cc-1111", "user", "switch it to WAL"),
                       ("cc-2222", "user", "split billing please")], "private text never stored"
    assert [h.record.session_id for h in service.search("deadlock", scope="prompts").hits] == ["cc-1111"]
    assert service.recall("cursors", project="shop")[0].record.namespace == "learnings"


def test_importing_again_adds_nothing(service: Service, tmp_path: Path) -> None:
    source = build_claude_mem(tmp_path / "claude-mem.db")
    ok("import", "claude-mem", str(source))
    before = db(service, "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM prompts), "
                         "(SELECT count(*) FROM sessions)")
    again = json.loads(ok("--format", "json", "import", "claude-mem", str(source)).stdout)["imported"]
    assert again["memories"]["unchanged"] == 6 and again["memories"]["added"] == 0
    assert again["prompts"] == {"added": 0, "unchanged": 3}
    assert again["sessions"] == {"added": 0, "updated": 0, "unchanged": 2}
    assert db(service, "SELECT (SELECT count(*) FROM memories), (SELECT count(*) FROM prompts), "
                       "(SELECT count(*) FROM sessions)") == before


def test_a_session_nmem_recorded_keeps_what_nmem_knows(service: Service, tmp_path: Path) -> None:
    t = MS // 1000
    record(service, "UserPromptSubmit", now=t + 100, session_id="cc-1111", cwd="/work/shop",
           prompt="why does the cache deadlock?")
    record(service, "Stop", now=t + 700, session_id="cc-1111", cwd="/work/shop", last_assistant_message="Done")
    ours = service.store.get_session("cc-1111")
    ok("import", "claude-mem", str(build_claude_mem(tmp_path / "claude-mem.db")))
    kept = service.store.get_session("cc-1111")
    assert (kept.summary, kept.ended_at, kept.started_at) == (ours.summary, ours.ended_at, ours.started_at)
    users = db(service, "SELECT content FROM prompts WHERE session_id = 'cc-1111' AND source = 'user' ORDER BY id")
    assert users == [("why does the cache deadlock?",), ("switch it to WAL",)], "the prompt nmem saw is not doubled"


def test_an_older_claude_mem_schema_is_read_too(service: Service, tmp_path: Path) -> None:
    """Before claude-mem's 17th migration the session columns were sdk_session_id and
    claude_session_id, and before its 8th observations had only `text`."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE sdk_sessions (id INTEGER PRIMARY KEY, claude_session_id TEXT NOT NULL, sdk_session_id TEXT,
            project TEXT NOT NULL, started_at TEXT, started_at_epoch INTEGER NOT NULL, completed_at_epoch INTEGER);
        CREATE TABLE observations (id INTEGER PRIMARY KEY, sdk_session_id TEXT NOT NULL, project TEXT NOT NULL,
            text TEXT NOT NULL, type TEXT NOT NULL, created_at TEXT, created_at_epoch INTEGER NOT NULL);
    """)
    conn.execute("INSERT INTO sdk_sessions VALUES (1, 'cc-old', 'sdk-old', 'legacy', 'x', ?, NULL)", (MS,))
    conn.execute("INSERT INTO observations VALUES (1, 'sdk-old', 'legacy', 'Chose Redis for sessions', 'decision', "
                 "'x', ?)", (MS + 5,))
    conn.commit()
    conn.close()
    report = json.loads(ok("--format", "json", "import", "claude-mem", str(path)).stdout)
    assert report["imported"]["memories"]["added"] == 1 and report["imported"]["sessions"]["added"] == 1
    (memory,) = service.store.iter_memories("project:legacy", "decisions")
    assert (memory.summary, memory.source) == ("Chose Redis for sessions", "session:cc-old")


def test_not_a_claude_mem_database_is_refused(service: Service, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    result = invoke("import", "claude-mem", str(other))
    assert result.exit_code == 2 and "is not a claude-mem database" in result.stderr
    text = tmp_path / "notes.db"
    text.write_text("hello", encoding="utf-8")
    assert "is not a claude-mem database" in invoke("import", "claude-mem", str(text)).stderr
    assert db(service, "SELECT count(*) FROM memories") == [(0,)]


@pytest.mark.parametrize("env_dir", [True, False])
def test_the_default_database_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env_dir: bool) -> None:
    from nmem.portable.sources import claude_mem

    if env_dir:
        monkeypatch.setenv("CLAUDE_MEM_DATA_DIR", str(tmp_path / "cm"))
        assert claude_mem.default_path() == tmp_path / "cm" / "claude-mem.db"
    else:
        monkeypatch.delenv("CLAUDE_MEM_DATA_DIR", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))
        assert claude_mem.default_path() == tmp_path / ".claude-mem" / "claude-mem.db"
