"""Gemini CLI: hook events through the exact command `nmem install gemini` writes, the install
(settings.json merged, backed up, idempotent, removed exactly), doctor, and the shared memory
with Claude Code. Payload shapes: tests/fixtures/gemini_shapes.py."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures import gemini_shapes as gm
from fixtures.harness import event, hook_env, hook_ok, observations, query

CWD = "/home/dev/code/gemini-demo"
USER_SETTINGS: dict[str, Any] = {
    "theme": "GitHub",
    "tools": {"enableHooks": True},
    "mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}},
    "hooks": {"BeforeTool": [{"matcher": "write_file|replace", "hooks": [{"name": "guard", "type": "command",
                                                                          "command": "./guard.sh"}]}],
              "disabled": ["auto-test"]},
}


def env_for(tmp_path: Path) -> dict[str, str]:
    env = hook_env(tmp_path / "nmem")
    env["HOME"] = str(tmp_path / "home")
    return env


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    done = run_nmem(["install", "gemini"], env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    return tmp_path


def gemini_hook(tmp_path: Path, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    settings = json.loads((tmp_path / "home" / ".gemini" / "settings.json").read_text())
    (command,) = [h["command"] for g in settings["hooks"][payload["hook_event_name"]] for h in g["hooks"]]
    return subprocess.run(shlex.split(command), input=json.dumps(payload), capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60, check=False)


def test_events_through_the_installed_command_are_recorded_as_gemini(installed: Path) -> None:
    home = installed / "nmem"
    for payload in (gm.session_start(CWD), gm.before_agent(CWD, "paginate the audit log endpoint"),
                    gm.after_tool(CWD, "read_file", {"file_path": f"{CWD}/src/audit.py"}, "def list_events():"),
                    gm.after_tool(CWD, "replace", {"file_path": f"{CWD}/src/audit.py", "old_string": "rows = all()",
                                                   "new_string": "rows = page(q, size)"}, "Successfully modified"),
                    gm.shell(CWD, "pytest -q tests/test_audit.py", "F\n1 failed: KeyError: 'cursor'", code=1),
                    gm.after_tool(CWD, "write_file", {"file_path": f"{CWD}/notes.md", "content": "x"}, "",
                                  error="Permission denied: notes.md"),
                    gm.after_agent(CWD, "paginate the audit log endpoint", "Pagination added; one test fails."),
                    gm.session_end(CWD)):
        done = gemini_hook(installed, payload)
        assert done.returncode == 0 and done.stderr == "", (payload["hook_event_name"], done.stderr)
        if done.stdout:
            json.loads(done.stdout)  # Gemini CLI reads stdout as JSON and nothing else
    assert query(home, "SELECT agent FROM sessions") == [{"agent": "gemini"}]
    rows = [(o["obs_type"], o["source_event"], o["content"].splitlines()[0]) for o in observations(home)]
    assert ("file_read", "AfterTool", f"{CWD}/src/audit.py") in rows
    assert ("file_edit", "AfterTool", f"{CWD}/src/audit.py") in rows
    assert ("command_error", "AfterTool", "pytest -q tests/test_audit.py") in rows
    assert ("file_error", "AfterTool", f"Write {CWD}/notes.md") in rows
    assert ("session_end", "SessionEnd", "session_end (exit)") in rows
    prompts = query(home, "SELECT source, content FROM prompts ORDER BY id")
    assert prompts == [{"source": "user", "content": "paginate the audit log endpoint"},
                       {"source": "agent", "content": "Pagination added; one test fails."}]


def test_an_mcp_tool_is_read_by_its_mcp_context_not_its_flattened_name(installed: Path) -> None:
    """Gemini names MCP tools `mcp_<server>_<tool>` (one underscore: `mcp_code_search_find_refs` could
    be server `code` or `code_search`); the server and tool come from `mcp_context`."""
    home = installed / "nmem"
    for payload in (gm.mcp_tool(CWD, "code_search", "find_refs", {"symbol": "list_events"},
                                "src/audit.py:12 list_events is called by the audit view"),
                    gm.after_tool(CWD, "mcp_code_search_find_refs", {"symbol": "x"}, [{"text": "no match"}],
                                  error="MCP error -32000: index not built",
                                  mcp_context={"server_name": "code_search", "tool_name": "find_refs"})):
        done = gemini_hook(installed, payload)
        assert done.returncode == 0 and done.stderr == "", done.stderr
    calls = [o for o in observations(home) if o["tool_name"].startswith("mcp__")]
    assert [(o["tool_name"], o["metadata"].get("server"), o["metadata"].get("tool")) for o in calls][:1] == [
        ("mcp__code_search__find_refs", "code_search", "find_refs")]
    assert "list_events is called by the audit view" in calls[0]["content"]
    assert len(calls) == 2 and "index not built" in json.dumps(calls[1])


def test_the_context_gemini_prepends_to_a_headless_prompt_is_not_stored_as_the_prompt(installed: Path) -> None:
    """`gemini -p` puts SessionStart's context before the first prompt, escaped, in
    `<hook_context>` tags, and BeforeAgent carries it (seen with the real CLI, 0.61.0)."""
    home = installed / "nmem"
    context = ("<hook_context>&lt;nmem-context&gt;\n# nmem context\n## Last session s39d37b41 (gemini)\n"
               "Asked: why does the export time out (p1)\n&lt;/nmem-context&gt;</hook_context>")
    for payload in (gm.before_agent(CWD, f"{context}\n\nstream the invoice rows"),
                    gm.after_agent(CWD, f"{context}\n\nstream the invoice rows", "Rows stream now."),
                    gm.before_agent(CWD, f"explain <hook_context> tags in my notes\n{context}"),
                    gm.before_agent(CWD, context)):
        assert gemini_hook(installed, payload).returncode == 0
    prompts = [p["content"] for p in query(home, "SELECT content FROM prompts WHERE source = 'user' ORDER BY id")]
    assert prompts == ["stream the invoice rows", "explain <hook_context> tags in my notes"]


def test_gemini_and_claude_code_share_one_memory(installed: Path) -> None:
    home = installed / "nmem"
    gemini_hook(installed, gm.before_agent(CWD, "paginate the audit log endpoint", session_id="g-1"))
    gemini_hook(installed, gm.after_agent(CWD, "paginate", "Done; the cursor test fails.", session_id="g-1"))
    out = hook_ok(home, event("SessionStart", "claude-1", CWD, source="startup"))
    assert "paginate the audit log endpoint" in out
    hook_ok(home, event("UserPromptSubmit", "claude-1", CWD, prompt="fix the cursor test"))
    hook_ok(home, event("Stop", "claude-1", CWD, last_assistant_message="Cursor test fixed."))
    done = gemini_hook(installed, gm.session_start(CWD, session_id="g-2"))
    context = json.loads(done.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart" and "fix the cursor test" in context["additionalContext"]


def test_install_merges_is_idempotent_and_uninstall_restores_the_settings(tmp_path: Path) -> None:
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(USER_SETTINGS, indent=2))
    env = env_for(tmp_path)
    assert run_nmem(["install", "gemini"], env=env).returncode == 0
    data = json.loads(settings.read_text())
    assert data["theme"] == "GitHub" and data["mcpServers"]["github"] == USER_SETTINGS["mcpServers"]["github"]
    assert data["mcpServers"]["nmem"]["args"] == ["serve"]
    assert data["hooks"]["BeforeTool"] == USER_SETTINGS["hooks"]["BeforeTool"]
    assert data["hooks"]["disabled"] == ["auto-test"]
    assert all(data["hooks"][e][0]["hooks"][0]["timeout"] == 30_000 for e in ("SessionStart", "AfterTool"))
    once = settings.read_bytes()
    again = json.loads(run_nmem(["install", "gemini", "--format", "json"], env=env).stdout)
    assert again["changed"] == [] and settings.read_bytes() == once
    assert len(list((tmp_path / "nmem" / "backups").iterdir())) == 1
    assert run_nmem(["uninstall", "gemini"], env=env).returncode == 0
    assert json.loads(settings.read_text()) == USER_SETTINGS


def test_settings_with_comments_are_read_and_never_rewritten_without_them(tmp_path: Path) -> None:
    """Gemini CLI's settings.json may hold comments (it reads it through strip-json-comments):
    doctor reads it; install refuses to rewrite it (the comments would be lost), nothing changed."""
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    text = ('{\n  // my theme\n  "theme": "GitHub", /* not "this" */\n  "url": "http://x//y",\n'
            '  "hooks": {"BeforeTool": []}\n}\n')
    settings.write_text(text)
    env = env_for(tmp_path)
    done = run_nmem(["install", "gemini"], env=env)
    assert done.returncode != 0 and "has comments" in done.stderr and settings.read_text() == text
    assert not (tmp_path / "nmem" / "backups").exists() or not list((tmp_path / "nmem" / "backups").iterdir())
    checks = {c["name"]: c for c in json.loads(run_nmem(["doctor", "--format", "json"], env=env).stdout)["checks"]}
    assert "gemini config (user)" not in checks  # a valid Gemini settings file, read as Gemini reads it
    assert checks["gemini hooks"]["status"] == "warn"  # set up here, nmem not wired
    settings.write_text(text.replace("// my theme\n", "").replace('/* not "this" */', ""))
    assert run_nmem(["install", "gemini"], env=env).returncode == 0
    assert json.loads(settings.read_text())["url"] == "http://x//y"


def test_install_into_nothing_and_uninstall_leave_nothing(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    assert run_nmem(["install", "gemini"], env=env).returncode == 0
    assert run_nmem(["uninstall", "gemini"], env=env).returncode == 0
    assert list((tmp_path / "home").iterdir()) == []


def test_doctor_checks_the_gemini_wiring(installed: Path) -> None:
    def checks() -> dict[str, Any]:
        done = run_nmem(["doctor", "--format", "json"], env=env_for(installed))
        return {c["name"]: c for c in json.loads(done.stdout)["checks"]}

    assert checks()["gemini hooks (user)"]["status"] == "ok"
    assert checks()["gemini mcp server (user)"]["status"] == "ok"
    settings = installed / "home" / ".gemini" / "settings.json"
    data = json.loads(settings.read_text())
    settings.write_text(json.dumps({**data, "tools": {"enableHooks": False}}))
    found = checks()["gemini hooks (user)"]
    assert found["status"] == "fail" and "tools.enableHooks = false" in found["detail"]
    # Gemini CLI now keeps the switch and the list of hooks turned off in `hooksConfig`; a hook's
    # name there is its `name` (nmem's is "nmem") or else its command.
    settings.write_text(json.dumps({**data, "hooksConfig": {"enabled": True, "disabled": ["nmem"]}}))
    found = checks()["gemini hooks (user)"]
    assert found["status"] == "fail" and "hooksConfig.disabled" in found["detail"]
    settings.write_text(json.dumps({**data, "hooksConfig": {"enabled": False}}))
    assert checks()["gemini hooks (user)"]["status"] == "fail"
    settings.write_text(json.dumps({**data, "hooksConfig": {"disabled": ["auto-test"]}}))
    assert checks()["gemini hooks (user)"]["status"] == "ok"
