"""A phrase's places compared only for the rows that can reach the page (`RANKED_PHRASES`): every
row's score with its phrases' hits bounded by their rarest words' (`ub`), the best by that bound
scored exactly first, the rest only when one of them could still reach the page. At 1M rows the
2,000 rows of `"no such table"` each had their places compared (about 11 µs a row: 22 of its
29 ms; docs/benchmarks/postgres.md, pg-fts1m)."""

from __future__ import annotations

import random

import pytest

from nmem.store import NewObservation, open_store
from nmem.store.protocol import Store
from nmem.store.records import SearchFilters
from pg_counted_support import COUNTED_FILTER, COUNTED_RANK_CD, counted_newest, counting_store, notices
from store_engines import ENGINES

pytest.importorskip("psycopg")

POSTGRES = [e for e in ENGINES if getattr(e, "values", (e,))[0] == "postgres"]
T0 = 1_790_000_000

def _record(store: Store, texts: list[str]) -> list[int]:
    store.ensure_session("s-phrase", "proj", T0)
    return [store.add_observation(NewObservation("s-phrase", "proj", T0 + i, "command", "PostToolUse", text,
                                                 tool_name="Bash")) for i, text in enumerate(texts)]


@pytest.mark.parametrize("engine", POSTGRES)
def test_a_phrases_hits_are_counted_only_in_rows_that_can_reach_the_page(
        store_url: str, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thirty rows hold `no such table` three times each (so each word three times: the least of
    its words' hits does not settle the phrase's). Ranking the best three counts the phrase's hits
    in the best 2 × 3 rows by the bound alone (the code before: in all thirty). Counted by a
    ts_filter and a ts_rank_cd of the test's schema, put before pg_catalog's: a row's hits are
    counted by ts_rank_cd (one call a row) or by comparing its words' places (ts_filter, once a
    word: three calls a row, the code before). The ranking is the one pg_catalog's give."""
    from nmem.store.postgres.tsquery import parse

    calls = notices(monkeypatch)
    texts = [" ".join(["error: no such table users"] * 3 + ["retry the migration step"] * (i % 7))
             for i in range(30)]
    store = open_store(store_url)
    try:
        ids = _record(store, texts)
        store._exec(COUNTED_FILTER)  # type: ignore[attr-defined]
        store._exec(COUNTED_RANK_CD)  # type: ignore[attr-defined]
        before = store._bm25_newest("observations", parse('"no such table"'), SearchFilters(), 3)  # type: ignore[attr-defined]
        schema = store._query("SELECT current_schema()")[0][0]  # type: ignore[attr-defined]
    finally:
        store.close()
    assert not [c for c in calls if c.startswith("nmem_test")]   # pg_catalog's, first in the search path
    after = counted_newest(store_url, schema, '"no such table"', 3)

    assert after == before
    # the shortest rows (no filler: i % 7 == 0) score best, newest first on ties
    assert [i for i, _ in after] == [ids[28], ids[21], ids[14]]
    rows_counted = calls.count("nmem_test ts_rank_cd") + calls.count("nmem_test ts_filter") / 3
    assert 3 <= rows_counted <= 2 * 3   # PHRASE_BATCH × the page


QUESTIONS = ('"red blue"', '"red blue green"', '"red red"', '"red blue" AND green', '"red blue" OR green',
             '"blue green" OR "red blue"', 'NEAR(red green, 2)', 'NEAR("red blue" green, 3)', '"red blue" NOT gray',
             '"blue gr"*', '"red blue" AND NEAR(green gray, 1)', '(red OR "blue green") AND "green red"')


