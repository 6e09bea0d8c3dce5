"""The MCP `consolidate` tool's schemas and handler; `nmem.adapters.mcp.tools` lists it with the others.

A dry run by default: a client sees what would merge before asking for it. `undo` takes the
`run_id` a run returned. The LLM provider, when configured, is the server's (`llm.*` settings);
a client cannot name another.
"""

from __future__ import annotations

from typing import Any

from nmem.errors import InvalidArgument
from nmem.service.api import Service

DESCRIPTION = (
    "Tidy curated memories: merge near-duplicates into the one kept (the others archived with a pointer, "
    "nothing deleted), archive stale progress/blocker/context notes, roll recent sessions up into one summary per "
    "project. Dry run unless dry_run=false; the report's run_id undoes a run (undo=<run_id>). Use when recall "
    "returns the same fact several times or the user asks to clean memories up."
)
_INT = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "dry_run": {"type": "boolean", "description": "Default true: report what would change, change nothing."},
    "domain": {"type": "string", "description": "Only this domain: project (the current one), project:<name>, "
                                                "user, org. Default: all."},
    "undo": {**_INT, "description": "Restore what this run (its run_id) changed, instead of running."},
}}
OUTPUT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True, "properties": {
    "run_id": {"type": ["integer", "null"]}, "dry_run": {"type": "boolean"}, "merges": {"type": "array"},
    "stale": {"type": "array"}, "rollups": {"type": "array"}, "restored": {"type": "array"},
    "conflicts": {"type": "array"},
}}


def handle(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    undo = args.get("undo")
    dry_run = args.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise InvalidArgument("dry_run must be true or false")
    if undo is not None:
        if isinstance(undo, bool) or not isinstance(undo, int):
            raise InvalidArgument("undo must be a run id (an integer)")
        return service.undo_consolidation(undo)
    domain = args.get("domain")
    if domain is not None and not isinstance(domain, str):
        raise InvalidArgument("domain must be a string")
    if domain == "project":
        domain = f"project:{default_project or service.project_for()}"
    return service.consolidate(dry_run=dry_run, domain=domain)
