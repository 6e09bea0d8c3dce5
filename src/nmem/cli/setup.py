"""Setting nmem up: `install`/`uninstall` for Claude Code, `doctor`, and `import` of old transcripts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nmem.cli.app import State, emit, format_option, note, pass_state
from nmem.cli.output import Block, Body, Heading, Table
from nmem.doctor import FAIL, run_checks
from nmem.integrations import claude_code
from nmem.integrations.transcripts import default_root, find_transcripts, import_transcripts

HARNESSES = click.Choice(["claude-code"])


def _report_blocks(title: str, report: claude_code.Report) -> list[Block]:
    rows = [[path, "updated"] for path in report.changed] + [[path, "unchanged"] for path in report.unchanged]
    blocks: list[Block] = [Heading(title), Table(("file", "result"), rows)]
    if report.backups:
        blocks.append(Body("backups: " + ", ".join(report.backups)))
    return blocks


@click.command("install")
@click.argument("harness", type=HARNESSES)
@click.option("--scope", type=click.Choice(claude_code.SCOPES), default="user", show_default=True,
              help="user: ~/.claude/settings.json and ~/.claude.json; project: .claude/settings.json and .mcp.json.")
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --scope project: the project root (default: the working directory).")
@click.option("--no-mcp", is_flag=True, help="Wire the hooks only, not the MCP server.")
@format_option
@pass_state
def install(state: State, harness: str, scope: str, project_dir: Path | None, no_mcp: bool,
            fmt: str | None) -> None:
    """Wire nmem into Claude Code: every hook event and the MCP server.

    Merges with the settings already there, keeps a timestamped backup of each file it
    changes, and is safe to run again. Hooks call the absolute path of this nmem, so no
    shell shim runs on every tool call.
    """
    report = claude_code.install(scope, project_dir=project_dir, with_mcp=not no_mcp)
    emit(state, fmt, report.to_dict(), lambda: _report_blocks(f"nmem installed for Claude Code ({scope})", report))
    if report.changed:
        note("restart Claude Code (or run /hooks) to load the new hooks")


@click.command("uninstall")
@click.argument("harness", type=HARNESSES)
@click.option("--scope", type=click.Choice(claude_code.SCOPES), default="user", show_default=True)
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@format_option
@pass_state
def uninstall(state: State, harness: str, scope: str, project_dir: Path | None, fmt: str | None) -> None:
    """Remove exactly the hooks and MCP entry `nmem install` added; nothing else changes."""
    report = claude_code.uninstall(scope, project_dir=project_dir)
    emit(state, fmt, report.to_dict(), lambda: _report_blocks(f"nmem removed from Claude Code ({scope})", report))


@click.command("doctor")
@format_option
@pass_state
def doctor(state: State, fmt: str | None) -> None:
    """Check the configuration, the database, the Claude Code wiring and recent hook errors.

    Exits 1 when a check fails.
    """
    checks = run_checks()
    marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    emit(state, fmt, {"checks": [c.to_dict() for c in checks]},
         lambda: [Heading("nmem doctor"), Table(("", "check", "detail"),
                                                [[marks[c.status], c.name, c.detail] for c in checks])])
    if any(c.status == FAIL for c in checks):
        raise click.exceptions.Exit(1)


@click.command("import")
@click.argument("harness", type=HARNESSES)
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@format_option
@pass_state
def import_(state: State, harness: str, path: Path | None, fmt: str | None) -> None:
    """Backfill from Claude Code transcripts (default ~/.claude/projects).

    PATH may be the projects directory, one project's directory or one session's .jsonl
    file. Subagent work (sidechain lines, subagents/*.jsonl) is recorded under its session.
    Each file is read from where the last import stopped, so running it again records only
    what transcripts gained since; a session the hooks captured live gains only the events
    after the ones they recorded.
    """
    root = path or default_root()
    files = find_transcripts(root)
    if not files:
        note(f"no transcripts found under {root}")
    service = state.service()
    with click.progressbar(length=len(files), label="importing", file=sys.stderr, show_pos=True) as bar:
        def advance(_path: Path) -> None:
            bar.update(1)

        report = import_transcripts(service, files, progress=advance)
    data = report.to_dict()
    emit(state, fmt, data, lambda: [Heading("Claude Code import"), Table(("", "count"), [
        ["transcripts", str(report.files)], ["sessions imported", str(report.imported)],
        ["sessions updated (new events)", str(report.updated)],
        ["sessions skipped (nothing new)", str(report.skipped)], ["events recorded", str(report.events)],
    ])])
    for error in report.errors:
        note(error)


COMMANDS: tuple[click.Command, ...] = (install, uninstall, doctor, import_)
