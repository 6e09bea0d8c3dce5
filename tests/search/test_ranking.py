"""Relevance ranking of plain questions: stemming as FTS5 does it, term counts, BM25 over
context windows, time, coverage, label and answer boosts, candidates from a named time, the
store's window and statistics queries, and what the service returns."""

from __future__ import annotations

import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import Clock, record
from nmem.search import rank
from nmem.search.porter import stem
from nmem.search.rank import Candidate, Doc, IndexStats, Ranking, TermCounter
from nmem.search.timeexpr import TimeRange
from nmem.service.api import Service
from nmem.service.search import _Nearby, _within
from nmem.store import FtsStats, NewObservation, SearchFilters
from nmem.store.records import Candidates
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_790_000_000
DAY = 86400


def fts5_terms(texts: list[str]) -> list[list[str]]:
    """What SQLite's own porter tokenizer stores for each text, in order."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(c, tokenize='porter unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    conn.executemany("INSERT INTO t(rowid, c) VALUES (?, ?)", list(enumerate(texts)))
    out: list[list[str]] = [[] for _ in texts]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        out[doc].append(term)
    conn.close()
    return out


# -- stemming and counting as the index does ---------------------------------------------------------

TRICKY = """caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled
sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational
valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization
predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti sensibiliti
triplicate formative formalize electriciti electrical hopeful goodness revival allowance inference
airliner gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou
communism activate angulariti homologous effective bowdlerize probate rate cease controll roll
agencies researching researcher turtles causes ages aliases generously skies dying lying""".split()


def test_porter_stems_like_fts5_on_nmems_own_vocabulary() -> None:
    words: set[str] = set(TRICKY)
    for path in [*ROOT.glob("src/**/*.py"), *ROOT.glob("*.md"), *ROOT.glob("docs/*.md")]:
        words.update(w.lower() for w in re.findall(r"[^\W_]+", path.read_text(encoding="utf-8")) if w.isascii())
    ordered = sorted(words)
    assert len(ordered) > 2000
    expected = fts5_terms(ordered)
    wrong = [(w, e[0], stem(w)) for w, e in zip(ordered, expected, strict=True) if [stem(w)] != e]
    assert wrong == []


def test_porter_keeps_short_and_long_tokens() -> None:
    assert (stem("is"), stem("as"), stem("x" * 65 + "ing")) == ("is", "as", "x" * 65 + "ing")
    words = ["naïveties", "œuvres", "straßes", "ÉCOLES", "mañanas"]   # folded first, then non-ASCII bytes
    assert [stem(rank.fold(w)) for w in words] == [t[0] for t in fts5_terms(words)]


def test_fold_lowercases_and_strips_single_diacritics_only() -> None:
    assert rank.fold("Café NAÏVE Ünïcode") == "cafe naive unicode"
    assert rank.fold("Việt") == "việt"            # two marks on one letter: FTS5 leaves it too
    assert rank.fold("plain ascii") == "plain ascii"


def test_term_counter_counts_what_fts5_indexed() -> None:
    texts = ["Researching the researcher's research agencies", "The café's cafés, a CAFE",
             "turtles: a turtle, turtled?", "nothing here", "parse_time(parsed) parses",
             "İstanbul research, parsed"]   # İ lower-cases to two characters
    stems = rank.query_stems(["research", "cafe", "turtles", "parse"])
    assert stems == ("research", "cafe", "turtl", "pars")
    counter = TermCounter(stems)
    indexed = fts5_terms(texts)
    for text, terms in zip(texts, indexed, strict=True):
        assert counter.counts(text) == tuple(terms.count(s) for s in stems), text
    assert counter.count_many(texts) == [counter.counts(t) for t in texts]


def test_term_counter_with_no_stems_counts_nothing() -> None:
    assert TermCounter(()).count_many(["anything", "at all"]) == [(), ()]


@pytest.mark.parametrize(("text", "labelled"), [
    ("Caroline: I went to the support group", True),
    ("  caroline said: hi", True),                              # up to three words, any case
    ("Dr. Caroline Smith: the results are in", True),
    ("Caroline's mum: hello", True),
    ("Melanie: thanks, Caroline!", False),                       # named, but not the label
    ("http://caroline: nothing", False),                         # a URL is no label
    ("so then I told Caroline: yes", False),                     # more than three words before the colon
    ("2023 Caroline: numbers first", False),
    ("Caroline went home", False),
])
def test_a_label_is_the_short_name_a_record_opens_with(text: str, labelled: bool) -> None:
    counter = TermCounter(rank.query_stems(["caroline", "support"]))
    assert counter.labelled(text) is labelled


def test_label_stems_are_the_index_terms_of_the_opening_label() -> None:
    assert rank.label_stems("Caroline: I went to the support group") == ("carolin",)
    assert rank.label_stems("Dr. Caroline Smith: results") == ("dr", "carolin", "smith")
    assert rank.label_stems("so then I told Caroline: yes") == ()
    assert rank.label_stems("http://caroline: nothing") == ()


@pytest.mark.parametrize(("question", "text", "answers"), [
    ("When did Gina open her store?", "I opened it last Friday", True),
    ("when did the deploy break", "broke on 2023-05-08, see 5/8 notes", True),
    ("What date was the release?", "we shipped in March", True),
    ("When did Gina open her store?", "the store is open", False),
    ("When did Gina open her store?", "you may come by", False),    # the verb, not the month
    ("How many turtles does Nate have?", "three of them now", True),
    ("how often do the tests fail", "fails 2 times a week", True),
    ("How many turtles does Nate have?", "turtles are great", False),
    ("How many books?", "stories from the 1900s", True), ("how many runs", "an mp3 of the 5K", True),
    ("how many runs", "an mp3 and a someone", False),
])
def test_answer_cue_matches_what_the_question_asks_for(question: str, text: str, answers: bool) -> None:
    cue = rank.answer_cue(question)
    assert cue is not None and cue(text) is answers


@pytest.mark.parametrize("question", ["What did Gina open?", "why does it fail when run twice",
                                      "how did the deploy go", "which city did they visit"])
def test_other_questions_have_no_answer_cue(question: str) -> None:
    assert rank.answer_cue(question) is None


# -- candidates ------------------------------------------------------------------------------------

def test_candidates_or_the_rarest_words_within_the_postings_budget() -> None:
    df = {"webhook": 40, "flaki": 300, "test": 30_000, "fail": 9_000}
    terms = ["flaky", "webhooks", "tests", "fail"]
    every = '"flaky" OR "webhooks" OR "tests" OR "fail"'
    # question order; the OR of every word last, for filters that leave the rare words out
    assert rank.candidate_queries(terms, df, 5000) == ['"flaky" OR "webhooks"', every]
    assert rank.candidate_queries(terms, df, 10_000) == ['"flaky" OR "webhooks" OR "fail"', every]
    assert rank.candidate_queries(terms, df, 100_000) == [every]
    # a word the index never saw costs nothing and finds nothing: it is left out
    assert rank.candidate_queries(["nowhere", "flaky", "tests"], df, 5000) == ['"flaky"', '"flaky" OR "tests"']
    assert rank.candidate_queries(["nowhere", "tests"], df, 5000) == ['"tests"']
    assert rank.candidate_queries(["nowhere", "else"], df, 5000) == ['"nowhere" OR "else"']


def test_rare_terms_are_the_rarest_within_the_budget_in_question_order() -> None:
    df = {"webhook": 40, "flaki": 300, "test": 30_000, "fail": 9_000}
    terms = ["flaky", "webhooks", "tests", "fail", "nowhere"]
    assert rank.rare_terms(terms, df, 5000) == ["flaky", "webhooks"]
    assert rank.rare_terms(terms, df, 10_000) == ["flaky", "webhooks", "fail"]
    assert rank.rare_terms(["tests", "fail"], df, 5000) == []


def test_candidates_of_only_common_words_are_all_of_them_then_the_rarest() -> None:
    df = {"test": 30_000, "fail": 9_000}
    assert rank.candidate_queries(["tests", "fail"], df, 5000) == [
        '"tests" AND "fail"', '"fail"', '"tests" OR "fail"']
    assert rank.candidate_queries(["tests"], df, 5000) == ['"tests"']
    assert rank.candidate_queries([], df, 5000) == []


def test_a_common_word_still_finds_what_the_rare_words_cannot(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    for i in range(4):
        prompt(service, f"deploy step {i}", T0 + i, session_id=f"s{i}", cwd="/w/ops")
    prompt(service, "zanzibar", T0 + 10, session_id="other", cwd="/w/demo")   # the rare word, elsewhere
    service.ranking = service.ranking.replace(postings=2)
    result = service.search("zanzibar deploy", scope="prompts", project="ops")
    assert len(result.hits) == 4 and result.match == '"zanzibar" OR "deploy"'


# -- the arithmetic ---------------------------------------------------------------------------------

def test_idf_is_bm25_plus_one_and_never_negative() -> None:
    stats = IndexStats(docs=100, avg_length=10, df={"rare": 1, "everywhere": 100})
    assert stats.idf("rare") == pytest.approx(math.log(1 + 99.5 / 1.5))
    assert stats.idf("everywhere") == pytest.approx(math.log(1 + 0.5 / 100.5))
    assert stats.idf("unknown") == pytest.approx(math.log(1 + 100.5 / 0.5))


def test_window_tf_weighs_neighbours_by_distance() -> None:
    own = Doc((1, 0), 10)
    weights = rank.window_weights(Ranking(window=2, window_decay=0.5))
    assert weights == {-2: 0.25, -1: 0.5, 0: 1.0, 1: 0.5, 2: 0.25}
    tf, length = rank.window_tf(own, [(Doc((0, 2), 4), -1), (Doc((1, 1), 8), 2), (Doc((5, 5), 99), 3)], weights)
    assert tf == [1 + 0.25 * 1, 0.5 * 2 + 0.25 * 1]                  # three records away: outside
    assert length == 10 + 0.5 * 4 + 0.25 * 8


def test_bm25_matches_the_okapi_formula() -> None:
    k1, b = 1.2, 0.75
    got = rank.bm25([2.0, 0.0], length=20, idf=[1.5, 3.0], avg_length=10, k1=k1, b=b)
    assert got == pytest.approx(1.5 * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 2)))


def test_coverage_is_the_share_of_idf_held() -> None:
    assert rank.coverage(Doc((1, 0, 3), 5), [1.0, 2.0, 1.0]) == pytest.approx(0.5)
    assert rank.coverage(Doc((0,), 5), [0.0]) == 0.0


def test_time_weight_halves_outside_the_range_per_half_life() -> None:
    ranking = Ranking(time_boost=1.0, time_half_life_days=3.0)
    may = TimeRange(T0, T0 + 31 * DAY, "in May")
    assert rank.time_weight(T0 + DAY, may, ranking) == 2.0
    assert rank.time_weight(T0 + 34 * DAY, may, ranking) == pytest.approx(1.5)
    assert rank.time_weight(T0 + DAY, None, ranking) == 1.0
    assert rank.time_weight(T0 + DAY, may, ranking.replace(time_boost=0.0)) == 1.0


def test_recency_weight_is_off_by_default_and_halves_weekly() -> None:
    assert rank.recency_weight(T0 - 30 * DAY, T0, Ranking()) == 1.0
    on = Ranking(recency=1.0)
    assert rank.recency_weight(T0, T0, on) == 2.0
    assert rank.recency_weight(T0 - 7 * DAY, T0, on) == pytest.approx(1.5)
    assert rank.recency_weight(T0 + DAY, T0, on) == 2.0          # a clock behind the data: new is new


def test_score_lets_a_neighbour_supply_the_missing_word() -> None:
    stats = IndexStats(docs=1000, avg_length=10, df={"staging": 10, "port": 10})
    docs = {1: Doc((1, 0), 10), 2: Doc((0, 1), 10),   # question then answer, one word each
            3: Doc((0, 1), 10), 4: Doc((0, 0), 10)}   # the same answer word, next to nothing
    windows = {2: [(1, -1)], 3: [(4, -1)]}
    cands = [Candidate(2, T0), Candidate(3, T0)]
    on = rank.score(cands, docs, windows, ("staging", "port"), stats, Ranking(coverage=0.0))
    assert on[2] > on[3]
    off = rank.score(cands, docs, windows, ("staging", "port"), stats, Ranking(window=0, coverage=0.0))
    assert off[2] == pytest.approx(rank.score(cands, docs, {}, ("staging", "port"), stats,
                                              Ranking(window=0, coverage=0.0))[3])


def test_score_boosts_the_named_time_and_coverage() -> None:
    stats = IndexStats(docs=100, avg_length=5, df={"deploy": 5, "api": 5})
    docs = {1: Doc((1, 0), 5), 2: Doc((1, 0), 5), 3: Doc((1, 1), 5)}
    may = TimeRange(T0, T0 + 31 * DAY, "in May")
    cands = [Candidate(1, T0 - 100 * DAY), Candidate(2, T0 + DAY), Candidate(3, T0 - 100 * DAY)]
    scores = rank.score(cands, docs, {}, ("deploy", "api"), stats, Ranking(coverage=0.0), when=may)
    assert scores[2] == pytest.approx(2 * scores[1])
    flat = rank.score(cands, docs, {}, ("deploy", "api"), stats, Ranking(coverage=0.0))
    covered = rank.score(cands, docs, {}, ("deploy", "api"), stats, Ranking(coverage=0.5))
    assert covered[3] / flat[3] == pytest.approx(1.5) and covered[1] / flat[1] == pytest.approx(1.25)


def test_score_boosts_a_labelled_record_and_one_that_answers() -> None:
    stats = IndexStats(docs=100, avg_length=5, df={"gina": 50, "store": 5})
    docs = {1: Doc((1, 1), 5), 2: Doc((1, 1), 5, labelled=True), 3: Doc((1, 1), 5, answers=True)}
    cands = [Candidate(i, T0) for i in docs]
    ranking = Ranking(coverage=0.0, label_boost=0.5, answer_boost=0.25)
    scores = rank.score(cands, docs, {}, ("gina", "store"), stats, ranking)
    assert scores[2] == pytest.approx(1.5 * scores[1]) and scores[3] == pytest.approx(1.25 * scores[1])
    off = rank.score(cands, docs, {}, ("gina", "store"), stats, ranking.replace(label_boost=0.0, answer_boost=0.0))
    assert off[1] == off[2] == off[3] == pytest.approx(scores[1])


# -- the store's side -----------------------------------------------------------------------------

def prompt(service: Service, text: str, at: int, session_id: str = "s1", cwd: str = "/w/demo") -> int:
    return int(record(service, "UserPromptSubmit", now=at, session_id=session_id, cwd=cwd, prompt=text).prompt_id)


def test_session_windows_of_prompts_stay_in_their_session(service: Service) -> None:
    a = [prompt(service, f"a{i}", T0 + i) for i in range(3)]
    other = prompt(service, "b0", T0 + 3, session_id="s2")     # interleaved, another session
    a += [prompt(service, f"a{i}", T0 + 4 + i) for i in range(3, 6)]
    windows = service.store.session_windows("prompts", [a[0], a[3], a[5], other], 2)
    assert windows[a[0]] == [(a[1], 1), (a[2], 2)]
    assert windows[a[3]] == [(a[1], -2), (a[2], -1), (a[4], 1), (a[5], 2)]
    assert windows[a[5]] == [(a[3], -2), (a[4], -1)]
    assert windows[other] == []                               # alone in its session
    assert service.store.session_windows("prompts", [a[3]], 0) == {}


def test_session_windows_of_observations_follow_time_then_id(service: Service) -> None:
    store = service.store
    with store.transaction():
        store.ensure_session("s1", "demo", T0)
        # same second for the first three: the id breaks the tie; the last came earlier in time
        ids = [store.add_observation(NewObservation("s1", "demo", ts, "command", "PostToolUse", f"cmd {n}"))
               for n, ts in enumerate([T0 + 5, T0 + 5, T0 + 5, T0 + 1])]
    windows = store.session_windows("observations", [ids[1]], 2)
    assert windows[ids[1]] == [(ids[3], -2), (ids[0], -1), (ids[2], 1)]


def test_rank_candidates_reads_what_the_separate_reads_give(service: Service) -> None:
    """One read of a trail scope (one statement on PostgreSQL) holds the statistics, the
    candidates of the first expression that finds any, their windows and texts, as the
    separate reads give them; a wider reach holds the narrower windows and the rows' records."""
    store = service.store
    with store.transaction():
        store.ensure_session("s1", "demo", T0)
        store.ensure_session("s2", "demo", T0)
        ids = [store.add_observation(NewObservation(f"s{1 + n % 2}", "demo", T0 + n, "command", "PostToolUse",
                                                    f"step {n} deploy" + (" rollback" if n % 3 == 0 else "")))
               for n in range(24)]
    asked: list[dict[str, int]] = []

    def plan(df: Any) -> list[str]:
        asked.append(dict(df))
        return ['"nowhere"', '"rollback" OR "deploi"']

    read = store.rank_candidates("observations", ["rollback", "deploi"], plan, SearchFilters(), 5, 2, 4)
    assert asked == [{"rollback": 8, "deploi": 24}]
    stats = store.fts_stats("observations", ["rollback", "deploi"])
    assert (read.stats.docs, read.stats.tokens, read.stats.df) == (stats.docs, stats.tokens, stats.df)
    assert read.match == '"rollback" OR "deploi"'
    assert read.ids == store.match_ids("observations", read.match, SearchFilters(), 5)
    assert read.span in (2, 4)
    assert read.windows == store.session_windows("observations", read.ids, read.span)
    named = {*read.ids, *(n for i in read.ids for n, d in read.windows[i] if abs(d) <= 2)}
    assert read.texts.items() >= store.fts_texts("observations", sorted(named)).items()
    assert all(row == store.get_observations([i])[0] for i, row in (read.records or {}).items())
    assert ids[-1] in read.windows or ids[-1] not in read.ids
    none = store.rank_candidates("observations", ["nowhere"], lambda df: ['"nowhere"'], SearchFilters(), 5, 2, 4)
    assert (none.ids, none.match, none.windows) == ([], '"nowhere"', {})


