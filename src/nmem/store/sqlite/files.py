"""What a database file is before nmem touches it: nmem's own, a new one, or not nmem's at all;
and whether nmem may write to it.

nmem marks its databases with `PRAGMA application_id` = 0x6E6D656D, the ASCII bytes of "nmem"
(SQLite stores it big-endian at offset 68 of the header, so a hex dump of the file shows
`nmem` there). A marked file is nmem's. An unmarked SQLite file is nmem's only when its tables
are exactly those nmem's migrations create at its `user_version` (a database made before the
mark existed); then the writer marks it. Anything else (another application's mark, tables nmem
did not create, a file that is not SQLite) is refused before any write: the file is looked into
through the 100-byte header and, when unmarked, a read-only connection that creates no -wal or
-shm file (`immutable=1`) unless another program is using the database's WAL.

On the hook path: `os` and the `_sqlite3` extension only; a marked file costs one 100-byte read.
"""

from __future__ import annotations

import _sqlite3 as sqlite3
import os

from nmem.errors import ForeignDatabase, StoreCorrupt, StoreUnavailable
from nmem.store.sqlite.driver import storage_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

APPLICATION_ID = 0x6E6D656D  # b"nmem"
SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
NEW, NMEM, UNMARKED = "new", "nmem", "unmarked"


def file_uri(path: str, query: str) -> str:
    """An SQLite URI filename; only %, ? and # need escaping (urllib.parse costs the hook path ~2 ms)."""
    escaped = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{escaped}?{query}"


def has_wal_content(path: str) -> bool:
    try:
        return os.path.getsize(path + "-wal") > 0
    except OSError:
        return False


def read_only_query(path: str) -> str:
    """How to read a database nmem must not write: `immutable=1` while no WAL holds changes
    (SQLite then creates no -wal or -shm file, which a read-only directory forbids anyway),
    else `mode=ro` (a WAL is read through its -shm index)."""
    return "mode=ro" if has_wal_content(path) else "immutable=1"


def _not_nmem(path: str, why: str) -> ForeignDatabase:
    return ForeignDatabase(f"{path} is not an nmem database: {why}; nmem refuses it and leaves it untouched "
                           "(check NMEM_DB / memory.path and store.url)")


# While a store of this process has a database open, its header is read through one descriptor
# kept open: POSIX drops every lock a process holds on a file when any descriptor of it closes,
# so reading through a fresh descriptor and closing it would drop the SQLite locks of that
# store; a hook closing last would then delete the WAL under it, and it would read a stale
# snapshot from then on (the live change feed went blind that way). With no store open, the
# descriptor is closed at once, as before.
_OPEN_STORES: dict[str, int] = {}
_HEADER_FDS: dict[str, int] = {}


def store_opened(path: str) -> None:
    key = os.path.realpath(path)
    _OPEN_STORES[key] = _OPEN_STORES.get(key, 0) + 1


def store_closed(path: str) -> None:
    key = os.path.realpath(path)
    left = _OPEN_STORES.get(key, 1) - 1
    if left > 0:
        _OPEN_STORES[key] = left
        return
    _OPEN_STORES.pop(key, None)
    fd = _HEADER_FDS.pop(key, None)
    if fd is not None:
        os.close(fd)


