"""Wiring nmem into Claude Code: hooks in a settings file, the MCP server entry, and checks.

Scopes:
- `user`: hooks in `~/.claude/settings.json`, the MCP server in `~/.claude.json` (`mcpServers`).
- `project`: this machine's wiring for one project, none of it in files a repository shares:
  hooks in `<project>/.claude/settings.local.json` (their commands hold this machine's
  absolute paths), the MCP server in Claude Code's local scope (`~/.claude.json`,
  `projects["<project>"].mcpServers`, what `claude mcp add --scope local` writes). With
  `shared_mcp`, the server goes to `<project>/.mcp.json` instead, as the bare `nmem` command
  (no machine paths, so it can be committed); Claude Code asks each person to approve the
  servers of a `.mcp.json` before it starts them.

Writes merge with what is there, back the file up first (under `<data dir>/backups/`, never
beside the file: a project's directory is a repository), and are idempotent. `uninstall`
removes exactly the entries nmem added (recognised by their command: nmem's hook launcher,
or the `nmem` executable with `record` or `serve`), then the files and directories install
created (listed in `<data dir>/install-manifest.json`) when nothing else is left in them.

Hooks run `<python> -S <nmem>/hook_entry.py record` with absolute paths: no shell shim,
no `site` start-up and no console-script wrapper on a path that runs on every tool call
(see `nmem.hook_entry`). The MCP server entry runs the `nmem` executable.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
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
# The distribution's name on PyPI; `nmem` there is an unrelated project that also installs an
# `nmem` command and an `nmem` package, so the two cannot share an environment.
DIST_NAME = "nmem-memory"
INSTALL_HINT = f"pipx install {DIST_NAME}"
# nmem's commands: `nmem`, and `nmem-memory`, the same program under a name no other package
# installs (the plugin runs it, so its hooks never reach another program's `nmem`).
COMMAND_NAMES = ("nmem", "nmem-memory")
MANIFEST = "install-manifest.json"
LOCAL_SETTINGS = "settings.local.json"
APPROVAL_NOTE = ("Claude Code asks each person to approve the servers in {file} before it starts them "
                 "(answer the prompt at the next start, or run `claude mcp list`)")


@dataclass(frozen=True)
class McpSlot:
    """Where an MCP server entry lives: a JSON file and the keys down to its `mcpServers`."""

    file: Path
    keys: tuple[str, ...] = ()
    scope: str = "user"          # Claude Code's name for it: user, local or project

    def describe(self) -> str:
        return str(self.file) + "".join(f"[{k!r}]" for k in self.keys)


@dataclass(frozen=True)
class Paths:
    settings: Path                       # where the hooks go
    mcp: McpSlot                         # where the MCP server goes
    others: tuple[Path, ...] = ()        # settings files older nmem versions wrote hooks into
    other_mcp: tuple[McpSlot, ...] = ()  # MCP slots install may clean and uninstall empties


@dataclass
class Report:
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"changed": self.changed, "unchanged": self.unchanged, "backups": self.backups,
                "removed": self.removed, "notes": self.notes}


def project_key(project_dir: Path) -> str:
    """How Claude Code names a project in `~/.claude.json`: its absolute, resolved path."""
    return str(project_dir.resolve())


def paths_for(scope: str, project_dir: Path | None = None, home: Path | None = None,
              shared_mcp: bool = False) -> Paths:
    if scope not in SCOPES:
        raise InvalidArgument(f"unknown scope {scope!r}; use user or project")
    home = home or Path.home()
    claude_json = home / ".claude.json"
    if scope == "user":
        return Paths(home / ".claude" / "settings.json", McpSlot(claude_json))
    root = project_dir or Path.cwd()
    local = McpSlot(claude_json, ("projects", project_key(root)), "local")
    shared = McpSlot(root / ".mcp.json", (), "project")
    return Paths(root / ".claude" / LOCAL_SETTINGS, shared if shared_mcp else local,
                 others=(root / ".claude" / "settings.json",), other_mcp=(local,) if shared_mcp else (shared,))


def nmem_executable() -> str:
    """The absolute path of the installed `nmem`, so the MCP entry runs it directly."""
    beside = Path(sys.executable).parent / "nmem"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("nmem")
    if found:
        return str(Path(found).resolve())
    raise ConfigError(f"cannot find the nmem executable; install nmem ({INSTALL_HINT}) and retry")


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
    if len(parts) >= 2 and Path(parts[0]).name in COMMAND_NAMES and parts[1] in verbs:
        return parts[:1]
    return None


def is_nmem_command(command: object, verbs: tuple[str, ...] = ("record", "hook")) -> bool:
    """True for a command that runs nmem's hook launcher or the `nmem` executable with one of `verbs`."""
    return command_files(command, verbs) is not None


