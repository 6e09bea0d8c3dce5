"""`nmem record` / `nmem hook <event>` as Claude Code runs them: one real process per event.

Never break the agent: bad input exits 1 with one line on stderr and stores nothing, an
internal error is logged (no traceback for the agent), exit 2 never happens, switches and
exclusions are honoured, SessionStart prints the fenced context block, and a busy database
spools the event instead of losing it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import counts, db_path, event, hook, hook_env, hook_ok, observations, query

CWD = "/home/dev/code/billing-api"
OTHER_CWD = "/home/dev/code/ledger-ui"


def read_event(session: str = "s-1", path: str = f"{CWD}/src/app.py", cwd: str = CWD) -> dict[str, Any]:
    return event("PostToolUse", session, cwd, tool_name="Read", tool_use_id="toolu_r",
                 tool_input={"file_path": path},
                 tool_response={"type": "text", "file": {"filePath": path, "content": "x = 1\n", "numLines": 1,
                                                         "startLine": 1, "totalLines": 1}})


def bash_event(command: str, session: str = "s-1", cwd: str = CWD) -> dict[str, Any]:
    return event("PostToolUse", session, cwd, tool_name="Bash", tool_input={"command": command},
                 tool_response={"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False})


def assert_rejected(done: Any, home: Path) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, f"expected one clear line on stderr, got: {done.stderr!r}"
    assert lines[0].startswith("nmem:") and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert counts(home) == {"sessions": 0, "prompts": 0, "observations": 0, "memories": 0}


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    "{not json", "", "   \n", '{"session_id": "s", "cwd": "/x", "hook_event_name": "Stop"',
    "[1, 2, 3]", '"a string"', "null", "\x00\x01garbage",
], ids=["broken", "empty", "blank", "truncated", "array", "string", "null", "binary"])
def test_malformed_input_exits_1_with_one_line_and_stores_nothing(tmp_path: Path, raw: str) -> None:
    home = tmp_path / "home"
    assert_rejected(hook(home, raw), home)


@pytest.mark.parametrize("missing", ["session_id", "hook_event_name"])
def test_missing_required_field_exits_1_and_stores_nothing(tmp_path: Path, missing: str) -> None:
    home = tmp_path / "home"
    payload = event("UserPromptSubmit", prompt="fix the login bug")
    del payload[missing]
    done = hook(home, payload)
    assert_rejected(done, home)
    assert missing in done.stderr


def test_missing_cwd_is_the_hook_process_s_working_directory(tmp_path: Path) -> None:
    """A harness runs its hook in the project (subcog's events name no directory, §5.3)."""
    home = tmp_path / "home"
    payload = event("UserPromptSubmit", prompt="fix the login bug")
    del payload["cwd"]
    (tmp_path / "ledger-ui").mkdir()
    done = subprocess.run([sys.executable, "-m", "nmem", "record"], input=json.dumps(payload), capture_output=True,
                          text=True, env=hook_env(home), cwd=tmp_path / "ledger-ui", timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert [r["project"] for r in query(home, "SELECT project FROM sessions")] == ["ledger-ui"]


@pytest.mark.parametrize("payload", [
    event("PostToolUse", tool_input={"command": "ls"}),                   # no tool_name
    event("UserPromptSubmit"),                                             # no prompt
    event("UserPromptSubmit", prompt=["not", "text"]),
    {"session_id": 42, "cwd": CWD, "hook_event_name": "Stop"},
    {"session_id": "s", "cwd": "", "hook_event_name": "Stop"},
], ids=["tool-without-name", "prompt-missing", "prompt-not-text", "session-not-text", "cwd-empty"])
def test_invalid_event_fields_exit_1_and_store_nothing(tmp_path: Path, payload: dict[str, Any]) -> None:
    home = tmp_path / "home"
    assert_rejected(hook(home, payload), home)


def test_existing_database_is_untouched_by_bad_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, bash_event("make build"))
    before = counts(home)
    assert hook(home, "{oops").returncode == 1
    assert hook(home, event("PostToolUse")).returncode == 1
    assert counts(home) == before


@pytest.mark.parametrize("name", ["Notification", "PreToolUse", "PermissionRequest", "SomeFutureEvent"])
def test_unknown_or_unhandled_event_is_accepted_and_ignored(tmp_path: Path, name: str) -> None:
    home = tmp_path / "home"
    done = hook(home, event(name, tool_name="Bash", tool_input={"command": "rm -rf build"}, message="hi"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    found = counts(home)
    assert (found["observations"], found["prompts"], found["memories"]) == (0, 0, 0)


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = bash_event("npm test")
    payload.update(permission_mode="default", prompt_id="550e8400-e29b-41d4-a716-446655440000",
                   effort={"level": "high"}, some_future_field={"nested": [1, 2]}, duration_ms=412)
    hook_ok(home, payload)
    assert [o["content"] for o in observations(home)] == ["npm test"]


@pytest.mark.parametrize("args,payload", [
    (("record",), "{broken"),
    (("record",), event("UserPromptSubmit")),
    (("record",), event("UserPromptSubmit", prompt=12)),
    (("record",), event("UserPromptSubmit", session_id="")),
    (("record",), event("Stop", last_assistant_message={"not": "text"}, stop_hook_active="yes")),
    (("record",), event("Stop", transcript_path="/nonexistent/dir/t.jsonl", last_assistant_message="done")),
    (("record",), event("Stop", transcript_path="/", last_assistant_message="done")),
    (("record",), event("SubagentStop", agent_id=7, last_assistant_message=None)),
    (("hook", "user-prompt-submit"), "not json at all"),
    (("hook", "user-prompt-submit"), {"prompt": "hello"}),
    (("hook", "stop"), "[]"),
    (("hook", "stop"), {"session_id": "s"}),
    (("hook",), "{}"),
    (("hook", "stop", "--bogus"), "{}"),
], ids=["broken", "no-prompt", "prompt-int", "empty-session", "odd-stop-fields", "missing-transcript",
        "transcript-is-dir", "odd-subagent", "hook-prompt-broken", "hook-prompt-partial", "hook-stop-array",
        "hook-stop-partial", "hook-no-event", "hook-bad-flag"])
def test_prompt_and_stop_never_exit_2(tmp_path: Path, args: tuple[str, ...], payload: Any) -> None:
    """Exit 2 erases the user's prompt (UserPromptSubmit) or stops Claude from stopping (Stop)."""
    home = tmp_path / "home"
    done = hook(home, payload, args=args)
    assert done.returncode in (0, 1), (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) <= 1


def test_hook_subcommand_takes_the_event_name_from_its_argument(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = {"session_id": "s-h", "cwd": CWD, "prompt": "rename the invoice module"}
    done = hook(home, payload, args=("hook", "user-prompt-submit"))
    assert (done.returncode, done.stderr) == (0, "")
    tool = {"session_id": "s-h", "cwd": CWD, "tool_name": "Bash", "tool_input": {"command": "git mv a b"},
            "tool_response": {"stdout": "", "stderr": ""}}
    assert hook(home, tool, args=("hook", "PostToolUse")).returncode == 0
    assert [p["content"] for p in query(home, "SELECT content FROM prompts")] == ["rename the invoice module"]
    assert [(o["obs_type"], o["content"]) for o in observations(home)] == [("command", "git mv a b")]


def test_first_run_creates_a_private_data_dir(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "nmem"
    hook_ok(home, bash_event("ls"))
    assert home.stat().st_mode & 0o777 == 0o700, oct(home.stat().st_mode)
    assert db_path(home).stat().st_mode & 0o777 == 0o600
    for sub in ("logs", "spool"):
        if (home / sub).exists():
            assert (home / sub).stat().st_mode & 0o777 == 0o700


# -- internal errors ----------------------------------------------------------------------------


def test_unusable_database_is_logged_and_the_events_kept(tmp_path: Path) -> None:
    """A database that cannot be opened needs the user: one line on stderr with exit 4 (which
    Claude Code shows without blocking), an ERROR in the log that `nmem doctor` reads, and the
    events wait in the spool for a database that works."""
    home = tmp_path / "home"
    broken_db = tmp_path / "db-is-a-directory"
    broken_db.mkdir()
    for payload in (bash_event("ls"), event("UserPromptSubmit", prompt="hello"),
                    event("SessionStart", source="startup"), event("Stop", last_assistant_message="bye")):
        done = hook(home, payload, NMEM_DB=str(broken_db))
        assert (done.returncode, done.stdout) == (4, ""), (done.returncode, done.stderr)
        assert done.stderr.startswith(f"nmem: cannot read database {broken_db}: Is a directory")
        assert done.stderr.endswith("; the event is kept in the spool\n") and done.stderr.count("\n") == 1
    lines = (home / "logs" / "nmem.log").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(" ERROR cannot read database " in line for line in lines), lines
    assert all(str(broken_db) in line for line in lines)
    assert len(spooled(home)) == 4
    hook_ok(home, bash_event("echo fixed"))
    assert [o["content"] for o in observations(home)] == ["ls", "session_start (startup)", "echo fixed"]
    assert [p["content"] for p in query(home, "SELECT content FROM prompts")] == ["hello", "bye"]


def test_bad_config_file_is_reported_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[context\nformat = ", encoding="utf-8")
    done = hook(home, bash_event("ls"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "config.toml" in done.stderr


# -- switches and exclusions --------------------------------------------------------------------


def test_memory_disabled_stores_nothing_and_prints_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "old", CWD, prompt="refactor the invoice totals"))
    hook_ok(home, bash_event("pytest -q", "old"))
    before = counts(home)
    for payload in (event("SessionStart", "s-off", CWD, source="startup"),
                    event("UserPromptSubmit", "s-off", CWD, prompt="[decision] never store this"),
                    bash_event("make deploy", "s-off"), event("Stop", "s-off", CWD, last_assistant_message="ok"),
                    event("SessionEnd", "s-off", CWD, reason="other")):
        done = hook(home, payload, NMEM_ENABLED="0")
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert counts(home) == before


def test_memory_disabled_in_config_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[memory]\nenabled = false\n", encoding="utf-8")
    done = hook(home, event("SessionStart", source="startup"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert counts(home)["observations"] == 0


def test_per_project_opt_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[projects."billing-api"]\nmemory = false\n', encoding="utf-8")
    hook_ok(home, bash_event("npm run build", "s-ledger", OTHER_CWD))
    for payload in (event("SessionStart", "s-bill", CWD, source="startup"),
                    event("UserPromptSubmit", "s-bill", CWD, prompt="[decision] this project is private"),
                    bash_event("cat .env", "s-bill"), read_event("s-bill"),
                    event("PreCompact", "s-bill", CWD, trigger="auto"),
                    event("Stop", "s-bill", CWD, last_assistant_message="done")):
        done = hook(home, payload)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == "", "an opted-out project gets no context either"
    assert {o["project"] for o in observations(home)} == {"ledger-ui"}
    assert query(home, "SELECT COUNT(*) AS n FROM prompts")[0]["n"] == 0
    assert counts(home)["memories"] == 0
    assert [s["id"] for s in query(home, "SELECT id FROM sessions")] == ["s-ledger"]


def test_excluded_project_globs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[capture]\nexclude_projects = ["secret-*", "/home/dev/clients/*"]\n',
                                      encoding="utf-8")
    hook_ok(home, bash_event("ls", "a", "/home/dev/code/secret-payroll"))
    hook_ok(home, bash_event("ls", "b", "/home/dev/clients/acme"))
    hook_ok(home, bash_event("ls", "c", CWD))
    assert [o["project"] for o in observations(home)] == ["billing-api"]


def test_excluded_tools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[capture]\nexclude_tools = ["mcp__vault__*", "TodoWrite"]\n',
                                      encoding="utf-8")
    hook_ok(home, event("PostToolUse", tool_name="mcp__vault__read_secret", tool_input={"path": "kv/prod"},
                        tool_response="s3cr3t"))
    hook_ok(home, event("PostToolUseFailure", tool_name="mcp__vault__write", tool_input={"path": "kv/x"},
                        error="denied"))
    hook_ok(home, event("PostToolUse", tool_name="TodoWrite", tool_input={"todos": []}, tool_response={}))
    hook_ok(home, event("PostToolUse", tool_name="mcp__github__list_issues", tool_input={"repo": "a/b"},
                        tool_response=[]))
    assert [o["tool_name"] for o in observations(home)] == ["mcp__github__list_issues"]
    exclude_env = hook(home, bash_event("echo hi"), NMEM_EXCLUDE_TOOLS="Bash,Read")
    assert exclude_env.returncode == 0
    assert [o["tool_name"] for o in observations(home)] == ["mcp__github__list_issues"]


# -- SessionStart output ------------------------------------------------------------------------


def seed_history(home: Path) -> None:
    hook_ok(home, event("UserPromptSubmit", "hist", CWD, prompt="make invoice totals round half up"))
    hook_ok(home, read_event("hist", f"{CWD}/src/billing/invoice.py"))
    hook_ok(home, bash_event("pytest tests/test_invoice.py", "hist"))
    hook_ok(home, event("Stop", "hist", CWD, last_assistant_message="Done."))


def test_session_start_prints_the_fenced_context_block(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed_history(home)
    out = hook_ok(home, event("SessionStart", "next", CWD, source="startup"))
    block = out.strip()
    assert block.startswith("<nmem-context>") and block.endswith("</nmem-context>")
    assert "not instructions" in block
    assert "make invoice totals round half up" in block
    assert "Read: src/billing/invoice.py" in block, "relative to the project root"
    assert len(out) < 10_000
    types = [o["obs_type"] for o in observations(home, "session_id = ?", "next")]
    assert types == ["session_start"], "SessionStart also stores its event"


def test_session_start_json_output(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed_history(home)
    out = hook_ok(home, event("SessionStart", "next", CWD, source="resume"), NMEM_CONTEXT_FORMAT="json")
    doc = json.loads(out)
    assert set(doc) == {"hookSpecificOutput"}
    specific = doc["hookSpecificOutput"]
    assert specific["hookEventName"] == "SessionStart"
    assert specific["additionalContext"].startswith("<nmem-context>")
    assert specific["additionalContext"].rstrip().endswith("</nmem-context>")
    assert len(specific["additionalContext"]) < 10_000
    assert observations(home, "session_id = ?", "next")[0]["obs_type"] == "session_resume"


def test_other_events_print_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed_history(home)
    for payload in (read_event("quiet"), bash_event("ls", "quiet"),
                    event("UserPromptSubmit", "quiet", CWD, prompt="what does this do?"),
                    event("PreCompact", "quiet", CWD, trigger="manual", custom_instructions=None),
                    event("Stop", "quiet", CWD, last_assistant_message="It parses invoices."),
                    event("SessionEnd", "quiet", CWD, reason="prompt_input_exit")):
        assert hook_ok(home, payload) == ""


def test_prompt_marker_acknowledgement_is_valid_hook_output(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = hook_ok(home, event("UserPromptSubmit", prompt="[decision] money is Decimal, never float"),
                  NMEM_CONTEXT_FORMAT="json")
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["hookEventName"] == "UserPromptSubmit"
    assert "decisions" in specific["additionalContext"]
    assert counts(home)["memories"] == 1


def test_output_file_option(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed_history(home)
    target = tmp_path / "ctx.txt"
    done = hook(home, event("SessionStart", "next", CWD, source="startup"), args=("record", "--output", str(target)))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert target.read_text(encoding="utf-8").startswith("<nmem-context>")


# -- busy database and the spool ----------------------------------------------------------------


def lock_writer(home: Path) -> sqlite3.Connection:
    """Hold the database's write lock the way another writer would."""
    conn = sqlite3.connect(db_path(home), isolation_level=None, timeout=5)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def spooled(home: Path) -> list[Path]:
    spool = home / "spool"
    return sorted(spool.glob("*")) if spool.exists() else []


def test_busy_database_spools_the_event_and_the_next_run_ingests_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, bash_event("echo first", "busy"))
    conn = lock_writer(home)
    try:
        done = hook(home, bash_event("echo while locked", "busy"), NMEM_BUSY_BUDGET_MS="200")
        assert (done.returncode, done.stdout) == (0, "")
        assert "Traceback" not in done.stderr
        files = spooled(home)
        assert len(files) == 1 and files[0].suffix == ".json"
        assert "echo while locked" in files[0].read_text(encoding="utf-8")
    finally:
        conn.rollback()
        conn.close()
    hook_ok(home, bash_event("echo after unlock", "busy"))
    contents = sorted(o["content"] for o in observations(home))
    assert contents == ["echo after unlock", "echo first", "echo while locked"]
    assert spooled(home) == []


def test_spooled_event_keeps_the_time_it_was_received(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, bash_event("echo first", "busy"))
    conn = lock_writer(home)
    try:
        assert hook(home, bash_event("echo locked", "busy"), NMEM_BUSY_BUDGET_MS="100").returncode == 0
        payload = json.loads(spooled(home)[0].read_text(encoding="utf-8"))
    finally:
        conn.rollback()
        conn.close()
    hook_ok(home, bash_event("echo later", "busy"))
    by_content = {o["content"]: o for o in observations(home)}
    assert by_content["echo locked"]["timestamp"] == payload["_nmem_received_at"]
    assert by_content["echo locked"]["timestamp"] <= by_content["echo later"]["timestamp"]


def test_busy_session_start_spools_and_still_exits_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed_history(home)
    conn = lock_writer(home)
    try:
        done = hook(home, event("SessionStart", "busy-start", CWD, source="startup"), NMEM_BUSY_BUDGET_MS="150")
        assert done.returncode == 0 and "Traceback" not in done.stderr
        assert len(spooled(home)) == 1
    finally:
        conn.rollback()
        conn.close()
    hook_ok(home, bash_event("ls", "busy-start"))
    assert [o["obs_type"] for o in observations(home, "session_id = ?", "busy-start")] == [
        "session_start", "command"], "the spooled SessionStart is stored before the event that drained it"


def test_busy_session_start_still_prints_context(tmp_path: Path) -> None:
    """Readers never block writers in WAL mode: a held write lock need not cost the new session its context."""
    home = tmp_path / "home"
    seed_history(home)
    conn = lock_writer(home)
    try:
        done = hook(home, event("SessionStart", "busy-ctx", CWD, source="startup"), NMEM_BUSY_BUDGET_MS="150")
    finally:
        conn.rollback()
        conn.close()
    assert done.returncode == 0
    assert "<nmem-context>" in done.stdout and "make invoice totals round half up" in done.stdout


def test_spooled_prompt_is_linked_before_later_tool_calls(tmp_path: Path) -> None:
    """Events ingested from the spool are older than the event that drains them."""
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "link", CWD, prompt="first request"))
    conn = lock_writer(home)
    try:
        done = hook(home, event("UserPromptSubmit", "link", CWD, prompt="second request"), NMEM_BUSY_BUDGET_MS="150")
        assert done.returncode == 0 and len(spooled(home)) == 1
    finally:
        conn.rollback()
        conn.close()
    hook_ok(home, bash_event("make second", "link"))
    prompts = {p["content"]: p["id"] for p in query(home, "SELECT id, content FROM prompts")}
    (obs,) = observations(home)
    assert obs["prompt_id"] == prompts["second request"], (
        "the tool call came after the spooled prompt, so it belongs to it")


def test_unreadable_spool_file_is_set_aside_not_fatal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, bash_event("echo one"))
    (home / "spool").mkdir(mode=0o700)
    (home / "spool" / "100-1.json").write_text("{broken", encoding="utf-8")
    (home / "spool" / "101-1.json").write_text(json.dumps({"cwd": CWD}), encoding="utf-8")
    hook_ok(home, bash_event("echo two"))
    assert sorted(o["content"] for o in observations(home)) == ["echo one", "echo two"]
    assert sorted(p.name for p in spooled(home)) == ["100-1.bad", "101-1.bad"]


# -- projects, sessions and markers -------------------------------------------------------------


def test_project_is_the_git_top_level_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = tmp_path / "code" / "payments-svc"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "api").mkdir(parents=True)
    worktree = tmp_path / "code" / "payments-wt"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: ../payments-svc/.git/worktrees/wt\n", encoding="utf-8")
    hook_ok(home, bash_event("ls", "g1", str(repo / "src" / "api")))
    hook_ok(home, bash_event("ls", "g2", str(worktree)))
    hook_ok(home, bash_event("ls", "g3", str(tmp_path / "scratch")))
    projects = {o["session_id"]: o["project"] for o in observations(home)}
    assert projects == {"g1": "payments-svc", "g2": "payments-wt", "g3": "scratch"}


def test_project_override(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, bash_event("ls", "o1", CWD), NMEM_PROJECT="billing")
    assert observations(home)[0]["project"] == "billing"


def test_events_keep_their_sessions_project_after_a_cd(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("SessionStart", "cd", CWD, source="startup"))
    hook_ok(home, bash_event("ls", "cd", f"{CWD}/src/billing"))
    hook_ok(home, bash_event("ls ../ledger-ui", "cd", OTHER_CWD))
    hook_ok(home, event("PostToolUse", "cd", OTHER_CWD, tool_name="Read", agent_id="agent-1", agent_type="Explore",
                        tool_input={"file_path": "README.md"}))
    rows = observations(home)
    assert {o["project"] for o in rows} == {"billing-api"}
    assert rows[-1]["file_path"] == f"{OTHER_CWD}/README.md", "paths still resolve against the event's cwd"
    assert rows[-1]["metadata"]["agent_id"] == "agent-1"


@pytest.mark.parametrize("source,obs_type", [("startup", "session_start"), ("resume", "session_resume"),
                                             ("fork", "session_resume"), ("compact", "session_compact"),
                                             ("clear", "session_clear"), (None, "session_start")])
def test_session_start_sources(tmp_path: Path, source: str | None, obs_type: str) -> None:
    home = tmp_path / "home"
    payload = event("SessionStart", "src", CWD)
    if source:
        payload["source"] = source
    hook_ok(home, payload)
    assert [o["obs_type"] for o in observations(home)] == [obs_type]


def test_configured_markers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    markers = "[adr]=decisions,note:=learnings"
    hook_ok(home, event("UserPromptSubmit", "m", CWD, prompt="[adr] events are append-only\nnote: fsync is slow here"),
            NMEM_MARKERS=markers)
    hook_ok(home, event("UserPromptSubmit", "m", CWD, prompt="[decision] not a marker any more"), NMEM_MARKERS=markers)
    rows = query(home, "SELECT namespace, content FROM memories ORDER BY namespace")
    assert rows == [{"namespace": "decisions", "content": "events are append-only"},
                    {"namespace": "learnings", "content": "fsync is slow here"}]


def test_default_remember_prefix(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "m", CWD, prompt="ok. remember: staging resets every night at 02:00"))
    assert query(home, "SELECT namespace, content FROM memories") == [
        {"namespace": "context", "content": "staging resets every night at 02:00"}]


def test_a_marker_memory_ends_at_its_sentence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    prompt = ("[gotcha] the cache key ignores the locale. Now fix the failing tests please.\n"
              "Why is it slow? The importer re-reads config.py on every row [decision]. Look at it.\n"
              "remember: pip install -e . breaks the hook path. Then run the suite")
    hook_ok(home, event("UserPromptSubmit", "m", CWD, prompt=prompt))
    assert query(home, "SELECT namespace, content FROM memories ORDER BY namespace") == [
        {"namespace": "context", "content": "pip install -e . breaks the hook path."},
        {"namespace": "decisions", "content": "The importer re-reads config.py on every row."},
        {"namespace": "gotchas", "content": "the cache key ignores the locale."}]


def test_input_file_option(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = tmp_path / "event.json"
    source.write_text(json.dumps(bash_event("make lint", "f")), encoding="utf-8")
    done = hook(home, "", args=("hook", "post-tool-use", "--input", str(source)))
    assert (done.returncode, done.stderr) == (0, "")
    assert [o["content"] for o in observations(home)] == ["make lint"]


# -- the WAL does not outlive a hook ----------------------------------------------------------


def test_a_hook_process_leaves_no_wal_behind(tmp_path: Path) -> None:
    """Each hook is the only connection while it runs: unless it closes the database, the next
    hook must recover the whole WAL (reading all of it) and the WAL is never reset, so every
    hook would get slower as the WAL grew."""
    home = tmp_path / "home"
    for i in range(3):
        hook_ok(home, bash_event(f"pytest -q -k case_{i}", "wal-1"))
        wal = home / "nmem.db-wal"
        assert not wal.exists() or wal.stat().st_size == 0, f"hook {i} left {wal.stat().st_size} bytes of WAL"
    assert counts(home)["observations"] == 3


# -- opt-in: memories about a file when the agent first touches it -------------------------------


def test_first_touch_of_a_file_surfaces_its_memories_when_enabled(tmp_path: Path) -> None:
    home = tmp_path / "home"
    on = {"NMEM_FILE_MEMORIES": "1"}
    hook_ok(home, event("UserPromptSubmit", "fm-0", CWD,
                        prompt="[gotcha] invoice.py rounds half-even; never use float for totals"))
    hook_ok(home, event("UserPromptSubmit", "fm-other", "/home/dev/code/other-repo",
                        prompt="[gotcha] invoice.py in other-repo is generated, do not edit"))
    out = hook_ok(home, read_event("fm-1", f"{CWD}/src/billing/invoice.py"), **on)
    context = json.loads(out)["hookSpecificOutput"]
    assert context["hookEventName"] == "PostToolUse"
    assert "rounds half-even" in context["additionalContext"]
    assert "generated" not in context["additionalContext"], "another project's memory leaked in"
    assert context["additionalContext"].startswith("<nmem-context>")
    # Once per file per session: a second read, or an edit, of the same file says nothing more.
    assert hook_ok(home, read_event("fm-1", f"{CWD}/src/billing/invoice.py"), **on) == ""
    edit = event("PostToolUse", "fm-1", CWD, tool_name="Edit",
                 tool_input={"file_path": f"{CWD}/src/billing/invoice.py", "old_string": "a", "new_string": "b"})
    assert hook_ok(home, edit, **on) == ""
    # A file no memory names, and the same file in a new session without the setting: nothing.
    assert hook_ok(home, read_event("fm-1", f"{CWD}/src/billing/ledger.py"), **on) == ""
    assert hook_ok(home, read_event("fm-2", f"{CWD}/src/billing/invoice.py")) == ""
    # ...and with it, the new session hears it again.
    assert "rounds half-even" in hook_ok(home, read_event("fm-3", f"{CWD}/src/billing/invoice.py"), **on)
