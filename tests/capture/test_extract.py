"""One extractor per tool: the fact worth keeping from each tool call, stored in a real database.

Payload shapes follow Claude Code's PostToolUse / PostToolUseFailure `tool_input` and
`tool_response` (see the hooks reference). Events go through the adapter (`parse`) and
`Service.record_event`, the code `nmem record` runs, with a controlled clock.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import hook_payload
from fixtures.harness import raw_bytes
from nmem.capture.claude_code import parse
from nmem.capture.extract import head, tail
from nmem.config import Settings, load_settings
from nmem.models import Observation
from nmem.service.api import Service

T0 = 1_790_000_000
CWD = "/home/dev/code/billing-api"


def tool(service: Service, name: str, tool_input: dict[str, Any], tool_response: Any = None, *,
         event: str = "PostToolUse", at: int = T0, session: str = "s-1", cwd: str = CWD,
         **extra: Any) -> Observation | None:
    """Record one tool call; the observation it stored, or None when it stored nothing."""
    payload = hook_payload(event, session_id=session, cwd=cwd, tool_name=name, tool_input=tool_input,
                           tool_use_id="toolu_01", **extra)
    if tool_response is not None:
        payload["tool_response"] = tool_response
    outcome = service.record_event(parse(payload, now=at))
    if outcome.stored != "observation" or outcome.observation_id is None:
        return None
    (obs,) = service.get_observations([outcome.observation_id])
    return obs


def stored(service: Service) -> list[Observation]:
    rows = service.store._reader().execute("SELECT id FROM observations ORDER BY id").fetchall()  # type: ignore[attr-defined]
    return service.get_observations([r[0] for r in rows]) if rows else []


def meta(obs: Observation | None) -> dict[str, Any]:
    assert obs is not None
    return obs.metadata if isinstance(obs.metadata, dict) else {}


def db_bytes(settings: Settings) -> bytes:
    return raw_bytes(Path(settings.db_path), Path(settings.db_path + "-wal"))


BASH_OK = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}


# -- Bash ---------------------------------------------------------------------------------------


def test_bash_command(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "ls -la src/billing", "description": "List billing sources",
                                 "timeout": 120000},
               {**BASH_OK, "stdout": "invoice.py\nexport_csv.py\n"})
    assert obs is not None
    assert (obs.obs_type, obs.content, obs.tool_name, obs.file_path) == ("command", "ls -la src/billing", "Bash", None)
    assert meta(obs)["description"] == "List billing sources"
    assert "invoice.py" not in obs.content, "command output is not the fact; the command is"


def test_bash_failure_from_post_tool_use_failure(service: Service) -> None:
    noise = "\n".join(f"tests/test_invoice.py::test_case_{i} PASSED" for i in range(200))
    error = (f"Exit code 1\n{noise}\nFAILED tests/test_invoice.py::test_total_rounds_half_up - "
             "AssertionError: assert Decimal('10.00') == Decimal('10.01')\n1 failed, 200 passed in 0.42s")
    obs = tool(service, "Bash", {"command": "pytest tests/test_invoice.py -q"}, event="PostToolUseFailure",
               error=error, is_interrupt=False, duration_ms=4187)
    assert obs is not None and obs.obs_type == "command_error"
    m = meta(obs)
    assert m["exit_code"] == 1
    assert m["error"].endswith("1 failed, 200 passed in 0.42s"), "the tail of the output is kept"
    assert "AssertionError: assert Decimal('10.00') == Decimal('10.01')" in m["error"]
    assert "Exit code 1" not in m["error"]
    assert len(m["error"]) <= 801, "long output is cut to its tail"
    assert "test_case_0 PASSED" not in m["error"]
    assert obs.content.startswith("pytest tests/test_invoice.py -q")
    assert "1 failed, 200 passed" in obs.content


@pytest.mark.parametrize("error,code", [("Exit code 2\nusage: make [target]", 2),
                                        ("Error: Exit code 127\nbash: foo: command not found", 127),
                                        ("Exit code 137", 137)])
def test_bash_failure_exit_codes(service: Service, error: str, code: int) -> None:
    obs = tool(service, "Bash", {"command": "foo --bar"}, event="PostToolUseFailure", error=error)
    assert obs is not None and obs.obs_type == "command_error"
    assert meta(obs)["exit_code"] == code


def test_bash_interrupted_failure(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "sleep 999"}, event="PostToolUseFailure",
               error="Command was interrupted", is_interrupt=True)
    assert obs is not None and obs.obs_type == "command_error"
    assert "interrupted" in meta(obs)["error"]


def test_long_command_is_truncated(service: Service) -> None:
    command = "python -c '" + "x = 1; " * 3000 + "'"
    obs = tool(service, "Bash", {"command": command}, BASH_OK)
    assert obs is not None and obs.obs_type == "command"
    assert len(obs.content) <= 2001 and obs.content.startswith("python -c 'x = 1;")


@pytest.mark.parametrize("command,stdout,branch,sha,message", [
    ('git commit -m "fix: round invoice totals half up"',
     "[main 3f2a1b9] fix: round invoice totals half up\n 1 file changed, 2 insertions(+), 1 deletion(-)\n",
     "main", "3f2a1b9", "fix: round invoice totals half up"),
    ("git add -A && git commit -m 'feat: csv export'",
     "[feat/csv-export 7e6d5c4] feat: csv export\n 2 files changed, 80 insertions(+)\n",
     "feat/csv-export", "7e6d5c4", "feat: csv export"),
    ("git -C /home/dev/code/billing-api commit -am init",
     "[main (root-commit) 0a1b2c3] init\n 5 files changed\n", "main", "0a1b2c3", "init"),
], ids=["simple", "chained-branch-with-slash", "root-commit"])
def test_git_commit(service: Service, command: str, stdout: str, branch: str, sha: str, message: str) -> None:
    obs = tool(service, "Bash", {"command": command}, {**BASH_OK, "stdout": stdout})
    assert obs is not None and obs.obs_type == "git_commit"
    m = meta(obs)
    assert (m["branch"], m["sha"], m["message"]) == (branch, sha, message)
    assert obs.content == f"{sha} {message}"


def test_git_push(service: Service) -> None:
    stderr = ("To github.com:acme/billing-api.git\n   9c8d7e6..3f2a1b9  main -> main\n")
    obs = tool(service, "Bash", {"command": "git push origin main"}, {**BASH_OK, "stderr": stderr})
    assert obs is not None and obs.obs_type == "git_push"
    m = meta(obs)
    assert (m["old"], m["sha"], m["branch"]) == ("9c8d7e6", "3f2a1b9", "main")
    assert obs.content == "git push origin main"


def test_git_push_new_branch(service: Service) -> None:
    stderr = "To github.com:acme/billing-api.git\n * [new branch]      feat/csv -> feat/csv\n"
    obs = tool(service, "Bash", {"command": "git push -u origin feat/csv"}, {**BASH_OK, "stderr": stderr})
    assert obs is not None and obs.obs_type == "git_push"
    assert meta(obs)["branch"] == "feat/csv" and meta(obs)["new_branch"] is True


def test_git_words_inside_other_commands_are_plain_commands(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "grep -rn 'git commit' docs/"}, BASH_OK)
    assert obs is not None and obs.obs_type == "command"
    obs = tool(service, "Bash", {"command": "git log --oneline -5"}, {**BASH_OK, "stdout": "3f2a1b9 fix"})
    assert obs is not None and obs.obs_type == "command"


def test_failed_git_commit_is_a_command_error(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "git commit -m wip"}, event="PostToolUseFailure",
               error="Exit code 1\nnothing to commit, working tree clean")
    assert obs is not None and obs.obs_type == "command_error"
    assert "nothing to commit" in meta(obs)["error"]


# -- file tools ---------------------------------------------------------------------------------


def test_read(service: Service) -> None:
    path = f"{CWD}/src/billing/invoice.py"
    body = "class Invoice:\n    UNIQUE_READ_BODY_MARKER = 1\n"
    obs = tool(service, "Read", {"file_path": path, "offset": 10, "limit": 50},
               {"type": "text", "file": {"filePath": path, "content": body, "numLines": 2, "startLine": 10,
                                         "totalLines": 200}})
    assert obs is not None
    assert (obs.obs_type, obs.content, obs.file_path) == ("file_read", path, path)
    assert meta(obs) == {"offset": 10, "limit": 50}
    assert b"UNIQUE_READ_BODY_MARKER" not in db_bytes(service.settings)


def test_write_body_is_never_stored_whole(service: Service) -> None:
    path = f"{CWD}/src/billing/export_csv.py"
    body = "".join(f"def export_row_{i}(row):\n    return ','.join(WRITE_BODY_LINE_{i:04d})\n\n" for i in range(300))
    obs = tool(service, "Write", {"file_path": path, "content": body},
               {"type": "create", "filePath": path, "content": body, "structuredPatch": [], "originalFile": None})
    assert obs is not None
    assert (obs.obs_type, obs.content, obs.file_path) == ("file_write", path, path)
    m = meta(obs)
    assert hashlib.sha256(body.encode()).hexdigest().startswith(m["sha256"]) and len(m["sha256"]) >= 16
    assert m["bytes"] == len(body.encode())
    assert m["lines"] == body.count("\n")
    assert body.startswith(m["head"].rstrip("…").strip()) and len(m["head"]) <= 200
    raw = db_bytes(service.settings)
    for i in (150, 299):
        assert f"WRITE_BODY_LINE_{i:04d}".encode() not in raw, "the body reached the database"
    assert body.encode() not in raw


def test_edit_bodies_are_hashed_not_stored(service: Service) -> None:
    path = f"{CWD}/src/billing/invoice.py"
    old = "return round(total, 2)  # EDIT_OLD_MARKER\n" + "x = 0\n" * 200
    new = "return total.quantize(CENT, ROUND_HALF_UP)\n" + "y = 1\n" * 200 + "# EDIT_NEW_TAIL_MARKER\n"
    original = "ORIGINAL_FILE_MARKER\n" * 100
    obs = tool(service, "Edit", {"file_path": path, "old_string": old, "new_string": new, "replace_all": False},
               {"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                "structuredPatch": [], "userModified": False, "replaceAll": False})
    assert obs is not None
    assert (obs.obs_type, obs.content, obs.file_path) == ("file_edit", path, path)
    m = meta(obs)
    assert hashlib.sha256(new.encode()).hexdigest().startswith(m["new_sha256"])
    assert hashlib.sha256(old.encode()).hexdigest().startswith(m["old_sha256"])
    assert m["head"].startswith("return total.quantize(CENT, ROUND_HALF_UP)")
    raw = db_bytes(service.settings)
    for marker in (b"EDIT_OLD_MARKER", b"EDIT_NEW_TAIL_MARKER", b"ORIGINAL_FILE_MARKER"):
        assert marker not in raw


def test_multi_edit(service: Service) -> None:
    path = f"{CWD}/src/billing/invoice.py"
    obs = tool(service, "MultiEdit", {"file_path": path, "edits": [
        {"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d", "replace_all": True}]})
    assert obs is not None and obs.obs_type == "file_edit" and obs.file_path == path
    assert meta(obs)["edits"] == 2


def test_notebook_edit(service: Service) -> None:
    path = f"{CWD}/notebooks/explore.ipynb"
    obs = tool(service, "NotebookEdit", {"notebook_path": path, "new_source": "df.describe()", "cell_id": "c3",
                                         "cell_type": "code", "edit_mode": "replace"},
               {"new_source": "df.describe()", "cell_type": "code", "language": "python", "edit_mode": "replace",
                "notebook_path": path, "original_file": "{}", "updated_file": "{}"})
    assert obs is not None
    assert (obs.obs_type, obs.file_path) == ("file_edit", path)
    assert meta(obs)["edit_mode"] == "replace"
    assert meta(obs)["head"] == "df.describe()"


def test_failed_edit_keeps_its_error(service: Service) -> None:
    """A rejected Edit changed nothing; its observation must say so rather than look like an edit."""
    path = f"{CWD}/src/billing/invoice.py"
    obs = tool(service, "Edit", {"file_path": path, "old_string": "nope", "new_string": "x"},
               event="PostToolUseFailure", error="String to replace not found in file.\nString: nope")
    assert obs is not None
    assert "String to replace not found" in json.dumps(meta(obs)), "the failure is lost: it reads as a good edit"
    assert obs.obs_type == "file_error", "a failed edit changed nothing: it is not a file_edit"


@pytest.mark.parametrize("name,key", [("Read", "file_path"), ("Write", "file_path"), ("Edit", "file_path")])
def test_relative_paths_become_absolute(service: Service, name: str, key: str) -> None:
    cwd = f"{CWD}/src"
    tool_input: dict[str, Any] = {key: "../tests/./test_invoice.py", "content": "x", "old_string": "a",
                                  "new_string": "b"}
    obs = tool(service, name, tool_input, cwd=cwd)
    assert obs is not None
    assert obs.file_path == f"{CWD}/tests/test_invoice.py"
    assert obs.content == f"{CWD}/tests/test_invoice.py"


def test_home_relative_path_is_expanded(service: Service) -> None:
    obs = tool(service, "Read", {"file_path": "~/notes/todo.md"})
    assert obs is not None and obs.file_path is not None
    assert obs.file_path == str(Path("~/notes/todo.md").expanduser())


# -- search and web -----------------------------------------------------------------------------


def test_grep_files_with_matches(service: Service) -> None:
    obs = tool(service, "Grep", {"pattern": "def total", "path": "src", "glob": "*.py"},
               {"mode": "files_with_matches", "numFiles": 2, "filenames": ["src/a.py", "src/b.py"]})
    assert obs is not None and obs.obs_type == "search"
    m = meta(obs)
    assert (m["tool"], m["matches"], m["path"], m["glob"]) == ("Grep", 2, f"{CWD}/src", "*.py")
    assert obs.content == f'"def total" in {CWD}/src → 2 files'


def test_grep_content_mode_counts_matching_lines(service: Service) -> None:
    """In content mode Claude Code reports numFiles 0 and the match lines in numLines."""
    content = "\n".join(f"src/billing/invoice.py:{i}:    total += line.amount" for i in range(12))
    obs = tool(service, "Grep", {"pattern": "total \\+=", "output_mode": "content", "-n": True},
               {"mode": "content", "numFiles": 0, "filenames": [], "content": content, "numLines": 12})
    assert obs is not None and obs.obs_type == "search"
    assert meta(obs)["matches"] == 12


def test_grep_count_mode_counts_matches(service: Service) -> None:
    obs = tool(service, "Grep", {"pattern": "TODO", "output_mode": "count"},
               {"mode": "count", "numFiles": 3, "filenames": [], "content": "a.py:4\nb.py:2\nc.py:1",
                "numMatches": 7})
    assert obs is not None
    assert meta(obs)["matches"] == 7


def test_glob(service: Service) -> None:
    obs = tool(service, "Glob", {"pattern": "**/*.py"},
               {"durationMs": 3, "numFiles": 4, "filenames": ["a.py", "b.py", "c.py", "d.py"], "truncated": False})
    assert obs is not None and obs.obs_type == "search"
    assert (meta(obs)["tool"], meta(obs)["matches"]) == ("Glob", 4)
    assert obs.content == '"**/*.py" → 4 files'


def test_web_fetch_keeps_a_short_excerpt_of_its_answer(service: Service) -> None:
    """WebFetch's `result` is the model's answer about the page: its head is kept, never all of it."""
    answer = ("ROUND_HALF_UP rounds away from zero when the discarded digit is five or more.\n\n"
              + " ".join(f"WEB_ANSWER_WORD_{i:04d}" for i in range(500)))
    obs = tool(service, "WebFetch", {"url": "https://docs.python.org/3/library/decimal.html",
                                     "prompt": "How does ROUND_HALF_UP work?"},
               {"bytes": 120000, "code": 200, "codeText": "OK", "result": answer, "durationMs": 812,
                "url": "https://docs.python.org/3/library/decimal.html"})
    assert obs is not None and obs.obs_type == "web_fetch"
    url, arrow = obs.content.split("\n")
    assert url == "https://docs.python.org/3/library/decimal.html"
    assert arrow.startswith("→ ROUND_HALF_UP rounds away from zero when the discarded digit is five or more. "
                            "WEB_ANSWER_WORD_0000")
    assert len(arrow) <= 2 + 601 and arrow.endswith("…")
    assert not arrow[:-1].endswith("_"), "the excerpt is cut at a word boundary"
    assert meta(obs) == {"prompt": "How does ROUND_HALF_UP work?", "status": 200}
    assert b"WEB_ANSWER_WORD_0499" not in db_bytes(service.settings), "the whole answer reached the database"


def test_web_search(service: Service) -> None:
    obs = tool(service, "WebSearch", {"query": "python decimal round half up", "allowed_domains": ["python.org"]},
               {"query": "python decimal round half up", "results": [
                   {"tool_use_id": "srvtoolu_1", "content": [{"title": "decimal", "url": "https://docs.python.org"}]}],
                "durationSeconds": 1.2})
    assert obs is not None
    assert (obs.obs_type, obs.content) == ("web_search", "python decimal round half up")


@pytest.mark.parametrize("name", ["Task", "Agent"])
def test_subagent_spawn(service: Service, name: str) -> None:
    obs = tool(service, name, {"description": "Find export code", "prompt": "Search the repo for CSV export helpers",
                               "subagent_type": "Explore", "model": "haiku"},
               {"status": "completed", "agentId": "a1", "content": [{"type": "text", "text": "SUBAGENT_ANSWER"}],
                "totalToolUseCount": 4, "totalDurationMs": 9000, "totalTokens": 1200, "usage": {}})
    assert obs is not None and obs.obs_type == "task_spawn"
    assert obs.content.startswith("Find export code")
    assert "Search the repo for CSV export helpers" in obs.content
    assert meta(obs)["subagent_type"] == "Explore"


def test_mcp_call(service: Service) -> None:
    obs = tool(service, "mcp__github__create_pull_request", {"owner": "acme", "repo": "billing-api",
                                                               "title": "CSV export"},
               [{"type": "text", "text": "PR #42 created"}])
    assert obs is not None and obs.obs_type == "mcp_call"
    assert (meta(obs)["server"], meta(obs)["tool"]) == ("github", "create_pull_request")
    assert obs.content.startswith("github.create_pull_request")
    assert "CSV export" in obs.content


def test_plugin_mcp_call(service: Service) -> None:
    obs = tool(service, "mcp__plugin_nmem_nmem__search", {"query": "rounding"}, {"results": []})
    assert obs is not None and obs.obs_type == "mcp_call"
    assert (meta(obs)["server"], meta(obs)["tool"]) == ("plugin_nmem_nmem", "search")


@pytest.mark.parametrize("name,tool_input", [
    ("TodoWrite", {"todos": [{"content": "write tests", "status": "pending", "activeForm": "Writing tests"}]}),
    ("AskUserQuestion", {"questions": [{"question": "Which format?", "header": "fmt", "options": [],
                                        "multiSelect": False}]}),
    ("SomeFutureTool", {}),
])
def test_unknown_tool_is_tool_other(service: Service, name: str, tool_input: dict[str, Any]) -> None:
    obs = tool(service, name, tool_input, {"ok": True})
    assert obs is not None and obs.obs_type == "tool_other"
    assert obs.content.startswith(name) and meta(obs)["tool"] == name
    assert len(obs.content) <= len(name) + 302


# -- failures say why -----------------------------------------------------------------------------

PYTEST_OUT = ("Exit code 1\n" + "\n".join(f"tests/test_invoice.py::test_case_{i} PASSED" for i in range(40))
              + "\n=================================== FAILURES ===================================\n"
              "E       KeyError: 'org_id'\n"
              "=========================== short test summary info ============================\n"
              "FAILED tests/test_auth.py::test_login_org_account - KeyError: 'org_id'\n"
              "========================= 1 failed, 40 passed in 0.81s =========================\n")


def test_failed_command_keeps_its_key_line_and_previews_it(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "pytest -q tests/"}, event="PostToolUseFailure", error=PYTEST_OUT)
    assert obs is not None and obs.obs_type == "command_error"
    key = "1 failed, 40 passed in 0.81s · FAILED tests/test_auth.py::test_login_org_account - KeyError: 'org_id'"
    assert meta(obs)["error_line"] == key
    command, arrow, _ = obs.content.split("\n", 2)
    assert (command, arrow) == ("pytest -q tests/", f"→ {key}")
    preview = obs.preview()
    assert preview.startswith("pytest -q tests/ → ✗ 1 failed, 40 passed in 0.81s · FAILED tests/test_auth.py::")
    assert len(preview) <= 120 and preview.endswith("…")
    assert obs.index_entry()["content_preview"] == obs.preview()


def test_a_long_command_gives_way_to_its_key_line_in_the_preview(service: Service) -> None:
    command = ("cd /home/dev/code/billing-api && source .venv/bin/activate && PYTHONPATH=src python -m pytest "
               "tests/test_invoice.py tests/test_export.py -q -x --no-header 2>&1 | tail -40")
    error = "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'stripe'"
    obs = tool(service, "Bash", {"command": command}, event="PostToolUseFailure", error=error)
    assert obs is not None
    preview = obs.preview()
    assert len(preview) <= 120
    assert preview.startswith("cd /home/dev/code/billing-api") and "…" in preview
    assert preview.endswith(" → ✗ ModuleNotFoundError: No module named 'stripe'")


def test_failed_command_from_exit_code_reads_stdout_and_stderr(service: Service) -> None:
    obs = tool(service, "Bash", {"command": "npx tsc --noEmit"},
               {"stdout": "src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
                "stderr": "npm notice New minor version available\n", "exitCode": 2})
    assert obs is not None and obs.obs_type == "command_error"
    assert meta(obs)["error_line"] == ("src/index.ts(3,7): error TS2322: Type 'string' is not assignable to "
                                       "type 'number'.")


def test_old_failure_rows_preview_their_key_line_from_the_stored_error() -> None:
    """Rows stored before `error_line` existed: the preview reads the key line out of `error`."""
    old = Observation(1, "s", "p", None, T0, "command_error", "PostToolUseFailure", "Bash", None,
                      "pytest -q\n…tests/test_a.py::test_9 PASSED\n1 failed, 9 passed in 0.20s",
                      {"exit_code": 1, "error": "…tests/test_a.py::test_9 PASSED\nFAILED tests/test_a.py::test_b - "
                                               "ValueError: bad\n1 failed, 9 passed in 0.20s"})
    assert old.preview() == ("pytest -q → ✗ 1 failed, 9 passed in 0.20s · FAILED tests/test_a.py::test_b - "
                             "ValueError: bad")


PATH_EDIT = f"{CWD}/src/billing/invoice.py"


@pytest.mark.parametrize("name,tool_input,error", [
    ("Edit", {"file_path": PATH_EDIT, "old_string": "nope", "new_string": "x"},
     "<tool_use_error>String to replace not found in file.\nString: nope</tool_use_error>"),
    ("Write", {"file_path": PATH_EDIT, "content": "x = 1\n"},
     "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"),
    ("Read", {"file_path": f"{CWD}/src/billing/missing.py"}, "File does not exist."),
    ("MultiEdit", {"file_path": PATH_EDIT, "edits": [{"old_string": "a", "new_string": "b"}]},
     "Error: Found 3 matches of the string to replace, but replace_all is false."),
    ("NotebookEdit", {"notebook_path": f"{CWD}/nb.ipynb", "new_source": "x", "cell_id": "c9"},
     "Cell with ID \"c9\" not found in notebook."),
])
def test_failed_file_tools_are_file_errors(service: Service, name: str, tool_input: dict[str, Any],
                                           error: str) -> None:
    obs = tool(service, name, tool_input, event="PostToolUseFailure", error=error)
    assert obs is not None and obs.obs_type == "file_error"
    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    m = meta(obs)
    assert (obs.file_path, m["tool"]) == (path, name)
    assert "denied" not in m
    first = error.replace("<tool_use_error>", "").replace("</tool_use_error>", "").removeprefix("Error: ")
    first = first.splitlines()[0]
    assert m["error_line"] == first
    assert obs.content == f"{name} {path}\n→ {first}"
    assert obs.preview().endswith(f" → ✗ {first}"[-60:])


@pytest.mark.parametrize("error,line", [
    ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
     "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how "
     "to proceed.", "denied by the user"),
    ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
     "the new_string was NOT written to the file). To tell you how to proceed, the user said:\n"
     "Keep the rounding helper in money.py", "denied by the user: Keep the rounding helper in money.py"),
    ("User rejected tool use", "denied by the user"),
    ("Permission to use Write has been denied. IMPORTANT: You *may* attempt to accomplish this action using other "
     "tools", "denied: Permission to use Write has been denied"),
])
def test_denied_file_tools_are_file_errors_marked_denied(service: Service, error: str, line: str) -> None:
    path = f"{CWD}/src/billing/invoice.py"
    obs = tool(service, "Write", {"file_path": path, "content": "x = 1\n"}, event="PostToolUseFailure", error=error)
    assert obs is not None and obs.obs_type == "file_error"
    assert (meta(obs)["denied"], meta(obs)["error_line"], meta(obs)["tool"]) == (True, line, "Write")
    assert obs.preview() == f"Write {path} → ✗ {line}"


@pytest.mark.parametrize("response", [
    "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>",
    "Error: File has not been read yet. Read it first before writing to it.",
    {"filePath": f"{CWD}/src/app.py", "success": False, "error": "File has not been read yet."},
])
def test_post_tool_use_whose_response_says_it_failed_is_a_file_error(service: Service, response: Any) -> None:
    obs = tool(service, "Write", {"file_path": f"{CWD}/src/app.py", "content": "x"}, response)
    assert obs is not None and obs.obs_type == "file_error"
    assert meta(obs)["error_line"].startswith("File has not been read yet")


def test_a_read_whose_text_looks_like_an_error_is_still_a_read(service: Service) -> None:
    """A transcript can hand over a Read's result as the file's text: a log that starts with
    `Error:` or quotes a refusal is what the file says, not a failure."""
    text = "Error: disk full at 03:12\nThe user doesn't want to proceed with this tool use.\n"
    obs = tool(service, "Read", {"file_path": f"{CWD}/logs/deploy.log"}, text)
    assert obs is not None and obs.obs_type == "file_read"


def test_a_successful_write_response_is_still_a_write(service: Service) -> None:
    obs = tool(service, "Write", {"file_path": f"{CWD}/src/app.py", "content": "x"},
               {"filePath": f"{CWD}/src/app.py", "success": True})
    assert obs is not None and obs.obs_type == "file_write"


def test_other_failed_tools_keep_their_type_and_show_the_failure(service: Service) -> None:
    web = tool(service, "WebFetch", {"url": "https://internal.example/wiki", "prompt": "deploy steps"},
               event="PostToolUseFailure", error="Request failed with status code 403")
    assert web is not None and web.obs_type == "web_fetch"
    assert meta(web)["error_line"] == "Request failed with status code 403"
    assert web.preview() == "https://internal.example/wiki → ✗ Request failed with status code 403"
    mcp = tool(service, "mcp__github__create_issue", {"owner": "acme", "repo": "billing-api", "title": "Rounding"},
               {"content": [{"type": "text", "text": "Validation Failed: title is too short"}], "isError": True})
    assert mcp is not None and mcp.obs_type == "mcp_call"
    assert meta(mcp)["error_line"] == "Validation Failed: title is too short"
    assert mcp.preview().endswith(" → ✗ Validation Failed: title is too short")
    todo = tool(service, "TodoWrite", {"todos": []}, event="PostToolUseFailure", error="InputValidationError: todos")
    assert todo is not None and todo.obs_type == "tool_other"
    assert todo.preview() == "TodoWrite {\"todos\": []} → ✗ InputValidationError: todos"


# -- search counts -------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_input,response,content", [
    ({"pattern": "TODO", "path": "src"}, {"mode": "files_with_matches", "numFiles": 12, "filenames": []},
     f'"TODO" in {CWD}/src → 12 files'),
    ({"pattern": "TODO", "path": "src"}, {"mode": "files_with_matches", "numFiles": 0, "filenames": []},
     f'"TODO" in {CWD}/src → 0 files'),
    ({"pattern": "TODO", "output_mode": "content"}, {"mode": "content", "numFiles": 0, "numLines": 1},
     '"TODO" → 1 line'),
    ({"pattern": "TODO", "output_mode": "count"}, {"mode": "count", "numFiles": 2, "numMatches": 7},
     '"TODO" → 7 matches'),
    ({"pattern": "TODO"}, {"mode": "count", "numFiles": 1, "numMatches": 1}, '"TODO" → 1 match'),
])
def test_search_counts_are_in_the_content(service: Service, tool_input: dict[str, Any], response: Any,
                                          content: str) -> None:
    obs = tool(service, "Grep", tool_input, response)
    assert obs is not None and obs.content == content
    assert obs.preview() == content


# -- answers -------------------------------------------------------------------------------------


def test_subagent_answer_is_kept_as_a_short_redacted_excerpt(service: Service) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    answer = ("Login fails for org accounts: the SSO callback drops the org_id claim, so get_user() raises "
              f"KeyError. The test fixture uses the token {token}. " + "More detail follows. " * 80)
    obs = tool(service, "Agent", {"description": "Investigate login failure", "prompt": "Why do org logins fail?",
                                  "subagent_type": "general-purpose"},
               {"status": "completed", "agentId": "a7", "prompt": "Why do org logins fail?",
                "content": [{"type": "text", "text": answer}], "totalDurationMs": 41000, "totalTokens": 9000,
                "totalToolUseCount": 12, "usage": {}})
    assert obs is not None and obs.obs_type == "task_spawn"
    description, arrow, prompt = obs.content.split("\n")
    assert (description, prompt) == ("Investigate login failure", "Why do org logins fail?")
    assert arrow.startswith("→ Login fails for org accounts: the SSO callback drops the org_id claim")
    assert len(arrow) <= 2 + 601
    assert token not in obs.content and "[REDACTED:github-token]" in obs.content
    assert token.encode() not in db_bytes(service.settings)
    assert obs.preview().startswith("Investigate login failure → Login fails for org accounts")


@pytest.mark.parametrize("response", [
    [{"type": "text", "text": "Issue #812: Login fails for org accounts (open)"}],
    {"content": [{"type": "text", "text": "Issue #812: Login fails for org accounts (open)"}], "isError": False},
    "Issue #812: Login fails for org accounts (open)",
    [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
     {"type": "text", "text": "Issue #812: Login fails for org accounts (open)"}],
])
def test_mcp_answer_is_kept(service: Service, response: Any) -> None:
    obs = tool(service, "mcp__github__get_issue", {"owner": "acme", "repo": "web", "issue_number": 812}, response)
    assert obs is not None and obs.obs_type == "mcp_call"
    assert obs.content.endswith("\n→ Issue #812: Login fails for org accounts (open)")
    assert "iVBORw0KGgo" not in obs.content
    assert obs.preview().endswith("→ Issue #812: Login fails for org accounts (open)")


def test_mcp_structured_answer_without_text_keeps_its_json_head(service: Service) -> None:
    obs = tool(service, "mcp__tracker__find", {"q": "login"}, {"results": [{"id": 812, "title": "Login fails"}]})
    assert obs is not None
    assert obs.content == 'tracker.find {"q": "login"}\n→ {"results": [{"id": 812, "title": "Login fails"}]}'


# -- cuts ----------------------------------------------------------------------------------------


def test_head_and_tail_cut_at_word_boundaries() -> None:
    text = " ".join(f"word{i:03d}" for i in range(200))
    cut = head(text, 100)
    assert cut.endswith("…") and len(cut) <= 101
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "
    end = tail(text, 100)
    assert end.startswith("…") and len(end) <= 101
    assert text.endswith(end[1:]) and text[-len(end)] == " "
    unbroken = "x" * 500
    assert head(unbroken, 100) == "x" * 100 + "…", "one long word is cut inside"


def test_cuts_never_leave_part_of_a_secret() -> None:
    """Wherever the cut falls in a token (also too far in for the word boundary to drop it), the
    token was recognised whole before the cut: scrubbing a margin around it comes first."""
    token = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba"
    for at in range(140):
        tokens = f"token {token} and more words " * 3
        for cut in (head("a " * (at // 2) + tokens, 100), tail(tokens + "b " * (at // 2), 100)):
            assert "Zy9Xw8" not in cut and "Dc8Ba" not in cut, (at, cut)


# -- dedup --------------------------------------------------------------------------------------

PATH = f"{CWD}/src/billing/invoice.py"


def read(service: Service, at: int, session: str = "s-1", path: str = PATH) -> Observation | None:
    return tool(service, "Read", {"file_path": path}, at=at, session=session)


def test_repeated_read_in_a_session_is_collapsed_within_the_window(service: Service) -> None:
    first = read(service, T0)
    assert first is not None
    assert read(service, T0 + 10) is None
    assert read(service, T0 + 299) is None
    assert [o.id for o in stored(service)] == [first.id]


def test_read_after_the_window_is_stored_again(service: Service) -> None:
    assert read(service, T0) is not None
    assert read(service, T0 + 301) is not None
    assert len(stored(service)) == 2


def test_same_read_in_another_session_is_not_collapsed(service: Service) -> None:
    assert read(service, T0, "s-1") is not None
    assert read(service, T0 + 5, "s-2") is not None
    assert read(service, T0 + 6, "s-1", f"{CWD}/src/other.py") is not None
    assert len(stored(service)) == 3


def test_repeated_search_is_collapsed(service: Service) -> None:
    grep = {"pattern": "def total", "path": "src"}
    assert tool(service, "Grep", grep, {"numFiles": 1}, at=T0) is not None
    assert tool(service, "Grep", grep, {"numFiles": 1}, at=T0 + 30) is None
    assert tool(service, "Grep", {"pattern": "def subtotal", "path": "src"}, at=T0 + 31) is not None


def test_edits_and_commands_are_never_collapsed(service: Service) -> None:
    for i in range(3):
        assert tool(service, "Edit", {"file_path": PATH, "old_string": "a", "new_string": "b"}, at=T0 + i) is not None
        assert tool(service, "Bash", {"command": "pytest -q"}, BASH_OK, at=T0 + i) is not None
    assert len(stored(service)) == 6


def test_dedup_window_is_configurable(nmem_home: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home), "NMEM_DEDUP_WINDOW": "10"})
    svc = Service.open(settings)
    try:
        assert read(svc, T0) is not None
        assert read(svc, T0 + 5) is None
        assert read(svc, T0 + 11) is not None
        assert len(stored(svc)) == 2
    finally:
        svc.close()


def test_dedup_window_zero_only_collapses_same_second_repeats(nmem_home: Path) -> None:
    settings = load_settings({"NMEM_HOME": str(nmem_home), "NMEM_DEDUP_WINDOW": "0"})
    svc = Service.open(settings)
    try:
        assert read(svc, T0) is not None
        assert read(svc, T0) is None
        assert read(svc, T0 + 1) is not None
    finally:
        svc.close()
