"""`nmem import gemini` and `nmem import opencode` as real subprocesses, on fixtures in each
agent's stored shapes (tests/fixtures/{gemini,opencode}/SOURCES.md): every prompt, reply and
thought, tool calls through the same extractors, subagents under their session, a malformed
line or file reported and the rest imported, and importing again adding only what is new."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures.harness import hook_env, observations, query

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GEMINI_SESSION = "5f0c8f7e-2b1a-4c7d-9e1f-0a2b3c4d5e6f"
GEMINI_CWD = "/home/dev/code/gemini-demo"
OPENCODE_SESSION = "ses_6a1f0c2e3ffeQ1w2E3r4T5y6U7"
OPENCODE_CWD = "/home/dev/code/opencode-demo"
OPENCODE_REPLY = "msg_9e5f0c2e5001AbCdEfGhIjKlMn"


def nmem_import(tmp_path: Path, *args: str, code: int = 0) -> dict[str, Any]:
    env = hook_env(tmp_path / "nmem")
    env["HOME"] = str(tmp_path / "home")
    done = run_nmem(["import", *args, "--format", "json"], env=env)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    result: dict[str, Any] = json.loads(done.stdout) if code == 0 else {"stderr": done.stderr}
    return result


def prompts(home: Path, session: str) -> list[tuple[str, str]]:
    rows = query(home, "SELECT source, content FROM prompts WHERE session_id = ? ORDER BY id", session)
    return [(r["source"], r["content"]) for r in rows]


def tools(home: Path) -> list[tuple[str, str]]:
    return [(o["obs_type"], o["tool_name"]) for o in observations(home) if o["tool_name"]]


# -- Gemini CLI ---------------------------------------------------------------------------------------------------


@pytest.fixture
def gemini(tmp_path: Path) -> Path:
    root = tmp_path / "gemini"
    shutil.copytree(FIXTURES / "gemini", root)
    return root


def test_gemini_chats_are_imported_whole_as_geminis_and_resume(tmp_path: Path, gemini: Path) -> None:
    home = tmp_path / "nmem"
    first = nmem_import(tmp_path, "gemini", str(gemini / "tmp"))
    assert first["files"] == 3 and first["imported_sessions"] == 2
    assert [e for e in first["errors"] if "line 6: not JSON; skipped" in e] == first["errors"] != []
    sessions = query(home, "SELECT id, agent, root FROM sessions ORDER BY id")
    assert [(s["agent"], s["root"]) for s in sessions] == [("gemini", "/home/dev/code/legacy-app"),
                                                          ("gemini", GEMINI_CWD)]
    said = prompts(home, GEMINI_SESSION)
    assert said == [
        ("user", "make the invoice export stream rows @src/export.py"),      # what was typed, not the expansion
        ("thinking", "Locating the export code: The buffering happens in export_rows."),
        ("agent", "export_rows now returns an iterator; tests/test_invoice.py still calls len() on it."),
        ("user", "Find every caller of export_rows."),                       # the subagent's, under its parent
        ("subagent", "export_rows is called from cli.py and tests/test_invoice.py."),
    ]
    # the message written twice (its read_file running, then finished) gives each tool call once
    assert tools(home) == [("command", "Bash"), ("file_read", "Read"), ("file_edit", "Edit"),
                           ("command_error", "Bash"), ("search", "Grep")]
    error = observations(home, "obs_type = 'command_error'")[0]
    assert "has no len()" in error["metadata"]["error_line"]

    again = nmem_import(tmp_path, "gemini", str(gemini / "tmp"))
    assert again["events"] == 0 and again["skipped_sessions"] == 2

    chat = next((gemini / "tmp" / "gemini-demo" / "chats").glob("session-*.jsonl"))
    with chat.open("a") as fh:
        for record in [
            {"id": "m-user-2", "timestamp": "2025-12-01T10:31:00.000Z", "type": "user",
             "content": [{"text": "fix the test too"}]},
            {"id": "m-gem-3", "timestamp": "2025-12-01T10:31:10.000Z", "type": "gemini", "content": "",
             "toolCalls": [{"id": "run_shell_command-4", "name": "run_shell_command",
                            "args": {"command": "pytest -q"}, "status": "executing",
                            "timestamp": "2025-12-01T10:31:10.000Z"}]},
        ]:
            fh.write(json.dumps(record) + "\n")
    third = nmem_import(tmp_path, "gemini", str(chat))
    assert third["updated_sessions"] == 1
    assert prompts(home, GEMINI_SESSION)[-1] == ("user", "fix the test too")
    assert len(tools(home)) == 5                     # the running call waits for its result
    with chat.open("a") as fh:
        fh.write(json.dumps({"id": "m-gem-3", "timestamp": "2025-12-01T10:31:10.000Z", "type": "gemini",
                             "content": "All tests pass.", "toolCalls": [{
                                 "id": "run_shell_command-4", "name": "run_shell_command",
                                 "args": {"command": "pytest -q"}, "status": "success",
                                 "timestamp": "2025-12-01T10:31:15.000Z", "result": [{"functionResponse": {
                                     "id": "run_shell_command-4", "name": "run_shell_command", "response": {
                                         "output": "Command: pytest -q\nDirectory: (root)\nOutput: 2 passed\n"
                                                   "Error: (none)\nExit Code: 0"}}}]}]}) + "\n")
    fourth = nmem_import(tmp_path, "gemini", str(chat))
    assert fourth["updated_sessions"] == 1
    assert [o["content"] for o in observations(home, "obs_type = 'command'")][-1] == "pytest -q\n→ 2 passed"
    assert prompts(home, GEMINI_SESSION).count(("user", "fix the test too")) == 1
    assert prompts(home, GEMINI_SESSION)[-1] == ("agent", "All tests pass.")


def test_a_gemini_chat_whose_project_is_unknown_is_reported_and_project_names_it(tmp_path: Path,
                                                                                gemini: Path) -> None:
    (gemini / "projects.json").unlink()
    legacy = next((gemini / "tmp").glob("*/chats/session-*.json"))
    refused = nmem_import(tmp_path, "gemini", str(legacy))
    assert refused["events"] == 0 and len(refused["errors"]) == 1
    assert "project directory is not known" in refused["errors"][0] and "--project" in refused["errors"][0]
    project = tmp_path / "legacy-app"
    project.mkdir()
    taken = nmem_import(tmp_path, "gemini", str(legacy), "--project", str(project))
    assert taken["imported_sessions"] == 1 and taken["errors"] == []
    assert query(tmp_path / "nmem", "SELECT root FROM sessions") == [{"root": str(project)}]


# -- OpenCode -----------------------------------------------------------------------------------------------------


@pytest.fixture
def opencode(tmp_path: Path) -> Path:
    root = tmp_path / "opencode"
    shutil.copytree(FIXTURES / "opencode", root)
    return root


def to_database(data_dir: Path) -> Path:
    """opencode.db from storage/, the way OpenCode's json-migration.ts moves the files in."""
    storage = data_dir / "storage"
    db_file = data_dir / "opencode.db"
    db = sqlite3.connect(db_file)
    db.executescript((data_dir / "schema.sql").read_text())
    for path in sorted(storage.glob("session/*/*.json")):
        s = json.loads(path.read_text())
        db.execute("INSERT INTO session (id, project_id, parent_id, directory, title, version, time_created, "
                   "time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (path.stem, path.parent.name, s.get("parentID"), s["directory"], s["title"], s["version"],
                    s["time"]["created"], s["time"]["updated"]))
    sessions_of = {}
    for path in sorted(storage.glob("message/*/*.json")):
        m = json.loads(path.read_text())
        sessions_of[path.stem] = path.parent.name
        data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
        db.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                   (path.stem, path.parent.name, m["time"]["created"], m["time"]["created"], json.dumps(data)))
    for path in sorted(storage.glob("part/*/*.json")):
        try:
            p = json.loads(path.read_text())
        except ValueError:
            continue                                  # the migration, too, leaves out what it cannot read
        data = {k: v for k, v in p.items() if k not in ("id", "messageID", "sessionID")}
        db.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                   (path.stem, path.parent.name, sessions_of[path.parent.name], 0, 0, json.dumps(data)))
    db.commit()
    db.close()
    return db_file


