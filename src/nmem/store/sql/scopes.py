"""The four things a search reads (observations, prompts and replies, sessions, memories) as one
table of what differs between them, and `search(scope, …)`, which reads any of them.

Listing a scope without a full-text match is the same statement on both engines and is written
here; each engine reads its matches itself (`_matched`: FTS5 or tsvector), with the same Scope.
"""

from __future__ import annotations

from nmem.models import Memory, Observation, Prompt, Record, Session
from nmem.store.records import Candidates, FtsStats
from nmem.store.sql.base import OBS_COLUMNS_O, PROMPT_COLUMNS, SqlBase
from nmem.store.sql.filters import memory_filters, observation_filters, prompt_filters, session_filters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from nmem.store.records import IndexedText, SearchFilters
    from nmem.store.sql.dialect import Dialect


class Scope(Record):
    """One searchable table: where its rows come from, which filters apply, how it is ordered."""

    name: str
    table: str
    alias: str
    source: str  # FROM: the table, and what its filters read besides
    columns: str  # what the record is built from
    time: str  # what date orders sort by
    record: Callable[[Any], Any]
    add_filters: Callable[..., None]  # the scope's own filters' clauses and parameters
    pinned_first: bool = False  # curated rows a person pinned lead every order

    def where(self, filters: SearchFilters, dialect: Dialect) -> tuple[list[str], list[Any]]:
        """WHERE clauses and parameters for the filters that apply to this scope."""
        clauses: list[str] = ["m.deleted_at IS NULL"] if self.name == "memories" else []
        params: list[Any] = []
        if self.name == "memories":
            memory_filters(filters, clauses, params, dialect)
        else:
            self.add_filters(filters, clauses, params)
        return clauses, params

    def order(self, order: str, by_rank: bool, binary: str = "") -> str:
        """ORDER BY for `order` (relevance needs a `rank` column, lowest first), newest first
        without a match; ties go to the higher key."""
        if order == "date_asc":
            keys = f"{self.time} ASC"
        elif order == "date_desc" or not by_rank:
            keys = f"{self.time} DESC"
        else:
            keys = "rank ASC"
        first = f"{self.alias}.is_pinned DESC, " if self.pinned_first else ""
        return f"{first}{keys}, {self.alias}.id{binary if self.name == 'sessions' else ''} DESC"


SCOPES: dict[str, Scope] = {
    "observations": Scope("observations", "observations", "o", "observations o", OBS_COLUMNS_O, "o.timestamp",
                          Observation.from_row, observation_filters),
    "prompts": Scope("prompts", "prompts", "p", "prompts p JOIN sessions s ON s.id = p.session_id", PROMPT_COLUMNS,
                     "p.timestamp", Prompt.from_row, prompt_filters),
    "sessions": Scope("sessions", "sessions", "s", "sessions s", "s.*", "s.started_at", Session.from_row,
                      session_filters),
    "memories": Scope("memories", "memories", "m", "memories m", "m.*", "m.updated_at", Memory.from_row,
                      memory_filters, pinned_first=True),
}


def scope_named(name: str) -> Scope:
    try:
        return SCOPES[name]
    except KeyError:
        raise ValueError(f"no search scope {name!r}; valid: {', '.join(SCOPES)}") from None


class ScopedSearch(SqlBase):
    """`search(scope, …)` on any engine; the engine's search module supplies `_matched`."""

    def search(self, scope: str, match: str | None, filters: SearchFilters, order: str,
               limit: int, offset: int) -> list[tuple[Any, float]]:
        """Records of `scope` and their scores (higher is better; 0.0 without a match): the
        full-text `match` (nmem's FTS5 syntax) and the filters select, in `order`."""
        chosen = scope_named(scope)
        if match is not None:
            return self._matched(chosen, match, filters, order, limit, offset)
        clauses, params = chosen.where(filters, self.dialect)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(f"SELECT {chosen.columns} FROM {chosen.source} {where} "
                           f"ORDER BY {chosen.order(order, False, self.dialect.binary)} LIMIT ? OFFSET ?",
                           [*params, limit, offset])
        return [(chosen.record(r), 0.0) for r in rows]

    def _matched(self, scope: Scope, match: str, filters: SearchFilters, order: str,
                 limit: int, offset: int) -> list[tuple[Any, float]]:
        raise NotImplementedError

    # -- ranking support (the engine's search module supplies the parts) --------------------

    def match_ids(self, scope: str, match: str, filters: SearchFilters, want: int) -> list[int]:
        raise NotImplementedError

    def session_windows(self, scope: str, ids: Sequence[int], span: int) -> dict[int, list[tuple[int, int]]]:
        raise NotImplementedError

    def fts_texts(self, scope: str, ids: Sequence[int]) -> dict[int, IndexedText]:
        raise NotImplementedError

    def fts_stats(self, scope: str, terms: Sequence[str]) -> FtsStats:
        raise NotImplementedError

    def rank_candidates(self, scope: str, stems: Sequence[str], plan: Callable[[Mapping[str, int]], list[str]],
                        filters: SearchFilters, want: int, span: int, reach: int) -> Candidates:
        """What ranking one trail scope reads: the statistics of `stems`; the expressions
        `plan` makes of their document frequencies, tried in order until one finds any; its
        candidates (the best `want` by BM25 among its newest matches, as `match_ids`); their
        session windows, and the texts of the candidates and the rows within `span` of them.
        Windows reach `reach` records each side (`span` when that is wider): the windows of the
        neighbours a promoted candidate needs are then cut from them (`_Nearby`), not read
        again; the few texts those add are read when they are (an engine that reads everything
        in one statement may bring the texts of every row named)."""
        stats = self.fts_stats(scope, stems)
        queries = plan(stats.df)
        ids: list[int] = []
        match = queries[-1] if queries else ""
        for match in queries:
            ids = self.match_ids(scope, match, filters, want)
            if ids:
                break
        wide = max(span, reach) if span else 0
        windows = self.session_windows(scope, ids, wide) if ids and wide else {}
        named = {*ids, *(n for i in ids for n, d in windows.get(i, ()) if -span <= d <= span)}
        return Candidates(stats, match, ids, wide, windows, self.fts_texts(scope, sorted(named)) if named else {},
                          sessions=getattr(windows, "sessions", None))   # read with the windows (SQLite's `Windows`)

    # The protocol's per-scope names, kept for the callers of this release.

    def search_observations(self, match: str | None, filters: SearchFilters, order: str,
                            limit: int, offset: int) -> list[tuple[Observation, float]]:
        return self.search("observations", match, filters, order, limit, offset)

    def search_prompts(self, match: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int) -> list[tuple[Prompt, float]]:
        return self.search("prompts", match, filters, order, limit, offset)

    def search_sessions(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Session, float]]:
        return self.search("sessions", match, filters, order, limit, offset)

    def search_memories(self, match: str | None, filters: SearchFilters, order: str,
                        limit: int, offset: int) -> list[tuple[Memory, float]]:
        return self.search("memories", match, filters, order, limit, offset)
