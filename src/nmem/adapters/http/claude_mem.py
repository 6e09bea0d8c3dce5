"""claude-mem's worker endpoints (`/api/search`, `/api/decisions`, `/api/context/recent`, ...)
at its paths and with its parameters, so a claude-mem user's scripts keep working.

Each route answers from `nmem.compat.claude_mem.OPERATIONS`, the table the MCP `claude-mem` tool
profile reads too: the parameters are parsed and checked there (claude-mem's names, aliases
and defaults), and the body is what its worker sends: the JSON answer with `format=json`,
else `{"content": [{"type": "text", "text": <its markdown>}]}`.
"""

from __future__ import annotations

from typing import Any

from nmem.adapters.http.routing import Context, Endpoint, Handler
from nmem.compat.claude_mem import OPERATIONS, Operation, render


def _handler(op: Operation) -> Handler:
    def handle(ctx: Context, query: dict[str, Any] | None, body: dict[str, Any] | None) -> dict[str, Any]:
        args = body if op.method == "POST" else query
        return render.worker_body(op.name, op(ctx.service, args or {}, ctx.project))

    handle.__name__ = f"claude_mem_{op.name}"
    return handle


def _summary(op: Operation) -> str:
    return f"claude-mem `{op.name}`: " + op.description.split(". ")[0].rstrip(".")


ENDPOINTS: tuple[Endpoint, ...] = tuple(
    Endpoint(op.method, op.path, _summary(op), _handler(op), tag="claude-mem", description=op.description,
             query_schema=op.input_schema if op.method == "GET" else None,
             body_schema=op.input_schema if op.method != "GET" else None,
             reads_only=True, deprecated=op.deprecated)
    for op in OPERATIONS.values()
)
