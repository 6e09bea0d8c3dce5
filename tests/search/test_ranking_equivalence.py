"""What a search's ranking does once per search, per text or per row gives what the plain way
gives: `rank.score` worked out inline against `window_tf` and `bm25` step by step, `fold`
against folding character by character, the term counter against stemming every word, and a
ranked search that reads only its page's rows whole (`trail_keys`) against one that
reads its whole pool."""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

import pytest

from nmem.search import rank
from nmem.search.porter import stem
from nmem.search.rank import Candidate, Doc, IndexStats, Ranking, TermCounter
from nmem.search.timewords import TimeRange
from nmem.service.api import Service
from nmem.store import NewObservation

T0 = 1_790_000_000
DAY = 86400


def plain_score(candidates: list[Candidate], docs: dict[int, Doc], windows: dict[int, list[tuple[int, int]]],
                stems: tuple[str, ...], stats: IndexStats, ranking: Ranking, when: TimeRange | None, now: int,
                term_weights: list[float] | None) -> dict[int, float]:
    """`rank.score` as the composition of its parts."""
    empty = Doc((0,) * len(stems), 0)
    idf = [stats.idf(t) * (term_weights[i] if term_weights is not None else 1.0) for i, t in enumerate(stems)]
    weights = rank.window_weights(ranking)
    avg = stats.avg_length * sum(weights.values())
    out = {}
    for cand in candidates:
        doc = docs.get(cand.id, empty)
        tf, length = rank.window_tf(doc, [(docs.get(n, empty), d) for n, d in windows.get(cand.id, ())], weights)
        value = rank.bm25(tf, length, idf, avg, ranking.k1, ranking.b)
        if ranking.coverage:
            value *= 1.0 + ranking.coverage * rank.coverage(doc, idf)
        if doc.labelled:
            value *= 1.0 + ranking.label_boost
        if doc.answers:
            value *= 1.0 + ranking.answer_boost
        if doc.length <= ranking.brief and rank.coverage(doc, idf) < 0.5:
            value *= ranking.brief_factor
        if when is not None or ranking.recency:
            value *= (rank.time_weight(cand.timestamp, when, ranking, doc.said)
                      * rank.recency_weight(cand.timestamp, now, ranking))
        out[cand.id] = value
    return out


@pytest.mark.parametrize("seed", range(6))
def test_score_is_its_parts_worked_out_inline_to_the_last_bit(seed: int) -> None:
    rng = random.Random(seed)
    stems = tuple(f"w{i}" for i in range(rng.randint(1, 5)))
    ids = list(range(1, 120))
    docs = {i: Doc(tuple(rng.choice((0, 0, 0, 1, 2, 7)) for _ in stems), rng.randint(0, 400),
                   rng.random() < 0.2, rng.random() < 0.2,
                   TimeRange(T0 - 3 * DAY, T0 - 2 * DAY, "then") if rng.random() < 0.1 else None)
            for i in ids if rng.random() < 0.9}
    windows = {i: [(n, d) for d in (-3, -2, -1, 1, 2, 3) if (n := i + d) in docs or rng.random() < 0.3]
               for i in ids}
    stats = IndexStats(5000, rng.uniform(5, 80), {s: rng.randint(0, 900) for s in stems if rng.random() < 0.8})
    ranking = Ranking(window=rng.choice((1, 2, 3)), coverage=rng.choice((0.0, 0.4)), recency=rng.choice((0.0, 0.5)))
    when = TimeRange(T0 - 10 * DAY, T0 - 5 * DAY, "last week") if seed % 2 else None
    weights = [rng.choice((1.0, 0.3)) for _ in stems] if seed % 3 else None
    candidates = [Candidate(i, T0 - rng.randint(0, 40 * DAY)) for i in ids]
    got = rank.score(candidates, docs, windows, stems, stats, ranking, when, T0, weights)
    assert got == plain_score(candidates, docs, windows, stems, stats, ranking, when, T0, weights)
    assert [v.hex() for v in got.values()] == [v.hex() for v in plain_score(
        candidates, docs, windows, stems, stats, ranking, when, T0, weights).values()]


def test_fold_is_folding_each_character() -> None:
    rng = random.Random(3)
    alphabet = "aAeEzZ _-?.09éÉèçÇñÑöÖİıßœŒøØệếẞ東京😀\u0301\u2014"
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        lowered = text.lower()
        assert rank.fold(text) == "".join(rank._fold_char(c) if not c.isascii() else c for c in lowered), text


def test_counting_is_stemming_every_word() -> None:
    """Only words that start like a stem are stemmed, each word once per counter: the counts are
    those of stemming every word of the text."""
    rng = random.Random(5)
    words = ["research", "researching", "researcher", "café", "cafés", "Parse", "parsed", "parser_time", "turtles",
             "a", "an", "the", "re", "pa", "İstanbul", "naïve", "naively", "x" * 70, "deploy", "deployment"]
    stems = rank.query_stems(["researching", "cafe", "parse", "naive", "deployments", "an"])
    counter = TermCounter(stems)
    slot = {s: i for i, s in enumerate(stems)}
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(300)]
    expected = []
    for text in texts:
        counts = [0] * len(stems)
        for word in re.findall(r"[^\W_]+", rank.fold(text)):
            if stem(word) in slot:
                counts[slot[stem(word)]] += 1
        expected.append(tuple(counts))
    assert counter.count_many(texts) == expected
    assert counter.count_many(texts) == expected        # again, from the words it has seen


