"""nmem's HTTP server: one ASGI app with the REST API (`/api/v1`), claude-mem's worker endpoints
(`/api/...`), MCP over Streamable HTTP (`/mcp`), `/health` and the OpenAPI document.

`nmem.http.app.create_app(settings)` builds it; `nmem.http.security` guards every request;
`nmem serve --transport http` runs it under uvicorn (`nmem.http.server`). Nothing here is
imported on the hook path.
"""
