"""Read commands: search, get, timeline, trace, file-history, context, status."""

from __future__ import annotations

import os
from typing import Any

import click

from nmem.adapters.cli.app import State, emit, format_option, note, pass_state
from nmem.adapters.cli.output import (
    Block,
    Body,
    Fields,
    Heading,
    Table,
    duration,
    mask_secrets,
    one_line,
    when,
)
from nmem.adapters.cli.params import Integer
from nmem.adapters.cli.views import (
    count_line,
    record_blocks,
    search_blocks,
    split_values,
    status_blocks,
    time_bound,
    time_range,
    verify_failure,
)
from nmem.context.block import build as build_context
from nmem.errors import NotFound
from nmem.models import ORDERS, SCOPES, session_ref
from nmem.service.args import AGENT_HELP, BOUND_PROJECT_HELP, SEARCH_PROJECT_HELP, ProjectScope

# -- search -------------------------------------------------------------------------------

agent_option = click.option("--agent", "agents", multiple=True,
                            help=AGENT_HELP.replace("(one name or a list)", "(repeat or comma-separate)"))


@click.command("search")
@click.argument("query", required=False)
@click.option("--project", help=SEARCH_PROJECT_HELP)
@click.option("--type", "types", multiple=True, help="Observation type, e.g. command_error (repeat or comma-separate).")
@click.option("--scope", type=click.Choice(SCOPES), default="all", show_default=True,
              help="What to search: observations, prompts (yours and the agent's replies), sessions, memories.")
@click.option("--namespace", "namespaces", multiple=True, help="Memory namespace (memories scope).")
@click.option("--tag", "tags", multiple=True, help="Memory tag (memories scope; repeat or comma-separate).")
@click.option("--file", "files", multiple=True,
              help="File path: absolute, from the project root, or the end of a recorded one "
                   "(repeat or comma-separate).")
@click.option("--session", help="Only this session: its id, a unique prefix (s1a2b3c4d) or URN.")
@agent_option
@click.option("--since", help="Not before: a date (2026-05-01), an ISO time, epoch seconds, an age (7d), today or "
              "yesterday.")
@click.option("--until", help="Not after: same forms as --since.")
@click.option("--order", type=click.Choice(ORDERS), default="relevance", show_default=True)
@click.option("--limit", type=Integer(), default=None,
              help="Max results, clamped to 1-100 (default: search.default_limit).")
@click.option("--offset", type=Integer(low=0), default=0, show_default=True, help="Skip this many results (paging).")
@click.option("--full", is_flag=True, help="Whole records instead of 120-character previews.")
@click.option("--strict", is_flag=True,
              help="Only records holding every word (as FTS5 matches them), not those ranked for sharing one.")
@click.option("--raw", is_flag=True, default=None,
              help="ADR-006 strict mode: QUERY goes to FTS5 exactly as typed, hits in plain BM25 order "
                   "(default: the search.raw setting).")
@click.option("--ids", is_flag=True,
              help="Print only ids, one per line, for pipes (42, p42, s<session id>, memory ids); implies --strict.")
@format_option
@pass_state
def search(state: State, query: str | None, project: str | None, types: tuple[str, ...], scope: str,
           namespaces: tuple[str, ...], tags: tuple[str, ...], files: tuple[str, ...], session: str | None,
           agents: tuple[str, ...], since: str | None, until: str | None, order: str, limit: int | None, offset: int,
           full: bool, strict: bool, raw: bool | None, ids: bool, fmt: str | None) -> None:
    """Search everything (observations, prompts and replies, sessions, memories), this project's first.

    QUERY is FTS5 syntax (AND/OR/NOT, "phrase", prefix*) or plain words, which are
    rewritten so a question finds what shares its words (ranked; --strict keeps only
    what holds every word). Without QUERY, rows matching the filters are listed newest
    first. Every project is searched, the current one's results first. A relative --file
    is read from the project root, else as the end of a recorded path. `--format json`
    prints a JSON array of index entries (all fields with --full). A count line goes to
    stderr in every mode.

    \b
        nmem search "stale fixture" --ids | xargs nmem get
    """
    service = state.service()
    projects = ProjectScope.parse(project, service.project_for())
    start, end = time_range(service, since, until)
    result = service.search(
        query, scope=scope, project=projects.only, obs_type=split_values(types) or None,
        namespace=split_values(namespaces) or None, tags=split_values(tags) or None,
        files=split_values(files) or None, session_id=session,
        date_start=start, date_end=end, order_by=order, limit=limit, offset=offset, strict=strict or ids,
        prefer_project=projects.first, cwd=os.getcwd(), raw=raw or None, agent=split_values(agents),
    )
    if ids:
        for hit in result.hits:
            click.echo(hit.record.ref)
    else:
        emit(state, fmt, result.to_list(full=full), lambda: search_blocks(result, full))
    note(count_line(len(result.hits), query))


