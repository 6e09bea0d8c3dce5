"""Recall: curated memories only, by full text, nearest vectors or both fused; counts as an access.
By default it covers one project's memories plus the user's and the organisation's."""

from __future__ import annotations

import time

from nmem.errors import ConfigError, InvalidArgument, ValidationError
from nmem.models import SearchHit
from nmem.service.args import MAX_LIMIT, tags_and_spec
from nmem.service.base import Base
from nmem.store import SearchFilters
from nmem.util.numbers import clamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

RECALL_MODES = ("bm25", "vector", "hybrid")
RECALL_DETAILS = ("minimal", "summary", "full")
REASON_SYSTEM = ("You answer a developer's question about their project from the memories given, and from "
                 "nothing else. Cite the memories you use by their [number]. Order events by their dates when "
                 "the question is about time. If the memories do not answer it, say so in one sentence.")
REASON_CHARS = 1500  # of each memory's content sent to the LLM


class Recall(Base):
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
        carries `number`, the integer id srvrmgr's `forget(id)` takes, `uri` (subcog's name for the
        URN), and `similarity` when vectors were compared."""
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
            row["uri"] = row["urn"]  # subcog's name for it (`jq -r '.results[].uri'`), as capture answers
            row["number"] = numbers.get(uid)
            if uid in similarity:
                row["similarity"] = round(similarity[uid], 4)
            rows.append(row)
        return rows

    def reason(self, question: str, **options: Any) -> dict[str, Any]:
        """subcog's `recall --reason`: recall memories for `question`, then have the optional LLM
        (`llm.provider`) answer it from them alone. Off unless an LLM is configured: without one
        a `ConfigError` (exit 3) says how to set it; a provider failure is an `LLMError` (exit 6)."""
        from nmem.lifecycle.llm import Provider  # httpx2 is loaded only when a question needs it

        if not isinstance(question, str) or not question.strip():
            raise InvalidArgument("--reason needs a question")
        provider = Provider.from_settings(self.settings)
        if provider is None:
            raise ConfigError("recall --reason needs an LLM: set llm.provider (openai or anthropic) and llm.model "
                              "(docs/lifecycle.md); plain recall works without one")
        rows = self.recall_results(question, detail="full", **options)
        listed = "\n\n".join(
            f"[{r['number']}] {r['namespace']} · {r.get('domain', '')} · updated "
            f"{time.strftime('%Y-%m-%d', time.gmtime(int(r.get('updated_at') or r.get('created_at') or 0)))}\n"
            f"{r['summary']}\n{str(r.get('content') or '')[:REASON_CHARS]}" for r in rows)
        answer = provider.complete(REASON_SYSTEM, f"Question: {question.strip()}\n\nMemories:\n\n"
                                                  f"{listed or '(none matched)'}")
        return {"question": question.strip(), "answer": answer, "llm": provider.name, "count": len(rows),
                "results": rows}

    def _recall(self, query: str | None, *, namespace: str | None = None,
                tags: Iterable[str] | str | None = None, domain: str | None = None,
                project: str | None = None, limit: int | None = 10, include_archived: bool = False,
                mode: str | None = None, min_similarity: float | None = None,
                spec: str | None = None) -> tuple[list[SearchHit], dict[str, float]]:
        self.api.refresh_tiers()  # tiers older than a day are recomputed first
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
        wanted = tags_and_spec(tags, spec)
        filters = SearchFilters(
            project=project if project not in (None, "*") else None,
            namespaces=(self._namespace(namespace),) if namespace else (),
            domains=domains, tags=tuple(wanted), include_archived=include_archived,
        )
        lim = clamp(limit, 1, MAX_LIMIT, 10, "limit")
        similarity: dict[str, float] = {}
        if mode in ("vector", "hybrid"):
            from nmem.search.embedders import memory_similarity, require_embedder
            from nmem.search.fusion import fusion_settings
            from nmem.service.indexer import embed_memories

            embedder = require_embedder(self.settings, f"recall mode {mode}")
            embed_memories(self.store, embedder)
            fusion = "dense" if mode == "vector" else None
            if fusion is None and fusion_settings(self.settings)[0] == "dense":
                fusion = "weighted"
            fused = self.api._hybrid_search("memories", query, filters, "relevance", lim, 0,
                                             embedder=embedder, fusion=fusion)
            hits = fused.hits if fused is not None else self.api._search(
                "memories", query, filters, "relevance", lim, 0, lexical=True).hits
            if query and query.strip():
                similarity = memory_similarity(self.store, embedder, query,
                                                          [str(h.record.id) for h in hits])
            if min_similarity is not None:
                hits = [h for h in hits if similarity.get(str(h.record.id), 0.0) >= float(min_similarity)]
        else:
            hits = self.api._search("memories", query, filters, "relevance", lim, 0, lexical=mode == "bm25").hits
        self.touch([str(h.record.id) for h in hits])
        return hits, similarity
