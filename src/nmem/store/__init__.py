"""The storage contract every engine implements, and `open_store(url)` to pick one.

Engines own their SQL and migrations; the service layer only speaks this protocol.
SQLite (`sqlite:///path`) is the embedded default; a PostgreSQL engine plugs in here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from nmem.errors import ConfigError
from nmem.models import Memory, Observation, Prompt, Session


@dataclass(frozen=True)
class SearchFilters:
    """Filters shared by every search scope; None means "no filter"."""

    project: str | None = None
    obs_types: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    session_id: str | None = None
    source: str | None = None
    date_start: int | None = None
    date_end: int | None = None
    include_archived: bool = False


@dataclass(frozen=True)
class NewObservation:
    session_id: str
    project: str
    timestamp: int
    obs_type: str
    source_event: str
    content: str
    tool_name: str | None = None
    file_path: str | None = None
    metadata: dict[str, Any] | None = None
    prompt_id: int | None = None


@dataclass(frozen=True)
class NewMemory:
    uid: str
    domain: str
    namespace: str
    summary: str
    content: str
    timestamp: int
    tags: tuple[str, ...] = ()
    source: str | None = None
    relates_to: tuple[str, ...] = ()
    tier: str = "warm"
    is_pinned: bool = False


@dataclass(frozen=True)
class Status:
    url: str
    schema_version: int
    size_bytes: int
    sessions: int
    prompts: int
    observations: int
    memories: int
    by_obs_type: dict[str, int] = field(default_factory=dict)
    by_namespace: dict[str, int] = field(default_factory=dict)
    by_tier: dict[str, int] = field(default_factory=dict)
    by_project: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FtsStats:
    """A full-text index's totals, for BM25 computed outside the engine."""

    docs: int                          # rows indexed
    tokens: int                        # tokens indexed, all rows
    df: dict[str, int] = field(default_factory=dict)   # rows holding each asked-for index term


class Store(Protocol):
    """What the service needs from a database engine."""

    url: str

    def close(self, checkpoint: bool = True) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def schema_version(self) -> int: ...

    # trail writes
    def ensure_session(self, session_id: str, project: str, started_at: int) -> Session: ...
    def add_prompt(self, session_id: str, timestamp: int, source: str, content: str) -> int: ...
    def latest_prompt_id(self, session_id: str) -> int | None: ...
    def add_observation(self, obs: NewObservation) -> int: ...
    def recent_duplicate(self, session_id: str, obs_type: str, file_path: str | None,
                         content: str, since: int) -> int | None: ...
    def close_session(self, session_id: str, ended_at: int, signature: dict[str, Any],
                      summary: dict[str, Any]) -> None: ...
    def set_observation_pin(self, obs_id: int, pinned: bool) -> bool: ...
    def purge_observations(self, ids: Sequence[int]) -> int: ...
    def purge_observations_where(self, obs_types: Sequence[str], older_than: int | None,
                                 project: str | None) -> int: ...

    # curated memories
    def insert_memory(self, mem: NewMemory) -> Memory: ...
    def update_memory(self, uid: str, fields: dict[str, Any], timestamp: int) -> Memory | None: ...
    def tombstone_memory(self, uid: str, timestamp: int) -> bool: ...
    def get_memory(self, uid: str) -> Memory | None: ...
    def touch_memories(self, uids: Sequence[str], timestamp: int) -> None: ...

    # reads
    def get_observations(self, ids: Sequence[int]) -> list[Observation]: ...
    def get_prompts(self, ids: Sequence[int]) -> list[Prompt]: ...
    def get_session(self, session_id: str) -> Session | None: ...
    def search_observations(self, match: str | None, filters: SearchFilters, order: str,
                            limit: int, offset: int) -> list[tuple[Observation, float]]: ...
    def search_prompts(self, match: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int) -> list[tuple[Prompt, float]]: ...
    def search_sessions(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Session, float]]: ...
    def search_memories(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Memory, float]]: ...
    def neighbours(self, anchor: Observation, before: int, after: int
                   ) -> tuple[list[Observation], list[Observation]]: ...
    # ranking support: scope is "prompts" or "observations"
    def session_windows(self, scope: str, ids: Sequence[int], span: int
                        ) -> dict[int, list[tuple[int, int]]]: ...
    def fts_texts(self, scope: str, ids: Sequence[int]) -> dict[int, tuple[str, int]]: ...
    def fts_stats(self, scope: str, terms: Sequence[str]) -> FtsStats: ...
    def session_prompts(self, session_id: str, before: int | None, after: int | None
                        ) -> list[Prompt]: ...
    def session_observations(self, session_id: str, before: int | None, after: int | None
                             ) -> list[Observation]: ...
    def file_touches(self, file_path: str, before: int | None, after: int | None,
                     limit: int) -> list[tuple[Observation, str | None]]: ...
    def recent_scored(self, project: str | None, limit: int, now: int, *, where: str = "any",
                      exclude_types: Sequence[str] = ()) -> list[tuple[Observation, float]]: ...
    def recent_intents(self, project: str, limit: int) -> list[tuple[Prompt, int]]: ...
    def iter_memories(self, domain: str | None, namespace: str | None) -> Iterator[Memory]: ...
    def status(self) -> Status: ...
    def integrity(self) -> str: ...

    # change detection for subscriptions
    def change_token(self) -> int: ...
    def memory_versions(self) -> dict[str, tuple[str, str, int, int | None]]: ...
    def session_versions(self) -> dict[str, tuple[str, int]]: ...
    def max_prompt_id(self) -> int: ...
    def prompts_after(self, prompt_id: int) -> list[tuple[int, str, str]]: ...
    def max_observation_id(self) -> int: ...
    def observations_after(self, obs_id: int) -> list[tuple[int, str, str]]: ...

    # vectors of the optional embeddings (nmem.search.embeddings); kind is observation,
    # prompt or memory, ids are the ids records carry (a memory's uid)
    def count_missing_vectors(self, kind: str, model: str) -> int: ...
    def missing_vectors(self, kind: str, model: str, after: int, limit: int) -> list[tuple[int, str]]: ...
    def put_vectors(self, kind: str, model: str, dim: int, rows: Sequence[tuple[int, bytes]]) -> None: ...
    def get_vectors(self, kind: str, model: str, ids: Sequence[int | str]) -> dict[int | str, bytes]: ...
    def vector_scan(self, kind: str, model: str, filters: SearchFilters, limit: int
                    ) -> tuple[list[int | str], list[bytes]]: ...
    def count_vectors(self, kind: str, model: str) -> int: ...
    def delete_vectors(self, model: str | None) -> int: ...
    def prune_vectors(self) -> int: ...


def open_store(url: str, *, busy_timeout_ms: int = 5000, readonly: bool = False) -> Store:
    """Open (creating and migrating if needed) the store a URL names."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        from nmem.store.sqlite import SqliteStore  # engines load only when chosen

        # sqlite:///relative.db and sqlite:////absolute/path.db, as SQLAlchemy spells them
        return SqliteStore(url.removeprefix("sqlite:///"), busy_timeout_ms=busy_timeout_ms,
                           readonly=readonly)
    if url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("the PostgreSQL engine is not available in this version of nmem")
    raise ConfigError(f"unsupported store URL: {url!r} (expected sqlite:///path)")
