"""Codex CLI: hook events through the exact command `nmem install codex` writes, the install
itself (hooks.json and config.toml merged, backed up, idempotent, removed exactly), doctor, the
session-file import, and one memory shared with Claude Code in both directions.

Payload shapes: tests/fixtures/codex_shapes.py; rollout lines: tests/fixtures/codex/SOURCES.md.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures import codex_shapes as cx
from fixtures.harness import event, hook_env, hook_ok, observations, query

CWD = "/home/dev/code/codex-demo"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
ROLLOUT = next(FIXTURES.glob("rollout-*.jsonl"))
USER_CONFIG = """# my Codex settings
model = "gpt-5-codex"   # keep this comment

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[projects."/home/dev/code/billing"]
trust_level = "trusted"
"""
USER_HOOKS: dict[str, Any] = {"hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/guard.sh"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
}}


def env_for(tmp_path: Path) -> dict[str, str]:
    env = hook_env(tmp_path / "nmem")
    env["HOME"] = str(tmp_path / "home")
    env.pop("CODEX_HOME", None)
    return env


def nmem_ok(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = run_nmem(args, env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def installed_command(tmp_path: Path, event_name: str = "PostToolUse") -> list[str]:
    hooks = json.loads((tmp_path / "home" / ".codex" / "hooks.json").read_text())
    commands = [h["command"] for group in hooks["hooks"][event_name] for h in group["hooks"]]
    ours = [c for c in commands if "--agent codex" in c]
    assert len(ours) == 1, commands
    return shlex.split(ours[0])


def codex_hook(tmp_path: Path, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """One event through the command Codex runs: the installed command line, JSON on stdin."""
    command = installed_command(tmp_path, payload["hook_event_name"])
    return subprocess.run(command, input=json.dumps(payload), capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=60, check=False, cwd=tmp_path)


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    nmem_ok(["install", "codex"], env_for(tmp_path))
    return tmp_path


def test_events_through_the_installed_command_are_recorded_as_codex(installed: Path) -> None:
    home = installed / "nmem"
    for payload in (cx.session_start(CWD), cx.prompt(CWD, "make the export stream rows"),
                    cx.apply_patch(CWD, cx.PATCH),
                    cx.bash(CWD, "rg -n export_rows src", "Exit code: 0\nWall time: 0.1 seconds\nOutput:\n"
                            "src/billing/invoice.py:12:def export_rows(q):\n"),
                    cx.bash(CWD, "pytest -q", "Process exited with code 1\nOutput:\nFAILED tests/test_invoice.py"
                            "::test_export - TypeError: object of type 'generator' has no len()\n"),
                    cx.tool(CWD, "mcp__github__get_issue", {"owner": "acme", "repo": "billing", "number": 7},
                            {"content": [{"type": "text", "text": "Export buffers every row"}]}),
                    cx.pre_compact(CWD), cx.stop(CWD, "Streaming is in; one test still calls len().")):
        done = codex_hook(installed, payload)
        assert done.returncode == 0 and done.stderr == "", (payload["hook_event_name"], done.stderr)
    sessions = query(home, "SELECT id, agent, ended_at FROM sessions")
    assert sessions == [{"id": cx.SESSION, "agent": "codex", "ended_at": sessions[0]["ended_at"]}]
    assert sessions[0]["ended_at"] is not None
    rows = {o["obs_type"]: o for o in observations(home)}
    patch = rows["file_edit"]
    assert patch["file_path"] == f"{CWD}/src/app.py" and patch["tool_name"] == "apply_patch"
    assert [(f["path"], f["action"]) for f in patch["metadata"]["files"]] == [
        (f"{CWD}/src/app.py", "update"), (f"{CWD}/src/stream.py", "add")]
    assert "PATCH" not in patch["content"] and "stream_rows" not in patch["content"]  # no patch body stored
    assert rows["command"]["content"] == "rg -n export_rows src"
    failed = rows["command_error"]
    assert failed["metadata"]["exit_code"] == 1 and "has no len()" in failed["metadata"]["error_line"]
    assert rows["mcp_call"]["metadata"]["server"] == "github"
    assert "Export buffers every row" in rows["mcp_call"]["content"]
    prompts = query(home, "SELECT source, content FROM prompts ORDER BY id")
    assert prompts == [{"source": "user", "content": "make the export stream rows"},
                       {"source": "agent", "content": "Streaming is in; one test still calls len()."}]


def test_session_start_answers_json_with_additional_context(installed: Path) -> None:
    codex_hook(installed, cx.prompt(CWD, "make the export stream rows", session_id="first"))
    codex_hook(installed, cx.stop(CWD, "done for today", session_id="first"))
    done = codex_hook(installed, cx.session_start(CWD, session_id="second"))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # Codex fails a hook whose JSON-looking stdout does not parse
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "make the export stream rows" in out["hookSpecificOutput"]["additionalContext"]


def test_unknown_codex_events_are_accepted_and_store_nothing(installed: Path) -> None:
    for name in ("PreToolUse", "PermissionRequest", "PostCompact", "StopFailure", "SubagentStart"):
        payload = cx.common(name, CWD, session_id="other", turn_id="t")
        done = subprocess.run(installed_command(installed, "SessionStart"), input=json.dumps(payload),
                              capture_output=True, text=True, env=env_for(installed), timeout=60, check=False)
        assert done.returncode == 0 and done.stdout == "", (name, done.stderr)
    assert not (installed / "nmem" / "nmem.db").exists() or query(installed / "nmem", "SELECT * FROM sessions") == []


def test_bad_codex_input_is_refused_with_a_clear_error(installed: Path) -> None:
    payload = cx.tool(CWD, "Bash", {"command": "ls"}, "x")
    del payload["tool_name"]
    done = codex_hook(installed, {**payload, "hook_event_name": "PostToolUse"})
    assert done.returncode == 1 and "without 'tool_name'" in done.stderr
    bad_agent = run_nmem(["record", "--agent", "vim"], stdin="{}", env=env_for(installed))
    assert bad_agent.returncode == 1 and "unknown agent 'vim'" in bad_agent.stderr


# -- one memory, both agents -------------------------------------------------------------------------------


def test_claude_code_session_start_sees_what_codex_left_open(installed: Path) -> None:
    codex_hook(installed, cx.prompt(CWD, "migrate the invoice export to streaming"))
    codex_hook(installed, cx.bash(CWD, "pytest -q", "Exit code: 1\nOutput:\nFAILED tests/test_invoice.py::"
                                  "test_export - TypeError: generator has no len()\n"))
    codex_hook(installed, cx.stop(CWD, "Streaming works; test_export still fails."))
    out = hook_ok(installed / "nmem", event("SessionStart", "claude-1", CWD, source="startup"))
    assert "migrate the invoice export to streaming" in out
    assert "test_export" in out
    assert f"## Last session s{cx.SESSION[:8]} (codex) ·" in out  # whose work it was
    agents = {r["id"]: r["agent"] for r in query(installed / "nmem", "SELECT id, agent FROM sessions")}
    assert agents == {cx.SESSION: "codex", "claude-1": "claude-code"}


def test_codex_session_start_sees_what_claude_code_left_open(installed: Path) -> None:
    home = installed / "nmem"
    hook_ok(home, event("UserPromptSubmit", "claude-1", CWD, prompt="add retries to the webhook sender"))
    hook_ok(home, event("PostToolUse", "claude-1", CWD, tool_name="Edit",
                        tool_input={"file_path": f"{CWD}/src/webhooks.py", "old_string": "send()",
                                    "new_string": "send_with_retry()"},
                        tool_response={"filePath": f"{CWD}/src/webhooks.py"}))
    hook_ok(home, event("Stop", "claude-1", CWD, last_assistant_message="Retries added; backoff not tuned yet."))
    done = codex_hook(installed, cx.session_start(CWD, session_id="codex-2"))
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "add retries to the webhook sender" in context and "src/webhooks.py" in context


# -- install / uninstall -------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_install_merges_is_idempotent_and_uninstall_restores_what_was_there(tmp_path: Path) -> None:
    codex_dir = tmp_path / "home" / ".codex"
    codex_dir.mkdir(parents=True)
    (codex_dir / "config.toml").write_text(USER_CONFIG)
    (codex_dir / "hooks.json").write_text(json.dumps(USER_HOOKS, indent=4))
    before = snapshot(codex_dir)
    env = env_for(tmp_path)
    nmem_ok(["install", "codex"], env)
    config_text = (codex_dir / "config.toml").read_text()
    assert config_text.startswith(USER_CONFIG)  # comments, order and formatting kept
    config = tomllib.loads(config_text)
    assert config["mcp_servers"]["github"]["command"] == "npx"
    assert config["mcp_servers"]["nmem"]["args"] == ["serve"]
    assert os.path.isabs(config["mcp_servers"]["nmem"]["command"])
    hooks = json.loads((codex_dir / "hooks.json").read_text())["hooks"]
    assert hooks["PreToolUse"] == USER_HOOKS["hooks"]["PreToolUse"]
    assert hooks["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0] and len(hooks["Stop"]) == 2
    assert set(hooks) >= {"SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop", "SubagentStop"}
    backups = sorted((tmp_path / "nmem" / "backups").iterdir())
    assert len(backups) == 2 and {b.read_bytes() for b in backups} == set(before.values())
    installed_once = snapshot(codex_dir)
    again = json.loads(nmem_ok(["install", "codex", "--format", "json"], env).stdout)
    assert again["changed"] == [] and snapshot(codex_dir) == installed_once
    assert len(list((tmp_path / "nmem" / "backups").iterdir())) == 2
    nmem_ok(["uninstall", "codex"], env)
    after = snapshot(codex_dir)
    assert after["config.toml"] == before["config.toml"]  # edited as text: every byte comes back
    assert json.loads(after["hooks.json"]) == USER_HOOKS  # JSON is rewritten: the same data comes back
    assert set(after) == set(before)


def test_install_into_nothing_creates_files_that_uninstall_removes(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    nmem_ok(["install", "codex"], env)
    assert (tmp_path / "home" / ".codex" / "hooks.json").is_file()
    assert tomllib.loads((tmp_path / "home" / ".codex" / "config.toml").read_text())["mcp_servers"]["nmem"]
    nmem_ok(["uninstall", "codex"], env)
    assert list((tmp_path / "home").iterdir()) == []


def test_project_scope_writes_the_projects_codex_dir(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    project = tmp_path / "repo"
    project.mkdir()
    env = env_for(tmp_path)
    done = nmem_ok(["install", "codex", "--scope", "project", "--project-dir", str(project)], env)
    assert "trusted project" in done.stderr
    assert (project / ".codex" / "hooks.json").is_file() and (project / ".codex" / "config.toml").is_file()
    assert not (tmp_path / "home" / ".codex").exists()
    nmem_ok(["uninstall", "codex", "--scope", "project", "--project-dir", str(project)], env)
    assert list(project.iterdir()) == []


def test_a_server_named_nmem_that_is_not_ours_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    codex_dir = tmp_path / "home" / ".codex"
    codex_dir.mkdir(parents=True)
    (codex_dir / "config.toml").write_text('[mcp_servers.nmem]\ncommand = "neural-memory-mcp"\n')
    done = run_nmem(["install", "codex"], env=env_for(tmp_path))
    assert done.returncode != 0 and "not nmem" in done.stderr
    assert snapshot(codex_dir) == {"config.toml": b'[mcp_servers.nmem]\ncommand = "neural-memory-mcp"\n'}


def test_a_broken_config_toml_is_reported_not_overwritten(tmp_path: Path) -> None:
    codex_dir = tmp_path / "home" / ".codex"
    codex_dir.mkdir(parents=True)
    (codex_dir / "config.toml").write_text("model = \n")
    done = run_nmem(["install", "codex"], env=env_for(tmp_path))
    assert done.returncode != 0 and "config.toml" in done.stderr
    assert (codex_dir / "config.toml").read_text() == "model = \n" and not (codex_dir / "hooks.json").exists()


def test_session_end_is_wired_within_codexs_cap_and_recorded(installed: Path) -> None:
    hooks = json.loads((installed / "home" / ".codex" / "hooks.json").read_text())["hooks"]
    (handler,) = [h for g in hooks["SessionEnd"] for h in g["hooks"]]
    assert handler["timeout"] == 3  # Codex caps a SessionEnd hook at 3 s (and gives 1 s unless told)
    for payload in (cx.prompt(CWD, "tidy the export"), cx.session_end(CWD)):
        done = codex_hook(installed, payload)
        assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done
    rows = [(o["obs_type"], o["source_event"]) for o in observations(installed / "nmem")]
    assert ("session_end", "SessionEnd") in rows


def test_install_tells_about_codexs_hook_trust_only_when_it_changed_hooks(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    assert "/hooks" in nmem_ok(["install", "codex"], env).stderr
    assert "/hooks" not in nmem_ok(["install", "codex"], env).stderr


def test_install_notes_hooks_written_inline_in_config_toml(tmp_path: Path) -> None:
    """Codex reads hooks from `hooks.json` and from inline `[hooks]` tables in config.toml, runs both
    and warns when one layer has both (developers.openai.com/codex/hooks); `[hooks.state]` is
    only its trust records."""
    codex_dir = tmp_path / "home" / ".codex"
    codex_dir.mkdir(parents=True)
    trust = '[hooks.state."/x/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:1"\n'
    (codex_dir / "config.toml").write_text(trust)
    env = env_for(tmp_path)
    assert "has hooks of its own" not in nmem_ok(["install", "codex"], env).stderr
    (codex_dir / "config.toml").write_text(trust + '\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\n'
                                           'command = "notify-send done"\n')
    assert "has hooks of its own" in nmem_ok(["install", "codex"], env).stderr


def test_a_reinstall_keeps_every_hooks_place_so_codexs_trust_records_stay_valid(tmp_path: Path) -> None:
    """Codex keys a hook's trust by `<file>:<event>:<group>:<handler>`: a reinstall (a new nmem
    path, say) rewrites nmem's handler where it is and moves no one's hook."""
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    nmem_ok(["install", "codex"], env)
    path = tmp_path / "home" / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    ours = data["hooks"]["Stop"][0]["hooks"][0]["command"]
    mine = {"type": "command", "command": "notify-send done", "timeout": 5}
    data["hooks"]["Stop"].append({"hooks": [mine]})
    data["hooks"]["Stop"][0]["hooks"][0]["command"] = "/old/venv/bin/nmem record --agent codex"  # an older install
    path.write_text(json.dumps(data))
    nmem_ok(["install", "codex"], env)
    stop = json.loads(path.read_text())["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": ours, "timeout": 30}]}, {"hooks": [mine]}]
    before = path.read_bytes()
    nmem_ok(["install", "codex"], env)
    assert path.read_bytes() == before


# -- doctor --------------------------------------------------------------------------------------------------


def doctor_checks(env: dict[str, str], cwd: Path) -> dict[str, dict[str, Any]]:
    done = subprocess.run([*run_nmem_prefix(), "doctor", "--format", "json"], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60, check=False)
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def run_nmem_prefix() -> list[str]:
    import sys

    return [sys.executable, "-m", "nmem"]


def test_doctor_checks_the_codex_wiring(installed: Path) -> None:
    env = env_for(installed)
    checks = doctor_checks(env, installed)
    assert checks["codex hooks (user)"]["status"] == "ok"
    assert checks["codex mcp server (user)"]["status"] == "ok"
    config = installed / "home" / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n[features]\nhooks = false\n")
    checks = doctor_checks(env, installed)
    assert checks["codex hooks (user)"]["status"] == "fail" and "features.hooks = false" in checks[
        "codex hooks (user)"]["detail"]


def test_doctor_names_the_nmem_hooks_codex_has_no_trust_record_for(installed: Path) -> None:
    env = env_for(installed)
    found = doctor_checks(env, installed)["codex hook trust (user)"]
    assert found["status"] == "warn" and "SessionStart" in found["detail"] and "/hooks" in found["hint"]
    hooks_path = installed / "home" / ".codex" / "hooks.json"
    hooks = json.loads(hooks_path.read_text())["hooks"]
    config = installed / "home" / ".codex" / "config.toml"
    snake = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit", "PostToolUse": "post_tool_use",
             "PreCompact": "pre_compact", "Stop": "stop", "SubagentStop": "subagent_stop", "SessionEnd": "session_end"}
    records = "".join(f'\n[hooks.state."{hooks_path}:{snake[e]}:0:0"]\ntrusted_hash = "sha256:{"0" * 64}"\n'
                      for e in hooks if e != "Stop")
    config.write_text(config.read_text() + records)  # what /hooks writes once the user trusts them
    found = doctor_checks(env, installed)["codex hook trust (user)"]
    assert found["status"] == "warn" and "no trust record for nmem's Stop hooks" in found["detail"]
    config.write_text(config.read_text() + f'\n[hooks.state."{hooks_path}:stop:0:0"]\ntrusted_hash = "sha256:1"\n')
    assert "codex hook trust (user)" not in doctor_checks(env, installed)


def test_doctor_says_nothing_about_codex_where_it_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    assert not [name for name in doctor_checks(env_for(tmp_path), tmp_path) if name.startswith("codex")]


def test_doctor_warns_when_codex_is_here_but_not_wired(tmp_path: Path) -> None:
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    checks = doctor_checks(env_for(tmp_path), tmp_path)
    assert checks["codex hooks"]["status"] == "warn" and checks["codex hooks"]["hint"] == "nmem install codex"


# -- importing session files -----------------------------------------------------------------------------------


def import_codex(tmp_path: Path, path: Path) -> dict[str, Any]:
    done = nmem_ok(["import", "codex", str(path), "--format", "json"], env_for(tmp_path))
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_import_reads_every_reply_tool_call_and_compaction_and_resumes(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions" / "2025" / "10" / "29"
    sessions.mkdir(parents=True)
    rollout = sessions / ROLLOUT.name
    shutil.copy(ROLLOUT, rollout)
    home = tmp_path / "nmem"
    first = import_codex(tmp_path, tmp_path / "sessions")
    assert first["imported_sessions"] == 1 and first["errors"] == []
    assert query(home, "SELECT agent FROM sessions") == [{"agent": "codex"}]
    prompts = query(home, "SELECT source, content FROM prompts ORDER BY id")
    users = [p["content"] for p in prompts if p["source"] == "user"]
    assert users == ["make the invoice export stream rows instead of buffering them", "fix the test too"]
    replies = [p["content"] for p in prompts if p["source"] == "agent"]
    assert replies.count("The export now streams rows; one test still calls len() on the result.") == 1
    assert "**Locating the export code**" in [p["content"] for p in prompts if p["source"] == "thinking"]
    obs = observations(home)
    kinds = [(o["obs_type"], o["tool_name"]) for o in obs if o["tool_name"]]
    assert kinds == [("command", "Bash"), ("file_edit", "apply_patch"), ("command_error", "Bash")]
    assert [o["content"] for o in obs if o["obs_type"] == "command"] == ["rg -n 'def export_rows' src"]
    assert "has no len()" in next(o for o in obs if o["obs_type"] == "command_error")["metadata"]["error_line"]
    checkpoint = query(home, "SELECT content FROM memories WHERE tags LIKE '%checkpoint%'")
    assert checkpoint and "iter(q)" in checkpoint[0]["content"]
    again = import_codex(tmp_path, tmp_path / "sessions")
    assert again["events"] == 0 and again["skipped_sessions"] == 1
    text = nmem_ok(["import", "codex", str(tmp_path / "sessions")], env_for(tmp_path)).stdout.splitlines()
    assert text[0] == "Codex import" and [line.split() for line in text[4:]] == [
        ["session", "files", "1"], ["sessions", "imported", "0"], ["sessions", "updated", "(new", "events)", "0"],
        ["sessions", "skipped", "(nothing", "new)", "1"], ["events", "recorded", "0"]]
    # Codex goes on writing: the pending exec_command gets its output, then a reply.
    with rollout.open("a") as fh:
        fh.write(json.dumps({"timestamp": "2025-10-29T01:00:32.000Z", "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "call_exec02",
            "output": "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n"
                      "def test_export():\n"}}) + "\n")
        fh.write(json.dumps({"timestamp": "2025-10-29T01:00:40.000Z", "type": "event_msg",
                             "payload": {"type": "agent_message", "message": "test_export now wraps list()."}}) + "\n")
    third = import_codex(tmp_path, rollout)
    assert third["updated_sessions"] == 1
    obs = observations(home, "tool_name = 'Bash' AND content LIKE 'sed%'")
    assert [o["content"] for o in obs] == ["sed -n 1,40p tests/test_invoice.py"]
    assert query(home, "SELECT COUNT(*) AS n FROM prompts WHERE content = 'test_export now wraps list().'")[0]["n"] == 1
