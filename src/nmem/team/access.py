"""Who the current request acts for on a team server, and what that user may see.

The HTTP guard sets the viewer for each request (`acting_as`); the service reads it
(`current`) where it stores or returns curated memories. Outside a team server (the CLI, hooks,
a single-user server) there is no viewer and nothing is filtered or attributed.

The one rule: a memory in the `user` domain belongs to its writer; nobody else can read,
search, get, change or forget it, or learn that it exists (its id, summary, a count that
includes it, or a search score whose statistics count it: `search_memories_seen_by`).
`project:*` and `org` are shared by the team. Admins are no exception: an admin manages users
and the server, not other people's private notes.

The rule is applied in one place: the service reads through `guarded(store)`, the store as
the current viewer may see it, so no adapter (REST, MCP tool or resource, stream, viewer)
can forget it.

Standard library and `nmem.errors` only. A process that never loads it (a hook, the CLI) acts
for nobody: the service asks for it only where it is loaded (`nmem.service.base.team_access`).
"""

from __future__ import annotations

from contextvars import ContextVar

from nmem.errors import Forbidden

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

    from nmem.models import Memory


SCOPE_KEY = "nmem.viewer"   # where the HTTP guard leaves the signed-in user in an ASGI scope


class Viewer:
    __slots__ = ("admin", "name")

    def __init__(self, name: str, admin: bool = False) -> None:
        self.name = name
        self.admin = admin

    def __repr__(self) -> str:
        return f"Viewer({self.name!r}, admin={self.admin})"


_VIEWER: ContextVar[Viewer | None] = ContextVar("nmem_viewer", default=None)


def current() -> Viewer | None:
    return _VIEWER.get()


class acting_as:
    """Act for `viewer` inside the block (None: nobody, as in single-user mode)."""

    def __init__(self, viewer: Viewer | None) -> None:
        self.viewer = viewer
        self.token: Any = None

    def __enter__(self) -> Viewer | None:
        self.token = _VIEWER.set(self.viewer)
        return self.viewer

    def __exit__(self, *exc: object) -> None:
        _VIEWER.reset(self.token)


def hidden_memories(store: Any, memories: Sequence[Memory]) -> set[str]:
    """The uids among `memories` the current viewer may not see: other writers' `user` memories."""
    viewer = _VIEWER.get()
    if viewer is None:
        return set()
    private = [m.id for m in memories if m.domain == "user"]
    if not private:
        return set()
    writers = store.memory_writers(private)
    return {uid for uid in private if writers.get(uid) != viewer.name}


def visible(store: Any, memories: Sequence[Memory]) -> list[Memory]:
    hidden = hidden_memories(store, memories)
    return [m for m in memories if m.id not in hidden] if hidden else list(memories)


def guarded(store: Any) -> Any:
    """`store` as the current viewer may read it (the store itself when nobody is signed in)."""
    viewer = _VIEWER.get()
    if viewer is None or not hasattr(store, "memory_writers"):
        return store
    return ViewerStore(store, viewer)


_BATCH = 500  # uids per writer lookup

