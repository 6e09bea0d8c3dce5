"""The repository root as a Claude Code plugin marketplace, installed with the real `claude` CLI.

`claude plugin marketplace add <this checkout>` then `claude plugin install nmem@nmem`, with
HOME in a temporary directory; then every hook the installed plugin declares is run the way
Claude Code runs a command hook (`sh -c`, JSON on stdin) and must reach *this* nmem, even with
another program's `nmem` first on PATH (neural-memory and others install one).

The CLI comes from npm: `claude` on PATH, or `@anthropic-ai/claude-code` installed once into
~/.cache/nmem-tests/claude-code; the tests skip, saying why, when neither can be had.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.harness import counts, event, hook_env, query

REPO = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "nmem-tests" / "claude-code"
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
         "DISABLE_ERROR_REPORTING": "1"}


def claude_cli() -> str:
    found = os.environ.get("NMEM_TEST_CLAUDE") or shutil.which("claude")
    if found:
        return found
    cached = CACHE / "node_modules" / ".bin" / "claude"
    if cached.exists():
        return str(cached)
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("no `claude` CLI and no npm to install @anthropic-ai/claude-code")
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([npm, "install", "--prefix", str(CACHE), "@anthropic-ai/claude-code"],
                              capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("npm install @anthropic-ai/claude-code timed out")
    if done.returncode != 0 or not cached.exists():
        pytest.skip(f"npm install @anthropic-ai/claude-code failed: {done.stderr.strip()[-300:]}")
    return str(cached)


@pytest.fixture(scope="module")
def claude() -> str:
    return claude_cli()


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NMEM_", "CLAUDE_", "ANTHROPIC_"))}
    return {**env, **QUIET, "HOME": str(home)}


def run(claude: str, args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([claude, *args], capture_output=True, text=True, env=cli_env(home), timeout=120,
                          check=False, cwd=home)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def installed_plugin(claude: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("claude-home")
    run(claude, ["plugin", "validate", str(REPO)], home)
    run(claude, ["plugin", "marketplace", "add", str(REPO)], home)
    run(claude, ["plugin", "install", "nmem@nmem"], home)
    registry = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    (entry,) = registry["plugins"]["nmem@nmem"]
    return Path(entry["installPath"])


def test_the_marketplace_and_the_plugin_validate(claude: str, tmp_path: Path) -> None:
    assert "passed" in run(claude, ["plugin", "validate", str(REPO / "plugins" / "nmem")], tmp_path).stdout


def hook_commands(plugin: Path) -> dict[str, list[str]]:
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    return {name: [h["command"] for g in groups for h in g["hooks"]] for name, groups in hooks.items()}


def impostor_bin(tmp_path: Path) -> Path:
    """A directory whose `nmem` is another program (as neural-memory's would be): it records nothing."""
    bin_dir = tmp_path / "other-bin"
    bin_dir.mkdir()
    fake = bin_dir / "nmem"
    fake.write_text("#!/bin/sh\necho 'neural-memory: unknown command' >&2\nexit 3\n")
    fake.chmod(0o755)
    return bin_dir


def test_the_installed_plugins_hooks_reach_this_nmem(installed_plugin: Path, tmp_path: Path) -> None:
    commands = hook_commands(installed_plugin)
    assert {c for cs in commands.values() for c in cs} == {"nmem-memory record"}
    ours = Path(sys.executable).parent
    assert (ours / "nmem-memory").exists(), "the nmem-memory console script is not installed"
    home = tmp_path / "nmem-home"
    path = f"{impostor_bin(tmp_path)}:{ours}:/usr/bin:/bin"  # the other `nmem` comes first
    cwd = "/home/dev/code/plugin-demo"
    payloads: dict[str, dict[str, Any]] = {
        "SessionStart": event("SessionStart", "plug-1", cwd, source="startup"),
        "UserPromptSubmit": event("UserPromptSubmit", "plug-1", cwd, prompt="wire the plugin"),
        "PostToolUse": event("PostToolUse", "plug-1", cwd, tool_name="Bash", tool_input={"command": "make test"},
                             tool_response={"stdout": "ok", "stderr": ""}),
        "Stop": event("Stop", "plug-1", cwd, last_assistant_message="Plugin wired."),
        "SessionEnd": event("SessionEnd", "plug-1", cwd, reason="exit"),
    }
    for name, payload in payloads.items():
        (command,) = commands[name]
        done = subprocess.run(["sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
                              env=hook_env(home, PATH=path), timeout=60, check=False)
        assert (done.returncode, done.stderr) == (0, ""), (name, done.stderr)
    assert counts(home)["prompts"] == 2
    assert query(home, "SELECT agent, ended_at IS NOT NULL AS ended FROM sessions") == [
        {"agent": "claude-code", "ended": 1}]


def test_the_installed_plugins_mcp_server_is_this_nmem(installed_plugin: Path) -> None:
    server = json.loads((installed_plugin / ".mcp.json").read_text())["mcpServers"]["nmem"]
    assert server["command"] == "nmem-memory" and server["args"] == ["serve"]
    done = subprocess.run([str(Path(sys.executable).parent / server["command"]), "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0 and "nmem" in done.stdout.lower()
