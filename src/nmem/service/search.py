"""Search: full-text search with filters over one scope or all of them, relevance ranking of
plain-language questions (`nmem.search.rank`), the project-first order, and the optional
embeddings fused with BM25 (`nmem.service.hybrid`)."""

from __future__ import annotations

from nmem.errors import InvalidArgument
from nmem.models import ORDERS, SCOPES, Observation, Prompt, Record, SearchHit
from nmem.service.args import MAX_LIMIT, agents, as_list, checked_query
from nmem.service.base import Base
from nmem.service.relpaths import Roots
from nmem.store import SearchFilters
from nmem.util.numbers import as_int, clamp
from nmem.util.timeutil import parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T")

    from nmem.search import rank
    from nmem.search.query import QueryPlan
    from nmem.search.timewords import TimeRange
    from nmem.store.protocol import Store
    from nmem.store.records import Candidates

    _Keys = tuple[str, int | None, str | None, int]   # what arranging reads of a trail record

RANKED_SCOPES = ("observations", "prompts", "all")   # trail scopes ranked with context windows
MAX_OFFSET = 2**62
TURN_LOOKBACK = 6 * 3600   # how far before an agent's reply its turn's user prompt is looked for
CURATED_EVERY = 3          # searching everything, the n-th matching memory is among the first 3n hits
TRAIL_PROJECTS_KEPT = 10_000   # projects known to have sessions, kept per process (`_has_trail`)


class SearchResult(Record):
    """What one search found: its hits, the query as asked, and the FTS5 expression that
    produced the hits (None when nothing was matched)."""

    hits: list[SearchHit]
    query: str | None
    match: str | None
    roots: Roots | None = None   # set by `search`: trail rows' paths relative to their roots

    def to_list(self, full: bool = False) -> list[dict[str, Any]]:
        rows = [hit.to_dict(full=full) for hit in self.hits]
        if self.roots is not None:
            self.roots.read_projects(row for hit, row in zip(self.hits, rows, strict=True)
                                     if isinstance(hit.record, (Observation, Prompt)))
            for hit, row in zip(self.hits, rows, strict=True):
                if isinstance(hit.record, (Observation, Prompt)):
                    self.roots.apply(row, hit.record if isinstance(hit.record, Observation) else None)
        return rows


