"""Query planning: FTS5 syntax detection, raw-query repair, stop words, tiers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from nmem.search.query import STOP_WORDS, QueryPlan, content_terms, plan, quote, raw_query, tokens, uses_fts_syntax

pytestmark = pytest.mark.no_store  # plans query text; its FTS5 checks use a bare in-memory table

# -- syntax detection -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "login AND redirect", "login OR redirect", "login NOT redirect", "NOT", '"exact phrase"', 'say "hi',
    "auth*", "^fix the bug", "NEAR(login redirect, 3)", "(login OR auth) AND bug", "login AND(bug)",
])
def test_fts_syntax_is_detected(text: str) -> None:
    assert uses_fts_syntax(text) is True


@pytest.mark.parametrize("text", [
    "how do I fix the login redirect", "login and redirect", "this or that", "not working",
    "why does parse_time() fail", "what is **kwargs", "x^2 + y", "ANDROID build", "ORACLE driver",
    "NOTES file", "src/auth.py", "login-deployment.yaml", "C++ linker error", "don't panic",
])
def test_plain_language_is_not_fts_syntax(text: str) -> None:
    assert uses_fts_syntax(text) is False


# -- raw queries ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "expected"), [
    ("login AND redirect", "login AND redirect"),
    ('"compose up" OR kubectl', '"compose up" OR kubectl'),
    ("(login OR auth) AND bug", "(login OR auth) AND bug"),
    ("kube*", "kube*"),
    ("^fix AND login", "^fix AND login"),
    ("NEAR(login redirect, 3)", "NEAR(login redirect, 3)"),
    ("content:login OR summary:token", "content:login OR summary:token"),
    ("parse_time OR éclair", "parse_time OR éclair"),
    # words FTS5 cannot parse are quoted, operators and prefixes around them kept
    ("auth.py OR login.py", '"auth.py" OR "login.py"'),
    ("src/auth*", '"src/auth"*'),
    ("^src/auth.py AND bug", '^"src/auth.py" AND bug'),
    ("summary:a.b NOT x", 'summary:"a.b" NOT x'),
    ("parse_time() AND fails", "parse_time  AND fails"),
    ("auth.py, login.py OR x", '"auth.py"  "login.py" OR x'),
    ('say "he said ""hi""" OR x.y', 'say "he said ""hi""" OR "x.y"'),
    # malformed input stays malformed, so SQLite reports the syntax issue
    ('"unbalanced', '"unbalanced'),
    ("login AND", "login AND"),
    ("(login OR auth", "(login OR auth"),
])
def test_raw_query_keeps_syntax_and_quotes_unparseable_words(typed: str, expected: str) -> None:
    assert raw_query(typed) == expected
    assert plan(typed) == QueryPlan((expected,), raw=True)


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO t(rowid, content) VALUES (?, ?)", [
        (1, "edit src/auth.py to fix the login redirect"),
        (2, "kubectl apply -f login-deployment.yaml"),
        (3, "python -c 'parse_time()' fails with **kwargs"),
    ])
    yield conn
    conn.close()


def match(conn: sqlite3.Connection, expr: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (expr,))]


@pytest.mark.parametrize(("typed", "rows"), [
    ("auth.py OR login-deployment.yaml", [1, 2]),
    ("src/auth*", [1]),
    ("parse_time() AND fails", [3]),
    ("kubectl NOT login-deployment.yaml", []),
    ('"login redirect" OR **kwargs', [1, 3]),
])
def test_repaired_raw_queries_run_in_fts5(fts: sqlite3.Connection, typed: str, rows: list[int]) -> None:
    assert match(fts, plan(typed).tiers[0]) == rows


@pytest.mark.parametrize("typed", ['"unbalanced', "login AND", "(login OR auth", "NOT"])
def test_malformed_raw_queries_still_fail_in_fts5(fts: sqlite3.Connection, typed: str) -> None:
    with pytest.raises(sqlite3.OperationalError):
        match(fts, plan(typed).tiers[0])


# -- plain language -------------------------------------------------------------------------------------------


def test_tokens_follow_unicode61() -> None:
    assert tokens("parse_time() in src/auth.py, naïve café 42") == [
        "parse", "time", "in", "src", "auth", "py", "naïve", "café", "42"]


def test_content_terms_drop_stop_words_lowercase_and_dedup() -> None:
    assert content_terms("How do I fix the Login redirect in the login page?") == [
        "fix", "login", "redirect", "page"]


def test_content_terms_drop_contraction_fragments() -> None:
    assert content_terms("why doesn't pytest find my fixture? it's weird, I'd say") == [
        "pytest", "find", "fixture", "weird", "say"]
    assert {"don", "doesn", "isn", "t", "s", "ll", "ve"} <= STOP_WORDS


def test_content_terms_keep_stop_words_when_nothing_else_is_left() -> None:
    assert content_terms("what is this") == ["what", "is", "this"]


def test_content_terms_keep_numbers() -> None:
    assert content_terms("what happened on 2024 05 issue 1234") == ["happened", "2024", "05", "issue", "1234"]


def test_plain_plan_is_and_then_or() -> None:
    p = plan("how do I fix the login redirect")
    assert p == QueryPlan(('"fix" AND "login" AND "redirect"', '"fix" OR "login" OR "redirect"'),
                          raw=False, terms=("fix", "login", "redirect"))


def test_single_term_plan_has_one_tier() -> None:
    assert plan("  the redirect?  ") == QueryPlan(('"redirect"',), raw=False, terms=("redirect",))


def test_code_in_a_question_is_plain_language() -> None:
    assert plan("why does parse_time() fail").tiers == (
        '"parse" AND "time" AND "fail"', '"parse" OR "time" OR "fail"')


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", "-- // ::"])
def test_nothing_searchable_is_an_empty_plan(text: str) -> None:
    assert plan(text).tiers == ()


def test_quote_escapes_double_quotes() -> None:
    assert quote('say "hi"') == '"say ""hi"""'


def test_plain_tiers_always_parse_in_fts5(fts: sqlite3.Connection) -> None:
    for text in ["how do I fix the login redirect", "what is **kwargs", "x^2 + y", "C++ linker error",
                 "login-deployment.yaml: apply", "naïve café", "don't panic"]:
        for tier in plan(text).tiers:
            match(fts, tier)  # raises on a syntax error
    assert match(fts, plan("where is the login redirect?").tiers[0]) == [1]


# -- questions that quote a title -------------------------------------------------------------------


def test_a_quoted_title_in_a_question_runs_as_typed_then_as_plain_language() -> None:
    p = plan('what did we decide about "fast path" caching?')
    assert p.raw and p.tiers == ('what did we decide about "fast path" "caching?"',)
    assert p.fallback == plan("what did we decide about fast path caching?")
    assert p.fallback is not None and p.fallback.any_term == '"decide" OR "fast" OR "path" OR "caching"'


@pytest.mark.parametrize("typed", ['"exact phrase"', '"one" "two"', '"unbalanced', '"login" AND bug',
                                   '"login" OR auth*', 'NEAR("a b" c)'])
def test_phrases_alone_or_with_operators_have_no_fallback(typed: str) -> None:
    assert plan(typed).raw and plan(typed).fallback is None


def test_any_term_is_the_or_tier_of_plain_language_only() -> None:
    assert plan("fix the login redirect").any_term == '"fix" OR "login" OR "redirect"'
    assert plan("redirect").any_term == '"redirect"'
    assert plan("login AND redirect").any_term is None
    assert plan("").any_term is None
