"""`nmem backup` and `nmem restore`: whole-database copies through SQLite's online backup API.

Backup: a read transaction is opened on the database first, so the copy is the database as
it was at that moment, whatever hooks commit meanwhile (WAL: readers never block writers,
and a source pinned by its own read transaction never restarts the copy). The pages go in
steps to a temporary file beside the target, which is checked (`integrity_check`, and the
row counts of the snapshot) before it is renamed over the target: a backup file is whole
or absent, never half-written.

Restore: the file is checked first (SQLite, nmem's tables, a schema this nmem can read,
`integrity_check`). Then the backup API copies it *into* the live database, which holds
SQLite's write lock from the first page to the commit: hooks cannot write meanwhile (they
wait, then spool their events to disk and record them on a later run) and readers see the
old database until the commit, then the restored one, never a mix. With that lock held, the
current database is first copied to `<data dir>/backups/`, so nothing committed before the
restore is lost. The restored database is then brought to this nmem's schema.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from nmem.errors import EncryptionError, InvalidArgument, StorageError
from nmem.store.keys import DatabaseKey
from nmem.store.sqlite import driver
from nmem.store.sqlite.driver import result_code
from nmem.store.sqlite.files import sync_dir
from nmem.store.sqlite.schema import LATEST_VERSION

TABLES = ("sessions", "prompts", "observations", "memories")
PAGES_PER_STEP = 1024
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_OK = 0
Progress = Callable[[int, int], None]  # pages copied, pages in all


@dataclass
class BackupReport:
    path: str
    size_bytes: int
    schema_version: int
    counts: dict[str, int]
    integrity: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RestoreReport:
    database: str
    restored_from: str
    previous_saved_to: str
    schema_version: int
    counts: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _uri(path: str, mode: str) -> str:
    escaped = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{escaped}?mode={mode}"


def is_encrypted(path: str) -> bool:
    """A file that exists, is not empty and lacks SQLite's header: encrypted (or not SQLite at all)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    return bool(header) and header != SQLITE_HEADER


