"""Cursor: hook events through the exact command `nmem install cursor` writes, the install
(hooks.json and mcp.json merged, backed up, idempotent, removed exactly), doctor, and the shared
memory with Claude Code. Payload shapes: tests/fixtures/cursor_shapes.py."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures import cursor_shapes as cu
from fixtures.harness import event, hook_env, hook_ok, observations, query

ROOT = "/home/dev/code/cursor-demo"
USER_HOOKS: dict[str, Any] = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}],
                                                      "beforeShellExecution": [{"command": "./hooks/guard.sh"}]}}
USER_MCP: dict[str, Any] = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "server-github"]}}}


def env_for(tmp_path: Path) -> dict[str, str]:
    env = hook_env(tmp_path / "nmem")
    env["HOME"] = str(tmp_path / "home")
    return env


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    done = run_nmem(["install", "cursor"], env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    return tmp_path


def cursor_hook(tmp_path: Path, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    hooks = json.loads((tmp_path / "home" / ".cursor" / "hooks.json").read_text())["hooks"]
    (command,) = [e["command"] for e in hooks[payload["hook_event_name"]]]
    return subprocess.run(shlex.split(command), input=json.dumps(payload), capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60, check=False)


def test_events_through_the_installed_command_are_recorded_as_cursor(installed: Path) -> None:
    home = installed / "nmem"
    for payload in (cu.session_start(ROOT), cu.prompt(ROOT, "add rate limiting to the upload route"),
                    cu.shell(ROOT, "npm test -- upload", "Tests: 1 failed, 12 passed"),
                    cu.file_edit(ROOT, f"{ROOT}/src/upload.ts", "app.post(", "app.post(limit, "),
                    cu.mcp(ROOT, "get_issue", '{"number": 12}', '{"content": [{"type": "text", "text": "429s"}]}'),
                    cu.response(ROOT, "Rate limiting added; the upload test still fails."), cu.stop(ROOT)):
        done = cursor_hook(installed, payload)
        assert done.returncode == 0 and done.stderr == "", (payload["hook_event_name"], done.stderr)
    assert query(home, "SELECT agent, ended_at IS NOT NULL AS ended FROM sessions") == [
        {"agent": "cursor", "ended": 1}]
    kinds = {(o["obs_type"], o["source_event"]) for o in observations(home)}
    assert {("command", "afterShellExecution"), ("file_edit", "afterFileEdit"),
            ("mcp_call", "afterMCPExecution")} <= kinds
    prompts = query(home, "SELECT source, content FROM prompts ORDER BY id")
    assert prompts == [{"source": "user", "content": "add rate limiting to the upload route"},
                       {"source": "agent", "content": "Rate limiting added; the upload test still fails."}]


def test_session_start_answers_additional_context_and_sees_claude_code_work(installed: Path) -> None:
    home = installed / "nmem"
    hook_ok(home, event("UserPromptSubmit", "claude-1", ROOT, prompt="split the upload handler"))
    hook_ok(home, event("Stop", "claude-1", ROOT, last_assistant_message="Split done."))
    done = cursor_hook(installed, cu.session_start(ROOT, conversation="c-2"))
    assert "split the upload handler" in json.loads(done.stdout)["additional_context"]


def test_install_merges_is_idempotent_and_uninstall_restores(tmp_path: Path) -> None:
    cursor = tmp_path / "home" / ".cursor"
    cursor.mkdir(parents=True)
    (cursor / "hooks.json").write_text(json.dumps(USER_HOOKS))
    (cursor / "mcp.json").write_text(json.dumps(USER_MCP))
    env = env_for(tmp_path)
    assert run_nmem(["install", "cursor"], env=env).returncode == 0
    hooks = json.loads((cursor / "hooks.json").read_text())
    assert hooks["version"] == 1 and hooks["hooks"]["beforeShellExecution"] == [{"command": "./hooks/guard.sh"}]
    assert hooks["hooks"]["afterFileEdit"][0] == {"command": "./hooks/format.sh"}
    assert json.loads((cursor / "mcp.json").read_text())["mcpServers"]["github"] == USER_MCP["mcpServers"]["github"]
    once = {p.name: p.read_bytes() for p in cursor.iterdir()}
    assert json.loads(run_nmem(["install", "cursor", "--format", "json"], env=env).stdout)["changed"] == []
    assert {p.name: p.read_bytes() for p in cursor.iterdir()} == once
    assert run_nmem(["uninstall", "cursor"], env=env).returncode == 0
    assert json.loads((cursor / "hooks.json").read_text()) == USER_HOOKS
    assert json.loads((cursor / "mcp.json").read_text()) == USER_MCP


def test_install_warns_when_cursor_would_also_run_nmems_claude_code_hooks(tmp_path: Path) -> None:
    """Cursor runs Claude Code's hooks too when its "Third-party skills" setting is on
    (cursor.com/docs/reference/third-party-hooks): one event, recorded twice."""
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    alone = run_nmem(["install", "cursor"], env=env)
    assert alone.returncode == 0 and "Third-party skills" not in alone.stderr
    assert run_nmem(["install", "claude-code"], env=env).returncode == 0
    both = run_nmem(["install", "cursor", "--format", "json"], env=env)
    notes = json.loads(both.stdout)["notes"]
    assert any("Third-party skills" in n and ".claude/settings.json" in n for n in notes), notes


def test_install_into_nothing_and_uninstall_leave_nothing(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    assert run_nmem(["install", "cursor"], env=env).returncode == 0
    assert run_nmem(["uninstall", "cursor"], env=env).returncode == 0
    assert list((tmp_path / "home").iterdir()) == []


def test_doctor_checks_the_cursor_wiring(installed: Path) -> None:
    done = run_nmem(["doctor", "--format", "json"], env=env_for(installed))
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["cursor hooks (user)"]["status"] == "ok"
    assert checks["cursor mcp server (user)"]["status"] == "ok"