# Every other public method of a store, passed straight through, and why it may be: a write (the
# service reads the memory through `ViewerStore` first), the trail (the team's, shared), the team's
# own tables, sync and lifecycle (an admin's or the server's), or a read of ids the caller got
# through `ViewerStore`. tests/team/test_team_store.py checks that every public method of both
# engines is filtered by `ViewerStore` or named here, so a new store read is classified before it
# can reach a signed-in user.
PASSES_THROUGH = frozenset({
    # writes
    "add_observation", "add_prompt", "close_session", "ensure_session", "insert_memory", "update_memory",
    "tombstone_memory", "touch_memories", "put_session", "set_observation_pin", "purge_observations",
    "purge_observations_matching", "purge_observations_where", "save_import_mark", "mark_spooled",
    "record_change", "start_run", "finish_run", "mark_run_undone", "set_tiers", "delete_expired",
    "put_vectors", "delete_vectors", "prune_vectors", "reclaim",
    # the trail: sessions, prompts, observations (shared by the team)
    "active_sessions", "activity_by_day", "export_sessions", "file_touches", "get_observations", "get_prompts",
    "get_session", "get_sessions", "import_marks", "last_prompt", "last_prompts", "latest_prompt_id",
    "list_sessions", "neighbours", "observation_ids", "observations_since", "project_root", "project_roots",
    "prompt_time",
    "prompts_since", "recent_duplicate", "recent_intents", "recent_observations", "recent_scored",
    "recorded_paths", "search_observations", "search_prompts", "search_sessions", "session_file_touches",
    "session_last_activity", "session_observations", "session_origins", "session_outline", "session_prompts",
    "session_roots", "session_tail", "session_tails", "session_windows", "sessions_by_prefix", "sessions_prompts",
    "summarised_sessions", "expired_counts",
    # ranking reads of the trail scopes and their statistics (observations and prompts: the team's, shared;
    # memories are ranked by `search_memories_seen_by`, whose statistics leave out what the viewer may not see)
    "match_ids", "rank_candidates", "fts_texts", "fts_stats", "trail_keys", "prompt_turns", "user_prompt_ids",
    # what a named viewer may not see, and a memory search for them: what `ViewerStore` calls
    "search_memories_seen_by", "hidden_memory_uids",
    # reads of memories the caller named by ids it got through ViewerStore
    "memory_numbers", "memory_indexed", "get_vectors", "run_changes",
    # the change feed (filtered per viewer by nmem.changes.may_see / may_hear)
    "change_heads", "change_token", "logged_changes_since", "settled_heads",
    # the team's tables (nmem.team.accounts checks who may call them)
    "add_token", "add_user", "audit_rows", "list_tokens", "list_users", "memory_writers", "observation_writers",
    "record_writes", "revoke_tokens", "team_active", "token_user",
    # sync, vectors' upkeep, the engine itself
    "sync_apply", "sync_device", "sync_files", "sync_log_unlogged", "sync_outbox", "sync_pending", "sync_pushed",
    "sync_reset", "count_missing_vectors", "count_vectors", "missing_vectors", "tiers_computed_at",
    "close", "transaction", "savepoint", "read_snapshot", "fan_out_reads", "schema_version", "integrity",
    "fts_consistency", "file_bytes", "migrate_to", "reserve_connections", "pool_stats",
})


