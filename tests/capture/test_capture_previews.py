"""Previews and records say what happened (issue 11), through `nmem record` processes and search.

Each event is one real hook process with Claude Code's JSON on stdin; what it stored is read
back through the service's search, file history and session summary, and the CLI's table.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import db_path, event, hook_ok, observations, raw_bytes
from nmem.config import load_settings
from nmem.service.api import Service
from test_cli_support import ok

CWD = "/home/dev/code/billing-api"
INVOICE = f"{CWD}/src/billing/invoice.py"
SESSION = "prev-1"


@pytest.fixture
def home(nmem_home: Path) -> Path:
    """The data dir the hook processes write and the in-process CLI and service read."""
    return nmem_home


@pytest.fixture
def read_back(home: Path) -> Iterator[Any]:
    opened: list[Service] = []

    def service() -> Service:
        svc = Service.open(load_settings({"NMEM_HOME": str(home)}))
        opened.append(svc)
        return svc

    yield service
    for svc in opened:
        svc.close()


def tool_event(name: str, tool_input: dict[str, Any], response: Any = None, *, failure: str | None = None,
               session: str = SESSION) -> dict[str, Any]:
    if failure is not None:
        return event("PostToolUseFailure", session, CWD, tool_name=name, tool_input=tool_input,
                     tool_use_id="toolu_1", error=failure, is_interrupt=False)
    return event("PostToolUse", session, CWD, tool_name=name, tool_input=tool_input, tool_use_id="toolu_1",
                 tool_response=response)


def previews(service: Service, query: str) -> list[str]:
    return [h.to_dict()["content_preview"] for h in service.search(query).hits]


# -- failed commands -------------------------------------------------------------------------------

PYTEST_FAILURE = ("Exit code 1\n" + "\n".join(f"tests/test_auth.py::test_case_{i} PASSED" for i in range(60))
                  + "\n=================================== FAILURES ===================================\n"
                  "E       KeyError: 'org_id'\n"
                  "=========================== short test summary info ============================\n"
                  "FAILED tests/test_auth.py::test_login_org_account - KeyError: 'org_id'\n"
                  "========================= 1 failed, 60 passed in 1.92s =========================\n")
CARGO_FAILURE = ("Exit code 101\n   Compiling invoice v0.1.0 (/home/dev/code/invoice)\nerror[E0308]: mismatched types\n"
                 " --> src/main.rs:4:18\n  |\n4 |     let total: i32 = \"10\";\n  |                ---   ^^^^\n"
                 "error: could not compile `invoice` (bin \"invoice\") due to 1 previous error\n")


def test_a_failed_command_previews_its_key_line(home: Path, read_back: Any) -> None:
    hook_ok(home, tool_event("Bash", {"command": "pytest -q tests/test_auth.py"}, failure=PYTEST_FAILURE))
    hook_ok(home, tool_event("Bash", {"command": "cargo build"}, failure=CARGO_FAILURE))
    hook_ok(home, tool_event("Bash", {"command": "pnpm install"},
                             failure="Exit code 127\nbash: line 1: pnpm: command not found"))
    service = read_back()
    assert previews(service, "org_id") == [
        "pytest -q tests/test_auth.py → ✗ 1 failed, 60 passed in 1.92s · FAILED "
        "tests/test_auth.py::test_login_org_account…"]
    assert previews(service, "mismatched") == ["cargo build → ✗ error[E0308]: mismatched types at src/main.rs:4:18"]
    assert previews(service, "pnpm") == ["pnpm install → ✗ bash: line 1: pnpm: command not found"]
    (row,) = observations(home, "content LIKE 'cargo build%'")
    assert row["metadata"]["error_line"] == "error[E0308]: mismatched types at src/main.rs:4:18"
    assert row["metadata"]["exit_code"] == 101
    table = ok("search", "mismatched").stdout
    assert "cargo build → ✗ error[E0308]: mismatched types" in table


def test_rows_stored_before_key_lines_preview_well(home: Path, read_back: Any) -> None:
    """An old row holds `command\\n<tail>` and its error tail, no `error_line`: the preview finds it."""
    hook_ok(home, tool_event("Bash", {"command": "ls"}, {"stdout": "", "stderr": "", "interrupted": False}))
    tail = ("…t_case_58 PASSED\ntests/test_auth.py::test_case_59 PASSED\nFAILED tests/test_auth.py::test_login_org_"
            "account - KeyError: 'org_id'\n1 failed, 60 passed in 1.92s")
    conn = sqlite3.connect(db_path(home))
    with conn:
        conn.execute("INSERT INTO observations (session_id, project, timestamp, obs_type, source_event, tool_name, "
                     "content, metadata) VALUES (?, 'billing-api', 1, 'command_error', 'PostToolUseFailure', 'Bash', "
                     "?, ?)", (SESSION, f"pytest -q\n{tail}", json.dumps({"exit_code": 1, "error": tail})))
    conn.close()
    assert previews(read_back(), "org_id") == [
        "pytest -q → ✗ 1 failed, 60 passed in 1.92s · FAILED tests/test_auth.py::test_login_org_account - KeyError: "
        "'org_id'"]


# -- failed or denied file tools ---------------------------------------------------------------------

DENIAL = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
          "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell "
          "you how to proceed.")
NOT_READ = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"


def file_session(home: Path) -> None:
    hook_ok(home, event("UserPromptSubmit", SESSION, CWD, prompt="round invoice totals half up"))
    hook_ok(home, tool_event("Edit", {"file_path": INVOICE, "old_string": "round(t)", "new_string": "q(t)"},
                             failure="String to replace not found in file.\nString: round(t)"))
    hook_ok(home, tool_event("Write", {"file_path": INVOICE, "content": "x = 1\n"}, failure=DENIAL))
    hook_ok(home, tool_event("Edit", {"file_path": INVOICE, "old_string": "a", "new_string": "b"}, NOT_READ))
    hook_ok(home, tool_event("Read", {"file_path": f"{CWD}/src/billing/gone.py"}, failure="File does not exist."))
    hook_ok(home, tool_event("Edit", {"file_path": f"{CWD}/src/billing/money.py", "old_string": "a",
                                      "new_string": "b"},
                             {"filePath": f"{CWD}/src/billing/money.py", "oldString": "a", "newString": "b",
                              "structuredPatch": [], "userModified": False, "replaceAll": False}))
    hook_ok(home, event("Stop", SESSION, CWD, last_assistant_message="Done.", stop_hook_active=False))


def test_failed_and_denied_file_tools_are_file_errors_never_changes(home: Path, read_back: Any) -> None:
    file_session(home)
    rows = [(r["obs_type"], r["file_path"], r["metadata"].get("tool"), r["metadata"].get("denied"))
            for r in observations(home, "file_path IS NOT NULL")]
    assert rows == [("file_error", INVOICE, "Edit", None), ("file_error", INVOICE, "Write", True),
                    ("file_error", INVOICE, "Edit", None), ("file_error", f"{CWD}/src/billing/gone.py", "Read", None),
                    ("file_edit", f"{CWD}/src/billing/money.py", None, None)]
    service = read_back()
    session = service.store.get_session(SESSION)
    assert session is not None and isinstance(session.summary, dict)
    assert session.summary["files_changed"] == [f"{CWD}/src/billing/money.py"]
    assert session.signature is not None and session.signature["events"]["file_error"] == 4
    history = service.file_history(INVOICE)
    touches = history["sessions"][0]["touches"]
    assert [t["obs_type"] for t in touches] == ["file_error"] * 3
    assert [t["content_preview"] for t in touches] == [   # relative to the project root
        "Edit src/billing/invoice.py → ✗ File has not been read yet. Read it first before writing to it.",
        "Write src/billing/invoice.py → ✗ denied by the user",
        "Edit src/billing/invoice.py → ✗ String to replace not found in file."]
    assert previews(service, "replace not found") == [f"Edit {INVOICE} → ✗ String to replace not found in file."]
    hits = service.search(None, obs_type="file_error").hits
    assert {h.record.id for h in hits} == {r["id"] for r in observations(home, "obs_type = 'file_error'")}
    table = ok("file-history", INVOICE).stdout
    assert "Write src/billing/invoice.py → ✗ denied by the user" in table
    assert "✗ String to replace not found" in table
    recent = service.recent_context(limit=10)
    assert [r["obs_type"] for r in recent if r["file_path"] == INVOICE] == ["file_error"]


def test_a_failed_touch_does_not_use_up_the_first_touch_memories(home: Path) -> None:
    on = {"NMEM_FILE_MEMORIES": "1"}
    hook_ok(home, event("UserPromptSubmit", "mem-0", CWD, prompt="[gotcha] invoice.py rounds half-even"))
    failed = tool_event("Edit", {"file_path": INVOICE, "old_string": "a", "new_string": "b"}, NOT_READ, session="mem-1")
    assert hook_ok(home, failed, **on) == "", "a failed edit touched nothing: no memories for it"
    read = tool_event("Read", {"file_path": INVOICE},
                      {"type": "text", "file": {"filePath": INVOICE, "content": "x", "numLines": 1, "startLine": 1,
                                                "totalLines": 1}}, session="mem-1")
    assert "rounds half-even" in hook_ok(home, read, **on), "the first real touch still hears the memory"


# -- search counts -----------------------------------------------------------------------------------


def test_search_results_show_their_match_counts(home: Path, read_back: Any) -> None:
    hook_ok(home, tool_event("Grep", {"pattern": "TODO", "path": "src"},
                             {"mode": "files_with_matches", "numFiles": 12,
                              "filenames": [f"f{i}.py" for i in range(12)]}))
    hook_ok(home, tool_event("Grep", {"pattern": "FIXME", "path": "src"},
                             {"mode": "files_with_matches", "numFiles": 0, "filenames": []}))
    hook_ok(home, tool_event("Glob", {"pattern": "**/*.sql"},
                             {"durationMs": 4, "numFiles": 3, "filenames": ["a.sql", "b.sql", "c.sql"],
                              "truncated": False}))
    service = read_back()
    assert previews(service, "TODO") == [f'"TODO" in {CWD}/src → 12 files']
    assert previews(service, "FIXME") == [f'"FIXME" in {CWD}/src → 0 files']
    assert previews(service, "sql") == ['"**/*.sql" → 3 files']


# -- answers of subagents, MCP tools and fetched pages --------------------------------------------------

TOKEN = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba"


def test_answers_are_kept_short_redacted_and_findable(home: Path, read_back: Any) -> None:
    agent_answer = ("Login fails for org accounts because the SSO callback drops the org_id claim; get_user() "
                    f"then raises KeyError. Reproduced with token {TOKEN}. " + "Details of the trace. " * 60)
    hook_ok(home, tool_event("Agent", {"description": "Investigate org login", "prompt": "Why do org logins fail?",
                                       "subagent_type": "general-purpose"},
                             {"status": "completed", "agentId": "a1",
                              "content": [{"type": "text", "text": agent_answer}],
                              "totalDurationMs": 30500, "totalTokens": 8000, "totalToolUseCount": 9, "usage": {}}))
    hook_ok(home, tool_event("mcp__linear__get_issue", {"id": "ENG-812"},
                             [{"type": "text", "text": "ENG-812 Login fails for org accounts (In Progress, @dana)"}]))
    hook_ok(home, tool_event("WebFetch", {"url": "https://status.example.com/incidents/42", "prompt": "what broke?"},
                             {"bytes": 52000, "code": 200, "codeText": "OK", "durationMs": 700,
                              "url": "https://status.example.com/incidents/42",
                              "result": "Incident 42: Login fails for org accounts after the SSO certificate "
                                        "rotation."}))
    service = read_back()
    found = {h.record.obs_type: h.to_dict()["content_preview"]
             for h in service.search('"Login fails for org accounts"').hits}
    assert set(found) == {"task_spawn", "mcp_call", "web_fetch"}
    assert found["task_spawn"].startswith("Investigate org login → Login fails for org accounts because the SSO")
    assert found["mcp_call"] == 'linear.get_issue {"id": "ENG-812"} → ENG-812 Login fails for org accounts ' \
                                "(In Progress, @dana)"
    assert found["web_fetch"].startswith("https://status.example.com/incidents/42 → Incident 42: Login fails")
    (task,) = observations(home, "obs_type = 'task_spawn'")
    assert "[REDACTED:github-token]" in task["content"]
    assert TOKEN.encode() not in raw_bytes(home), "the secret in the subagent's answer reached the disk"
    assert len(task["content"]) < 1200, "the whole answer was stored"


# -- word boundaries ---------------------------------------------------------------------------------


def test_previews_are_cut_at_word_boundaries(home: Path, read_back: Any) -> None:
    command = "python scripts/backfill_invoices.py " + " ".join(f"--account acct-{i:04d}" for i in range(30))
    hook_ok(home, tool_event("Bash", {"command": command}, {"stdout": "", "stderr": "", "interrupted": False}))
    (preview,) = previews(read_back(), "backfill_invoices")
    assert preview.endswith("…") and len(preview) <= 120
    assert command.startswith(preview[:-1]) and command[len(preview) - 1] == " ", f"cut mid-word: {preview!r}"
    (row,) = ok("search", "backfill_invoices").stdout.splitlines()[1:]
    cell = row[row.index("python scripts/"):].rstrip()
    assert cell.endswith("…") and len(cell) <= 80
    assert command.startswith(cell[:-1]) and command[len(cell) - 1] == " ", f"table cell cut mid-word: {cell!r}"


# -- transcripts imported later say the same -----------------------------------------------------------


def test_an_imported_refusal_is_a_denied_file_error(tmp_path: Path, service: Service) -> None:
    from nmem.portable.sources.transcripts import import_transcripts

    def line(kind: str, at: str, content: Any, **extra: Any) -> str:
        return json.dumps({"type": kind, "sessionId": "imp-deny", "cwd": CWD, "timestamp": f"2026-11-02T09:00:{at}Z",
                           "uuid": f"u{at}", "message": {"role": kind, "content": content}, **extra})

    transcript = tmp_path / "imp-deny.jsonl"
    transcript.write_text("\n".join([
        line("user", "01", "round the invoice totals"),
        line("assistant", "02", [{"type": "tool_use", "id": "toolu_e", "name": "Edit",
                                  "input": {"file_path": INVOICE, "old_string": "a", "new_string": "b"}}]),
        line("user", "03", [{"type": "tool_result", "tool_use_id": "toolu_e", "is_error": True,
                             "content": DENIAL}], toolUseResult="User rejected tool use"),
    ]) + "\n", encoding="utf-8")
    import_transcripts(service, [transcript])
    (row,) = [h.record for h in service.search(None, obs_type="file_error").hits]
    assert row.file_path == INVOICE and isinstance(row.metadata, dict)
    assert {k: row.metadata[k] for k in ("tool", "error", "error_line", "denied")} == {
        "tool": "Edit", "error": "User rejected tool use", "error_line": "denied by the user", "denied": True}
