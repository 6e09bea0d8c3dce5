"""Copy a whole store into another engine (`nmem migrate --to URL`), verified table by table.

Every row of every table both engines hold is copied with its ids (so `o42` stays `o42`), in an
order that satisfies the foreign keys; each engine rebuilds its own full-text index from the
rows (FTS5 triggers, generated tsvector columns). Then both sides are read again and each table's
row count and checksum (SHA-256 over the sorted digests of its rows, so the order each engine
returns rows in does not matter) must agree, or the migration fails. A target that already
holds a session, prompt, observation or memory is refused unless `force`, which empties it
first: running the same migration twice leaves the same rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from nmem import team
from nmem.errors import InvalidArgument, StorageError
from nmem.models import Record
from nmem.store import open_store
from nmem.store.protocol import Store

# The tables a migration copies, in an order that satisfies the foreign keys, with the columns
# both engines hold (generated and engine-only columns left out) and the key that orders a checksum.
TABLES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("sessions", ("id", "project", "started_at", "ended_at", "signature", "summary", "root", "agent"), "id"),
    ("prompts", ("id", "session_id", "timestamp", "source", "content"), "id"),
    ("observations", ("id", "session_id", "project", "prompt_id", "timestamp", "obs_type", "source_event",
                      "tool_name", "file_path", "content", "metadata", "is_pinned", "writer"), "id"),
    ("memories", ("id", "uid", "domain", "namespace", "summary", "content", "tags", "source", "relates_to",
                  "tier", "is_pinned", "created_at", "updated_at", "accessed_at", "access_count", "deleted_at",
                  "sync_version", "writer"), "id"),
    ("vectors", ("kind", "row_id", "model", "dim", "vec"), "kind, row_id, model"),
    ("import_marks", ("session_id", "source", "byte_offset", "state", "last_event_at", "updated_at"),
     "session_id, source"),
    ("sync_state", ("id", "device", "wall", "counter"), "id"),
    ("sync_ops", ("seq", "version", "uid", "domain", "line", "created_at", "pushed"), "seq"),
    ("sync_files", ("path", "blob", "byte_offset"), "path"),
    ("spooled_events", ("id", "recorded_at"), "id"),
    ("lifecycle_runs", ("id", "kind", "started_at", "finished_at", "undone_at", "report"), "id"),
    ("lifecycle_changes", ("id", "run_id", "uid", "action", "before", "after"), "id"),
    ("lifecycle_state", ("key", "value"), "key"),
    ("team_users", ("id", "name", "is_admin", "created_at"), "id"),
    ("team_tokens", ("id", "user_id", "digest", "created_at", "revoked_at"), "id"),
    ("audit", ("id", "at", "username", "action", "urn"), "id"),
)

BATCH = 2000
# Tables with an identity column PostgreSQL must continue after the copied ids.
IDENTITY = {"prompts": "id", "observations": "id", "memories": "id", "sync_ops": "seq", "lifecycle_runs": "id",
            "lifecycle_changes": "id", "team_users": "id", "team_tokens": "id", "audit": "id"}


class TableCheck(Record):
    table: str
    rows: int
    checksum: str

    def to_dict(self) -> dict[str, Any]:
        return self.fields()


def _is_sqlite(store: Store) -> bool:
    from nmem.store.sqlite import SqliteStore

    return isinstance(store, SqliteStore)


def read_rows(store: Store, table: str, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    sql = f"SELECT {', '.join(columns)} FROM {table}"
    if _is_sqlite(store):
        cur = store._reader().execute(sql)  # type: ignore[attr-defined]
        while batch := cur.fetchmany(BATCH):
            yield from (tuple(r) for r in batch)
    elif (conn := store._reading()) is not None:  # type: ignore[attr-defined]
        # inside a snapshot or transaction: a server-side cursor streams the table in batches
        with conn.cursor(name=f"nmem_migrate_{table}") as cur:
            cur.itersize = BATCH
            cur.execute(sql)
            yield from (tuple(r) for r in cur)
    else:
        yield from (tuple(r) for r in store._query(sql))  # type: ignore[attr-defined]


def _copy_table(source: Store, target: Store, table: str, columns: Sequence[str]) -> None:
    rows = read_rows(source, table, columns)
    if not _is_sqlite(target):
        # COPY streams the rows in one statement: ~10x an INSERT per row
        with target._held.conn.cursor() as cur, cur.copy(  # type: ignore[attr-defined]
                f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        # The foreign keys of the tables copied next are checked row by row at the end of their COPY,
        # by a plan made then. Without statistics for this table (its rows are not committed, so
        # autovacuum never saw them) the planner may look a key up through any index that holds
        # it, a scan of (started_at, id) for a session: 1M observations then took over an hour.
        _exec(target, f"ANALYZE {table}")
        return
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    writer = target._writer()  # type: ignore[attr-defined]
    while batch := list(islice(rows, BATCH)):
        writer.executemany(sql, batch)


def _exec(store: Store, sql: str) -> None:
    store._exec(sql)  # type: ignore[attr-defined]


def _normal(value: Any) -> bytes:
    if value is None:
        return b"\x00N"
    if isinstance(value, bytes | bytearray | memoryview):
        return b"\x00B" + bytes(value)
    if isinstance(value, bool):
        value = int(value)
    return b"\x00V" + str(value).encode()


def table_check(store: Store, table: str, columns: Sequence[str]) -> TableCheck:
    digests = sorted(hashlib.sha256(b"".join(_normal(v) for v in row)).digest()
                     for row in read_rows(store, table, columns))
    total = hashlib.sha256()
    for digest in digests:
        total.update(digest)
    return TableCheck(table, len(digests), total.hexdigest())


def store_checks(store: Store) -> list[TableCheck]:
    with store.read_snapshot():
        return [table_check(store, table, columns) for table, columns, _ in TABLES]


def holds_data(store: Store) -> bool:
    status = store.status()
    return bool(status.sessions or status.prompts or status.observations
                or next(iter(read_rows(store, "memories", ("id",))), None))


def migrate(source_url: str, target_url: str, *, force: bool = False) -> list[TableCheck]:
    """Copy every row of the store at `source_url` into the one at `target_url`; returns the
    verified counts and checksums. Raises InvalidArgument for a non-empty target without
    `force`, StorageError when the copy does not match."""
    if source_url == target_url:
        raise InvalidArgument("the source and target of a migration are the same store")
    source = open_store(source_url, readonly=True)
    try:
        target = open_store(target_url)
        try:
            if team.active(source) and not hasattr(target, "team_active"):
                # Users, tokens, the audit trail and who wrote what have no tables in that engine:
                # a copy would drop them silently.
                raise InvalidArgument(f"{source_url} has team users, and the engine of {target.url} keeps no "
                                      "users: the migration would lose them, so nothing was copied")
            if holds_data(target) and not force:
                raise InvalidArgument(f"{target.url} already holds data: migrate into an empty store, "
                                      "or pass --force to replace everything in it")
            with source.read_snapshot(), target.transaction():
                for table, _, _ in reversed(TABLES):
                    _exec(target, f"DELETE FROM {table}")
                for table, columns, _ in TABLES:
                    _copy_table(source, target, table, columns)
                if not _is_sqlite(target):
                    for table, column in IDENTITY.items():
                        _exec(target, f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                                      f"COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)")
            expected, found = store_checks(source), store_checks(target)
        finally:
            target.close()
    finally:
        source.close()
    wrong = [f"{a.table} ({a.rows} rows {a.checksum[:12]} -> {b.rows} rows {b.checksum[:12]})"
             for a, b in zip(expected, found, strict=True) if (a.rows, a.checksum) != (b.rows, b.checksum)]
    if wrong:
        raise StorageError("the copy does not match its source: " + "; ".join(wrong))
    return found
