"""nmem's MCP server (official `mcp` SDK): tools, resources, prompts and subscriptions."""
