"""Wiring nmem into the Codex CLI: hooks in a `hooks.json`, the MCP server in `config.toml`, checks.

Where Codex looks (developers.openai.com/codex/hooks; openai/codex `codex-rs/hooks/src/engine/
discovery.rs`): `hooks.json` beside each active config layer, so `~/.codex/hooks.json` (user;
`$CODEX_HOME` when set) and `<project>/.codex/hooks.json` (project; Codex loads a project's
`.codex/` only when the project is trusted). The file has Claude Code's layout: `{"hooks":
{"<Event>": [{"matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout": s}]}]}}`.
Hooks are a stable feature, on unless `[features] hooks = false` (or the older `codex_hooks`).
`timeout` is in seconds (alias `timeoutSec`; 600 when absent); SessionEnd (Codex since July 2026,
openai/codex#33895) gets 1 s unless told and at most 3 s. A hook that is not managed by an admin
runs only once the user trusted its exact definition (`/hooks`, recorded by position and hash in
the user's config.toml, see `untrusted`); install says so, and keeps nmem's handlers where they
are on a reinstall so that no hook's trust record moves. MCP servers are `[mcp_servers.<name>]`
tables (`command`, `args`) in the layer's `config.toml`.

The same guarantees as the Claude Code install (`nmem.setup.claude_code`): merged with
what is there, backed up under `<data dir>/backups/`, idempotent, and removed exactly: the hook
handlers whose command is nmem's, the `[mcp_servers.nmem]` table when its command is nmem's,
and the files and directories install created once nothing else is in them. config.toml is
edited as text, so the user's comments, order and formatting stay as they were; the result is
parsed again before it is written.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from nmem.capture.codex import codex_home
from nmem.errors import ConfigError
from nmem.setup import agent_files as af
from nmem.setup.claude_code import (
    HOOK_TIMEOUT_S,
    SERVER_NAME,
    Files,
    Report,
    is_nmem_command,
    load_config,
    nmem_executable,
    without_ours,
)

AGENT = "codex"
HOOK_EVENTS: tuple[str, ...] = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop",
                                "SubagentStop", "SessionEnd")
SESSION_END_TIMEOUT_S = 3
HOOKS_FILE = "hooks.json"
CONFIG_FILE = "config.toml"
_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def layer_dir(scope: str, project_dir: Path | None = None, home: Path | None = None) -> Path:
    af.check_scope(scope)
    return codex_home(home) if scope == "user" else (project_dir or Path.cwd()) / ".codex"


def hook_command() -> str:
    return af.hook_command(AGENT)


def is_codex_hook(command: object) -> bool:
    return af.is_agent_hook(command, AGENT)


# -- hooks.json ---------------------------------------------------------------------------------------


def _handler(event: str, command: str) -> dict[str, Any]:
    # Codex gives SessionEnd hooks one second unless told, and never more than three.
    return {"type": "command", "command": command, "timeout": SESSION_END_TIMEOUT_S if event == "SessionEnd"
            else HOOK_TIMEOUT_S}


def _in_place(groups: Any, handler: dict[str, Any]) -> list[Any] | None:
    """The event's groups with nmem's handler written where nmem's is now (the first one; any
    other of nmem's dropped), or None when nmem has none there. Codex keys a hook's trust by
    its place (`<file>:<event>:<group>:<handler>`), so a reinstall must move nothing."""
    out: list[Any] = []
    placed = False
    for group in groups if isinstance(groups, list) else []:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_nmem_command(_command(h)) for h in handlers):
            out.append(group)
            continue
        kept = []
        for h in handlers:
            if not is_nmem_command(_command(h)):
                kept.append(h)
            elif not placed:
                kept.append(handler)
                placed = True
        if kept:
            out.append({**group, "hooks": kept})
    return out if placed else None


def _command(handler: object) -> object:
    return handler.get("command") if isinstance(handler, dict) else None


def merged_hooks(config: dict[str, Any], command: str) -> dict[str, Any]:
    hooks = dict(config.get("hooks") or {})
    for event in HOOK_EVENTS:
        handler = _handler(event, command)
        placed = _in_place(hooks.get(event), handler)
        hooks[event] = placed if placed is not None else [*without_ours(hooks.get(event)), {"hooks": [handler]}]
    return {**config, "hooks": hooks}


def without_hooks(config: dict[str, Any]) -> dict[str, Any]:
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return config
    cleaned = {event: kept for event, groups in hooks.items() if (kept := without_ours(groups))}
    if cleaned == hooks:
        return config
    return {**config, "hooks": cleaned} if cleaned else {k: v for k, v in config.items() if k != "hooks"}


# -- config.toml, edited as text -----------------------------------------------------------------------


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.exists():
        return "", {}
    try:
        text = path.read_text(encoding="utf-8")
        return text, tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or move it, then retry") from exc


def _server_span(lines: list[str]) -> tuple[int, int] | None:
    """The lines of the `[mcp_servers.nmem]` table (and its sub-tables): [start, end)."""
    start = None
    for i, line in enumerate(lines):
        found = _TABLE.match(line)
        if not found:
            continue
        name = found.group(1).replace(" ", "").replace('"', "")
        ours = name == f"mcp_servers.{SERVER_NAME}" or name.startswith(f"mcp_servers.{SERVER_NAME}.")
        if start is None and ours:
            start = i
        elif start is not None and not ours:
            end = i
            while end > start and not lines[end - 1].strip():
                end -= 1
            return start, end
    if start is None:
        return None
    end = len(lines)
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def server_table(exe: str) -> str:
    return f"[mcp_servers.{SERVER_NAME}]\ncommand = {_toml_str(exe)}\nargs = [\"serve\"]\n"


def is_our_server(entry: object) -> bool:
    return isinstance(entry, dict) and Path(str(entry.get("command", ""))).name in ("nmem", "nmem-memory")


def with_server(text: str, parsed: dict[str, Any], exe: str) -> str | None:
    """config.toml with nmem's server table (replacing an older one of nmem's); None when it is
    there already; ConfigError when a server of that name is someone else's."""
    servers = parsed.get("mcp_servers") if isinstance(parsed.get("mcp_servers"), dict) else {}
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if entry is not None and not is_our_server(entry):
        raise ConfigError(f"an MCP server named {SERVER_NAME!r} that is not nmem is configured already; "
                          "rename or remove it, or install with --no-mcp")
    if isinstance(entry, dict) and entry.get("command") == exe and entry.get("args") == ["serve"]:
        return None
    lines = text.splitlines(keepends=True)
    span = _server_span([line.rstrip("\n") for line in lines])
    if entry is not None and span is None:  # an inline or dotted-key entry: not a table to replace
        raise ConfigError(f"the {SERVER_NAME!r} MCP server is written in a form nmem does not edit; "
                          "remove it and retry")
    table = server_table(exe)
    if span is not None:
        return "".join(lines[:span[0]]) + table + "".join(lines[span[1]:])
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return prefix + ("\n" if prefix.strip() else "") + table


