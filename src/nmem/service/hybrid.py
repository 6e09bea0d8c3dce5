"""Hybrid retrieval: the BM25 candidates of a search fused with vector similarity when a
backend is configured (`search.embeddings`), or None so BM25 answers alone whenever embeddings
cannot help (FTS5 syntax typed by an expert, date ordering, sessions) or are unavailable."""

from __future__ import annotations

import contextvars

from nmem.models import SearchHit
from nmem.service.args import checked_query
from nmem.service.base import Base
from nmem.service.search import SearchResult
from nmem.store import SearchFilters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from nmem.search.embedders import Embedder, Vector
    from nmem.search.fusion import Key
    from nmem.store.protocol import Store

_in_hybrid: contextvars.ContextVar[bool] = contextvars.ContextVar("nmem_in_hybrid", default=False)


class Hybrid(Base):
    def _hybrid_search(self, scope: str, query: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int, *, embedder: Embedder | None = None,
                       fusion: str | None = None) -> SearchResult | None:
        """BM25 fused with vector similarity, or None to let BM25 answer alone. `embedder` and
        `fusion` override the settings (`recall --mode vector|hybrid`)."""
        checked_query(query)
        if _in_hybrid.get() or order != "relevance" or not query or not query.strip():
            return None
        from nmem.search import fusion as fu  # with the ranking it uses: a process that never searches skips both
        from nmem.search.query import plan

        query_plan = plan(query)
        if query_plan.raw or not query_plan.tiers:
            return None  # FTS5 syntax runs exactly as typed; punctuation alone finds nothing
        kinds = fu.kinds_for(scope, filters)
        if not kinds:
            return None
        configured, weight = fu.fusion_settings(self.settings)
        if embedder is None:
            if str(self.settings["search.embeddings"]).strip().lower() in ("", "none"):
                return None  # BM25 alone: the embedders (logging, pathlib, threading...) never load
            from nmem.search.embedders import active_embedder

            embedder = active_embedder(self.settings)
            if embedder is None:
                return None
        fusion = fusion or configured
        pool = max(fu.CANDIDATES, offset + limit)
        lexical = self._lexical(scope, query, filters, pool) if fusion != "dense" else SearchResult([], query, None)
        semantic = query
        if lexical.hits and self.settings["search.hybrid_drop_labels"]:
            semantic = fu.without_labels(query, fu.hit_labels(lexical.hits))
        similarity, nearest = self._similarity(kinds, embedder, embedder.embed([semantic])[0], filters,
                                               lexical.hits, pool)
        if fusion == "dense":
            ranked = fu.dense_ranking({k: similarity[k] for k in nearest})
        elif fusion == "rrf":
            ranked = fu.rrf_fusion([fu.key(h) for h in lexical.hits], nearest, weight)
        else:
            candidates = {k: similarity[k] for k in nearest}
            candidates.update((fu.key(h), similarity[fu.key(h)]) for h in lexical.hits if fu.key(h) in similarity)
            ranked = fu.weighted_fusion([(fu.key(h), h.score) for h in lexical.hits], candidates, weight)
        page = ranked[offset:offset + limit]
        return SearchResult(_hits(self.store, page, {fu.key(h): h for h in lexical.hits}), query, lexical.match)

    def _lexical(self, scope: str, query: str, filters: SearchFilters, pool: int) -> SearchResult:
        token = _in_hybrid.set(True)
        try:
            return self.api._search(scope, query, filters, "relevance", pool, 0)
        finally:
            _in_hybrid.reset(token)

    def _similarity(self, kinds: Sequence[str], embedder: Embedder, query_vec: Vector, filters: SearchFilters,
                    lexical: Sequence[SearchHit], pool: int) -> tuple[dict[Key, float], list[Key]]:
        """Each candidate's cosine, and the nearest vectors (at least `DENSE_FLOOR` of the best)."""
        from nmem.search import fusion as fu
        from nmem.search.embedders import cosines

        store = self.store
        similarity: dict[Key, float] = {}
        nearest: list[Key] = []
        for kind in kinds:
            ids, blobs = store.vector_scan(kind, embedder.name, filters, fu.DENSE_SCAN_ROWS)
            sims = dict(zip(((kind, i) for i in ids), cosines(query_vec, blobs), strict=True))
            nearest.extend(sorted(sims, key=lambda k: -sims[k])[:pool])
            similarity.update(sims)
        # BM25 candidates older than the scanned window still get their cosine.
        for kind in kinds:
            unseen = [h.record.id for h in lexical if h.kind == kind and (kind, h.record.id) not in similarity]
            if unseen:
                found = store.get_vectors(kind, embedder.name, unseen)
                similarity.update(zip(((kind, i) for i in found), cosines(query_vec, list(found.values())),
                                      strict=True))
        nearest.sort(key=lambda k: -similarity[k])
        best = max((similarity[k] for k in nearest), default=0.0)
        return similarity, [k for k in nearest[:pool] if similarity[k] > 0 and similarity[k] >= fu.DENSE_FLOOR * best]


def _hits(store: Store, page: Sequence[tuple[Key, float]], known: Mapping[Key, SearchHit]) -> list[SearchHit]:
    """The page's records: BM25 hits as found, the rest read from the store (one query per kind),
    each trail hit with its session's agent and root where the read brought them (`SearchHit.origin`)."""
    records: dict[Key, Any] = {k: h.record for k, h in known.items()}
    origin_of: dict[Key, tuple[str | None, str | None] | None] = {k: h.origin for k, h in known.items()}
    missing: dict[str, list[Any]] = {}
    for key, _ in page:
        if key not in records:
            missing.setdefault(key[0], []).append(key[1])
    for kind, ids in missing.items():
        if kind in ("observation", "prompt"):
            found = (store.get_observations if kind == "observation" else store.get_prompts)(ids)
            origins = getattr(found, "origins", {})   # their sessions' agents and roots, when read with them
            for r in found:
                records[(kind, r.id)] = r
                origin_of[(kind, r.id)] = origins.get(r.session_id)
        elif kind == "memory":
            for uid in ids:
                memory = store.get_memory(str(uid))
                if memory is not None and memory.deleted_at is None:
                    records[("memory", uid)] = memory
    return [SearchHit(key[0], score, records[key], origin=origin_of.get(key))
            for key, score in page if key in records]
