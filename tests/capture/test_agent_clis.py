"""nmem's installed hooks run by the agents' own CLIs, offline (no model, no API key): opt in by
naming the binaries (`npm install @google/gemini-cli` gives `node_modules/.bin/gemini`):

    NMEM_TEST_GEMINI_CLI=/path/to/gemini  pytest tests/capture/test_agent_clis.py

Gemini CLI: a BeforeAgent hook of the user's own denies the turn, so no model is called; nmem's
hooks beside it (merged into the same settings.json) record the session start, the prompt and
the session end the way a real session does. Checked with @google/gemini-cli 0.61.0.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

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
