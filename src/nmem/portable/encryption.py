"""`nmem encrypt` and `nmem decrypt`: convert the SQLite database in place, between plain and
SQLCipher-encrypted (docs/encryption.md).

One conversion, start to end:

1. The database is opened as nmem opens it (its identity checked, its schema brought up to
   date), then once more through SQLCipher's library, which switches it out of WAL into
   rollback-journal mode. SQLite refuses that switch while any other process has the file open,
   which is how a running `nmem serve` is found: the conversion then stops, changing nothing.
2. That connection takes an exclusive lock and keeps it (`locking_mode = EXCLUSIVE`) until the
   end: hooks wait their busy budget, then spool their events, stored by a later hook.
3. `sqlcipher_export()` copies every table into a new file beside the database (encrypted
   with the key, or plain); the schema version and nmem's application_id go with it.
4. The new file is checked with a connection of its own: `integrity_check` (and
   `cipher_integrity_check` for an encrypted one) and the row count of every table, which
   must equal the database's under the lock. It is then put in WAL mode and synced.
5. The database is copied to `<data dir>/backups/` (still under the lock), then the new file is
   renamed over it: atomic, so the path holds the old database or the new one, never a mix.
   The copy reads the file through a descriptor kept open until the lock is let go: closing any
   descriptor of a file drops every POSIX lock the process holds on it, SQLite's included, and
   a hook waiting for the lock would then write an event into the old file after its export.
6. A hook that opened the old file before the rename and waits for the lock would write to the
   old file, which no name reaches any more. Its first page is overwritten before the lock is
   let go, so such a hook fails to read it and spools its event instead.
7. The database is opened again by its path and its counts checked once more; only then is the
   backup deleted (a plain copy must not outlive an encryption), unless asked to keep it.

Any failure before the rename deletes the new file and leaves the database as it was.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from nmem.errors import InvalidArgument, StorageError, StoreBusy
from nmem.store.keys import DatabaseKey
from nmem.store.sqlite import SqliteStore, driver
from nmem.store.sqlite.driver import is_locked
from nmem.store.sqlite.files import APPLICATION_ID, sync_dir

# Written over the first page of the replaced file: not SQLite's header, not a valid SQLCipher
# page, so a connection still holding that file fails (and a hook spools) instead of writing.
STALE_PAGE = b"nmem: this file was replaced by nmem encrypt/decrypt; reopen the database by its path\n"


@dataclass
class ConversionReport:
    database: str
    encrypted: bool
    key_source: str
    tables: dict[str, int]      # rows of every table, as checked in the new file
    backup: str | None         # the copy of the previous database, when kept
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def encrypt(db_path: str, key: DatabaseKey, backups_dir: str, *, keep_backup: bool = False,
            busy_timeout_ms: int = 10_000) -> ConversionReport:
    """Encrypt the plain nmem database at `db_path` with `key`, in place."""
    return _convert(db_path, key, backups_dir, encrypt=True, keep_backup=keep_backup,
                    busy_timeout_ms=busy_timeout_ms)


def decrypt(db_path: str, key: DatabaseKey, backups_dir: str, *, keep_backup: bool = False,
            busy_timeout_ms: int = 10_000) -> ConversionReport:
    """Turn the encrypted nmem database at `db_path` (opened with `key`) back into plain SQLite."""
    return _convert(db_path, key, backups_dir, encrypt=False, keep_backup=keep_backup,
                    busy_timeout_ms=busy_timeout_ms)


def _check_current(db_path: str, key: DatabaseKey, encrypt: bool) -> None:
    """The database exists, is nmem's, is up to date, and is in the state the command converts from."""
    if not os.path.isfile(db_path) or os.path.getsize(db_path) == 0:
        raise StorageError(f"no database at {db_path}")
    store = SqliteStore(db_path, key=key)   # identifies the file (and the key), migrates it
    try:
        encrypted = store.encrypted
    finally:
        store.close()
    if encrypt and encrypted:
        raise InvalidArgument(f"{db_path} is already encrypted")
    if not encrypt and not encrypted:
        raise InvalidArgument(f"{db_path} is not encrypted")


