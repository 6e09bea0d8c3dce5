"""The MCP `sync` tool's schemas and handler; `nmem.adapters.mcp.tools` lists it with the others.

It syncs with the configured remote only (`sync.remote`): a client cannot point the server
at another URL. The call runs to completion and returns the report (docs/sync.md).
"""

from __future__ import annotations

from typing import Any

from nmem.errors import InvalidArgument
from nmem.service.api import Service
from nmem.sync.engine import run_sync
from nmem.team import accounts as team

DESCRIPTION = (
    "Sync curated memories with the user's other machines through the configured git remote: fetch and apply "
    "their writes, push this machine's. Use when the user asks to sync, or before recall when memories from "
    "another machine are expected. Returns counts pulled, applied, conflicts resolved (last writer wins) and pushed."
)
_INT = {"type": "integer"}
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "direction": {"enum": ["both", "fetch", "push"], "description": "Default both."},
    "domain": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
               "description": "Only these domains: user, org, project (the current one), project:<name>, "
                              "globs such as project:*. Default: all."},
    "force": {"type": "boolean", "description": "Reread every remote file and recheck every local write."},
    "accept": {"type": "array", "items": {"type": "string"},
               "description": "Device ids (or all) whose quarantined operations, stamped beyond sync.max_skew, "
                              "are applied. Only when the user asks for it."},
}}
OUTPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "remote": {"type": "string"}, "device": {"type": "string"}, "direction": {"type": "string"},
    "pulled": _INT, "applied": _INT, "conflicts": _INT, "invalid": _INT, "pushed": _INT, "pending": _INT,
    "quarantined": _INT, "restored": _INT, "quarantine_list": {"type": "array"},
    "conflict_list": {"type": "array"}, "warnings": {"type": "array"},
}, "required": ["remote", "pulled", "applied", "conflicts", "pushed", "pending"]}


def handle(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    team.require_admin("sync")  # it pushes every user's memories to the server's remote
    direction = args.get("direction") or "both"
    if direction not in ("both", "fetch", "push"):
        raise InvalidArgument("direction must be both, fetch or push")
    domain = args.get("domain")
    domains = [domain] if isinstance(domain, str) else list(domain or [])
    accept = args.get("accept") or []
    if not (isinstance(accept, list) and all(isinstance(a, str) for a in accept)):
        raise InvalidArgument("accept must be a list of device ids")
    project = default_project or service.project_for()
    service.check_writable(project=project)
    report = run_sync(service.store, service.settings, fetch=direction != "push", push=direction != "fetch",
                      force=bool(args.get("force")), domains=domains,
                      project=project, accept=accept)
    return report.to_dict()
