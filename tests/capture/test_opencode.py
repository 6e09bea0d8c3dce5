"""OpenCode: the plugin file `nmem install opencode` writes, loaded by Node as OpenCode loads it
and driven with OpenCode's plugin hook arguments (opencode.ai/docs/plugins: `event` with
session.created / session.idle / session.compacted, `chat.message` (input {sessionID}, output
{message, parts}), `tool.execute.before` / `.after` (input {tool, sessionID, callID}, output
{args} / {title, output, metadata})); each event reaches nmem through the hook command the file
holds. Then the install's merge, idempotence and exact removal, and doctor."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_nmem
from fixtures.harness import hook_env, observations, query

ROOT = "/home/dev/code/opencode-demo"
DRIVER = """
const [plugin, root] = process.argv.slice(2)
const { NmemPlugin } = await import(plugin)
const hooks = await NmemPlugin({ directory: root, worktree: root, project: {}, client: {}, $: null })
const sid = "ses_7f3a2b"
await hooks.event({ event: { type: "session.created", properties: { info: { id: sid, directory: root } } } })
await hooks["chat.message"]({ sessionID: sid, agent: "build" }, { message: { role: "user" },
  parts: [{ type: "text", text: "make the CSV export stream rows" }] })
const tool = async (name, callID, args, output, metadata) => {
  await hooks["tool.execute.before"]({ tool: name, sessionID: sid, callID }, { args })
  await hooks["tool.execute.after"]({ tool: name, sessionID: sid, callID }, { title: name, output, metadata })
}
await tool("read", "c1", { filePath: root + "/src/export.ts" }, "<file>...</file>", {})
await tool("edit", "c2", { filePath: root + "/src/export.ts", oldString: "rows.join()", newString: "stream(rows)" },
  "", { diff: "..." })
await tool("bash", "c3", { command: "bun test export", description: "Run the export tests" },
  "1 fail: expected string, got ReadableStream", { exit: 1 })
// The reply, as OpenCode's bus sends it: each step an assistant message, its text streamed as
// message.part.updated (the whole text so far, and the delta); reasoning and synthetic text are not the reply.
const message = (id, role, completed) => hooks.event({ event: { type: "message.updated", properties: { info: {
  id, sessionID: sid, role, parentID: "msg_u1", modelID: "claude-sonnet-4", providerID: "anthropic", mode: "build",
  path: { cwd: root, root }, cost: 0, tokens: { input: 1, output: 1, reasoning: 0, cache: { read: 0, write: 0 } },
  time: completed ? { created: 1, completed: 2 } : { created: 1 } } } } })
const part = (id, messageID, type, text, extra = {}) => hooks.event({ event: { type: "message.part.updated",
  properties: { part: { id, sessionID: sid, messageID, type, text, time: { start: 1 }, ...extra },
                delta: text.slice(-5) } } })
await hooks.event({ event: { type: "message.updated", properties: { info: { id: "msg_u1", sessionID: sid,
  role: "user", time: { created: 1 }, agent: "build", model: { providerID: "anthropic", modelID: "x" } } } } })
