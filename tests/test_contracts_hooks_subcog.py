"""subcog's hook samples (§5.3), verbatim, through real `nmem record` / `nmem hook` processes run in
the project's directory, as subcog's harness runs them: its events other than SessionStart name no
directory, and `hooks.profile = "subcog"` prints its JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import counts, hook_env, query

# The samples of subcog-access-interface-layer.md §5.3.1-5.3.5, as printed there.
SESSION_START = {"hook": "SessionStart", "session_id": "sess_abc123", "project_path": "/Users/dev/my-project",
                 "project_name": "my-project", "git_branch": "feature/auth", "timestamp": "2025-01-20T10:00:00Z"}
USER_PROMPT = {"hook": "UserPromptSubmit", "session_id": "sess_abc123",
               "prompt": "Let's use PostgreSQL for the database [decision] because of JSONB support"}
POST_TOOL = {"hook": "PostToolUse", "session_id": "sess_abc123", "tool_name": "Read",
             "tool_input": {"file_path": "/Users/dev/my-project/src/auth.rs"},
             "tool_output": "pub fn authenticate(...) { ... }"}
PRE_COMPACT = {"hook": "PreCompact", "session_id": "sess_abc123",
               "conversation_summary": "User implemented authentication using JWT...",
               "key_decisions": ["Use JWT", "Store tokens in httpOnly cookies"], "remaining_context_tokens": 5000}
STOP = {"hook": "Stop", "session_id": "sess_abc123", "reason": "user_initiated", "duration_seconds": 1800,
        "tool_calls": 45, "tokens_used": 50000}
SAMPLES = (SESSION_START, USER_PROMPT, POST_TOOL, PRE_COMPACT, STOP)


def run_hook(home: Path, payload: dict[str, Any], cwd: Path, *args: str,
             **env: str) -> subprocess.CompletedProcess[str]:
    """`nmem record` (or `nmem hook <type>`) as a harness spawns it: in `cwd`, the JSON on stdin."""
    return subprocess.run([sys.executable, "-m", "nmem", *(args or ("record",))], input=json.dumps(payload),
                          capture_output=True, text=True, env=hook_env(home, **env), cwd=cwd, timeout=60,
                          check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "my-project"
    directory.mkdir()
    return directory


def test_subcog_samples_without_a_directory_are_recorded_in_the_hook_s_working_directory(
        tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    for payload in SAMPLES:
        done = run_hook(home, payload, project)
        assert (done.returncode, done.stderr) == (0, ""), payload["hook"]
    assert [(r["id"], r["project"]) for r in query(home, "SELECT id, project FROM sessions")] == \
        [("sess_abc123", "my-project")]
    rows = query(home, "SELECT obs_type, file_path FROM observations ORDER BY id")
    assert ("file_read", "/Users/dev/my-project/src/auth.rs") in [(r["obs_type"], r["file_path"]) for r in rows]
    assert query(home, "SELECT content FROM prompts WHERE source = 'user'")[0]["content"] == USER_PROMPT["prompt"]
    # Stop closed the session; PreCompact kept its summary and both key decisions
    assert query(home, "SELECT ended_at FROM sessions")[0]["ended_at"] is not None
    memories = {(r["namespace"], r["content"]) for r in query(home, "SELECT namespace, content FROM memories")}
    assert {("progress", PRE_COMPACT["conversation_summary"]), ("decisions", "Use JWT"),
            ("decisions", "Store tokens in httpOnly cookies")} <= memories


def test_subcog_profile_prints_subcog_s_json_for_every_sample(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    outputs = {}
    for payload in SAMPLES:
        done = run_hook(home, payload, project, NMEM_HOOKS_PROFILE="subcog")
        assert (done.returncode, done.stderr) == (0, ""), payload["hook"]
        outputs[payload["hook"]] = json.loads(done.stdout)
    for name, answer in outputs.items():
        assert set(answer) == {"additionalContext", "suppressSystemPrompt"}, name
    assert outputs["Stop"] == {"additionalContext": "", "suppressSystemPrompt": True}
    start = outputs["SessionStart"]["additionalContext"]
    assert start.startswith("<memory_context>\n  <project>my-project</project>\n  <branch>feature/auth</branch>")
    assert start.endswith("</memory_context>")
    prompt = outputs["UserPromptSubmit"]["additionalContext"]
    assert prompt.startswith('<capture_detected>\n  <signal type="decision" namespace="decisions">\n'
                             "    <summary>Let's use PostgreSQL for the database</summary>\n"
                             "    <reason>JSONB support</reason>\n    <action>Confirm to capture this decision")
    assert outputs["PostToolUse"] == {"additionalContext": "", "suppressSystemPrompt": False}
    compact = outputs["PreCompact"]["additionalContext"]
    assert compact.startswith('<auto_captured>\n  <memory uri="nmem://project:my-project/progress/')
    assert "<captured>2 decisions auto-saved before context compaction</captured>" in compact
    # the marker was suggested, not stored: the only memories are PreCompact's
    namespaces = sorted(r["namespace"] for r in query(home, "SELECT namespace FROM memories"))
    assert namespaces == ["decisions", "decisions", "progress"]
    assert "<summary>Use JWT</summary>" in compact


def test_subcog_session_start_lists_the_project_s_memories_as_resources(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    subprocess.run(["git", "init", "-q", "-b", "feature/login", str(project)], check=True)
    run_hook(home, USER_PROMPT, project)  # nmem's profile: the marker is stored as a decision
    start = {k: v for k, v in SESSION_START.items() if k not in ("project_path", "git_branch")}
    done = run_hook(home, {**start, "session_id": "sess_two"}, project, "hook", "session-start",
                    NMEM_HOOKS_PROFILE="subcog")
    assert (done.returncode, done.stderr) == (0, "")
    context = json.loads(done.stdout)["additionalContext"]
    memory = query(home, "SELECT uid, summary FROM memories")[0]
    assert "<branch>feature/login</branch>" in context  # read from the repository's HEAD
    assert f'<resource uri="nmem://project:my-project/decisions/{memory["uid"]}" relevance="0.90">' in context
    assert "<summary>Let&apos;s" not in context and "Let's use PostgreSQL for the database" in context
    assert "<activity>&lt;nmem-context&gt;" in context


def test_subcog_post_tool_use_surfaces_the_file_s_memories(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    env = {"NMEM_HOOKS_PROFILE": "subcog", "NMEM_FILE_MEMORIES": "1"}
    run_hook(home, SESSION_START, project, **env)
    subprocess.run([sys.executable, "-m", "nmem", "capture", "decisions", "auth.rs signs JWTs with RS256",
                    "--domain", "project:my-project"], env=hook_env(home), cwd=project, check=True,
                   capture_output=True)
    done = run_hook(home, POST_TOOL, project, **env)
    assert (done.returncode, done.stderr) == (0, "")
    context = json.loads(done.stdout)["additionalContext"]
    assert context.startswith('<related_memories>\n  <memory uri="nmem://project:my-project/decisions/')
    assert 'relevance="1.00">\n    <summary>auth.rs signs JWTs with RS256</summary>' in context


def test_subcog_profile_prints_empty_json_while_memory_is_off(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    done = run_hook(home, USER_PROMPT, project, NMEM_HOOKS_PROFILE="subcog", NMEM_ENABLED="false")
    assert (done.returncode, json.loads(done.stdout), done.stderr) == \
        (0, {"additionalContext": "", "suppressSystemPrompt": False}, "")
    assert counts(home)["prompts"] == 0


def test_an_unknown_hook_profile_is_a_configuration_error(tmp_path: Path, project: Path) -> None:
    home = tmp_path / "home"
    done = run_hook(home, USER_PROMPT, project, NMEM_HOOKS_PROFILE="subcg")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "nmem: hooks.profile must be one of nmem, subcog, got 'subcg'\n"
    assert counts(home)["prompts"] == 0
