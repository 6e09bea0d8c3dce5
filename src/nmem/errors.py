"""One error root for nmem; every edge (CLI, hooks, MCP, HTTP) reads its meaning off the type.

Exit codes and MCP codes follow subcog's table: not found 10 / -32001, validation 11 / -32002,
blocked 12 / -32003; a malformed argument is 2 / -32602 (JSON-RPC invalid params). How the MCP
code travels (an `isError` tool result's `_meta`, or a JSON-RPC error) is `nmem.adapters.mcp.server`'s
business and docs/mcp.md's "Errors". The HTTP API answers with the class's `http_status`
(docs/http.md's "Errors").
"""

from __future__ import annotations


class NmemError(Exception):
    """Root of every error nmem raises on purpose."""

    exit_code = 1
    mcp_code = -32000
    http_status = 500
    kind = "error"
    retry_after: int | None = None  # seconds: the same request may succeed then (HTTP Retry-After)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        return {"error": self.kind, "message": self.message, "exit_code": self.exit_code}


class InvalidArgument(NmemError):
    """A parameter is missing or malformed: the wrong type, an unknown name, a string that does not parse."""

    http_status = 400
    exit_code = 2
    mcp_code = -32602
    kind = "invalid_argument"


class QuerySyntaxError(InvalidArgument):
    """An FTS5 query SQLite cannot parse (unbalanced quotes, dangling operator...)."""

    kind = "query_syntax"


class Ambiguous(InvalidArgument):
    """A short id or path names more than one record; the message lists the candidates."""

    http_status = 409
    kind = "ambiguous"


class ConfigError(NmemError):
    http_status = 500
    exit_code = 3
    kind = "config"


class StorageError(NmemError):
    """The database could not be opened, read or written."""

    http_status = 500
    exit_code = 4
    mcp_code = -32603
    kind = "storage"


class TransactionLost(StorageError):
    """A savepoint's writes could not be undone: the whole transaction is gone with them."""


class StoreBusy(StorageError):
    """The database stayed locked by another writer past the retry budget."""

    http_status = 503
    kind = "busy"
    retry_after = 1


class StoreUnavailable(StorageError):
    """The database cannot be used as it is: the request or event is not at fault, so a hook keeps
    its event (spool) and retries later rather than dropping it."""

    http_status = 503
    kind = "unavailable"


class StoreDisconnected(StoreUnavailable):
    """The database server dropped the connection mid-request (a restart, an administrator ending
    the session): the request's transaction did not commit, and the same request may succeed
    once the server is back (HTTP 503 with Retry-After; MCP marks it retryable)."""

    kind = "disconnected"
    retry_after = 2


class CommitUnknown(StoreUnavailable):
    """The connection dropped after COMMIT was sent, and the database server could not tell within
    the wait whether the transaction committed (it was still running, or could not be asked). The
    write may be stored: unlike StoreDisconnected, sending it again may store it twice unless it
    carries a key (a hook event's); a client should read before writing it again."""

    kind = "commit_unknown"
    retry_after = 2


class StoreReadOnly(StoreUnavailable):
    """The database (its file, directory or file system) can be read but not written."""

    kind = "read_only"


class StoreFull(StoreUnavailable):
    """The disk (or the file system's quota) is full (SQLITE_FULL)."""

    http_status = 507
    kind = "disk_full"


class StoreCorrupt(StoreUnavailable):
    """The file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB on a file that was an nmem database)."""

    kind = "corrupt"


class StoreIOError(StoreUnavailable):
    """The operating system failed a read or write (SQLITE_IOERR)."""

    kind = "io_error"


class ForeignDatabase(StoreUnavailable):
    """The configured file is not an nmem database (another application's, or not SQLite at all);
    nmem refuses it and never writes to it."""

    kind = "foreign_database"


class EncryptionError(StoreUnavailable):
    """An encrypted database cannot be opened: no key is configured, the key does not open it,
    its source fails (a key file others can read, the OS keyring), or SQLCipher is not
    installed. Exit code 7, so scripts can tell it apart; hooks keep their events in the spool."""

    exit_code = 7
    kind = "encryption"


class NetworkError(NmemError):
    """The sync remote could not be reached, or refused what was sent (subcog's exit code 5)."""

    http_status = 502
    exit_code = 5
    mcp_code = -32004
    kind = "network"


class LLMError(NmemError):
    """The configured LLM provider failed: unreachable, refused the key, or answered nonsense
    (subcog's exit code 6 for LLM features). Nothing was changed."""

    exit_code = 6
    mcp_code = -32005
    http_status = 502
    kind = "llm"


class SyncBusy(NmemError):
    """Another `nmem sync` holds the data directory's sync lock."""

    http_status = 409
    kind = "sync_busy"


class NotFound(NmemError):
    http_status = 404
    exit_code = 10
    mcp_code = -32001
    kind = "not_found"


class ValidationError(NmemError):
    """The request is well-formed but its content is not acceptable: too long, empty, a number out of range."""

    http_status = 422
    exit_code = 11
    mcp_code = -32002
    kind = "validation"


class InputTooLarge(ValidationError):
    """An input is larger than its limit: an import file (`import.max_file_bytes`) or one line
    of one (`import.max_line_bytes`). Nothing was read past the limit."""

    http_status = 413
    kind = "too_large"


class ContentBlocked(NmemError):
    """The security filter refused to store the content."""

    http_status = 422
    exit_code = 12
    mcp_code = -32003
    kind = "blocked"


class InternalError(NmemError):
    """A bug: what the client hears instead of the exception, which only the server log keeps."""

    http_status = 500
    mcp_code = -32603
    kind = "internal"


class Disabled(NmemError):
    """Memory is switched off globally or for this project."""

    http_status = 403
    exit_code = 3
    kind = "disabled"


class Forbidden(NmemError):
    """The signed-in user may not do this on a team server (an admin's task)."""

    http_status = 403
    exit_code = 3
    kind = "forbidden"


ALL_ERRORS: tuple[type[NmemError], ...] = (
    NmemError,
    InvalidArgument,
    QuerySyntaxError,
    Ambiguous,
    ConfigError,
    StorageError,
    StoreBusy,
    StoreUnavailable,
    StoreDisconnected,
    StoreReadOnly,
    StoreFull,
    StoreCorrupt,
    StoreIOError,
    ForeignDatabase,
    NetworkError,
    LLMError,
    SyncBusy,
    NotFound,
    ValidationError,
    InputTooLarge,
    ContentBlocked,
    InternalError,
    Disabled,
    Forbidden,
)
