"""nmem's HTTP server: one ASGI app with the REST API (`/api/v1`), claude-mem's worker endpoints
(`/api/...`), MCP over Streamable HTTP (`/mcp`), `/health` and the OpenAPI document.

`nmem.adapters.http.app.create_app(settings)` builds it; `nmem.adapters.http.security` guards every request;
`nmem serve --transport http` runs it under uvicorn (`nmem.adapters.http.server`). Nothing here is
imported on the hook path.
"""
