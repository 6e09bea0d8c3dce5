"""Wiring nmem into Claude Code: hooks in settings.json, the MCP server entry, and checks.

Writes merge with what is there, keep a timestamped backup of every file they change,
are idempotent, and `uninstall` removes exactly the entries nmem added (recognised by
their command: nmem's hook launcher, or the `nmem` executable with `record` or `serve`).

Hooks run `<python> -S <nmem>/hook_entry.py record` with absolute paths: no shell shim,
no `site` start-up and no console-script wrapper on a path that runs on every tool call
(see `nmem.hook_entry`). The MCP server entry runs the `nmem` executable.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmem.errors import ConfigError, InvalidArgument

HOOK_EVENTS: tuple[str, ...] = (
    "SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
    "PreCompact", "Stop", "SubagentStop", "SessionEnd",
)
SCOPES = ("user", "project")
SERVER_NAME = "nmem"
HOOK_TIMEOUT_S = 30


@dataclass(frozen=True)
class Paths:
    settings: Path
    mcp: Path


@dataclass
class Report:
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"changed": self.changed, "unchanged": self.unchanged, "backups": self.backups}


def paths_for(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Paths:
    """User scope: ~/.claude/settings.json and ~/.claude.json; project: .claude/settings.json and .mcp.json."""
    if scope not in SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; use user or project")
    home = home or Path.home()
    if scope == "user":
        return Paths(home / ".claude" / "settings.json", home / ".claude.json")
    root = project_dir or Path.cwd()
    return Paths(root / ".claude" / "settings.json", root / ".mcp.json")


def nmem_executable() -> str:
    """The absolute path of the installed `nmem`, so hooks run it directly (no shell shim)."""
    beside = Path(sys.executable).parent / "nmem"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("nmem")
    if found:
        return str(Path(found).resolve())
    raise ConfigError("cannot find the nmem executable; install nmem (pip install nmem) and retry")


HOOK_ENTRY = "hook_entry.py"


def hook_entry() -> str:
    """The absolute path of this nmem's hook launcher (`nmem/hook_entry.py`)."""
    import nmem

    return os.path.join(os.path.dirname(os.path.abspath(nmem.__file__)), HOOK_ENTRY)


def hook_command() -> str:
    """The command a hook runs: this interpreter, without `site`, on the launcher file."""
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(hook_entry())} record"


def _is_launcher(path: str) -> bool:
    return Path(path).name == HOOK_ENTRY and Path(path).parent.name == "nmem"


def command_files(command: object, verbs: tuple[str, ...] = ("record", "hook")) -> list[str] | None:
    """The files an nmem hook command runs (interpreter and launcher, or the `nmem` executable),
    or None when the command is not nmem's."""
    if not isinstance(command, str):
        return None
    try:
        parts = shlex.split(command)
    except ValueError:
        return None
    if len(parts) >= 4 and parts[1] == "-S" and _is_launcher(parts[2]) and parts[3] in verbs:
        return parts[:1] + parts[2:3]
    if len(parts) >= 2 and Path(parts[0]).name == "nmem" and parts[1] in verbs:
        return parts[:1]
    return None


def is_nmem_command(command: object, verbs: tuple[str, ...] = ("record", "hook")) -> bool:
    """True for a command that runs nmem's hook launcher or the `nmem` executable with one of `verbs`."""
    return command_files(command, verbs) is not None


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or move it, then retry") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object")
    return data


def _save(path: Path, data: dict[str, Any], report: Report) -> None:
    if path.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.nmem-backup-{stamp}")
        n = 1
        while backup.exists():  # two changes in one second keep both backups
            n += 1
            backup = path.with_name(f"{path.name}.nmem-backup-{stamp}-{n}")
        shutil.copy2(path, backup)
        report.backups.append(str(backup))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.nmem-tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o777)
    tmp.replace(path)
    report.changed.append(str(path))


def _without_ours(groups: Any) -> list[Any]:
    """Matcher groups with nmem's handlers removed (and groups left empty dropped)."""
    kept: list[Any] = []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            kept.append(group)
            continue
        handlers = [h for h in group.get("hooks", [])
                    if not (isinstance(h, dict) and is_nmem_command(h.get("command")))]
        if handlers:
            kept.append({**group, "hooks": handlers})
        elif not group.get("hooks"):
            kept.append(group)
    return kept


def merged_hooks(settings: dict[str, Any], command: str) -> dict[str, Any]:
    hooks = dict(settings.get("hooks") or {})
    for event in HOOK_EVENTS:
        groups = _without_ours(hooks.get(event))
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]})
        hooks[event] = groups
    return {**settings, "hooks": hooks}


def mcp_entry(exe: str) -> dict[str, Any]:
    return {"type": "stdio", "command": exe, "args": ["serve"]}


def _is_our_server(entry: object) -> bool:
    return isinstance(entry, dict) and Path(str(entry.get("command", ""))).name == "nmem"


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None,
            home: Path | None = None, with_mcp: bool = True) -> Report:
    paths = paths_for(scope, project_dir, home)
    report = Report()
    settings = _load(paths.settings)
    wanted = merged_hooks(settings, hook_command())
    if wanted != settings:
        _save(paths.settings, wanted, report)
    else:
        report.unchanged.append(str(paths.settings))
    if with_mcp:  # only the MCP server runs the `nmem` script; hooks run this interpreter
        exe = exe or nmem_executable()
        config = _load(paths.mcp)
        servers = dict(config.get("mcpServers") or {})
        if servers.get(SERVER_NAME) != mcp_entry(exe):
            servers[SERVER_NAME] = mcp_entry(exe)
            _save(paths.mcp, {**config, "mcpServers": servers}, report)
        else:
            report.unchanged.append(str(paths.mcp))
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> Report:
    paths = paths_for(scope, project_dir, home)
    report = Report()
    settings = _load(paths.settings)
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        cleaned: dict[str, Any] = {}
        for event, groups in hooks.items():
            kept = _without_ours(groups)
            if kept:
                cleaned[event] = kept
        if cleaned != hooks:
            updated = {**settings, "hooks": cleaned} if cleaned else {k: v for k, v in settings.items() if k != "hooks"}
            _save(paths.settings, updated, report)
    config = _load(paths.mcp)
    servers = config.get("mcpServers")
    if isinstance(servers, dict) and _is_our_server(servers.get(SERVER_NAME)):
        rest = {k: v for k, v in servers.items() if k != SERVER_NAME}
        _save(paths.mcp, {**config, "mcpServers": rest}, report)
    if not report.changed:
        report.unchanged.extend([str(paths.settings), str(paths.mcp)])
    return report


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    """What is installed at one scope: events wired to nmem, their executables, the MCP entry."""
    paths = paths_for(scope, project_dir, home)
    try:
        settings = _load(paths.settings)
        config = _load(paths.mcp)
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events, exes = [], set()
    hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
    for event, groups in (hooks or {}).items():
        for group in groups if isinstance(groups, list) else []:
            for handler in group.get("hooks", []) if isinstance(group, dict) else []:
                files = command_files(handler.get("command")) if isinstance(handler, dict) else None
                if files:
                    events.append(event)
                    exes.update(files)
    servers = config.get("mcpServers") if isinstance(config.get("mcpServers"), dict) else {}
    return {"scope": scope, "settings": str(paths.settings), "events": sorted(set(events)),
            "missing_events": [e for e in HOOK_EVENTS if e not in events],
            "executables": sorted(exes), "mcp": (servers or {}).get(SERVER_NAME), "mcp_file": str(paths.mcp)}
