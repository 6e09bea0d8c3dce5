"""What an SQLite failure means for the user: one `StorageError` type per cause, naming the file.

The cause is read off the error's result code (`sqlite_errorcode`, the extended code; its low
byte is the primary one), not its text: "database or disk is full" and "disk I/O error" are
SQLite's words, the code is its contract. On the hook path: the `_sqlite3` extension only.
"""

from __future__ import annotations

import _sqlite3 as sqlite3

from nmem.errors import (
    StorageError,
    StoreBusy,
    StoreCorrupt,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
    StoreUnavailable,
)

_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def result_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of an error, or None (errors of the Python module itself)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_locked(exc: BaseException) -> bool:
    code = result_code(exc)
    if code is not None:
        return code in _BUSY
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def storage_error(exc: BaseException, path: str, doing: str = "") -> StorageError:
    """The `StorageError` for an SQLite failure on the database at `path`.

    `doing` prefixes the message of failures with no cause of their own ("cannot commit").
    """
    code = result_code(exc)
    name = getattr(exc, "sqlite_errorname", "")
    text = str(exc)
    if code in _BUSY:
        return StoreBusy(f"database is busy: {path} is locked by another connection ({text})")
    if code == sqlite3.SQLITE_FULL:
        return StoreFull(f"disk full while writing {path}: {text}; free some space and retry")
    if code in _CORRUPT:
        return StoreCorrupt(f"database is corrupt: {path}: {text}; `nmem doctor` checks it; restore a copy "
                            "or move the file aside to start a new database")
    if code == sqlite3.SQLITE_READONLY:
        return StoreReadOnly(f"database is read-only: cannot write {path}: {text}")
    if code == sqlite3.SQLITE_IOERR:
        return StoreIOError(f"I/O error on {path}: {text} ({name}); check the disk (full, failing or unmounted)")
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreUnavailable(f"cannot open database {path}: {text}")
    if code == sqlite3.SQLITE_CONSTRAINT:
        return StorageError(f"constraint failed: {text}")
    return StorageError(f"{doing}: {text}" if doing else text)
