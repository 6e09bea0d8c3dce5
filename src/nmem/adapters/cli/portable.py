"""Moving memory: `export`, `import` (nmem files and other tools), `backup` and `restore`.

For `export` and `import FILE`, `--format` names the file's format (jsonl, json, yaml,
markdown), as subcog's `import --format yaml` does; the summary they print follows the
global `nmem --format` (text by default). An export written to standard output keeps its
summary on stderr, so the pipe carries only the data.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import Block, Fields, Heading, Table
from nmem.adapters.cli.progress import progress_bar, progress_of
from nmem.adapters.cli.views import time_bound
from nmem.errors import InvalidArgument, NmemError
from nmem.portable import FORMATS, document, format_for, importer, jsonl, markdown
from nmem.portable import backup as backups
from nmem.portable.export import Export, ExportFilters
from nmem.portable.limits import InputLimits, decode, read_file, read_stream
from nmem.portable.records import Batch
from nmem.portable.sources import claude_mem, mcp_memory
from nmem.portable.sources.transcripts import default_root, find_transcripts, import_transcripts
from nmem.store.keys import database_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.service.api import Service

WRITERS: dict[str, Callable[[Export, TextIO, Callable[[int], None]], None]] = {
    "jsonl": jsonl.write, "json": document.write_json, "yaml": document.write_yaml, "markdown": markdown.write,
}
FILE_FORMAT = click.Choice(FORMATS)


# -- export -------------------------------------------------------------------------------

@click.command("export")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to FILE (complete or not at all) instead of standard output.")
@click.option("--format", "data_format", type=FILE_FORMAT, default=None,
              help="The file's format. Default: from FILE's extension (.jsonl, .json, .yaml, .md), else jsonl.")
@click.option("--domain", "domains", multiple=True,
              help="Only memories of this domain: project (this project's), project:NAME, user, org. Repeatable.")
@click.option("--namespace", "-n", "namespaces", multiple=True, help="Only memories of this namespace. Repeatable.")
@click.option("--project", help="Only this project: its memories (and any --domain's) and, with --trail, its sessions.")
@click.option("--since", help="Only what changed since: a date, an epoch time or an age (7d).")
@click.option("--tombstones", is_flag=True, help="Include forgotten memories' tombstones, so the deletes travel too.")
@click.option("--trail", is_flag=True, help="Include the trail: sessions, prompts and observations.")
@pass_state
def export(state: State, output: str | None, data_format: str | None, domains: tuple[str, ...],
           namespaces: tuple[str, ...], project: str | None, since: str | None, tombstones: bool,
           trail: bool) -> None:
    """Write curated memories (and, with --trail, the trail) to a file `nmem import` reads.

    Every field travels (uid, domain, namespace, summary, content, tags, source,
    relates_to, tier, pin, times), so an export imported into an empty database exports
    again byte for byte. Markdown is one readable document that still imports losslessly;
    JSON Lines streams, the others are built in memory. The export is one consistent
    snapshot while hooks keep writing.

    \b
        nmem export -o memories.md                          # every memory, as markdown
        nmem export --trail --since 30d -o last-month.jsonl
        nmem export --namespace decisions --format yaml | less
    """
    service = state.service()
    fmt = format_for(output, data_format, default="jsonl")
    filters = ExportFilters(domains=domains, namespaces=namespaces, project=project,
                            since=time_bound(service, since, name="--since"),
                            tombstones=tombstones, trail=trail)
    exported = Export(service, filters)
    with exported.snapshot():
        if output is None:
            _write(exported, fmt, sys.stdout)
        else:
            _write_atomically(output, lambda out: _write(exported, fmt, out))
    summary: dict[str, Any] = {"format": fmt, "output": os.path.abspath(output) if output else "-", **exported.counts}
    if output is None:
        note(_export_line(summary))
    else:
        emit(state, None, summary, lambda: [Fields([(k, str(v)) for k, v in summary.items()])])


def _write(exported: Export, fmt: str, out: TextIO) -> None:
    with progress_bar(len(exported.session_list()), "exporting") as advance:
        WRITERS[fmt](exported, out, advance)


def _write_atomically(path: str, write: Callable[[TextIO], None]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise InvalidArgument(f"cannot write in {directory}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:  # mkstemp's file is 0600: exports are private
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _count(summary: dict[str, Any], key: str, one: str) -> str:
    n = summary[key]
    return f"{n} {one if n == 1 else key}"


def _export_line(summary: dict[str, Any]) -> str:
    parts = [_count(summary, "memories", "memory")]
    if summary["tombstones"]:
        parts.append(_count(summary, "tombstones", "tombstone"))
    if summary["sessions"]:
        parts.append(f"{_count(summary, 'sessions', 'session')} ({_count(summary, 'prompts', 'prompt')}, "
                     f"{_count(summary, 'observations', 'observation')})")
    return f"exported {', '.join(parts)} as {summary['format']}"


# -- import ---------------------------------------------------------------------------------

class ImportGroup(click.Group):
    """`nmem import FILE` is `nmem import file FILE`; a known source name picks that source."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["file", *args]
        return super().parse_args(ctx, args)


