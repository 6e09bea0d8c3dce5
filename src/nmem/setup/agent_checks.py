"""`nmem doctor`'s checks of the agents other than Claude Code: (name, status, detail, hint) rows.

An agent that is not on this machine (no config directory, nmem not wired) gets no row: nobody
who does not use Codex should read a warning about it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nmem.capture.codex import codex_home
from nmem.setup import codex
from nmem.setup.claude_code import SCOPES

Row = tuple[str, str, str, str]
OK, WARN, FAIL = "ok", "warn", "fail"


def _executable_rows(label: str, w: dict[str, Any], again: str) -> list[Row]:
    rows: list[Row] = []
    for path in w["executables"]:
        runnable = path.endswith(".py") or os.access(path, os.X_OK)
        if not (os.path.isfile(path) and runnable):
            rows.append((f"{label} hook executable", FAIL, f"{path} is missing",
                         f"run: {again} (it writes this nmem's paths)"))
    return rows


def _mcp_row(label: str, w: dict[str, Any], again: str) -> Row:
    entry = w["mcp"]
    if entry is None:
        return (f"{label} mcp server ({w['scope']})", WARN, f"not registered in {w['config_file']}", f"run: {again}")
    command = str(entry.get("command") or "")
    if not (os.path.isabs(command) and os.path.isfile(command) and os.access(command, os.X_OK)):
        return (f"{label} mcp server ({w['scope']})", FAIL, f"{w['config_file']}: command {command!r} is not an "
                "executable file", f"run: {again}")
    args = " ".join(str(a) for a in entry.get("args") or [])
    return (f"{label} mcp server ({w['scope']})", OK, f"{w['config_file']}: {command} {args}".rstrip(), "")


def codex_rows(project_dir: Path, home: Path | None = None) -> list[Row]:
    return agent_rows("codex", codex, codex_home(home), project_dir, home)


def agent_rows(label: str, module: Any, config_dir: Path, project_dir: Path, home: Path | None = None) -> list[Row]:
    found = [module.wiring(scope, project_dir=project_dir, home=home) for scope in SCOPES]
    rows: list[Row] = []
    for w in found:
        if w.get("error"):
            rows.append((f"{label} config ({w['scope']})", FAIL, w["error"], "fix the file it names, then run "
                         "nmem doctor again"))
    wired = [w for w in found if w["events"] or w.get("mcp")]
    if not wired:
        if config_dir.is_dir():
            rows.append((f"{label} hooks", WARN, f"{label} is set up here ({config_dir}) but nmem is not "
                         "wired into it", f"nmem install {label}"))
        return rows
    for w in wired:
        again = f"nmem install {label}" + (" --scope project" if w["scope"] == "project" else "")
        missing = w["missing_events"]
        detail = f"{w['hooks_file']}: {len(w['events'])} events"
        if missing:
            detail += f", missing {', '.join(missing)}"
        if w.get("disabled"):
            rows.append((f"{label} hooks ({w['scope']})", FAIL, f"{detail}; but hooks are off in "
                         f"{w['config_file']} ({w['disabled']})", f"turn them on: remove `{w['disabled']}`"))
        else:
            rows.append((f"{label} hooks ({w['scope']})", WARN if missing else OK, detail,
                         f"run: {again}" if missing else ""))
        if w.get("untrusted"):
            rows.append((f"{label} hook trust ({w['scope']})", WARN, f"no trust record for nmem's "
                         f"{', '.join(w['untrusted'])} hooks in {w['hooks_file']}: Codex skips them until you "
                         "trust them", "start Codex, open /hooks and trust nmem's hooks"))
        rows.extend(_executable_rows(label, w, again))
        rows.append(_mcp_row(label, w, again))
    return rows


def rows(project_dir: Path, home: Path | None = None) -> list[Row]:
    from nmem.setup import cursor, gemini, opencode

    base = home or Path.home()
    return (codex_rows(project_dir, home) + agent_rows("gemini", gemini, base / ".gemini", project_dir, home)
            + agent_rows("cursor", cursor, base / ".cursor", project_dir, home)
            + agent_rows("opencode", opencode, opencode.config_dir("user", home=home), project_dir, home))
