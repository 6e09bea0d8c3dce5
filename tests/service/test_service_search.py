"""Service API: search — FTS5 syntax as typed, plain-language rewrite, filters, order, paging, scopes."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import Clock, record
from nmem.errors import InvalidArgument, QuerySyntaxError
from nmem.models import PREVIEW_CHARS
from nmem.service.api import Service
from nmem.store import NewObservation

T0 = 1_790_000_000
DAY = 86400


def ids(result: Any) -> list[Any]:
    return [h.record.id for h in result.hits]


def bash(service: Service, cmd: str, at: int, session_id: str = "s-demo", cwd: str = "/w/demo") -> int:
    out = record(service, "PostToolUse", now=at, session_id=session_id, cwd=cwd, tool_name="Bash",
                 tool_input={"command": cmd}, tool_response={"exit_code": 0})
    return int(out.observation_id)


@pytest.fixture
def corpus(service: Service, clock: Clock) -> dict[str, Any]:
    """A small, known trail over two projects plus curated memories."""
    clock.now = T0 + 30 * DAY
    c: dict[str, Any] = {}
    record(service, "UserPromptSubmit", now=T0, session_id="s-demo", cwd="/w/demo",
           prompt="fix the flaky login redirect test")
    c["pytest_login"] = bash(service, "pytest tests/test_login.py -k redirect", T0 + 10)
    c["pytest_all"] = bash(service, "pytest -q", T0 + 20)
    c["edit_login"] = record(service, "PostToolUse", now=T0 + 30, session_id="s-demo", cwd="/w/demo",
                             tool_name="Edit", tool_input={"file_path": "/w/demo/src/login.py",
                                                           "old_string": "a", "new_string": "b"}).observation_id
    c["read_db"] = record(service, "PostToolUse", now=T0 + 40, session_id="s-demo", cwd="/w/demo",
                          tool_name="Read", tool_input={"file_path": "/w/demo/src/db.py"}).observation_id
    c["running"] = bash(service, "running the migration script", T0 + 2 * DAY)
    record(service, "Stop", now=T0 + 2 * DAY + 5, session_id="s-demo", cwd="/w/demo")
    record(service, "UserPromptSubmit", now=T0 + 10 * DAY, session_id="s-ops", cwd="/w/ops",
           prompt="deploy the login service to staging")
    c["deploy"] = bash(service, "kubectl apply -f login-deployment.yaml", T0 + 10 * DAY + 1,
                       session_id="s-ops", cwd="/w/ops")
    c["docker"] = bash(service, "docker compose up redis", T0 + 11 * DAY, session_id="s-ops", cwd="/w/ops")
    c["mem_decision"] = service.remember("Login tokens expire after 15 minutes", summary="login token ttl",
                                         namespace="decisions", tags=["auth", "security"], project="demo")
    c["mem_gotcha"] = service.remember("Redis must start before the login service", namespace="gotchas",
                                       tags=["redis"], project="ops")
    return c


# -- FTS5 syntax as typed --------------------------------------------------------------------------


def test_fts_and(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("pytest AND redirect"))) == {corpus["pytest_login"]}


def test_fts_or(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("kubectl OR docker"))) == {corpus["deploy"], corpus["docker"]}


def test_fts_not(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("pytest NOT redirect"))) == {corpus["pytest_all"]}


def test_fts_phrase(service: Service, corpus: dict[str, Any]) -> None:
    assert ids(service.search('"compose up redis"')) == [corpus["docker"]]
    assert ids(service.search('"redis up compose"')) == []


def test_fts_prefix(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("kube*"))) == {corpus["deploy"]}


def test_fts_query_runs_as_typed_without_fallback(service: Service, corpus: dict[str, Any]) -> None:
    result = service.search("pytest AND kubectl")
    assert (result.hits, result.match) == ([], "pytest AND kubectl")


def test_porter_stemming_matches_word_forms(service: Service, corpus: dict[str, Any]) -> None:
    assert ids(service.search("run")) == [corpus["running"]]
    assert ids(service.search("migrations")) == [corpus["running"]]


# -- plain language ----------------------------------------------------------------------------------


def test_plain_question_drops_stop_words_and_ands_the_rest(service: Service, corpus: dict[str, Any]) -> None:
    result = service.search("how do I run the pytest for the redirect")
    # "run" finds nothing together with pytest+redirect, so the AND tier is empty: OR fallback
    assert result.match == '"run" OR "pytest" OR "redirect"'
    assert set(ids(result)) == {corpus["pytest_login"], corpus["pytest_all"], corpus["running"]}


# Ranked by relevance, a plain question finds every record sharing a word, those holding
# every word first (nmem.search.rank); sorted by date it keeps the strictest tier that finds
# something, so a date-ordered list is not swamped by one-word matches.


def test_plain_question_ranks_records_with_every_word_first(service: Service, corpus: dict[str, Any]) -> None:
    result = service.search("where is the pytest redirect?")
    assert result.match == '"pytest" OR "redirect"'
    assert ids(result)[0] == corpus["pytest_login"]
    assert set(ids(result)) == {corpus["pytest_login"], corpus["pytest_all"]}


def test_plain_question_by_date_uses_the_and_tier_when_it_finds_something(service: Service,
                                                                          corpus: dict[str, Any]) -> None:
    result = service.search("where is the pytest redirect?", order_by="date_desc")
    assert result.match == '"pytest" AND "redirect"'
    assert ids(result) == [corpus["pytest_login"]]


def test_plain_text_with_special_characters_is_quoted_not_a_syntax_error(service: Service,
                                                                          corpus: dict[str, Any]) -> None:
    result = service.search("login-deployment.yaml: apply")
    assert ids(result)[0] == corpus["deploy"]


def test_code_in_a_plain_question_is_not_a_syntax_error(service: Service, clock: Clock) -> None:
    oid = bash(service, "python -c 'from nmem.util.timeutil import parse_time; parse_time(None)' fails", T0)
    result = service.search("why does parse_time() fail")
    assert (ids(result), result.match) == ([oid], '"parse" OR "time" OR "fail"')


def test_file_names_work_inside_fts_syntax(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("src/login.py OR login-deployment.yaml"))) == {corpus["edit_login"], corpus["deploy"]}
    assert ids(service.search("src/log*")) == [corpus["edit_login"]]


def test_contractions_do_not_spoil_the_and_tier(service: Service, corpus: dict[str, Any]) -> None:
    by_date = service.search("why doesn't pytest redirect", order_by="date_desc")
    assert (ids(by_date), by_date.match) == ([corpus["pytest_login"]], '"pytest" AND "redirect"')
    ranked = service.search("why doesn't pytest redirect")
    assert (ids(ranked)[0], ranked.match) == (corpus["pytest_login"], '"pytest" OR "redirect"')


def test_query_of_only_punctuation_finds_nothing(service: Service, corpus: dict[str, Any]) -> None:
    assert service.search("!!! ???").hits == []


def test_no_results_is_an_empty_list(service: Service, corpus: dict[str, Any]) -> None:
    result = service.search("xylophone")
    assert result.hits == [] and result.to_list() == []


# -- filters ----------------------------------------------------------------------------------------


def test_filter_project(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("login", project="ops"))) == {corpus["deploy"]}
    assert set(ids(service.search("login", project="demo"))) == {corpus["pytest_login"], corpus["edit_login"]}
    assert len(service.search("login", project="*").hits) == 3


def test_filter_obs_type(service: Service, corpus: dict[str, Any]) -> None:
    assert ids(service.search("login", obs_type="file_edit")) == [corpus["edit_login"]]
    both = service.search("login", obs_type=["file_edit", "command"])
    assert set(ids(both)) == {corpus["edit_login"], corpus["pytest_login"], corpus["deploy"]}


def test_filter_files_matches_whole_path_or_suffix(service: Service, corpus: dict[str, Any]) -> None:
    assert ids(service.search(None, files="/w/demo/src/db.py")) == [corpus["read_db"]]
    assert ids(service.search(None, files="src/login.py")) == [corpus["edit_login"]]
    assert set(ids(service.search(None, files="login.py,db.py"))) == {corpus["edit_login"], corpus["read_db"]}


def test_filter_files_treats_like_wildcards_literally(service: Service, corpus: dict[str, Any]) -> None:
    assert service.search(None, files="%.py").hits == []
    assert service.search(None, files="_b.py").hits == []


def test_filter_session(service: Service, corpus: dict[str, Any]) -> None:
    assert set(ids(service.search("login OR redis", session_id="s-ops"))) == {corpus["deploy"], corpus["docker"]}


def test_filter_date_range_epoch_and_iso(service: Service, corpus: dict[str, Any]) -> None:
    got = service.search(None, date_start=T0 + DAY, date_end=T0 + 10 * DAY + 1)
    assert set(ids(got)) == {corpus["running"], corpus["deploy"]}
    # an ISO date as end means the end of that day (UTC)
    day_of_t0 = "2026-09-21"
    assert set(ids(service.search("pytest", date_end=day_of_t0))) == {corpus["pytest_login"], corpus["pytest_all"]}
    assert service.search("pytest", date_start="2026-09-22").hits == []


def test_filter_namespace_and_tags_search_memories(service: Service, corpus: dict[str, Any]) -> None:
    assert ids(service.search("login", scope="memories", namespace="decisions")) == [corpus["mem_decision"].id]
    assert ids(service.search("login", scope="memories", tags="redis")) == [corpus["mem_gotcha"].id]
    assert ids(service.search("login", scope="memories", tags=["auth", "security"])) == [corpus["mem_decision"].id]
    assert service.search("login", scope="memories", tags=["auth", "redis"]).hits == []


def test_memory_filters_exclude_observations(service: Service, corpus: dict[str, Any]) -> None:
    assert service.search("login", namespace="decisions").hits == []
    assert ids(service.search("login", scope="all", namespace="decisions")) == [corpus["mem_decision"].id]


def test_browse_without_query_is_newest_first(service: Service, corpus: dict[str, Any]) -> None:
    got = ids(service.search(None, project="ops"))
    assert got == [corpus["docker"], corpus["deploy"]]


# -- order, limit, offset ------------------------------------------------------------------------------


def test_order_relevance_date_desc_date_asc(service: Service, corpus: dict[str, Any]) -> None:
    everything = {corpus["pytest_login"], corpus["edit_login"], corpus["deploy"]}
    relevance = service.search("login")
    assert set(ids(relevance)) == everything
    scores = [h.score for h in relevance.hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert ids(service.search("login", order_by="date_desc")) == [
        corpus["deploy"], corpus["edit_login"], corpus["pytest_login"]]
    assert ids(service.search("login", order_by="date_asc")) == [
        corpus["pytest_login"], corpus["edit_login"], corpus["deploy"]]


def test_relevance_puts_the_denser_match_first(service: Service, clock: Clock) -> None:
    weak = bash(service, "echo banana then many other words to dilute the match a lot more", T0)
    strong = bash(service, "banana banana", T0 + 1)
    assert ids(service.search("banana")) == [strong, weak]


@pytest.fixture
def many(service: Service) -> list[int]:
    store = service.store
    with store.transaction():
        store.ensure_session("bulk", "bulk", T0)
        return [store.add_observation(NewObservation("bulk", "bulk", T0 + i, "command", "PostToolUse",
                                                     f"widget step {i}", "Bash"))
                for i in range(130)]


@pytest.mark.parametrize(("limit", "expected"), [(None, 20), (0, 1), (-3, 1), (1, 1), (57, 57), (100, 100),
                                                 (101, 100), (10_000, 100), ("7", 7)])
def test_limit_is_clamped_to_1_100_with_default_20(service: Service, many: list[int], limit: Any,
                                                   expected: int) -> None:
    assert len(service.search("widget", limit=limit).hits) == expected


def test_default_limit_comes_from_settings(monkeypatch: pytest.MonkeyPatch, service: Service,
                                           many: list[int]) -> None:
    service.settings.values["search.default_limit"] = 33
    assert len(service.search("widget").hits) == 33


def test_offset_pages_through_results(service: Service, many: list[int]) -> None:
    newest_first = list(reversed(many))
    page1 = ids(service.search("widget", order_by="date_desc", limit=50))
    page2 = ids(service.search("widget", order_by="date_desc", limit=50, offset=50))
    page3 = ids(service.search("widget", order_by="date_desc", limit=50, offset=100))
    assert page1 + page2 + page3 == newest_first
    assert service.search("widget", offset=500).hits == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"limit": "many"}, "limit must be an integer"),
    ({"scope": "everything"}, "unknown scope 'everything'"),
    ({"order_by": "random"}, "unknown order_by 'random'"),
    ({"obs_type": "user_prompt_x"}, "unknown obs_type 'user_prompt_x'"),
    ({"date_start": "yesterday-ish"}, "date_start: cannot read 'yesterday-ish' as a date"),
    ({"date_start": T0 + 10, "date_end": T0}, "date_start is after date_end"),
])
def test_invalid_search_arguments(service: Service, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        service.search("x", **kwargs)
    assert message in err.value.message
    assert err.value.exit_code == 2


# -- scopes ------------------------------------------------------------------------------------------


def test_scope_prompts(service: Service, corpus: dict[str, Any]) -> None:
    hits = service.search("login", scope="prompts").hits
    assert {h.record.content for h in hits} == {"fix the flaky login redirect test",
                                                "deploy the login service to staging"}
    assert {h.kind for h in hits} == {"prompt"}
    assert [h.record.content for h in service.search("login", scope="prompts", project="ops").hits] == [
        "deploy the login service to staging"]


def test_scope_sessions_searches_summaries(service: Service, corpus: dict[str, Any]) -> None:
    hits = service.search("flaky", scope="sessions").hits
    assert [(h.kind, h.record.id) for h in hits] == [("session", "s-demo")]


def test_scope_sessions_does_not_match_summary_json_keys(service: Service, corpus: dict[str, Any]) -> None:
    # s-demo's summary has empty "errors" and "commits" lists: the key names are not content
    assert service.search("errors", scope="sessions").hits == []
    assert service.search("commits", scope="sessions").hits == []


def test_scope_memories(service: Service, corpus: dict[str, Any]) -> None:
    hits = service.search("login", scope="memories").hits
    assert {h.record.id for h in hits} == {corpus["mem_decision"].id, corpus["mem_gotcha"].id}
    assert {h.kind for h in hits} == {"memory"}
    assert ids(service.search("login", scope="memories", project="demo")) == [corpus["mem_decision"].id]


def test_scope_all_merges_every_kind(service: Service, corpus: dict[str, Any]) -> None:
    hits = service.search("login", scope="all", limit=100).hits
    kinds = sorted({h.kind for h in hits})
    assert kinds == ["memory", "observation", "prompt", "session"]
    assert len([h for h in hits if h.kind == "observation"]) == 3
    scores = [h.score for h in hits if h.kind != "memory"]
    assert scores == sorted(scores, reverse=True)
    places = [at for at, h in enumerate(hits) if h.kind == "memory"]   # within reach, whatever their BM25
    assert all(at < 3 * (n + 1) for n, at in enumerate(places)), places


def test_scope_all_pages_over_the_merged_list(service: Service, corpus: dict[str, Any]) -> None:
    full = [(h.kind, h.record.id) for h in service.search("login", scope="all", order_by="date_desc").hits]
    paged = [(h.kind, h.record.id)
             for off in range(0, len(full), 2)
             for h in service.search("login", scope="all", order_by="date_desc", limit=2, offset=off).hits]
    assert paged == full


# -- result shapes ------------------------------------------------------------------------------------


def test_index_entries_have_120_char_previews_and_urns(service: Service) -> None:
    long = "make " + "very-long-target " * 20
    oid = bash(service, long, T0)
    entry = service.search("make").to_list()[0]
    # cut at a word boundary, the cut marked
    assert entry["content_preview"] == ("make " + "very-long-target " * 6).rstrip() + "…"
    assert len(entry["content_preview"]) <= PREVIEW_CHARS
    assert entry["urn"] == f"nmem://project:demo/observations/{oid}"
    assert set(entry) == {"kind", "id", "timestamp", "obs_type", "content_preview", "file_path",
                          "session_id", "project", "urn", "ref", "agent", "score"}
    assert (entry["kind"], entry["id"], entry["timestamp"], entry["obs_type"]) == ("observation", oid, T0, "command")


def test_full_records_carry_every_field(service: Service) -> None:
    oid = bash(service, "make " + "x" * 300, T0)
    full = service.search("make").to_list(full=True)[0]
    assert full["content"] == "make " + "x" * 300
    assert full["metadata"] == {"exit_code": 0}
    assert (full["source_event"], full["tool_name"], full["is_pinned"], full["prompt_id"]) == (
        "PostToolUse", "Bash", False, None)
    assert full["urn"] == f"nmem://project:demo/observations/{oid}"


def test_memory_index_entry_urn(service: Service, corpus: dict[str, Any]) -> None:
    entry = service.search("ttl", scope="memories").to_list()[0]
    mem = corpus["mem_decision"]
    assert entry["urn"] == f"nmem://project:demo/decisions/{mem.id}"
    assert entry["summary"] == "login token ttl"


def test_malformed_fts_query_is_a_query_syntax_error(service: Service, corpus: dict[str, Any]) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        service.search('"unbalanced')
    assert err.value.exit_code == 2
    assert "unterminated string" in err.value.message


def test_paging_a_plain_query_never_repeats_or_skips_a_hit(service: Service) -> None:
    # three old rows hold both words, five newer rows only one: the AND tier has 3 hits
    both = [bash(service, f"alpha beta old {i}", T0 + i) for i in range(3)]
    alpha_only = [bash(service, f"alpha new {i}", T0 + 100 + i) for i in range(5)]
    seen: list[int] = []
    for offset in range(0, 10, 2):
        seen += ids(service.search("alpha beta", order_by="date_desc", limit=2, offset=offset))
    assert len(seen) == len(set(seen)), f"a hit came back twice while paging: {seen}"
    # the pages are the pages of one result list: the AND tier's, as page 1 promised
    assert seen == ids(service.search("alpha beta", order_by="date_desc", limit=100))
    assert sorted(seen) == sorted(both) and not set(seen) & set(alpha_only)


def test_an_excluded_scope_still_says_what_it_would_have_searched(service: Service, corpus: dict[str, Any]) -> None:
    # a tag filter rules out every trail record, but the result still names the FTS5 expression
    result = service.search("how do we deploy the login service", scope="prompts", tags=["ops"])
    assert result.hits == [] and result.match == '"deploy" OR "login" OR "service"'
    assert service.search("how do we deploy the login service", scope="prompts").match == result.match


def test_a_row_purged_while_ranking_does_not_shorten_the_page(service: Service) -> None:
    kept = [bash(service, f"deploy the api, attempt {i}", T0 + i) for i in range(8)]
    store = service.store
    fetch = store.get_observations
    purged: list[int] = []

    def purge_first_then_fetch(wanted: list[int]) -> Any:
        if not purged:  # another process purges a hit between ranking and fetching the page
            purged.append(wanted[0])
            store.purge_observations([wanted[0]])
        return fetch(wanted)

    store.get_observations = purge_first_then_fetch  # type: ignore[method-assign]
    hits = ids(service.search("deploy api", limit=5))
    assert len(hits) == 5 and set(hits) <= set(kept)
    # SQLite fetches the page after ranking, so the purge lands in between; PostgreSQL reads the
    # candidates' rows in the ranking statement itself (nothing to fetch: no purge in between).
    assert (purged and purged[0] not in hits) if service.store.url.startswith("sqlite") else not purged