def test_a_neighbours_window_is_cut_from_a_wider_one_exactly(service: Service) -> None:
    """A promoted neighbour's window, cut from its candidate's wider window (what one
    PostgreSQL statement reads), is the window the store reads for it."""
    line = [prompt(service, f"turn {n}", T0 + n) for n in range(9)]
    store = service.store
    anchor = line[3]
    wide = store.session_windows("prompts", [anchor], 4)
    read = Candidates(FtsStats(9, 18, {}), "x", [anchor], 4, wide, {})
    near = _Nearby(read, 2)
    for n in line:
        if n != anchor and abs(line.index(n) - 3) <= 2:
            assert near[n] == store.session_windows("prompts", [n], 2)[n]
    assert line[8] not in near            # 5 records away: its window reaches past the wide one


def test_fts_texts_and_stats_are_what_fts5_indexed(service: Service) -> None:
    ids = [prompt(service, "deploy the api to staging", T0), prompt(service, "the api is down, again", T0 + 1)]
    assert service.store.fts_texts("prompts", [*ids, 999]) == {
        ids[0]: ("deploy the api to staging", 5, T0, "user"), ids[1]: ("the api is down, again", 5, T0 + 1, "user")}
    stats = service.store.fts_stats("prompts", ["api", "deploi", "missing"])
    assert (stats.docs, stats.tokens, stats.df) == (2, 10, {"api": 2, "deploi": 1})
    with pytest.raises(ValueError, match="no ranking support"):
        service.store.fts_stats("memories", [])


