"""`nmem doctor`: is nmem installed and wired, is the database healthy, did hooks fail lately?

Every check carries a `hint`, the whole command or step that fixes what it found.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmem.config import Settings, load_settings
from nmem.errors import NmemError
from nmem.setup import claude_code
from nmem.store import open_store
from nmem.store.keys import database_key
from nmem.store.sqlite.schema import LATEST_VERSION

OK, WARN, FAIL = "ok", "warn", "fail"
_LOG_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),\d+ (ERROR|WARNING) (.*)$")
LOG_TAIL_BYTES = 1 << 20      # the log's last MiB is plenty for a day of hook trouble
LOG_WINDOW_S = 86400
SHOWN_LOG_LINES = 3
OUR_ENTRY_POINT = "nmem.__main__:main"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


def _distribution() -> list[Check]:
    """This nmem's distribution, and PyPI's unrelated `nmem` in the same environment (it owns
    the same `nmem` package and command, so one overwrites the other)."""
    from importlib import metadata

    checks: list[Check] = []
    try:
        version = metadata.version(claude_code.DIST_NAME)
        checks.append(Check("install", OK, f"{claude_code.DIST_NAME} {version}"))
    except metadata.PackageNotFoundError:
        checks.append(Check("install", WARN, f"{claude_code.DIST_NAME} is not installed as a distribution here "
                                             "(running from a source tree?)",
                            f"{claude_code.INSTALL_HINT}, or pip install -e . in a checkout"))
    try:
        other = metadata.distribution("nmem")
    except metadata.PackageNotFoundError:
        other = None
    if other is not None and OUR_ENTRY_POINT not in (other.read_text("entry_points.txt") or ""):
        checks.append(Check(
            "conflicting package", FAIL,
            f"the unrelated PyPI project `nmem` {other.version} is installed in this environment; it owns the "
            f"same `nmem` package and command as this nmem",
            f"pip uninstall nmem, then reinstall this nmem: {claude_code.INSTALL_HINT}"))
    return checks


def _on_path() -> Check | None:
    """The `nmem` a shell or the plugin runs: this one, or another?"""
    try:
        ours = claude_code.nmem_executable()
    except NmemError:
        return None
    found = shutil.which("nmem")
    if found is None:
        return Check("nmem on PATH", WARN, f"no `nmem` on PATH (this one is {ours}); the installed hooks and "
                                           "MCP entry use absolute paths, the plugin directory needs PATH",
                     f"add {os.path.dirname(ours)} to PATH, or {claude_code.INSTALL_HINT}")
    if os.path.realpath(found) != os.path.realpath(ours):
        from nmem.setup.other_nmem import describe

        return Check("nmem on PATH", WARN, f"`nmem` on PATH is {found}, {describe(found)}; not this nmem ({ours}). "
                     "nmem's installed hooks use absolute paths and its plugin runs `nmem-memory`, so they are "
                     "unaffected; a shell's `nmem` is the other program",
                     f"put {os.path.dirname(ours)} first on PATH, or uninstall the other package (this one is "
                     f"{claude_code.DIST_NAME})")
    return Check("nmem on PATH", OK, found)


def _plugin_command() -> Check | None:
    """`nmem-memory` on PATH: the command the Claude Code plugin's hooks and MCP entry run."""
    try:
        ours = os.path.join(os.path.dirname(claude_code.nmem_executable()), "nmem-memory")
    except NmemError:
        return None
    found = shutil.which("nmem-memory")
    if found is None:
        return Check("nmem-memory on PATH", WARN, "no `nmem-memory` on PATH: the Claude Code plugin runs it "
                     "(`nmem install claude-code` does not need it)",
                     f"add {os.path.dirname(ours)} to PATH, or {claude_code.INSTALL_HINT}")
    if os.path.exists(ours) and os.path.realpath(found) != os.path.realpath(ours):
        return Check("nmem-memory on PATH", WARN, f"`nmem-memory` on PATH is {found}, another nmem install "
                     f"than this one ({ours})", f"put {os.path.dirname(ours)} first on PATH")
    return Check("nmem-memory on PATH", OK, found)


def _config() -> tuple[Settings | None, Check]:
    try:
        settings = load_settings()
    except NmemError as exc:
        return None, Check("config", FAIL, exc.message, "fix the file it names (or move it away), then run "
                                                       "nmem doctor again")
    if settings.unknown_keys:
        return settings, Check("config", WARN, f"unknown keys in {settings.config_file}: "
                               + ", ".join(settings.unknown_keys),
                               "remove or rename them; nmem config show lists every setting")
    where = settings.config_file if os.path.exists(settings.config_file) else "defaults (no config file)"
    if settings["memory.enabled"]:
        return settings, Check("config", OK, f"{where}; memory enabled")
    return settings, Check("config", WARN, f"{where}; memory DISABLED (memory.enabled = false)",
                           "nmem config set memory.enabled true")


