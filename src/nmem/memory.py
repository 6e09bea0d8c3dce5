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

from nmem import changefeed
from nmem.capture.privacy import scrub
from nmem.capture.project import git_toplevel
from nmem.capture.recorder import RecordOutcome
from nmem.config import Settings
from nmem.core import MAX_IDS, MAX_LIMIT, CoreService, _as_int, _as_list, clamp
from nmem.errors import Ambiguous, InvalidArgument, NotFound, ValidationError
from nmem.lifecycle.service import Lifecycle
from nmem.models import (
    ORDERS,
    SCOPES,
    SESSION_REF_CHARS,
    TIERS,
    Memory,
    Observation,
    Prompt,
    SearchHit,
    Session,
    preview,
    prompt_ref,
    session_ref,
    spec_tag,
)
from nmem.refs import MEMORY, OBSERVATION, PROMPT, SESSION, Ref, parse_ref
from nmem.search import rank
from nmem.search.query import QueryPlan, plan, quote
from nmem.search.timeexpr import TimeRange, find_time
from nmem.store import SearchFilters
from nmem.store.protocol import Store
from nmem.timeutil import parse_time

__all__ = ["CoreService", "RecordOutcome", "SearchResult", "Service"]

RECALL_MODES = ("bm25", "vector", "hybrid")
RECALL_DETAILS = ("minimal", "summary", "full")
RANKED_SCOPES = ("observations", "prompts", "all")   # trail scopes ranked with context windows
MAX_OFFSET = 2**62
CANDIDATES_SHOWN = 10   # sessions or paths an ambiguous prefix or suffix lists
PATH_CANDIDATES = 200   # recorded paths a suffix is checked against
AnyRecord = Observation | Prompt | Session | Memory


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    query: str | None
    match: str | None                  # the FTS5 expression that produced the hits

    def to_list(self, full: bool = False) -> list[dict[str, Any]]:
        return [hit.to_dict(full=full) for hit in self.hits]