# -- get ----------------------------------------------------------------------------------

@click.command("get")
@click.argument("refs", metavar="ID...", nargs=-1, required=True)
@format_option
@pass_state
def get(state: State, refs: tuple[str, ...], fmt: str | None) -> None:
    """Full records by any id or URN nmem prints.

    \b
      42, o42, #42   an observation      p42       a prompt
      s1a2b3c4d      a session (its id or a unique prefix of it)
      a ULID         a memory            nmem://…  any record by its URN

    Records come back in the order asked. Ids that name nothing are named on stderr; if
    none of them does, the exit code is 10. A session prefix several sessions share is
    an error (exit 2) that lists them.
    """
    found, missing = state.service().get(list(refs))
    if not found:
        raise NotFound(f"not found: {', '.join(missing)}")
    records = [{"kind": record.kind, **record.to_dict()} for record in found]
    emit(state, fmt, records, lambda: record_blocks(records))
    if missing:
        note(f"not found: {', '.join(missing)}")


# -- timeline, trace, file-history ----------------------------------------------------------

def _obs_table(rows: list[dict[str, Any]], anchor: int | None = None) -> Table:
    def text(o: dict[str, Any]) -> str:
        by = f"↳ {o['subagent']} " if o.get("subagent") else ""   # a subagent's call
        shown = str(o.get("content_preview") or o.get("content") or o.get("file_path") or "")
        if o.get("rel_path") and o.get("file_path"):              # relative to its project root
            shown = shown.replace(str(o["file_path"]), str(o["rel_path"]))
        return by + shown
    table = [[str(o["id"]), when(o["timestamp"]), o["obs_type"], one_line(text(o))] for o in rows]
    if anchor is None:
        return Table(("id", "when", "type", "content"), table)
    marks = ["→" if o["id"] == anchor else "" for o in rows]
    return Table(("", "id", "when", "type", "content"), [[mark, *row] for mark, row in zip(marks, table, strict=True)])


@click.command("timeline")
@click.argument("anchor", type=Integer(), required=False)
@click.option("--query", "-q", help="Anchor on the best match of this search instead of an id.")
@click.option("--before", type=Integer(), default=5, show_default=True, help="Observations before the anchor.")
@click.option("--after", type=Integer(), default=5, show_default=True, help="Observations after the anchor.")
@click.option("--project", help="With --query: " + SEARCH_PROJECT_HELP)
@agent_option
@click.option("--type", "types", multiple=True, help="Only observations of this type (repeat or comma-separate).")
@click.option("--file", "files", multiple=True, help="Only observations of this file, read as search reads it.")
@click.option("--tag", "tags", multiple=True, help="Memory tag: observations carry none, so none passes.")
@click.option("--since", help="Not before: a date, an ISO time, epoch seconds, an age (7d), today or yesterday.")
@click.option("--until", help="Not after: same forms as --since.")
@format_option
@pass_state
def timeline(state: State, anchor: int | None, query: str | None, before: int, after: int,
             project: str | None, agents: tuple[str, ...], types: tuple[str, ...], files: tuple[str, ...],
             tags: tuple[str, ...], since: str | None, until: str | None, fmt: str | None) -> None:
    """What happened around one observation, within its session.

    The filters narrow the --query search and the neighbours listed: the nearest that
    pass, not the nearest overall. An ANCHOR given by id is always shown.
    """
    service = state.service()
    projects = ProjectScope.parse(project, service.project_for())
    start, end = time_range(service, since, until)
    data = service.timeline(anchor, query=query, before=before, after=after, project=projects.only,
                            prefer_project=projects.first, agent=split_values(agents),
                            obs_type=split_values(types) or None, files=split_values(files) or None,
                            tags=split_values(tags) or None, date_start=start, date_end=end, cwd=os.getcwd())

    def blocks() -> list[Block]:
        center = data["anchor"]
        rows = [*data["before"], center, *data["after"]]
        ran = f", {data['agent']}" if data.get("agent") else ""
        return [Heading(f"Timeline around {center['id']} (session {session_ref(center['session_id'], short=True)}, "
                        f"{center['project']}{ran})"),
                _obs_table(rows, anchor=center["id"])]
    emit(state, fmt, data, blocks)