def read_header(path: str) -> bytes:
    """The file's first 100 bytes; empty for a missing or empty file."""
    key = os.path.realpath(path)
    keep = key in _OPEN_STORES
    try:
        st = os.stat(path)
        fd = _HEADER_FDS.get(key)
        if fd is not None and (not keep or (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (st.st_dev, st.st_ino)):
            del _HEADER_FDS[key]
            os.close(fd)  # the file was replaced (a restore): this drops locks on the old file only
            fd = None
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            if keep:
                _HEADER_FDS[key] = fd
    except (FileNotFoundError, NotADirectoryError):
        return b""  # nothing there yet: creating it says what is wrong
    except OSError as exc:
        raise StoreUnavailable(f"cannot open database {path}: {exc.strerror}") from exc
    try:
        return os.pread(fd, HEADER_BYTES, 0)
    except OSError as exc:
        raise StoreUnavailable(f"cannot read database {path}: {exc.strerror}") from exc
    finally:
        if not keep:
            os.close(fd)


def classify_header(path: str, head: bytes) -> str:
    """NEW (missing or empty file), NMEM (marked), or UNMARKED (SQLite, to be looked into)."""
    if not head:
        return NEW
    if not head.startswith(SQLITE_MAGIC[:len(head)]):
        raise _not_nmem(path, "file is not a database (it does not start with the SQLite header)")
    if len(head) < HEADER_BYTES:
        raise StoreCorrupt(f"database is corrupt: {path} is truncated ({len(head)} bytes)")
    app = int.from_bytes(head[68:72], "big")
    if app == APPLICATION_ID:
        return NMEM
    if app:
        raise _not_nmem(path, f"it belongs to another application (application_id {app:#010x})")
    return UNMARKED


def inspect_unmarked(path: str, nmem_tables: Callable[[int], frozenset[str] | None]) -> str:
    """NEW or NMEM for an unmarked SQLite file nmem may use; raises ForeignDatabase otherwise.

    `nmem_tables(v)` is the set of tables nmem's migrations create up to step v (None if v is
    not a step this nmem knows).
    """
    try:
        conn = sqlite3.connect(file_uri(path, read_only_query(path)), uri=True, isolation_level=None)
        try:
            found = look_inside(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise storage_error(exc, path, f"cannot open database {path}") from exc
    return judge(path, *found, nmem_tables)


def look_inside(conn: Any) -> tuple[int, int, frozenset[str]]:
    """application_id, user_version and table names, read on an open connection."""
    app = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = frozenset(str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"))
    return app, version, tables


def judge(path: str, app: int, version: int, tables: frozenset[str],
          nmem_tables: Callable[[int], frozenset[str] | None]) -> str:
    """NEW or NMEM from what `look_inside` read; ForeignDatabase for another application's file."""
    if app == APPLICATION_ID:
        return NMEM  # marked (possibly in a transaction still in the WAL)
    if app:
        raise _not_nmem(path, f"it belongs to another application (application_id {app:#010x})")
    if not tables:
        if version:
            raise _not_nmem(path, f"it has no tables but user_version {version}")
        return NEW
    expected = nmem_tables(version)
    if expected is None or tables != expected:
        foreign = sorted(tables - expected) if expected is not None else sorted(tables)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise _not_nmem(path, f"it holds tables nmem did not create ({shown})")
        missing = ", ".join(sorted((expected or frozenset()) - tables)[:5])
        raise _not_nmem(path, f"its tables do not match nmem's schema v{version} (missing {missing})")
    return NMEM


def looks_encrypted(path: str, head: bytes) -> bool:
    """A file without the SQLite header that could be an SQLCipher database: whole pages of
    bytes that look random (SQLCipher starts the file with its 16-byte salt)."""
    if not head or head.startswith(SQLITE_MAGIC[:len(head)]) or len(head) < HEADER_BYTES:
        return False
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return size % 512 == 0 and len(set(head)) > 40  # text or zeros repeat; a salt and ciphertext do not


def _read_only_fs(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_reason(path: str) -> str | None:
    """Why nmem must not write an existing database file, or None when it may.

    The owner's write bit is honoured even for root (who could write a 0444 file anyway): a
    file made read-only on purpose stays so.
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not st.st_mode & 0o200:
        return f"the file is read-only (mode {st.st_mode & 0o7777:04o})"
    if _read_only_fs(path):
        return "it is on a read-only file system"
    if not os.access(path, os.W_OK):
        return "this user may not write the file"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(directory, os.W_OK | os.X_OK) and not (
            os.path.exists(path + "-wal") and os.path.exists(path + "-shm")):
        return f"its directory {directory} is not writable (SQLite keeps its -wal and -shm files there)"
    return None


def make_private(path: str) -> None:
    """Drop group/other permissions of a database nmem may write (prompts are private); a file
    that is read-only, or someone else's, keeps its mode."""
    st = os.stat(path)
    mode = st.st_mode & 0o7777
    if mode & 0o077 and mode & 0o200 and st.st_uid == os.getuid():
        os.chmod(path, mode & 0o700)


def sync_dir(directory: str) -> None:
    """fsync a directory, so a file just renamed or created in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
