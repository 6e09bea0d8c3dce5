"""Hook input in subcog's shape (`project_path`, `hook`), through real `nmem hook` / `nmem record` processes."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.harness import counts, hook, observations, query

CWD = "/home/dev/code/demo"


def subcog(hook_name: str, session: str = "sess_abc123", **fields: object) -> dict[str, object]:
    """subcog §5.3: `hook` names the event, `project_path` the directory; no `cwd`, no `hook_event_name`."""
    return {"hook": hook_name, "session_id": session, "project_path": CWD, "project_name": "demo",
            "git_branch": "feature/auth", "timestamp": "2025-01-20T10:00:00Z", **fields}


def test_subcog_session_start_through_nmem_hook(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = subcog("SessionStart")
    del payload["hook"]  # `nmem hook session-start` names the event on its command line
    done = hook(home, payload, args=("hook", "session-start"))
    assert (done.returncode, done.stderr) == (0, "")
    rows = query(home, "SELECT id, project, root FROM sessions")
    assert [(r["id"], r["project"]) for r in rows] == [("sess_abc123", "demo")]


def test_subcog_events_through_nmem_record(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for payload in (subcog("SessionStart"),
                    subcog("UserPromptSubmit", prompt="Let's use PostgreSQL [decision] because of JSONB"),
                    subcog("PostTool", tool_name="Bash", tool_input={"command": "pytest -q"},
                           tool_response={"stdout": "3 passed", "exit_code": 0})):
        done = hook(home, payload)
        assert (done.returncode, done.stderr) == (0, ""), payload
    assert [o["project"] for o in observations(home, "obs_type = 'command'")] == ["demo"]
    assert query(home, "SELECT content FROM prompts")[0]["content"].startswith("Let's use PostgreSQL")
    assert counts(home)["memories"] == 1  # the [decision] marker


def test_claude_code_fields_win_over_subcog_ones(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = {**subcog("SessionStart"), "cwd": "/home/dev/code/other", "hook_event_name": "SessionStart",
               "source": "startup"}
    assert hook(home, payload).returncode == 0
    assert [r["project"] for r in query(home, "SELECT project FROM sessions")] == ["other"]


def test_subcog_input_with_an_empty_directory_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    payload = {**subcog("SessionStart"), "project_path": ""}
    done = hook(home, json.dumps(payload))
    assert done.returncode == 1
    assert done.stderr == "nmem: hook input: missing required field 'cwd' (or subcog's 'project_path')\n"
    assert counts(home)["sessions"] == 0


def test_subcog_input_honours_the_project_opt_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[projects."demo"]\nmemory = false\n', encoding="utf-8")
    done = hook(home, subcog("UserPromptSubmit", prompt="[decision] keep this private"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert counts(home)["prompts"] == counts(home)["memories"] == 0
