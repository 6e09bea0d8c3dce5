"""nmem's service API, the one place its behaviour lives; CLI, hooks, MCP and HTTP only adapt it.

`core.CaptureService` is what a hook loads (recording); `api.Service` is all of it.
Importing this package loads nothing else.
"""
