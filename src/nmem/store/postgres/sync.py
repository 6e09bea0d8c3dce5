"""Sync bookkeeping on PostgreSQL (nmem.sync): the device clock, the outbox, applied remote files;
change tokens for subscriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nmem import jsonlite as json
from nmem.store import oplog
from nmem.store.postgres.connection import Connection
from nmem.store.records import FileMark, OutboxOp

if TYPE_CHECKING:
    from collections.abc import Sequence

_SAVE_FILE = ("INSERT INTO sync_files (path, blob, byte_offset) VALUES (?, ?, ?) ON CONFLICT (path) "
              "DO UPDATE SET blob = excluded.blob, byte_offset = excluded.byte_offset")


class SyncRows(Connection):
    def sync_device(self) -> str:
        return str(self._query("SELECT device FROM sync_state")[0]["device"])

    def sync_pending(self) -> bool:
        return bool(self._query("SELECT 1 FROM sync_ops WHERE pushed = 0 LIMIT 1"))

    def sync_outbox(self) -> list[OutboxOp]:
        rows = self._query("SELECT seq, version, uid, domain, line FROM sync_ops WHERE pushed = 0 ORDER BY seq")
        return [OutboxOp(r["seq"], r["version"], r["uid"], r["domain"], r["line"]) for r in rows]

    def sync_log_unlogged(self, timestamp: int) -> int:
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
        """Apply remote operations in order and record how far each file was read, in one
        transaction (see the SQLite engine for the outcomes)."""
        outcomes: list[tuple[str, str | None]] = []
        forgotten = False
        with self.transaction():
            state = self._query("SELECT wall, counter FROM sync_state FOR UPDATE")[0]
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
                self._exec(_SAVE_FILE, (mark.path, mark.blob, mark.offset))
        if forgotten:
            self._scrub("memories", "sync_ops")
        return outcomes

    def _apply_op(self, op: oplog.Op, exists: bool) -> None:
        m = op.memory
        if op.op == oplog.DELETE:
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
        with self.transaction():
            if seqs:
                self._exec("UPDATE sync_ops SET pushed = 1 WHERE seq = ANY(?)", (list(seqs),))
            for mark in files:
                self._exec(_SAVE_FILE, (mark.path, mark.blob, mark.offset))

    def sync_reset(self) -> None:
        with self.transaction():
            self._exec("DELETE FROM sync_files")
            self._exec("UPDATE sync_ops SET pushed = 0 WHERE pushed = 1")

    # -- change detection (MCP subscriptions) ------------------------------------------------

    def change_token(self) -> int:
        """Moves whenever any session writes a watched table (the nmem_changes sequence)."""
        row = self._query("SELECT last_value, is_called FROM nmem_changes")[0]
        return int(row[0]) if row[1] else 0
