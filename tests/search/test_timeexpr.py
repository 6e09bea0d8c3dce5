"""Time expressions in questions: what range each names, relative to now, and what is left."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nmem.search.timeexpr import TimeRange, find_time
from nmem.search.timewords import mentions_time

NOW = datetime(2023, 8, 16, 15, 30, tzinfo=UTC).timestamp()   # a Wednesday afternoon


def day(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def span(question: str) -> tuple[str | None, str | None]:
    found, _ = find_time(question, NOW)
    assert found is not None, question

    def iso(ts: int | None) -> str | None:
        return datetime.fromtimestamp(ts, UTC).date().isoformat() if ts is not None else None

    return iso(found.start), iso(found.end)


@pytest.mark.parametrize(("question", "start", "end"), [
    # absolute days, with and without a year; the end is exclusive
    ("what did Gina find on 1 February, 2023?", "2023-02-01", "2023-02-02"),
    ("who came to dinner on May 3, 2023", "2023-05-03", "2023-05-04"),
    ("the 3rd of June 2023", "2023-06-03", "2023-06-04"),
    ("deploy on 2023-05-08", "2023-05-08", "2023-05-09"),
    ("what did we do on 3 June", "2023-06-03", "2023-06-04"),          # latest 3 June by now
    ("the outage on December 24", "2022-12-24", "2022-12-25"),         # not yet this year: last year's
    # months and years
    ("in December 2022", "2022-12-01", "2023-01-01"),
    ("what changed in the beginning of November 2022", "2022-11-01", "2022-12-01"),
    ("May 2023", "2023-05-01", "2023-06-01"),
    ("when did we go camping in June?", "2023-06-01", "2023-07-01"),
    ("the release in October", "2022-10-01", "2022-11-01"),
    ("how many times in 2023?", "2023-01-01", "2024-01-01"),
    ("schema from 2023-07", "2023-07-01", "2023-08-01"),
    # relative to now
    ("what did we change yesterday", "2023-08-15", "2023-08-16"),
    ("the day before yesterday", "2023-08-14", "2023-08-15"),
    ("errors today", "2023-08-16", "2023-08-17"),
    ("what broke last Friday", "2023-08-11", "2023-08-12"),
    ("what broke last Wednesday", "2023-08-09", "2023-08-10"),           # a week ago, not today
    ("last weekend", "2023-08-12", "2023-08-14"),
    ("this week", "2023-08-14", "2023-08-21"),
    ("last week's failures", "2023-08-07", "2023-08-14"),
    ("last month", "2023-07-01", "2023-08-01"),
    ("this year", "2023-01-01", "2024-01-01"),
    ("last year", "2022-01-01", "2023-01-01"),
    ("in the past 2 weeks", "2023-08-02", "2023-08-17"),
    ("the deploy 3 days ago", "2023-08-12", "2023-08-15"),             # about three days: ± a day
    ("two weeks ago", "2023-07-31", "2023-08-05"),
])
def test_expressions_name_ranges(question: str, start: str, end: str) -> None:
    assert span(question) == (start, end)


@pytest.mark.parametrize(("question", "start", "end"), [
    ("before May 25, 2023", None, "2023-05-25"),
    ("tournaments won by July 10, 2022", None, "2022-07-11"),          # by: through that day
    ("until June 2023", None, "2023-07-01"),
    ("since 2023-05-01", "2023-05-01", None),
    ("after May 2023", "2023-06-01", None),
    ("how many pets will Andrew have, as of December 2022?", None, "2023-01-01"),   # as of: through it
    ("what had we decided up to last week", None, "2023-08-14"),
    ("what changed up to May", None, "2023-06-01"),
])
def test_before_and_after_open_one_end(question: str, start: str | None, end: str | None) -> None:
    assert span(question) == (start, end)


@pytest.mark.parametrize(("question", "start", "end"), [
    # counted from a named day, not from now; the range runs from the event to that day,
    # both included, since a record about it may be dated at either
    ("what did we ship the week before August 3, 2023", "2023-07-27", "2023-08-04"),
    ("the day before 3 June", "2023-06-02", "2023-06-04"),
    ("the week after 2023-05-08", "2023-05-08", "2023-05-16"),
    ("a month before 1 July 2023", "2023-05-28", "2023-07-02"),              # about 30 days: ± 4
    ("the puppy she got two weeks before August 11, 2023", "2023-07-26", "2023-08-12"),
    ("two days after May 3, 2023", "2023-05-03", "2023-05-07"),
    ("on the Sunday before October 25, 2022", "2022-10-23", "2022-10-26"),   # the 25th is a Tuesday
    ("what did she do last weekend before April 10, 2023", "2023-04-08", "2023-04-11"),
    ("the weekend before 9 April 2023", "2023-04-01", "2023-04-10"),         # the 9th is a Sunday
    ("what did Joanna finish last Friday on 23 January, 2022", "2022-01-21", "2022-01-24"),
])
def test_times_counted_from_a_named_day(question: str, start: str, end: str) -> None:
    assert span(question) == (start, end)


@pytest.mark.parametrize(("question", "start", "end"), [
    # two times and what lies between them, both included
    ("where was John between August 11 and August 15 2023?", "2023-08-11", "2023-08-16"),  # one year for both
    ("what broke from May to July 2023", "2023-05-01", "2023-08-01"),
    ("logs from 3 June to 5 June", "2023-06-03", "2023-06-06"),
    ("from December 30 to January 2, 2023", "2022-12-30", "2023-01-03"),  # the December before
    ("from Dec 30 2022 to Jan 2", "2022-12-30", "2023-01-03"),            # the January after
    ("what happened between August 11 and 2023-08-15", "2023-08-11", "2023-08-16"),
    ("between Feb 29 and March 3 2024", "2024-02-29", "2024-03-04"),
    ("errors from 2023-05-01 to 2023-05-03", "2023-05-01", "2023-05-04"),
    ("from November to February", "2022-11-01", "2023-03-01"),           # the November before
    ("between 1 July 2023 and 3 July 2023", "2023-07-01", "2023-07-04"),
])
def test_a_range_between_two_times(question: str, start: str, end: str) -> None:
    assert span(question) == (start, end)


def test_between_needs_a_time_on_both_sides() -> None:
    # two people, not two times: the date after them is the expression
    found, _ = find_time("what did John and Tim discuss between them on 11 December, 2022?", NOW)
    assert found is not None and found.text == "on 11 December, 2022"
    assert find_time("how many weeks passed between Maria adopting Coco and Shadow?", NOW)[0] is None
    assert find_time("the diff between May and the release", NOW)[0] is None
    # bare numbers are not years here
    for text in ("latency between 1900 and 2000 ms", "bump the limit from 2000 to 2048 tokens"):
        assert find_time(text, NOW) == (None, text)


def test_a_range_is_the_first_expression_only_when_it_comes_first() -> None:
    found, rest = find_time("in May 2023 and between June 1 and June 3 2023", NOW)
    assert found is not None and found.text == "in May 2023"
    assert rest == "and between June 1 and June 3 2023"
    found, _ = find_time("between June 1 and June 3 2023, not in May 2023", NOW)
    assert found is not None and found.text == "between June 1 and June 3 2023"
    assert find_time("where was John between August 11 and August 15 2023?", NOW)[1] == "where was John ?"


def test_a_time_counted_from_a_day_is_cut_out_whole() -> None:
    assert find_time("what did Maria do last weekend before April 10, 2023?", NOW)[1] == "what did Maria do ?"
    assert find_time("what broke the week before the release", NOW) == (None, "what broke the week before the release")


@pytest.mark.parametrize("question", [
    "it may fail on CI", "may I ask why", "port 2023 is in use", "bump to 2023.1", "march through the logs",
    "on 31 February", "the 3 tests failed", "release 12 of the api",
])
def test_no_time_where_none_is_meant(question: str) -> None:
    assert find_time(question, NOW) == (None, question)


def test_the_expression_is_cut_out_of_the_question() -> None:
    found, rest = find_time("What did Maria donate to a shelter in December 2023?", NOW)
    assert found is not None and found.text == "in December 2023"
    assert rest == "What did Maria donate to a shelter ?"


def test_the_first_expression_wins() -> None:
    found, rest = find_time("errors yesterday and last month", NOW)
    assert found is not None and found.text == "yesterday"
    assert rest == "errors and last month"


def test_distance_is_days_outside_the_range() -> None:
    may = TimeRange(day("2023-05-01"), day("2023-06-01"), "in May")
    assert may.distance(day("2023-05-20")) == 0
    assert may.distance(day("2023-04-29")) == 2
    assert may.distance(day("2023-06-01")) == 0        # the end is exclusive: the first day after
    assert may.distance(day("2023-06-04")) == 3
    assert TimeRange(None, day("2023-05-01"), "before May").distance(day("2020-01-01")) == 0
    assert TimeRange(day("2023-05-01"), None, "since May").distance(day("2030-01-01")) == 0


def test_dates_are_read_in_utc_whatever_the_hour() -> None:
    late = datetime(2023, 8, 16, 23, 59, tzinfo=UTC).timestamp()
    assert find_time("yesterday", late)[0] == find_time("yesterday", NOW)[0]


@pytest.mark.parametrize(("text", "said"), [
    ("I went there yesterday", True), ("3 days ago", True), ("last Friday was rough", True),
    ("see you next week", True), ("back in 2019", True), ("on 5/12 we shipped", True),
    ("in May we moved", True), ("we married in june", True), ("lately it has been slow", True),
    ("you may go", False), ("the tests fail", False), ("last time I checked", False),
    ("March ahead", True), ("marching band", False), ("a 500 error", False), ("deployed 2023-05-08", True),
    ("Friday.", True), ("python 3.11 and v1.2.3", False), ("bind 0.0.0.0:6379", False), ("10-12 people", False),
])
def test_mentions_time_finds_dates_weekdays_months_and_relative_times(text: str, said: bool) -> None:
    assert mentions_time(text) is said