def mcp_entry(exe: str) -> dict[str, Any]:
    return {"type": "stdio", "command": exe, "args": ["serve"]}


def is_our_server(entry: object) -> bool:
    return isinstance(entry, dict) and Path(str(entry.get("command", ""))).name in COMMAND_NAMES


# -- files -----------------------------------------------------------------------------------------


def load_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or move it, then retry") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object")
    return data


def _is_blank(value: Any) -> bool:
    """Nothing but empty objects and lists, however nested: what removing nmem's entries leaves."""
    if isinstance(value, dict):
        return all(_is_blank(v) for v in value.values())
    return isinstance(value, list) and not value


class Files:
    """Writes with backups under the data dir, and the manifest of what install created."""

    def __init__(self, data_dir: Path, report: Report) -> None:
        self.backup_dir = data_dir / "backups"
        self.manifest_path = data_dir / MANIFEST
        self.data_dir = data_dir
        self.report = report

    def _manifest(self) -> list[str]:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        created = data.get("created") if isinstance(data, dict) else None
        return [p for p in created if isinstance(p, str)] if isinstance(created, list) else []

    def _write_manifest(self, created: list[str]) -> None:
        self._private_dir(self.data_dir)
        tmp = self.manifest_path.with_name(f".{MANIFEST}.tmp")
        tmp.write_text(json.dumps({"created": created}, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(self.manifest_path)

    @staticmethod
    def _private_dir(path: Path) -> None:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)

    def backup(self, path: Path) -> None:
        self._private_dir(self.backup_dir)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        flat = path.resolve().as_posix().strip("/").replace("/", "--")
        target = self.backup_dir / f"{stamp}-{flat}"
        n = 1
        while target.exists():  # two changes in one second keep both backups
            n += 1
            target = self.backup_dir / f"{stamp}-{n}-{flat}"
        shutil.copy2(path, target)
        self.report.backups.append(str(target))

    def save(self, path: Path, data: dict[str, Any]) -> None:
        self.save_text(path, json.dumps(data, indent=2) + "\n")

    def save_text(self, path: Path, text: str) -> None:
        """Write `text` to `path` atomically: backed up first, or recorded as created by install."""
        if path.exists():
            self.backup(path)
        else:
            made = [str(d) for d in reversed([path.parent, *path.parent.parents]) if not d.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            created = self._manifest()
            self._write_manifest(created + [p for p in [*made, str(path)] if p not in created])
        tmp = path.with_name(f".{path.name}.nmem-tmp")
        tmp.write_text(text, encoding="utf-8")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        tmp.replace(path)
        self.report.changed.append(str(path))

    def save_or_remove(self, path: Path, data: dict[str, Any]) -> None:
        """Save, unless install created the file and `data` leaves nothing in it: then delete it
        (and the directories install made for it, once empty)."""
        if str(path) in self._manifest() and _is_blank(data):
            self._remove(path)
        else:
            self.save(path, data)

    def remove_if_created(self, path: Path) -> None:
        """Delete a file install created once nothing but empty objects is left in it."""
        if str(path) not in self._manifest() or not path.exists():
            return
        try:
            blank = _is_blank(load_config(path))
        except ConfigError:
            return
        if blank:
            self._remove(path)

    def _remove(self, path: Path) -> None:
        created = self._manifest()
        if path.exists():
            path.unlink()
            self.report.removed.append(str(path))
        created.remove(str(path))
        for directory in [path.parent, *path.parent.parents]:
            if str(directory) not in created:
                break
            try:
                directory.rmdir()  # only when empty
            except OSError:
                break
            created.remove(str(directory))
            self.report.removed.append(str(directory))
        self._write_manifest(created)

    def drop_manifest_if_done(self) -> None:
        """Delete the manifest once nothing install created is left for it to list."""
        if self.manifest_path.exists() and not self._manifest():
            self.manifest_path.unlink()
            self.report.removed.append(str(self.manifest_path))


def default_data_dir() -> Path:
    from nmem.config import data_home

    return Path(data_home())


# -- hooks -----------------------------------------------------------------------------------------


def without_ours(groups: Any) -> list[Any]:
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
        groups = without_ours(hooks.get(event))
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]})
        hooks[event] = groups
    return {**settings, "hooks": hooks}


