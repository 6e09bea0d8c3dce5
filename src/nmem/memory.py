"""The service API: the one place nmem's behaviour lives. CLI, hooks and MCP only adapt it.

Every public method validates its input (raising `nmem.errors` types), calls the store
and returns models or plain JSON-ready dicts. Recording and curation live in
`nmem.core.CoreService` (all the hot hook path loads); this module adds search, recall
and navigation.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nmem.capture.recorder import RecordOutcome
from nmem.config import Settings
from nmem.core import MAX_IDS, MAX_LIMIT, CoreService, _as_int, _as_list, clamp
from nmem.errors import InvalidArgument, NotFound
from nmem.models import ORDERS, SCOPES, Observation, SearchHit
from nmem.search import rank
from nmem.search.query import QueryPlan, plan, quote
from nmem.search.timeexpr import TimeRange, find_time
from nmem.store import SearchFilters
from nmem.store.protocol import Store
from nmem.timeutil import parse_time

__all__ = ["CoreService", "RecordOutcome", "SearchResult", "Service"]

RANKED_SCOPES = ("observations", "prompts", "all")   # trail scopes ranked with context windows


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    query: str | None
    match: str | None                  # the FTS5 expression that produced the hits

    def to_list(self, full: bool = False) -> list[dict[str, Any]]:
        return [hit.to_dict(full=full) for hit in self.hits]


class Service(CoreService):
    """nmem's API: capture and curation (`CoreService`) plus search, recall and navigation."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        super().__init__(store, settings, clock)
        self.ranking = rank.Ranking()

    # -- curated memories ----------------------------------------------------------------

    def recall(self, query: str | None = None, *, namespace: str | None = None,
               tags: Iterable[str] | str | None = None, domain: str | None = None,
               project: str | None = None, limit: int | None = 10,
               include_archived: bool = False) -> list[SearchHit]:
        """Search curated memories only; counts as an access."""
        domains: tuple[str, ...] = ()
        if domain and domain != "all":
            domains = (self._domain(domain, project),)
        filters = SearchFilters(
            project=project if project not in (None, "*") else None,
            namespaces=(self._namespace(namespace),) if namespace else (),
            domains=domains, tags=_as_list(tags, "tags"), include_archived=include_archived,
        )
        hits = self._search("memories", query, filters, "relevance", clamp(limit, 1, MAX_LIMIT, 10), 0).hits
        self.store.touch_memories([str(h.record.id) for h in hits], self.now())
        return hits

    # -- search and navigation -------------------------------------------------------------

    def search(self, query: str | None = None, *, scope: str = "observations",
               project: str | None = None, obs_type: str | Sequence[str] | None = None,
               namespace: str | Sequence[str] | None = None, tags: Any = None, files: Any = None,
               session_id: str | None = None, date_start: Any = None, date_end: Any = None,
               order_by: str = "relevance", limit: int | None = None, offset: int | None = 0,
               source: str | None = None) -> SearchResult:
        """Full-text search with filters over one scope or all of them."""
        if scope not in SCOPES:
            raise InvalidArgument(f"unknown scope {scope!r}; valid: {', '.join(SCOPES)}")
        if order_by not in ORDERS:
            raise InvalidArgument(f"unknown order_by {order_by!r}; valid: {', '.join(ORDERS)}")
        types = _as_list(obs_type, "obs_type")
        for t in types:
            self._check_obs_type(t)
        start = parse_time(date_start, name="date_start")
        end = parse_time(date_end, name="date_end", end_of_day=True)
        if start is not None and end is not None and start > end:
            raise InvalidArgument("date_start is after date_end")
        off = _as_int(offset or 0, "offset")
        if off < 0:
            raise InvalidArgument("offset must be >= 0")
        default_limit = int(self.settings["search.default_limit"])
        lim = clamp(_as_int(limit, "limit") if limit is not None else None, 1, MAX_LIMIT, default_limit)
        filters = SearchFilters(
            project=project if project not in (None, "", "*") else None,
            obs_types=types,
            namespaces=tuple(self._namespace(n) for n in _as_list(namespace, "namespace")),
            tags=_as_list(tags, "tags"), files=_as_list(files, "files"),
            session_id=session_id or None, source=source, date_start=start, date_end=end,
        )
        return self._search(scope, query, filters, order_by, lim, off)

    def _search(self, scope: str, query: str | None, filters: SearchFilters, order: str,
                limit: int, offset: int) -> SearchResult:
        if self.settings["search.embeddings"] != "none":  # hook: optional embeddings fused with BM25
            from nmem.search.embeddings import hybrid_search

            fused = hybrid_search(self, scope, query, filters, order, limit, offset)
            if fused is not None:
                return fused
        query_plan = plan(query or "")
        if query and query.strip() and not query_plan.tiers:
            return SearchResult([], query, None)  # nothing searchable in it (only punctuation)
        if query_plan.fallback is not None:
            # A question quoting a title: as typed if that finds anything, else as plain
            # language. A quote FTS5 cannot parse stays an error that says so.
            typed = self._tiered(scope, query, query_plan, filters, order, limit, offset)
            if typed.hits or (offset and self._run_scopes(scope, typed.match, filters, order, 1, 0)):
                return typed
            query_plan = query_plan.fallback
        ranking = self.ranking
        if (order == "relevance" and not query_plan.raw and query_plan.terms and ranking.candidates
                and scope in RANKED_SCOPES):
            when = None
            if ranking.time_expressions and query:
                when, rest = find_time(query, self.now())
                rest_plan = plan(rest) if when else query_plan
                if rest_plan.terms:  # a question that is only a time keeps its words
                    query_plan = rest_plan
            cue = rank.answer_cue(query) if ranking.answer_boost and query else None
            return self._ranked(scope, query, query_plan, when, cue, filters, limit, offset)
        return self._tiered(scope, query, query_plan, filters, order, limit, offset)

    def _tiered(self, scope: str, query: str | None, query_plan: QueryPlan, filters: SearchFilters,
                order: str, limit: int, offset: int) -> SearchResult:
        """The first tier that finds anything, in the store's order (FTS5 BM25 or by date)."""
        tiers: Sequence[str | None] = query_plan.tiers or (None,)
        for match in tiers:
            hits = self._run_scopes(scope, match, filters, order, limit, offset)
            if hits:
                return SearchResult(hits, query, match)
            # Past the last page of a tier that has hits: stay on it, or pages would mix tiers.
            if offset and self._run_scopes(scope, match, filters, order, 1, 0):
                return SearchResult([], query, match)
        return SearchResult([], query, tiers[-1])

    def _ranked(self, scope: str, query: str | None, query_plan: QueryPlan, when: TimeRange | None,
                cue: Callable[[str], bool] | None, filters: SearchFilters, limit: int, offset: int) -> SearchResult:
        """Relevance ranking of a plain-language query (`nmem.search.rank`): records sharing a
        content word are candidates; the trail is scored with context windows."""
        want = offset + limit
        if scope != "all":
            hits, match = self._rank_trail(scope, query_plan, when, cue, filters, want)
            return SearchResult(hits[offset:want], query, match)
        merged: list[SearchHit] = []
        matches: list[str] = []
        for one in ("observations", "prompts"):
            hits, match = self._rank_trail(one, query_plan, when, cue, filters, want)
            merged.extend(hits)
            matches.append(match)
        for one in ("sessions", "memories"):  # curated and summarised: strictest tier first, by BM25
            for tier in query_plan.tiers:
                hits = self._run_search(one, tier, filters, "relevance", want, 0)
                if hits:
                    merged.extend(hits)
                    break
        merged.sort(key=lambda h: -h.score)
        return SearchResult(merged[offset:want], query, matches[0])

    def _rank_trail(self, scope: str, query_plan: QueryPlan, when: TimeRange | None,
                    cue: Callable[[str], bool] | None, filters: SearchFilters,
                    want: int) -> tuple[list[SearchHit], str]:
        """The best `want` hits of one trail scope, and the FTS5 expression that found the
        candidates. Ranking reads ids, texts and windows; only the hits' rows are fetched."""
        ranking = self.ranking
        store = self.store
        stems = rank.query_stems(query_plan.terms)
        fts = store.fts_stats(scope, stems)
        # Candidates come in blocks, so every page of one query reranks the same set.
        pool = ranking.candidates * max(1, -(-want // ranking.candidates))
        queries = rank.candidate_queries(query_plan.terms, fts.df, ranking.postings)
        found: list[int] = []
        match = queries[-1] if queries else ""
        if not _scope_excluded(scope, filters):
            for match in queries:
                found = store.match_ids(scope, match, filters, pool)
                if found:
                    break
        if not found:
            return [], match
        candidates = list(dict.fromkeys(found))
        if when is not None and ranking.time_candidates:
            candidates += self._time_candidates(scope, query_plan, when, filters, fts.df, set(candidates))
        trail = _Trail(store, scope, rank.TermCounter(stems), ranking.window, cue)
        trail.load(candidates)
        stats = rank.IndexStats(fts.docs, fts.tokens / fts.docs if fts.docs else 0.0, fts.df)

        def score(ids: list[int]) -> dict[int, float]:
            return rank.score([rank.Candidate(i, trail.times.get(i, 0)) for i in ids], trail.docs,
                              trail.windows, stems, stats, ranking, when, self.now())

        scores = score(candidates)
        if ranking.promote and not (filters.obs_types or filters.files or filters.source
                                    or filters.date_start is not None or filters.date_end is not None):
            # A neighbour of a strong candidate that shares a word is a candidate too, though
            # BM25 alone ranked it outside the pool; no filter can exclude it (same session).
            best = sorted(candidates, key=lambda i: -scores[i])[:ranking.promote]
            extra = list(dict.fromkeys(n for i in best for n, _ in trail.windows.get(i, ())
                                       if n not in scores and n in trail.docs and trail.docs[n].matches()))
            if extra:
                trail.load(extra)
                scores.update(score(extra))
                candidates += extra
        ranked = sorted(candidates, key=lambda i: (-scores[i], -i))
        kind, fetch = (("prompt", store.get_prompts) if scope == "prompts"
                       else ("observation", store.get_observations))
        hits: list[SearchHit] = []
        done = 0
        while len(hits) < want and done < len(ranked):  # again only if a row went meanwhile (a purge)
            page = ranked[done:done + want - len(hits)]
            done += len(page)
            records: dict[int, Any] = {int(r.id): r for r in fetch(page)}
            hits += [SearchHit(kind, scores[i], records[i]) for i in page if i in records]
        return hits, match

    def _time_candidates(self, scope: str, query_plan: QueryPlan, when: TimeRange, filters: SearchFilters,
                         df: Mapping[str, int], known: set[int]) -> list[int]:
        """A named time is a boost, not a filter, so the best matches of the whole trail may
        all lie outside it: the best matches of the question's rare words inside it (± one
        half-life) join them. Rare words only: a second pass over common ones would cost
        tens of milliseconds at a million records."""
        ranking = self.ranking
        rare = rank.rare_terms(query_plan.terms, df, ranking.postings)
        if not rare:
            return []
        inside = self.store.match_ids(scope, " OR ".join(quote(t) for t in rare),
                                      _within(filters, when, ranking.time_half_life_days), ranking.time_candidates)
        return [i for i in inside if i not in known]

    def _run_scopes(self, scope: str, match: str | None, filters: SearchFilters, order: str,
                    limit: int, offset: int) -> list[SearchHit]:
        if scope != "all":
            return self._run_search(scope, match, filters, order, limit, offset)
        merged: list[SearchHit] = []
        for one in ("observations", "prompts", "sessions", "memories"):
            merged.extend(self._run_search(one, match, filters, order, limit + offset, 0))
        if order == "relevance" and match is not None:
            merged.sort(key=lambda h: -h.score)
        else:
            merged.sort(key=_hit_time, reverse=(order != "date_asc"))
        return merged[offset:offset + limit]

    def _run_search(self, scope: str, match: str | None, filters: SearchFilters, order: str,
                    limit: int, offset: int) -> list[SearchHit]:
        store = self.store
        if _scope_excluded(scope, filters):
            return []
        if scope == "observations":
            return [SearchHit("observation", s, r)
                    for r, s in store.search_observations(match, filters, order, limit, offset)]
        if scope == "prompts":
            return [SearchHit("prompt", s, r)
                    for r, s in store.search_prompts(match, filters, order, limit, offset)]
        if scope == "sessions":
            return [SearchHit("session", s, r)
                    for r, s in store.search_sessions(match, filters, order, limit, offset)]
        return [SearchHit("memory", s, r)
                for r, s in store.search_memories(match, filters, order, limit, offset)]

    def get_observations(self, ids: Sequence[Any]) -> list[Observation]:
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids is None or len(ids) == 0:
            raise InvalidArgument("ids array must not be empty")
        if len(ids) > MAX_IDS:
            raise InvalidArgument(f"at most {MAX_IDS} ids per request (got {len(ids)})")
        return self.store.get_observations([_as_int(i, "id") for i in ids])

    def timeline(self, anchor: Any = None, *, query: str | None = None, before: int | None = 5,
                 after: int | None = 5, project: str | None = None) -> dict[str, Any]:
        """Observations around an anchor in its session (anchor by id, or the best match of a query)."""
        if anchor is None and not (query and query.strip()):
            raise InvalidArgument("timeline needs an anchor id or a query")
        if anchor is None:
            found = self.search(query, project=project, limit=1)
            if not found.hits:
                raise NotFound(f"no observation matches {query!r}")
            anchor_obs = found.hits[0].record
            assert isinstance(anchor_obs, Observation)
        else:
            rows = self.store.get_observations([_as_int(anchor, "anchor")])
            if not rows:
                raise NotFound("anchor observation not found")
            anchor_obs = rows[0]
        b = clamp(_as_int(before, "before") if before is not None else None, 0, MAX_LIMIT, 5)
        a = clamp(_as_int(after, "after") if after is not None else None, 0, MAX_LIMIT, 5)
        prev, nxt = self.store.neighbours(anchor_obs, b, a)
        return {
            "anchor": anchor_obs.to_dict(),
            "before": [o.to_dict() for o in prev],
            "after": [o.to_dict() for o in nxt],
        }

    def session_trace(self, session_id: str, *, before: Any = None, after: Any = None) -> dict[str, Any]:
        """A session's prompts in order, each with the observations it led to."""
        if not session_id:
            raise InvalidArgument("session_id is required")
        session = self.store.get_session(session_id)
        if session is None:
            raise NotFound(f"session not found: {session_id}")
        b = parse_time(before, name="before")
        a = parse_time(after, name="after")
        prompts = self.store.session_prompts(session_id, b, a)
        observations = self.store.session_observations(session_id, b, a)
        by_prompt: dict[int | None, list[dict[str, Any]]] = {}
        for obs in observations:
            by_prompt.setdefault(obs.prompt_id, []).append({
                "id": obs.id, "timestamp": obs.timestamp, "obs_type": obs.obs_type,
                "file_path": obs.file_path, "content_preview": obs.preview(),
                "is_pinned": obs.is_pinned,
            })
        entries: list[dict[str, Any]] = []
        orphans = by_prompt.pop(None, [])
        if orphans:
            entries.append({"prompt_id": None, "timestamp": orphans[0]["timestamp"], "source": "system",
                            "content": "session events", "observation_count": len(orphans),
                            "observations": orphans})
        known = {p.id for p in prompts}
        for prompt in prompts:
            obs_list = by_prompt.get(prompt.id, [])
            entries.append({"prompt_id": prompt.id, "timestamp": prompt.timestamp,
                            "source": prompt.source, "content": prompt.content,
                            "observation_count": len(obs_list), "observations": obs_list})
        # Observations whose prompt lies outside the window still belong to the trace.
        for pid, obs_list in by_prompt.items():
            if pid not in known:
                entries.append({"prompt_id": pid, "timestamp": obs_list[0]["timestamp"],
                                "source": "system", "content": "(prompt outside the window)",
                                "observation_count": len(obs_list), "observations": obs_list})
        entries.sort(key=lambda e: (e["timestamp"], e["prompt_id"] or 0))
        return {
            "session_id": session.id, "project": session.project, "urn": session.urn,
            "started_at": session.started_at, "ended_at": session.ended_at,
            "signature": session.signature, "summary": session.summary, "prompts": entries,
        }

    def file_history(self, file_path: str, *, before: Any = None, after: Any = None,
                     limit: int | None = 10, cwd: str | None = None) -> dict[str, Any]:
        """Every session that touched a file, newest first, with the intent behind each touch."""
        if not file_path:
            raise InvalidArgument("file_path is required")
        path = file_path
        if not os.path.isabs(path):
            path = os.path.normpath(os.path.join(cwd or os.getcwd(), path))
        lim = clamp(_as_int(limit, "limit") if limit is not None else None, 1, MAX_IDS, 10)
        touches = self.store.file_touches(path, parse_time(before, name="before"),
                                          parse_time(after, name="after"), lim)
        sessions: dict[str, dict[str, Any]] = {}
        for obs, prompt_content in touches:
            entry = sessions.get(obs.session_id)
            if entry is None:
                session = self.store.get_session(obs.session_id)
                summary = session.summary if session else None
                entry = sessions[obs.session_id] = {
                    "session_id": obs.session_id, "project": obs.project,
                    "started_at": session.started_at if session else None,
                    "summary_intent": summary.get("intent") if isinstance(summary, dict) else None,
                    "touches": [],
                }
            entry["touches"].append({
                "observation_id": obs.id, "timestamp": obs.timestamp, "obs_type": obs.obs_type,
                "content_preview": obs.preview(), "prompt_content": prompt_content,
                "is_pinned": obs.is_pinned, "urn": obs.urn,
            })
        return {"file_path": path, "sessions": list(sessions.values())}

    def recent_context(self, project: str | None = None, limit: int | None = 30) -> list[dict[str, Any]]:
        """Recent observations by composite score (recency, type weight, project boost)."""
        lim = clamp(_as_int(limit, "limit") if limit is not None else None, 1, MAX_LIMIT, 30)
        scored = self.store.recent_scored(project or None, lim, self.now())
        return [{**obs.to_dict(), "score": round(score, 4)} for obs, score in scored]


class _Trail:
    """What ranking gathers around the candidates of one trail scope: their session windows
    and, for every record involved, its stem counts, length and time. A label or an answer
    counts only in a candidate's own text, so only candidates are read for them."""

    def __init__(self, store: Store, scope: str, counter: rank.TermCounter, span: int,
                 cue: Callable[[str], bool] | None = None) -> None:
        self.store, self.scope, self.counter, self.span, self.cue = store, scope, counter, span, cue
        self.windows: dict[int, list[tuple[int, int]]] = {}
        self.docs: dict[int, rank.Doc] = {}
        self.times: dict[int, int] = {}
        self._texts: dict[int, str] = {}

    def load(self, candidates: Sequence[int]) -> None:
        if self.span and candidates:
            self.windows.update(self.store.session_windows(self.scope, candidates, self.span))
        wanted = {*candidates, *(n for i in candidates for n, _ in self.windows.get(i, ()))}
        rows = self.store.fts_texts(self.scope, sorted(wanted - self.docs.keys()))
        counts = self.counter.count_many([text for text, _, _ in rows.values()])
        for (i, (text, length, at)), c in zip(rows.items(), counts, strict=True):
            self.docs[i] = rank.Doc(c, length)
            self.times[i] = at
            self._texts[i] = text
        counter, cue = self.counter, self.cue
        for i in candidates:
            own = self._texts.get(i)
            if own is not None:
                doc = self.docs[i]
                self.docs[i] = rank.Doc(doc.counts, doc.length, counter.labelled(own), cue is not None and cue(own))


def _within(filters: SearchFilters, when: TimeRange, slack_days: float) -> SearchFilters:
    """The filters narrowed to a time range widened by `slack_days` on each side."""
    slack = int(slack_days * rank.DAY)
    start = when.start - slack if when.start is not None else None
    end = when.end - 1 + slack if when.end is not None else None
    if filters.date_start is not None:
        start = filters.date_start if start is None else max(start, filters.date_start)
    if filters.date_end is not None:
        end = filters.date_end if end is None else min(end, filters.date_end)
    return filters.replace(date_start=start, date_end=end)


def _scope_excluded(scope: str, filters: SearchFilters) -> bool:
    """Whether a filter names something the scope's records never have, so it has no hits:
    a namespace or tag (only memories have them), a type or file (only observations), a
    session (memories belong to none)."""
    if scope == "memories":
        return bool(filters.obs_types or filters.files or filters.session_id)
    if filters.namespaces or filters.tags:
        return True
    return scope != "observations" and bool(filters.obs_types or filters.files)


def _hit_time(hit: SearchHit) -> int:
    record = hit.record
    for attr in ("timestamp", "updated_at", "started_at"):
        value = getattr(record, attr, None)
        if isinstance(value, int):
            return value
    return 0