def without_server(text: str, parsed: dict[str, Any]) -> str | None:
    """config.toml without nmem's server table; None when there is none of nmem's."""
    servers = parsed.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if not is_our_server(entry):
        return None
    lines = text.splitlines(keepends=True)
    span = _server_span([line.rstrip("\n") for line in lines])
    if span is None:
        return None
    head, tail = lines[:span[0]], lines[span[1]:]
    while head and not head[-1].strip() and (not tail or not tail[0].strip()):
        head.pop()
    return "".join(head + tail)


def _save_toml(files: Files, path: Path, text: str) -> None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # a bug here must never leave the user a broken config
        raise ConfigError(f"nmem would have written an invalid {path} ({exc}); nothing was changed") from None
    files.save_text(path, text)


# -- install / uninstall --------------------------------------------------------------------------------


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None, home: Path | None = None,
            with_mcp: bool = True, data_dir: Path | None = None) -> Report:
    layer = layer_dir(scope, project_dir, home)
    report, files = af.begin(data_dir)
    hooks_path, config_path = layer / HOOKS_FILE, layer / CONFIG_FILE
    # Everything is read and checked before anything is written: a file nmem cannot merge into
    # stops the install with nothing changed.
    current = load_config(hooks_path)
    text, parsed = _read_toml(config_path)
    updated = with_server(text, parsed, exe or nmem_executable()) if with_mcp else None
    wanted = merged_hooks(current, hook_command())
    af.save_json(files, hooks_path, current, wanted)
    if wanted != current:
        report.notes.append(f"Codex runs a new or changed hook only once you trust it: start Codex, open /hooks "
                            f"and trust nmem's hooks in {hooks_path} (`codex exec` runs: "
                            "--dangerously-bypass-hook-trust); `nmem doctor` lists the ones without trust")
    if updated is not None:
        _save_toml(files, config_path, updated)
    elif with_mcp:
        report.unchanged.append(f"{config_path} [mcp_servers.{SERVER_NAME}]")
    inline = parsed.get("hooks")
    if isinstance(inline, dict) and any(key != "state" for key in inline):
        report.notes.append(f"{config_path} has hooks of its own ([hooks]); Codex runs them and those in "
                            f"{hooks_path} both, and warns at start that one layer has two forms")
    disabled = hooks_disabled(parsed)
    if disabled:
        report.notes.append(f"Codex hooks are turned off in {config_path} ({disabled}); nmem left it as it is")
    if scope == "project":
        report.notes.append(f"Codex reads {layer} only for a trusted project; these files hold this machine's "
                            "paths, so keep them out of the repository")
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    layer = layer_dir(scope, project_dir, home)
    report, files = af.begin(data_dir)
    hooks_path = layer / HOOKS_FILE
    current = load_config(hooks_path)
    cleaned = without_hooks(current)
    if cleaned != current:
        files.save_or_remove(hooks_path, cleaned)
    config_path = layer / CONFIG_FILE
    text, parsed = _read_toml(config_path)
    updated = without_server(text, parsed)
    if updated is not None:
        if not updated.strip() and str(config_path) in files._manifest():
            files.backup(config_path)
            files._remove(config_path)
        else:
            _save_toml(files, config_path, updated)
    files.remove_if_created(hooks_path)
    af.untouched(report, hooks_path, config_path)
    files.drop_manifest_if_done()
    return report


