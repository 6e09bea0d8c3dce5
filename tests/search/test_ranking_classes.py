"""Each class of question plain BM25 ranks wrong, on a small hand-built trail, through the
service on both engines: the answer in the turn after the one that asked (replies), a
near-empty turn beside the answer ("see you"), a date said relative to the record's own time
("last month"), an answer spread over sessions, a fact restated later (the newer wins), and
pure checks of the arrangement (`nmem.search.arrange`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from test_ranking import prompt

from conftest import Clock, record
from nmem.search import arrange, rank
from nmem.search.arrange import Placed
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

T0 = 1_790_000_000
DAY = 86400


def ids(result: Any) -> list[int]:
    return [int(h.record.id) for h in result.hits]


# -- the answer sits in the turn after the hit --------------------------------------------------------

def test_the_reply_to_a_matching_question_ranks_beside_it(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    asked = prompt(service, "how long has the staging cluster been up without a restart?", T0)
    answer = int(service.store.add_prompt("s1", T0 + 1, "agent", "since the 3rd of March, no downtime at all"))
    after = prompt(service, "good to know", T0 + 2)
    other = prompt(service, "restart the staging cluster after the upgrade", T0 + DAY, session_id="s2")
    got = ids(service.search("how long has the staging cluster been up", scope="prompts"))
    # The answer first: the question itself only asks, and keeps half its score (ask_only_factor).
    assert got[0] == answer and asked in got and other in got and after not in got
    service.ranking = service.ranking.replace(replies=False)
    assert answer not in ids(service.search("how long has the staging cluster been up", scope="prompts"))


def test_a_user_going_on_is_no_reply(service: Service, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    clock.now = T0 + DAY
    asked = prompt(service, "why does the cache deadlock under load?", T0)
    more = prompt(service, "switch it to WAL", T0 + 1)
    fetched: list[int] = []
    read = service.store.get_prompts

    def get_prompts(wanted: list[int]) -> Any:
        fetched.extend(wanted)
        return read(wanted)

    monkeypatch.setattr(service.store, "get_prompts", get_prompts)
    got = ids(service.search("cache deadlock", scope="prompts"))
    assert asked in got and more not in got   # the user's next prompt, not an answer
    assert more not in fetched   # its writer came with its text, in the candidates' read


def test_a_speaker_going_on_is_no_reply(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    asked = prompt(service, "Ana: did the staging cluster come back up?", T0)
    more = prompt(service, "Ana: also, lunch at noon", T0 + 1)
    answered = prompt(service, "Ben: yes, since nine", T0 + 2)
    got = ids(service.search("did the staging cluster come back", scope="prompts"))
    assert asked in got and more not in got and answered not in got   # Ben's answer is not next


def test_arrange_reads_questions_and_reply_scores() -> None:
    assert arrange.asks("which port? the usual one") and arrange.asks("is it up?")
    assert not arrange.asks("see https://example.org/?q=port") and not arrange.asks("it is up")
    assert arrange.answers_to("Ana: up?", "Ben: yes") and arrange.answers_to("up?", "yes")
    assert not arrange.answers_to("Ana: up?", "Ana: also")
    assert arrange.reply_score(10.0, 2.0, 0.9) == 9.0 and arrange.reply_score(10.0, 9.5, 0.9) == 9.5


# -- a near-empty turn does not outrank the answer beside it ---------------------------------------------

def test_a_near_empty_turn_yields_to_the_answer_beside_it(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    prompt(service, "which region and bucket hold the billing backups", T0)
    short = prompt(service, "billing, right", T0 + 1)
    answer = prompt(service, "the billing backups go nightly to the eu-west bucket, kept ninety days", T0 + 2)
    question = "billing backups region bucket"
    got = ids(service.search(question, scope="prompts"))
    assert got.index(answer) < got.index(short)
    service.ranking = service.ranking.replace(brief_factor=1.0)
    flat = ids(service.search(question, scope="prompts"))
    assert flat.index(short) < flat.index(answer)   # its short window wins on BM25 alone


# -- a record that asks yields to one that tells ------------------------------------------------------------

def test_a_turn_that_only_asks_yields_to_the_statement(service: Service, clock: Clock) -> None:
    clock.now = T0 + 2 * DAY
    asker = prompt(service, "Ana: nice! which pool do you swim in on weekends?", T0)
    prompt(service, "Ben: the gym downstairs, mostly", T0 + 1)   # answers, but shares no word
    told = prompt(service, "Ben: I swim every morning at the city pool before work, about forty lengths",
                  T0 + DAY, session_id="s2")
    question = "which pool to swim in"
    got = ids(service.search(question, scope="prompts"))
    assert got.index(told) < got.index(asker)
    service.ranking = service.ranking.replace(ask_factor=1.0, ask_only_factor=1.0)
    flat = ids(service.search(question, scope="prompts"))
    assert flat.index(asker) < flat.index(told)   # shorter: BM25 alone prefers it


def test_how_much_a_record_asks() -> None:
    assert rank.asking("Andrew: Cute! What are their names?") == rank.ASKS_ONLY
    assert rank.asking("Nate: Wow, Joanna! Seen it? [shares a photo: a dog on a couch]") == rank.ASKS_ONLY
    assert rank.asking('did the deploy finish?")') == rank.ASKS_ONLY
    told_then_asked = "John: I finished Dune last week and loved the world building. Have you read it?"
    assert rank.asking(told_then_asked) == rank.ENDS_ASKING
    assert rank.asking("Ana: is it up? It came back at nine after the restart.") == 0
    assert rank.asking("see https://example.org/?q=port") == 0 and rank.asking("") == 0
    assert rank.asking("x" * 700 + " is it up?") == rank.ENDS_ASKING   # a long record is never only a question


# -- a date said relative to the record's own time ---------------------------------------------------------

def test_last_month_in_a_record_counts_from_its_own_time(service: Service, clock: Clock) -> None:
    june_20 = int(datetime(2026, 6, 20, tzinfo=UTC).timestamp())
    sept = int(datetime(2026, 9, 1, tzinfo=UTC).timestamp())
    clock.now = sept + DAY
    said = prompt(service, "last month we moved the office to Leeds", june_20, session_id="june")
    plain = prompt(service, "we moved the office to Leeds", sept, session_id="sept")
    question = "where did we move the office in May 2026?"
    assert ids(service.search(question, scope="prompts"))[0] == said
    service.ranking = service.ranking.replace(said_times=False)
    assert ids(service.search(question, scope="prompts"))[0] == plain


# -- an answer spread over sessions ----------------------------------------------------------------------------

def test_spread_brings_other_sessions_up(service: Service, clock: Clock) -> None:
    clock.now = T0 + 2 * DAY
    crowd = [prompt(service, f"watered the garden tomatoes, round {i}", T0 + i, session_id="s1") for i in range(4)]
    apart = prompt(service, "the garden tomatoes got blight, sprayed copper", T0 + DAY, session_id="s2")
    question = "what happened to the garden tomatoes"
    assert set(ids(service.search(question, scope="prompts", limit=3))) <= set(crowd)   # one session crowds
    service.ranking = service.ranking.replace(spread=0.5)
    got = service.search(question, scope="prompts", limit=3)
    assert apart in ids(got)[:2]
    scores = [h.score for h in got.hits]
    assert scores == sorted(scores, reverse=True)   # weighed scores still merge with other scopes


def test_spread_by_session_weighs_each_further_hit_of_a_session() -> None:
    items = [Placed(1, 10.0, "a", 0), Placed(2, 9.0, "a", 0), Placed(3, 8.0, "a", 0), Placed(4, 6.0, "b", 0),
             Placed(5, 5.0, None, 0), Placed(6, 4.0, None, 0)]
    scores = {it.id: it.score for it in items}
    assert [i for i, _ in arrange.spread_by_session(items, scores, 1.0)] == [1, 2, 3, 4, 5, 6]
    got = arrange.spread_by_session(items, scores, 0.5)
    assert got == [(1, 10.0), (4, 6.0), (5, 5.0), (2, 4.5), (6, 4.0), (3, 2.0)]
    freed = arrange.spread_by_session(items, scores, 0.5, free=1)
    assert [i for i, _ in freed] == [1, 2, 4, 5, 6, 3]   # 3 and 6 tie at 4.0: the newer id first


# -- a fact restated later ------------------------------------------------------------------------------------------

def test_the_newer_of_two_statements_about_the_same_subject_wins(service: Service, clock: Clock) -> None:
    clock.now = T0 + 10 * DAY
    old = prompt(service, "the deploy target region is eu-west-1 for the deploy", T0, session_id="s1")
    new = prompt(service, "we changed it: the deploy target region is now us-east-2", T0 + 5 * DAY,
                  session_id="s2")
    question = "which deploy target region"
    service.ranking = service.ranking.replace(supersede=1.0)
    assert ids(service.search(question, scope="prompts"))[:2] == [old, new]   # more of the words: BM25 wins
    service.ranking = service.ranking.replace(supersede=0.5)
    assert ids(service.search(question, scope="prompts"))[:2] == [new, old]


def test_superseded_needs_a_newer_record_elsewhere_holding_the_same_words() -> None:
    idf = [1.0, 1.0, 0.1]
    items = [Placed(1, 10.0, "a", 100, (1, 1, 0)), Placed(2, 8.0, "b", 200, (1, 1, 1)),
             Placed(3, 7.0, "a", 300, (1, 1, 0)), Placed(4, 6.0, "c", 50, (0, 0, 1)),
             Placed(5, 5.0, "d", 400, (0, 0, 1))]
    got = arrange.superseded(items, idf, 0.5, 0.5)
    # 1 is restated by 2 (newer, other session); 2 by none (3 lacks a word); 3 is the newest
    # holding its words; 4's only word is too common to name a subject
    assert got == {1: 5.0, 2: 8.0, 3: 7.0, 4: 6.0, 5: 5.0}
    assert arrange.superseded(items, idf, 0.5, 1.0) == {it.id: it.score for it in items}


@pytest.mark.parametrize("factor", [0.5, 0.9])
def test_supersession_leaves_a_lone_statement_alone(service: Service, clock: Clock, factor: float) -> None:
    clock.now = T0 + DAY
    only = prompt(service, "the deploy target region is eu-west-1", T0)
    service.ranking = service.ranking.replace(supersede=factor)
    got = service.search("deploy target region", scope="prompts")
    assert ids(got) == [only]


# -- one turn says one thing ----------------------------------------------------------------------------------

def test_a_turns_prompt_and_reply_do_not_crowd_out_another_turn(service: Service, clock: Clock) -> None:
    clock.now = T0 + DAY
    asked = prompt(service, "why does the invoice export time out on big accounts", T0, session_id="s1")
    record(service, "Stop", now=T0 + 5, session_id="s1", cwd="/w/demo",
           last_assistant_message="The invoice export times out because big accounts load every invoice row at once.")
    other = prompt(service, "the invoice export for small accounts works", T0 + 100, session_id="s1")
    question = "invoice export time out big accounts"
    hits = service.search(question, scope="prompts").hits
    reply = next(h.record.id for h in hits if h.record.source == "agent")
    # By default the turn's evidence (its prompt and the reply stating the cause) lifts both
    # records, more than the spread takes from the second; the other turn still shows.
    assert [h.record.id for h in hits][:3] == [asked, reply, other]
    service.ranking = service.ranking.replace(turn_weight=0.0)   # the spread alone
    hits = service.search(question, scope="prompts").hits
    assert [h.record.id for h in hits][:2] == [asked, other] and reply in [h.record.id for h in hits]
    service.ranking = service.ranking.replace(turn_spread=1.0)
    assert {h.record.id for h in service.search(question, scope="prompts").hits[:2]} == {asked, reply}


# -- a turn answers together --------------------------------------------------------------------------------

def test_the_turn_that_answers_together_passes_a_lone_record(service: Service, clock: Clock) -> None:
    clock.now = T0 + 3 * DAY
    asked = prompt(service, "the nightly statement export crashed again, please investigate", T0, session_id="s1")
    for n in range(3):   # tool noise between the request and the cause, beyond the context window
        record(service, "Stop", now=T0 + 10 + n, session_id="s1", cwd="/w/demo",
               last_assistant_message=f"Reading the worker logs, part {n}.")
    cause = record(service, "Stop", now=T0 + 20, session_id="s1", cwd="/w/demo",
                   last_assistant_message="Found it: the export crashed because it held every statement row in memory.")
    lone = prompt(service, "the statement export memory settings look fine to me", T0 + DAY, session_id="s2")
    question = "why did the nightly statement export crash out of memory"
    assert service.ranking.turn_weight > 0   # on by default
    # The request and the cause it led to hold the question's words between them: their turn
    # lifts the cause past a record elsewhere that holds as many on its own.
    assert ids(service.search(question, scope="prompts"))[:3] == [asked, cause.prompt_id, lone]
    service.ranking = service.ranking.replace(turn_weight=0.0)
    assert ids(service.search(question, scope="prompts"))[:3] == [asked, lone, cause.prompt_id]
