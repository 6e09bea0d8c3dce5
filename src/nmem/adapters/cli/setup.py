"""Setting nmem up: `install`/`uninstall` for Claude Code and `doctor` (`import` is in `nmem.adapters.cli.portable`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Block, Body, Heading, Table
from nmem.capture.privacy import redact_url
from nmem.config import data_home
from nmem.errors import InvalidArgument
from nmem.setup import claude_code
from nmem.setup.doctor import FAIL, Check, run_checks

HARNESSES = click.Choice(["claude-code", "codex", "gemini", "cursor", "opencode"])
NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "cursor": "Cursor",
         "opencode": "OpenCode"}


def _report_blocks(title: str, report: claude_code.Report) -> list[Block]:
    rows = ([[path, "updated"] for path in report.changed] + [[path, "unchanged"] for path in report.unchanged]
            + [[path, "removed"] for path in report.removed])
    blocks: list[Block] = [Heading(title), Table(("file", "result"), rows)]
    if report.backups:
        blocks.append(Body("backups:\n" + "\n".join(f"  {path}" for path in report.backups)))
    return blocks


def _agent(harness: str) -> Any:
    """The integration module of an agent other than Claude Code (imported when used)."""
    from nmem.setup import codex, cursor, gemini, opencode

    return {"codex": codex, "gemini": gemini, "cursor": cursor, "opencode": opencode}[harness]


def _data_dir(state: State) -> Path:
    return Path(data_home(state.env))


@click.command("install")
@click.argument("harness", type=HARNESSES)
@click.option("--scope", type=click.Choice(claude_code.SCOPES), default="user", show_default=True,
              help="user: ~/.claude/settings.json and ~/.claude.json. project: this machine's wiring for one "
                   "project: hooks in .claude/settings.local.json, the MCP server in Claude Code's local scope "
                   "(~/.claude.json, under the project's path).")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --scope project: the project root (default: the working directory).")
@click.option("--shared-mcp", is_flag=True,
              help="With --scope project: register the MCP server in the project's .mcp.json as the bare `nmem` "
                   "command (no machine paths, fit to commit); Claude Code asks each person to approve it.")
@click.option("--no-mcp", is_flag=True, help="Wire the hooks only, not the MCP server.")
@format_option
@pass_state
def install(state: State, harness: str, scope: str, project_dir: Path | None, shared_mcp: bool, no_mcp: bool,
            fmt: str | None) -> None:
    """Wire nmem into a coding agent (Claude Code, Codex, Gemini CLI, Cursor, OpenCode) and its MCP client.

    Merges with the settings already there, backs each file it changes up under
    <data dir>/backups/ (never inside a project), and is safe to run again. Hooks call the
    absolute path of this nmem, so no shell shim runs on every tool call; at project scope
    those paths go only to .claude/settings.local.json, which stays out of the repository.
    Codex: hooks in ~/.codex/hooks.json (or <project>/.codex/hooks.json), the MCP server in
    the config.toml beside it. Gemini CLI: hooks and the MCP server in ~/.gemini/settings.json
    (or <project>/.gemini/settings.json). Cursor: ~/.cursor/hooks.json and ~/.cursor/mcp.json
    (or the project's .cursor/). OpenCode: a plugin file, ~/.config/opencode/plugins/nmem.js
    (or <project>/.opencode/plugins/nmem.js), and the MCP server in the opencode.json beside it.
    """
    if shared_mcp and scope != "project":
        raise InvalidArgument("--shared-mcp goes with --scope project")
    if shared_mcp and harness != "claude-code":
        raise InvalidArgument("--shared-mcp is for claude-code (Codex has no shared project MCP file)")
    if harness != "claude-code":
        report = _agent(harness).install(scope, project_dir=project_dir, with_mcp=not no_mcp, data_dir=_data_dir(state))
    else:
        report = claude_code.install(scope, project_dir=project_dir, with_mcp=not no_mcp, shared_mcp=shared_mcp,
                                     data_dir=_data_dir(state))
    name = NAMES[harness]
    emit(state, fmt, report.to_dict(), lambda: _report_blocks(f"nmem installed for {name} ({scope})", report))
    for message in report.notes:
        note(message)
    if report.changed:
        note(f"restart {name} to load the new hooks" + (" (or run /hooks)" if harness == "claude-code" else ""))


@click.command("uninstall")
@click.argument("harness", type=HARNESSES)
@click.option("--scope", type=click.Choice(claude_code.SCOPES), default="user", show_default=True)
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@format_option
@pass_state
def uninstall(state: State, harness: str, scope: str, project_dir: Path | None, fmt: str | None) -> None:
    """Remove exactly the hooks and MCP entries `nmem install` added, and the files and
    directories it created once nothing else is in them; nothing else changes."""
    if harness != "claude-code":
        report = _agent(harness).uninstall(scope, project_dir=project_dir, data_dir=_data_dir(state))
    else:
        report = claude_code.uninstall(scope, project_dir=project_dir, data_dir=_data_dir(state))
    name = NAMES[harness]
    report.notes.append(_data_note(state))
    emit(state, fmt, report.to_dict(), lambda: _report_blocks(f"nmem removed from {name} ({scope})", report))
    for message in report.notes:
        note(message)


def _data_note(state: State) -> str:
    """Where the memories stay: uninstalling unwires nmem, it never deletes what it recorded."""
    settings = state.settings
    where = redact_url(settings.store_url) if settings["store.url"] else settings.db_path
    return (f"your memories and trail stay in {where} (data directory {settings.home}); "
            "`nmem export` keeps a copy, deleting that directory removes them")


MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def _doctor_blocks(checks: list[Check]) -> list[Block]:
    """One line a check, its detail and fix in full (a table would cut them)."""
    width = max(len(c.name) for c in checks)
    lines: list[str] = []
    for c in checks:
        detail = c.detail.splitlines() or [""]
        lines.append(f"{MARKS[c.status]}  {c.name.ljust(width)}  {detail[0]}")
        lines.extend(f"      {' ' * width}  {more}" for more in detail[1:])
        if c.hint:
            lines.append(f"      {' ' * width}  fix: {c.hint}")
    return [Heading("nmem doctor"), Body("\n".join(lines))]


@click.command("doctor")
@format_option
@pass_state
def doctor(state: State, fmt: str | None) -> None:
    """Check the install, the configuration, the database, the Claude Code wiring (hooks and
    the MCP command they register) and recent hook errors and warnings in the log.

    Exits 1 when a check fails.
    """
    checks = run_checks()
    emit(state, fmt, {"checks": [c.to_dict() for c in checks]}, lambda: _doctor_blocks(checks))
    if any(c.status == FAIL for c in checks):
        raise click.exceptions.Exit(1)


COMMANDS: tuple[click.Command, ...] = (install, uninstall, doctor)
