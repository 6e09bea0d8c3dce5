"""nmem's MCP tools as plain data: name, description, schemas, hints, and the service call.

No SDK import here, so the docs generator and tests can list tools cheaply. Each handler
takes the service, the call's arguments and the server's default project, and returns a
JSON object (the tool's `structuredContent`; its text content is the same JSON).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nmem.adapters.mcp import configure_tool, consolidate_tool, sync_tool
from nmem.compat.claude_mem import timelines
from nmem.errors import InvalidArgument
from nmem.models import OBS_TYPES, ORDERS, SCOPES
from nmem.service.api import Service
from nmem.service.args import (
    AGENT_HELP,
    BOUND_PROJECT_HELP,
    RECALL_PROJECT_HELP,
    SEARCH_PROJECT_HELP,
    ProjectScope,
    as_list,
)
from nmem.service.args import source as read_source
from nmem.service.recall import RECALL_DETAILS, RECALL_MODES
from nmem.util.numbers import as_int

Handler = Callable[[Service, dict[str, Any], str | None], dict[str, Any]]
SHAPES = ("object", "array")
# A handler's answer may carry this key: the tool's text content is then its value, not the whole answer.
TEXT_AS = "__text__"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Handler
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    core: bool = False
    open_world: bool = False  # talks to something beyond nmem's own store (a git remote)
    # claude-mem's tools answer with markdown text (their structuredContent is the JSON) and
    # check their own arguments, so MCP and HTTP refuse the same values the same way.
    text: Callable[[dict[str, Any]], str] | None = None
    schema_checked: bool = True


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


STR = {"type": "string"}
# SQLite integers are 64-bit; anything wider must be refused by the schema, not crash the query.
INT = {"type": "integer", "minimum": -(2**63) + 1, "maximum": 2**63 - 1}
STR_OR_LIST = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
DATE = {"anyOf": [{"type": "string"}, INT],
        "description": "ISO date/time (2026-05-01, 2026-05-01T10:00Z) or Unix seconds/milliseconds."}
ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
SHAPE = {"enum": list(SHAPES), "description": "object (default: the mcp.search_shape setting) or array: the "
                                              "text content is ADR-006's bare array of results."}
RESULTS = _obj({"results": {"type": "array", "items": ANY_OBJECT}, "count": INT})


def _pick(args: dict[str, Any], *names: str) -> Any:
    """The first present argument among a name and its aliases (claude-mem spellings)."""
    for name in names:
        if name in args and args[name] is not None:
            return args[name]
    return None


def _projects(args: dict[str, Any], default: str | None, *, bound: bool = False) -> ProjectScope:
    """`project` as MCP sends it, read by `ProjectScope`: missing is the default, null is every project."""
    if "project" not in args:
        return ProjectScope.parse(None, default, bound=bound)
    value = args["project"]
    return ProjectScope.parse("*" if value is None else value, default, bound=bound)


def project_dir() -> str:
    """The directory relative paths start from: Claude Code starts stdio servers with
    CLAUDE_PROJECT_DIR; otherwise the working directory (`nmem.service.api.Service.resolve_file`
    goes up to its project root)."""
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def _shape(service: Service, args: dict[str, Any]) -> str:
    """`shape` of this call, else the `mcp.search_shape` setting (search, get_observations, recent_context)."""
    shape = _pick(args, "shape") or service.settings["mcp.search_shape"]
    if shape not in SHAPES:
        raise InvalidArgument(f"shape must be one of {', '.join(SHAPES)}")
    return str(shape)


def _listed(rows: list[dict[str, Any]], shape: str, **extra: Any) -> dict[str, Any]:
    """The answer of a tool that lists rows: `{results, count, ...}`; with the array shape its text
    content is ADR-006's bare array, while the structured content stays the object (MCP needs one)."""
    answer: dict[str, Any] = {"results": rows, "count": len(rows), **extra}
    if shape == "array":
        answer[TEXT_AS] = rows
    return answer


