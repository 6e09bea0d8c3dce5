"""What changed since a cursor, written by any process (hooks included): the one change feed,
read by the HTTP streams (`read_changes`) and the MCP server's resource subscriptions (`ChangeWatcher`).

A cursor is three positions, `<observation id>.<prompt id>.<change-log seq>`. Observation and
prompt ids grow in commit order (one writer at a time), so `id > position` finds what is new
without any bookkeeping on the hook path; memory and session writes go through the small
`change_log` table (schema step 13), one row per record, replaced on every write. A change's
cursor is the position just after it, so a client that saw it resumes there (`Last-Event-ID`).

Delivery is at least once and in order within each of the three sources; the merge across them
follows the records' timestamps. A purged newest observation frees its id for reuse, so a change
written after such a purge may be skipped by a cursor that had passed the purged one.
"""

from __future__ import annotations

from nmem.errors import InvalidArgument
from nmem.models import Memory, Observation, Prompt, Record, Session, memory_urn, session_urn
from nmem.team import access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nmem.store.protocol import Store

OBSERVATIONS, PROMPTS, LOG = 0, 1, 2
MAX_BATCH = 500
_LAST = 2**63


class Cursor:
    """Positions in the three sources; compared component by component."""

    __slots__ = ("positions",)

    def __init__(self, observation: int = 0, prompt: int = 0, log: int = 0) -> None:
        self.positions = (observation, prompt, log)

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """`12.4.7` as the feed writes it; `0` for the very beginning."""
        parts = text.strip().split(".")
        if parts == ["0"]:
            return cls()
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() and len(p) <= 19 for p in parts):
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise InvalidArgument(f"not a change cursor: {shown!r} (expected three numbers like 12.4.7, or 0)")
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    def advanced(self, source: int, position: int) -> Cursor:
        values = list(self.positions)
        values[source] = max(values[source], position)
        return Cursor(*values)

    def covers(self, source: int, position: int) -> bool:
        """Whether a change at `position` of `source` is at or before this cursor (seen)."""
        return position <= self.positions[source]

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.positions)

    def __repr__(self) -> str:
        return f"Cursor({self})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cursor) and other.positions == self.positions

    def __hash__(self) -> int:
        return hash(self.positions)


class Change(Record):
    """One record created, updated or forgotten: its URN, what happened and the record itself
    (index fields, so a viewer can show it without another request)."""

    kind: str            # observation | prompt | memory | session ("" for a log row whose record is gone)
    action: str          # created | updated | forgotten | started | ended
    urn: str
    record: dict[str, Any]
    timestamp: int
    source: int          # OBSERVATIONS, PROMPTS or LOG
    position: int        # in its source
    prompt_id: int | None = None   # an observation's prompt (the merge puts the prompt first)
    cursor: str = ""     # the feed's cursor just after this change, set as it is read

    @property
    def order(self) -> tuple[int, int, int]:
        """Merge order: by time, and within a second (timestamps are whole seconds) a session
        starts, then each prompt before the actions that point to it, then memories, then ends."""
        if self.kind == "prompt":
            return self.timestamp, int(self.record["id"]), 0
        if self.kind == "observation":
            return self.timestamp, int(self.prompt_id or 0), 1
        if (self.kind == "session" and self.action == "started") or not self.kind:
            return self.timestamp, -1, 0
        return self.timestamp, _LAST, int(self.kind == "session")

    def topics(self) -> set[str]:
        """The URNs a subscriber may have named to hear about this change: the record's own, its
        collection and domain, and for trail records their session."""
        topics = {self.urn}
        parts = self.urn[len("nmem://"):].split("/")
        for end in range(1, len(parts)):
            topics.add("nmem://" + "/".join(parts[:end]))
        if self.kind in ("observation", "prompt"):
            topics.add(session_urn(str(self.record["project"]), str(self.record["session_id"])))
        return topics

    def to_dict(self) -> dict[str, Any]:
        """The change as every feed sends it; `uri` and, for a memory, `memory` are subcog's names
        (§4.3, §4.4: a change is `{uri, memory}`) for `urn` and `record`."""
        data = {"cursor": self.cursor, "kind": self.kind, "action": self.action, "urn": self.urn, "uri": self.urn,
                "timestamp": self.timestamp, "record": self.record}
        if self.kind == "memory":
            data["memory"] = self.record
        return data


def head(store: Store) -> Cursor:
    """The cursor of "now": a reader starting here sees only what is written next."""
    return Cursor(*store.change_heads())


def read_changes(store: Store, since: Cursor, limit: int = 100) -> tuple[list[Change], Cursor]:
    """Up to `limit` changes after `since`, oldest first, and the cursor to read on from."""
    limit = max(1, min(limit, MAX_BATCH))
    settled = store.settled_heads()   # read first: a row committed after it is left for the next read
    sources: list[list[Change]] = [
        [_observation(o) for o in store.observations_since(since.positions[OBSERVATIONS], limit)],
        [_prompt(p) for p in store.prompts_since(since.positions[PROMPTS], limit)],
        _logged(store, since.positions[LOG], limit),
    ]
    if settled is not None:   # beyond it a lower id may still commit: stop before, read it next time
        sources = [[c for c in changes if c.position <= settled[s]] for s, changes in enumerate(sources)]
    merged: list[Change] = []
    cursor = since
    heads = [0, 0, 0]
    while len(merged) < limit:
        ready = [s for s in range(3) if heads[s] < len(sources[s])]
        if not ready:
            break
        source = min(ready, key=lambda s: sources[s][heads[s]].order)
        change = sources[source][heads[source]]
        heads[source] += 1
        cursor = cursor.advanced(source, change.position)
        change.cursor = str(cursor)
        if change.kind:  # a log row whose record is gone still moves the cursor
            merged.append(change)
    return merged, cursor


