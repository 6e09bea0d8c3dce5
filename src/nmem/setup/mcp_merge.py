"""srvrmgr's MCP config merging: the memory server, then a rule's MCP config files, then the
global default files, as one `{"mcpServers": {...}}` document for `claude --mcp-config`.

The first definition of a server name wins: nothing replaces the memory server, and a rule's
own server stands over a global default of the same name. Each name left out is reported so
the caller can say so. A file that is not an MCP config is refused with its path and why.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from nmem.errors import InvalidArgument


@dataclass
class Merged:
    """The merged servers, where each came from, and the names a later file tried to redefine."""

    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    shadowed: list[tuple[str, str, str]] = field(default_factory=list)  # (name, file, kept from)

    def add(self, servers: dict[str, Any], source: str) -> None:
        for name, entry in servers.items():
            if name in self.servers:
                self.shadowed.append((name, source, self.origin[name]))
                continue
            self.servers[name] = entry
            self.origin[name] = source

    def document(self) -> dict[str, Any]:
        return {"mcpServers": self.servers}


def read_servers(path: str) -> dict[str, Any]:
    """The `mcpServers` object of an MCP config file (Claude Code's `.mcp.json` shape)."""
    full = os.path.expanduser(path)
    try:
        with open(full, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise InvalidArgument(f"no MCP config file at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read the MCP config {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise InvalidArgument(f'{path} is not an MCP config: expected {{"mcpServers": {{"<name>": {{...}}}}}}')
    return servers


def merge(memory: tuple[str, dict[str, Any]] | None, rule_files: list[str], global_files: list[str]) -> Merged:
    """srvrmgr's order: the memory server (None when memory is off for the caller), the rule's
    files, the global default files. Every file is read before anything is returned."""
    merged = Merged()
    if memory is not None:
        merged.add({memory[0]: memory[1]}, "nmem")
    for path in [*rule_files, *global_files]:
        merged.add(read_servers(path), path)
    return merged