await part("prt_u1", "msg_u1", "text", "make the CSV export stream rows")
await message("msg_a1", "assistant", false)
await part("prt_a1", "msg_a1", "text", "I'll read the exporter first.")
await message("msg_a1", "assistant", true)
await message("msg_a2", "assistant", false)
await part("prt_r2", "msg_a2", "reasoning", "The test expects a string; stream and join in the test.")
await part("prt_a2", "msg_a2", "text", "Export now")
await part("prt_a2", "msg_a2", "text", "Export now streams rows;")
await part("prt_a2", "msg_a2", "text", "Export now streams rows; one test still joins them.")
await part("prt_s2", "msg_a2", "text", "<system-reminder>plan mode</system-reminder>", { synthetic: true })
await part("prt_t2", "msg_a2", "tool", "", { tool: "bash", callID: "c3", state: { status: "completed" } })
await message("msg_a2", "assistant", true)
await hooks.event({ event: { type: "session.idle", properties: { sessionID: sid } } })
await hooks.event({ event: { type: "session.idle", properties: { sessionID: sid } } })  // no new reply: none sent
"""


def env_for(tmp_path: Path) -> dict[str, str]:
    env = hook_env(tmp_path / "nmem")
    env["HOME"] = str(tmp_path / "home")
    env.pop("XDG_CONFIG_HOME", None)
    return env


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    done = run_nmem(["install", "opencode"], env=env_for(tmp_path))
    assert done.returncode == 0, done.stderr
    return tmp_path


def test_the_installed_plugin_records_an_opencode_session(installed: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to load the plugin file with")
    plugin = installed / "home" / ".config" / "opencode" / "plugins" / "nmem.js"
    module = installed / "esm" / "nmem.mjs"  # Node takes a .js file for ESM only under "type": "module"
    module.parent.mkdir()
    shutil.copy(plugin, module)
    (installed / "driver.mjs").write_text(DRIVER)
    done = subprocess.run([node, str(installed / "driver.mjs"), str(module), ROOT], capture_output=True, text=True,
                          env=env_for(installed), timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    home = installed / "nmem"
    assert query(home, "SELECT id, agent, ended_at IS NOT NULL AS ended FROM sessions") == [
        {"id": "ses_7f3a2b", "agent": "opencode", "ended": 1}]
    rows = [(o["obs_type"], o["tool_name"], o["source_event"]) for o in observations(home)]
    assert ("file_read", "Read", "tool.execute.after") in rows and ("file_edit", "Edit", "tool.execute.after") in rows
    failed = observations(home, "obs_type = 'command_error'")
    assert failed[0]["metadata"]["exit_code"] == 1 and "ReadableStream" in failed[0]["metadata"]["error_line"]
    assert query(home, "SELECT content FROM prompts WHERE source = 'user'") == [
        {"content": "make the CSV export stream rows"}]
    assert query(home, "SELECT content FROM prompts WHERE source = 'agent'") == [
        {"content": "Export now streams rows; one test still joins them."}]


def test_install_merges_is_idempotent_and_uninstall_restores(tmp_path: Path) -> None:
    config_dir = tmp_path / "home" / ".config" / "opencode"
    config_dir.mkdir(parents=True)
    user: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", "theme": "tokyonight",
                            "mcp": {"github": {"type": "local", "command": ["npx", "-y", "server-github"]}}}
    (config_dir / "opencode.json").write_text(json.dumps(user))
    env = env_for(tmp_path)
    assert run_nmem(["install", "opencode"], env=env).returncode == 0
    config = json.loads((config_dir / "opencode.json").read_text())
    assert config["theme"] == "tokyonight" and config["mcp"]["github"] == user["mcp"]["github"]
    assert config["mcp"]["nmem"]["command"][1:] == ["serve"] and config["mcp"]["nmem"]["type"] == "local"
    plugin = config_dir / "plugins" / "nmem.js"
    assert "--agent" in plugin.read_text() and '"nmem-memory"' not in plugin.read_text()
    once = {p: p.read_bytes() for p in config_dir.rglob("*") if p.is_file()}
    assert json.loads(run_nmem(["install", "opencode", "--format", "json"], env=env).stdout)["changed"] == []
    assert {p: p.read_bytes() for p in config_dir.rglob("*") if p.is_file()} == once
    assert run_nmem(["uninstall", "opencode"], env=env).returncode == 0
    assert json.loads((config_dir / "opencode.json").read_text()) == user
    assert sorted(p.name for p in config_dir.iterdir()) == ["opencode.json"]


def test_a_plugin_file_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    plugins = tmp_path / "home" / ".config" / "opencode" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "nmem.js").write_text("export const Other = async () => ({})\n")
    done = run_nmem(["install", "opencode"], env=env_for(tmp_path))
    assert done.returncode != 0 and "not nmem's plugin" in done.stderr
    assert (plugins / "nmem.js").read_text() == "export const Other = async () => ({})\n"


def test_install_into_nothing_and_uninstall_leave_nothing(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = env_for(tmp_path)
    assert run_nmem(["install", "opencode"], env=env).returncode == 0
    assert run_nmem(["uninstall", "opencode"], env=env).returncode == 0
    assert list((tmp_path / "home").iterdir()) == []


def test_doctor_checks_the_opencode_wiring(installed: Path) -> None:
    done = run_nmem(["doctor", "--format", "json"], env=env_for(installed))
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["opencode hooks (user)"]["status"] == "ok"
    assert checks["opencode mcp server (user)"]["status"] == "ok"
