"""Wiring nmem into Cursor's agent: hooks in `hooks.json`, the MCP server in `mcp.json`, checks.

Cursor reads `~/.cursor/hooks.json` (user) and `<project>/.cursor/hooks.json` (project):
`{"version": 1, "hooks": {"<event>": [{"command": "..."}]}}`, flat entries (no matcher
groups); MCP servers from `~/.cursor/mcp.json` and `<project>/.cursor/mcp.json`
(`{"mcpServers": {"<name>": {"command", "args"}}}`). Same guarantees as the Claude Code install:
merged, backed up, idempotent, removed exactly, created files removed once empty.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from nmem.errors import ConfigError, InvalidArgument
from nmem.setup.claude_code import (
    SCOPES,
    SERVER_NAME,
    Files,
    Report,
    command_files,
    default_data_dir,
    hook_entry,
    is_our_server,
    load_config,
    nmem_executable,
)

AGENT = "cursor"
HOOK_EVENTS: tuple[str, ...] = ("sessionStart", "beforeSubmitPrompt", "afterShellExecution", "afterMCPExecution",
                                "afterFileEdit", "afterAgentResponse", "preCompact", "stop", "sessionEnd")


def cursor_dir(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    if scope not in SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; use user or project")
    return (home or Path.home()) / ".cursor" if scope == "user" else (project_dir or Path.cwd()) / ".cursor"


def hook_command() -> str:
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(hook_entry())} record --agent {AGENT}"


def _ours(entry: object) -> bool:
    command = entry.get("command") if isinstance(entry, dict) else None
    return command_files(command) is not None and f"--agent {AGENT}" in str(command)


def merged_hooks(config: dict[str, Any], command: str) -> dict[str, Any]:
    hooks = dict(config.get("hooks") or {})
    for event in HOOK_EVENTS:
        entries = [e for e in hooks.get(event) or [] if not _ours(e)]
        hooks[event] = [*entries, {"command": command}]
    return {"version": config.get("version", 1), **config, "hooks": hooks}


def without_hooks(config: dict[str, Any], created: bool) -> dict[str, Any]:
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return config
    kept = {}
    for event, entries in hooks.items():
        left = [e for e in entries if not _ours(e)] if isinstance(entries, list) else entries
        if left or not isinstance(entries, list):
            kept[event] = left
    if kept == hooks:
        return config
    out = {**config, "hooks": kept}
    if created and not kept:  # a file install made holds nothing of the user's: empty it whole
        return {}
    return out


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None, home: Path | None = None,
            with_mcp: bool = True, data_dir: Path | None = None) -> Report:
    root = cursor_dir(scope, project_dir, home)
    report = Report()
    files = Files(data_dir or default_data_dir(), report)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    hooks_config, mcp_config = load_config(hooks_path), load_config(mcp_path)
    servers = dict(mcp_config.get("mcpServers") or {})
    if with_mcp:
        current = servers.get(SERVER_NAME)
        if current is not None and not is_our_server(current):
            raise ConfigError(f"an MCP server named {SERVER_NAME!r} that is not nmem is in {mcp_path}; "
                              "rename or remove it, or install with --no-mcp")
        servers[SERVER_NAME] = {"command": exe or nmem_executable(), "args": ["serve"]}
    wanted = merged_hooks(hooks_config, hook_command())
    if wanted != hooks_config:
        files.save(hooks_path, wanted)
    else:
        report.unchanged.append(str(hooks_path))
    if with_mcp:
        wanted_mcp = {**mcp_config, "mcpServers": servers}
        if wanted_mcp != mcp_config:
            files.save(mcp_path, wanted_mcp)
        else:
            report.unchanged.append(str(mcp_path))
    report.notes.append("Cursor passes sessionStart's additional_context to the model only in versions with that "
                        "hook; the MCP tools (search, recall) work in every version")
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    root = cursor_dir(scope, project_dir, home)
    report = Report()
    files = Files(data_dir or default_data_dir(), report)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    created = files._manifest()
    current = load_config(hooks_path)
    cleaned = without_hooks(current, str(hooks_path) in created)
    if cleaned != current:
        files.save_or_remove(hooks_path, {} if cleaned == {"version": 1} else cleaned)
    mcp = load_config(mcp_path)
    servers = mcp.get("mcpServers")
    if isinstance(servers, dict) and is_our_server(servers.get(SERVER_NAME)):
        rest = {k: v for k, v in servers.items() if k != SERVER_NAME}
        files.save_or_remove(mcp_path, {**mcp, "mcpServers": rest})
    for path in (hooks_path, mcp_path):
        files.remove_if_created(path)
    if not report.changed and not report.removed:
        report.unchanged.extend([str(hooks_path), str(mcp_path)])
    files.drop_manifest_if_done()
    return report


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    root = cursor_dir(scope, project_dir, home)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    try:
        config, mcp = load_config(hooks_path), load_config(mcp_path)
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events: set[str] = set()
    exes: set[str] = set()
    hooks = config.get("hooks") if isinstance(config.get("hooks"), dict) else {}
    for event, entries in (hooks or {}).items():
        for entry in entries if isinstance(entries, list) else []:
            if _ours(entry):
                events.add(event)
                exes.update(command_files(entry["command"]) or [])
    servers = mcp.get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return {"scope": scope, "hooks_file": str(hooks_path), "config_file": str(mcp_path), "events": sorted(events),
            "missing_events": [e for e in HOOK_EVENTS if e not in events], "executables": sorted(exes),
            "mcp": entry if isinstance(entry, dict) else None, "disabled": None}