def _data_dir(settings: Settings) -> Check:
    home = Path(settings.home)
    if not home.exists():
        return Check("data dir", WARN, f"{home} does not exist yet (created on first use)")
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        return Check("data dir", WARN, f"{home} is mode {mode:o}; expected 700", f"chmod 700 {home}")
    return Check("data dir", OK, f"{home} (mode 700)")


def _database(settings: Settings) -> Check:
    try:
        store = open_store(settings.store_url, key=database_key(settings))
    except NmemError as exc:
        return Check("database", FAIL, exc.message, "check memory.path / store.url (nmem config show)")
    try:
        status = store.status()
        integrity = store.integrity()
    except NmemError as exc:
        return Check("database", FAIL, exc.message, "check memory.path / store.url (nmem config show)")
    finally:
        store.close()
    if integrity != "ok":
        return Check("database", FAIL, f"integrity check: {integrity}",
                     f"copy {settings.db_path} somewhere safe, then move it away (nmem starts a new one)")
    # a server store's integrity() already compares its schema with this nmem's
    sqlite = settings.store_url.startswith("sqlite:")
    version = "" if status.schema_version == LATEST_VERSION or not sqlite else f" (expected v{LATEST_VERSION})"
    where = settings.db_path if sqlite else status.url
    detail = (f"{where}: schema v{status.schema_version}{version}, {status.sessions} sessions, "
              f"{status.observations} observations, {status.memories} memories, "
              f"{status.size_bytes / 1e6:.1f} MB" + (", encrypted" if getattr(store, "encrypted", False) else ""))
    if version:
        return Check("database", FAIL, detail, "upgrade nmem: the database was written by a newer version")
    return Check("database", OK, detail)


def _command_path(command: str) -> str | None:
    """Where an MCP entry's command resolves: an absolute path as written, a bare name on PATH."""
    if os.path.isabs(command):
        return command
    return shutil.which(command)


def _path_hint() -> str:
    try:
        return f"add {os.path.dirname(claude_code.nmem_executable())} to PATH, or {claude_code.INSTALL_HINT}"
    except NmemError:
        return claude_code.INSTALL_HINT


def _mcp_server(server: dict[str, Any], shadowed_by: str | None) -> Check:
    """One registered MCP entry: its command must exist and be executable. Claude Code starts
    one server of a name, local over project over user; the others are only reported."""
    entry = server["entry"]
    name = f"mcp server ({server['scope']})"
    reinstall = "nmem install claude-code" + (" --scope project" if server["scope"] != "user" else "")
    bad = WARN if shadowed_by else FAIL
    aside = f" (not used: the {shadowed_by} entry of the same name wins)" if shadowed_by else ""
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        return Check(name, bad, f"{server['file']}: the nmem entry has no command{aside}", f"run: {reinstall}")
    path = _command_path(command)
    if path is None:
        return Check(name, bad, f"{server['file']}: command {command!r} is not on PATH{aside}",
                     f"put `{command}` on PATH: {_path_hint()}")
    if not os.path.isfile(path):
        return Check(name, bad, f"{server['file']}: command {path} does not exist{aside}",
                     f"run: {reinstall} (the nmem it registered was moved or removed)")
    if not os.access(path, os.X_OK):
        return Check(name, bad, f"{server['file']}: command {path} is not executable{aside}",
                     f"chmod +x {path}, or run: {reinstall}")
    args = " ".join(str(a) for a in entry.get("args") or [])
    return Check(name, OK, f"{server['file']}: {path} {args}".rstrip() + aside)


