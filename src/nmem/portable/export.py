"""What `nmem export` reads: curated memories, and the trail when asked, as export records.

Everything is read inside one read transaction, so an export is a consistent snapshot even
while hooks keep writing. The order is fixed (memories by uid; sessions by start, each with
its prompts and observations in the order they were recorded), so exporting the same data
twice gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nmem.models import Session
from nmem.portable.records import memory_record, observation_record, prompt_record, session_record
from nmem.store import SearchFilters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.service.api import Service


@dataclass(frozen=True)
class ExportFilters:
    domains: tuple[str, ...] = ()       # memories in these domains (project:NAME, user, org)
    namespaces: tuple[str, ...] = ()
    project: str | None = None          # the project's memories (with domains: as well) and its trail
    since: int | None = None            # memories updated, trail rows recorded, at or after this time
    tombstones: bool = False            # forgotten memories' tombstones too
    trail: bool = False                 # sessions, prompts and observations too


@dataclass
class SessionRows:
    """One session's export records."""

    session: dict[str, Any]
    prompts: list[dict[str, Any]]
    observations: list[dict[str, Any]]

    def records(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "session", self.session
        yield from (("prompt", p) for p in self.prompts)
        yield from (("observation", o) for o in self.observations)


class Export:
    """The records one export holds; iterate `memories()` and `sessions()` inside `snapshot()`."""

    def __init__(self, service: Service, filters: ExportFilters) -> None:
        self.service = service
        self.filters = filters
        self.counts = {"memories": 0, "tombstones": 0, "sessions": 0, "prompts": 0, "observations": 0}
        self._sessions: list[Session] | None = None

    def snapshot(self) -> Any:
        return self.service.store.read_snapshot()

    def _memory_filters(self) -> SearchFilters:
        f = self.filters
        domains = tuple(self.service._domain(d, None) for d in f.domains)
        if f.project is not None:
            domains += (f"project:{f.project}",)
        namespaces = tuple(self.service._namespace(n) for n in f.namespaces)
        return SearchFilters(domains=tuple(dict.fromkeys(domains)), namespaces=namespaces, date_start=f.since)

    def memories(self) -> Iterator[dict[str, Any]]:
        for memory in self.service.store.export_memories(self._memory_filters(), self.filters.tombstones):
            self.counts["memories" if memory.deleted_at is None else "tombstones"] += 1
            yield memory_record(memory)

    def session_list(self) -> list[Session]:
        """The sessions to export (read once: inside `snapshot()` they cannot change)."""
        if self._sessions is None:
            self._sessions = (self.service.store.export_sessions(self.filters.project, self.filters.since)
                              if self.filters.trail else [])
        return self._sessions

    def sessions(self) -> Iterator[SessionRows]:
        since = self.filters.since
        store = self.service.store
        for session in self.session_list():
            observations = store.session_observations(session.id, None, None if since is None else since - 1)
            followed = {o.prompt_id for o in observations}
            # The prompts of the period, and any older prompt an exported observation followed.
            prompts = [p for p in store.session_prompts(session.id, None, None)
                       if since is None or p.timestamp >= since or p.id in followed]
            seq = {p.id: n for n, p in enumerate(prompts, start=1)}
            self.counts["sessions"] += 1
            self.counts["prompts"] += len(prompts)
            self.counts["observations"] += len(observations)
            yield SessionRows(
                session_record(session),
                [prompt_record(p, seq[p.id]) for p in prompts],
                [observation_record(o, seq.get(o.prompt_id) if o.prompt_id is not None else None)
                 for o in observations],
            )