def _connect(path: str, mode: str = "rw", key: DatabaseKey | None = None,
             encrypted: bool | None = None) -> sqlite3.Connection:
    """A connection to `path`; an encrypted file (or a new one, `encrypted=True`) through
    SQLCipher with `key`."""
    if encrypted is None:
        encrypted = is_encrypted(path)
    try:
        if not encrypted:
            return sqlite3.connect(_uri(path, mode), uri=True, isolation_level=None, timeout=30)
        if key is None:
            raise EncryptionError(f"{path} is encrypted (or not an SQLite file): configure its key "
                                  "(NMEM_KEY, encryption.key_file or encryption.keyring)")
        conn = driver.cipher().connect(_uri(path, mode), uri=True, isolation_level=None, timeout=30)
        driver.apply_key(conn, key.value)
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()  # a wrong key fails here
        return conn  # type: ignore[no-any-return]
    except driver.ERRORS as exc:
        if encrypted and key is not None and result_code(exc) == 26:  # SQLITE_NOTADB
            raise EncryptionError(f"cannot open {path} with the key from {key.source}: the key is wrong, "
                                  "or the file is not an nmem database") from exc
        raise StorageError(f"cannot open {path}: {exc}") from exc


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows per table (memories with their tombstones): what a copy must hold."""
    return {table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table in TABLES}


def _integrity(conn: sqlite3.Connection) -> str:
    return "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()) or "ok"



def backup_target(target: str, now: float) -> str:
    """The file a backup goes to: the path given, or a dated name inside a directory.
    A path ending in a separator names a directory: made (private, with its parents) if missing."""
    if target.endswith(("/", os.sep)) and not os.path.isdir(target):
        if os.path.exists(target.rstrip("/" + os.sep)):
            raise InvalidArgument(f"{target} names a directory, but {target.rstrip('/' + os.sep)} is a file")
        try:
            os.makedirs(target, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise InvalidArgument(f"cannot create the backup directory {target}: {exc.strerror}") from exc
    if os.path.isdir(target):
        return os.path.join(target, time.strftime("nmem-%Y%m%d-%H%M%S.db", time.localtime(now)))
    return target


def backup(db_path: str, target: str, *, force: bool = False, progress: Progress | None = None,
           pages_per_step: int = PAGES_PER_STEP, key: DatabaseKey | None = None,
           encrypted: bool | None = None) -> BackupReport:
    """Copy the database at `db_path` to `target` (a file, or a directory for a dated name).
    An encrypted database gives an encrypted backup, with the same key. A caller that holds a
    lock on the database says whether it is `encrypted`: finding out opens and closes the file,
    and closing any descriptor of a file drops every POSIX lock the process holds on it,
    SQLite's included (`restore` saves the current database under its write lock)."""
    if not os.path.isfile(db_path):
        raise StorageError(f"no database at {db_path}")
    target = backup_target(os.path.expanduser(target), time.time())
    if os.path.exists(target):
        if os.path.samefile(target, db_path):
            raise InvalidArgument(f"{target} is the database itself")
        if not force:
            raise InvalidArgument(f"{target} exists: pass --force to replace it")
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise InvalidArgument(f"no directory {directory} to write the backup in")
    tmp = os.path.join(directory, f".{os.path.basename(target)}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    if encrypted is None:
        encrypted = is_encrypted(db_path)
    source = _connect(db_path, key=key, encrypted=encrypted)
    try:
        source.execute("BEGIN")  # the snapshot: rows committed from now on are not in this backup
        expected = counts(source)
        version = int(source.execute("PRAGMA user_version").fetchone()[0])
        copy = _connect(tmp, "rwc", key=key, encrypted=encrypted)
        try:
            os.chmod(tmp, 0o600)  # prompts and memories are private
            source.backup(copy, pages=pages_per_step,
                          progress=(lambda _s, left, total: progress(total - left, total)) if progress else None)
            source.execute("COMMIT")
            copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            integrity, found = _integrity(copy), counts(copy)
        finally:
            copy.close()
        if integrity != "ok":
            raise StorageError(f"the backup failed its integrity check: {integrity}")
        if found != expected:
            raise StorageError(f"the backup holds {found}, the database held {expected}")
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        sync_dir(directory)
    except driver.ERRORS as exc:
        raise StorageError(f"backup failed: {exc}") from exc
    finally:
        source.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
    return BackupReport(os.path.abspath(target), os.path.getsize(target), version, expected, integrity)


def inspect(path: str, key: DatabaseKey | None = None) -> tuple[int, dict[str, int], int]:
    """Schema version, row counts and page size of an nmem database file, or a clear refusal."""
    encrypted = is_encrypted(path)
    if encrypted and key is None:
        raise InvalidArgument(f"{path} is not an nmem database (not an SQLite file), or an encrypted one: "
                              "configure its key to restore it")
    if not encrypted and os.path.getsize(path) == 0:
        raise InvalidArgument(f"{path} is not an nmem database (an empty file)")
    conn = _connect(path, "ro", key=key, encrypted=encrypted)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted(set(TABLES) - tables)
        if missing:
            raise InvalidArgument(f"{path} is not an nmem database (it has no {', '.join(missing)} table)")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > LATEST_VERSION:
            raise InvalidArgument(f"{path} has schema v{version}, newer than this nmem (v{LATEST_VERSION}): "
                                  "upgrade nmem to restore it")
        integrity = _integrity(conn)
        if integrity != "ok":
            raise InvalidArgument(f"{path} is damaged: {integrity}")
        return version, counts(conn), int(conn.execute("PRAGMA page_size").fetchone()[0])
    except driver.DATABASE_ERRORS as exc:
        raise InvalidArgument(f"{path} is not an nmem database: {exc}") from None
    finally:
        conn.close()


def restore(db_path: str, source_path: str, safety_dir: str, *, progress: Progress | None = None,
            key: DatabaseKey | None = None) -> RestoreReport:
    """Replace the database at `db_path` with the backup at `source_path`, keeping the
    current one in `safety_dir` first. Both are plain, or both encrypted with `key`."""
    from nmem.store.sqlite import SqliteStore

    if os.path.exists(db_path) and os.path.samefile(db_path, source_path):
        raise InvalidArgument(f"{source_path} is the database itself")
    _, expected, page_size = inspect(source_path, key)
    SqliteStore(db_path, key=key).close()  # creates an empty database if there is none yet
    encrypted = is_encrypted(db_path)
    if encrypted != is_encrypted(source_path):
        state = ("encrypted", "plain") if encrypted else ("plain", "encrypted")
        raise InvalidArgument(f"the database is {state[0]} and {source_path} is {state[1]}: SQLite copies pages "
                              f"as they are, so `nmem {'decrypt' if encrypted else 'encrypt'}` the database "
                              "first, restore, then convert it back")
    os.makedirs(safety_dir, mode=0o700, exist_ok=True)
    safety_path = os.path.join(safety_dir, time.strftime("nmem-before-restore-%Y%m%d-%H%M%S.db"))
    while os.path.exists(safety_path):
        safety_path = safety_path.removesuffix(".db") + "-1.db"
    live = _connect(db_path, key=key, encrypted=encrypted)
    source = _connect(source_path, "ro", key=key, encrypted=encrypted)
    saved: list[BackupReport] = []
    try:
        live_page_size = int(live.execute("PRAGMA page_size").fetchone()[0])
        if live_page_size != page_size:
            raise StorageError(f"{source_path} has {page_size}-byte pages, the database {live_page_size}: "
                               "SQLite cannot restore across page sizes in WAL mode")
        source.execute("BEGIN")

        def step(status: int, left: int, total: int) -> None:
            if status != SQLITE_OK:
                return  # waiting for the write lock: nothing copied, nothing locked yet
            if not saved:
                # The first step took the live database's write lock, which the copy holds
                # until it commits; nothing can be written between this copy and the restore.
                if left == 0:
                    raise StorageError("the restore finished before the current database was saved")
                # Told whether it is encrypted: reading that off the file would close a descriptor
                # of it and drop this process's locks on it, the copy's included (backup's note).
                saved.append(backup(db_path, safety_path, key=key, encrypted=encrypted))
            if progress:
                progress(total - left, total)

        source.backup(live, pages=1, progress=step)
        source.execute("COMMIT")
        found = counts(live)
    except driver.ERRORS as exc:
        raise StorageError(f"restore failed, the database is unchanged: {exc}") from exc
    finally:
        source.close()
        live.close()
    # Hooks that waited for the lock may have written since the commit, so a table can only have grown.
    short = {table: n for table, n in found.items() if n < expected[table]}
    if short:
        raise StorageError(f"the restored database holds fewer rows than the backup ({short}, not {expected}); "
                           f"the previous database is in {safety_path}")
    store = SqliteStore(db_path, key=key)  # brings an older backup to this nmem's schema
    try:
        version = store.schema_version()
    finally:
        store.close()
    return RestoreReport(os.path.abspath(db_path), os.path.abspath(source_path), saved[0].path, version, expected)
