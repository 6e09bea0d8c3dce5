"""One error root for nmem; every edge (CLI, hooks, MCP, HTTP) reads its meaning off the type.

Exit codes follow subcog's table; MCP codes are JSON-RPC server-error codes for protocol
errors (tool failures are reported as `isError` results carrying the message).
"""

from __future__ import annotations


class NmemError(Exception):
    """Root of every error nmem raises on purpose."""

    exit_code = 1
    mcp_code = -32000
    kind = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        return {"error": self.kind, "message": self.message, "exit_code": self.exit_code}


class InvalidArgument(NmemError):
    """A parameter is missing, malformed or out of range."""

    exit_code = 2
    mcp_code = -32602
    kind = "invalid_argument"


class QuerySyntaxError(InvalidArgument):
    """An FTS5 query SQLite cannot parse (unbalanced quotes, dangling operator...)."""

    kind = "query_syntax"


class ConfigError(NmemError):
    exit_code = 3
    kind = "config"


class StorageError(NmemError):
    """The database could not be opened, read or written."""

    exit_code = 4
    mcp_code = -32603
    kind = "storage"


class StoreBusy(StorageError):
    """The database stayed locked by another writer past the retry budget."""

    kind = "busy"


class NetworkError(NmemError):
    """The sync remote could not be reached, or refused what was sent (subcog's exit code 5)."""

    exit_code = 5
    mcp_code = -32004
    kind = "network"


class SyncBusy(NmemError):
    """Another `nmem sync` holds the data directory's sync lock."""

    kind = "sync_busy"


class NotFound(NmemError):
    exit_code = 10
    mcp_code = -32001
    kind = "not_found"


class ValidationError(NmemError):
    """The request is well-formed but its content is not acceptable (too long, empty...)."""

    exit_code = 11
    mcp_code = -32002
    kind = "validation"


class ContentBlocked(NmemError):
    """The security filter refused to store the content."""

    exit_code = 12
    mcp_code = -32003
    kind = "blocked"


class Disabled(NmemError):
    """Memory is switched off globally or for this project."""

    exit_code = 3
    kind = "disabled"


ALL_ERRORS: tuple[type[NmemError], ...] = (
    NmemError,
    InvalidArgument,
    QuerySyntaxError,
    ConfigError,
    StorageError,
    StoreBusy,
    NetworkError,
    SyncBusy,
    NotFound,
    ValidationError,
    ContentBlocked,
    Disabled,
)
