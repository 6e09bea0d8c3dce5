"""Memory lifecycle: tiers, trail retention, consolidation, and the optional LLM provider.

Nothing here runs on the hook path: `nmem sweep`, `nmem consolidate`, the MCP `consolidate`
tool and (lazily, at most once a day) `recall` call it. docs/lifecycle.md explains the rules.
"""