def seed_trail(service: Service, sessions: int = 8, per_session: int = 12) -> None:
    store = service.store
    rng = random.Random(11)
    words = ("invoice", "export", "drops", "rows", "page", "retry", "ledger", "total", "cache", "timeout")
    with store.transaction():
        for s in range(sessions):
            sid = f"s{s}"
            store.ensure_session(sid, "ledger", T0 + s * 1000)
            for k in range(per_session):
                at = T0 + s * 1000 + 10 * k
                prompt = store.add_prompt(sid, at, "user" if k % 3 == 0 else "agent",
                                          " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))))
                store.add_observation(NewObservation(
                    session_id=sid, project="ledger", timestamp=at + 1, obs_type="command",
                    source_event="PostToolUse", tool_name="Bash", file_path=None, prompt_id=prompt,
                    content=" ".join(rng.choice(words) for _ in range(rng.randint(3, 20)))))


class _PoolRead:
    """The store as arranging read it before a row's keys came alone: every pooled row read whole
    and its keys taken off the record, none from what the ranking's reads brought."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def rank_candidates(self, *args: Any) -> Any:
        return self._store.rank_candidates(*args).replace(sessions=None)

    def trail_keys(self, scope: str, ids: Any) -> dict[int, tuple[Any, ...]]:
        rows = (self._store.get_prompts if scope == "prompts" else self._store.get_observations)(list(ids))
        return {int(r.id): (r.session_id, getattr(r, "prompt_id", None), getattr(r, "source", None), r.timestamp)
                for r in rows}


def hits(service: Service, query: str, scope: str, **kw: Any) -> list[tuple[str, str, str, str | None]]:
    found = service.search(query, scope=scope, **kw)
    return [(h.kind, str(h.record.id), h.score.hex(), h.agent) for h in found.hits]


@pytest.mark.parametrize("scope", ["observations", "prompts", "all"])
def test_reading_only_the_pages_rows_ranks_as_reading_the_pool(service: Service, scope: str) -> None:
    seed_trail(service)
    queries = ["invoice export drops rows", "retry timeout", "ledger total cache", "page", "why does the export drop"]
    pages = [{}, {"limit": 5}, {"limit": 5, "offset": 5}, {"limit": 3, "offset": 40}, {"project": "ledger"}]
    keyed = [hits(service, q, scope, **page) for q in queries for page in pages]
    service.store = _PoolRead(service.store)   # type: ignore[assignment]
    pooled = [hits(service, q, scope, **page) for q in queries for page in pages]
    assert keyed == pooled
    assert sum(len(h) for h in keyed) > 50


def test_a_ranked_search_reads_whole_rows_for_its_page_only(service: Service) -> None:
    """A pool of up to 50 candidates is arranged from their sessions, prompts and times; only the
    hits shown are read whole (content, metadata)."""
    seed_trail(service)
    statements: list[str] = []
    reader = service.store._reader()   # type: ignore[attr-defined]
    assert isinstance(reader, sqlite3.Connection)
    reader.set_trace_callback(statements.append)
    try:
        found = service.search("invoice export drops rows", scope="observations", limit=5)
    finally:
        reader.set_trace_callback(None)
    assert len(found.hits) == 5
    whole = [s for s in statements if s.startswith("SELECT o.id, o.session_id, o.project")]
    assert len(whole) == 1
    assert len(re.search(r"WHERE o\.id IN \(([^)]*)\)", whole[0]).group(1).split(",")) == 5   # type: ignore[union-attr]
    keys = [s for s in statements if "prompt_id, NULL, timestamp FROM observations" in s]
    assert len(keys) == 1


def test_trail_keys_are_the_records_own(service: Service) -> None:
    seed_trail(service, sessions=2, per_session=4)
    store = service.store
    obs = store.search_observations(None, store_filters(), "date_desc", 50, 0)
    prompts = store.search_prompts(None, store_filters(), "date_desc", 50, 0)
    got = store.trail_keys("observations", [o.id for o, _ in obs])   # type: ignore[attr-defined]
    assert got == {o.id: (o.session_id, o.prompt_id, None, o.timestamp) for o, _ in obs}
    got = store.trail_keys("prompts", [p.id for p, _ in prompts])   # type: ignore[attr-defined]
    assert got == {p.id: (p.session_id, None, p.source, p.timestamp) for p, _ in prompts}
    assert store.trail_keys("prompts", [10_000]) == {}   # type: ignore[attr-defined]


def store_filters() -> Any:
    from nmem.store import SearchFilters

    return SearchFilters()
