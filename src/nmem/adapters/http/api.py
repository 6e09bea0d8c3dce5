"""The REST API under `/api/v1`: the service's reads and writes, one endpoint each.

Handlers only translate: parameters in, one `Service` call, plain JSON out (the records'
own `to_dict`, as MCP and `--format json` give them).
"""

from __future__ import annotations

import os
from typing import Any

from nmem.adapters.http import schemas as s
from nmem.adapters.http.routing import Context, Endpoint
from nmem.capture.privacy import redact_url
from nmem.config import SETTINGS
from nmem.context.block import build as build_context
from nmem.errors import Forbidden, NotFound
from nmem.service.args import ProjectScope
from nmem.service.args import source as read_source
from nmem.team.access import current

LOG_TAIL_BYTES = 64 * 1024   # the log view reads at most this much of the log's end

PREFIX = "/api/v1"


def _projects(ctx: Context, project: str | None, *, bound: bool = False) -> ProjectScope:
    return ProjectScope.parse(project, ctx.project, bound=bound)


def search(ctx: Context, p: s.SearchParams, _: None) -> dict[str, Any]:
    projects = _projects(ctx, p.project)
    result = ctx.service.search(
        p.query, scope=p.scope, project=projects.only, prefer_project=projects.first, obs_type=p.obs_type,
        namespace=p.namespace, tags=p.tags, files=p.files, session_id=p.session_id, source=p.source,
        date_start=p.date_start, date_end=p.date_end, order_by=p.order_by, limit=p.limit, offset=p.offset,
        strict=p.strict, cwd=ctx.cwd, agent=p.agent)
    rows = result.to_list(full=p.format == "full")
    return {"results": rows, "count": len(rows), "query": result.query, "match": result.match}


def observations(ctx: Context, p: s.IdsParams, _: None) -> dict[str, Any]:
    rows = [o.to_dict() for o in ctx.service.get_observations(list(p.ids))]
    return {"results": rows, "count": len(rows)}


def observation(ctx: Context, p: s.ObservationPath, _: None) -> dict[str, Any]:
    rows = ctx.service.get_observations([p.id])
    if not rows:
        raise NotFound(f"observation not found: {p.id}")
    return rows[0].to_dict()


def timeline(ctx: Context, p: s.TimelineParams, _: None) -> dict[str, Any]:
    projects = _projects(ctx, p.project)
    return ctx.service.timeline(p.anchor, query=p.query, before=p.before, after=p.after, project=projects.only,
                                prefer_project=projects.first, agent=p.agent, obs_type=p.obs_type, tags=p.tags,
                                files=p.files, date_start=p.date_start, date_end=p.date_end, cwd=ctx.cwd)


def sessions(ctx: Context, p: s.SessionsParams, _: None) -> dict[str, Any]:
    rows = ctx.service.sessions(_projects(ctx, p.project, bound=True).only, since=p.since,
                                limit=p.limit, agent=p.agent)
    return {"results": rows, "count": len(rows)}


def session_trace(ctx: Context, p: s.TraceParams, _: None) -> dict[str, Any]:
    return ctx.service.session_trace(p.session_id, before=p.before, after=p.after, agent=p.agent)


def file_history(ctx: Context, p: s.FileHistoryParams, _: None) -> dict[str, Any]:
    return ctx.service.file_history(p.path, before=p.before, after=p.after, limit=p.limit, cwd=ctx.cwd)


def recent(ctx: Context, p: s.RecentParams, _: None) -> dict[str, Any]:
    rows = ctx.service.recent_context(_projects(ctx, p.project, bound=True).only, p.limit)
    return {"results": rows, "count": len(rows)}


def recall(ctx: Context, p: s.RecallParams, _: None) -> dict[str, Any]:
    hits = ctx.service.recall(p.query, namespace=p.namespace, tags=p.tags, domain=p.domain,
                              project=_projects(ctx, p.project, bound=True).only, limit=p.limit,
                              include_archived=p.include_archived)
    rows = [h.to_dict(full=True) for h in hits]
    return {"results": rows, "count": len(rows)}


