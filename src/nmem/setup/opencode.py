"""Wiring nmem into OpenCode: a plugin file that runs nmem's hook command, and the MCP server.

OpenCode loads every JavaScript/TypeScript file in `~/.config/opencode/plugins/` (user;
`$XDG_CONFIG_HOME/opencode` when set) and `<project>/.opencode/plugins/` (project) at start
(opencode.ai/docs/plugins). Install writes `nmem.js` there, from `opencode_plugin.js` with this
machine's hook command filled in, and registers the MCP server in the `mcp` object of
`opencode.json` beside it (`{"type": "local", "command": [...], "enabled": true}`,
opencode.ai/docs/mcp-servers). Same guarantees as the other installs: merged, backed up,
idempotent, and removed exactly (the plugin file only when it is nmem's, the `nmem` server only
when its command is nmem's, created files and directories once empty).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from nmem.errors import ConfigError
from nmem.setup import agent_files as af
from nmem.setup.claude_code import (
    SERVER_NAME,
    Report,
    hook_entry,
    load_config,
    nmem_executable,
)

AGENT = "opencode"
PLUGIN_FILE = "nmem.js"
PLUGIN_MARK = "// nmem for OpenCode"
TEMPLATE = Path(__file__).with_name("opencode_plugin.js")
COMMAND_LINE = 'const NMEM_COMMAND = ["nmem-memory", "record", "--agent", "opencode"]'


def config_dir(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    af.check_scope(scope)
    if scope == "project":
        return project_dir or Path.cwd()
    if home is None and os.environ.get("XDG_CONFIG_HOME"):
        return Path(os.environ["XDG_CONFIG_HOME"]) / "opencode"
    return (home or Path.home()) / ".config" / "opencode"


def paths(scope: str, project_dir: Path | None = None, home: Path | None = None) -> tuple[Path, Path]:
    """(the plugin file, opencode.json)."""
    root = config_dir(scope, project_dir, home)
    plugins = root / ".opencode" / "plugins" if scope == "project" else root / "plugins"
    return plugins / PLUGIN_FILE, root / "opencode.json"


def hook_argv() -> list[str]:
    return [sys.executable, "-S", hook_entry(), "record", "--agent", AGENT]


def plugin_text() -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    assert COMMAND_LINE in text, "opencode_plugin.js lost its command line"
    return text.replace(COMMAND_LINE, f"const NMEM_COMMAND = {json.dumps(hook_argv())}")


def _is_ours(path: Path) -> bool:
    try:
        return path.read_text(encoding="utf-8").startswith(PLUGIN_MARK)
    except (OSError, UnicodeDecodeError):
        return False


def is_our_server(entry: object) -> bool:
    command = entry.get("command") if isinstance(entry, dict) else None
    return isinstance(command, list) and bool(command) and Path(str(command[0])).name in ("nmem", "nmem-memory")


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None, home: Path | None = None,
            with_mcp: bool = True, data_dir: Path | None = None) -> Report:
    plugin, config_path = paths(scope, project_dir, home)
    report, files = af.begin(data_dir)
    if plugin.exists() and not _is_ours(plugin):
        raise ConfigError(f"{plugin} exists and is not nmem's plugin; move it, then retry")
    config = load_config(config_path)
    mcp = af.with_server(config.get("mcp"), {"type": "local", "command": [exe or nmem_executable(), "serve"],
                                             "enabled": True}, config_path, is_our_server) if with_mcp else {}
    text = plugin_text()
    if plugin.exists() and plugin.read_text(encoding="utf-8") == text:
        report.unchanged.append(str(plugin))
    else:
        files.save_text(plugin, text)
    if with_mcp:
        wanted = {**config, "mcp": mcp}
        if "$schema" not in config and not config_path.exists():
            wanted = {"$schema": "https://opencode.ai/config.json", **wanted}
        af.save_json(files, config_path, config, wanted)
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    plugin, config_path = paths(scope, project_dir, home)
    report, files = af.begin(data_dir)
    if plugin.exists() and _is_ours(plugin):
        if str(plugin) in files._manifest():
            files._remove(plugin)
        else:
            plugin.unlink()
            report.removed.append(str(plugin))
    config = load_config(config_path)
    rest = af.without_server(config.get("mcp"), is_our_server)
    if rest is not None:
        updated = {**config, "mcp": rest} if rest else {k: v for k, v in config.items() if k != "mcp"}
        created = str(config_path) in files._manifest()
        if created and set(updated) <= {"$schema"}:
            updated = {}
        files.save_or_remove(config_path, updated)
    af.untouched(report, plugin, config_path)
    files.drop_manifest_if_done()
    return report


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    plugin, config_path = paths(scope, project_dir, home)
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events, exes = [], []
    if _is_ours(plugin):
        events = ["plugin"]
        text = plugin.read_text(encoding="utf-8")
        line = next((ln for ln in text.splitlines() if ln.startswith("const NMEM_COMMAND = ")), "")
        try:
            argv = json.loads(line.removeprefix("const NMEM_COMMAND = "))
        except ValueError:
            argv = []
        exes = [a for a in argv[:3] if isinstance(a, str) and os.path.isabs(a)]
    mcp = config.get("mcp")
    entry = mcp.get(SERVER_NAME) if isinstance(mcp, dict) else None
    server = None
    if isinstance(entry, dict):
        command = entry.get("command")
        server = {"command": command[0] if isinstance(command, list) and command else "",
                  "args": command[1:] if isinstance(command, list) else []}
    return {"scope": scope, "hooks_file": str(plugin), "config_file": str(config_path), "events": events,
            "missing_events": [] if events else ["plugin"], "executables": exes, "mcp": server, "disabled": None}