def check_opencode_session(home: Path) -> None:
    assert query(home, "SELECT id, agent, root FROM sessions") == [
        {"id": OPENCODE_SESSION, "agent": "opencode", "root": OPENCODE_CWD}]
    assert prompts(home, OPENCODE_SESSION) == [
        ("user", "make the invoice export stream rows"),                 # the synthetic part left out
        ("thinking", "The buffering is in export_rows; read it first."),
        ("agent", "export_rows now returns an iterator; tests/test_invoice.py still calls len() on it."),
        ("user", "Find every caller of export_rows."),                   # the task tool's subagent session
        ("subagent", "export_rows is called from cli.py and tests/test_invoice.py."),
    ]
    assert tools(home) == [("file_read", "Read"), ("file_edit", "Edit"), ("task_spawn", "Task"),
                           ("command_error", "Bash"), ("search", "Grep"), ("search", "Glob")]
    assert "has no len()" in observations(home, "obs_type = 'command_error'")[0]["metadata"]["error_line"]
    assert observations(home, "tool_name = 'Glob'")[0]["metadata"]["agent_id"] == "ses_6a1f0b9d0ffeA1s2D3f4G5h6J7"


def test_opencode_storage_files_are_imported_and_resume(tmp_path: Path, opencode: Path) -> None:
    home = tmp_path / "nmem"
    running = opencode / "storage" / "part" / OPENCODE_REPLY / "prt_9e5f0c2e5012AbCdEfGhIjKlMn.json"
    part = {"id": running.stem, "sessionID": OPENCODE_SESSION, "messageID": OPENCODE_REPLY, "type": "tool",
            "callID": "toolu_06Bash", "tool": "bash",
            "state": {"status": "running", "input": {"command": "pytest -q"}, "time": {"start": 1764585041000}}}
    running.write_text(json.dumps(part))
    first = nmem_import(tmp_path, "opencode", str(opencode))
    assert first["imported_sessions"] == 1 and first["updated_sessions"] == 0
    assert len(first["errors"]) == 1 and "prt_9e5f0c2e5011AbCdEfGhIjKlMn.json: not JSON; skipped" in first["errors"][0]
    check_opencode_session(home)                     # the running bash call is not recorded yet

    again = nmem_import(tmp_path, "opencode", str(opencode))
    assert again["events"] == 0 and again["skipped_sessions"] == 1

    part["state"] = {"status": "completed", "input": {"command": "pytest -q"}, "output": "2 passed in 0.10s\n",
                     "title": "pytest -q", "metadata": {"exit": 0},
                     "time": {"start": 1764585041000, "end": 1764585043000}}
    running.write_text(json.dumps(part))
    third = nmem_import(tmp_path, "opencode", str(opencode / "storage"))
    assert third["updated_sessions"] == 1
    assert [o["content"] for o in observations(home, "obs_type = 'command'")] == ["pytest -q\n→ 2 passed in 0.10s"]
    assert len(tools(home)) == 7


