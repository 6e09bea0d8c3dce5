"""Wiring nmem into the Gemini CLI: hooks and the MCP server in its `settings.json`, and checks.

google-gemini/gemini-cli `docs/hooks/index.md`: hooks live in `settings.json` under `hooks`, in
Claude Code's layout (`{"<Event>": [{"matcher": ..., "hooks": [{"name", "type": "command",
"command", "timeout" (milliseconds)}]}]}`), at user scope `~/.gemini/settings.json` and project
scope `<project>/.gemini/settings.json`; MCP servers under `mcpServers` (`command`, `args`) in
the same file. The hooks system can be turned off (`hooksConfig.enabled` false, or nmem's hook
named in `hooksConfig.disabled`; older versions: `tools.enableHooks`, `hooks.disabled`); `nmem
doctor` says so. A project's hooks run only in a trusted folder (`core/src/hooks/hookRegistry.ts`).

Same guarantees as the Claude Code install: merged, backed up, idempotent, removed exactly
(handlers whose command is nmem's, the `nmem` server when its command is nmem's, and the files
and directories install created once nothing else is in them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nmem.errors import ConfigError
from nmem.setup import agent_files as af
from nmem.setup.claude_code import SERVER_NAME, Report, nmem_executable, without_ours

AGENT = "gemini"
HOOK_EVENTS: tuple[str, ...] = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent", "PreCompress",
                                "SessionEnd")
SETTINGS = "settings.json"
TIMEOUT_MS = 30_000


def settings_path(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    return af.scope_dir(scope, ".gemini", project_dir, home) / SETTINGS


def without_comments(text: str) -> tuple[str, bool]:
    """JSON text without `//` and `/* */` comments (outside strings), and whether it had any.
    Gemini CLI reads settings.json through strip-json-comments and keeps comments when it
    writes it (packages/cli/src/config/settings.ts, utils/commentJson.ts)."""
    out: list[str] = []
    i, n, found = 0, len(text), False
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            found = True
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            found = True
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out), found


def load_settings(path: Path, *, rewrite: bool = False) -> dict[str, Any]:
    """settings.json as Gemini CLI reads it. `rewrite`: nmem is about to write it back, which
    would lose its comments, so a file with comments is refused with nothing changed."""
    if not path.exists():
        return {}
    try:
        text, commented = without_comments(path.read_text(encoding="utf-8"))
        data = json.loads(text or "{}")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or move it, then retry") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object")
    if commented and rewrite:
        raise ConfigError(f"{path} has comments, which nmem would lose in rewriting it; nothing was changed. "
                          "Move the comments out of the file (or add nmem's entries by hand), then retry")
    return data


def hook_command() -> str:
    return af.hook_command(AGENT)


def merged(settings: dict[str, Any], command: str, exe: str | None) -> dict[str, Any]:
    hooks = dict(settings.get("hooks") or {})
    for event in HOOK_EVENTS:
        groups = without_ours(hooks.get(event))
        groups.append({"hooks": [{"name": "nmem", "type": "command", "command": command, "timeout": TIMEOUT_MS}]})
        hooks[event] = groups
    out = {**settings, "hooks": hooks}
    if exe is not None:
        out["mcpServers"] = af.with_server(settings.get("mcpServers"), {"command": exe, "args": ["serve"]},
                                           "settings.json")
    return out


def cleaned(settings: dict[str, Any]) -> dict[str, Any]:
    out = dict(settings)
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        kept: dict[str, Any] = {}
        for key, groups in hooks.items():
            left = without_ours(groups) if key in HOOK_EVENTS else groups
            if left or key not in HOOK_EVENTS:
                kept[key] = left
        if kept != hooks:
            if kept:
                out["hooks"] = kept
            else:
                del out["hooks"]
    rest = af.without_server(settings.get("mcpServers"))
    if rest:
        out["mcpServers"] = rest
    elif rest is not None:
        del out["mcpServers"]
    return out


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None, home: Path | None = None,
            with_mcp: bool = True, data_dir: Path | None = None) -> Report:
    path = settings_path(scope, project_dir, home)
    report, files = af.begin(data_dir)
    current = load_settings(path)
    wanted = merged(current, hook_command(), (exe or nmem_executable()) if with_mcp else None)
    if wanted != current:
        load_settings(path, rewrite=True)
    af.save_json(files, path, current, wanted)
    off = hooks_off(wanted)
    if off:
        report.notes.append(f"Gemini CLI's hooks are off in {path} ({off}); turn them on for nmem to capture")
    if scope == "project":
        report.notes.append(f"{path} now holds this machine's paths; keep it out of the repository. Gemini CLI "
                            "runs a project's hooks only in a trusted folder (it asks, or /permissions)")
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    path = settings_path(scope, project_dir, home)
    report, files = af.begin(data_dir)
    current = load_settings(path)
    out = cleaned(current)
    if out != current:
        load_settings(path, rewrite=True)
    if out != current:
        files.save_or_remove(path, out)
    files.remove_if_created(path)
    af.untouched(report, path)
    files.drop_manifest_if_done()
    return report


def hooks_off(settings: dict[str, Any]) -> str | None:
    """Why Gemini CLI would not run nmem's hooks from these settings, or None. `hooksConfig` is
    the current place (`enabled`, `disabled`: hook names, a hook's name being its `name` or else
    its command); `tools.enableHooks` and `hooks.disabled` are where older versions kept them."""
    tools = settings.get("tools")
    if isinstance(tools, dict) and tools.get("enableHooks") is False:
        return "tools.enableHooks = false"
    config = settings.get("hooksConfig")
    if isinstance(config, dict) and config.get("enabled") is False:
        return "hooksConfig.enabled = false"
    hooks = settings.get("hooks")
    names = {"nmem", hook_command()}
    for where, holder in (("hooksConfig.disabled", config), ("hooks.disabled", hooks)):
        disabled = holder.get("disabled") if isinstance(holder, dict) else None
        if isinstance(disabled, list) and names & {d for d in disabled if isinstance(d, str)}:
            return f"nmem is in {where}"
    return None


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    path = settings_path(scope, project_dir, home)
    try:
        settings = load_settings(path)
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events, exes = af.wired_events(settings.get("hooks"), AGENT)
    servers = settings.get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return {"scope": scope, "hooks_file": str(path), "config_file": str(path), "events": events,
            "missing_events": [e for e in HOOK_EVENTS if e not in events], "executables": exes,
            "mcp": entry if isinstance(entry, dict) else None, "disabled": hooks_off(settings)}
