"""A session is recorded once it starts, asks or acts: SessionStart, UserPromptSubmit, PostToolUse or
PostToolUseFailure. Other events of a session never seen (what `claude mcp list`, a Notification, a
PreToolUse, or a Stop/SessionEnd of an unknown session send) create nothing, through the hook process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.harness import counts, event, hook, hook_ok, query

CWD = "/home/dev/code/rules"

NON_OPENERS = [
    event("SessionEnd", "ghost", CWD, reason="other"),
    event("Stop", "ghost", CWD, stop_hook_active=False, last_assistant_message="Done."),
    event("SubagentStop", "ghost", CWD, agent_id="a1", last_assistant_message="Found 3 callers."),
    event("PreCompact", "ghost", CWD, trigger="auto"),
    event("Notification", "ghost", CWD, message="Claude needs your permission to use Bash"),
    event("PreToolUse", "ghost", CWD, tool_name="Bash", tool_input={"command": "ls"}),
    event("PermissionRequest", "ghost", CWD, tool_name="Bash", tool_input={"command": "ls"}),
    event("SomeFutureEvent", "ghost", CWD),
]


@pytest.mark.parametrize("payload", NON_OPENERS, ids=[p["hook_event_name"] for p in NON_OPENERS])
def test_an_event_that_cannot_start_a_session_creates_nothing(tmp_path: Path, payload: dict[str, object]) -> None:
    home = tmp_path / "home"
    done = hook(home, payload)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert counts(home) == {"sessions": 0, "prompts": 0, "observations": 0, "memories": 0}


def test_a_session_seen_before_takes_every_event(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hook_ok(home, event("UserPromptSubmit", "known", CWD, prompt="tidy the imports"))
    hook_ok(home, event("Notification", "known", CWD, message="waiting for input"))
    hook_ok(home, event("Stop", "known", CWD, last_assistant_message="Tidied."))
    hook_ok(home, event("SessionEnd", "known", CWD, reason="prompt_input_exit"))
    (session,) = query(home, "SELECT id, project, ended_at, root FROM sessions")
    assert (session["id"], session["project"], session["root"]) == ("known", "rules", CWD)
    assert session["ended_at"] is not None
    assert [p["source"] for p in query(home, "SELECT source FROM prompts ORDER BY id")] == ["user", "agent"]
    assert [o["obs_type"] for o in query(home, "SELECT obs_type FROM observations")] == ["session_end"]


@pytest.mark.parametrize("payload", [
    event("SessionStart", "s1", CWD, source="startup"),
    event("UserPromptSubmit", "s1", CWD, prompt="hello"),
    event("PostToolUse", "s1", CWD, tool_name="Bash", tool_input={"command": "make"},
          tool_response={"stdout": "", "stderr": "", "interrupted": False}),
    event("PostToolUseFailure", "s1", CWD, tool_name="Bash", tool_input={"command": "make"}, error="Exit code 2"),
], ids=["SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure"])
def test_start_prompt_or_tool_use_creates_the_session(tmp_path: Path, payload: dict[str, object]) -> None:
    home = tmp_path / "home"
    hook_ok(home, payload)
    assert [s["id"] for s in query(home, "SELECT id FROM sessions")] == ["s1"]


def test_a_repeated_non_opener_never_leaves_a_session_behind(tmp_path: Path) -> None:
    """`claude mcp list` run again and again, with a hook installed, used to leave a session per run."""
    home = tmp_path / "home"
    for i in range(3):
        hook_ok(home, event("SessionEnd", f"cli-{i}", CWD, reason="other"))
    hook_ok(home, event("SessionStart", "real", CWD, source="startup"))
    assert [s["id"] for s in query(home, "SELECT id FROM sessions")] == ["real"]
