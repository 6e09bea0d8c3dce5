"""`SqlBase`: what the shared statements need of an engine's connection."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from contextlib import AbstractContextManager
    from typing import Any, ClassVar

    from nmem.models import Session
    from nmem.store.records import Origins
    from nmem.store.sql.dialect import Dialect

OBS_COLUMNS = ("id, session_id, project, prompt_id, timestamp, obs_type, source_event, "
               "tool_name, file_path, content, metadata, is_pinned")
OBS_COLUMNS_O = ", ".join("o." + c.strip() for c in OBS_COLUMNS.split(","))
PROMPT_COLUMNS = "p.id, p.session_id, s.project, p.timestamp, p.source, p.content"
# A trail row's session's coding agent and project root, read beside it (`Found.origins`): the
# columns, from `os` joined on the row's session (a prompt's read names its own session `s`)
ORIGIN_COLUMNS = "os.agent AS nmem_agent, os.root AS nmem_root"
PROMPT_ORIGIN_COLUMNS = "s.agent AS nmem_agent, s.root AS nmem_root"
# What `status` counts each trail table's rows by.
COUNTED = {"observations": "obs_type", "prompts": "source"}


def origin_join(alias: str) -> str:
    """The join that ORIGIN_COLUMNS read, for a row of observations named `alias`."""
    return f" LEFT JOIN sessions os ON os.id = {alias}.session_id"


def origins_of(rows: Iterable[Any]) -> Origins:
    """Each row's session (its `session_id`) → the agent and root read beside it (ORIGIN_COLUMNS)."""
    return {str(r["session_id"]): (r["nmem_agent"], r["nmem_root"]) for r in rows}


class SqlBase:
    """Each engine's `Connection` implements these; every concern mixin in `nmem.store.sql`
    derives from this class and nothing else."""

    dialect: ClassVar[Dialect]
    readonly: bool
    url: str

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a write (its own transaction outside one); the rows it changed."""
        raise NotImplementedError

    def _exec_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One write statement for each row of parameters, in the caller's transaction."""
        raise NotImplementedError

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a read, by column name or position (inside a write transaction: its view)."""
        raise NotImplementedError

    def _insert_id(self, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT of one row (written without RETURNING); the new row's id."""
        raise NotImplementedError

    def fan_out_reads(self) -> bool:
        """Whether this thread's reads may run on other threads at once (nmem.service.fanout):
        only where each is served by a connection of its own and this thread holds no
        transaction or snapshot they would have to see. SQLite's reads stay on their thread."""
        return False

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _in_write(self) -> bool:
        """Whether this thread holds an open write transaction."""
        raise NotImplementedError

    def settled_heads(self) -> tuple[int, int, int] | None:
        """How far the change feed may read (observation id, prompt id, change-log sequence) with
        no lower id still to commit; None: everything committed is settled, as when ids commit in
        the order they are drawn (SQLite's one writer at a time)."""
        return None

    def savepoint(self) -> AbstractContextManager[None]:
        """`with store.savepoint():` inside a write transaction: a block whose writes an error
        undoes alone (the transaction goes on without them, the error propagates); outside
        one it is a transaction of its own."""
        from nmem.store.sql.savepoint import Savepoint  # a server's; a hook never needs it

        return Savepoint(self)

    def _undone_part(self) -> None:
        """After a savepoint's writes were undone: forget what the engine cached of them."""

    def _forget_bytes(self, table: str) -> None:
        """Inside the transaction that deleted or blanked rows of `table`: drop what the
        engine's full-text index still holds of their text (FTS5 keeps it until rewritten)."""

    def _scrub(self, *tables: str) -> None:
        """After that transaction: give the freed space back, so forgotten text is not left in
        the files (SQLite's incremental vacuum, PostgreSQL's VACUUM of `tables`)."""

    def schema_version(self) -> int:
        raise NotImplementedError

    def _size_bytes(self) -> int:
        """What the store takes on disk, for `status`."""
        raise NotImplementedError

    def _counts(self, table: str) -> dict[str, int]:
        """The rows of `table` (a key of `COUNTED`) per value of its counted column, most first:
        counted here; an engine that keeps these counts as rows change reads them instead."""
        column = COUNTED[table]
        return {str(r[0]): int(r[1]) for r in
                self._query(f"SELECT {column}, COUNT(*) FROM {table} GROUP BY 1 ORDER BY 2 DESC, 1")}

    def _known_prompts(self) -> dict[str, int | None] | None:
        """Each session's latest user prompt, where the engine can keep them: SQLite while this
        store holds the one write lock (no other writer can add a prompt then); else None."""
        return None

    def _text_match(self, table: str, alias: str, match: str) -> tuple[str, Any] | None:
        """A condition that row `alias` of `table` holds the full-text `match` (nmem's FTS5
        syntax), with its one parameter; None when the match can hold no row."""
        raise NotImplementedError

    def get_session(self, session_id: str) -> Session | None:
        raise NotImplementedError

    def _log_memory_op(self, uid: str, timestamp: int) -> None:
        raise NotImplementedError

    def _forget_sync_lines(self, uid: str) -> None:
        raise NotImplementedError