class Search(Base):
    _ranking: rank.Ranking | None = None

    @property
    def ranking(self) -> rank.Ranking:
        """The ranking's settings, made once per service on first use: a process that never ranks
        (`nmem status`, a hook) never loads `nmem.search.rank` and what it imports."""
        if self._ranking is None:
            from nmem.search import rank

            self._ranking = rank.Ranking()
        return self._ranking

    @ranking.setter
    def ranking(self, value: rank.Ranking) -> None:
        self._ranking = value

    def search(self, query: str | None = None, *, scope: str = "observations",
               project: str | None = None, obs_type: str | Sequence[str] | None = None,
               namespace: str | Sequence[str] | None = None, tags: Any = None, files: Any = None,
               session_id: str | None = None, date_start: Any = None, date_end: Any = None,
               order_by: str = "relevance", limit: int | None = None, offset: int | None = 0,
               source: str | None = None, strict: bool = False, prefer_project: str | None = None,
               cwd: str | None = None, raw: bool | None = None, agent: Any = None) -> SearchResult:
        """Full-text search with filters over one scope or all of them.

        `strict` keeps only records holding every word (FTS5 syntax as typed), never the
        candidates relevance ranking takes from any shared word: what pipes and purges need.
        Without a `project` filter, `prefer_project`'s hits come first, then the others'
        (ADR-006: project match is a boost, not a filter). `raw` (default: the `search.raw`
        setting) is ADR-006's strict mode: the query goes to FTS5 exactly as typed and hits come
        in plain BM25 order, no rewriting or reranking. A session is named by id, unique
        prefix or URN; a relative file path as `resolve_file` reads it from `cwd`. `agent` (one
        name or a list) keeps what those coding agents' sessions recorded; each hit of the trail
        names its session's agent."""
        if scope not in SCOPES:
            raise InvalidArgument(f"unknown scope {scope!r}; valid: {', '.join(SCOPES)}")
        if order_by not in ORDERS:
            raise InvalidArgument(f"unknown order_by {order_by!r}; valid: {', '.join(ORDERS)}")
        # An offset past 2**62 is past the end of any database; capped, offset + limit stays an integer SQLite takes.
        off = min(as_int(offset or 0, "offset", low=0), MAX_OFFSET)
        lim = clamp(limit, 1, MAX_LIMIT, int(self.settings["search.default_limit"]), "limit")
        filters = self._filters(project=project, obs_type=obs_type, namespace=namespace, tags=tags, files=files,
                                session_id=session_id, source=source, date_start=date_start, date_end=date_end,
                                agent=agent, cwd=cwd)
        return self._found(scope, query, filters, order_by, lim, off, strict=strict, raw=raw,
                           prefer_project=prefer_project)

    def _filters(self, *, project: str | None = None, obs_type: Any = None, namespace: Any = None,
                 tags: Any = None, files: Any = None, session_id: str | None = None, source: str | None = None,
                 date_start: Any = None, date_end: Any = None, agent: Any = None,
                 cwd: str | None = None) -> SearchFilters:
        """The filters of a search (or a timeline) as its caller gave them, checked and read:
        types known, dates parsed and in order, namespaces, files and the session resolved."""
        types = as_list(obs_type, "obs_type")
        for t in types:
            self._check_obs_type(t)
        start = parse_time(date_start, name="date_start")
        end = parse_time(date_end, name="date_end", end_of_day=True)
        if start is not None and end is not None and start > end:
            raise InvalidArgument("date_start is after date_end")
        only = project if project not in (None, "", "*") else None
        return SearchFilters(
            project=only,
            obs_types=types,
            namespaces=tuple(self._namespace(n) for n in as_list(namespace, "namespace")),
            tags=as_list(tags, "tags"),
            files=tuple(self.api.resolve_file(f, cwd=cwd, project=only) for f in as_list(files, "files")),
            session_id=self.api.session(session_id).id if session_id else None, source=source,
            date_start=start, date_end=end, agents=agents(agent),
        )

    def _found(self, scope: str, query: str | None, filters: SearchFilters, order_by: str, limit: int,
               offset: int, *, strict: bool = False, raw: bool | None = None,
               prefer_project: str | None = None) -> SearchResult:
        """`search` once its arguments are read: the hits, each trail hit naming its agent."""
        if raw is None:
            raw = bool(self.settings["search.raw"])
        if prefer_project and filters.project is None:
            result = self._project_first(prefer_project, scope, query, filters, order_by, limit, offset, strict, raw)
        else:
            result = self._search(scope, query, filters, order_by, limit, offset, strict=strict, raw=raw)
        roots = self._name_agents(result.hits)
        if any(isinstance(h.record, (Observation, Prompt)) for h in result.hits):
            result.roots = Roots(self.store, known=roots)
        return result

    def _name_agents(self, hits: list[SearchHit]) -> dict[str, str]:
        """Each trail hit's `agent`: the coding agent of its session (None when unrecorded);
        returns those sessions' project roots, read with their agents: by the store's read of
        the hit's row where it read them beside it (`SearchHit.origin`), else in one read more."""
        origins: dict[str, tuple[str | None, str | None]] = {}
        wanted: list[str] = []
        for h in hits:
            if h.kind != "session" and (sid := getattr(h.record, "session_id", None)):
                if h.origin is not None:
                    origins[sid] = h.origin
                else:
                    wanted.append(sid)
        wanted = [sid for sid in wanted if sid not in origins]
        if wanted:
            origins.update(self.store.session_origins(wanted))
        for hit in hits:
            if hit.kind == "session":
                hit.agent = getattr(hit.record, "agent", None)
            else:
                hit.agent = origins.get(getattr(hit.record, "session_id", None) or "", (None, None))[0]
        return {sid: root for sid, (_, root) in origins.items() if root is not None}

    def _project_first(self, project: str, scope: str, query: str | None, filters: SearchFilters, order: str,
                       limit: int, offset: int, strict: bool, raw: bool = False) -> SearchResult:
        """The hits of `project` in their order, then the other projects' in theirs."""
        want = offset + limit
        mine = filters.replace(project=project)
        if scope != "memories" and not self._has_trail(project):
            # No trail there yet: spare the filtered walks of every match, which find nothing. Searching
            # everything, the project's memories (with the user's and the org's) are all it can have.
            mine = mine.replace(trail=False)
        if mine.trail or scope == "all":
            own = self._search(scope, query, mine, order, want, 0, strict=strict, raw=raw)
        else:
            own = SearchResult([], query, None)
        hits, match = list(own.hits), own.match
        if len(hits) < want:
            seen = {(h.kind, str(h.record.id)) for h in hits}
            rest = self._search(scope, query, filters, order, want + len(hits), 0, strict=strict, raw=raw)
            hits += [h for h in rest.hits if (h.kind, str(h.record.id)) not in seen][:want - len(hits)]
            match = match if own.hits else rest.match
        return SearchResult(hits[offset:want], query, match)

    def _has_trail(self, project: str) -> bool:
        """Whether `project` has a session (its observations and prompts belong to sessions). A yes
        is kept for the process: sessions are seldom deleted, and one that is only leaves a
        filtered search to find nothing, as it would have anyway."""
        known = self._trail_projects
        if project in known:
            return True
        if not self.store.search_sessions(None, SearchFilters(project=project), "date_desc", 1, 0):
            return False
        if len(known) < TRAIL_PROJECTS_KEPT:
            known.add(project)
        return True

    def _search(self, scope: str, query: str | None, filters: SearchFilters, order: str,
                limit: int, offset: int, *, strict: bool = False, raw: bool = False,
                lexical: bool = False) -> SearchResult:
        checked_query(query)  # every search and recall ends here or in `_hybrid_search`
        if raw:  # ADR-006: the query goes to FTS5 as typed, ordered by plain BM25
            match = query.strip() if query and query.strip() else None
            return SearchResult(self._run_scopes(scope, match, filters, order, limit, offset), query, match)
        if strict:
            match = strict_match(query)
            if match == "":
                return SearchResult([], query, None)
            return SearchResult(self._run_scopes(scope, match, filters, order, limit, offset), query, match)
        if not lexical and self.settings["search.embeddings"] != "none":  # optional embeddings fused with BM25
            fused = self.api._hybrid_search(scope, query, filters, order, limit, offset)
            if fused is not None:
                return fused
        from nmem.search.query import plan  # (with `re`): searches only, not every Service

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
            from nmem.search import rank

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
        from functools import partial

        from nmem.service import fanout

        calls: list[Callable[[], list[tuple[list[SearchHit], str]]]] = [
            partial(self._rank_trails, one, query_plan, when, cue, filters, want)
            for one in ("observations", "prompts")]
        calls.append(partial(self._first_tiers, query_plan.tiers, filters, want))
        parts = [part for parts in fanout.run_all(self.store, calls) for part in parts]
        merged = [hit for hits, _ in parts for hit in hits]
        merged.sort(key=lambda h: -h.score)
        # the observations' expression, else (a project without sessions: trail not read) the first scope's that has one
        match = next((m for _, m in parts if m), parts[0][1])
        return SearchResult(curated_within_reach(merged)[offset:want], query, match)

    def _rank_trails(self, *args: Any) -> list[tuple[list[SearchHit], str]]:
        """`_rank_trail` as a fan-out's part: the list of one scope's hits and expression."""
        return [self._rank_trail(*args)]

    def _first_tiers(self, tiers: Sequence[str], filters: SearchFilters,
                     want: int) -> list[tuple[list[SearchHit], str]]:
        """Sessions' and memories' hits by BM25, each for the strictest tier that finds any
        there, and that tier ("" when none does): one read of the store for both."""
        scopes = [one for one in ("sessions", "memories") if not _scope_excluded(one, filters)]
        found = self.store.search_curated(scopes, tiers, filters, want) if scopes and tiers else {}
        sessions, session_tier = found.get("sessions", ([], ""))
        memories, memory_tier = found.get("memories", ([], ""))
        return [([SearchHit("session", score, r) for r, score in sessions], session_tier),
                ([SearchHit("memory", score, r) for r, score in memories], memory_tier)]

    def _rank_trail(self, scope: str, query_plan: QueryPlan, when: TimeRange | None,
                    cue: Callable[[str], bool] | None, filters: SearchFilters,
                    want: int) -> tuple[list[SearchHit], str]:
        """The best `want` hits of one trail scope, and the FTS5 expression that found the
        candidates. Ranking reads ids, texts and windows; only the hits' rows are fetched.
        With `expand_terms`, the words the best first hits hold besides the question's are
        added at a fraction of a question word's weight and the scope ranked again
        (`nmem.search.expand`)."""
        from nmem.search import rank

        ranking = self.ranking
        # Candidates come in blocks, so every page of one query reranks the same set.
        pool = ranking.candidates * max(1, -(-want // ranking.candidates))
        if not filters.trail:
            return [], ""   # a project without sessions (`_project_first`): nothing to read here
        if _scope_excluded(scope, filters):
            queries = rank.candidate_queries(
                query_plan.terms, self.store.fts_stats(scope, rank.query_stems(query_plan.terms)).df,
                ranking.postings)
            return [], queries[-1] if queries else ""
        ranked = self._rank_pass(scope, query_plan, (), when, cue, filters, pool)
        if ranked.ids and ranking.expand_terms:
            extra = self._feedback(scope, ranked)
            if extra:
                again = self._rank_pass(scope, query_plan, extra, when, cue, filters, pool)
                if again.ids:
                    ranked = again
        if not ranked.ids:
            return [], ranked.match
        return self._arranged(scope, ranked, pool, want), ranked.match

    def _feedback(self, scope: str, ranked: _Ranked) -> list[tuple[str, float]]:
        """Words to search again with, and their weights (`nmem.search.expand`)."""
        from nmem.search import expand

        ranking = self.ranking
        top = ranked.ids[:ranking.expand_docs]
        hits = [(ranked.trail.texts.get(i, ""), ranked.scores[i]) for i in top]
        words = expand.feedback_words(hits, ranked.stems, 4 * ranking.expand_terms)
        if not words:
            return []
        fts = self.store.fts_stats(scope, [w[0] for w in words])
        chosen = expand.expansion(words, fts.df, fts.docs, ranking.expand_terms)
        return [(word, ranking.expand_weight * w) for word, w in chosen]

    def _rank_pass(self, scope: str, query_plan: QueryPlan, extra: Sequence[tuple[str, float]],
                   when: TimeRange | None, cue: Callable[[str], bool] | None, filters: SearchFilters,
                   pool: int) -> _Ranked:
        """One ranking of a trail scope for the question's words plus `extra` (word, weight)."""
        from nmem.search import rank

        ranking = self.ranking
        store = self.store
        terms = (*query_plan.terms, *(w for w, _ in extra))
        stems = rank.query_stems(terms)
        asked = set(rank.query_stems(query_plan.terms))
        weight_of = {rank.query_stems([w])[0]: x for w, x in extra}
        weights = [1.0 if s in asked else weight_of.get(s, 1.0) for s in stems]

        def candidate_queries(df: Mapping[str, int]) -> list[str]:
            return rank.candidate_queries(terms, df, ranking.postings)

        unfiltered = not (filters.obs_types or filters.files or filters.source
                          or filters.date_start is not None or filters.date_end is not None)
        # One read for the statistics, candidates, windows and texts (one statement on
        # PostgreSQL, whose windows then reach far enough for the promoted neighbours too).
        read = store.rank_candidates(scope, stems, candidate_queries, filters, pool, ranking.window,
                                     2 * ranking.window if ranking.promote and unfiltered else ranking.window)
        fts, match = read.stats, read.match
        trail = _Trail(store, scope, rank.TermCounter(stems), ranking.window, cue, read,
                       said_times=when is not None and ranking.said_times)
        stats = rank.IndexStats(fts.docs, fts.tokens / fts.docs if fts.docs else 0.0, fts.df)
        if not read.ids:
            return _Ranked([], {}, trail, stats, stems, weights, match, read.records, read.origins)
        candidates = list(dict.fromkeys(read.ids))
        if when is not None and ranking.time_candidates:
            candidates += self._time_candidates(scope, query_plan, when, filters, fts.df, set(candidates))
        trail.load(candidates)

        def score(ids: list[int]) -> dict[int, float]:
            return rank.score([rank.Candidate(i, trail.times.get(i, 0)) for i in ids], trail.docs,
                              trail.windows, stems, stats, ranking, when, self.now(), weights)

        scores = score(candidates)
        if ranking.promote and unfiltered:
            # A neighbour of a strong candidate that shares a word is a candidate too, though
            # BM25 alone ranked it outside the pool; no filter can exclude it (same session).
            best = sorted(candidates, key=lambda i: -scores[i])[:ranking.promote]
            extra_ids = list(dict.fromkeys(n for i in best for n, _ in trail.windows.get(i, ())
                                           if n not in scores and n in trail.docs and trail.docs[n].matches()))
            if extra_ids:
                trail.load(extra_ids)
                scores.update(score(extra_ids))
                candidates += extra_ids
        if ranking.replies and ranking.window and unfiltered:
            candidates += self._replies(scope, trail, candidates, scores, score)
        if ranking.ask_factor != 1.0 or ranking.ask_only_factor != 1.0:
            # Asking is not telling: a record that ends with a question ranks below the
            # statements around it (its answer was promoted above with its full score).
            factor = {rank.ENDS_ASKING: ranking.ask_factor, rank.ASKS_ONLY: ranking.ask_only_factor}
            for i in candidates:
                doc = trail.docs.get(i)
                if doc is not None and doc.asking:
                    scores[i] *= factor[doc.asking]
        ranked = sorted(candidates, key=lambda i: (-scores[i], -i))
        return _Ranked(ranked, scores, trail, stats, stems, weights, match, read.records, read.origins,
                       read.sessions)

    def _replies(self, scope: str, trail: _Trail, candidates: list[int], scores: dict[int, float],
                 score: Callable[[list[int]], dict[int, float]]) -> list[int]:
        """The record after each of the best candidates that asks something: its answer, which
        often shares no word with the question (`nmem.search.arrange`). Scores are updated."""
        from nmem.search import arrange, rank

        ranking = self.ranking
        best = sorted(candidates, key=lambda i: -scores[i])[:ranking.promote]
        asker_of: dict[int, int] = {}
        for i in best:
            text = trail.texts.get(i)
            if text is None or not arrange.asks(text):
                continue
            following = next((n for n, d in trail.windows.get(i, ()) if d == 1), None)
            if following is not None and following not in scores and following not in asker_of:
                asker_of[following] = i
        if not asker_of:
            return []
        texts = trail.texts   # neighbours' texts are loaded with their candidates
        replies = [r for r, a in asker_of.items() if arrange.answers_to(texts.get(a, ""), texts.get(r, ""))]
        if scope == "prompts" and replies:
            # The same writer going on answers nothing: a user's next prompt after their question.
            # Turns that name their speaker ("Ben: …", a chat logged as prompts) were told apart above.
            source = trail.sources   # read with the texts
            replies = [r for r in replies if source.get(r) != source.get(asker_of[r])
                       or rank.label_of(texts.get(r, "")) is not None]
        if not replies:
            return []
        trail.load(replies)
        own = score(replies)
        for reply in replies:
            scores[reply] = arrange.reply_score(scores[asker_of[reply]], own[reply], ranking.reply_share)
        return replies

    def _arranged(self, scope: str, ranked: _Ranked, pool: int, want: int) -> list[SearchHit]:
        """The best `want` hits: the first `pool` ranked records arranged together (an older
        statement restated elsewhere, sessions spread out), then the rest in score order.
        The records the candidates' read brought are fetched no more, and only the page's are
        taken from it (an engine may build each when it is read: PostgreSQL's)."""
        from nmem.search import arrange, rank

        ranking, store = self.ranking, self.store
        scores, trail, stems = ranked.scores, ranked.trail, ranked.stems
        known: Mapping[int, Any] = ranked.records or {}
        idf = [ranked.stats.idf(t) * w for t, w in zip(stems, ranked.weights, strict=True)]
        kind, fetch = (("prompt", store.get_prompts) if scope == "prompts"
                       else ("observation", store.get_observations))
        arranging = (ranking.spread < 1.0 or ranking.supersede < 1.0 or ranking.turn_spread < 1.0
                     or ranking.session_weight > 0.0 or ranking.turn_weight > 0.0)
        head = ranked.ids[:pool] if arranging else []
        records: dict[int, Any] = {}   # those fetched, and those of `known` taken
        origins = dict(ranked.origins or {})   # the records' sessions' agents and roots, read with them
        keys: dict[int, _Keys] = _read_keys(ranked, head)   # what arranging reads of a row, as read with it
        missing = [i for i in head if i not in known]
        opened: dict[int, int] | None = None   # replies' turns, when read with the rows (`prompt_turns`)
        turned = getattr(store, "prompt_turns", None) if scope == "prompts" else None
        if head and turned is not None:   # the missing rows and the replies' turns in one read
            fetched, opened = turned(head, missing, TURN_LOOKBACK)
            records.update((int(r.id), r) for r in fetched)
            origins.update(getattr(fetched, "origins", {}))
        else:   # the keys alone of the rows not read with the ranking; the page's rows are read below
            rest = [i for i in missing if i not in keys]
            if rest:
                keys.update(store.trail_keys(scope, rest))
        order: list[tuple[int, float]] = []
        if head:
            empty = rank.Doc((0,) * len(stems), 0)
            placing = {i: keys[i] if i in keys else _keys_of(records[i] if i in records else known[i])
                       for i in head if i in keys or i in records or i in known}
            turns = self._turns(kind, placing) if opened is None else _read_turns(placing, opened)
            placed = [arrange.Placed(i, scores[i], key[0], trail.times.get(i, 0), trail.docs.get(i, empty).counts,
                                     turns.get(i)) for i, key in placing.items()]
            adjusted = arrange.superseded(placed, idf, ranking.supersede_share,
                                          ranking.supersede)
            adjusted = arrange.session_weighted(placed, adjusted, ranking.session_weight, ranking.session_top)
            adjusted = arrange.turn_weighted(placed, adjusted, ranking.turn_weight, ranking.turn_top)
            order = arrange.spread_by_session(placed, adjusted, ranking.spread, ranking.spread_free,
                                              ranking.turn_spread)
        order += [(i, scores[i]) for i in ranked.ids[len(head):]]
        hits: list[SearchHit] = []
        done = 0
        while len(hits) < want and done < len(order):  # again only if a row went meanwhile (a purge)
            page = order[done:done + want - len(hits)]
            done += len(page)
            records.update((i, known[i]) for i, _ in page if i not in records and i in known)
            missing = [i for i, _ in page if i not in records]
            if missing:
                fetched = fetch(missing)
                records.update((int(r.id), r) for r in fetched)
                origins.update(getattr(fetched, "origins", {}))
            hits += [SearchHit(kind, value, records[i], origin=origins.get(records[i].session_id))
                     for i, value in page if i in records]
        return hits

    def _turns(self, kind: str, rows: Mapping[int, _Keys]) -> dict[int, tuple[str | None, int]]:
        """Each record's turn: (session, the user prompt that opened it). An observation
        carries its prompt; a user prompt opens its own; an agent's reply belongs to the last
        user prompt before it in its session (one read of every such session's recent prompts)."""
        if kind == "observation":
            return {i: (session, int(prompt)) for i, (session, prompt, _, _) in rows.items() if prompt is not None}
        out: dict[int, tuple[str | None, int]] = {i: (session, i) for i, (session, _, source, _) in rows.items()
                                                   if source == "user"}
        replies: dict[str, list[tuple[int, int]]] = {}
        for i, (session, _, source, at) in rows.items():
            if source != "user":
                replies.setdefault(session, []).append((i, at))
        windows = [(session, max(at for _, at in said) + 1, min(at for _, at in said) - TURN_LOOKBACK)
                   for session, said in replies.items()]
        spoken = self.store.user_prompt_ids(windows)   # their ids alone: no prompt read whole or built
        from bisect import bisect_left

        for session, said in replies.items():
            users = spoken[session]   # in id order
            for i, _ in said:
                before = bisect_left(users, i)   # the last user prompt before the reply
                if before:
                    out[i] = (session, int(users[before - 1]))
        return out

    def _time_candidates(self, scope: str, query_plan: QueryPlan, when: TimeRange, filters: SearchFilters,
                         df: Mapping[str, int], known: set[int]) -> list[int]:
        """A named time is a boost, not a filter, so the best matches of the whole trail may
        all lie outside it: the best matches of the question's rare words inside it (± one
        half-life) join them. Rare words only: a second pass over common ones would cost
        tens of milliseconds at a million records."""
        from nmem.search import rank
        from nmem.search.query import quote

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
            merged = curated_within_reach(merged)
        else:
            merged.sort(key=_hit_time, reverse=(order != "date_asc"))
        return merged[offset:offset + limit]

    def _run_search(self, scope: str, match: str | None, filters: SearchFilters, order: str,
                    limit: int, offset: int) -> list[SearchHit]:
        store = self.store
        if _scope_excluded(scope, filters):
            return []
        if scope in ("observations", "prompts"):
            rows = (store.search_observations if scope == "observations" else store.search_prompts)(
                match, filters, order, limit, offset)
            origins = getattr(rows, "origins", {})   # their sessions' agents and roots, when read with them
            return [SearchHit(scope[:-1], s, r, origin=origins.get(r.session_id)) for r, s in rows]
        if scope == "sessions":
            return [SearchHit("session", s, r)
                    for r, s in store.search_sessions(match, filters, order, limit, offset)]
        return [SearchHit("memory", s, r) for r, s in store.search_memories(match, filters, order, limit, offset)]


def _read_turns(rows: Mapping[int, _Keys], opened: Mapping[int, int]) -> dict[int, tuple[str | None, int]]:
    """`Search._turns` of prompts from the replies' turns the store read (`prompt_turns`)."""
    out: dict[int, tuple[str | None, int]] = {}
    for i, (session, _, source, _) in rows.items():
        if source == "user":
            out[i] = (session, i)
        elif i in opened:
            out[i] = (session, opened[i])
    return out


def _read_keys(ranked: _Ranked, ids: Sequence[int]) -> dict[int, _Keys]:
    """What `trail_keys` returns of the `ids` the ranking's reads brought already: session and
    prompt with the windows (`_Ranked.sessions`), source and time with the texts."""
    sessions = ranked.sessions
    if not sessions:
        return {}
    times, sources = ranked.trail.times, ranked.trail.sources
    out: dict[int, _Keys] = {}
    for i in ids:
        known = sessions.get(i)
        if known is not None and i in times:
            out[i] = (known[0], known[1], sources.get(i), times[i])
    return out


def _keys_of(record: Any) -> _Keys:
    """A record's session, prompt (an observation's), source (a prompt's) and time."""
    return (record.session_id, getattr(record, "prompt_id", None),
            getattr(record, "source", None), record.timestamp)


class _Ranked(Record):
    """One ranking of a trail scope: candidate ids best first, their scores, what was read
    around them, the stems asked (question words, then feedback words) and their weights."""

    ids: list[int]
    scores: dict[int, float]
    trail: _Trail
    stats: rank.IndexStats
    stems: tuple[str, ...]
    weights: list[float]
    match: str
    records: Mapping[int, Any] | None
    origins: dict[str, tuple[str | None, str | None]] | None = None
    sessions: Mapping[int, tuple[str, int | None]] | None = None   # the candidates' (session, prompt), when read


class _Trail:
    """What ranking gathers around the candidates of one trail scope: their session windows
    and, for every record involved, its stem counts, length and time. A label or an answer
    counts only in a candidate's own text, so only candidates are read for them. What the
    candidates' read brought (`Candidates`) is used before the store is asked again."""

    def __init__(self, store: Store, scope: str, counter: rank.TermCounter, span: int,
                 cue: Callable[[str], bool] | None = None, read: Candidates | None = None,
                 said_times: bool = False) -> None:
        self.store, self.scope, self.counter, self.span, self.cue = store, scope, counter, span, cue
        self.said_times = said_times    # read the time a candidate's words name ("last week")
        self.windows: dict[int, list[tuple[int, int]]] = {}
        self.docs: dict[int, rank.Doc] = {}
        self.times: dict[int, int] = {}
        self.texts: dict[int, str] = {}
        self.sources: dict[int, str | None] = {}   # a prompt's writer (None for observations)
        self._read = read
        self._near = _Nearby(read, span) if read is not None and read.span > span else None

    def _windows_of(self, ids: Sequence[int]) -> None:
        """Each id's window: cut from a wider one the candidates' read brought, else read."""
        read, near, windows, missing = self._read, self._near, self.windows, []
        read_windows = read.windows if read is not None else {}
        span = self.span
        for i in ids:
            if i in windows:
                continue
            if i in read_windows:
                windows[i] = [(n, d) for n, d in read_windows[i] if -span <= d <= span]
            elif near is not None and (cut := near.window(i)) is not None:
                windows[i] = cut
            else:
                missing.append(i)
        if missing:
            windows.update(self.store.session_windows(self.scope, missing, span))

    def load(self, candidates: Sequence[int]) -> None:
        from nmem.search import rank

        if self.span and candidates:
            self._windows_of(candidates)
        docs, windows, texts = self.docs, self.windows, self.texts
        wanted = {*candidates, *(n for i in candidates for n, _ in windows.get(i, ()))} - docs.keys()
        known = self._read.texts if self._read is not None else {}
        rows = {i: known[i] for i in wanted if i in known}
        if len(rows) < len(wanted):
            rows.update(self.store.fts_texts(self.scope, sorted(wanted - rows.keys())))
        counts = self.counter.count_many([text for text, _, _, _ in rows.values()])
        times, sources = self.times, self.sources
        asked = set(candidates)   # a candidate's Doc is made below, with what its own text says
        fresh: dict[int, tuple[tuple[int, ...], int]] = {}
        for (i, (text, length, at, source)), c in zip(rows.items(), counts, strict=True):
            if i in asked:
                fresh[i] = (c, length)
            else:
                docs[i] = rank.Doc(c, length)
            times[i] = at
            texts[i] = text
            sources[i] = source
        counter, cue, said_times, asking = self.counter, self.cue, self.said_times, rank.asking
        for i in candidates:
            own = texts.get(i)
            if own is not None:
                c, length = fresh[i] if i in fresh else (docs[i].counts, docs[i].length)
                said = find_time(own, times[i])[0] if said_times else None
                docs[i] = rank.Doc(c, length, counter.labelled(own), cue is not None and cue(own), said, asking(own))


class _Nearby:
    """The windows (reaching `span`) of the candidates' neighbours that the candidates' wider
    windows hold whole: a session is one line, so a neighbour `d` records from a candidate
    has its own window inside the candidate's when |d| + span <= read.span. Cut on demand
    (only promoted neighbours and replies need one), from the first such candidate's window."""

    def __init__(self, read: Candidates, span: int) -> None:
        self.read, self.span = read, span
        self._holder: dict[int, int] | None = None   # neighbour → the first candidate holding its window
        self._lines: dict[int, tuple[list[tuple[int, int]], dict[int, int]]] = {}   # a holder's session line

    def __contains__(self, n: int) -> bool:
        return n in self._holders()

    def __getitem__(self, n: int) -> list[tuple[int, int]]:
        window = self.window(n)
        if window is None:
            raise KeyError(n)
        return window

    def _holders(self) -> dict[int, int]:
        if self._holder is None:
            windows, reach, holder = self.read.windows, self.read.span - self.span, {}
            for anchor, window in windows.items():
                for n, d in window:
                    if -reach <= d <= reach and n not in holder and n not in windows:
                        holder[n] = anchor
            self._holder = holder
        return self._holder

    def window(self, n: int) -> list[tuple[int, int]] | None:
        anchor = self._holders().get(n)
        if anchor is None:
            return None
        if anchor not in self._lines:
            line = sorted([*self.read.windows[anchor], (anchor, 0)], key=lambda item: item[1])
            self._lines[anchor] = (line, dict(line))
        line, offset = self._lines[anchor]
        d, span = offset[n], self.span
        low, high = d - span, d + span
        return [(m, e - d) for m, e in line if low <= e <= high and m != n]


def _within(filters: SearchFilters, when: TimeRange, slack_days: float) -> SearchFilters:
    """The filters narrowed to a time range widened by `slack_days` on each side."""
    from nmem.search.rank import DAY

    slack = int(slack_days * DAY)
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
    session or agent (memories belong to none), a project without sessions (`trail` False)."""
    if scope == "memories":
        return bool(filters.obs_types or filters.files or filters.session_id or filters.agents)
    if not filters.trail:
        return True
    if filters.namespaces or filters.tags:
        return True
    return scope != "observations" and bool(filters.obs_types or filters.files)


def curated_within_reach(hits: list[T], is_memory: Callable[[T], bool] = lambda h: getattr(h, "kind", "") == "memory",
                         every: int = CURATED_EVERY) -> list[T]:
    """`hits` (best first, every scope merged) with each matching curated memory no lower than
    its reserved place: the first within the first `every` hits, the second within `2 * every`...
    A memory's BM25 score is not comparable with the trail's ranking (a handful of memories
    scores near zero), so without this a question the trail answers many times over would
    never show the decision that matches it. A memory already ranked higher keeps its place;
    the places depend on nothing but the ranking, so pages never repeat or skip a hit."""
    curated = [(at, h) for at, h in enumerate(hits) if is_memory(h)]
    if not curated:
        return hits
    out = [h for h in hits if not is_memory(h)]
    for n, (at, hit) in enumerate(curated):
        out.insert(min(at, every * (n + 1) - 1), hit)
    return out


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
    from nmem.search.query import plan

    tiers = plan(query).tiers
    return tiers[0] if tiers else ""


def find_time(text: str, now: float) -> tuple[TimeRange | None, str]:
    """`timeexpr.find_time`, its reader (~30 patterns, `datetime`) loaded only for a text that
    may name a time: most searches' questions and candidates name none."""
    from nmem.search.timewords import may_name_time

    if not may_name_time(text):
        return None, text
    from nmem.search.timeexpr import find_time as read_time

    return read_time(text, now)
