"""Purges: observations by id, or by a strict query (every word), type and age; pinned rows
are kept except when named by id."""

from __future__ import annotations

from nmem.errors import InvalidArgument
from nmem.service.args import as_list
from nmem.service.base import Base
from nmem.service.search import strict_match
from nmem.store import SearchFilters
from nmem.util.numbers import as_int
from nmem.util.timeutil import MAX_AGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class Purge(Base):
    def purge_selection(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
                        older_than: int | None = None, project: str | None = None,
                        query: str | None = None) -> list[int]:
        """The ids of the observations `purge` would delete with the same selectors."""
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids:
            self._purge_filters(ids, obs_type, older_than, project, query)
            return [o.id for o in self.store.get_observations([as_int(i, "id") for i in ids])]
        match, filters = self._purge_filters(ids, obs_type, older_than, project, query)
        return self.store.observation_ids(match, filters)

    def purge(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
              older_than: int | None = None, project: str | None = None,
              confirm: bool = False, query: str | None = None) -> int:
        """Delete observations by id, or by a strict query (every word) and/or type and age;
        pinned rows are kept except when named by id."""
        if not confirm:
            raise InvalidArgument("purge deletes data: pass --confirm (confirm=true) to proceed")
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if older_than is not None:
            older_than = as_int(older_than, "older_than", 0, MAX_AGE)
        match, filters = self._purge_filters(ids, obs_type, older_than, project, query)
        if ids:
            return self.store.purge_observations([as_int(i, "id") for i in ids])
        if match is None:
            cutoff = filters.date_end + 1 if filters.date_end is not None else None
            return self.store.purge_observations_where(filters.obs_types, cutoff, filters.project)
        return self.store.purge_observations_matching(match, filters)

    def _purge_filters(self, ids: Sequence[int | str], obs_type: str | Sequence[str] | None,
                       older_than: int | None, project: str | None,
                       query: str | None) -> tuple[str | None, SearchFilters]:
        types = as_list(obs_type, "obs_type") if obs_type else ()
        for t in types:
            self._check_obs_type(t)
        if ids and (types or older_than is not None or query is not None):
            raise InvalidArgument("purge takes either ids or a query/type/age selector, not both")
        if not ids and not types and older_than is None and query is None:
            raise InvalidArgument("purge needs ids, a query, a type or an age (--older-than)")
        if older_than is not None and older_than < 0:
            raise InvalidArgument("older_than must be a positive age")
        match = None
        if query is not None:
            match = strict_match(query)
            if not match:
                raise InvalidArgument(f"purge query {query!r} has no word to match")
        cutoff = self.now() - older_than if older_than is not None else None
        filters = SearchFilters(project=project or None, obs_types=types,
                                date_end=cutoff - 1 if cutoff is not None else None)
        return match, filters
