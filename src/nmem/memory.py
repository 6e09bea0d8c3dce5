"""The service API: the one place nmem's behaviour lives. CLI, hooks and MCP only adapt it.

Every public method validates its input (raising `nmem.errors` types), calls the store
and returns models or plain JSON-ready dicts.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from nmem.capture import events as ev
from nmem.capture.privacy import redact_url, scrub
from nmem.capture.project import project_name
from nmem.capture.recorder import Recorder, RecordOutcome
from nmem.config import Settings, load_settings
from nmem.errors import ContentBlocked, InvalidArgument, NotFound, ValidationError
from nmem.ids import new_uid
from nmem.models import (
    NAMESPACES,
    OBS_TYPES,
    ORDERS,
    SCOPES,
    TIERS,
    Memory,
    Observation,
    Prompt,
    SearchHit,
    preview,
    project_domain,
)
from nmem.search import rank
from nmem.search.query import QueryPlan, plan
from nmem.search.timeexpr import TimeRange, find_time
from nmem.store import NewMemory, SearchFilters, Store, open_store
from nmem.timeutil import parse_time

MAX_LIMIT = 100
MAX_IDS = 50
SUMMARY_CHARS = 100
NAMESPACE_ALIASES = {
    "decision": "decisions", "learning": "learnings", "learned": "learnings",
    "pattern": "patterns", "blocker": "blockers", "gotcha": "gotchas",
    "convention": "conventions", "api": "apis", "test": "testing",
}
RANKED_SCOPES = ("observations", "prompts", "all")   # trail scopes ranked with context windows
_SLUG = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_URN = re.compile(r"^nmem://(?P<domain>[^/]+)/(?P<ns>[^/]+)/(?P<id>[^/]+)$")


def clamp(value: int | None, low: int, high: int, default: int) -> int:
    if value is None:
        return default
    return max(low, min(high, int(value)))


def _as_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise InvalidArgument(f"{name} must be an integer, got {value!r}")


def _as_list(value: object, name: str) -> tuple[str, ...]:
    """Accept a list or a comma-separated string (claude-mem sends `files: "a.ts,b.ts"`)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise InvalidArgument(f"{name} must be a string or a list of strings")


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    query: str | None
    match: str | None                  # the FTS5 expression that produced the hits

    def to_list(self, full: bool = False) -> list[dict[str, Any]]:
        return [hit.to_dict(full=full) for hit in self.hits]