def create_memory(ctx: Context, _: None, b: s.NewMemory) -> dict[str, Any]:
    memory = ctx.service.remember(b.content, summary=b.summary, namespace=b.namespace, tags=b.tags,
                                  domain=b.domain, project=b.project or ctx.project, relates_to=b.relates_to,
                                  tier=b.tier, pinned=b.pinned,
                                  source=read_source(b.source or b.rule_name, "http"))
    return memory.to_dict()


def read_memory(ctx: Context, p: s.RefPath, _: None) -> dict[str, Any]:
    return ctx.service.get_memory(p.ref).to_dict()


def update_memory(ctx: Context, p: s.RefPath, b: s.MemoryChanges) -> dict[str, Any]:
    return ctx.service.update(p.ref, content=b.content, summary=b.summary, namespace=b.namespace, tags=b.tags,
                              tier=b.tier, relates_to=b.relates_to).to_dict()


def forget_memory(ctx: Context, p: s.RefPath, _: None) -> dict[str, Any]:
    memory = ctx.service.forget(p.ref)
    return {"id": memory.id, "urn": memory.urn, "forgotten": True}


def pin(ctx: Context, p: s.RefPath, _: None) -> dict[str, Any]:
    return ctx.service.pin(p.ref, True)


def unpin(ctx: Context, p: s.RefPath, _: None) -> dict[str, Any]:
    return ctx.service.pin(p.ref, False)


def records(ctx: Context, p: s.RefsParams, _: None) -> dict[str, Any]:
    found, missing = ctx.service.get(list(p.refs))
    rows = [{"kind": record.kind, **record.to_dict()} for record in found]
    return {"results": rows, "count": len(rows), "missing": missing}


def record(ctx: Context, p: s.RefPath, _: None) -> dict[str, Any]:
    found, _missing = ctx.service.get([p.ref])
    if not found:
        raise NotFound(f"nothing is named {p.ref}")
    return {"kind": found[0].kind, **found[0].to_dict()}


def status(ctx: Context, _: None, __: None) -> dict[str, Any]:
    return ctx.service.status()


def settings(ctx: Context, _: None, __: None) -> dict[str, Any]:
    """Every setting's effective value and where it came from; secrets as `***`, passwords in URLs too."""
    current = ctx.service.settings
    rows = []
    for setting in SETTINGS:
        value = setting.shown(current[setting.name])
        rows.append({"name": setting.name, "value": redact_url(value) if isinstance(value, str) else value,
                     "source": current.sources.get(setting.name, "default"), "env": setting.env})
    return {"settings": rows}


def context_preview(ctx: Context, p: s.ContextParams, _: None) -> dict[str, Any]:
    service = ctx.service
    name = _projects(ctx, p.project, bound=True).only or ctx.project or service.project_for(ctx.cwd)
    built = build_context(service, name, "compact" if p.recovery else None, service.now())
    return {"project": name, "mode": "recovery" if p.recovery else "normal", "context": built.text,
            "stats": built.stats()}


def projects(ctx: Context, _: None, __: None) -> dict[str, Any]:
    """The projects sessions were recorded in (most sessions first) and the server's own."""
    counts = ctx.service.status()["by_project"]
    rows = [{"name": name, "sessions": n} for name, n in counts.items()]
    return {"results": rows, "count": len(rows), "current": ctx.project}


