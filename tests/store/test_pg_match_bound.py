"""How the words' counts bound a tsquery's matches on PostgreSQL (`conjunction`): the bound picks
between two plans of the same rows, so it must never be below the real number of matches."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from nmem.store.postgres.search import conjunction
from nmem.store.postgres.tsquery import to_tsquery_text

pytestmark = pytest.mark.no_store  # reads query text only


@pytest.mark.parametrize("match", [
    "login", "login AND redirect", "login redirect", "login NOT test",
    "login AND redirect NOT test", "NEAR(login redirect, 10)",
])
def test_every_word_required_bounds_by_the_rarest(match: str) -> None:
    assert conjunction(str(to_tsquery_text(match))) == "and"


@pytest.mark.parametrize("match", [
    "login OR redirect", "(login OR auth) AND error", "login NOT (test OR spec)",
])
def test_any_whole_word_bounds_by_the_sum(match: str) -> None:
    assert conjunction(str(to_tsquery_text(match))) == "or"


@pytest.mark.parametrize("match", ["db*", "acme AND db*", "undefined* NOT cartSlice", "login OR db*",
                                   '"git push origin"', '"git push" AND vault', 'login NOT "unit test"'])
def test_a_phrase_or_a_prefix_has_no_bound(match: str) -> None:
    assert conjunction(str(to_tsquery_text(match))) is None


def test_the_phrases_bm25_weighs_are_listed_as_fts5_weighs_them() -> None:
    """Every phrase in order, a repeated one twice, none under a NOT; a two-phrase NEAR's
    phrases carry its group; a phrase under an OR is not held by every match."""
    from nmem.store.postgres.tsquery import parse

    listed = parse('(cache OR cache) AND "no such table" NOT test')
    assert [p.text for p in listed.phrases] == ["'cache'", "'cache'", "('no' <-> 'such' <-> 'table')"]
    assert [p.required for p in listed.phrases] == [False, False, True]
    assert [p.text for p in parse("crea* NOT (a OR b)").phrases] == ["'crea':*"]
    near = parse("NEAR(login redirect, 3)")
    assert [(p.near, p.distance, p.group == near.text) for p in near.phrases] == [(1, 3, True), (1, 3, True)]
    assert "'login' <4> 'redirect'" in str(near.text) and "<5>" not in str(near.text)
    assert all(p.near == 0 for p in parse("NEAR(a b c)").phrases), "three phrases: an AND, no group"