def without_hooks(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    cleaned: dict[str, Any] = {}
    for event, groups in hooks.items():
        kept = without_ours(groups)
        if kept:
            cleaned[event] = kept
    if cleaned == hooks:
        return settings
    return {**settings, "hooks": cleaned} if cleaned else {k: v for k, v in settings.items() if k != "hooks"}


# -- MCP entries -----------------------------------------------------------------------------------


def _servers(config: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    node: Any = config
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    servers = node.get("mcpServers") if isinstance(node, dict) else None
    return servers if isinstance(servers, dict) else {}


def _with_servers(config: dict[str, Any], keys: tuple[str, ...], servers: dict[str, Any]) -> dict[str, Any]:
    if not keys:
        return {**config, "mcpServers": servers}
    child = config.get(keys[0])
    return {**config, keys[0]: _with_servers(child if isinstance(child, dict) else {}, keys[1:], servers)}


def _put_server(files: Files, slot: McpSlot, entry: dict[str, Any]) -> None:
    config = load_config(slot.file)
    servers = _servers(config, slot.keys)
    if servers.get(SERVER_NAME) == entry:
        files.report.unchanged.append(slot.describe())
        return
    files.save(slot.file, _with_servers(config, slot.keys, {**servers, SERVER_NAME: entry}))


def _drop_server(files: Files, slot: McpSlot, only_machine_specific: bool = False) -> None:
    config = load_config(slot.file)
    servers = _servers(config, slot.keys)
    entry = servers.get(SERVER_NAME)
    if not (isinstance(entry, dict) and is_our_server(entry)):
        return
    if only_machine_specific and not os.path.isabs(str(entry.get("command", ""))):
        return  # a bare `nmem` in a shared .mcp.json is the team's choice, not an old install's path
    rest = {k: v for k, v in servers.items() if k != SERVER_NAME}
    updated = _with_servers(config, slot.keys, rest) if rest else _without_servers(config, slot.keys)
    if slot.keys[:1] == ("projects",) and not rest:
        projects = dict(updated["projects"])
        if projects.get(slot.keys[1]) == {}:  # the entry install made for nmem alone
            del projects[slot.keys[1]]
            updated = {**updated, "projects": projects}
    files.save_or_remove(slot.file, updated)


def _without_servers(config: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`config` without the `mcpServers` under `keys`: nmem's entry was the last one in it."""
    if not keys:
        return {k: v for k, v in config.items() if k != "mcpServers"}
    child = config.get(keys[0])
    return {**config, keys[0]: _without_servers(child if isinstance(child, dict) else {}, keys[1:])}


# -- install / uninstall ---------------------------------------------------------------------------


def install(scope: str, *, exe: str | None = None, project_dir: Path | None = None, home: Path | None = None,
            with_mcp: bool = True, shared_mcp: bool = False, data_dir: Path | None = None) -> Report:
    paths = paths_for(scope, project_dir, home, shared_mcp)
    report = Report()
    files = Files(data_dir or default_data_dir(), report)
    settings = load_config(paths.settings)
    wanted = merged_hooks(settings, hook_command())
    if wanted != settings:
        files.save(paths.settings, wanted)
    else:
        report.unchanged.append(str(paths.settings))
    for other in paths.others:  # hooks an older nmem wrote into the shared project settings
        current = load_config(other)
        cleaned = without_hooks(current)
        if cleaned != current:
            files.save(other, cleaned)
    if with_mcp:  # only the MCP server runs the `nmem` script; hooks run this interpreter
        if paths.mcp.scope == "project":
            _put_server(files, paths.mcp, mcp_entry("nmem"))
            report.notes.append(APPROVAL_NOTE.format(file=paths.mcp.file))
        else:
            _put_server(files, paths.mcp, mcp_entry(exe or nmem_executable()))
            for slot in paths.other_mcp:  # an older nmem's machine path in the shared .mcp.json
                _drop_server(files, slot, only_machine_specific=True)
    if scope == "project":
        note = _ignore_note(paths.settings)
        if note:
            report.notes.append(note)
    return report


def uninstall(scope: str, *, project_dir: Path | None = None, home: Path | None = None,
              data_dir: Path | None = None) -> Report:
    paths = paths_for(scope, project_dir, home)
    report = Report()
    files = Files(data_dir or default_data_dir(), report)
    for path in (paths.settings, *paths.others):
        current = load_config(path)
        cleaned = without_hooks(current)
        if cleaned != current:
            files.save_or_remove(path, cleaned)
    for slot in (paths.mcp, *paths.other_mcp):
        _drop_server(files, slot)
    for path in (paths.settings, *paths.others, paths.mcp.file, *(s.file for s in paths.other_mcp)):
        files.remove_if_created(path)
    files.drop_manifest_if_done()
    if not report.changed and not report.removed:
        report.unchanged.extend([str(paths.settings), paths.mcp.describe()])
    return report


def _ignore_note(path: Path) -> str | None:
    """A note when git would track the local settings file (Claude Code ignores the ones it makes)."""
    try:
        done = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=path.parent, capture_output=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode == 1:  # inside a repository, not ignored
        return (f"{path} is not ignored by git; it holds this machine's paths, so add "
                f"`.claude/{LOCAL_SETTINGS}` to .gitignore")
    return None


# -- what is installed ------------------------------------------------------------------------------


def _hook_files(settings: dict[str, Any]) -> tuple[list[str], set[str]]:
    events, exes = [], set()
    hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
    for event, groups in (hooks or {}).items():
        for group in groups if isinstance(groups, list) else []:
            for handler in group.get("hooks", []) if isinstance(group, dict) else []:
                files = command_files(handler.get("command")) if isinstance(handler, dict) else None
                if files:
                    events.append(event)
                    exes.update(files)
    return events, exes


MANAGED_SETTINGS = (Path("/etc/claude-code/managed-settings.json"),
                    Path("/Library/Application Support/ClaudeCode/managed-settings.json"))


def hooks_off(project_dir: Path | None = None, home: Path | None = None,
              managed: tuple[Path, ...] = MANAGED_SETTINGS) -> str | None:
    """Why Claude Code would run none of nmem's hooks, or None. `disableAllHooks: true` in any
    settings file turns off every hook that is not managed, and managed settings can turn all
    off or allow only their own (`allowManagedHooksOnly`); Claude Code then skips nmem's hooks
    without a word (checked with Claude Code 2.1.197)."""
    root = project_dir or Path.cwd()
    files = [(home or Path.home()) / ".claude" / "settings.json", root / ".claude" / "settings.json",
             root / ".claude" / LOCAL_SETTINGS]
    for path in [*files, *managed]:
        try:
            settings = load_config(path)
        except ConfigError:
            continue  # reported by the wiring check
        for key in ("disableAllHooks", "allowManagedHooksOnly") if path in managed else ("disableAllHooks",):
            if settings.get(key) is True:
                return f"{key}: true in {path}"
    return None


def wiring(scope: str, *, project_dir: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    """What is installed at one scope: events wired to nmem, their executables, the MCP entries."""
    paths = paths_for(scope, project_dir, home)
    slots = [paths.mcp, *paths.other_mcp]
    if scope == "project":  # Claude Code started in a subdirectory has its own local-scope entry
        root = (project_dir or Path.cwd()).resolve()
        slots += [McpSlot(paths.mcp.file, ("projects", str(p)), "local") for p in root.parents]
    events: list[str] = []
    exes: set[str] = set()
    found_in: list[str] = []
    servers: list[dict[str, Any]] = []
    try:
        for path in (paths.settings, *paths.others):
            got, files = _hook_files(load_config(path))
            if got:
                found_in.append(str(path))
                events += got
                exes |= files
        for slot in slots:
            entry = _servers(load_config(slot.file), slot.keys).get(SERVER_NAME)
            if isinstance(entry, dict):
                servers.append({"scope": slot.scope, "file": slot.describe(), "entry": entry})
    except ConfigError as exc:
        return {"scope": scope, "error": exc.message, "events": [], "executables": [], "mcp": None, "servers": []}
    return {"scope": scope, "settings": ", ".join(found_in) or str(paths.settings), "events": sorted(set(events)),
            "missing_events": [e for e in HOOK_EVENTS if e not in events], "executables": sorted(exes),
            "mcp": servers[0]["entry"] if servers else None,
            "mcp_file": servers[0]["file"] if servers else paths.mcp.describe(), "servers": servers}