def _observation(obs: Observation) -> Change:
    return Change("observation", "created", obs.urn, obs.index_entry(), obs.timestamp, OBSERVATIONS, obs.id,
                  obs.prompt_id)


def _prompt(prompt: Prompt) -> Change:
    return Change("prompt", "created", prompt.urn, prompt.index_entry(), prompt.timestamp, PROMPTS, prompt.id)


def _logged(store: Store, seq: int, limit: int) -> list[Change]:
    changes: list[Change] = []
    for position, kind, key, action in store.logged_changes_since(seq, limit):
        if kind == "memory":
            memory = store.get_memory(key)
            changes.append(_memory(memory, action, position) if memory is not None else _gone(position))
        elif kind == "session":
            session = store.get_session(key)
            changes.append(_session(session, action, position) if session is not None else _gone(position))
        else:
            changes.append(_gone(position))
    return changes


def _memory(memory: Memory, action: str, position: int) -> Change:
    if memory.deleted_at is not None:
        record: dict[str, Any] = {"id": memory.id, "domain": memory.domain, "namespace": memory.namespace,
                                  "urn": memory.urn, "ref": memory.ref, "deleted_at": memory.deleted_at}
        return Change("memory", "forgotten", memory.urn, record, memory.deleted_at, LOG, position)
    record = memory.index_entry()
    record["is_pinned"] = memory.is_pinned
    return Change("memory", action, memory_urn(memory.domain, memory.namespace, memory.id), record,
                  memory.updated_at, LOG, position)


def _session(session: Session, action: str, position: int) -> Change:
    action = "ended" if session.ended_at is not None else "started" if action == "created" else action
    when = session.ended_at if session.ended_at is not None else session.started_at
    return Change("session", action, session.urn, session.index_entry(), when, LOG, position)


def _gone(position: int) -> Change:
    return Change("", "", "", {}, 0, LOG, position)


class ChangeSet(Record):
    """What a poll of the feed found, as MCP resources name it: the URNs to notify (each record's
    own, its collection and domain, a trail record's session) and whether the resource list changed.

    A `user`-domain memory's changes are kept apart (`private`: URN -> the uids that touched it,
    `private_listed`: the uids created or forgotten): on a team server only their writer may hear
    of them (`may_hear`), as only they may see them."""

    updated: set[str] = set()  # noqa: RUF012 - a record copies a container default per instance
    list_changed: bool = False
    private: dict[str, set[str]] = {}  # noqa: RUF012
    private_listed: set[str] = set()  # noqa: RUF012

    def __bool__(self) -> bool:
        return bool(self.updated) or self.list_changed or bool(self.private) or bool(self.private_listed)

    def add(self, change: Change) -> None:
        listed = change.kind == "memory" and change.action in ("created", "forgotten")  # the listed resources
        if change.kind == "memory" and change.record.get("domain") == "user":
            uid = str(change.record.get("id"))
            for topic in change.topics():
                self.private.setdefault(topic, set()).add(uid)
            if listed:
                self.private_listed.add(uid)
            return
        self.updated |= change.topics()
        if listed:
            self.list_changed = True


def may_hear(store: Any, viewer: Any, uids: set[str]) -> bool:
    """Whether `viewer` (the signed-in user a subscriber acts for; None: nobody, single-user) may
    hear of changes to the `user`-domain memories `uids`: only when they wrote one of them."""
    if viewer is None or not uids:
        return viewer is None
    writers = store.memory_writers(sorted(uids)) if hasattr(store, "memory_writers") else {}
    return any(writer == viewer.name for writer in writers.values())


class ChangeWatcher:
    """The feed read from where the last poll stopped. Cheap to poll: one look at the store's
    change token (`PRAGMA data_version`, a sequence on PostgreSQL) unless something was committed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.token = store.change_token()
        self.cursor = head(store)

    def poll(self) -> ChangeSet:
        found = ChangeSet()
        token = self.store.change_token()
        if token == self.token:
            return found
        self.token = token
        while True:
            changes, cursor = read_changes(self.store, self.cursor, MAX_BATCH)
            if cursor == self.cursor:
                return found
            self.cursor = cursor
            for change in changes:
                found.add(change)


def may_see(store: Any, change: Change) -> bool:
    """Whether the current viewer (a signed-in user of a team server) may see `change`: another
    writer's `user`-domain memory is theirs alone (nmem.team.access), in the feed as everywhere."""
    viewer = access.current()
    if viewer is None or change.kind != "memory" or change.record.get("domain") != "user":
        return True
    uid = str(change.record.get("id"))
    writers = store.memory_writers([uid]) if hasattr(store, "memory_writers") else {}
    return bool(writers.get(uid) == viewer.name)