def _wiring(project_dir: Path, home: Path | None) -> list[Check]:
    checks: list[Check] = []
    found = [claude_code.wiring(scope, project_dir=project_dir, home=home) for scope in claude_code.SCOPES]
    for w in found:
        if w.get("error"):
            checks.append(Check(f"claude code settings ({w['scope']})", FAIL, w["error"],
                                "fix the file it names (it must hold one JSON object), then run nmem doctor again"))
    wired = [w for w in found if w["events"]]
    off = claude_code.hooks_off(project_dir, home) if wired else None
    if off:
        checks.append(Check("claude code hooks off", FAIL, f"Claude Code runs none of nmem's hooks: {off}",
                            "remove that setting (or set it to false)"))
    if not wired:
        checks.append(Check("claude code hooks", FAIL, "not installed",
                            "nmem install claude-code (or --scope project inside a project)"))
    for w in wired:
        missing = w["missing_events"]
        detail = f"{w['settings']}: {len(w['events'])} events" + (f", missing {', '.join(missing)}" if missing else "")
        again = "nmem install claude-code" + (" --scope project" if w["scope"] == "project" else "")
        checks.append(Check(f"claude code hooks ({w['scope']})", WARN if missing else OK, detail,
                            f"run: {again}" if missing else ""))
        for path in w["executables"]:  # the interpreter and launcher, or an `nmem` executable
            runnable = path.endswith(".py") or os.access(path, os.X_OK)
            if not (os.path.isfile(path) and runnable):
                checks.append(Check("hook executable", FAIL, f"{path} is missing",
                                    f"run: {again} (it writes this nmem's paths)"))
    precedence = {"local": 0, "project": 1, "user": 2}
    servers = sorted((server for w in found for server in w.get("servers", [])),
                     key=lambda server: precedence.get(server["scope"], 3))
    checks.extend(_mcp_server(server, servers[0]["scope"] if i else None) for i, server in enumerate(servers))
    if not servers:
        checks.append(Check("mcp server", WARN, "not registered",
                            "nmem install claude-code (or --scope project inside a project)"))
    return checks


def _log_tail(log: Path) -> list[str]:
    with log.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - LOG_TAIL_BYTES))
        if size > LOG_TAIL_BYTES:
            fh.readline()  # a partial first line
        return fh.read().decode("utf-8", errors="replace").splitlines()


def _recent_log(settings: Settings, now: float) -> Check:
    """Errors and warnings hooks logged in the last day (hook failures, malformed hook input,
    events spooled while the database was busy), the newest in full."""
    log = Path(settings.log_dir) / "nmem.log"
    if not log.exists():
        return Check("hook log", OK, "no errors or warnings logged")
    try:
        lines = _log_tail(log)
    except OSError as exc:
        return Check("hook log", WARN, f"cannot read {log}: {exc.strerror}", f"check the permissions of {log}")
    found: list[tuple[str, str, str]] = []
    for line in lines:
        match = _LOG_LINE.match(line)
        if not match:
            continue
        when = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"))
        if now - LOG_WINDOW_S <= when <= now + 60:
            found.append((match.group(1), match.group(2), match.group(3)))
    if not found:
        return Check("hook log", OK, "no errors or warnings in the last 24 h")
    errors = sum(1 for _, level, _ in found if level == "ERROR")
    warnings = len(found) - errors
    counted = ", ".join(f"{n} {word}{'' if n == 1 else 's'}"
                        for n, word in ((errors, "error"), (warnings, "warning")) if n)
    shown = "\n".join(f"{stamp} {level} {message}" for stamp, level, message in found[-SHOWN_LOG_LINES:])
    return Check("hook log", WARN, f"{counted} in the last 24 h ({log}); the latest:\n{shown}",
                 f"read {log} for the whole story; malformed hook input means a hook command or payload "
                 f"is wrong (nmem install claude-code rewrites nmem's)")


def _spool(settings: Settings) -> Check:
    spool = Path(settings.spool_dir)
    pending = len(list(spool.glob("[0-9]*.json"))) if spool.is_dir() else 0
    bad = len(list(spool.glob("*.bad"))) if spool.is_dir() else 0
    if bad:
        return Check("spool", WARN, f"{pending} events waiting, {bad} unreadable in {spool}",
                     f"look at the *.bad files in {spool}, then delete them")
    if pending:
        return Check("spool", WARN, f"{pending} events waiting (ingested by the next hook run)")
    return Check("spool", OK, "empty")


def run_checks(project_dir: Path | None = None, home: Path | None = None) -> list[Check]:
    checks = _distribution()
    for path_check in (_on_path(), _plugin_command()):
        if path_check is not None:
            checks.append(path_check)
    settings, config_check = _config()
    checks.append(config_check)
    if settings is None:
        return checks
    checks.append(_data_dir(settings))
    checks.append(_database(settings))
    checks.extend(_wiring(project_dir or Path.cwd(), home))
    from nmem.setup import agent_checks

    checks.extend(Check(*row) for row in agent_checks.rows(project_dir or Path.cwd(), home))
    checks.append(_recent_log(settings, time.time()))
    checks.append(_spool(settings))
    return checks