class Service:
    """nmem's API. One per process (or per request in a server); owns its store."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.ranking = rank.Ranking()

    @classmethod
    def open(cls, settings: Settings | None = None, *, busy_timeout_ms: int = 5000,
             readonly: bool = False) -> Service:
        settings = settings or load_settings()
        return cls(open_store(settings.store_url, busy_timeout_ms=busy_timeout_ms,
                              readonly=readonly), settings)

    def close(self, checkpoint: bool = True) -> None:
        self.store.close(checkpoint=checkpoint)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> int:
        return int(self.clock())

    def project_for(self, cwd: str | None = None) -> str:
        return project_name(cwd or os.getcwd(), self.settings["project.name"])

    # -- capture -----------------------------------------------------------------------

    def record_event(self, event: ev.HookEvent) -> RecordOutcome:
        """Store one hook event: the session row on first sight, then what the event adds."""
        project = self.project_for(event.cwd)
        if not self.settings.project_enabled(project, event.cwd):
            return RecordOutcome(event.session_id, project, skipped="disabled")
        if event.kind in (ev.TOOL, ev.TOOL_FAILURE) and self._tool_excluded(event.tool_name or ""):
            return RecordOutcome(event.session_id, project, skipped="excluded")
        with self.store.transaction():
            session = self.store.ensure_session(event.session_id, project, event.timestamp)
            # Subagent and resumed events keep the project their session started in.
            return Recorder(self.store, self.settings, self.remember).record(event, session.project)

    def _tool_excluded(self, tool: str) -> bool:
        return any(fnmatch.fnmatch(tool, p) for p in self.settings["capture.exclude_tools"])

    # -- curated memories ----------------------------------------------------------------

    def _namespace(self, namespace: str | None) -> str:
        ns = (namespace or "context").strip().lower()
        ns = NAMESPACE_ALIASES.get(ns, ns)
        if not _SLUG.match(ns):
            raise ValidationError(
                f"invalid namespace {namespace!r}: use a short lower-case slug such as "
                + ", ".join(NAMESPACES[:6])
            )
        return ns

    def _domain(self, domain: str | None, project: str | None) -> str:
        value = (domain or "project").strip()
        if value in ("user", "org"):
            return value
        if value == "project":
            return project_domain(project or self.project_for())
        if value.startswith("project:") and len(value) > len("project:"):
            return value
        raise ValidationError(f"invalid domain {domain!r}: use project, project:<name>, user or org")

    def remember(self, content: str, *, summary: str | None = None, namespace: str | None = None,
                 tags: Iterable[str] | str | None = None, domain: str | None = None,
                 project: str | None = None, source: str | None = None,
                 relates_to: Iterable[str] | str | None = None, tier: str = "warm",
                 pinned: bool = False, at: int | None = None) -> Memory:
        """Store a curated memory and return it (its `urn` names it everywhere)."""
        body = scrub(content or "").strip()
        if not body:
            if (content or "").strip():
                raise ContentBlocked("nothing left to store: the content is entirely private")
            raise ValidationError("content must not be empty")
        title = scrub(summary or "").strip() or body.splitlines()[0].strip()
        if summary and len(title) > SUMMARY_CHARS:
            raise ValidationError(f"summary is {len(title)} characters; the limit is {SUMMARY_CHARS}")
        title = preview(title, SUMMARY_CHARS)
        if tier not in TIERS:
            raise ValidationError(f"invalid tier {tier!r}: use one of {', '.join(TIERS)}")
        return self.store.insert_memory(NewMemory(
            uid=new_uid(self.clock()), domain=self._domain(domain, project),
            namespace=self._namespace(namespace), summary=title, content=body,
            timestamp=at if at is not None else self.now(), tags=_as_list(tags, "tags"), source=source,
            relates_to=_as_list(relates_to, "relates_to"), tier=tier, is_pinned=pinned,
        ))

    def get_memory(self, ref: str) -> Memory:
        """A live memory by id or URN; a URN must name the memory's own domain and namespace."""
        ref = (ref or "").strip()
        if not ref:
            raise InvalidArgument("a memory id or URN is required")
        match = _URN.match(ref)
        memory = self.store.get_memory(match.group("id") if match else ref)
        if memory is None or memory.deleted_at is not None or (match and memory.urn != ref):
            raise NotFound(f"memory not found: {ref}")
        return memory

    def update(self, ref: str, *, content: str | None = None, summary: str | None = None,
               namespace: str | None = None, tags: Iterable[str] | str | None = None,
               tier: str | None = None, relates_to: Iterable[str] | str | None = None) -> Memory:
        current = self.get_memory(ref)
        uid = current.id
        fields: dict[str, Any] = {}
        if content is not None:
            if not content.strip():
                raise ValidationError("content must not be empty")
            fields["content"] = scrub(content).strip()
            derived = preview(current.content.splitlines()[0].strip(), SUMMARY_CHARS) if current.content else ""
            if summary is None and current.summary == derived:
                # the summary was the old first line: keep it in step with the new content
                fields["summary"] = preview(fields["content"].splitlines()[0].strip(), SUMMARY_CHARS)
        if summary is not None:
            if not summary.strip() or len(summary.strip()) > SUMMARY_CHARS:
                raise ValidationError(f"summary must be 1-{SUMMARY_CHARS} characters")
            fields["summary"] = scrub(summary).strip()
        if namespace is not None:
            fields["namespace"] = self._namespace(namespace)
        if tags is not None:
            fields["tags"] = _as_list(tags, "tags")
        if relates_to is not None:
            fields["relates_to"] = _as_list(relates_to, "relates_to")
        if tier is not None:
            if tier not in TIERS:
                raise ValidationError(f"invalid tier {tier!r}: use one of {', '.join(TIERS)}")
            fields["tier"] = tier
        if not fields:
            raise InvalidArgument("nothing to update: give content, summary, namespace, tags, tier or relates_to")
        updated = self.store.update_memory(uid, fields, self.now())
        if updated is None:
            raise NotFound(f"memory not found: {ref}")
        return updated

    def forget(self, ref: str) -> Memory:
        """Erase a memory's text, keeping a tombstone so the delete can sync."""
        memory = self.get_memory(ref)
        self.store.tombstone_memory(memory.id, self.now())
        return memory

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

    # -- pins and purge ------------------------------------------------------------------

    def pin(self, ref: str | int, pinned: bool = True) -> dict[str, Any]:
        """Pin an observation (numeric id) or a memory (id or URN): exempt from retention."""
        text = str(ref).strip()
        if text.isdigit():
            if not self.store.set_observation_pin(int(text), pinned):
                raise NotFound(f"observation not found: {text}")
            return {"kind": "observation", "id": int(text), "is_pinned": pinned}
        memory = self.get_memory(text)
        self.store.update_memory(memory.id, {"is_pinned": pinned}, self.now())
        return {"kind": "memory", "id": memory.id, "urn": memory.urn, "is_pinned": pinned}

    def purge(self, *, ids: Sequence[int | str] = (), obs_type: str | Sequence[str] | None = None,
              older_than: int | None = None, project: str | None = None,
              confirm: bool = False) -> int:
        """Delete observations by id, or by type and/or age (pinned rows are kept)."""
        if not confirm:
            raise InvalidArgument("purge deletes data: pass --confirm (confirm=true) to proceed")
        types = _as_list(obs_type, "obs_type") if obs_type else ()
        for t in types:
            self._check_obs_type(t)
        if isinstance(ids, (str, bytes)):
            raise InvalidArgument("ids must be a list of observation ids, not a string")
        if ids:
            if types or older_than is not None:
                raise InvalidArgument("purge takes either ids or a type/age selector, not both")
            return self.store.purge_observations([_as_int(i, "id") for i in ids])
        if not types and older_than is None:
            raise InvalidArgument("purge needs ids, a type or an age (--older-than)")
        if older_than is not None and older_than < 0:
            raise InvalidArgument("older_than must be a positive age")
        cutoff = self.now() - older_than if older_than is not None else None
        return self.store.purge_observations_where(types, cutoff, project)

    # -- search and navigation -------------------------------------------------------------

    @staticmethod
    def _check_obs_type(obs_type: str) -> None:
        if obs_type not in OBS_TYPES:
            raise InvalidArgument(f"unknown obs_type {obs_type!r}; valid: {', '.join(OBS_TYPES)}")

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
            return self._ranked(scope, query, query_plan, when, filters, limit, offset)
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
                filters: SearchFilters, limit: int, offset: int) -> SearchResult:
        """Relevance ranking of a plain-language query (`nmem.search.rank`): every record that
        shares a content word is a candidate; the trail is scored with context windows."""
        want = offset + limit
        if scope != "all":
            return SearchResult(self._rank_trail(scope, query_plan, when, filters, want)[offset:want],
                                query, query_plan.any_term)
        merged: list[SearchHit] = []
        for one in ("observations", "prompts"):
            merged.extend(self._rank_trail(one, query_plan, when, filters, want))
        for one in ("sessions", "memories"):  # curated and summarised: strictest tier first, by BM25
            for match in query_plan.tiers:
                hits = self._run_search(one, match, filters, "relevance", want, 0)
                if hits:
                    merged.extend(hits)
                    break
        merged.sort(key=lambda h: -h.score)
        return SearchResult(merged[offset:want], query, query_plan.any_term)

    def _rank_trail(self, scope: str, query_plan: QueryPlan, when: TimeRange | None,
                    filters: SearchFilters, want: int) -> list[SearchHit]:
        ranking = self.ranking
        # Candidates come in blocks, so every page of one query reranks the same set.
        pool = ranking.candidates * max(1, -(-want // ranking.candidates))
        hits = self._run_search(scope, query_plan.any_term, filters, "relevance", pool, 0)
        if not hits:
            return []
        stems = rank.query_stems(query_plan.terms)
        trail = _Trail(self.store, scope, rank.TermCounter(stems), ranking.window,
                       {int(h.record.id): h.record for h in hits})
        candidates = list(trail.records)
        trail.load(candidates)
        fts = self.store.fts_stats(scope, stems)
        stats = rank.IndexStats(fts.docs, fts.tokens / fts.docs if fts.docs else 0.0, fts.df)
        records = trail.records

        def score(ids: list[int]) -> dict[int, float]:
            return rank.score([rank.Candidate(i, int(records[i].timestamp)) for i in ids], trail.docs,
                              trail.windows, stems, stats, ranking, when, self.now())

        scores = score(candidates)
        if ranking.promote and not (filters.obs_types or filters.files or filters.source
                                    or filters.date_start is not None or filters.date_end is not None):
            # A neighbour of a strong candidate that shares a word is a candidate too, though
            # BM25 alone ranked it outside the pool; no filter can exclude it (same session).
            best = sorted(candidates, key=lambda i: -scores[i])[:ranking.promote]
            extra = list(dict.fromkeys(n for i in best for n, _ in trail.windows.get(i, ())
                                       if n not in scores and trail.docs[n].matches()))
            trail.load(extra)
            scores.update(score(extra))
            candidates += extra
        kind = hits[0].kind
        ranked = [SearchHit(kind, scores[i], records[i]) for i in candidates]
        ranked.sort(key=lambda h: (-h.score, -int(h.record.id)))
        return ranked

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
        if scope == "observations":
            if filters.namespaces or filters.tags:
                return []
            return [SearchHit("observation", s, r)
                    for r, s in store.search_observations(match, filters, order, limit, offset)]
        if scope == "prompts":
            if filters.obs_types or filters.namespaces or filters.tags or filters.files:
                return []
            return [SearchHit("prompt", s, r)
                    for r, s in store.search_prompts(match, filters, order, limit, offset)]
        if scope == "sessions":
            if filters.obs_types or filters.namespaces or filters.tags or filters.files:
                return []
            return [SearchHit("session", s, r)
                    for r, s in store.search_sessions(match, filters, order, limit, offset)]
        if filters.obs_types or filters.files or filters.session_id:
            return []
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
                "file_path": obs.file_path, "content_preview": preview(obs.content),
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
                "content_preview": preview(obs.content), "prompt_content": prompt_content,
                "is_pinned": obs.is_pinned, "urn": obs.urn,
            })
        return {"file_path": path, "sessions": list(sessions.values())}

    def recent_context(self, project: str | None = None, limit: int | None = 30) -> list[dict[str, Any]]:
        """Recent observations by composite score (recency, type weight, project boost)."""
        lim = clamp(_as_int(limit, "limit") if limit is not None else None, 1, MAX_LIMIT, 30)
        scored = self.store.recent_scored(project or None, lim, self.now())
        return [{**obs.to_dict(), "score": round(score, 4)} for obs, score in scored]

    def status(self) -> dict[str, Any]:
        st = self.store.status()
        return {
            "database": redact_url(st.url), "schema_version": st.schema_version, "size_bytes": st.size_bytes,
            "sessions": st.sessions, "prompts": st.prompts, "observations": st.observations,
            "memories": st.memories, "by_obs_type": st.by_obs_type,
            "by_namespace": st.by_namespace, "by_tier": st.by_tier, "by_project": st.by_project,
            "enabled": bool(self.settings["memory.enabled"]),
        }


