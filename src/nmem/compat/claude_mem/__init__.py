"""claude-mem compatibility: claude-mem's search operations on nmem's service API.

A library, not an adapter: `OPERATIONS` maps each claude-mem tool name to its worker HTTP
route, its parameters (claude-mem's names, aliases, defaults and checks), the function that
answers it from `nmem.service.api.Service`, and the layout of its text. The MCP server's
`claude-mem` tool profile and the HTTP worker endpoints both read this one table.

    from nmem.compat.claude_mem import OPERATIONS, render
    answer = OPERATIONS["decisions"](service, {"query": "database", "format": "index"}, project="web")
    render.text("decisions", answer)        # claude-mem's markdown
    render.worker_body("decisions", answer) # its worker's JSON body

docs/claude-mem.md maps claude-mem's types and parameters onto nmem.
"""

from __future__ import annotations

from nmem.compat.claude_mem.operations import OPERATIONS, Operation
from nmem.compat.claude_mem.params import Param, parse
from nmem.compat.claude_mem.typemap import CLAUDE_TYPES, TYPE_MAP

__all__ = ["CLAUDE_TYPES", "OPERATIONS", "TYPE_MAP", "Operation", "Param", "parse"]