def _convert(db_path: str, key: DatabaseKey, backups_dir: str, *, encrypt: bool, keep_backup: bool,
             busy_timeout_ms: int) -> ConversionReport:
    started = time.monotonic()
    db_path = os.path.abspath(os.path.expanduser(db_path))
    _check_current(db_path, key, encrypt)
    lib = driver.cipher()
    directory = os.path.dirname(db_path)
    tmp = os.path.join(directory, f".{os.path.basename(db_path)}.{os.getpid()}.converting")
    live = lib.connect(db_path, isolation_level=None, check_same_thread=False)
    renamed = False
    try:
        if not encrypt:
            driver.apply_key(live, key.value)
        live.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        _take_exclusive(live, db_path, busy_timeout_ms)
        try:
            expected = _counts(live)
            version = int(live.execute("PRAGMA user_version").fetchone()[0])
            vacuum = int(live.execute("PRAGMA auto_vacuum").fetchone()[0])
            _export(live, tmp, key if encrypt else None, version, vacuum)
            _verify(lib, tmp, key if encrypt else None, expected)
            # The file about to be replaced: copied (step 5) and made stale (step 6) through this
            # one descriptor, closed only after `live`. Closing any descriptor of the file drops
            # every POSIX lock this process holds on it, `live`'s exclusive lock included: a
            # waiting hook would then write to the old file, unseen by the copy (an event lost).
            old = os.open(db_path, os.O_RDWR)
            try:
                backup = _save_previous(old, backups_dir, encrypt)
                os.replace(tmp, db_path)
                renamed = True
                sync_dir(directory)
                os.pwrite(old, STALE_PAGE.ljust(4096, b"\0"), 0)
                os.fsync(old)
            finally:
                live.close()   # lets go of the lock: waiting hooks now fail on the stale page
                os.close(old)
        except BaseException:
            if not renamed:
                live.close()
                _back_to_wal(lib, db_path, None if encrypt else key)
            raise
    except driver.ERRORS as exc:
        raise StorageError(f"{'encryption' if encrypt else 'decryption'} failed, the database is unchanged: "
                           f"{exc}") from exc
    finally:
        live.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
    found = _reopen_counts(db_path, key)
    short = {t: n for t, n in found.items() if n < expected.get(t, 0)}
    if short:
        raise StorageError(f"the converted database holds fewer rows than before ({short}, not {expected}); "
                           f"the previous database is in {backup}")
    if not keep_backup:
        os.unlink(backup)
    return ConversionReport(db_path, encrypt, key.source, expected, backup if keep_backup else None,
                            round(time.monotonic() - started, 3))


def _take_exclusive(live: Any, db_path: str, busy_timeout_ms: int) -> None:
    """Leave WAL (SQLite allows it only while no other process has the file open) and hold an
    exclusive lock from now on."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            mode = str(live.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower()
        except driver.OPERATIONAL as exc:
            if not is_locked(exc):
                raise
            mode = "wal"
        if mode == "delete":
            break
        if time.monotonic() > deadline:
            raise StoreBusy(f"another process keeps {db_path} open (a running `nmem serve` or MCP client?): "
                            "stop it and retry; nothing was changed")
        time.sleep(0.05)
    live.execute("PRAGMA locking_mode = EXCLUSIVE")
    live.execute("BEGIN EXCLUSIVE")
    # A write, so the lock taken is the exclusive one and exclusive mode keeps it after COMMIT.
    version = int(live.execute("PRAGMA user_version").fetchone()[0])
    live.execute(f"PRAGMA user_version = {version}")
    live.execute("COMMIT")


def _counts(conn: Any) -> dict[str, int]:
    """Rows in every ordinary table (FTS5's shadow tables included): what the copy must hold."""
    tables = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
    return {t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables}


def _export(live: Any, tmp: str, key: DatabaseKey | None, version: int, vacuum: int) -> None:
    if os.path.exists(tmp):
        os.unlink(tmp)
    os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    clause = driver.attach_key_clause(key.value) if key is not None else "KEY ''"
    escaped = tmp.replace("'", "''")
    live.execute(f"ATTACH DATABASE '{escaped}' AS converted {clause}")
    try:
        live.execute(f"PRAGMA converted.auto_vacuum = {vacuum}")   # before the first table
        live.execute("SELECT sqlcipher_export('converted')")
        live.execute(f"PRAGMA converted.user_version = {version}")
        live.execute(f"PRAGMA converted.application_id = {APPLICATION_ID}")
    finally:
        live.execute("DETACH DATABASE converted")


def _verify(lib: Any, tmp: str, key: DatabaseKey | None, expected: dict[str, int]) -> None:
    conn = lib.connect(tmp, isolation_level=None)
    try:
        if key is not None:
            driver.apply_key(conn, key.value)
            problems = [str(r[0]) for r in conn.execute("PRAGMA cipher_integrity_check")]
            if problems:
                raise StorageError(f"the encrypted copy failed cipher_integrity_check: {'; '.join(problems[:3])}")
        integrity = "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check")) or "ok"
        if integrity != "ok":
            raise StorageError(f"the converted copy failed its integrity check: {integrity}")
        found = _counts(conn)
        if found != expected:
            raise StorageError(f"the converted copy holds {found}, the database {expected}")
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())


def _save_previous(src: int, backups_dir: str, encrypt: bool) -> str:
    """Copy the database, read through the descriptor `src` (never opened and closed here: see
    `_convert`), to a new file in `backups_dir`."""
    os.makedirs(backups_dir, mode=0o700, exist_ok=True)
    what = "encrypt" if encrypt else "decrypt"
    path = os.path.join(backups_dir, time.strftime(f"nmem-before-{what}-%Y%m%d-%H%M%S.db"))
    while os.path.exists(path):
        path = path.removesuffix(".db") + "-1.db"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as dst:
        offset = 0
        while chunk := os.pread(src, 1 << 20, offset):
            dst.write(chunk)
            offset += len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return path


def _back_to_wal(lib: Any, db_path: str, key: DatabaseKey | None) -> None:
    """After a failed conversion: the database as it was, in WAL mode again."""
    try:
        conn = lib.connect(db_path, isolation_level=None)
        try:
            if key is not None:
                driver.apply_key(conn, key.value)
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
    except driver.ERRORS:
        pass  # it works in rollback-journal mode too; the next conversion sets WAL again


def _reopen_counts(db_path: str, key: DatabaseKey) -> dict[str, int]:
    store = SqliteStore(db_path, key=key)
    try:
        conn = store._reader()
        return _counts(conn)
    finally:
        store.close()

