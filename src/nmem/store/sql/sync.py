"""Sync bookkeeping (nmem.sync): the device clock, the outbox, applied remote files, and the
outbox line each memory write logs in its own transaction (nmem.store.oplog builds it)."""

from __future__ import annotations

from nmem import jsonlite as json
from nmem.store.records import OutboxOp
from nmem.store.sql.base import SqlBase
from nmem.store.sql.dialect import marks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from nmem.store import oplog
    from nmem.store.records import FileMark

SAVE_FILE = ("INSERT INTO sync_files (path, blob, byte_offset) VALUES (?, ?, ?) ON CONFLICT (path) "
             "DO UPDATE SET blob = excluded.blob, byte_offset = excluded.byte_offset")


class SyncRows(SqlBase):
    # -- sync (nmem.sync): the device's clock, its outbox, how far each remote file is applied ---

    def sync_device(self) -> str:
        return str(self._query("SELECT device FROM sync_state")[0]["device"])

    def sync_pending(self) -> bool:
        return bool(self._query("SELECT 1 FROM sync_ops WHERE pushed = 0 LIMIT 1"))

    def sync_outbox(self) -> list[OutboxOp]:
        rows = self._query("SELECT seq, version, uid, domain, line FROM sync_ops WHERE pushed = 0 ORDER BY seq")
        return [OutboxOp(r["seq"], r["version"], r["uid"], r["domain"], r["line"]) for r in rows]

    def sync_log_unlogged(self, timestamp: int) -> int:
        """Give every memory written before sync existed its operation; returns how many."""
        with self.transaction():
            uids = [r["uid"] for r in self._query("SELECT uid FROM memories WHERE sync_version IS NULL ORDER BY id")]
            for uid in uids:
                self._log_memory_op(uid, timestamp)
        return len(uids)

    def sync_files(self) -> dict[str, tuple[str, int]]:
        return {r["path"]: (r["blob"], int(r["byte_offset"]))
                for r in self._query("SELECT path, blob, byte_offset FROM sync_files")}

    def sync_apply(self, ops: Sequence[oplog.Op], files: Sequence[FileMark],
                   limit_ms: int | None = None) -> list[tuple[str, str | None]]:
        """Apply remote operations in the order given (by version) and record how far each file
        was read, in one transaction. Per operation: ("applied" | "same" | "stale", the version
        the memory had). An operation of this device marks its outbox row pushed."""
        from nmem.store import oplog  # sync and memory writes only: a hook recording a tool call never loads it

        outcomes: list[tuple[str, str | None]] = []
        forgotten = False
        with self.transaction():
            state = self._query(f"SELECT wall, counter FROM sync_state{self.dialect.lock_rows}")[0]
            wall, counter = int(state["wall"]), int(state["counter"])
            for op in ops:
                wall, counter = oplog.witness(wall, counter, op.clock, limit_ms)
                self._exec("UPDATE sync_ops SET pushed = 1 WHERE version = ? AND pushed = 0", (op.version,))
                rows = self._query("SELECT sync_version FROM memories WHERE uid = ?", (op.uid,))
                met = rows[0]["sync_version"] if rows else None
                if met is not None and op.version <= met:
                    outcomes.append(("same" if op.version == met else "stale", met))
                    continue
                self._apply_op(op, exists=bool(rows))
                if op.op == oplog.DELETE:
                    self._forget_sync_lines(op.uid)
                    forgotten = True
                outcomes.append(("applied", met))
            self._exec("UPDATE sync_state SET wall = ?, counter = ?", (wall, counter))
            for mark in files:
                self._exec(SAVE_FILE, (mark.path, mark.blob, mark.offset))
            if forgotten:
                self._forget_bytes("memories")
        if forgotten:
            self._scrub("memories", "sync_ops")
        return outcomes

    def _apply_op(self, op: oplog.Op, exists: bool) -> None:
        from nmem.store import oplog

        m = op.memory
        if op.op == oplog.DELETE:  # a tombstone: the text erased, as `tombstone_memory` leaves it
            if exists:
                self._exec("UPDATE memories SET domain = ?, namespace = ?, summary = '', content = '', tags = '[]', "
                           "relates_to = '[]', created_at = ?, updated_at = ?, deleted_at = ?, sync_version = ? "
                           "WHERE uid = ?", (m["domain"], m["namespace"], m["created_at"], m["deleted_at"],
                                             m["deleted_at"], op.version, op.uid))
            else:
                self._exec("INSERT INTO memories (uid, domain, namespace, summary, content, created_at, updated_at, "
                           "deleted_at, sync_version) VALUES (?, ?, ?, '', '', ?, ?, ?, ?)",
                           (op.uid, m["domain"], m["namespace"], m["created_at"], m["deleted_at"],
                            m["deleted_at"], op.version))
            return
        values = (m["domain"], m["namespace"], m["summary"], m["content"], json.dumps(m["tags"]), m["source"],
                  json.dumps(m["relates_to"]), int(m["is_pinned"]), m["created_at"], m["updated_at"],
                  op.version)
        if exists:
            self._exec("UPDATE memories SET domain = ?, namespace = ?, summary = ?, content = ?, tags = ?, "
                       "source = ?, relates_to = ?, is_pinned = ?, created_at = ?, updated_at = ?, "
                       "deleted_at = NULL, sync_version = ? WHERE uid = ?", (*values, op.uid))
        else:
            self._exec("INSERT INTO memories (domain, namespace, summary, content, tags, source, relates_to, "
                       "is_pinned, created_at, updated_at, sync_version, uid) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (*values, op.uid))

    def sync_pushed(self, seqs: Sequence[int], files: Sequence[FileMark]) -> None:
        """After a push the remote took: its operations are pushed, and this device's files are read."""
        with self.transaction():
            for start in range(0, len(seqs), 500):
                chunk = seqs[start:start + 500]
                self._exec(f"UPDATE sync_ops SET pushed = 1 WHERE seq IN ({marks(len(chunk))})", chunk)
            for mark in files:
                self._exec(SAVE_FILE, (mark.path, mark.blob, mark.offset))

    def sync_reset(self) -> None:
        """Read every remote file again and recheck every operation against the remote (`sync --force`)."""
        with self.transaction():
            self._exec("DELETE FROM sync_files")
            self._exec("UPDATE sync_ops SET pushed = 0 WHERE pushed = 1")

    # -- the outbox line of each memory write ---------------------------------------------------

    def _log_memory_op(self, uid: str, timestamp: int) -> None:
        """The sync outbox's line for the write just made to `uid`, in the same transaction."""
        from nmem.store import oplog

        row = self._query("SELECT * FROM memories WHERE uid = ?", (uid,))[0]
        state = self._query(f"SELECT device, wall, counter FROM sync_state{self.dialect.lock_rows}")[0]
        wall, counter, line, version = oplog.next_op(row, state, timestamp)
        self._exec("UPDATE sync_state SET wall = ?, counter = ?", (wall, counter))
        self._exec("INSERT INTO sync_ops (version, uid, domain, line, created_at) VALUES (?, ?, ?, ?, ?)",
                   (version, uid, row["domain"], line, timestamp))
        self._exec("UPDATE memories SET sync_version = ? WHERE uid = ?", (version, uid))

    def _forget_sync_lines(self, uid: str) -> None:
        """A tombstone supersedes every earlier operation on the memory: their lines, which hold
        its text, leave the outbox (pushed or not), so a forgotten text is not kept there."""
        self._exec("DELETE FROM sync_ops WHERE uid = ? AND version <> "
                   "(SELECT sync_version FROM memories WHERE uid = ?)", (uid, uid))
