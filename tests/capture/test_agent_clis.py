"""nmem's installed hooks run by the agents' own CLIs, offline (no model, no API key): opt in by
naming the binaries (`npm install @google/gemini-cli` gives `node_modules/.bin/gemini`):

    NMEM_TEST_GEMINI_CLI=/path/to/gemini  pytest tests/capture/test_agent_clis.py
    NMEM_TEST_CODEX_CLI=/path/to/codex    pytest tests/capture/test_agent_clis.py   # @openai/codex
    NMEM_TEST_CLAUDE_CLI=/path/to/claude  pytest tests/capture/test_agent_clis.py   # @anthropic-ai/claude-code

Gemini CLI: a BeforeAgent hook of the user's own denies the turn, so no model is called; nmem's
hooks beside it (merged into the same settings.json) record the session start, the prompt and
the session end the way a real session does. Checked with @google/gemini-cli 0.61.0.

Codex CLI: the same with a UserPromptSubmit hook that blocks; and Codex's hook trust, end to end:
`codex app-server`'s `hooks/list` (what the `/hooks` screen reads) names each hook by the key
`nmem doctor` computes, an untrusted nmem hook does not run, and once the user's trust record is
there (written here the way `/hooks` writes it, from the hash Codex gives) it does and doctor is
satisfied. Checked with @openai/codex 0.171.0.

Claude Code: `claude -p` with a UserPromptSubmit hook of the user's that blocks (20 s a run here,
most of it waiting on the network it does not have). Checked with @anthropic-ai/claude-code 2.1.197.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures.harness import hook_env, observations, query

GEMINI = os.environ.get("NMEM_TEST_GEMINI_CLI", "")
DENY = {"name": "offline-deny", "type": "command",
        "command": "echo '{\"decision\": \"deny\", \"reason\": \"offline test\"}'"}


@pytest.mark.skipif(not GEMINI, reason="set NMEM_TEST_GEMINI_CLI to a gemini binary")
def test_gemini_cli_runs_the_installed_hooks_beside_the_users_own(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "billing"
    (home / ".gemini").mkdir(parents=True)
    project.mkdir()
    settings = home / ".gemini" / "settings.json"
    settings.write_text(json.dumps({"hooks": {"BeforeAgent": [{"hooks": [DENY]}]}}))
    env = {**hook_env(tmp_path / "nmem"), "HOME": str(home)}
    assert run_nmem(["install", "gemini"], env=env).returncode == 0
    assert json.loads(settings.read_text())["hooks"]["BeforeAgent"][0] == {"hooks": [DENY]}
    cli_env = {**env, "GEMINI_API_KEY": "offline", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    for prompt in ("why does the invoice export time out", "stream the invoice rows"):
        done = subprocess.run([GEMINI, "-p", prompt], cwd=project, env=cli_env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0 and "offline test" in done.stdout + done.stderr, done.stderr[-2000:]
    sessions = query(tmp_path / "nmem", "SELECT agent, project, ended_at FROM sessions ORDER BY started_at")
    assert [(s["agent"], s["project"]) for s in sessions] == [("gemini", "billing")] * 2
    assert all(s["ended_at"] for s in sessions)  # SessionEnd on exit
    prompts = [p["content"] for p in query(tmp_path / "nmem", "SELECT content FROM prompts ORDER BY id")]
    assert prompts == ["why does the invoice export time out", "stream the invoice rows"]
    kinds = [(o["obs_type"], o["source_event"]) for o in observations(tmp_path / "nmem")]
    assert kinds.count(("session_start", "SessionStart")) == 2 and kinds.count(("session_end", "SessionEnd")) == 2


CODEX = os.environ.get("NMEM_TEST_CODEX_CLI", "")
BLOCK = {"type": "command", "command": "echo '{\"decision\": \"block\", \"reason\": \"offline test\"}'"}


def codex_hooks_list(env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    """The hooks Codex found, with their keys, hashes and trust, from `codex app-server`."""
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": "nmem-test",
                                                                                             "version": "0"}}},
                {"jsonrpc": "2.0", "method": "initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}}]
    with subprocess.Popen([CODEX, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        server.stdin.flush()
        try:
            for line in server.stdout:
                message = json.loads(line)
                if message.get("id") == 2:
                    (found,) = message["result"]["data"]
                    assert found["errors"] == [] and found["warnings"] == [], found
                    hooks: list[dict[str, Any]] = found["hooks"]
                    return hooks
        finally:
            server.kill()
    raise AssertionError("codex app-server gave no hooks/list answer")


def codex_exec(env: dict[str, str], cwd: Path, prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([CODEX, "exec", *flags, "--skip-git-repo-check", prompt], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def trust_records(hooks: list[dict[str, Any]]) -> str:
    """What `/hooks` writes into config.toml when the user trusts these hooks."""
    return "".join(f'\n[hooks.state."{h["key"]}"]\ntrusted_hash = "{h["currentHash"]}"\n' for h in hooks)


def doctor(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    done = run_nmem(["doctor", "--format", "json"], env=env)
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


@pytest.mark.skipif(not CODEX, reason="set NMEM_TEST_CODEX_CLI to a codex binary")
def test_codex_cli_runs_the_installed_hooks_once_trusted(tmp_path: Path) -> None:
    home, project, data = tmp_path / "home", tmp_path / "billing", tmp_path / "nmem"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    hooks_path = home / ".codex" / "hooks.json"
    hooks_path.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [BLOCK]}]}}))
    env = {**hook_env(data), "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    assert run_nmem(["install", "codex"], env=env).returncode == 0
    cli_env = {**env, "OPENAI_API_KEY": "sk-offline"}

    listed = codex_hooks_list(cli_env, project)
    ours = {h["eventName"]: h for h in listed if "--agent codex" in h["command"]}
    assert len(ours) == 7 and ours["sessionEnd"]["timeoutSec"] == 3
    assert all(h["trustStatus"] == "untrusted" for h in ours.values())
    trust = doctor(env)["codex hook trust (user)"]
    assert trust["status"] == "warn" and trust["detail"].count(", ") == 6  # all seven named

    # The user trusts their own hook only (so no model is called): nmem's are skipped, silently.
    config = home / ".codex" / "config.toml"
    (theirs,) = [h for h in listed if "--agent codex" not in h["command"]]
    config.write_text(config.read_text() + trust_records([theirs]))
    codex_exec(cli_env, project, "why does the invoice export time out")
    assert not (data / "nmem.db").exists() or query(data, "SELECT id FROM sessions") == []

    config.write_text(config.read_text() + trust_records(list(ours.values())))
    assert all(h["trustStatus"] == "trusted" for h in codex_hooks_list(cli_env, project)
               if "--agent codex" in h["command"])
    assert "codex hook trust (user)" not in doctor(env)

    codex_exec(cli_env, project, "stream the invoice rows")
    sessions = query(data, "SELECT agent, project, ended_at FROM sessions")
    assert [(s["agent"], s["project"]) for s in sessions] == [("codex", "billing")] and sessions[0]["ended_at"]
    assert [p["content"] for p in query(data, "SELECT content FROM prompts")] == ["stream the invoice rows"]
    again = codex_exec(cli_env, project, "and the export test")  # SessionStart answers with context now
    assert "hook: SessionStart Completed" in again.stderr and "Failed" not in again.stderr, again.stderr[-2000:]
    assert [p["content"] for p in query(data, "SELECT content FROM prompts ORDER BY id")][-1] == "and the export test"
    kinds = [(o["obs_type"], o["source_event"]) for o in observations(data)]
    assert ("session_start", "SessionStart") in kinds and ("session_end", "SessionEnd") in kinds


CLAUDE = os.environ.get("NMEM_TEST_CLAUDE_CLI", "")


@pytest.mark.skipif(not CLAUDE, reason="set NMEM_TEST_CLAUDE_CLI to a claude binary")
def test_claude_code_runs_the_installed_hooks_beside_the_users_own(tmp_path: Path) -> None:
    home, project, data = tmp_path / "home", tmp_path / "billing", tmp_path / "nmem"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [BLOCK]}]}}))
    env = {**hook_env(data), "HOME": str(home)}
    assert run_nmem(["install", "claude-code"], env=env).returncode == 0
    assert json.loads(settings.read_text())["hooks"]["UserPromptSubmit"][0] == {"hooks": [BLOCK]}
    cli_env = {**env, "ANTHROPIC_API_KEY": "sk-ant-offline", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    for prompt in ("why does the invoice export time out", "stream the invoice rows"):
        done = subprocess.run([CLAUDE, "-p", prompt], cwd=project, env=cli_env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0 and "offline test" in done.stdout + done.stderr, done.stderr[-2000:]
    sessions = query(data, "SELECT agent, project, ended_at FROM sessions ORDER BY started_at")
    assert [(s["agent"], s["project"]) for s in sessions] == [("claude-code", "billing")] * 2
    assert all(s["ended_at"] for s in sessions)
    prompts = [p["content"] for p in query(data, "SELECT content FROM prompts ORDER BY id")]
    assert prompts == ["why does the invoice export time out", "stream the invoice rows"]
