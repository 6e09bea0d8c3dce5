"""Wiring nmem into Cursor's agent: hooks in `hooks.json`, the MCP server in `mcp.json`, checks.

Cursor reads `~/.cursor/hooks.json` (user) and `<project>/.cursor/hooks.json` (project):
`{"version": 1, "hooks": {"<event>": [{"command": "..."}]}}`, flat entries (no matcher
groups); MCP servers from `~/.cursor/mcp.json` and `<project>/.cursor/mcp.json`
(`{"mcpServers": {"<name>": {"command", "args"}}}`). Same guarantees as the Claude Code install:
merged, backed up, idempotent, removed exactly, created files removed once empty.

With "Third-party skills" on, Cursor also runs the hooks in Claude Code's settings
(`~/.claude/settings.json`, `.claude/settings.json`, `.claude/settings.local.json`; cursor.com/docs/
reference/third-party-hooks), so install says so when nmem's Claude Code hooks are there too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmem.errors import ConfigError
from nmem.setup import agent_files as af
from nmem.setup import claude_code
from nmem.setup.claude_code import SCOPES, SERVER_NAME, Report, load_config, nmem_executable

AGENT = "cursor"
HOOK_EVENTS: tuple[str, ...] = ("sessionStart", "beforeSubmitPrompt", "afterShellExecution", "afterMCPExecution",
                                "afterFileEdit", "afterAgentResponse", "preCompact", "stop", "sessionEnd")


def cursor_dir(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    return af.scope_dir(scope, ".cursor", project_dir, home)


def hook_command() -> str:
    return af.hook_command(AGENT)


def _ours(entry: object) -> bool:
    return af.is_agent_hook(entry.get("command") if isinstance(entry, dict) else None, AGENT)


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
    report, files = af.begin(data_dir)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    hooks_config, mcp_config = load_config(hooks_path), load_config(mcp_path)
    servers = af.with_server(mcp_config.get("mcpServers"), {"command": exe or nmem_executable(), "args": ["serve"]},
                             mcp_path) if with_mcp else None
    af.save_json(files, hooks_path, hooks_config, merged_hooks(hooks_config, hook_command()))
    if servers is not None:
        af.save_json(files, mcp_path, mcp_config, {**mcp_config, "mcpServers": servers})
    report.notes.append("Cursor passes sessionStart's additional_context to the model only in versions with that "
                        "hook; the MCP tools (search, recall) work in every version")
    claude = [w["settings"] for w in (claude_code.wiring(sc, project_dir=project_dir, home=home) for sc in SCOPES)
              if w["events"]]
    if claude:
        report.notes.append(f"nmem's Claude Code hooks are in {', '.join(claude)}: with Cursor's \"Third-party "
                            "skills\" on, Cursor runs those too and each event would be recorded twice; keep that "
                            "setting off, or uninstall one of the two")
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    root = cursor_dir(scope, project_dir, home)
    report, files = af.begin(data_dir)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    created = files._manifest()
    current = load_config(hooks_path)
    cleaned = without_hooks(current, str(hooks_path) in created)
    if cleaned != current:
        files.save_or_remove(hooks_path, {} if cleaned == {"version": 1} else cleaned)
    mcp = load_config(mcp_path)
    rest = af.without_server(mcp.get("mcpServers"))
    if rest is not None:
        files.save_or_remove(mcp_path, {**mcp, "mcpServers": rest})
    for path in (hooks_path, mcp_path):
        files.remove_if_created(path)
    af.untouched(report, hooks_path, mcp_path)
    files.drop_manifest_if_done()
    return report


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    root = cursor_dir(scope, project_dir, home)
    hooks_path, mcp_path = root / "hooks.json", root / "mcp.json"
    try:
        config, mcp = load_config(hooks_path), load_config(mcp_path)
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events, exes = af.wired_events(config.get("hooks"), AGENT, grouped=False)
    servers = mcp.get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return {"scope": scope, "hooks_file": str(hooks_path), "config_file": str(mcp_path), "events": events,
            "missing_events": [e for e in HOOK_EVENTS if e not in events], "executables": exes,
            "mcp": entry if isinstance(entry, dict) else None, "disabled": None}