@click.command("trace")
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--before", help="Only what happened before this time (date, ISO time or epoch seconds).")
@click.option("--after", help="Only what happened after this time.")
@click.option("--agent", "agents", multiple=True,
              help="Without SESSION: the latest session of these agents; with it, the session must be theirs.")
@format_option
@pass_state
def trace(state: State, session_id: str | None, before: str | None, after: str | None, agents: tuple[str, ...],
          fmt: str | None) -> None:
    """A session's prompts, each with what it led to.

    SESSION is its id, a unique prefix of it (s1a2b3c4d or 1a2b3c4d) or its URN; without
    it, the latest session of the current project (see `nmem sessions`). Prompts come in
    order, each with the observations recorded after it.
    """
    service = state.service()
    project = None if session_id else ProjectScope.parse(None, service.project_for(), bound=True).only
    data = service.session_trace(session_id, before=time_bound(service, before, name="--before"),
                                 after=time_bound(service, after, name="--after"),
                                 project=project, agent=split_values(agents))
    if project is not None:
        note(f"the latest session of project {project}: {session_ref(data['session_id'], short=True)}")

    def blocks() -> list[Block]:
        summary = data.get("summary")
        intent = summary.get("intent") if isinstance(summary, dict) else summary
        if not intent:  # open sessions have no summary yet: their first user prompt says it
            intent = next((p["content"] for p in data["prompts"] if p["source"] == "user"), None)
        out: list[Block] = [
            Heading(f"Session {session_ref(data['session_id'], short=True)}"),
            Fields([("id", data["session_id"]), ("project", data["project"]), ("agent", data["agent"] or "-"),
                    ("started", when(data["started_at"])),
                    ("ended", when(data["ended_at"]) or "(open)"), ("intent", one_line(intent or "-")),
                    ("urn", data["urn"])]),
        ]
        for prompt in data["prompts"]:
            count = prompt["observation_count"]
            ref = f"{prompt['ref']}  " if prompt.get("ref") else ""
            out.append(Heading(f"{ref}{when(prompt['timestamp'])}  {prompt.get('label') or prompt['source']}: "
                               f"{one_line(prompt['content'], 100)}  ({count} action{'' if count == 1 else 's'})", 2))
            if prompt["observations"]:
                out.append(_obs_table(prompt["observations"]))
        if not data["prompts"]:
            out.append(Body("No prompts or observations in this window."))
        return out
    emit(state, fmt, data, blocks)


@click.command("file-history")
@click.argument("path")
@click.option("--before", help="Only touches before this time (date, ISO time or epoch seconds).")
@click.option("--after", help="Only touches after this time.")
@click.option("--limit", type=Integer(), default=10, show_default=True, help="Max touches, clamped to 1-50.")
@format_option
@pass_state
def file_history(state: State, path: str, before: str | None, after: str | None, limit: int,
                 fmt: str | None) -> None:
    """Every session that touched a file, newest first.

    Each touch comes with the user prompt (the intent) behind it. A relative PATH is read
    from the project root (the git top-level, not the current subdirectory), else as the
    end of a recorded path (invoice.py finds /repo/billing/invoice.py): one under the
    project root wins, else the only one recorded; when several fit, the error (exit 2)
    lists them.
    """
    service = state.service()
    data = service.file_history(path, before=time_bound(service, before, name="--before"),
                                 after=time_bound(service, after, name="--after"),
                                limit=limit, cwd=os.getcwd())

    def blocks() -> list[Block]:
        rel = next((sess["rel_path"] for sess in data["sessions"] if sess.get("rel_path")), None)
        shown = f"{rel} ({data['file_path']})" if rel and rel != data["file_path"] else data["file_path"]
        out: list[Block] = [Heading(f"History of {shown}")]
        if not data["sessions"]:
            out.append(Body("No session touched this file."))
        for sess in data["sessions"]:
            intent = f" — {sess['summary_intent']}" if sess.get("summary_intent") else ""
            out.append(Heading(f"Session {session_ref(sess['session_id'], short=True)} ({sess['project']}, "
                               f"{when(sess['started_at'])}){intent}", 2))
            out.append(Table(("id", "when", "type", "content", "prompt"),
                             [[str(t["observation_id"]), when(t["timestamp"]), t["obs_type"],
                               one_line(t["content_preview"], 60), one_line(t["prompt_content"] or "", 60)]
                              for t in sess["touches"]]))
        return out
    emit(state, fmt, data, blocks)


