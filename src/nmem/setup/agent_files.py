"""The skeleton the other agents' installs share (Codex, Gemini CLI, Cursor, OpenCode): the
directory a scope names, the hook command that tags the agent, the report and backed-up files
an install or uninstall writes through, a JSON file saved only when it changes, and nmem's
entry in an agent's table of MCP servers. Each agent's module keeps only what its own files
look like."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
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
)


def check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; use user or project")


def scope_dir(scope: str, name: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    """`~/<name>` for the user scope, `<project>/<name>` for the project's."""
    check_scope(scope)
    return (home or Path.home()) / name if scope == "user" else (project_dir or Path.cwd()) / name


def hook_command(agent: str) -> str:
    """The command the agent's hooks run: this interpreter, without `site`, on nmem's launcher."""
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(hook_entry())} record --agent {agent}"


def is_agent_hook(command: object, agent: str) -> bool:
    """Whether a hook's command is nmem's for this agent."""
    return command_files(command) is not None and isinstance(command, str) and f"--agent {agent}" in command


def begin(data_dir: Path | None) -> tuple[Report, Files]:
    """The report of one install or uninstall and the files it writes through (backed up)."""
    report = Report()
    return report, Files(data_dir or default_data_dir(), report)


def save_json(files: Files, path: Path, current: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Write `wanted` to `path` when it differs from what is there, else note it unchanged."""
    if wanted != current:
        files.save(path, wanted)
    else:
        files.report.unchanged.append(str(path))


def untouched(report: Report, *paths: Path) -> None:
    """An uninstall that changed and removed nothing: its files are listed as unchanged."""
    if not report.changed and not report.removed:
        report.unchanged.extend(str(p) for p in paths)


def with_server(servers: Any, entry: dict[str, Any], where: Path | str,
                ours: Callable[[object], bool] = is_our_server) -> dict[str, Any]:
    """An MCP server table with nmem's `entry`; one of that name that is not nmem's (`ours`, by
    the agent's own entry shape) stops the install."""
    table = dict(servers or {})
    current = table.get(SERVER_NAME)
    if current is not None and not ours(current):
        raise ConfigError(f"an MCP server named {SERVER_NAME!r} that is not nmem is in {where}; "
                          "rename or remove it, or install with --no-mcp")
    table[SERVER_NAME] = entry
    return table


def without_server(servers: Any, ours: Callable[[object], bool] = is_our_server) -> dict[str, Any] | None:
    """The MCP server table without nmem's entry, or None when nmem's is not in it."""
    if not isinstance(servers, dict) or not ours(servers.get(SERVER_NAME)):
        return None
    return {k: v for k, v in servers.items() if k != SERVER_NAME}


def wired_events(hooks: Any, agent: str, *, grouped: bool = True) -> tuple[list[str], list[str]]:
    """The events whose hooks run nmem for this agent, and the files those commands name.
    `grouped`: Claude Code's layout (`{event: [{"hooks": [{"command"}]}]}`); else flat
    (`{event: [{"command"}]}`, Cursor's)."""
    events: set[str] = set()
    exes: set[str] = set()
    for event, entries in (hooks if isinstance(hooks, dict) else {}).items():
        for entry in entries if isinstance(entries, list) else []:
            handlers = (entry.get("hooks") if isinstance(entry, dict) else None) if grouped else [entry]
            for handler in handlers if isinstance(handlers, list) else []:
                command = handler.get("command") if isinstance(handler, dict) else None
                if is_agent_hook(command, agent):
                    events.add(event)
                    exes.update(command_files(command) or [])
    return sorted(events), sorted(exes)