class _Trail:
    """Records of one trail scope gathered for ranking: candidates, their session windows,
    the neighbours' texts, and each record's stem counts and length."""

    def __init__(self, store: Store, scope: str, counter: rank.TermCounter, span: int,
                 records: dict[int, Any]) -> None:
        self.store, self.scope, self.counter, self.span = store, scope, counter, span
        self.records = records
        self.windows: dict[int, list[tuple[int, int]]] = {}
        self.docs: dict[int, rank.Doc] = {}

    def load(self, ids: Sequence[int]) -> None:
        """Windows of `ids`, then whatever records and counts that makes necessary."""
        if self.span and ids:
            self.windows.update(self.store.session_windows(self.scope, ids, self.span))
        missing = sorted({n for i in ids for n, _ in self.windows.get(i, ())} - self.records.keys())
        if missing:
            fetched: Sequence[Observation | Prompt] = (
                self.store.get_prompts(missing) if self.scope == "prompts" else self.store.get_observations(missing))
            self.records.update((int(r.id), r) for r in fetched)
        new = [i for i in self.records if i not in self.docs]
        lengths = self.store.fts_lengths(self.scope, new)
        counts = self.counter.count_many([str(self.records[i].content) for i in new])
        for i, c in zip(new, counts, strict=True):
            self.docs[i] = rank.Doc(c, lengths.get(i, 0))


def _hit_time(hit: SearchHit) -> int:
    record = hit.record
    for attr in ("timestamp", "updated_at", "started_at"):
        value = getattr(record, attr, None)
        if isinstance(value, int):
            return value
    return 0
