"""Helpers shared by the CLI tests: a runner, and one small recorded history to query.

No tests live here; `test_cli*.py` import these names.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner, Result

from conftest import record
from nmem.adapters.cli import cli
from nmem.service.api import Service

CWD = "/work/demo"          # project "demo"
OTHER_CWD = "/work/other"   # project "other"
AUTH_FILE = "/work/demo/src/auth.py"


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """Run `nmem ARGS` in-process through click's runner; exceptions propagate to the test."""
    return CliRunner().invoke(cli, list(args), input=input, env=env, catch_exceptions=False)


def ok(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    result = invoke(*args, input=input, env=env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result


def as_json(*args: str, input: str | None = None) -> Any:
    return json.loads(ok(*args, "--format", "json", input=input).stdout)


def stderr_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


@dataclass
class History:
    """Ids of what `seed` recorded."""

    start: int
    test_cmd: int
    failure: int
    read: int
    edit: int
    other_cmd: int


def bash(service: Service, cmd: str, at: int, *, code: int = 0, session_id: str = "s1", cwd: str = CWD,
         stdout: str = "ok") -> int:
    out = record(service, "PostToolUse", now=at, session_id=session_id, cwd=cwd, tool_name="Bash",
                 tool_input={"command": cmd}, tool_response={"stdout": stdout, "exit_code": code})
    return int(out.observation_id)


def seed(service: Service, now: int | None = None) -> History:
    """Session s1 in project demo (prompt, test run, failure, read, edit) and s2 in project other."""
    t = int(time.time()) - 3600 if now is None else now
    start = record(service, "SessionStart", now=t, session_id="s1", cwd=CWD, source="startup").observation_id
    record(service, "UserPromptSubmit", now=t + 10, session_id="s1", cwd=CWD, prompt="fix the flaky auth test")
    test_cmd = bash(service, "pytest tests/test_auth.py -q", t + 20, stdout="3 passed")
    failure = bash(service, "pytest tests/test_login.py", t + 30, code=1, stdout="AssertionError: token expired")
    read = record(service, "PostToolUse", now=t + 40, session_id="s1", cwd=CWD, tool_name="Read",
                  tool_input={"file_path": AUTH_FILE}).observation_id
    edit = record(service, "PostToolUse", now=t + 50, session_id="s1", cwd=CWD, tool_name="Edit",
                  tool_input={"file_path": AUTH_FILE, "old_string": "ttl = 60", "new_string": "ttl = 3600"}
                  ).observation_id
    other_cmd = bash(service, "docker compose up auth-proxy", t + 60, session_id="s2", cwd=OTHER_CWD)
    return History(int(start), test_cmd, failure, int(read), int(edit), other_cmd)
