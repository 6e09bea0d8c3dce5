"""The claude-mem operations library on a populated store: parameters as claude-mem spells
them (camelCase, snake_case, texts for numbers, comma lists), its defaults, its answer shapes,
and refusals that change nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mcp_support import AUTH_FILE, CWD, PROJECT, T0, Seeded, bash
from nmem.compat.claude_mem import OPERATIONS, render
from nmem.compat.claude_mem.params import json_schema
from nmem.errors import NotFound, ValidationError
from nmem.service.api import Service
from test_cli_support import ok
from test_import_claude_mem import build_claude_mem

ISSUE_13_ROUTES = {
    "search": "/api/search", "timeline": "/api/timeline", "decisions": "/api/decisions",
    "changes": "/api/changes", "how_it_works": "/api/how-it-works",
    "search_observations": "/api/search/observations", "search_sessions": "/api/search/sessions",
    "search_user_prompts": "/api/search/prompts", "find_by_concept": "/api/search/by-concept",
    "find_by_file": "/api/search/by-file", "find_by_type": "/api/search/by-type",
    "get_recent_context": "/api/context/recent", "get_context_timeline": "/api/context/timeline",
    "get_timeline_by_query": "/api/timeline/by-query",
}


def run(service: Service, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return OPERATIONS[name](service, args or {}, PROJECT)


def ids(rows: list[dict[str, Any]]) -> list[Any]:
    return [r["id"] for r in rows]


def test_every_claude_mem_tool_has_its_worker_route() -> None:
    for name, path in ISSUE_13_ROUTES.items():
        assert OPERATIONS[name].path == path
        assert OPERATIONS[name].method == "GET"
    assert {n for n, op in OPERATIONS.items() if op.deprecated} == {
        "search_observations", "search_sessions", "search_user_prompts"}
    for op in OPERATIONS.values():
        schema = op.input_schema
        assert schema == json_schema(op.params) and schema["type"] == "object"
        assert set(schema.get("required", [])) == {p.name for p in op.params if p.required}


def test_search_answers_claude_mems_shape_across_kinds(service: Service, seeded: Seeded) -> None:
    answer = run(service, "search", {"query": "login"})
    assert set(answer) >= {"observations", "sessions", "prompts", "totalResults", "query"}
    assert answer["query"] == "login"
    assert answer["totalResults"] == len(answer["observations"]) + len(answer["sessions"]) + len(answer["prompts"])
    assert seeded.failure in ids(answer["observations"])
    assert seeded.prompt in ids(answer["prompts"])
    assert seeded.memory_id in ids(answer["observations"])  # curated memories answer as claude-mem observations
    row = next(r for r in answer["observations"] if r["id"] == seeded.failure)
    assert row["type"] == "bugfix" and row["obs_type"] == "command_error"
    assert row["created_at_epoch"] == (T0 + 30) * 1000 and row["created_at"].startswith("2026-")
    assert "text" not in row  # index rows are compact
    full = run(service, "search", {"query": "login", "format": "full", "type": "observations"})
    assert full["sessions"] == full["prompts"] == []
    assert any("AssertionError" in r["text"] for r in full["observations"])


def test_search_filters_in_claude_mems_spellings(service: Service, seeded: Seeded) -> None:
    typed = run(service, "search", {"query": "login", "obs_type": "bugfix", "type": "observations"})
    assert ids(typed["observations"]) == [seeded.failure]
    by_file = run(service, "search", {"files": AUTH_FILE, "type": "observations", "orderBy": "date_asc"})
    assert ids(by_file["observations"]) == [seeded.read, seeded.edit]
    dated = run(service, "search", {"type": "observations", "dateStart": (T0 + 35) * 1000,
                                    "date_end": str(T0 + 52), "order_by": "date_desc"})
    assert ids(dated["observations"]) == [seeded.edit, seeded.read]
    paged = run(service, "search", {"type": "observations", "project": PROJECT, "orderBy": "date_asc",
                                    "limit": "2", "offset": 1})
    assert len(paged["observations"]) == 2
    all_rows = run(service, "search", {"type": "observations", "project": PROJECT, "orderBy": "date_asc"})
    assert ids(paged["observations"]) == ids(all_rows["observations"])[1:3]
    assert all(r["project"] == PROJECT for r in all_rows["observations"])
    other = run(service, "search", {"type": "observations", "project": "other"})
    assert ids(other["observations"]) == [seeded.other]


def test_shortcuts_map_claude_mem_types_onto_nmem(service: Service, seeded: Seeded) -> None:
    decided = run(service, "decisions", {"query": "login"})
    assert ids(decided["observations"]) == [seeded.memory_id]
    assert decided["observations"][0]["type"] == "decision"
    changed = run(service, "changes", {"orderBy": "date_desc"})
    assert seeded.edit in ids(changed["observations"]) and seeded.read not in ids(changed["observations"])
    learned = run(service, "how_it_works", {})
    assert learned["observations"] and all(r["kind"] == "memory" for r in learned["observations"])
    by_type = run(service, "find_by_type", {"type": "bugfix,discovery", "project": PROJECT})
    found = ids(by_type["observations"])
    assert seeded.failure in found and seeded.read in found and seeded.edit not in found
    nmem_type = run(service, "find_by_type", {"obs_type": ["file_edit"]})
    assert ids(nmem_type["observations"]) == [seeded.edit]


def test_find_by_concept_and_file(service: Service, seeded: Seeded) -> None:
    tagged = run(service, "find_by_concept", {"concepts": "jwt"})
    assert ids(tagged["observations"]) == [seeded.memory_id]
    assert tagged["observations"][0]["concepts"] == ["auth", "jwt"]
    assert run(service, "find_by_concept", {"concept": "nothing-tagged-so"})["totalResults"] == 0
    touched = run(service, "find_by_file", {"filePath": "auth.py", "format": "full"})
    assert sorted(ids(touched["observations"])) == sorted([seeded.read, seeded.edit])
    edited = next(r for r in touched["observations"] if r["id"] == seeded.edit)
    assert edited["files_modified"] == [AUTH_FILE] and edited["files_read"] == []


def test_deprecated_searches_keep_working(service: Service, seeded: Seeded) -> None:
    assert seeded.failure in ids(run(service, "search_observations", {"query": "redirect"})["observations"])
    prompts = run(service, "search_user_prompts", {"query": "flaky"})
    assert ids(prompts["prompts"]) == [seeded.prompt] and prompts["observations"] == []
    assert run(service, "search_sessions", {"query": "login"})["observations"] == []


def test_timelines(service: Service, seeded: Seeded) -> None:
    around = run(service, "get_context_timeline", {"anchor": seeded.read, "depth_before": 1, "depth_after": "1"})
    assert around["anchor"]["id"] == seeded.read
    assert ids(around["before"]) == [seeded.failure] and ids(around["after"]) == [seeded.edit]
    assert ids(around["observations"]) == [seeded.failure, seeded.read, seeded.edit]
    legacy = run(service, "timeline", {"anchor_id": f"#{seeded.read}", "before": 1, "after": 0})
    assert ids(legacy["observations"]) == [seeded.failure, seeded.read]
    by_query = run(service, "get_timeline_by_query", {"query": "AssertionError redirect token", "depth_after": 1})
    assert by_query["mode"] == "auto" and by_query["anchor"]["id"] == seeded.failure
    assert ids(by_query["after"]) == [seeded.read]
    picks = run(service, "get_timeline_by_query", {"query": "login", "mode": "interactive", "limit": 2})
    assert 0 < len(picks["observations"]) <= 2
    assert run(service, "timeline", {"query": "zebra xylophone"})["anchor"] is None
    with pytest.raises(NotFound):
        run(service, "get_context_timeline", {"anchor": 999999})
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 45))
    at_time = run(service, "timeline", {"anchor": iso, "project": PROJECT, "depth_before": 0, "depth_after": 0})
    assert at_time["anchor"]["id"] == seeded.read  # the last observation at or before that second
    with pytest.raises(NotFound):
        run(service, "timeline", {"anchor": "1999-01-01T00:00:00Z"})
    with pytest.raises(NotFound):
        run(service, "timeline", {"anchor": seeded.read, "project": "other"})


def test_recent_context_counts_items_30_by_default_grouped_by_session(service: Service, seeded: Seeded) -> None:
    recent = run(service, "get_recent_context", {})
    assert recent["project"] == PROJECT and recent["limit"] == 30
    user_memory = seeded.user_memory_urn.rsplit("/", 1)[1]  # the user's memories reach every project
    assert ids(recent["observations"]) == [user_memory, seeded.memory_id, seeded.lonely, seeded.edit, seeded.read,
                                           seeded.failure, seeded.test_run, seeded.start]  # newest first
    assert recent["totalResults"] == 8
    assert [s["id"] for s in recent["sessions"]] == ["s-lonely", "s1"]
    s1 = recent["sessions"][1]
    assert s1["request"] is None or "login" in s1["request"]
    assert ids(s1["observations"]) == [seeded.edit, seeded.read, seeded.failure, seeded.test_run, seeded.start]
    three = run(service, "get_recent_context", {"limit": "3"})
    assert ids(three["observations"]) == [user_memory, seeded.memory_id, seeded.lonely]  # items, not sessions
    assert [s["id"] for s in three["sessions"]] == ["s-lonely"]
    assert [s["id"] for s in run(service, "get_recent_context", {"project": "other"})["sessions"]] == ["s2"]
    text = render.text("get_recent_context", recent)
    assert "# Recent Session Context" in text and "## Memories" in text and "8 item(s)" in text


def test_recent_context_applies_every_filter_the_seed_documents(service: Service, seeded: Seeded) -> None:
    def listed(**args: Any) -> list[Any]:
        return ids(run(service, "get_recent_context", args)["observations"])

    assert listed(type="bugfix") == [seeded.failure]
    assert listed(type="decision") == [seeded.memory_id]
    assert listed(obs_type="change,command_error") == [seeded.edit, seeded.failure]
    assert listed(concepts="jwt") == [seeded.memory_id]  # concepts are memory tags
    assert listed(files="src/auth.py") == [seeded.edit, seeded.read]
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 40))
    assert listed(dateEnd=at) == [seeded.read, seeded.failure, seeded.test_run, seeded.start]
    assert listed(dateStart=(T0 + 50) * 1000)[1:] == [seeded.memory_id, seeded.lonely, seeded.edit]
    assert listed(date_start=T0 + 45, date_end=T0 + 52) == [seeded.edit]
    for bad, message in [({"type": "poem"}, "unknown type 'poem'"), ({"limit": 0}, "limit must be at least 1"),
                         ({"dateStart": "2030-01-01", "dateEnd": "2020-01-01"}, "dateStart is after dateEnd"),
                         ({"dateStart": "someday"}, "dateStart")]:
        with pytest.raises(ValidationError) as err:
            run(service, "get_recent_context", bad)
        assert message in err.value.message


def test_timelines_apply_type_concepts_files_and_dates(service: Service, seeded: Seeded) -> None:
    everything = run(service, "timeline", {"anchor": seeded.read})
    assert ids(everything["before"]) == [seeded.start, seeded.test_run, seeded.failure]
    commands = run(service, "timeline", {"anchor": seeded.edit, "obs_type": "command,command_error"})
    assert ids(commands["before"]) == [seeded.test_run, seeded.failure] and commands["after"] == []
    assert ids(run(service, "timeline", {"anchor": seeded.test_run, "obs_type": "bugfix",
                                         "depth_after": 1})["after"]) == [seeded.failure]
    on_file = run(service, "get_context_timeline", {"anchor": seeded.test_run, "files": "src/auth.py"})
    assert on_file["before"] == [] and ids(on_file["after"]) == [seeded.read, seeded.edit]
    nearest = run(service, "get_context_timeline", {"anchor": seeded.edit, "type": "discovery,command",
                                                    "depth_before": 1})
    assert ids(nearest["before"]) == [seeded.read]  # the closest that pass, not the closest overall
    assert run(service, "get_context_timeline", {"anchor": seeded.read, "type": "decision"})["before"] == []
    dated = run(service, "get_timeline_by_query", {"query": "login redirect", "dateStart": T0 + 25,
                                                   "dateEnd": T0 + 45})
    assert dated["anchor"]["id"] == seeded.failure
    assert ids(dated["before"]) == [] and ids(dated["after"]) == [seeded.read]
    typed = run(service, "get_timeline_by_query", {"query": "auth", "type": "refactor", "mode": "interactive"})
    assert ids(typed["observations"]) == [seeded.edit]
    untyped = run(service, "get_timeline_by_query", {"query": "auth", "mode": "interactive", "limit": 10})
    assert ids(run(service, "get_timeline_by_query", {"query": "auth", "type": "discovery", "mode": "interactive",
                                                      "limit": 10})["observations"]) == [seeded.read]
    assert seeded.read in ids(untyped["observations"]) and len(untyped["observations"]) > 1
    assert run(service, "timeline", {"query": "pytest", "obs_type": "file_read"})["anchor"] is None
    # Concepts are memory tags, which no observation carries: the anchor given by id alone is left.
    for name, args in [("timeline", {"anchor": seeded.read, "concepts": "auth"}),
                       ("get_context_timeline", {"anchor": seeded.read, "concept": "auth"})]:
        tagged = run(service, name, args)
        assert (tagged["anchor"]["id"], tagged["before"], tagged["after"]) == (seeded.read, [], [])
    assert run(service, "get_timeline_by_query", {"query": "login", "concepts": ["auth"]})["anchor"] is None
    with pytest.raises(ValidationError):
        run(service, "timeline", {"anchor": seeded.read, "obs_type": "poem"})


def test_get_observations_opens_rows_by_their_ids(service: Service, seeded: Seeded) -> None:
    got = run(service, "get_observations", {"ids": [seeded.edit, f"#{seeded.read}", seeded.memory_id, 999999]})
    assert ids(got["observations"]) == [seeded.edit, seeded.read, seeded.memory_id]
    assert got["missing"] == ["999999"]
    edit = got["observations"][0]
    assert edit["obs_type"] == "file_edit" and AUTH_FILE in edit["text"] and "metadata" in edit


def test_text_is_claude_mems_markdown(service: Service, seeded: Seeded) -> None:
    answer = run(service, "search", {"query": "login", "type": "observations"})
    text = render.text("search", answer)
    assert text.startswith(f'Found {answer["totalResults"]} result(s) matching "login"')
    assert "| ID | Time | T | Title |" in text and f"| #{seeded.failure} |" in text
    assert render.text("search", run(service, "search", {"query": "zebra"})) == 'No results found matching "zebra"'
    body = render.worker_body("decisions", run(service, "decisions", {}))
    assert body["content"][0]["type"] == "text" and "JWT for login sessions" in body["content"][0]["text"]
    as_json = render.worker_body("decisions", run(service, "decisions", {"format": "json"}))
    assert ids(as_json["observations"]) == [seeded.memory_id]
    timeline = render.text("get_context_timeline", run(service, "get_context_timeline", {"anchor": seeded.read}))
    assert f"→ #{seeded.read}" in timeline


@pytest.mark.parametrize(("name", "args", "message"), [
    ("search", {"limit": 0}, "limit must be at least 1"),
    ("search", {"limit": 101}, "limit must be at most 100"),
    ("search", {"limit": "ten"}, "limit must be an integer"),
    ("search", {"limit": True}, "limit must be an integer"),
    ("search", {"offset": -1}, "offset must be at least 0"),
    ("search", {"format": "xml"}, "format must be one of index, full, json"),
    ("search", {"orderBy": "newest"}, "orderBy must be one of"),
    ("search", {"type": "notes"}, "type must be one of"),
    ("search", {"obs_type": "poem"}, "unknown obs_type 'poem'"),
    ("search", {"dateStart": "yesterday-ish"}, "dateStart"),
    ("search", {"dateStart": "2026-05-02", "dateEnd": "2026-05-01"}, "dateStart is after dateEnd"),
    ("search", {"files": {"a": 1}}, "files must be a text"),
    ("find_by_type", {}, "type is required"),
    ("find_by_concept", {"concepts": "  "}, "concepts is required"),
    ("find_by_file", {"format": "full"}, "files is required"),
    ("get_context_timeline", {}, "anchor is required"),
    ("get_context_timeline", {"anchor": "S12"}, "anchor must be an observation id"),
    ("get_context_timeline", {"anchor": "99999999999999999999"}, "anchor must be an observation id"),
    ("timeline", {}, "give an anchor"),
    ("get_timeline_by_query", {"query": "x", "mode": "loud"}, "mode must be one of auto, interactive"),
    ("get_timeline_by_query", {"depth_before": 101, "query": "x"}, "depth_before must be at most 100"),
    ("search_sessions", {}, "query is required"),
    ("get_observations", {"ids": ["abc"]}, "not an observation or memory id"),
])
def test_bad_parameters_are_validation_errors(service: Service, seeded: Seeded, name: str,
                                               args: dict[str, Any], message: str) -> None:
    before = service.status()
    with pytest.raises(ValidationError) as err:
        run(service, name, args)
    assert message in err.value.message and err.value.message.startswith(f"{name}: ")
    assert err.value.mcp_code == -32002
    assert service.status() == before


def test_current_project_comes_first_without_a_project_filter(service: Service, seeded: Seeded) -> None:
    answer = OPERATIONS["search"](service, {"query": "login", "type": "observations"}, "other")
    assert answer["observations"][0]["id"] == seeded.other
    assert CWD  # the seeded demo project lives under CWD


def test_pages_past_one_hundred_merge_every_kind(service: Service) -> None:
    made = [bash(service, f"echo widget {n}", T0 + n, session_id="s-widgets") for n in range(130)]
    merged = run(service, "search", {"query": "widget", "orderBy": "date_asc", "limit": 30, "offset": 90})
    assert ids(merged["observations"]) == made[90:120]
    alone = run(service, "search", {"query": "widget", "type": "observations", "orderBy": "date_asc",
                                    "limit": 30, "offset": 90})
    assert ids(alone["observations"]) == made[90:120]
    last = run(service, "search", {"query": "widget", "orderBy": "date_desc", "limit": 50, "offset": 120})
    assert ids(last["observations"]) == made[9::-1]


def test_a_claude_mem_users_imported_memory_answers_its_own_queries(service: Service, tmp_path: Path) -> None:
    """`nmem import claude-mem` keeps each observation's type and concepts as tags: claude-mem's
    shortcuts and filters find them again."""
    ok("import", "claude-mem", str(build_claude_mem(tmp_path / "claude-mem.db")))

    def titles(name: str, args: dict[str, Any]) -> set[str]:
        return {r["title"] for r in run(service, name, {"project": "shop", **args})["observations"]}

    assert titles("decisions", {}) == {"Use SQLite WAL for the cache"}
    assert titles("decisions", {"query": "WAL cache"}) == {"Use SQLite WAL for the cache"}
    assert titles("find_by_type", {"type": "refactor"}) == {"Split the billing module"}
    assert titles("find_by_type", {"type": "feature,bugfix"}) == {"Added CSV export", "Token refresh raced the logout"}
    assert titles("changes", {}) == {"Added CSV export", "Split the billing module", "Bumped the CI image"}
    assert "The API paginates with cursors" in titles("how_it_works", {})
    assert titles("find_by_concept", {"concepts": "trade-off"}) == {"Use SQLite WAL for the cache"}
    shown = {r["title"]: r["type"] for r in run(service, "search", {"project": "shop", "type": "memories"})[
        "observations"]}
    assert shown["Split the billing module"] == "refactor" and shown["Token refresh raced the logout"] == "bugfix"
    sessions = run(service, "search_sessions", {"query": "cache", "project": "shop"})["sessions"]
    assert [s["request"] for s in sessions] == ["Make the cache safe under load"]
    prompts = run(service, "search_user_prompts", {"query": "deadlock", "project": "shop"})["prompts"]
    assert [p["prompt_text"] for p in prompts] == ["why does the cache deadlock?"]