class ViewerStore:
    """A store whose memory reads leave out what one viewer may not see; everything else
    (writes, the trail, the team tables) passes straight through to the store."""

    def __init__(self, store: Any, viewer: Viewer) -> None:
        self._store = store
        self.viewer = viewer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _mine(self, uids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(uids), _BATCH):
            writers = self._store.memory_writers(uids[start:start + _BATCH])
            found.update(uid for uid, writer in writers.items() if writer == self.viewer.name)
        return found

    def _keep(self, memories: Sequence[Memory]) -> list[Memory]:
        private = [m.id for m in memories if m.domain == "user"]
        mine = self._mine(private) if private else set()
        return [m for m in memories if m.domain != "user" or m.id in mine]

    def _filtered(self, memories: Iterator[Memory]) -> Iterator[Memory]:
        batch: list[Memory] = []
        for memory in memories:
            batch.append(memory)
            if len(batch) >= _BATCH:
                yield from self._keep(batch)
                batch = []
        yield from self._keep(batch)

    def get_memory(self, uid: str) -> Memory | None:
        memory = self._store.get_memory(uid)
        return memory if memory is None or self._keep([memory]) else None

    def search(self, scope: str, match: str | None, filters: Any, order: str, limit: int,
               offset: int) -> list[tuple[Any, float]]:
        """The generic search: its memory scope filtered as `search_memories` is."""
        if scope == "memories":
            return self.search_memories(match, filters, order, limit, offset)
        rows: list[tuple[Any, float]] = self._store.search(scope, match, filters, order, limit, offset)
        return rows

    def search_memories(self, match: str | None, filters: Any, order: str, limit: int,
                        offset: int) -> list[tuple[Memory, float]]:
        """A page of the memories this viewer may see, scored as if the others did not exist: the
        store leaves them out before the page is cut (another user's better matches never push
        theirs off it, nor tell them by a short page that they exist) and out of BM25's
        statistics (rows, tokens, each phrase's rows), so no score says what they hold."""
        rows: list[tuple[Memory, float]] = self._store.search_memories_seen_by(
            self.viewer.name, match, filters, order, limit, offset)
        return rows

    def search_curated(self, scopes: Sequence[str], tiers: Sequence[str], filters: Any, limit: int,
                       viewer: str | None = None) -> dict[str, tuple[list[tuple[Any, float]], str]]:
        """Sessions and memories for a tier each, as `search_memories`: always as this viewer sees
        the memories, whoever the caller names."""
        found: dict[str, tuple[list[tuple[Any, float]], str]] = self._store.search_curated(
            scopes, tiers, filters, limit, viewer=self.viewer.name)
        return found

    def iter_memories(self, domain: str | None, namespace: str | None) -> Iterator[Memory]:
        return self._filtered(self._store.iter_memories(domain, namespace))

    def export_memories(self, *args: Any, **kwargs: Any) -> Iterator[Memory]:
        return self._filtered(self._store.export_memories(*args, **kwargs))

    def curated_memories(self, project: str, limit: int) -> list[Memory]:
        """As `search_memories`: others' private memories left out before the list is cut."""
        fetch = max(limit, 1)
        while True:
            rows = self._store.curated_memories(project, fetch)
            seen = self._keep(rows)
            if len(seen) >= limit or len(rows) < fetch:
                return seen[:limit]
            fetch *= 4

    def memory_uid(self, number: int) -> str | None:
        """A memory's id by its number, None for another writer's private one: naming it by number
        must answer as a number that names nothing does."""
        uid = self._store.memory_uid(number)
        memory = self._store.get_memory(uid) if uid is not None else None
        return uid if memory is None or self._keep([memory]) else None

    def latest_checkpoint(self, project: str, session_id: str) -> Memory | None:
        found = self._store.latest_checkpoint(project, session_id)
        return found if found is None or self._keep([found]) else None

    def tier_inputs(self) -> list[Any]:
        rows = self._store.tier_inputs()
        hidden = self._others_private()
        return [r for r in rows if r[0] not in hidden]

    def vector_scan(self, kind: str, model: str, filters: Any, limit: int) -> tuple[list[Any], list[bytes]]:
        """As `search_memories`: others' private memories' vectors left out before the scan's
        `limit` is counted, so they never take the place of the viewer's own."""
        if kind != "memory":
            rows: tuple[list[Any], list[bytes]] = self._store.vector_scan(kind, model, filters, limit)
            return rows
        hidden = self._others_private()
        fetch = max(limit, 1)
        while True:
            ids, blobs = self._store.vector_scan(kind, model, filters, fetch)
            pairs = [(i, b) for i, b in zip(ids, blobs, strict=True) if i not in hidden]
            if len(pairs) >= limit or len(ids) < fetch:
                pairs = pairs[:limit]
                return [i for i, _ in pairs], [b for _, b in pairs]
            fetch = min(fetch * 4, limit + len(hidden))

    def _others_private(self) -> set[str]:
        """Every `user` memory (forgotten ones too) that another writer, or none known, wrote."""
        hidden: set[str] = self._store.hidden_memory_uids(self.viewer.name)
        return hidden

    def status(self) -> Any:
        """The store's counts without other writers' `user` memories."""
        st = self._store.status()
        mine = self._mine([m.id for m in self._store.iter_memories("user", None)])
        for memory in self._store.iter_memories("user", None):
            if memory.id in mine:
                continue
            st.memories -= 1
            for counts, key in ((st.by_namespace, memory.namespace), (st.by_tier, memory.tier)):
                if counts.get(key):
                    counts[key] -= 1
                    if not counts[key]:
                        del counts[key]
        return st

    def recent_runs(self, limit: int) -> list[dict[str, Any]]:
        return [run for run in self._store.recent_runs(limit) if self._may_see_run(run)]

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        run = self._store.get_run(run_id)
        return run if run is None or self._may_see_run(run) else None

    def _may_see_run(self, run: dict[str, Any]) -> bool:
        """A consolidation run's report names the memories it read: only its starter sees it."""
        return bool(run.get("report", {}).get("by") == self.viewer.name)

    def put_memory(self, memory: Memory) -> None:
        """An import may not overwrite another writer's private memory (same uid)."""
        existing = self._store.get_memory(memory.id)
        if existing is not None and not self._keep([existing]):
            raise Forbidden(f"memory {memory.id} belongs to another user")
        self._store.put_memory(memory)