@pytest.mark.parametrize("engine", POSTGRES)
def test_phrase_rankings_are_those_of_every_row_scored(store_url: str, engine: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An equivalence guard (its rankings are those of the code before): questions of phrases,
    NEARs, a phrase under an OR, a NOT, a prefix, over 160 rows of five words, where a phrase's
    hits are often fewer than its rarest word's and often as many: the same ids and scores, in
    the same order, as when every row is scored (PHRASE_BATCH past the rows: the first batch is
    the whole window, as before), for pages of 1, 3 and 10. Both ends are reached: pages whose
    first rows settle them (fewer places compared) and pages that needed the rest."""
    from nmem.store.postgres import search
    from nmem.store.postgres.tsquery import parse

    calls = notices(monkeypatch)
    rng = random.Random(25)
    words = ("red", "blue", "green", "gray", "greet")
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 30))) for _ in range(80)]
    # and rows where every phrase stands as often as its words: its rarest word bounds it exactly
    texts += [" ".join(["red blue green gray greet"] * rng.randint(1, 4) + ["tail"] * rng.randint(0, 12))
              for _ in range(80)]
    rng.shuffle(texts)
    store = open_store(store_url)
    try:
        _record(store, texts)
        store._exec(COUNTED_FILTER)  # type: ignore[attr-defined]
        store._exec(COUNTED_RANK_CD)  # type: ignore[attr-defined]
        schema = store._query("SELECT current_schema()")[0][0]  # type: ignore[attr-defined]
    finally:
        store.close()
    counted = counting_store(store_url, schema)
    fewer = more = 0
    try:
        for question in QUESTIONS:
            for want in (1, 3, 10):
                calls.clear()
                monkeypatch.setattr(search, "PHRASE_BATCH", 10**6)
                whole = counted._bm25_newest("observations", parse(question), SearchFilters(), want)  # type: ignore[attr-defined]
                every = len(calls)
                calls.clear()
                monkeypatch.setattr(search, "PHRASE_BATCH", 2)
                bounded = counted._bm25_newest("observations", parse(question), SearchFilters(), want)  # type: ignore[attr-defined]
                assert bounded == whole, (question, want)
                assert whole, question
                fewer += len(calls) < every
                more += len(calls) > 2 * want * 4   # past the first batch's counts
    finally:
        counted.close()
    assert fewer >= 3 and more >= 3, (fewer, more)


@pytest.mark.parametrize("engine", POSTGRES)
def test_ts_rank_cd_counts_an_adjacent_phrases_hits_where_no_two_of_its_words_share_a_place(
        store: Store, engine: str) -> None:
    """An equivalence guard for what RANKED_PHRASES takes a phrase's hits from: ts_rank_cd given unit
    weights, for a phrase of adjacent words (`'a' <-> 'b' <-> …`), sums one for each place where
    the phrase starts (the count its words' places compared give, the code before), wherever no
    place holds two of its words. Each cover of such a phrase is one of its hits, of as many
    entries as words and as wide (no noise): it weighs 1. Two words share a place only past
    16,383, where PostgreSQL puts every later place (`x.clash`, `'a' <0> 'b'`, finds those rows,
    and their places are compared as before). 3,000 vectors of four words (repeated words,
    overlapping hits, places past the last one kept), phrases of two to four words."""
    rng = random.Random(16383)
    words = ("a", "b", "c", "d")
    clashed = 0
    for _ in range(3000):
        places: dict[str, set[int]] = {}
        first = rng.choice((1, 1, 16_370))
        for i in range(rng.randint(2, 60)):
            places.setdefault(rng.choice(words), set()).add(min(first + i, 16_383))
        vector = " ".join(f"'{w}':" + ",".join(map(str, sorted(p))) for w, p in places.items())
        phrase = [rng.choice(words[:3]) for _ in range(rng.randint(2, 4))]
        hits = sum(all(p + j in places.get(w, ()) for j, w in enumerate(phrase)) for p in places.get(phrase[0], ()))
        pairs = " | ".join(f"'{a}' <0> '{b}'" for a in set(phrase) for b in set(phrase) if a < b) or None
        counted, clash = store._query(  # type: ignore[attr-defined]
            "SELECT ts_rank_cd('{1,1,1,1}', ?::tsvector, ?::tsquery)::float8, ?::tsvector @@ ?::tsquery",
            (vector, " <-> ".join(f"'{w}'" for w in phrase), vector, pairs))[0]
        if clash:
            clashed += 1
        else:
            assert counted == hits, (vector, phrase)
    assert 300 < clashed < 1500
