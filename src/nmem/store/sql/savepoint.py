"""`Savepoint`: a part of a write transaction that an error undoes alone (group commit's unit)."""

from __future__ import annotations

from nmem.errors import NmemError, TransactionLost

TYPE_CHECKING = False
if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from types import TracebackType

    from nmem.store.sql.base import SqlBase


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