@click.group("import", cls=ImportGroup, subcommand_metavar="FILE | SOURCE [ARGS]...")
def import_() -> None:
    """Bring memory in: an nmem export, or another tool's memory.

    \b
        nmem import FILE [--format F]      an nmem export (same as `nmem import file FILE`)
        nmem import claude-code [PATH]     Claude Code transcripts
        nmem import codex [PATH]           Codex session files
        nmem import gemini [DIR]           Gemini CLI chat files
        nmem import opencode [DIR]         OpenCode's stored sessions
        nmem import claude-mem [DB]        a claude-mem database
        nmem import mcp-memory FILE        the MCP memory server's memory.jsonl

    Every import can run again: what is already here is recognised and left as it is.

    Hostile input is bounded: only regular files are read (a FIFO or a device is refused),
    up to import.max_file_bytes; a line longer than import.max_line_bytes or a record nested
    deeper than import.max_depth is skipped and reported, the rest imported; YAML aliases may
    add at most import.yaml_alias_nodes nodes.
    """


def _read_input(path: str, limits: InputLimits) -> str:
    """The file's text: a regular file or standard input, within `import.max_file_bytes`."""
    if path == "-":
        if sys.stdin.isatty():
            raise InvalidArgument("give a FILE to import, or pipe an export into standard input")
        return decode(read_stream(sys.stdin.buffer, "standard input", limits), "standard input")
    return decode(read_file(path, limits), path)


def _regular_or_directory(root: Path) -> None:
    """Transcripts are read from regular files found in a directory, or one given: never a FIFO or a device."""
    if root.exists() and not (root.is_file() or root.is_dir()):
        raise InvalidArgument(f"{root} is not a regular file or a directory (a FIFO or device is never read)")


def _apply(service: Service, batch: Batch) -> importer.ImportReport:
    with progress_bar(batch.rows, "importing") as advance:
        return importer.apply(service, batch, advance)


def _import_blocks(title: str, data: dict[str, Any]) -> list[Block]:
    columns = importer.MEMORY_RESULTS
    rows = [[kind, *[str(counts[c]) if c in counts else "" for c in columns]]
            for kind, counts in data["imported"].items()]
    blocks: list[Block] = [Heading(title), Table(("", *columns[:-1], "kept (newer here)"), rows)]
    if data.get("skipped"):
        blocks.append(Fields([("skipped", str(len(data["skipped"])))]))
    return blocks


def _report(state: State, fmt: str | None, title: str, source: dict[str, Any], report: importer.ImportReport,
            skipped: list[str] | None = None) -> None:
    data = {**source, "imported": report.to_dict()}
    if skipped is not None:
        data["skipped"] = skipped
    emit(state, fmt, data, lambda: _import_blocks(title, data))
    for line in (skipped or [])[:20]:
        note(f"skipped {line}")


