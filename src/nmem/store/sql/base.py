"""`SqlBase`: what the shared statements need of an engine's connection."""

from __future__ import annotations

from nmem.errors import NmemError, TransactionLost

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractContextManager
    from types import TracebackType
    from typing import Any, ClassVar

    from nmem.models import Session
    from nmem.store.sql.dialect import Dialect

OBS_COLUMNS = ("id, session_id, project, prompt_id, timestamp, obs_type, source_event, "
               "tool_name, file_path, content, metadata, is_pinned")
OBS_COLUMNS_O = ", ".join("o." + c.strip() for c in OBS_COLUMNS.split(","))
PROMPT_COLUMNS = "p.id, p.session_id, s.project, p.timestamp, p.source, p.content"


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

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _in_write(self) -> bool:
        """Whether this thread holds an open write transaction."""
        raise NotImplementedError

    def savepoint(self) -> Savepoint:
        """`with store.savepoint():` inside a write transaction: a block whose writes an error
        undoes alone (the transaction goes on without them, the error propagates); outside
        one it is a transaction of its own."""
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


class Savepoint:
    """SAVEPOINT / RELEASE / ROLLBACK TO, the same SQL on both engines. Nested ones may share
    the name: each statement names the innermost savepoint of that name."""

    __slots__ = ("store", "alone")
    NAME = "nmem_part"

    def __init__(self, store: SqlBase) -> None:
        self.store = store
        self.alone: AbstractContextManager[None] | None = None

    def __enter__(self) -> None:
        if not self.store._in_write():
            self.alone = self.store.transaction()
            self.alone.__enter__()
            return
        self.store._exec(f"SAVEPOINT {self.NAME}")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.alone is not None:
            self.alone.__exit__(kind, exc, tb)
            return
        if kind is None:
            self.store._exec(f"RELEASE SAVEPOINT {self.NAME}")
            return
        try:
            self.store._exec(f"ROLLBACK TO SAVEPOINT {self.NAME}")
            self.store._exec(f"RELEASE SAVEPOINT {self.NAME}")
        except NmemError as lost:
            # The engine already ended the whole transaction (a lost connection, a full disk):
            # the caller must not go on writing as if it were open.
            raise TransactionLost(f"the transaction ended with a failed part: {lost.message}") from exc
        finally:
            self.store._undone_part()

