"""Which tools a server lists (`mcp.tools`): nmem's own, claude-mem's, or both.

claude-mem's tools are built from `nmem.compat.claude_mem.OPERATIONS`, the table the HTTP worker
routes read too. Profiles:

- `nmem` (default): nmem's tools; `core`: the short list.
- `claude-mem`: claude-mem's tool names with its schemas (its `search`, `timeline` and
  `get_observations` included), plus nmem's `remember`, `recall`, `forget` and `status`.
- `subcog`: subcog's names (`memory.capture`, `memory.recall`, `memory.status`, `memory.sync`,
  `memory.consolidate`, `memory.configure`; `nmem.adapters.mcp.subcog_tools`).
- `all`: nmem's tools plus every claude-mem name nmem lacks. `search`, `timeline` and
  `get_observations` are nmem's there (they read claude-mem's spellings too).
- a comma-separated list of names from any of these sets; a name nmem and claude-mem share is nmem's.
"""

from __future__ import annotations

from typing import Any

from nmem.adapters.mcp.subcog_tools import SUBCOG_BY_NAME, SUBCOG_TOOLS
from nmem.adapters.mcp.tools import ANY_OBJECT, INT, TOOLS, TOOLS_BY_NAME, Handler, ToolSpec, _obj
from nmem.compat.claude_mem import OPERATIONS, Operation
from nmem.compat.claude_mem import render as claude_mem_render
from nmem.errors import InvalidArgument
from nmem.service.api import Service

PROFILES = ("nmem", "core", "claude-mem", "subcog", "all")
KEPT_IN_CLAUDE_MEM = ("remember", "recall", "forget", "status")
ROWS = {"type": "array", "items": ANY_OBJECT}
OUTPUTS: dict[str, dict[str, Any]] = {
    "results": _obj({"observations": ROWS, "sessions": ROWS, "prompts": ROWS, "totalResults": INT},
                    ("observations", "totalResults")),
    "timeline": _obj({"anchor": {"type": ["object", "null"]}, "observations": ROWS, "totalResults": INT},
                     ("observations", "totalResults")),
    "recent": _obj({"project": {"type": "string"}, "sessions": ROWS, "totalResults": INT},
                   ("sessions", "totalResults")),
}


def _handler(op: Operation) -> Handler:
    def handle(service: Service, args: dict[str, Any], project: str | None) -> dict[str, Any]:
        return op(service, args, project)
    return handle


def _text(name: str) -> Any:
    return lambda answer: claude_mem_render.text(name, answer)


def _title(name: str) -> str:
    return "claude-mem " + name.replace("_", " ")


CLAUDE_MEM_TOOLS: tuple[ToolSpec, ...] = tuple(
    ToolSpec(op.name, _title(op.name), op.description, op.input_schema, OUTPUTS[op.render], _handler(op),
             text=_text(op.name), schema_checked=False)
    for op in OPERATIONS.values()
)
CLAUDE_MEM_BY_NAME = {t.name: t for t in CLAUDE_MEM_TOOLS}


def exposed(selection: str) -> tuple[ToolSpec, ...]:
    """The tools a server lists for an `mcp.tools` value."""
    value = selection.strip()
    if value == "nmem":
        return TOOLS
    if value == "core":
        return tuple(t for t in TOOLS if t.core)
    if value == "claude-mem":
        return CLAUDE_MEM_TOOLS + tuple(TOOLS_BY_NAME[n] for n in KEPT_IN_CLAUDE_MEM)
    if value == "subcog":
        return SUBCOG_TOOLS
    if value == "all":
        return TOOLS + tuple(t for t in CLAUDE_MEM_TOOLS if t.name not in TOOLS_BY_NAME)
    names = {n.strip() for n in value.split(",") if n.strip()}
    unknown = names - set(TOOLS_BY_NAME) - set(CLAUDE_MEM_BY_NAME) - set(SUBCOG_BY_NAME)
    if unknown or not names:
        raise InvalidArgument(f"unknown tool(s) in mcp.tools: {', '.join(sorted(unknown)) or value!r}; "
                              f"give {', '.join(PROFILES)} or a comma-separated list of tool names")
    return (tuple(t for t in TOOLS if t.name in names)
            + tuple(t for t in CLAUDE_MEM_TOOLS if t.name in names and t.name not in TOOLS_BY_NAME)
            + tuple(t for t in SUBCOG_TOOLS if t.name in names))