@import_.command("file", short_help="An nmem export or a hand-written file of memories (the default).")
@click.argument("path", metavar="[FILE]", required=False, default="-")
@click.option("--format", "data_format", type=FILE_FORMAT, default=None,
              help="The file's format. Default: from FILE's extension; required for standard input.")
@pass_state
def import_file(state: State, path: str, data_format: str | None) -> None:
    """Import an nmem export (or a hand-written file of memories) from FILE or stdin.

    Memories are keyed by uid: one already here is left alone when it is the same, replaced
    when the file's copy is newer (updated_at), kept when ours is newer; a tombstone
    forgets. Memories without a uid (written by hand) are added unless their domain and
    namespace already hold the same text. Sessions are keyed by id, prompts and
    observations by what they say and when, so importing a file twice adds nothing. The
    whole file is checked before anything is written: bad input changes nothing. The
    summary follows the global --format (`nmem --format json import …`).

    \b
        nmem import memories.md
        cat memories.yaml | nmem import --format yaml
    """
    fmt = format_for(path, data_format)
    limits = InputLimits.from_settings(state.settings)
    text = _read_input(path, limits)
    service = state.service()
    name = "standard input" if path == "-" else path
    try:
        batch = importer.read(service, text, fmt, limits)
    except NmemError as exc:
        raise type(exc)(f"{name}: {exc.message}") from None
    report = _apply(service, batch)
    _report(state, None, f"Imported {name}", {"file": path if path == "-" else os.path.abspath(path), "format": fmt},
            report, batch.skipped)


@import_.command("claude-code", short_help="Claude Code transcripts (default ~/.claude/projects).")
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@format_option
@pass_state
def import_claude_code(state: State, path: Path | None, fmt: str | None) -> None:
    """Backfill from Claude Code transcripts (default ~/.claude/projects).

    PATH may be the projects directory, one project's directory or one session's .jsonl
    file. Subagent work (sidechain lines, subagents/*.jsonl) is recorded under its session.
    Every text message the agent wrote (the subagents' too) and every thinking block is kept,
    bounded and redacted, as an agent prompt in its turn. Each file is read from where the
    last import stopped, so running it again records only what transcripts gained since; a
    session the hooks captured live gains only the events after the ones they recorded.
    """
    root = path or default_root()
    _regular_or_directory(root)
    files = find_transcripts(root)
    if not files:
        note(f"no transcripts found under {root}")
    service = state.service()
    with progress_bar(len(files), "importing") as advance:
        report = import_transcripts(service, files, progress=lambda _path: advance(1),
                                    max_line_bytes=int(state.settings["import.max_line_bytes"]))
    _agent_import_report(state, fmt, "Claude Code import", "transcripts", report)


@import_.command("codex", short_help="Codex session files (default ~/.codex/sessions).")
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@format_option
@pass_state
def import_codex(state: State, path: Path | None, fmt: str | None) -> None:
    """Backfill from Codex session files (default ~/.codex/sessions, or $CODEX_HOME/sessions).

    PATH may be the sessions directory, a date folder or one rollout-*.jsonl file. Every prompt,
    tool call, assistant reply and compaction is recorded under the session, as Codex's. Each
    file is read from where the last import stopped; a session the hooks captured live gains
    only the events after the ones they recorded.
    """
    from nmem.portable.sources.codex_sessions import default_root as codex_root
    from nmem.portable.sources.codex_sessions import find_rollouts, import_rollouts

    root = path or codex_root()
    _regular_or_directory(root)
    files = find_rollouts(root)
    if not files:
        note(f"no Codex session files found under {root}")
    service = state.service()
    with progress_bar(len(files), "importing") as advance:
        report = import_rollouts(service, files, progress=lambda _path: advance(1))
    _agent_import_report(state, fmt, "Codex import", "session files", report)


