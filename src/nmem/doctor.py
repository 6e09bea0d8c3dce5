"""`nmem doctor`: is nmem wired, is the database healthy, did hooks fail lately?"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmem.config import Settings, load_settings
from nmem.errors import NmemError
from nmem.integrations import claude_code
from nmem.store import open_store
from nmem.store.sqlite_schema import LATEST_VERSION

OK, WARN, FAIL = "ok", "warn", "fail"
_LOG_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),\d+ (ERROR|WARNING) (.*)$")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


def _config() -> tuple[Settings | None, Check]:
    try:
        settings = load_settings()
    except NmemError as exc:
        return None, Check("config", FAIL, exc.message)
    if settings.unknown_keys:
        return settings, Check("config", WARN, f"unknown keys in {settings.config_file}: "
                               + ", ".join(settings.unknown_keys))
    where = settings.config_file if os.path.exists(settings.config_file) else "defaults (no config file)"
    state = "enabled" if settings["memory.enabled"] else "DISABLED (memory.enabled = false)"
    return settings, Check("config", OK if settings["memory.enabled"] else WARN, f"{where}; memory {state}")


def _data_dir(settings: Settings) -> Check:
    home = Path(settings.home)
    if not home.exists():
        return Check("data dir", WARN, f"{home} does not exist yet (created on first use)")
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        return Check("data dir", WARN, f"{home} is mode {mode:o}; expected 700 (chmod 700 {home})")
    return Check("data dir", OK, f"{home} (mode 700)")


def _database(settings: Settings) -> Check:
    try:
        store = open_store(settings.store_url)
    except NmemError as exc:
        return Check("database", FAIL, exc.message)
    try:
        status = store.status()
        integrity = store.integrity()
    except NmemError as exc:
        return Check("database", FAIL, exc.message)
    finally:
        store.close()
    if integrity != "ok":
        return Check("database", FAIL, f"integrity check: {integrity}")
    version = "" if status.schema_version == LATEST_VERSION else f" (expected v{LATEST_VERSION})"
    return Check("database", OK if not version else FAIL,
                 f"{settings.db_path}: schema v{status.schema_version}{version}, {status.sessions} sessions, "
                 f"{status.observations} observations, {status.memories} memories, "
                 f"{status.size_bytes / 1e6:.1f} MB")


def _wiring(project_dir: Path, home: Path | None) -> list[Check]:
    checks: list[Check] = []
    found = [claude_code.wiring(scope, project_dir=project_dir, home=home) for scope in claude_code.SCOPES]
    wired = [w for w in found if w["events"]]
    if not wired:
        checks.append(Check("claude code hooks", FAIL, "not installed; run: nmem install claude-code"))
    for w in wired:
        missing = w["missing_events"]
        status = WARN if missing else OK
        detail = f"{w['settings']}: {len(w['events'])} events" + (f", missing {', '.join(missing)}" if missing else "")
        checks.append(Check(f"claude code hooks ({w['scope']})", status, detail))
        for path in w["executables"]:  # the interpreter and launcher, or an `nmem` executable
            runnable = path.endswith(".py") or os.access(path, os.X_OK)
            if not (os.path.isfile(path) and runnable):
                checks.append(Check("hook executable", FAIL, f"{path} is missing; run nmem install claude-code again"))
    servers = [w for w in found if w.get("mcp")]
    if servers:
        checks.extend(Check(f"mcp server ({w['scope']})", OK, f"{w['mcp_file']}: {w['mcp'].get('command')} serve")
                      for w in servers)
    else:
        checks.append(Check("mcp server", WARN, "not registered; run: nmem install claude-code"))
    return checks


def _recent_errors(settings: Settings, since: float) -> Check:
    log = Path(settings.log_dir) / "nmem.log"
    if not log.exists():
        return Check("hook log", OK, "no errors logged")
    errors, last = 0, ""
    with log.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            match = _LOG_LINE.match(line)
            if not match or match.group(2) != "ERROR":
                continue
            when = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"))
            if when >= since:
                errors += 1
                last = match.group(3)
    if errors:
        return Check("hook log", WARN, f"{errors} hook errors in the last 24 h; last: {last[:200]} (see {log})")
    return Check("hook log", OK, "no hook errors in the last 24 h")


def _spool(settings: Settings) -> Check:
    spool = Path(settings.spool_dir)
    pending = len(list(spool.glob("[0-9]*.json"))) if spool.is_dir() else 0
    bad = len(list(spool.glob("*.bad"))) if spool.is_dir() else 0
    if bad:
        return Check("spool", WARN, f"{pending} events waiting, {bad} unreadable in {spool}")
    if pending:
        return Check("spool", WARN, f"{pending} events waiting (ingested by the next hook run)")
    return Check("spool", OK, "empty")


def run_checks(project_dir: Path | None = None, home: Path | None = None) -> list[Check]:
    settings, config_check = _config()
    checks = [config_check]
    if settings is None:
        return checks
    checks.append(_data_dir(settings))
    checks.append(_database(settings))
    checks.extend(_wiring(project_dir or Path.cwd(), home))
    checks.append(_recent_errors(settings, time.time() - 86400))
    checks.append(_spool(settings))
    return checks