class Service(Lifecycle):
    """nmem's API: capture and curation (`CoreService`), the lifecycle (`Lifecycle`: tiers, sweep,
    consolidate), search, recall and navigation."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        super().__init__(store, settings, clock)
        self.ranking = rank.Ranking()

    # -- curated memories ----------------------------------------------------------------

    def capture(self, content: str, *, summary: str | None = None, namespace: str | None = None,
                spec: str | None = None, tags: Iterable[str] | str | None = None, **options: Any) -> dict[str, Any]:
        """`remember` with subcog's answer (§2.2.1): the memory plus `memory_id`, `uri`, `indexed`
        (the full-text index holds it) and `warning` (secrets redacted, a duplicate kept), or
        None. `spec` is kept as the tag `spec:<name>`, which `recall --spec` filters on."""
        wanted = list(_as_list(tags, "tags"))
        if spec is not None:
            if not str(spec).strip():
                raise InvalidArgument("spec must not be empty")
            wanted.append(spec_tag(str(spec)))
        target = self._domain(options.get("domain"), options.get("project"))
        body = scrub(content or "").strip()
        twins = [m.id for m in self.store.iter_memories(target, self._namespace(namespace))
                 if body and m.content == body]
        memory = self.remember(content, summary=summary, namespace=namespace, tags=wanted, **options)
        warnings: list[str] = []
        if body != (content or "").strip() or (summary is not None and memory.summary != summary.strip()) \
                or any(scrub(t) != t for t in wanted):
            warnings.append("secrets redacted")
        if twins:
            warnings.append(f"duplicate of {', '.join(twins[:3])} (kept as a new memory)")
        return {"success": True, "memory_id": memory.id, "uri": memory.urn,
                "indexed": self.store.memory_indexed(memory.id), "warning": "; ".join(warnings) or None,
                **memory.to_dict()}

    def recall(self, query: str | None = None, *, namespace: str | None = None,
               tags: Iterable[str] | str | None = None, domain: str | None = None,
               project: str | None = None, limit: int | None = 10,
               include_archived: bool = False, mode: str | None = None,
               min_similarity: float | None = None, spec: str | None = None) -> list[SearchHit]:
        """Search curated memories only; counts as an access. `mode`: `bm25` (full-text only),
        `vector` (nearest vectors) or `hybrid` (both fused); None follows `search.embeddings`."""
        return self._recall(query, namespace=namespace, tags=tags, domain=domain, project=project, limit=limit,
                            include_archived=include_archived, mode=mode, min_similarity=min_similarity,
                            spec=spec)[0]

    def recall_results(self, query: str | None = None, *, detail: str = "summary", **options: Any
                       ) -> list[dict[str, Any]]:
        """`recall` as JSON-ready rows at a detail level: `minimal` (ids, summary, URN),
        `summary` (index entry: metadata and a preview) or `full` (the whole memory). Each row
        carries `number`, the integer id srvrmgr's `forget(id)` takes, and `similarity` when
        vectors were compared."""
        if detail not in RECALL_DETAILS:
            raise InvalidArgument(f"unknown detail {detail!r}; valid: {', '.join(RECALL_DETAILS)}")
        hits, similarity = self._recall(query, **options)
        numbers = self.store.memory_numbers([str(h.record.id) for h in hits])
        rows: list[dict[str, Any]] = []
        for hit in hits:
            uid = str(hit.record.id)
            row = hit.to_dict(full=detail == "full")
            if detail == "minimal":
                row = {k: row[k] for k in ("kind", "id", "namespace", "summary", "urn", "score")}
            row["number"] = numbers.get(uid)
            if uid in similarity:
                row["similarity"] = round(similarity[uid], 4)
            rows.append(row)
        return rows

    def _recall(self, query: str | None, *, namespace: str | None = None,
                tags: Iterable[str] | str | None = None, domain: str | None = None,
                project: str | None = None, limit: int | None = 10, include_archived: bool = False,
                mode: str | None = None, min_similarity: float | None = None,
                spec: str | None = None) -> tuple[list[SearchHit], dict[str, float]]:
        self.refresh_tiers()  # tiers older than a day are recomputed first
        if mode is not None and mode not in RECALL_MODES:
            raise InvalidArgument(f"unknown mode {mode!r}; valid: {', '.join(RECALL_MODES)}")
        if min_similarity is not None:
            if isinstance(min_similarity, bool) or not isinstance(min_similarity, (int, float)):
                raise InvalidArgument(f"min_similarity must be a number, got {min_similarity!r}")
            if not 0.0 <= float(min_similarity) <= 1.0:
                raise ValidationError(f"min_similarity must be between 0.0 and 1.0, got {min_similarity}")
            if mode == "bm25":
                raise InvalidArgument("min_similarity compares vectors: use mode vector or hybrid, not bm25")
            mode = mode or "hybrid"
        domains: tuple[str, ...] = ()
        if domain and domain != "all":
            domains = (self._domain(domain, project),)
        wanted = list(_as_list(tags, "tags"))
        if spec is not None:
            if not str(spec).strip():
                raise InvalidArgument("spec must not be empty")
            wanted.append(spec_tag(str(spec)))
        filters = SearchFilters(
            project=project if project not in (None, "*") else None,
            namespaces=(self._namespace(namespace),) if namespace else (),
            domains=domains, tags=tuple(wanted), include_archived=include_archived,
        )
        lim = clamp(limit, 1, MAX_LIMIT, 10, "limit")
        similarity: dict[str, float] = {}
        if mode in ("vector", "hybrid"):
            from nmem.search import embeddings

            embedder = embeddings.require_embedder(self.settings, f"recall mode {mode}")
            embeddings.embed_memories(self.store, embedder)
            fusion = "dense" if mode == "vector" else None
            if fusion is None and embeddings.fusion_settings(self.settings)[0] == "dense":
                fusion = "weighted"
            fused = embeddings.hybrid_search(self, "memories", query, filters, "relevance", lim, 0,
                                             embedder=embedder, fusion=fusion)
            hits = fused.hits if fused is not None else self._search(
                "memories", query, filters, "relevance", lim, 0, lexical=True).hits
            if query and query.strip():
                similarity = embeddings.memory_similarity(self.store, embedder, query,
                                                          [str(h.record.id) for h in hits])
            if min_similarity is not None:
                hits = [h for h in hits if similarity.get(str(h.record.id), 0.0) >= float(min_similarity)]
        else:
            hits = self._search("memories", query, filters, "relevance", lim, 0, lexical=mode == "bm25").hits
        self.store.touch_memories([str(h.record.id) for h in hits], self.now())
        return hits, similarity

    def status(self, domain: str | None = None, verify: bool = False) -> dict[str, Any]:
        """`CoreService.status` plus memories by domain; `domain` narrows the memory counts to
        one (project, project:<name>, user, org); `verify` adds SQLite's integrity check and
        each full-text index checked against its table (`verify.ok` false on any finding)."""
        data = super().status()
        by_domain: dict[str, int] = {}
        live = list(self.store.iter_memories(None, None))
        for memory in live:
            by_domain[memory.domain] = by_domain.get(memory.domain, 0) + 1
        data["by_domain"] = dict(sorted(by_domain.items(), key=lambda kv: (-kv[1], kv[0])))
        if domain and domain != "all":
            target = self._domain(domain, None)
            mine = [m for m in live if m.domain == target]
            by_ns: dict[str, int] = {}
            by_tier: dict[str, int] = {}
            for memory in mine:
                by_ns[memory.namespace] = by_ns.get(memory.namespace, 0) + 1
                by_tier[memory.tier] = by_tier.get(memory.tier, 0) + 1
            data.update(domain=target, memories=len(mine),
                        by_namespace=dict(sorted(by_ns.items(), key=lambda kv: (-kv[1], kv[0]))),
                        by_tier={t: by_tier[t] for t in TIERS if t in by_tier})
        if verify:
            integrity = self.store.integrity()
            fts = self.store.fts_consistency()
            data["verify"] = {"ok": integrity == "ok" and all(v == "ok" for v in fts.values()),
                              "integrity": integrity, "fts": fts}
        return data

    # -- search and navigation -------------------------------------------------------------

    def search(self, query: str | None = None, *, scope: str = "observations",
               project: str | None = None, obs_type: str | Sequence[str] | None = None,
               namespace: str | Sequence[str] | None = None, tags: Any = None, files: Any = None,
               session_id: str | None = None, date_start: Any = None, date_end: Any = None,
               order_by: str = "relevance", limit: int | None = None, offset: int | None = 0,
               source: str | None = None, strict: bool = False, prefer_project: str | None = None,
               cwd: str | None = None, raw: bool | None = None) -> SearchResult:
        """Full-text search with filters over one scope or all of them.

        `strict` keeps only records holding every word (FTS5 syntax as typed), never the
        candidates relevance ranking takes from any shared word: what pipes and purges need.
        Without a `project` filter, `prefer_project`'s hits come first, then the others'
        (ADR-006: project match is a boost, not a filter). `raw` (default: the `search.raw`
        setting) is ADR-006's strict mode: the query goes to FTS5 exactly as typed and hits come
        in plain BM25 order, no rewriting or reranking. A session is named by id, unique
        prefix or URN; a relative file path as `resolve_file` reads it from `cwd`."""
        if raw is None:
            raw = bool(self.settings["search.raw"])
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
        # An offset past 2**62 is past the end of any database; capped, offset + limit stays an integer SQLite takes.
        off = min(_as_int(offset or 0, "offset", low=0), MAX_OFFSET)
        lim = clamp(limit, 1, MAX_LIMIT, int(self.settings["search.default_limit"]), "limit")
        only = project if project not in (None, "", "*") else None
        filters = SearchFilters(
            project=only,
            obs_types=types,
            namespaces=tuple(self._namespace(n) for n in _as_list(namespace, "namespace")),
            tags=_as_list(tags, "tags"),
            files=tuple(self.resolve_file(f, cwd=cwd, project=only) for f in _as_list(files, "files")),
            session_id=self.session(session_id).id if session_id else None, source=source,
            date_start=start, date_end=end,
        )
        if prefer_project and only is None:
            return self._project_first(prefer_project, scope, query, filters, order_by, lim, off, strict, raw)
        return self._search(scope, query, filters, order_by, lim, off, strict=strict, raw=raw)

    def _project_first(self, project: str, scope: str, query: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int, strict: bool, raw: bool = False) -> SearchResult:
        """The hits of `project` in their order, then the other projects' in theirs."""
        want = offset + limit
        if scope in ("observations", "prompts", "sessions") and not self.store.search_sessions(
                None, SearchFilters(project=project), "date_desc", 1, 0):
            own = SearchResult([], query, None)  # no trail there yet: spare the filtered walk of every match
        else:
            own = self._search(scope, query, filters.replace(project=project), order, want, 0, strict=strict,
                               raw=raw)
        hits, match = list(own.hits), own.match
        if len(hits) < want:
            seen = {(h.kind, str(h.record.id)) for h in hits}
            rest = self._search(scope, query, filters, order, want + len(hits), 0, strict=strict, raw=raw)
            hits += [h for h in rest.hits if (h.kind, str(h.record.id)) not in seen][:want - len(hits)]
            match = match if own.hits else rest.match
        return SearchResult(hits[offset:want], query, match)

    def _search(self, scope: str, query: str | None, filters: SearchFilters, order: str,
                limit: int, offset: int, *, strict: bool = False, raw: bool = False,
                lexical: bool = False) -> SearchResult:
        if raw:  # ADR-006: the query goes to FTS5 as typed, ordered by plain BM25
            match = query.strip() if query and query.strip() else None
            return SearchResult(self._run_scopes(scope, match, filters, order, limit, offset), query, match)
        if strict:
            match = strict_match(query)
            if match == "":
                return SearchResult([], query, None)
            return SearchResult(self._run_scopes(scope, match, filters, order, limit, offset), query, match)
        if not lexical and self.settings["search.embeddings"] != "none":  # optional embeddings fused with BM25
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
        return [SearchHit("memory", s, r) for r, s in store.search_memories(match, filters, order, limit, offset)]

    def get_observations(self, ids: Sequence[Any]) -> list[Observation]:
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids is None or len(ids) == 0:
            raise InvalidArgument("ids array must not be empty")
        if len(ids) > MAX_IDS:
            raise InvalidArgument(f"at most {MAX_IDS} ids per request (got {len(ids)})")
        return self.store.get_observations([_as_int(i, "id") for i in ids])

    def timeline(self, anchor: Any = None, *, query: str | None = None, before: int | None = 5,
                 after: int | None = 5, project: str | None = None,
                 prefer_project: str | None = None) -> dict[str, Any]:
        """Observations around an anchor in its session (anchor by id, or the best match of a query)."""
        if anchor is None and not (query and query.strip()):
            raise InvalidArgument("timeline needs an anchor id or a query")
        if anchor is None:
            found = self.search(query, project=project, prefer_project=prefer_project, limit=1)
            if not found.hits:
                raise NotFound(f"no observation matches {query!r}")
            anchor_obs = found.hits[0].record
            assert isinstance(anchor_obs, Observation)
        else:
            rows = self.store.get_observations([_as_int(anchor, "anchor")])
            if not rows:
                raise NotFound("anchor observation not found")
            anchor_obs = rows[0]
        b = clamp(before, 0, MAX_LIMIT, 5, "before")
        a = clamp(after, 0, MAX_LIMIT, 5, "after")
        prev, nxt = self.store.neighbours(anchor_obs, b, a)
        return {
            "anchor": anchor_obs.to_dict(),
            "before": [o.to_dict() for o in prev],
            "after": [o.to_dict() for o in nxt],
        }

    def session_trace(self, session_id: str | None = None, *, before: Any = None, after: Any = None,
                      project: str | None = None) -> dict[str, Any]:
        """A session's prompts in order, each with the observations it led to. The session is
        named by id, unique prefix or URN; without one, the latest of `project` (or of all)."""
        session = self.session(session_id) if session_id else self.latest_session(project)
        session_id = session.id
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
            entries.append({"prompt_id": None, "ref": None, "timestamp": orphans[0]["timestamp"], "source": "system",
                            "content": "session events", "observation_count": len(orphans),
                            "observations": orphans})
        known = {p.id for p in prompts}
        for prompt in prompts:
            obs_list = by_prompt.get(prompt.id, [])
            entries.append({"prompt_id": prompt.id, "ref": prompt.ref, "timestamp": prompt.timestamp,
                            "source": prompt.source, "content": prompt.content,
                            "observation_count": len(obs_list), "observations": obs_list})
        # Observations whose prompt lies outside the window still belong to the trace.
        for pid, obs_list in by_prompt.items():
            if pid not in known:
                entries.append({"prompt_id": pid, "ref": prompt_ref(pid) if pid is not None else None,
                                "timestamp": obs_list[0]["timestamp"],
                                "source": "system", "content": "(prompt outside the window)",
                                "observation_count": len(obs_list), "observations": obs_list})
        entries.sort(key=lambda e: (e["timestamp"], e["prompt_id"] or 0))
        return {
            "session_id": session.id, "ref": session.ref, "project": session.project, "urn": session.urn,
            "started_at": session.started_at, "ended_at": session.ended_at,
            "signature": session.signature, "summary": session.summary, "prompts": entries,
        }

    def file_history(self, file_path: str, *, before: Any = None, after: Any = None,
                     limit: int | None = 10, cwd: str | None = None) -> dict[str, Any]:
        """Every session that touched a file, newest first, with the intent behind each touch.
        A relative path is read as `resolve_file` reads it."""
        if not file_path:
            raise InvalidArgument("file_path is required")
        path = self.resolve_file(file_path, cwd=cwd)
        lim = clamp(limit, 1, MAX_IDS, 10, "limit")
        touches = self.store.file_touches(path, parse_time(before, name="before"),
                                          parse_time(after, name="after"), lim)
        sessions: dict[str, dict[str, Any]] = {}
        for obs, prompt_content in touches:
            entry = sessions.get(obs.session_id)
            if entry is None:
                session = self.store.get_session(obs.session_id)
                summary = session.summary if session else None
                entry = sessions[obs.session_id] = {
                    "session_id": obs.session_id, "ref": session_ref(obs.session_id), "project": obs.project,
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

    # -- the ids people see, sessions and paths ---------------------------------------------

    def resolve(self, ref: str) -> Ref:
        """What an id or URN nmem printed names (`nmem.refs`): its kind and key, a session's
        whole id found from its prefix. A session that is not there is NotFound, a prefix
        several sessions share Ambiguous; other kinds are checked when read (`get`)."""
        parsed = parse_ref(ref)
        if parsed.kind != SESSION:
            return parsed
        key = str(parsed.key)
        if parsed.prefix:  # s1a2b3c4d: session 1a2b3c4d…, or a whole id that starts with an s
            found = self._find_session(parsed.text, [key, parsed.text], [key], None)
        else:
            found = self._find_session(parsed.text, [key], [], parsed.project)
        return parsed.resolved(found.id)

    def session(self, ref: str | None) -> Session:
        """A session by whole id, unique prefix of it (with or without the `s` nmem shows) or URN."""
        text = (ref or "").strip()
        if not text:
            raise InvalidArgument("a session id is required")
        if text.startswith("nmem://"):
            parsed = parse_ref(text)
            if parsed.kind != SESSION:
                raise InvalidArgument(f"{text} names {parsed.kind} {parsed.key}, not a session")
            return self._find_session(text, [str(parsed.key)], [], parsed.project)
        forms = [text, text[1:]] if text[0] in "sS" and len(text) > 1 else [text]
        return self._find_session(text, forms, forms, None)

    def _find_session(self, text: str, whole: Sequence[str], prefixes: Sequence[str],
                      project: str | None) -> Session:
        """The first session whose id is one of `whole` (a whole id wins over a prefix), else
        the only one whose id starts with one of `prefixes`, of `project` if given."""
        store = self.store
        found = next(([s] for s in map(store.get_session, whole) if s is not None), [])
        if not found:
            candidates: dict[str, Session] = {}
            for prefix in prefixes:
                for session in store.sessions_by_prefix(prefix, CANDIDATES_SHOWN + 1):
                    candidates.setdefault(session.id, session)
            found = list(candidates.values())
        if project is not None:
            found = [s for s in found if s.project == project]
        if not found:
            raise NotFound(f"session not found: {text}")
        if len(found) > 1:
            # each as `s` + as much of its id as tells it from the others (at least what tables show)
            size = max(SESSION_REF_CHARS, _shared_length([s.id for s in found]) + 1)
            shown = ", ".join(f"s{s.id[:size]} ({s.project}, {_local_time(s.started_at)})"
                              for s in found[:CANDIDATES_SHOWN])
            more = " and more" if len(found) > CANDIDATES_SHOWN else ""
            raise Ambiguous(f"session {text} is ambiguous: it starts {shown}{more}; give more of the id")
        return found[0]

    def latest_session(self, project: str | None = None) -> Session:
        """The session of `project` (of any, if None) that started last and recorded anything."""
        rows = self.store.list_sessions(project or None, None, 1, active=True)
        if not rows:
            raise NotFound(f"no session recorded for project {project}" if project else "no session recorded")
        return rows[0].session

    def sessions(self, project: str | None = None, *, since: Any = None,
                 limit: int | None = 20) -> list[dict[str, Any]]:
        """Sessions newest first (of `project`, or of all), each with its counts and intent."""
        lim = clamp(_as_int(limit, "limit") if limit is not None else None, 1, MAX_LIMIT, 20)
        rows = self.store.list_sessions(project or None, parse_time(since, name="since"), lim)
        out = []
        for row in rows:
            session = row.session
            ended = session.ended_at
            out.append({
                "id": session.id, "ref": session.ref, "project": session.project,
                "started_at": session.started_at, "ended_at": ended,
                "duration": ended - session.started_at if ended is not None else None,
                "prompts": row.prompts, "actions": row.actions,
                "intent": preview(session.intent or row.first_prompt or ""), "urn": session.urn,
            })
        return out

    def get(self, refs: Sequence[str]) -> tuple[list[AnyRecord], list[str]]:
        """The records ids and URNs name, in the order asked, and the ids that name nothing."""
        if isinstance(refs, (str, bytes)):
            raise InvalidArgument("refs must be a list of ids, not a string")
        if not refs:
            raise InvalidArgument("give at least one id")
        if len(refs) > MAX_LIMIT:
            raise InvalidArgument(f"at most {MAX_LIMIT} ids per request (got {len(refs)})")
        resolved: list[tuple[str, Ref | None]] = []
        for asked in refs:
            try:
                resolved.append((str(asked), self.resolve(str(asked))))
            except NotFound:
                resolved.append((str(asked), None))
        wanted = [r for _, r in resolved if r is not None]
        trail: dict[tuple[str, int | str], AnyRecord] = {}
        for obs in self.store.get_observations([int(r.key) for r in wanted if r.kind == OBSERVATION]):
            trail[OBSERVATION, obs.id] = obs
        for prompt in self.store.get_prompts([int(r.key) for r in wanted if r.kind == PROMPT]):
            trail[PROMPT, prompt.id] = prompt
        records: list[AnyRecord] = []
        missing: list[str] = []
        for text, ref in resolved:
            record: AnyRecord | None = None
            if ref is None:
                pass
            elif ref.kind == MEMORY:
                try:
                    record = self.get_memory(str(ref.key))
                except NotFound:
                    record = None
            elif ref.kind == SESSION:
                record = self.store.get_session(str(ref.key))
            else:
                record = trail.get((ref.kind, ref.key))
            if record is not None and ref is not None and ref.project is not None \
                    and getattr(record, "project", None) != ref.project:
                record = None  # a URN naming another project's record
            if record is None:
                missing.append(text)
            else:
                records.append(record)
        self.store.touch_memories([str(r.id) for r in records if isinstance(r, Memory)], self.now())
        return records, missing

    def resolve_file(self, path: str, *, cwd: str | None = None, project: str | None = None) -> str:
        """The recorded file a path names. An absolute path is itself. A relative one is read
        from the project root (the git top-level of `cwd`, not the subdirectory), else as the
        end of a recorded path (`invoice.py` finds `/repo/billing/invoice.py`): one under the
        project root wins, else the only one anywhere; several are Ambiguous, listed. When no
        recorded path fits, the root-relative path (which matches nothing yet)."""
        text = (path or "").strip()
        if not text:
            raise InvalidArgument("a file path is required")
        if os.path.isabs(text):
            return os.path.normpath(text)
        base = os.path.abspath(cwd or os.getcwd())
        root = git_toplevel(base) or base
        joined = os.path.normpath(os.path.join(root, text))
        suffix = os.path.normpath(text)
        store = self.store
        if store.recorded_paths(joined, project, 1) or suffix.startswith(".."):
            return joined
        found = store.recorded_paths(suffix, project, PATH_CANDIDATES)
        candidates = [p for p in found if p.startswith(root.rstrip(os.sep) + os.sep)] or found
        if not candidates:
            return joined
        if len(candidates) > 1:
            shown = ", ".join(candidates[:CANDIDATES_SHOWN])
            more = f" and {len(candidates) - CANDIDATES_SHOWN} more" if len(candidates) > CANDIDATES_SHOWN else ""
            raise Ambiguous(f"{text} is ambiguous: it ends {len(candidates)} recorded paths: {shown}{more}; "
                            "give more of the path")
        return candidates[0]

    # -- purges by query -----------------------------------------------------------------------

    def purge_selection(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
                        older_than: int | None = None, project: str | None = None,
                        query: str | None = None) -> list[int]:
        """The ids of the observations `purge` would delete with the same selectors."""
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids:
            self._purge_filters(ids, obs_type, older_than, project, query)
            return [o.id for o in self.store.get_observations([_as_int(i, "id") for i in ids])]
        match, filters = self._purge_filters(ids, obs_type, older_than, project, query)
        return self.store.observation_ids(match, filters)

    def purge(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
              older_than: int | None = None, project: str | None = None,
              confirm: bool = False, query: str | None = None) -> int:
        """Delete observations by id, or by a strict query (every word) and/or type and age;
        pinned rows are kept except when named by id."""
        if query is None:
            return super().purge(ids=ids, obs_type=obs_type, older_than=older_than, project=project,
                                 confirm=confirm)
        if not confirm:
            raise InvalidArgument("purge deletes data: pass --confirm (confirm=true) to proceed")
        match, filters = self._purge_filters(ids, obs_type, older_than, project, query)
        return self.store.purge_observations_matching(match, filters)

    def _purge_filters(self, ids: Sequence[int | str], obs_type: str | Sequence[str] | None,
                       older_than: int | None, project: str | None,
                       query: str | None) -> tuple[str | None, SearchFilters]:
        types = _as_list(obs_type, "obs_type") if obs_type else ()
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

    def recent_context(self, project: str | None = None, limit: int | None = 30) -> list[dict[str, Any]]:
        """Recent observations by composite score (recency, type weight, project boost)."""
        lim = clamp(limit, 1, MAX_LIMIT, 30, "limit")
        scored = self.store.recent_scored(project or None, lim, self.now())
        return [{**obs.to_dict(), "score": round(score, 4)} for obs, score in scored]

    def change_cursor(self) -> changefeed.Cursor:
        """The change feed's "now": reading from it returns only what is written next."""
        return changefeed.head(self.store)

    def changes(self, since: str | changefeed.Cursor | None = None, limit: int | None = 100
                ) -> tuple[list[changefeed.Change], changefeed.Cursor]:
        """What was written since `since` (a cursor from a change or from `change_cursor`; `0`
        for everything), by any process: new observations, prompts and sessions, memories
        created, updated or forgotten, sessions ended. Oldest first, with the cursor to go on from."""
        lim = clamp(limit, 1, changefeed.MAX_BATCH, 100, "limit")
        if since is None:
            return [], self.change_cursor()
        cursor = since if isinstance(since, changefeed.Cursor) else changefeed.Cursor.parse(since)
        found, after = changefeed.read_changes(self.store, cursor, lim)
        return [c for c in found if changefeed.may_see(self.store, c)], after

    def activity(self, days: int | None = 30, project: str | None = None) -> list[dict[str, Any]]:
        """Observations and prompts per UTC day over the last `days` days (1 to 366), every day
        listed, oldest first: what the viewer's activity chart draws."""
        span = clamp(days, 1, 366, 30, "days")
        today = self.now() // 86400
        first = today - span + 1
        counts = {day: (o, p) for day, o, p in self.store.activity_by_day(first * 86400, project or None)}
        rows = []
        for number in range(first, today + 1):
            day = time.strftime("%Y-%m-%d", time.gmtime(number * 86400))
            obs, prompts = counts.get(day, (0, 0))
            rows.append({"day": day, "observations": obs, "prompts": prompts})
        return rows


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


def strict_match(query: str | None) -> str | None:
    """The FTS5 expression a strict search runs: FTS5 syntax as typed, else every content
    word (the AND tier of `nmem.search.query.plan`), never a looser tier; None without a
    query, "" when the query holds nothing to match (only punctuation)."""
    if query is None or not query.strip():
        return None
    tiers = plan(query).tiers
    return tiers[0] if tiers else ""


def _local_time(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _shared_length(texts: Sequence[str]) -> int:
    """How many leading characters all the texts share."""
    first, last = min(texts), max(texts)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return size