def hooks_disabled(parsed: dict[str, Any]) -> str | None:
    features = parsed.get("features")
    if isinstance(features, dict):
        for key in ("hooks", "codex_hooks"):
            if features.get(key) is False:
                return f"features.{key} = false"
    return None


# -- what is installed -----------------------------------------------------------------------------------


def _snake(event: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(event))


def untrusted(hooks_path: Path, config: dict[str, Any], user_config: dict[str, Any]) -> list[str]:
    """The events whose nmem hook has no trust record in the user's config.toml.

    Codex runs a hook someone else manages only once the user trusted its exact definition
    (`/hooks` in the CLI), and records that as `[hooks.state."<hooks.json>:<event>:<group>:<handler>"]`
    `trusted_hash = "sha256:..."` (`enabled = false` turns one off). nmem does not write that
    record (the hash is Codex's to compute), so it can only say which hooks have none; a record
    whose hash is stale (the hook changed since) looks the same from here and Codex asks again."""
    hooks_state = user_config.get("hooks")
    state = hooks_state.get("state") if isinstance(hooks_state, dict) else None
    records = state if isinstance(state, dict) else {}
    paths = {str(hooks_path), str(hooks_path.resolve())}
    missing: list[str] = []
    hooks = config.get("hooks")
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not is_codex_hook(_command(handler)):
                    continue
                found = [records.get(f"{p}:{_snake(event)}:{g}:{h}") for p in paths]
                if not any(isinstance(r, dict) and r.get("trusted_hash") and r.get("enabled") is not False
                           for r in found):
                    missing.append(event)
    return sorted(set(missing))


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    layer = layer_dir(scope, project_dir, home)
    hooks_path, config_path = layer / HOOKS_FILE, layer / CONFIG_FILE
    try:
        config = load_config(hooks_path)
        _, parsed = _read_toml(config_path)
        user = parsed if scope == "user" else _read_toml(layer_dir("user", home=home) / CONFIG_FILE)[1]
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None}
    events, exes = af.wired_events(config.get("hooks"), AGENT)
    servers = parsed.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return {"scope": scope, "hooks_file": str(hooks_path), "config_file": str(config_path),
            "events": events, "missing_events": [e for e in HOOK_EVENTS if e not in events],
            "executables": exes, "mcp": entry if isinstance(entry, dict) else None,
            "disabled": hooks_disabled(parsed), "untrusted": untrusted(hooks_path, config, user)}