def hook_log(ctx: Context, p: s.LogParams, _: None) -> dict[str, Any]:
    """The end of the hooks' log (`<home>/logs/nmem.log`): on a team server, for admins only."""
    viewer = current()
    if viewer is not None and not viewer.admin:
        raise Forbidden("the log is shown to admins only")
    path = os.path.join(ctx.service.settings.log_dir, "nmem.log")
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return {"path": path, "exists": False, "lines": [], "count": 0}
    if size > LOG_TAIL_BYTES:
        lines = lines[1:]  # a partial first line
    lines = lines[-min(p.limit or 200, 1000):]
    return {"path": path, "exists": True, "lines": lines, "count": len(lines)}


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", f"{PREFIX}/search", "Search everything (observations, prompts, sessions, memories) in every "
             "project, the current one's first", search, s.SearchParams,
             description="Every filter of `nmem search`; `format=index` gives 120-character previews, "
                         "`format=full` whole records.", tag="search"),
    Endpoint("GET", f"{PREFIX}/observations", "Fetch observations by id", observations, s.IdsParams, tag="trail"),
    Endpoint("GET", f"{PREFIX}/observations/{{id}}", "One observation", observation, s.ObservationPath,
             path_params=("id",)),
    Endpoint("GET", f"{PREFIX}/timeline", "Observations around an anchor in its session", timeline,
             s.TimelineParams),
    Endpoint("GET", f"{PREFIX}/sessions", "Sessions, newest first", sessions, s.SessionsParams),
    Endpoint("GET", f"{PREFIX}/sessions/{{session_id}}/trace", "A session's prompts and what each led to",
             session_trace, s.TraceParams, path_params=("session_id",)),
    Endpoint("GET", f"{PREFIX}/files/history", "Every session that touched a file", file_history,
             s.FileHistoryParams),
    Endpoint("GET", f"{PREFIX}/recent", "Recent activity by composite score", recent, s.RecentParams),
    Endpoint("GET", f"{PREFIX}/memories", "Recall the memories of this project plus the user's and the org's",
             recall, s.RecallParams, tag="memories"),
    Endpoint("POST", f"{PREFIX}/memories", "Remember: create a curated memory", create_memory, body=s.NewMemory,
             tag="memories", status=201),
    Endpoint("GET", f"{PREFIX}/memories/{{ref:path}}", "One memory by id or URN", read_memory, s.RefPath,
             tag="memories", path_params=("ref",)),
    Endpoint("PATCH", f"{PREFIX}/memories/{{ref:path}}", "Update a memory", update_memory, s.RefPath, s.MemoryChanges,
             tag="memories", path_params=("ref",)),
    Endpoint("DELETE", f"{PREFIX}/memories/{{ref:path}}", "Forget a memory (a tombstone stays for sync)", forget_memory,
             s.RefPath, tag="memories", path_params=("ref",)),
    Endpoint("PUT", f"{PREFIX}/pins/{{ref:path}}", "Pin an observation or a memory (exempt from retention)", pin,
             s.RefPath, tag="memories", path_params=("ref",)),
    Endpoint("DELETE", f"{PREFIX}/pins/{{ref:path}}", "Unpin an observation or a memory", unpin, s.RefPath,
             tag="memories", path_params=("ref",)),
    Endpoint("GET", f"{PREFIX}/records", "Open records by any ids or URNs", records, s.RefsParams, tag="records"),
    Endpoint("GET", f"{PREFIX}/records/{{ref:path}}", "Open one record by any id or URN", record, s.RefPath,
             tag="records", path_params=("ref",)),
    Endpoint("GET", f"{PREFIX}/status", "Counts, database size and schema version", status, tag="status"),
    Endpoint("GET", f"{PREFIX}/settings", "Effective settings (secrets masked)", settings, tag="status"),
    Endpoint("GET", f"{PREFIX}/context", "Preview the SessionStart context block", context_preview,
             s.ContextParams, tag="status"),
    Endpoint("GET", f"{PREFIX}/projects", "Recorded projects (most sessions first) and the server's own", projects,
             tag="status"),
    Endpoint("GET", f"{PREFIX}/log", "The end of the hooks' log (admins only on a team server)", hook_log,
             s.LogParams, tag="status"),
)
