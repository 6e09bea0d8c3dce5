"""Claude Code's newer hook events and SessionEnd's budget.

Claude Code 2.1 fires 33 events (code.claude.com/docs/en/hooks; the list below adds the model
switch pair of later versions). nmem records eight of them; every other one, wired by a user
or a plugin, must be taken without an error, store nothing and print nothing. SessionEnd hooks
are killed after 1.5 s: with the database locked, a SessionEnd waits at most 700 ms, then spools.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from fixtures.harness import counts, db_path, event, hook, hook_ok, query

CWD = "/home/dev/code/events-demo"
OTHER_EVENTS = ("Setup", "PreToolUse", "PermissionRequest", "PermissionDenied", "Notification", "SubagentStart",
                "TaskCreated", "TaskCompleted", "StopFailure", "TeammateIdle", "PostCompact", "Elicitation",
                "ElicitationResult", "WorktreeCreate", "WorktreeRemove", "ConfigChange", "InstructionsLoaded",
                "CwdChanged", "FileChanged", "UserPromptExpansion", "PostToolBatch", "PreModelSwitch",
                "PostModelSwitch")


@pytest.mark.parametrize("name", OTHER_EVENTS)
def test_events_nmem_does_not_record_are_accepted_and_change_nothing(tmp_path: Path, name: str) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "s-1", CWD, prompt="switch to the faster model"))
    before = counts(home)
    payload = event(name, "s-1", CWD, permission_mode="default", model="claude-sonnet-4-5",
                    previous_model="claude-opus-4-1", tool_name="Bash", tool_input={"command": "ls"})
    assert hook_ok(home, payload) == ""
    assert counts(home) == before


def test_session_end_gives_up_on_a_locked_database_well_inside_its_budget(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "s-2", CWD, prompt="wrap up"))
    conn = sqlite3.connect(db_path(home), isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        done = hook(home, event("SessionEnd", "s-2", CWD, reason="exit"))  # default budget: 2000 ms
        elapsed = time.monotonic() - started
    finally:
        conn.rollback()
        conn.close()
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    log = (home / "logs" / "nmem.log").read_text()
    assert "(700 ms)" in log and "spooled SessionEnd event" in log, log
    assert elapsed < 5, elapsed  # not a timing test: only that it did not wait the 2000 ms budget twice over
    hook_ok(home, event("UserPromptSubmit", "s-2", CWD, prompt="after the lock"))
    assert query(home, "SELECT ended_at IS NOT NULL AS ended FROM sessions")[0]["ended"] == 1
