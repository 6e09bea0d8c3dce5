"""The CLI as a shell runs it: real processes, pipes and exit codes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import hook_payload, run_nmem

pytestmark = pytest.mark.slow


@pytest.fixture
def env(nmem_home: Path) -> dict[str, str]:
    return {**os.environ, "NMEM_HOME": str(nmem_home)}


@pytest.fixture
def nmem_bin(tmp_path: Path) -> Path:
    """An `nmem` executable on PATH that runs this checkout's interpreter, for xargs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nmem"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nmem "$@"\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def record_command(env: dict[str, str], command: str, code: int = 0) -> None:
    payload = hook_payload("PostToolUse", cwd="/work/demo", tool_name="Bash", tool_input={"command": command},
                           tool_response={"stdout": "", "exit_code": code})
    done = run_nmem(["record"], stdin=json.dumps(payload), env=env)
    assert done.returncode == 0, done.stderr


def test_search_ids_piped_into_purge(env: dict[str, str], nmem_bin: Path) -> None:
    for command in ("rm -rf stale-cache", "ls stale-dir", "make build"):
        record_command(env, command)
    shell_env = {**env, "PATH": f"{nmem_bin}{os.pathsep}{env['PATH']}"}
    done = subprocess.run(["bash", "-c", 'nmem search "stale" --ids | xargs -I{} nmem purge --id {} --confirm'],
                          env=shell_env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert 'nmem: 2 results for "stale"' in lines
    assert lines.count("nmem: purged 1 observation") == 2
    left = run_nmem(["search", "--format", "json"], env=env)
    assert [hit["content_preview"] for hit in json.loads(left.stdout) if hit["kind"] == "observation"] == ["make build"]


def test_malformed_query_in_a_real_process(env: dict[str, str]) -> None:
    record_command(env, "echo hello")
    done = run_nmem(["search", '"unbalanced'], env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("nmem: invalid search query")


def test_json_output_and_count_line_in_a_real_process(env: dict[str, str]) -> None:
    record_command(env, "cargo test auth", code=101)
    done = run_nmem(["search", "cargo", "--format", "json"], env=env)
    assert done.returncode == 0
    [hit] = json.loads(done.stdout)
    assert hit["obs_type"] == "command_error"
    assert done.stderr == 'nmem: 1 results for "cargo"\n'
    missing = run_nmem(["forget", "01NOSUCHMEMORY"], env=env)
    assert (missing.returncode, missing.stderr) == (10, "nmem: memory not found: 01NOSUCHMEMORY\n")


def test_record_help_goes_through_click_and_record_does_not_load_it(env: dict[str, str]) -> None:
    helped = run_nmem(["record", "--help"], env=env)
    assert helped.returncode == 0
    assert helped.stdout.startswith("Usage: nmem record")
    # A hook run leaves through os._exit; catch the exit to report what was imported by then.
    probe = ("import json, os, sys\n"
             "real_exit = os._exit\n"
             "def report(code):\n"
             "    print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in "
             "('click', 'yaml') or m.startswith('nmem.adapters.cli'))]), file=sys.stderr)\n"
             "    sys.stderr.flush()\n"
             "    real_exit(code)\n"
             "os._exit = report\n"
             "from nmem.__main__ import main\n"
             "main(['record'])\n")
    payload = hook_payload("UserPromptSubmit", cwd="/work/demo", prompt="hello")
    done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(payload), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    code, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0
    assert loaded == []
