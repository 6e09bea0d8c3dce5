"""claude-mem's search operations on nmem's service API, one function each.

Every function takes the service, the arguments as a claude-mem client sends them (MCP
arguments or an HTTP query string, camelCase or snake_case) and the caller's current
project, and returns claude-mem's answer as JSON-ready data: search-like operations
`{observations, sessions, prompts, totalResults, query}` (claude-mem's `format=json` body),
timelines `{anchor, before, after, observations}`. `nmem.compat.claude_mem.render` turns an
answer into the markdown text claude-mem's tools return.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nmem.compat.claude_mem import rows, timelines
from nmem.compat.claude_mem import typemap as tm
from nmem.compat.claude_mem.params import CHOICE, DATE, INTEGER, LIST, STRING, Param, json_schema, parse
from nmem.errors import InvalidArgument, NotFound, ValidationError
from nmem.models import ORDERS, Observation, Session
from nmem.service.api import Service
from nmem.service.args import AGENT_HELP, ProjectScope
from nmem.service.relpaths import Roots
from nmem.service.search import curated_within_reach
from nmem.util.timeutil import parse_time

Answer = dict[str, Any]
MAX_PAGE = 100  # the most one service search returns
Args = Mapping[str, Any] | None

# -- parameters, as claude-mem names them ----------------------------------------------------

QUERY = Param("query", STRING, "Words to search for (nmem full-text search; FTS5 syntax honoured).")
QUERY_REQUIRED = Param("query", STRING, QUERY.description, required=True)
FORMAT = Param("format", CHOICE, "index: compact rows (titles, ids); full: whole records; json: the same rows "
                                 "as full, for scripts.", default="index", choices=("index", "full", "json"))
RECORD_KIND = Param("type", CHOICE, "Which records: observations, sessions or prompts (claude-mem), memories "
                                    "(nmem's curated memories). Default: all of them.",
                    choices=("observations", "sessions", "prompts", "memories"))
OBS_TYPE = Param("obs_type", LIST, "Observation type(s), comma-separated: " + ", ".join(tm.CLAUDE_TYPES)
                 + " (claude-mem), or nmem's own observation types and memory namespaces.", aliases=("obsType",))
TYPE_FILTER = Param("type", LIST, OBS_TYPE.description, aliases=("obs_type", "obsType"))
TYPE_REQUIRED = Param("type", LIST, OBS_TYPE.description, aliases=("obs_type", "obsType"), required=True)
CONCEPTS = Param("concepts", LIST, "Concept tag(s), comma-separated: nmem memory tags (observations carry none).",
                 aliases=("concept",))
CONCEPTS_REQUIRED = Param("concepts", LIST, CONCEPTS.description, aliases=("concept",), required=True)
FILES = Param("files", LIST, "File path(s), comma-separated: absolute, relative to the project root, or the end "
                             "of a recorded path (auth.py).", aliases=("filePath", "file_path"))
FILES_REQUIRED = Param("files", LIST, FILES.description, aliases=("filePath", "file_path"), required=True)
PROJECT = Param("project", STRING, "Only this project. Default: every project, the current one's first.")
DATE_START = Param("dateStart", DATE, "From this date (ISO) or epoch (seconds or milliseconds).",
                   aliases=("date_start",))
DATE_END = Param("dateEnd", DATE, "Until this date (ISO, whole day) or epoch.", aliases=("date_end",))
LIMIT = Param("limit", INTEGER, "Most results.", default=20, low=1, high=100)
OFFSET = Param("offset", INTEGER, "Results to skip (pagination).", default=0, low=0)
ORDER = Param("orderBy", CHOICE, "relevance, date_desc or date_asc. Default: relevance with a query, "
                                 "else date_desc.", aliases=("order_by",), choices=ORDERS)
ANCHOR = Param("anchor", STRING, "Observation id to centre on (42 or #42), or an ISO time (the last "
                                 "observation at or before it).", aliases=("anchor_id", "anchorId"))
ANCHOR_REQUIRED = Param("anchor", STRING, ANCHOR.description, aliases=("anchor_id", "anchorId"), required=True)
DEPTH_BEFORE = Param("depth_before", INTEGER, "Observations before the anchor.", default=10, low=0, high=100,
                     aliases=("before", "depthBefore"))
DEPTH_AFTER = Param("depth_after", INTEGER, "Observations after the anchor.", default=10, low=0, high=100,
                    aliases=("after", "depthAfter"))
MODE = Param("mode", CHOICE, "auto: the timeline around the best match; interactive: the best matches only, "
                             "to pick an anchor from.", default="auto", choices=("auto", "interactive"))
MATCHES = Param("limit", INTEGER, "Matches listed in interactive mode.", default=5, low=1, high=100)
RECENT_ITEMS = Param("limit", INTEGER, "Most timeline items (observations and memories), newest first.",
                     default=30, low=1, high=100)
RECENT_PROJECT = Param("project", STRING, "Whose activity. Default: the current project; * every project.")
AGENT = Param("agent", LIST, AGENT_HELP.replace("(one name or a list)", "(comma-separated)") + " (nmem)")
IDS = Param("ids", LIST, "Observation ids (42, #42) or memory ids, as search rows give them.", required=True)

PAGE = (PROJECT, DATE_START, DATE_END, LIMIT, OFFSET, ORDER, AGENT)
SHORTCUT = (QUERY, FORMAT, *PAGE)


# -- shared work ------------------------------------------------------------------------------

def _sort_key(order: str) -> Callable[[tuple[float, dict[str, Any]]], Any]:
    if order == "relevance":
        return lambda item: (-item[0], -item[1]["created_at_epoch"])
    if order == "date_asc":
        return lambda item: item[1]["created_at_epoch"]
    return lambda item: -item[1]["created_at_epoch"]


def _gather(service: Service, op: str, p: dict[str, Any], current: str | None, *,
            kinds: tuple[str, ...] = ("observations", "sessions", "prompts", "memories"),
            types: tm.Selection | None = None, prompt_source: str | None = None) -> Answer:
    """Search the record kinds asked for and answer in claude-mem's shape. `types` narrows
    observations to its observation types and memories to its namespaces or tags (a kind
    it selects nothing of is left out). Concepts and files narrow observations and memories
    only, as in claude-mem; sessions and prompts have neither."""
    query = p.get("query")
    order = p.get("orderBy") or ("relevance" if query else "date_desc")
    start, end = p.get("dateStart"), p.get("dateEnd")
    if start is not None and end is not None and \
            (parse_time(start) or 0) > (parse_time(end, end_of_day=True) or 0):
        raise ValidationError(f"{op}: dateStart is after dateEnd")
    projects = ProjectScope.parse(p.get("project") or None, current)
    common: dict[str, Any] = {"project": projects.only, "prefer_project": projects.first,
                              "date_start": start, "date_end": end, "order_by": order, "agent": p.get("agent")}
    concepts, files = tuple(p.get("concepts") or ()), p.get("files") or None
    plans: list[tuple[str, dict[str, Any]]] = []
    if "observations" in kinds and (types is None or types.obs_types):
        plans.append(("observations", {"obs_type": types.obs_types if types else None,
                                       "tags": concepts or None, "files": files}))
    if "memories" in kinds:
        if types is None:
            plans.append(("memories", {"tags": concepts or None, "files": files}))
        else:
            if types.namespaces:
                plans.append(("memories", {"namespace": types.namespaces, "tags": concepts or None, "files": files}))
            plans += [("memories", {"tags": (tag, *concepts), "files": files}) for tag in types.tags]
    if "sessions" in kinds:
        plans.append(("sessions", {}))
    if "prompts" in kinds:
        plans.append(("prompts", {"source": prompt_source} if prompt_source else {}))
    limit, offset = p["limit"], p["offset"]
    full = p["format"] != "index"
    found: list[tuple[float, dict[str, Any]]] = []
    seen: set[tuple[str, Any]] = set()
    for scope, narrow in plans:
        # One search pages in the store; several are merged here, each read up to the page's end.
        start_at, want = (offset, limit) if len(plans) == 1 else (0, offset + limit)
        while want > 0:
            step = min(want, MAX_PAGE)
            hits = service.search(query, scope=scope, limit=step, offset=start_at, **common, **narrow).hits
            roots = _roots(service, hits)
            for hit in hits:
                key = (hit.kind, hit.record.id)
                if key not in seen:  # a memory both in a namespace and carrying a tag
                    seen.add(key)
                    record = hit.record
                    sid = record.id if isinstance(record, Session) else getattr(record, "session_id", None)
                    root = roots.of(str(sid), getattr(record, "project", None)) if roots is not None and sid else None
                    found.append((hit.score, rows.of(record, full, root)))
            if len(hits) < step:
                break
            start_at, want = start_at + step, want - step
    if len(plans) > 1:
        found.sort(key=_sort_key(order))
        if order == "relevance" and query:   # a matching memory is never lost under the trail
            found = curated_within_reach(found, lambda item: item[1]["kind"] == "memory")
        found = found[offset:offset + limit]
    answer: Answer = {"observations": [], "sessions": [], "prompts": []}
    for _, row in found:
        answer["sessions" if row["kind"] == "session" else "prompts" if row["kind"] == "prompt"
               else "observations"].append(row)
    answer.update(totalResults=len(found), query=query or "", format=p["format"], orderBy=order,
                  limit=limit, offset=offset)
    return answer


def _anchor_id(service: Service, op: str, value: str, project: str | None) -> int:
    """An observation id (42, #42), or for an ISO time the last observation at or before it."""
    text = value.strip().lstrip("#")
    if text.isdigit() and int(text) <= 2**63 - 1:
        return int(text)
    at = None
    if not text.isdigit():
        try:
            at = parse_time(value.strip(), name="anchor")
        except (InvalidArgument, ValidationError):
            at = None
    if at is None:
        raise ValidationError(f"{op}: anchor must be an observation id (42 or #42) or an ISO time, got {value!r}")
    hits = service.search(None, scope="observations", project=project, date_end=at, order_by="date_desc",
                          limit=1).hits
    if not hits:
        raise NotFound(f"{op}: no observation at or before {value}")
    return int(hits[0].record.id)


def _roots(service: Service, hits: list[Any]) -> Roots | None:
    """The project roots of the sessions a page of hits names (observations' and sessions'),
    read once; None when it names none."""
    ids = [str(h.record.id) if h.kind == "session" else str(h.record.session_id)
           for h in hits if h.kind in ("session", "observation")]
    return Roots(service.store, ids) if ids else None


def _observation(data: dict[str, Any]) -> Observation:
    return Observation(**{name: data[name] for name in Observation.__slots__})


def _timeline(service: Service, op: str, anchor: int, p: dict[str, Any],
              narrow: timelines.Narrow | None = None) -> Answer:
    around = timelines.around(service, anchor, p["depth_before"], p["depth_after"], narrow or timelines.Narrow(),
                              agent=p.get("agent"))
    centre = _observation(around["anchor"])
    if p.get("project") and centre.project != p["project"]:
        raise NotFound(f"{op}: observation #{anchor} is not in project {p['project']}")
    full = p["format"] != "index"
    root = Roots(service.store, [centre.session_id]).of(centre.session_id, centre.project)  # one session's rows
    before = [rows.observation(_observation(o), full, root) for o in around["before"]]
    after = [rows.observation(_observation(o), full, root) for o in around["after"]]
    middle = rows.observation(centre, full, root)
    return {"anchor": middle, "before": before, "after": after, "observations": [*before, middle, *after],
            "totalResults": len(before) + 1 + len(after), "depth_before": p["depth_before"],
            "depth_after": p["depth_after"], "format": p["format"], "query": p.get("query") or ""}


def _no_anchor(p: dict[str, Any]) -> Answer:
    return {"anchor": None, "before": [], "after": [], "observations": [], "totalResults": 0,
            "depth_before": p["depth_before"], "depth_after": p["depth_after"], "format": p["format"],
            "query": p.get("query") or ""}


def _best_matches(service: Service, p: dict[str, Any], current: str | None, limit: int,
                  narrow: timelines.Narrow) -> list[Observation]:
    if narrow.obs_types == ():
        return []  # the types asked for select memories only, and a timeline shows observations
    projects = ProjectScope.parse(p.get("project") or None, current)
    result = service.search(p["query"], scope="observations", project=projects.only,
                            prefer_project=projects.first, limit=limit, agent=p.get("agent"),
                            **narrow.search_args())
    return [hit.record for hit in result.hits if isinstance(hit.record, Observation)]


# -- the operations ------------------------------------------------------------------------------

def search(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("search", SPECS["search"], args)
    kinds = (p["type"],) if p["type"] else ("observations", "sessions", "prompts", "memories")
    types = tm.resolve("search", "obs_type", p["obs_type"]) if p["obs_type"] else None
    return _gather(service, "search", p, project, kinds=kinds, types=types)


def timeline(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("timeline", SPECS["timeline"], args)
    narrow = timelines.narrowing("timeline", p, "obs_type")
    if p["anchor"] is not None:
        anchor = _anchor_id(service, "timeline", p["anchor"], p["project"])
        return _timeline(service, "timeline", anchor, p, narrow)
    if not p["query"]:
        raise ValidationError("timeline: give an anchor (observation id) or a query")
    best = _best_matches(service, p, project, 1, narrow)
    return _timeline(service, "timeline", best[0].id, p, narrow) if best else _no_anchor(p)


def decisions(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("decisions", SPECS["decisions"], args)
    return _gather(service, "decisions", p, project, kinds=("observations", "memories"),
                   types=tm.TYPE_MAP["decision"])


def changes(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("changes", SPECS["changes"], args)
    return _gather(service, "changes", p, project, kinds=("observations", "memories"), types=tm.CHANGES)


def how_it_works(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("how_it_works", SPECS["how_it_works"], args)
    return _gather(service, "how_it_works", p, project, kinds=("observations", "memories"), types=tm.HOW_IT_WORKS)


def search_observations(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("search_observations", SPECS["search_observations"], args)
    types = tm.resolve("search_observations", "obs_type", p["obs_type"]) if p["obs_type"] else None
    return _gather(service, "search_observations", p, project, kinds=("observations", "memories"), types=types)


def search_sessions(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("search_sessions", SPECS["search_sessions"], args)
    return _gather(service, "search_sessions", p, project, kinds=("sessions",))


def search_user_prompts(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("search_user_prompts", SPECS["search_user_prompts"], args)
    # claude-mem's user_prompts table holds what the user typed: never the agent's replies
    return _gather(service, "search_user_prompts", p, project, kinds=("prompts",), prompt_source="user")


def find_by_concept(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("find_by_concept", SPECS["find_by_concept"], args)
    types = tm.resolve("find_by_concept", "type", p["type"]) if p["type"] else None
    return _gather(service, "find_by_concept", p, project, kinds=("observations", "memories"), types=types)


def find_by_file(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("find_by_file", SPECS["find_by_file"], args)
    types = tm.resolve("find_by_file", "type", p["type"]) if p["type"] else None
    return _gather(service, "find_by_file", p, project, kinds=("observations",), types=types)


def find_by_type(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("find_by_type", SPECS["find_by_type"], args)
    types = tm.resolve("find_by_type", "type", p["type"])
    return _gather(service, "find_by_type", p, project, kinds=("observations", "memories"), types=types)


def get_recent_context(service: Service, args: Args = None, project: str | None = None) -> Answer:
    """The project's latest `limit` timeline items (claude-mem: 30), observations and curated
    memories newest first, narrowed by type, concepts, files and dates as `search` narrows
    them; the sessions the observations belong to come with their summaries."""
    p = parse("get_recent_context", SPECS["get_recent_context"], args)
    who = ProjectScope.parse(p["project"] or None, project, bound=True).only
    types = tm.resolve("get_recent_context", "type", p["type"]) if p["type"] else None
    found = _gather(service, "get_recent_context",
                    {**p, "query": None, "orderBy": "date_desc", "offset": 0, "project": who or "*"},
                    project, kinds=("observations", "memories"), types=types)
    items = found["observations"]
    order = list(dict.fromkeys(str(i["memory_session_id"]) for i in items if i["kind"] == "observation"))
    listed, _ = service.get([f"s{sid}" for sid in order]) if order else ([], [])
    sessions = []
    for record in listed:
        row = rows.of(record, p["format"] != "index")
        row["observations"] = [i for i in items if i["memory_session_id"] == record.id]
        sessions.append(row)
    return {"project": who or "", "observations": items, "sessions": sessions, "totalResults": len(items),
            "format": p["format"], "limit": p["limit"]}


def get_context_timeline(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("get_context_timeline", SPECS["get_context_timeline"], args)
    narrow = timelines.narrowing("get_context_timeline", p, "type")
    anchor = _anchor_id(service, "get_context_timeline", p["anchor"], p["project"])
    return _timeline(service, "get_context_timeline", anchor, p, narrow)


def get_timeline_by_query(service: Service, args: Args = None, project: str | None = None) -> Answer:
    p = parse("get_timeline_by_query", SPECS["get_timeline_by_query"], args)
    narrow = timelines.narrowing("get_timeline_by_query", p, "type")
    if p["mode"] == "interactive":
        full = p["format"] != "index"
        matches = [rows.observation(o, full) for o in _best_matches(service, p, project, p["limit"], narrow)]
        return {"mode": "interactive", "query": p["query"], "observations": matches,
                "totalResults": len(matches), "format": p["format"]}
    best = _best_matches(service, p, project, 1, narrow)
    answer = _timeline(service, "get_timeline_by_query", best[0].id, p, narrow) if best else _no_anchor(p)
    return {"mode": "auto", **answer}


def get_observations(service: Service, args: Args = None, project: str | None = None) -> Answer:
    """Whole records by the ids search rows carry (observation numbers, memory ids)."""
    p = parse("get_observations", SPECS["get_observations"], args)
    ids = [i.lstrip("#") for i in p["ids"]]
    if len(ids) > 100:
        raise ValidationError(f"get_observations: at most 100 ids (got {len(ids)})")
    bad = [i for i in ids if not i.isdigit() and not (len(i) == 26 and i.isalnum())]
    if bad:
        raise ValidationError(f"get_observations: not an observation or memory id: {', '.join(bad)}")
    found, missing = service.get(ids)
    return {"observations": [rows.of(r, True) for r in found], "missing": missing, "totalResults": len(found)}


# -- the table MCP and HTTP share -----------------------------------------------------------------

Function = Callable[[Service, Args, str | None], Answer]


@dataclass(frozen=True)
class Operation:
    """One claude-mem operation: its MCP tool name, its worker HTTP route, its parameters
    and the function that answers it. `render` names the text layout (`nmem.compat.claude_mem.render`)."""

    name: str
    path: str
    description: str
    params: tuple[Param, ...]
    function: Function
    render: str = "results"
    method: str = "GET"
    deprecated: bool = False

    def __call__(self, service: Service, args: Args = None, project: str | None = None) -> Answer:
        return self.function(service, args, project)

    @property
    def input_schema(self) -> dict[str, Any]:
        return json_schema(self.params)


SPECS: dict[str, tuple[Param, ...]] = {
    "search": (QUERY, FORMAT, RECORD_KIND, OBS_TYPE, CONCEPTS, FILES, *PAGE),
    "timeline": (ANCHOR, QUERY, DEPTH_BEFORE, DEPTH_AFTER, FORMAT, OBS_TYPE, CONCEPTS, FILES, PROJECT, AGENT),
    "decisions": SHORTCUT,
    "changes": SHORTCUT,
    "how_it_works": SHORTCUT,
    "search_observations": (QUERY_REQUIRED, FORMAT, OBS_TYPE, CONCEPTS, FILES, *PAGE),
    "search_sessions": (QUERY_REQUIRED, FORMAT, *PAGE),
    "search_user_prompts": (QUERY_REQUIRED, FORMAT, *PAGE),
    "find_by_concept": (CONCEPTS_REQUIRED, FORMAT, TYPE_FILTER, FILES, *PAGE),
    "find_by_file": (FILES_REQUIRED, FORMAT, TYPE_FILTER, CONCEPTS, *PAGE),
    "find_by_type": (TYPE_REQUIRED, FORMAT, CONCEPTS, FILES, *PAGE),
    "get_recent_context": (RECENT_PROJECT, RECENT_ITEMS, FORMAT, TYPE_FILTER, CONCEPTS, FILES, DATE_START, DATE_END),
    "get_context_timeline": (ANCHOR_REQUIRED, DEPTH_BEFORE, DEPTH_AFTER, FORMAT, TYPE_FILTER, CONCEPTS, FILES,
                             PROJECT, AGENT),
    "get_timeline_by_query": (QUERY_REQUIRED, MODE, DEPTH_BEFORE, DEPTH_AFTER, MATCHES, FORMAT, TYPE_FILTER,
                              CONCEPTS, FILES, PROJECT, DATE_START, DATE_END, AGENT),
    "get_observations": (IDS,),
}

_OPS: tuple[tuple[str, str, str, Function, str, str, bool], ...] = (
    ("search", "/api/search", "Search past sessions' observations, session summaries, prompts and curated "
     "memories. Start with format=index, then fetch the rows worth reading with format=full or get_observations.",
     search, "results", "GET", False),
    ("timeline", "/api/timeline", "What happened around an observation in its session: give anchor (an id) or "
     "a query whose best match becomes the anchor.", timeline, "timeline", "GET", False),
    ("decisions", "/api/decisions", "Find architectural and design decisions: curated memories in the decisions "
     "namespace or tagged decision.", decisions, "results", "GET", False),
    ("changes", "/api/changes", "Find code changes: file writes and edits, commits and pushes, and memories in "
     "progress or tagged change or what-changed.", changes, "results", "GET", False),
    ("how_it_works", "/api/how-it-works", "Understand how the system works: curated memories about patterns, "
     "APIs, configuration and context, or tagged how-it-works.", how_it_works, "results", "GET", False),
    ("search_observations", "/api/search/observations", "Deprecated: use search with type=observations.",
     search_observations, "results", "GET", True),
    ("search_sessions", "/api/search/sessions", "Deprecated: use search with type=sessions.",
     search_sessions, "results", "GET", True),
    ("search_user_prompts", "/api/search/prompts", "Deprecated: use search with type=prompts.",
     search_user_prompts, "results", "GET", True),
    ("find_by_concept", "/api/search/by-concept", "Find curated memories tagged with every concept given.",
     find_by_concept, "results", "GET", False),
    ("find_by_file", "/api/search/by-file", "Find observations that read or changed file(s).",
     find_by_file, "results", "GET", False),
    ("find_by_type", "/api/search/by-type", "Find observations and memories of type(s): decision, bugfix, "
     "feature, refactor, discovery, change.", find_by_type, "results", "GET", False),
    ("get_recent_context", "/api/context/recent", "The project's latest activity: its newest observations "
     "and memories (30 by default), grouped by session with each session's summary.", get_recent_context,
     "recent", "GET", False),
    ("get_context_timeline", "/api/context/timeline", "The timeline around an observation id.",
     get_context_timeline, "timeline", "GET", False),
    ("get_timeline_by_query", "/api/timeline/by-query", "Search, then the timeline around the best match "
     "(mode=interactive: list the best matches instead).", get_timeline_by_query, "timeline", "GET", False),
    ("get_observations", "/api/observations/batch", "Whole observations (or memories) by the ids search "
     "rows carry.", get_observations, "results", "POST", False),
)

OPERATIONS: dict[str, Operation] = {
    name: Operation(name, path, description, SPECS[name], function, render, method, deprecated)
    for name, path, description, function, render, method, deprecated in _OPS
}
