"""subcog's MCP tool names (access interface layer §3.2), the `subcog` profile of `mcp.tools`.

`memory.capture`, `memory.recall`, `memory.status`, `memory.sync`, `memory.consolidate` and
`memory.configure`: nmem's tools under subcog's names. `memory.capture` takes subcog's capture
arguments (`namespace` and `summary`, the body in `content` or the summary itself, `domain`, `spec`,
`tags`, `relates_to`) and answers as `nmem capture --format json` does (`success`, `memory_id`,
`uri`, `indexed`, `warning`, then the memory); the others are nmem's `recall`, `status`, `sync`,
`consolidate` and `configure`, their schemas and answers unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nmem.adapters.mcp.tools import STR, STR_OR_LIST, TOOLS_BY_NAME, ToolSpec, _obj, _pick
from nmem.errors import InvalidArgument
from nmem.service.api import Service

PREFIX = "memory."
RENAMED = ("recall", "status", "sync", "consolidate", "configure")


def _capture(service: Service, args: dict[str, Any], default_project: str | None) -> dict[str, Any]:
    summary = _pick(args, "summary")
    namespace = _pick(args, "namespace")
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidArgument("summary is required: one line, at most 100 characters")
    if not isinstance(namespace, str) or not namespace.strip():
        raise InvalidArgument("namespace is required (decisions, learnings, patterns, blockers, progress, ...)")
    return service.capture(
        str(_pick(args, "content") or summary), summary=summary, namespace=namespace, spec=_pick(args, "spec"),
        tags=_pick(args, "tags"), domain=_pick(args, "domain"), project=default_project,
        relates_to=_pick(args, "relates_to"), source="mcp")


CAPTURE = ToolSpec(
    PREFIX + "capture", "Capture a memory",
    "Capture a durable memory for future sessions (subcog's capture): a decision and its reason, a learning, "
    "a pattern, a blocker. Give its namespace and a one-line summary; the markdown body in content.",
    _obj({"namespace": {**STR, "description": "decisions, learnings, patterns, blockers, progress, context, "
                                              "tech-debt, apis, config, security, testing…"},
          "summary": {**STR, "maxLength": 100, "description": "One line, at most 100 characters."},
          "content": {**STR, "description": "The memory's body (markdown). Default: the summary itself."},
          "domain": {**STR, "description": "project (default), user, org or project:<name>."},
          "spec": {**STR, "description": "Specification it belongs to (kept as the tag spec:<name>)."},
          "tags": STR_OR_LIST, "relates_to": STR_OR_LIST}, ("namespace", "summary")),
    _obj({"success": {"type": "boolean"}, "memory_id": STR, "uri": STR, "indexed": {"type": "boolean"},
          "warning": {"type": ["string", "null"]}},
         ("success", "memory_id", "uri", "indexed", "warning")),
    _capture, read_only=False, idempotent=False, core=True,
)

SUBCOG_TOOLS: tuple[ToolSpec, ...] = (
    CAPTURE,
    *(replace(TOOLS_BY_NAME[name], name=PREFIX + name) for name in RENAMED),
)
SUBCOG_BY_NAME = {t.name: t for t in SUBCOG_TOOLS}