def _search(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    scope = _pick(args, "scope")
    obs_type = _pick(args, "obs_type", "obsType")
    kind = _pick(args, "type")
    if kind is not None:
        # claude-mem's `type` names the record kind (observations/sessions/prompts) in `search`
        # and an observation type in its find_by_type tool; accept both readings.
        if kind in SCOPES:
            scope = scope or kind
        else:
            obs_type = obs_type or kind
    fmt = _pick(args, "format") or "index"
    if fmt not in ("index", "full"):
        raise InvalidArgument("format must be 'index' or 'full'")
    shape = _shape(service, args)
    raw = _pick(args, "raw")
    projects = _projects(args, default_project)
    result = service.search(
        _pick(args, "query"), scope=scope or "all", project=projects.only, prefer_project=projects.first,
        strict=bool(_pick(args, "strict")), cwd=project_dir(), raw=None if raw is None else bool(raw),
        obs_type=obs_type, namespace=_pick(args, "namespace", "category"),
        tags=_pick(args, "tags", "concepts"), files=_pick(args, "files", "file_path"),
        session_id=_pick(args, "session_id", "sessionId"),
        date_start=_pick(args, "date_start", "dateStart"), date_end=_pick(args, "date_end", "dateEnd"),
        order_by=_pick(args, "order_by", "orderBy") or "relevance",
        limit=_pick(args, "limit"), offset=_pick(args, "offset") or 0, agent=_pick(args, "agent"),
    )
    return _listed(result.to_list(full=fmt == "full"), shape, query=result.query, match=result.match)


def _get_observations(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    ids = args.get("ids")
    if ids is None or (isinstance(ids, list) and not ids):
        raise InvalidArgument("ids array must not be empty")
    if not isinstance(ids, list):
        raise InvalidArgument("ids must be an array of observation ids")
    shape = _shape(service, args)
    return _listed([o.to_dict() for o in service.get_observations(ids)], shape)


def _get(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    refs = args.get("refs")
    if not isinstance(refs, list) or not refs:
        raise InvalidArgument("refs must be a non-empty array of ids or URNs")
    found, missing = service.get([str(r) for r in refs])
    rows = [{"kind": record.kind, **record.to_dict()} for record in found]
    return {"results": rows, "count": len(rows), "missing": missing}


def _timeline(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    projects = _projects(args, default_project)
    anchor = _pick(args, "anchor", "anchor_id", "anchorId")
    narrow = timelines.narrowing("timeline", {
        "obs_type": as_list(_pick(args, "obs_type", "obsType"), "obs_type"),
        "files": as_list(_pick(args, "files", "file_path"), "files"),
        "concepts": as_list(_pick(args, "tags", "concepts"), "tags"),
        "dateStart": _pick(args, "date_start", "dateStart"), "dateEnd": _pick(args, "date_end", "dateEnd")},
        "obs_type")
    return timelines.around(service, None if anchor is None else as_int(anchor, "anchor"), _pick(args, "before"),
                            _pick(args, "after"), narrow, query=_pick(args, "query"), project=projects.only,
                            prefer_project=projects.first, agent=_pick(args, "agent"), cwd=project_dir())


def _recent_context(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    shape = _shape(service, args)
    rows = service.recent_context(_projects(args, default_project, bound=True).only, _pick(args, "limit"))
    return _listed(rows, shape)


def _session_trace(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    session = _pick(args, "session_id", "sessionId")
    return service.session_trace(str(session) if session else None, before=_pick(args, "before"),
                                 after=_pick(args, "after"), agent=_pick(args, "agent"),
                                 project=_projects(args, default_project, bound=True).only)


def _file_history(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    return service.file_history(str(_pick(args, "file_path", "filePath", "path") or ""),
                                before=_pick(args, "before"), after=_pick(args, "after"),
                                limit=_pick(args, "limit"), cwd=project_dir())


def _remember(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    memory = service.remember(
        str(_pick(args, "content") or ""), summary=_pick(args, "summary"),
        namespace=_pick(args, "namespace", "category"), tags=_pick(args, "tags"),
        domain=_pick(args, "domain"), project=default_project, relates_to=_pick(args, "relates_to"),
        source=read_source(_pick(args, "source", "rule_name"), str(service.settings["mcp.source"])),
    )
    return {"success": True, "id": memory.id, "urn": memory.urn, "memory": memory.to_dict()}


def _recall(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    rows = service.recall_results(
        _pick(args, "query"), detail=_pick(args, "detail") or "full",
        namespace=_pick(args, "namespace", "category"), tags=_pick(args, "tags"), domain=_pick(args, "domain"),
        project=_projects(args, default_project, bound=True).only, limit=_pick(args, "limit"),
        mode=_pick(args, "mode"),
        min_similarity=_pick(args, "min_similarity"), spec=_pick(args, "spec"),
        include_archived=bool(_pick(args, "include_archived", "includeArchived")))
    return {"results": rows, "count": len(rows)}


def _forget(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    ref = _pick(args, "id", "urn")
    if ref is None:
        raise InvalidArgument("give the id, urn or number of the memory to forget")
    memory = service.forget(ref)
    return {"success": True, "id": memory.id, "urn": memory.urn, "forgotten": True}


def _status(service: Service, args: dict[str, Any], _: str | None) -> dict[str, Any]:
    return service.status(domain=_pick(args, "domain"), verify=bool(_pick(args, "verify")))


_FILTERS = {
    "project": {"type": ["string", "null"], "description": BOUND_PROJECT_HELP},
    "files": {**STR_OR_LIST, "description": "File path(s): absolute, relative to the project root, or the end "
                                           "of a recorded path (invoice.py); an ambiguous end is an error listing "
                                           "the paths."},
    "session_id": {**STR, "description": "Session id, a unique prefix of it (s1a2b3c4d) or its URN."},
    "obs_type": {**STR_OR_LIST, "description": "Observation type(s): " + ", ".join(OBS_TYPES) + "."},
    "namespace": {**STR_OR_LIST, "description": "Memory namespace(s), e.g. decisions, learnings, gotchas."},
    "tags": {**STR_OR_LIST, "description": "Memory tags (all must match)."},
    "date_start": DATE,
    "date_end": DATE,
    "agent": {**STR_OR_LIST, "description": AGENT_HELP},
}

_SEARCH_PROJECT = {"type": ["string", "null"], "description": SEARCH_PROJECT_HELP}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "search", "Search memory",
        "Search everything (observations, prompts and agent replies, sessions, memories) in every project, "
        "the current one's first, unless scope or project narrow it: past sessions' file reads/edits, "
        "commands and errors, and curated memories. Use it first when the user refers to earlier work, "
        "a past error or decision. "
        "Returns compact index entries (120-char previews, ids, URNs); fetch full records with "
        "get_observations. Plain words work; FTS5 syntax (AND/OR/NOT, \"phrase\", prefix*) is honoured.",
        _obj({
            "query": {**STR, "description": "Words or an FTS5 query. Omit to list by filters only."},
            "scope": {"enum": list(SCOPES), "description": "What to search (default all)."},
            **_FILTERS,
            "project": _SEARCH_PROJECT,
            "strict": {"type": "boolean", "description": "Only records holding every word (as FTS5 matches them), "
                                                         "not those ranked for sharing one. Default false."},
            "raw": {"type": "boolean", "description": "ADR-006 strict mode: the query goes to FTS5 exactly as typed, "
                                                      "hits in plain BM25 order. Default: the search.raw setting."},
            "shape": SHAPE,
            "order_by": {"enum": list(ORDERS)},
            "format": {"enum": ["index", "full"], "description": "index (default) or full records."},
            "limit": {**INT, "minimum": 1, "description": "Default 20; larger values are capped at 100."},
            "offset": {**INT, "minimum": 0},
            "dateStart": DATE, "dateEnd": DATE, "orderBy": {"enum": list(ORDERS)},
            "type": {**STR, "description": "Alias: a scope name or an observation type."},
            "concepts": {**STR_OR_LIST, "description": "Alias of tags."},
        }),
        {**RESULTS, "properties": {**RESULTS["properties"], "query": {"type": ["string", "null"]},
                                   "match": {"type": ["string", "null"]}}},
        _search, core=True,
    ),
    ToolSpec(
        "get_observations", "Fetch observations",
        "Fetch full observation records by id (from search or timeline results), in the order given. "
        "Up to 50 ids; ids that no longer exist are omitted. Prompts, sessions and memories: use get.",
        _obj({"ids": {"type": "array", "items": INT, "description": "1 to 50 observation ids."},
              "shape": SHAPE}, ("ids",)),
        RESULTS, _get_observations, core=True,
    ),
    ToolSpec(
        "get", "Open any record",
        "Open records by any id or URN nmem shows: an observation (42, #42), a prompt (p42), a session "
        "(s1a2b3c4d: its id or a unique prefix), a memory (its id) or a URN. Up to 50, in the order given; "
        "ids that name nothing are listed in `missing`.",
        _obj({"refs": {"type": "array", "minItems": 1, "maxItems": 50, "items": {"anyOf": [STR, INT]},
                       "description": "1 to 50 ids or URNs."}}, ("refs",)),
        {**RESULTS, "properties": {**RESULTS["properties"], "missing": {"type": "array", "items": STR}}},
        _get, core=True,
    ),
    ToolSpec(
        "timeline", "Timeline around an observation",
        "Show what happened just before and after an observation in the same session: give an anchor id, "
        "or a query whose best match becomes the anchor. Filters narrow the anchor's search and the "
        "neighbours (the nearest that pass); an anchor given by id is always shown.",
        _obj({"anchor": {**INT, "description": "Observation id to centre on."},
              "query": {**STR, "description": "Find the anchor by search instead of id."},
              "before": {**INT, "minimum": 0, "description": "Default 5."},
              "after": {**INT, "minimum": 0, "description": "Default 5."},
              "project": _SEARCH_PROJECT, "anchor_id": INT, "agent": _FILTERS["agent"],
              "obs_type": {**STR_OR_LIST, "description": "Only neighbours of these types (nmem's, or claude-mem's "
                                                         "decision, bugfix...)."},
              "files": {**STR_OR_LIST, "description": "Only neighbours touching these files."},
              "date_start": DATE, "date_end": DATE, "dateStart": DATE, "dateEnd": DATE,
              "tags": {**STR_OR_LIST, "description": "Memory tags: observations carry none, so no neighbour "
                                                     "passes."},
              "concepts": {**STR_OR_LIST, "description": "Alias of tags (claude-mem)."}}),
        _obj({"anchor": ANY_OBJECT, "before": {"type": "array"}, "after": {"type": "array"}},
             ("anchor", "before", "after")),
        _timeline, core=True,
    ),
    ToolSpec(
        "recent_context", "Recent context",
        "The most relevant recent activity for a project (recency, action type, project match), one row per "
        "file: what the SessionStart context shows, on demand.",
        _obj({"project": _FILTERS["project"],
              "limit": {**INT, "minimum": 1, "description": "Default 30; capped at 100."},
              "shape": SHAPE}),
        RESULTS, _recent_context,
    ),
    ToolSpec(
        "session_trace", "Trace a session",
        "Walk one session: its prompts in order, each with the actions it led to. Use after search or "
        "timeline points at a session worth understanding; without session_id, the project's latest session "
        "with content (a prompt or an action), not the one that has only just started.",
        _obj({"session_id": {**STR, "description": "Session id, a unique prefix of it (s1a2b3c4d) or its URN. "
                                                   "Default: the current project's latest session with content."},
              "project": {"type": ["string", "null"],
                          "description": "Without session_id: whose latest session (default: the current "
                                         "project; null: any)."},
              "agent": {**STR_OR_LIST, "description": "Without session_id: the latest session of these "
                                                      "agents; with it, the session must be theirs."},
              "before": DATE, "after": DATE}),
        _obj({"session_id": STR, "prompts": {"type": "array"}}, ("session_id", "prompts")),
        _session_trace,
    ),
    ToolSpec(
        "file_history", "File history",
        "Every session that touched a file, newest first, with the user's intent behind each touch. Use "
        "before changing a file to learn why it is the way it is.",
        _obj({"file_path": {**STR, "description": "Absolute, relative to the project root, or the end of a "
                                                 "recorded path (invoice.py)."},
              "before": DATE, "after": DATE,
              "limit": {**INT, "minimum": 1, "description": "Default 10; capped at 50."}}, ("file_path",)),
        _obj({"file_path": STR, "sessions": {"type": "array"}}, ("file_path", "sessions")),
        _file_history,
    ),
    ToolSpec(
        "remember", "Remember",
        "Store a durable memory for future sessions: a decision and its reason, a learning, a gotcha, a "
        "convention, an API behaviour. Be specific and factual; do not store logs or temporary state.",
        _obj({"content": {**STR, "description": "The knowledge, in markdown."},
              "summary": {**STR, "maxLength": 100, "description": "One line, at most 100 characters."},
              "namespace": {**STR, "description": "decisions, learnings, gotchas, patterns, conventions, "
                                                  "blockers, progress, context, apis, config, security, testing…"},
              "category": {**STR, "description": "Alias of namespace (srvrmgr)."},
              "tags": STR_OR_LIST,
              "domain": {**STR, "description": "project (default), user, org or project:<name>."},
              "relates_to": STR_OR_LIST,
              "source": {**STR, "maxLength": 100, "description": "Who it comes from (a rule, a script); "
                                                                 "default: the mcp.source setting."},
              "rule_name": {**STR, "maxLength": 100, "description": "Alias of source (srvrmgr)."}},
             ("content",)),
        _obj({"success": {"type": "boolean"}, "id": STR, "urn": STR, "memory": ANY_OBJECT}, ("id", "urn")),
        _remember, read_only=False, idempotent=False, core=True,
    ),
    ToolSpec(
        "recall", "Recall memories",
        "Search curated memories (decisions, learnings, gotchas…) of this project plus the user's and the "
        "org's, unless project or domain say otherwise. Use before making assumptions about code, APIs or "
        "conventions seen before.",
        _obj({"query": STR, "namespace": STR, "category": STR, "tags": STR_OR_LIST,
              "domain": {**STR, "description": "all (default), project, user, org or project:<name>."},
              "project": {"type": ["string", "null"], "description": RECALL_PROJECT_HELP},
              "limit": {**INT, "minimum": 1, "description": "Capped at 100."},
              "mode": {"enum": list(RECALL_MODES), "description": "bm25, vector or hybrid (vector and hybrid "
                                                                  "need embeddings). Default: hybrid when "
                                                                  "search.embeddings is on, else bm25."},
              "min_similarity": {"type": "number", "minimum": 0, "maximum": 1,
                                 "description": "Only memories at least this similar (cosine); implies hybrid."},
              "spec": {**STR, "description": "Only memories captured with this spec (tag spec:<name>)."},
              "detail": {"enum": list(RECALL_DETAILS), "description": "minimal, summary or full (default)."},
              "include_archived": {"type": "boolean", "description": "Also search archived memories (merged "
                                                                    "into others, stale, long unused)."}}),
        RESULTS, _recall, core=True,
    ),
    ToolSpec(
        "forget", "Forget a memory",
        "Remove a curated memory that is wrong or outdated (by id, URN or integer number from recall results). "
        "Its text is erased; a tombstone remains so the deletion can sync.",
        _obj({"id": {"anyOf": [STR, {**INT, "minimum": 1}],
                     "description": "Memory id, URN, or the integer `number` recall shows (srvrmgr)."}, "urn": STR}),
        _obj({"success": {"type": "boolean"}, "id": STR, "urn": STR}, ("id", "urn")),
        _forget, read_only=False, destructive=True, core=True,
    ),
    ToolSpec(
        "status", "Memory status",
        "Counts of what nmem holds (sessions, observations by type, memories by domain, namespace and tier), "
        "the database size and schema version; optionally one domain's memories, and an integrity check.",
        _obj({"domain": {**STR, "description": "Count one domain's memories: all (default), project, "
                                               "project:<name>, user or org."},
              "verify": {"type": "boolean", "description": "Also check the database's integrity and each "
                                                          "full-text index against its table (`verify.ok`)."}}),
        ANY_OBJECT, _status,
    ),
    ToolSpec("configure", "Configure nmem", configure_tool.DESCRIPTION, configure_tool.INPUT_SCHEMA,
             configure_tool.OUTPUT_SCHEMA, configure_tool.handle, read_only=False),
    ToolSpec("sync", "Sync memories", sync_tool.DESCRIPTION, sync_tool.INPUT_SCHEMA, sync_tool.OUTPUT_SCHEMA,
             sync_tool.handle, read_only=False, open_world=True),
    ToolSpec("consolidate", "Consolidate memories", consolidate_tool.DESCRIPTION, consolidate_tool.INPUT_SCHEMA,
             consolidate_tool.OUTPUT_SCHEMA, consolidate_tool.handle, read_only=False, idempotent=False),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def tools_markdown() -> str:
    """The README's tool reference, generated so a test can keep it in sync."""
    lines = ["| tool | what it is for | parameters | hints |", "|---|---|---|---|"]
    for tool in TOOLS:
        props = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        params = ", ".join(f"`{p}`" + ("*" if p in required else "") for p in props) or "—"
        hints = "read-only" if tool.read_only else ("destructive" if tool.destructive else "writes")
        if tool.core:
            hints += ", core"
        lines.append(f"| `{tool.name}` | {tool.description.split('. ')[0].rstrip('.')}. | {params} | {hints} |")
    return "\n".join(lines) + "\n"
