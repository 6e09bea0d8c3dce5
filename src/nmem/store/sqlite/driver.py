"""Which SQLite library a connection uses: the standard `_sqlite3`, or SQLCipher's for an
encrypted database (the optional `encryption` extra, package `sqlcipher3`); and what an SQLite
failure means for the user: one `StorageError` type per cause, naming the file.

The two libraries raise different exception classes, so the engine catches `driver.ERRORS`
and `driver.OPERATIONAL` (looked up when an exception is matched, so a process that loads
SQLCipher later still catches its errors). A plain database never loads SQLCipher: the hook
path stays on the standard library.
"""

from __future__ import annotations

import _sqlite3
import os
import sys

from nmem.errors import (
    EncryptionError,
    StorageError,
    StoreBusy,
    StoreCorrupt,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
    StoreUnavailable,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

ERRORS: tuple[type[BaseException], ...] = (_sqlite3.Error,)
OPERATIONAL: tuple[type[BaseException], ...] = (_sqlite3.OperationalError,)
DATABASE_ERRORS: tuple[type[BaseException], ...] = (_sqlite3.DatabaseError,)

_cipher: ModuleType | None = None

MISSING = ("encryption needs the `encryption` extra (the sqlcipher3 package): "
           "pip install 'nmem-memory[encryption]'")


def plain() -> ModuleType:
    return _sqlite3


def cipher() -> ModuleType:
    """SQLCipher's DB-API extension; a EncryptionError naming the extra when it is not installed."""
    # Module attributes, not a registry object: `except driver.ERRORS` reads them when it matches.
    global _cipher, ERRORS, OPERATIONAL, DATABASE_ERRORS  # noqa: PLW0603
    if _cipher is None:
        try:
            module = _import_cipher()
        except ImportError as exc:
            raise EncryptionError(MISSING) from exc
        ERRORS = (_sqlite3.Error, module.Error)
        OPERATIONAL = (_sqlite3.OperationalError, module.OperationalError)
        DATABASE_ERRORS = (_sqlite3.DatabaseError, module.DatabaseError)
        _cipher = module
    return _cipher


def _import_cipher() -> ModuleType:
    # The package's __init__ runs first (its dbapi2 adds datetime adapters): ~15 ms once.
    try:
        import sqlcipher3._sqlite3 as module  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        if not sys.flags.no_site:
            raise
        # The installed hook runs `python -S`, with nmem's own directory on sys.path but not
        # site-packages (they differ in an editable install), nor a virtualenv's prefix (which
        # `site` reads from pyvenv.cfg beside the interpreter's directory): look there too.
        import site

        venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
        for path in [*site.getsitepackages([venv, sys.prefix]), site.getusersitepackages()]:
            if path not in sys.path:
                sys.path.append(path)
        import sqlcipher3._sqlite3 as module  # type: ignore[import-not-found,import-untyped,unused-ignore]
    return module  # type: ignore[no-any-return,unused-ignore]


def available() -> bool:
    try:
        cipher()
    except EncryptionError:
        return False
    return True


def key_pragma(key: str) -> str:
    """`PRAGMA key` for a key as `nmem.store.keys` gives it: `x'<64 hex>'` (a raw 256-bit key, no
    key derivation) or a passphrase (PBKDF2, 256,000 iterations on every open)."""
    if is_raw(key):
        return f"PRAGMA key = \"{key}\""
    return "PRAGMA key = '" + key.replace("'", "''") + "'"


def apply_key(conn: Any, key: str) -> None:
    """Key a new SQLCipher connection (its first statement). A wrong key shows on the first
    read, as SQLITE_NOTADB; SQLCipher's own log of it would reach the terminal, so it is off."""
    conn.execute("PRAGMA cipher_log_level = NONE")
    conn.execute(key_pragma(key))


def is_raw(key: str) -> bool:
    body = key[2:-1] if key.startswith("x'") and key.endswith("'") else ""
    return len(body) == 64 and all(c in "0123456789abcdefABCDEF" for c in body)


def attach_key_clause(key: str) -> str:
    """The `KEY ...` clause of `ATTACH DATABASE ... AS x KEY ...` for the same key."""
    if is_raw(key):
        return f"KEY \"{key}\""
    return "KEY '" + key.replace("'", "''") + "'"


# -- what a failure means -------------------------------------------------------------------
# The cause is read off the error's result code (`sqlite_errorcode`, the extended code; its low
# byte is the primary one), not its text: "database or disk is full" and "disk I/O error" are
# SQLite's words, the code is its contract.

_BUSY = (_sqlite3.SQLITE_BUSY, _sqlite3.SQLITE_LOCKED)
_CORRUPT = (_sqlite3.SQLITE_CORRUPT, _sqlite3.SQLITE_NOTADB)


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
    if code == _sqlite3.SQLITE_FULL:
        return StoreFull(f"disk full while writing {path}: {text}; free some space and retry")
    if code in _CORRUPT:
        return StoreCorrupt(f"database is corrupt: {path}: {text}; `nmem doctor` checks it; restore a copy "
                            "or move the file aside to start a new database")
    if code == _sqlite3.SQLITE_READONLY:
        return StoreReadOnly(f"database is read-only: cannot write {path}: {text}")
    if code == _sqlite3.SQLITE_IOERR:
        return StoreIOError(f"I/O error on {path}: {text} ({name}); check the disk (full, failing or unmounted)")
    if code == _sqlite3.SQLITE_CANTOPEN:
        return StoreUnavailable(f"cannot open database {path}: {text}")
    if code == _sqlite3.SQLITE_CONSTRAINT:
        return StorageError(f"constraint failed: {text}")
    return StorageError(f"{doing}: {text}" if doing else text)
