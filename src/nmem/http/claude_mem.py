"""claude-mem's worker endpoints (`/api/search`, `/api/decisions`, ...) at its paths and
parameters, answered by `nmem.claude_mem.OPERATIONS`, the table the MCP profile shares."""

from __future__ import annotations

from nmem.http.routing import Endpoint

ENDPOINTS: tuple[Endpoint, ...] = ()
