"""`nmem trace` and MCP `session_trace` without a session open the last session with content,
never the one whose SessionStart the hook has just recorded (the agent asking is in it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fixtures.harness import event, hook_env, hook_ok


def test_trace_without_argument_skips_the_session_that_just_started(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "code" / "shop"
    project.mkdir(parents=True)
    cwd = str(project)
    for payload in [
        event("SessionStart", "sess-done", cwd, source="startup"),
        event("UserPromptSubmit", "sess-done", cwd, prompt="add the CSV importer"),
        event("PostToolUse", "sess-done", cwd, tool_name="Write",
              tool_input={"file_path": f"{cwd}/importer.py", "content": "import csv\n"}),
        event("Stop", "sess-done", cwd, last_assistant_message="The importer is in importer.py."),
        event("SessionEnd", "sess-done", cwd, reason="prompt_input_exit"),
        event("SessionStart", "sess-now", cwd, source="startup"),
    ]:
        hook_ok(home, payload)
    done = subprocess.run([sys.executable, "-m", "nmem", "trace", "--format", "json"], cwd=cwd,
                          env=hook_env(home), capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert trace["session_id"] == "sess-done"
    assert [p["content"] for p in trace["prompts"] if p["source"] == "user"] == ["add the CSV importer"]
    assert "the latest session of project shop: ssess-don" in done.stderr
    # once the new session has content, it is the latest
    hook_ok(home, event("UserPromptSubmit", "sess-now", cwd, prompt="now the exporter"))
    again = subprocess.run([sys.executable, "-m", "nmem", "trace", "--format", "json"], cwd=cwd,
                           env={**hook_env(home), "PWD": cwd}, capture_output=True, text=True, check=False,
                           timeout=60)
    assert json.loads(again.stdout)["session_id"] == "sess-now", again.stderr