def _agent_import_report(state: State, fmt: str | None, title: str, sources: str, report: Any) -> None:
    emit(state, fmt, report.to_dict(), lambda: [Heading(title), Table(("", "count"), [
        [sources, str(report.files)], ["sessions imported", str(report.imported)],
        ["sessions updated (new events)", str(report.updated)],
        ["sessions skipped (nothing new)", str(report.skipped)], ["events recorded", str(report.events)],
    ])])
    for error in report.errors:
        note(error)


@import_.command("gemini", short_help="Gemini CLI chat files (default ~/.gemini/tmp).")
@click.argument("path", metavar="[DIR]", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--project", type=click.Path(file_okay=False), default=None,
              help="The project directory the chats belong to, when their folder does not say it.")
@format_option
@pass_state
def import_gemini(state: State, path: Path | None, project: str | None, fmt: str | None) -> None:
    """Backfill from Gemini CLI chat files (default ~/.gemini/tmp).

    DIR may be ~/.gemini/tmp, one project's folder, its chats/ or one session-*.jsonl (or
    older session-*.json) file. Every prompt, reply, thought summary and finished tool call is
    recorded under the session, as Gemini's; a subagent's chat under its parent session. The
    project is the folder's .project_root, or its name in ~/.gemini/projects.json, or the
    directory whose hash the file holds; give --project when none says it. Running it again
    records only what the chats gained since.
    """
    from nmem.portable.sources import gemini_chats
    from nmem.portable.sources.snapshots import import_sessions

    root = path or gemini_chats.default_root()
    _regular_or_directory(root)
    files = gemini_chats.find_chats(root)
    if not files:
        note(f"no Gemini CLI chat files found under {root}")
    service = state.service()
    read = gemini_chats.reader(InputLimits.from_settings(state.settings), project)
    with progress_bar(len(files), "importing") as advance:
        report = import_sessions(service, "gemini", [str(f) for f in files], read, progress=lambda _s: advance(1))
    _agent_import_report(state, fmt, "Gemini CLI import", "chat files", report)


@import_.command("opencode", short_help="OpenCode's sessions (default ~/.local/share/opencode).")
@click.argument("path", metavar="[DIR]", required=False, type=click.Path(exists=True, path_type=Path))
@format_option
@pass_state
def import_opencode(state: State, path: Path | None, fmt: str | None) -> None:
    """Backfill from OpenCode's stored sessions (default $XDG_DATA_HOME/opencode, that is
    ~/.local/share/opencode).

    DIR may be OpenCode's data directory, its opencode.db, or its storage/ directory of JSON
    files (versions before the database). The database is only read. Every prompt, reply,
    reasoning and finished tool call is recorded under the session, as OpenCode's; a subagent's
    session (started by the task tool) under its parent. Running it again records only what
    the sessions gained since.
    """
    from nmem.portable.sources import opencode_sessions
    from nmem.portable.sources.snapshots import import_sessions

    root = path or opencode_sessions.default_root()
    _regular_or_directory(root)
    sources = opencode_sessions.find_sources(root)
    if not sources:
        note(f"no OpenCode sessions found under {root}")
    service = state.service()
    read = opencode_sessions.reader(InputLimits.from_settings(state.settings))
    with progress_bar(len(sources), "importing") as advance:
        report = import_sessions(service, "opencode", [str(s) for s in sources], read,
                                 progress=lambda _s: advance(1))
    _agent_import_report(state, fmt, "OpenCode import", "sources", report)