@click.command("sessions")
@click.option("--project", help=BOUND_PROJECT_HELP)
@click.option("--all", "all_projects", is_flag=True, help="Sessions of every project (as --project '*').")
@click.option("--since", help="Only sessions started or ended since: a date, ISO time, epoch seconds or age (7d).")
@click.option("--limit", type=int, default=20, show_default=True, help="Max sessions, clamped to 1-100.")
@agent_option
@format_option
@pass_state
def sessions(state: State, project: str | None, all_projects: bool, since: str | None, limit: int,
             agents: tuple[str, ...], fmt: str | None) -> None:
    """Recorded sessions of this project (or --project, --all), newest first.

    Each with its id (give it to `nmem trace` or `nmem get`), project, start, duration
    (or open), user prompts, actions (observations other than session events) and intent.
    """
    if project and all_projects:
        raise click.UsageError("give --project or --all, not both")
    service = state.service()
    name = ProjectScope.parse("*" if all_projects else project, service.project_for(), bound=True).only
    rows = service.sessions(name, since=time_bound(service, since, name="--since"), limit=limit,
                            agent=split_values(agents))

    def blocks() -> list[Block]:
        if not rows:
            return [Body(f"No session recorded for project {name}." if name else "No session recorded.")]
        return [Table(("session", "project", "agent", "started", "duration", "prompts", "actions", "intent"),
                      [[session_ref(r["id"], short=True), r["project"], r["agent"] or "-", when(r["started_at"]),
                        duration(r["duration"]) if r["ended_at"] is not None else "open",
                        str(r["prompts"]), str(r["actions"]), one_line(r["intent"] or "-", 60)] for r in rows])]
    emit(state, fmt, rows, blocks)
    note(f"{len(rows)} session{'' if len(rows) == 1 else 's'}" + (f" of project {name}" if name else ""))


# -- context and status ---------------------------------------------------------------------

@click.command("context")
@click.option("--project", help="Project to recall (default: the current directory's project).")
@click.option("--recovery", is_flag=True, help="The larger block injected after a compact or clear.")
@format_option
@pass_state
def context(state: State, project: str | None, recovery: bool, fmt: str | None) -> None:
    """Print the SessionStart context block for a project.

    The same block `nmem record` prints on SessionStart: where the project's last session
    left off (when it ended, its closing message, what it changed and left open), curated
    memories, earlier intents, one row per file or command of earlier work, and other
    projects when this one has little history. `--format json` adds the block's figures.
    """
    service = state.service()
    name = project or service.project_for(os.getcwd())
    built = build_context(service, name, "compact" if recovery else None, service.now(),
                          cwd=os.getcwd() if project is None else None)
    block = built.text
    data = {"project": name, "mode": "recovery" if recovery else "normal", "context": block, "stats": built.stats()}
    if not block:
        note(f"nothing recorded yet for project {name!r}")
    emit(state, fmt, data, lambda: [Body(block)] if block else [])


@click.command("status")
@click.option("--domain", default="all", show_default=True,
              help="Memory counts of one domain: all, project, project:<name>, user or org.")
@click.option("--verbose", "-v", "detailed", is_flag=True,
              help="Every breakdown (observation types, projects, memories by domain).")
@click.option("--verify", is_flag=True,
              help="Check the database's integrity and each full-text index against its table; exit 4 on a finding.")
@format_option
@pass_state
def status(state: State, domain: str, detailed: bool, verify: bool, fmt: str | None) -> None:
    """Counts, database size and schema version.

    Observations by type, memories by domain, namespace and tier, sessions by project.
    """
    data = state.service().status(domain=domain, verify=verify)
    data["database"] = mask_secrets(data["database"])
    emit(state, fmt, data, lambda: status_blocks(data, detailed))
    if verify and not data["verify"]["ok"]:
        raise verify_failure(data)


COMMANDS: tuple[click.Command, ...] = (search, get, timeline, trace, sessions, file_history, context, status)