def test_term_counts_are_reused_until_the_index_grows_five_percent(service: Service) -> None:
    store = service.store
    with store.transaction():
        store.ensure_session("s1", "demo", T0)
        for i in range(100):
            store.add_prompt("s1", T0 + i, "user", f"filler {i} api" if i < 10 else f"filler {i}")
    assert store.fts_stats("prompts", ["api"]).df == {"api": 10}
    prompt(service, "the api again", T0 + 200)                       # 1% more rows: the count is kept
    assert store.fts_stats("prompts", ["api"]) == rank_stats(101, {"api": 10}, store)
    with store.transaction():
        for i in range(10):
            store.add_prompt("s1", T0 + 300 + i, "user", "api")
    assert store.fts_stats("prompts", ["api"]).df == {"api": 21}     # 11% more: counted again


def rank_stats(docs: int, df: dict[str, int], store: Any) -> Any:
    current = store.fts_stats("prompts", [])
    assert current.docs == docs
    return type(current)(docs, current.tokens, df)


# -- what search returns ------------------------------------------------------------------------------

def ids(result: Any) -> list[Any]:
    return [h.record.id for h in result.hits]


@pytest.fixture
def chat(service: Service, clock: Clock) -> dict[str, int]:
    """Two sessions of prompts; the answer to a question sits in the turn after it."""
    clock.now = T0 + 30 * DAY
    p: dict[str, int] = {}
    p["question"] = prompt(service, "which port does the staging database listen on", T0)
    p["answer"] = prompt(service, "5433, and the replica answers on 5434", T0 + 1)
    p["aside"] = prompt(service, "thanks, lunch now", T0 + 2)
    p["other"] = prompt(service, "replica count: three", T0 + DAY, session_id="s2")
    p["filler"] = prompt(service, "nothing to see", T0 + DAY + 1, session_id="s2")
    return p


