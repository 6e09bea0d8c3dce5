"""Signal beyond the question's own words, both off by default: search again with the words
of the best hits (pseudo-relevance feedback, `nmem.search.expand`), and weigh a record by the
evidence its session holds (`nmem.search.arrange.session_weighted`). Through the service on
both engines, and the pure steps."""

from __future__ import annotations

from typing import Any

from test_ranking import prompt

from conftest import Clock
from nmem.search import arrange, expand
from nmem.search.arrange import Placed
from nmem.search.rank import Ranking
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]  # every service test here runs on SQLite and PostgreSQL

T0 = 1_790_000_000
DAY = 86400


def ids(result: Any) -> list[int]:
    return [int(h.record.id) for h in result.hits]


# -- pseudo-relevance feedback ----------------------------------------------------------------------

def test_feedback_finds_a_record_that_shares_no_word_with_the_question(service: Service, clock: Clock) -> None:
    clock.now = T0 + 3 * DAY
    found = prompt(service, "Mel: the family trip went well, the kids loved the campfire and marshmallows", T0,
                   session_id="s1")
    prompt(service, "Ana: glad to hear it", T0 + 1, session_id="s1")
    prompt(service, "Ana: the quarterly report is due on Friday", T0 + 2, session_id="s1")
    said_apart = prompt(service, "Mel: roasted marshmallows over the campfire again with the kids last night", T0 + DAY,
                        session_id="s2")
    for n in range(6):   # unrelated turns, so the feedback words are rare
        prompt(service, f"Ana: filed expense report number {n} for the office", T0 + DAY + 10 + n, session_id="s3")
    question = "what do they do with the family"
    assert ids(service.search(question, scope="prompts")) == [found]   # only one record says "family"
    service.ranking = service.ranking.replace(expand_terms=5)
    got = service.search(question, scope="prompts")
    assert ids(got)[:2] == [found, said_apart]   # found through "campfire", "marshmallows", "kids"
    scores = [h.score for h in got.hits]
    assert scores == sorted(scores, reverse=True)


def test_feedback_changes_nothing_when_the_best_hits_hold_no_other_word(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    only = prompt(service, "flaky tests", T0)
    prompt(service, "deploy to staging", T0 + 1, session_id="s2")
    service.ranking = service.ranking.replace(expand_terms=10)
    assert ids(service.search("flaky tests", scope="prompts")) == [only]


def test_feedback_words_weigh_by_score_and_leave_out_the_question_labels_and_stop_words() -> None:
    hits = [("Mel: the kids loved the campfire, kids everywhere", 3.0), ("Ana: the campfire smoke", 1.0),
            ("nothing", 0.0)]
    words = expand.feedback_words(hits, skip=["famili"], pool=10)
    got = {s: w for s, _, w in words}
    assert "mel" not in got and "ana" not in got and "the" not in got   # labels and stop words
    assert words[0][:2] == ("kid", "kids")    # twice in the best hit
    assert got["campfir"] == 3 / 4 / 5 + 1 / 4 / 2
    rest = expand.feedback_words(hits, skip=["kid", "campfir"], pool=10)
    assert {rest[0][0], rest[1][0]} == {"love", "everywher"}   # once each in the best hit
    assert expand.feedback_words([("text", 0.0)], skip=[], pool=5) == []


def test_expansion_prefers_rare_words_and_drops_unseen_ones() -> None:
    words = [("common", "common", 1.0, ), ("rare", "rare", 0.5), ("unseen", "unseen", 2.0)]
    got = expand.expansion(words, {"common": 900, "rare": 2}, docs=1000, terms=5)
    assert [w for w, _ in got] == ["rare", "common"] and got[0][1] == 1.0
    assert expand.expansion(words, {"common": 900, "rare": 2}, docs=1000, terms=1) == [("rare", 1.0)]
    assert expand.expansion(words, {}, docs=1000, terms=5) == []


def test_both_are_off_by_default() -> None:
    assert Ranking().expand_terms == 0 and Ranking().session_weight == 0.0


# -- session evidence ------------------------------------------------------------------------------------

def test_session_weighted_lifts_the_records_of_the_session_with_the_best_evidence() -> None:
    items = [Placed(1, 10.0, "a", 0), Placed(2, 3.5, "a", 0), Placed(3, 4.0, "b", 0), Placed(4, 2.0, None, 0)]
    scores = {it.id: it.score for it in items}
    assert arrange.session_weighted(items, scores, 0.0) == scores
    got = arrange.session_weighted(items, scores, 0.5)
    assert got == {1: 15.0, 2: 5.25, 3: 4.0 * (1 + 0.5 * 4 / 10), 4: 2.0}
    assert got[2] > got[3]   # the weaker record of the stronger session passes the other session's
    summed = arrange.session_weighted(items, scores, 0.5, top=2)
    assert summed[3] == 4.0 * (1 + 0.5 * 4 / 13.5)


def test_turn_weighted_lifts_the_records_of_the_turn_with_the_best_evidence() -> None:
    turn_a, turn_b = ("s1", 1), ("s1", 5)
    items = [Placed(1, 5.5, "s1", 0, (), turn_b), Placed(2, 5.0, "s1", 0, (), turn_a),
             Placed(3, 4.0, "s1", 0, (), turn_a), Placed(4, 3.0, "s1", 0, (), turn_a),
             Placed(5, 2.0, "s1", 0, (), turn_a), Placed(6, 1.0, None, 0)]
    scores = {it.id: it.score for it in items}
    assert arrange.turn_weighted(items, scores, 0.0) == scores
    got = arrange.turn_weighted(items, scores, 0.5)   # turn a's best three: 5 + 4 + 3 = 12
    assert got == {1: 5.5 * (1 + 0.5 * 5.5 / 12), 2: 7.5, 3: 6.0, 4: 4.5, 5: 3.0, 6: 1.0}
    assert got[2] > got[1]   # a turn answering together passes a single strong record
    # every record its own turn (a chat): each weighed by its own score, the order kept
    alone = [Placed(i, float(i), "s1", 0, (), ("s1", i)) for i in range(1, 5)]
    lone = arrange.turn_weighted(alone, {it.id: it.score for it in alone}, 0.5)
    assert sorted(lone, key=lambda i: -lone[i]) == [4, 3, 2, 1]


def test_session_weight_through_the_service(service: Service, clock: Clock) -> None:
    clock.now = T0 + 2 * DAY
    best = prompt(service, "billing retry failed again: billing retry needs backoff, retry dashboards red", T0,
                  session_id="s1")
    for n in range(3):   # beyond the context window: the later record is scored on its own words
        prompt(service, f"reading the worker logs, part {n}", T0 + 1 + n, session_id="s1")
    beside = prompt(service, "billing dashboards look fine", T0 + 10, session_id="s1")
    apart = prompt(service, "billing dashboards moved to grafana", T0 + DAY, session_id="s2")
    question = "billing retry dashboards"
    assert ids(service.search(question, scope="prompts"))[:3] == [best, apart, beside]   # the newer first on a tie
    service.ranking = service.ranking.replace(session_weight=1.0)
    assert ids(service.search(question, scope="prompts"))[:3] == [best, beside, apart]