@import_.command("claude-mem", short_help="A claude-mem database: its observations, sessions and prompts.")
@click.argument("db", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@format_option
@pass_state
def import_claude_mem(state: State, db: Path | None, fmt: str | None) -> None:
    """Import a claude-mem database (default $CLAUDE_MEM_DATA_DIR or ~/.claude-mem, claude-mem.db).

    Each claude-mem observation becomes a curated memory of its project: decision →
    decisions, bugfix → gotchas, discovery → learnings, feature/refactor/change →
    progress, other types → context; tagged claude-mem, its type and its concepts. Each
    session comes in under its Claude Code session id with its user prompts and its
    summary (a session nmem recorded itself keeps its own). The database is only read.
    """
    path = db or claude_mem.default_path()
    service = state.service()
    batch, skipped = claude_mem.read(path, service.importable)
    report = _apply(service, batch)
    _report(state, fmt, f"Imported claude-mem ({path})", {"database": str(path.resolve())}, report, skipped)


@import_.command("mcp-memory", short_help="The MCP memory server's knowledge graph (memory.jsonl).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--domain", default="user", show_default=True,
              help="Domain of the memories: user, org, project (this project's) or project:NAME.")
@click.option("--namespace", "-n", default="context", show_default=True, help="Namespace of the memories.")
@format_option
@pass_state
def import_mcp_memory(state: State, file: Path, domain: str, namespace: str, fmt: str | None) -> None:
    """Import the MCP reference memory server's knowledge graph (its memory.jsonl).

    Each entity becomes one memory: its name and type as the summary, its observations
    and its relations (both ways) as the content, `relates_to` the related entities'
    memories, tagged mcp-memory and its type. Importing the file again changes nothing;
    after the graph changed, the changed entities are updated (unless edited in nmem since).
    """
    service = state.service()
    domain, namespace = service._domain(domain, None), service._namespace(namespace)  # a bad one stops here
    batch, skipped = mcp_memory.read(file, domain, namespace, service.importable,
                                     InputLimits.from_settings(state.settings))
    report = _apply(service, batch)
    _report(state, fmt, f"Imported the MCP memory graph ({file})", {"file": str(file.resolve())}, report, skipped)


# -- backup and restore ------------------------------------------------------------------------

def _sqlite_path(state: State) -> str:
    return state.sqlite_file("backup and restore copy the SQLite database; use your database server's tools for "
                             "{engine}")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {table}" for table, n in counts.items())


@click.command("backup")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
@format_option
@pass_state
def backup(state: State, path: str, force: bool, fmt: str | None) -> None:
    """Copy the database to PATH (a file, or a directory for a dated name) while hooks keep writing.

    Uses SQLite's online backup API: the copy is the database as it was when the backup
    started, written to a temporary file, checked (integrity_check and row counts) and
    only then renamed to PATH, readable only by you.
    """
    with progress_of("backing up") as advance:
        report = backups.backup(_sqlite_path(state), path, force=force, progress=advance,
                                key=database_key(state.settings))
    data = report.to_dict()
    emit(state, fmt, data, lambda: [Fields([
        ("backup", report.path), ("size", f"{report.size_bytes} bytes"), ("schema", f"v{report.schema_version}"),
        ("rows", _counts(report.counts)), ("integrity", report.integrity)])])


@click.command("restore")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=str))
@format_option
@pass_state
def restore(state: State, path: str, fmt: str | None) -> None:
    """Replace the database with a backup made by `nmem backup`.

    PATH must be an nmem database that passes integrity_check, of a schema this nmem reads
    (an older one is upgraded). The current database is first saved under <data dir>/backups/.
    The copy is one transaction: hooks wait (or spool their events, recorded after) and
    readers see the old database until it commits, then the restored one.
    """
    safety_dir = os.path.join(state.settings.home, "backups")
    with progress_of("restoring") as advance:
        report = backups.restore(_sqlite_path(state), path, safety_dir, progress=advance,
                                 key=database_key(state.settings))
    data = report.to_dict()
    emit(state, fmt, data, lambda: [Fields([
        ("restored", f"{report.restored_from} → {report.database}"), ("schema", f"v{report.schema_version}"),
        ("rows", _counts(report.counts)), ("previous database", report.previous_saved_to)])])


COMMANDS: tuple[click.Command, ...] = (export, import_, backup, restore)