def test_a_neighbouring_turn_lends_its_words(service: Service, chat: dict[str, int]) -> None:
    got = ids(service.search("staging database replica port", scope="prompts"))
    assert got.index(chat["answer"]) < got.index(chat["other"])
    service.ranking = service.ranking.replace(window=0)
    flat = ids(service.search("staging database replica port", scope="prompts"))
    assert flat.index(chat["other"]) < flat.index(chat["answer"])   # alone, the shorter turn wins


def test_context_never_becomes_a_hit(service: Service, chat: dict[str, int]) -> None:
    got = ids(service.search("staging database replica port", scope="prompts"))
    assert set(got) == {chat["question"], chat["answer"], chat["other"]}   # no aside, no filler


def test_a_strong_candidates_neighbour_outside_the_pool_is_promoted(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    weak = [prompt(service, f"note {i} about the cache", T0 + i, session_id=f"w{i}") for i in range(4)]
    question = prompt(service, "why is the redis cache eviction policy allkeys-lru", T0 + 10)
    answer = prompt(service, "the cache, yes, the one we talked about before lunch", T0 + 11)
    service.ranking = service.ranking.replace(candidates=2)   # pool = 2 for a page of 2
    # BM25 alone ranks the question, then the short notes: the long answer is outside the pool
    assert ids(service.search("redis cache eviction", scope="prompts", limit=2)) == [question, answer]
    # a filter a neighbour could fail turns promotion off: the pool is all there is
    narrowed = ids(service.search("redis cache eviction", scope="prompts", limit=2, date_start=T0))
    assert narrowed[0] == question and narrowed[1] in weak


def test_a_named_time_brings_its_records_forward(service: Service, clock: Clock) -> None:
    may = int(T0 - 120 * DAY)
    clock.now = T0
    in_may = prompt(service, "deploy the billing api", may, session_id="s-may")
    later = prompt(service, "deploy the billing api", T0 - DAY, session_id="s-now")
    assert ids(service.search("deploy billing api", scope="prompts"))[0] == later   # same text: newer id first
    from datetime import UTC, datetime
    month = datetime.fromtimestamp(may, UTC).strftime("%B %Y")
    assert ids(service.search(f"what did we deploy in {month}", scope="prompts"))[0] == in_may
    assert ids(service.search("what did we deploy yesterday", scope="prompts"))[0] == later
    service.ranking = service.ranking.replace(time_expressions=False)
    assert ids(service.search(f"what did we deploy in {month}", scope="prompts"))[0] == later


def test_the_named_time_adds_its_own_best_matches_to_the_candidates(service: Service, clock: Clock) -> None:
    clock.now = T0
    for i in range(6):   # the best BM25 matches, all long ago
        prompt(service, f"turtle tank cleaned {i}", T0 - 300 * DAY + i, session_id=f"old{i}")
    then = prompt(service, "a long walk with the turtle and the dog and then lunch in the park", T0 - 40 * DAY,
                  session_id="then")
    service.ranking = service.ranking.replace(candidates=3, promote=0)
    from datetime import UTC, datetime
    month = datetime.fromtimestamp(T0 - 40 * DAY, UTC).strftime("%B %Y")
    assert ids(service.search(f"turtle in {month}", scope="prompts", limit=3))[0] == then
    service.ranking = service.ranking.replace(time_candidates=0)
    assert then not in ids(service.search(f"turtle in {month}", scope="prompts", limit=3))


def test_within_narrows_filters_to_the_named_time() -> None:
    may = TimeRange(T0, T0 + 31 * DAY, "in May")
    got = _within(SearchFilters(project="p"), may, 1.0)
    assert (got.project, got.date_start, got.date_end) == ("p", T0 - DAY, T0 + 32 * DAY - 1)
    tighter = _within(SearchFilters(date_start=T0 + 2 * DAY, date_end=T0 + 40 * DAY), may, 1.0)
    assert (tighter.date_start, tighter.date_end) == (T0 + 2 * DAY, T0 + 32 * DAY - 1)
    before = _within(SearchFilters(), TimeRange(None, T0, "before May"), 0.0)
    assert (before.date_start, before.date_end) == (None, T0 - 1)


def test_a_question_naming_a_speaker_prefers_what_they_said(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    asked = prompt(service, "Bob: Alice, did you paint the lake?", T0, session_id="s1")
    filler = prompt(service, "Bob: nice weather today", T0 + 1, session_id="s1")
    told = prompt(service, "Alice: yes, that painting is finished, the colours took me a while", T0,
                  session_id="s2")
    got = ids(service.search("What did Alice paint?", scope="prompts"))
    assert got[0] == told and filler not in got
    # Without the label boost (and with Bob's question scored as a statement) BM25 prefers Bob's line.
    service.ranking = service.ranking.replace(label_boost=0.0, ask_factor=1.0, ask_only_factor=1.0)
    assert ids(service.search("What did Alice paint?", scope="prompts"))[0] == asked


def test_a_when_question_prefers_the_record_that_says_when(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    plain = prompt(service, "the migration to postgres went fine", T0, session_id="s1")
    dated = prompt(service, "we ran the migration to postgres last Friday, all good", T0, session_id="s2")
    assert ids(service.search("When did we run the postgres migration?", scope="prompts"))[0] == dated
    assert ids(service.search("Did the postgres migration go fine?", scope="prompts"))[0] == plain
    service.ranking = service.ranking.replace(answer_boost=0.0)
    assert ids(service.search("When did we run the postgres migration?", scope="prompts"))[0] == plain


def test_a_question_that_is_only_a_time_searches_its_words(service: Service, clock: Clock) -> None:
    clock.now = T0
    said = prompt(service, "yesterday the build broke", T0 - 10 * DAY)
    result = service.search("yesterday", scope="prompts")
    assert (ids(result), result.match) == ([said], '"yesterday"')


def test_time_words_are_not_search_words(service: Service, clock: Clock) -> None:
    clock.now = T0
    prompt(service, "may the flaky tests pass", T0 - DAY)
    result = service.search("flaky tests in May 2026", scope="prompts")
    assert result.match == '"flaky" OR "tests"'


def test_a_quoted_title_in_a_question_falls_back_to_its_words(service: Service, chat: dict[str, int]) -> None:
    book = prompt(service, "finished reading the lean startup, great book", T0 + 5)
    # as typed, FTS5 wants every word ("what", "we", …) and the exact phrase: nothing
    result = service.search('what did we think of "The Lean Startup" book?', scope="prompts")
    assert ids(result) == [book]
    assert result.match == '"lean" OR "startup" OR "book"'   # "think" is in no record
    # a quoted phrase that exists runs as typed
    exact = service.search('"lean startup" book', scope="prompts")
    assert (ids(exact), exact.match) == ([book], '"lean startup" book')


def test_relevance_pages_are_pages_of_one_ranking(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    for i in range(30):
        prompt(service, f"widget {'gadget ' * (i % 4)}step {i}", T0 + i, session_id=f"s{i % 3}")
    full = ids(service.search("widget gadget", scope="prompts", limit=30))
    paged = [i for off in range(0, 30, 7)
             for i in ids(service.search("widget gadget", scope="prompts", limit=7, offset=off))]
    assert paged == full and len(set(full)) == 30


def test_observation_filters_hold_in_the_ranked_path(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    record(service, "PostToolUse", now=T0, session_id="s1", cwd="/w/demo", tool_name="Bash",
           tool_input={"command": "pytest tests/test_cache.py"}, tool_response={"exit_code": 0})
    edit = record(service, "PostToolUse", now=T0 + 1, session_id="s1", cwd="/w/demo", tool_name="Edit",
                  tool_input={"file_path": "/w/demo/src/cache.py", "old_string": "a", "new_string": "b"})
    got = service.search("cache tests", obs_type="file_edit")
    assert ids(got) == [edit.observation_id]


def test_scope_all_ranks_the_trail_and_keeps_memories(service: Service, chat: dict[str, int]) -> None:
    mem = service.remember("The staging database listens on 5433", namespace="decisions", project="demo")
    hits = service.search("staging database port", scope="all", limit=20).hits
    assert {h.kind for h in hits} >= {"prompt", "memory"}
    assert any(h.kind == "memory" and h.record.id == mem.id for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_tiers_ranking_is_the_fts5_order_of_the_strictest_tier(service: Service, chat: dict[str, int]) -> None:
    service.ranking = service.ranking.replace(candidates=0)
    result = service.search("staging database port", scope="prompts")
    assert (ids(result), result.match) == ([chat["question"]], '"staging" AND "database" AND "port"')