def test_opencode_database_is_read_and_the_same_sessions_from_files_add_nothing(tmp_path: Path,
                                                                                  opencode: Path) -> None:
    db_file = to_database(opencode)
    before = db_file.read_bytes()
    first = nmem_import(tmp_path, "opencode", str(opencode))           # the database wins over storage/
    assert first["imported_sessions"] == 1 and first["errors"] == []
    check_opencode_session(tmp_path / "nmem")
    assert db_file.read_bytes() == before                               # only read
    from_files = nmem_import(tmp_path, "opencode", str(opencode / "storage"))
    assert from_files["events"] == 0


def test_an_opencode_row_that_is_not_json_is_reported_and_the_rest_imported(tmp_path: Path,
                                                                            opencode: Path) -> None:
    db_file = to_database(opencode)
    db = sqlite3.connect(db_file)
    db.execute("UPDATE part SET data = '{\"type\": \"text\", \"text\": ' WHERE id = 'prt_9e5f0c2e5003AbCdEfGhIjKlMn'")
    db.commit()
    db.close()
    result = nmem_import(tmp_path, "opencode", str(db_file))
    assert result["imported_sessions"] == 1
    assert result["errors"] == [f"{db_file}: session {OPENCODE_SESSION}: part prt_9e5f0c2e5003AbCdEfGhIjKlMn: "
                                "not JSON; skipped"]
    assert ("thinking", "The buffering is in export_rows; read it first.") not in prompts(tmp_path / "nmem",
                                                                                      OPENCODE_SESSION)
    assert len(tools(tmp_path / "nmem")) == 6


@pytest.mark.parametrize("agent", ["gemini", "opencode"])
def test_a_fifo_is_refused_without_reading_it(tmp_path: Path, agent: str) -> None:
    fifo = tmp_path / "session-x.jsonl"
    os.mkfifo(fifo)
    refused = nmem_import(tmp_path, agent, str(fifo), code=2)
    assert "not a regular file" in refused["stderr"] and "Traceback" not in refused["stderr"]


def test_a_fifo_among_the_chats_is_reported_and_the_others_imported(tmp_path: Path, gemini: Path) -> None:
    os.mkfifo(gemini / "tmp" / "gemini-demo" / "chats" / "session-2025-12-02T09-00-deadbeef.jsonl")
    result = nmem_import(tmp_path, "gemini", str(gemini / "tmp"))
    assert result["imported_sessions"] == 2
    assert any("deadbeef.jsonl is not a regular file" in e for e in result["errors"])


def test_a_gemini_session_the_hooks_captured_keeps_what_they_recorded(tmp_path: Path, gemini: Path) -> None:
    home = tmp_path / "nmem"
    hooked = run_nmem(["record", "--agent", "gemini"], env=hook_env(home), stdin=json.dumps({
        "session_id": GEMINI_SESSION, "transcript_path": "", "cwd": GEMINI_CWD, "hook_event_name": "BeforeAgent",
        "timestamp": "2025-12-01T10:30:05Z", "prompt": "make the invoice export stream rows @src/export.py"}))
    assert hooked.returncode == 0, hooked.stderr
    result = nmem_import(tmp_path, "gemini", str(gemini / "tmp" / "gemini-demo"))
    # the hook ran after everything the chat holds (its clock is now): the chat adds nothing to it
    assert result["skipped_sessions"] == 1 and result["events"] == 0
    assert prompts(home, GEMINI_SESSION) == [("user", "make the invoice export stream rows @src/export.py")]
    again = nmem_import(tmp_path, "gemini", str(gemini / "tmp" / "gemini-demo"))
    assert again["events"] == 0
