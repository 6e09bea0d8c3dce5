"""Every MCP tool through the official SDK client, in memory: results, schemas, hints and errors.

The legacy client speaks 2025-11-25 (what Claude Code uses over stdio); a few calls also go
through the default client, which settles on 2026-07-28 against an SDK 2.x server.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from mcp import Client, MCPError, types

from conftest import record
from mcp_support import AUTH_FILE, CWD, PROJECT, T0, Seeded, bash, check_output, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

pytestmark = pytest.mark.anyio

ALL_TOOLS = ["search", "get_observations", "get", "timeline", "recent_context", "session_trace", "file_history",
             "remember", "recall", "forget", "status", "configure", "sync", "consolidate"]
CORE_TOOLS = ["search", "get_observations", "get", "timeline", "remember", "recall", "forget"]


async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    """A successful call's structured result, checked against the tool's advertised outputSchema."""
    result = structured(await client.call_tool(name, arguments or {}))
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check_output(tools[name], result)
    return result


async def error(client: Client, name: str, arguments: dict[str, Any]) -> str:
    return tool_error(await client.call_tool(name, arguments))


# -- listing -------------------------------------------------------------------------------------


async def test_tools_list_every_tool_with_schemas_and_hints(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ALL_TOOLS
    for tool in tools:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.title
        for schema in (tool.input_schema, tool.output_schema):
            assert schema is not None
            assert schema["type"] == "object", tool.name  # 2025-11-25: the root must be an object
            jsonschema.Draft202012Validator.check_schema(schema)
        ann = tool.annotations
        assert ann is not None
        assert ann.open_world_hint is (tool.name == "sync"), tool.name  # only sync reaches beyond the store
        if tool.name in ("remember", "forget"):
            assert ann.read_only_hint is False, tool.name
        elif tool.name in ("sync", "configure"):  # setting the same values twice changes nothing more
            assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint) == (False, False, True)
        elif tool.name == "consolidate":  # archives (never deletes) and can be undone
            assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint) == (False, False, False)
        else:
            assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint) == (True, False, True), tool.name
    by_name = {t.name: t for t in tools}
    assert by_name["forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert by_name["remember"].annotations.destructive_hint is False  # type: ignore[union-attr]
    assert by_name["remember"].annotations.idempotent_hint is False  # type: ignore[union-attr]
    assert by_name["get_observations"].input_schema["required"] == ["ids"]
    assert "required" not in by_name["session_trace"].input_schema  # default: the latest session
    assert by_name["get"].input_schema["required"] == ["refs"]
    assert by_name["file_history"].input_schema["required"] == ["file_path"]
    # claude-mem's spellings are part of the advertised schema
    assert {"dateStart", "dateEnd", "orderBy", "type", "concepts"} <= set(by_name["search"].input_schema["properties"])


async def test_core_setting_exposes_only_the_core_tools(service: Service, seeded: Seeded) -> None:
    async with Client(NmemServer(service, project=PROJECT, tools="core").server, mode="legacy") as c:
        assert [t.name for t in (await c.list_tools()).tools] == CORE_TOOLS
        assert structured(await c.call_tool("search", {"query": "login"}))["count"] > 0
        with pytest.raises(MCPError) as err:
            await c.call_tool("status", {})
        assert err.value.code == types.INVALID_PARAMS
        assert "status" in err.value.message


async def test_unknown_tool_is_a_protocol_error_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as err:
        await client.call_tool("no_such_tool", {})
    assert err.value.code == -32602
    assert err.value.message == "Unknown tool: no_such_tool"


# -- search --------------------------------------------------------------------------------------


async def test_search_returns_index_entries_of_the_current_project_first(client: Client, seeded: Seeded) -> None:
    out = await call(client, "search", {"scope": "observations", "query": "login"})
    assert out["count"] == len(out["results"]) > 0
    assert out["query"] == "login"
    assert out["match"]
    projects = [r["project"] for r in out["results"]]
    assert projects == sorted(projects, key=lambda p: p != PROJECT) and projects[-1] == "other"
    hit = next(r for r in out["results"] if r["id"] == seeded.failure)
    assert hit["kind"] == "observation"
    assert hit["obs_type"] == "command_error"
    assert hit["urn"] == f"nmem://project:{PROJECT}/observations/{seeded.failure}"
    assert hit["content_preview"].startswith("pytest tests/test_login.py")
    assert "content" not in hit and "metadata" not in hit  # index format: previews only
    for r in out["results"]:
        assert len(r["content_preview"]) <= 120


async def test_search_project_default_vs_null_vs_star(client: Client, seeded: Seeded) -> None:
    # ADR-006: the current project is a boost, not a filter; its results come first
    default = await call(client, "search", {"scope": "observations", "query": "login"})
    assert [r["project"] for r in default["results"]][-1] == "other"
    assert {r["project"] for r in default["results"][:-1]} == {PROJECT}
    for everywhere in (None, "*"):
        out = await call(client, "search", {"scope": "observations", "query": "login", "project": everywhere})
        assert {r["project"] for r in out["results"]} == {"demo", "other"}, everywhere
        assert seeded.other in [r["id"] for r in out["results"]]
    other = await call(client, "search", {"scope": "observations", "query": "login", "project": "other"})
    assert [r["id"] for r in other["results"]] == [seeded.other]


async def test_search_scopes(client: Client, seeded: Seeded) -> None:
    kinds = {}
    for scope in ("observations", "prompts", "sessions", "memories", "all"):
        out = await call(client, "search", {"query": "login", "scope": scope, "project": None})
        kinds[scope] = {r["kind"] for r in out["results"]}
    assert kinds["observations"] == {"observation"}
    assert kinds["prompts"] == {"prompt"}
    assert kinds["sessions"] <= {"session"}
    assert kinds["memories"] == {"memory"}
    assert {"observation", "prompt", "memory"} <= kinds["all"]
    memories = await call(client, "search", {"query": "login", "scope": "memories"})
    assert {r["urn"] for r in memories["results"]} == {seeded.memory_urn, seeded.user_memory_urn}


async def test_search_filters_in_nmem_spelling(client: Client, seeded: Seeded) -> None:
    errors = await call(client, "search", {"query": "pytest", "obs_type": "command_error"})
    assert [r["id"] for r in errors["results"]] == [seeded.failure]
    by_file = await call(client, "search", {"files": ["src/auth.py"], "order_by": "date_asc"})
    assert [r["id"] for r in by_file["results"]] == [seeded.read, seeded.edit]
    by_session = await call(client, "search", {"scope": "observations", "session_id": "s-lonely"})
    assert [r["id"] for r in by_session["results"]] == [seeded.lonely]
    window = await call(client, "search", {"scope": "observations", "date_start": T0 + 15, "date_end": T0 + 45,
                                           "order_by": "date_asc"})
    assert [r["id"] for r in window["results"]] == [seeded.test_run, seeded.failure, seeded.read]
    tagged = await call(client, "search", {"scope": "memories", "tags": ["jwt"], "namespace": "decisions"})
    assert [r["urn"] for r in tagged["results"]] == [seeded.memory_urn]


async def test_search_accepts_claude_mem_spellings(client: Client, seeded: Seeded) -> None:
    window = await call(client, "search", {"scope": "observations", "dateStart": T0 + 15, "dateEnd": T0 + 45,
                                           "orderBy": "date_asc"})
    assert [r["id"] for r in window["results"]] == [seeded.test_run, seeded.failure, seeded.read]
    newest = await call(client, "search", {"scope": "observations", "query": "pytest",
                                           "orderBy": "date_desc"})
    assert [r["id"] for r in newest["results"]] == [seeded.failure, seeded.test_run]
    as_obs_type = await call(client, "search", {"query": "pytest", "type": "command_error"})
    assert [r["id"] for r in as_obs_type["results"]] == [seeded.failure]
    as_scope = await call(client, "search", {"query": "login", "type": "prompts"})
    assert [(r["kind"], r["project"]) for r in as_scope["results"]] == [("prompt", PROJECT), ("prompt", "other")]
    concepts = await call(client, "search", {"scope": "memories", "concepts": ["jwt"]})
    assert [r["urn"] for r in concepts["results"]] == [seeded.memory_urn]
    concepts_str = await call(client, "search", {"scope": "memories", "concepts": "auth,jwt"})
    assert [r["urn"] for r in concepts_str["results"]] == [seeded.memory_urn]


async def test_search_format_full_returns_whole_records(client: Client, seeded: Seeded) -> None:
    out = await call(client, "search", {"query": "AssertionError", "format": "full"})
    (hit,) = out["results"]
    assert hit["id"] == seeded.failure
    assert hit["content"] == "pytest tests/test_login.py\n→ AssertionError: login redirect token expired"
    assert hit["metadata"]["exit_code"] == 1
    assert hit["tool_name"] == "Bash"
    index = await call(client, "search", {"query": "AssertionError", "format": "index"})
    assert "content" not in index["results"][0]


async def test_search_limit_offset_and_the_cap_at_100(client: Client, service: Service) -> None:
    with service.store.transaction():
        for i in range(110):
            bash(service, f"make widget-{i}", T0 + 1000 + i, session_id="s-bulk")
    first = await call(client, "search", {"query": "widget", "limit": 3, "order_by": "date_asc"})
    second = await call(client, "search", {"query": "widget", "limit": 3, "offset": 3, "order_by": "date_asc"})
    assert [r["content_preview"] for r in first["results"] + second["results"]] == [
        f"make widget-{i}" for i in range(6)]
    default = await call(client, "search", {"query": "widget"})
    assert default["count"] == 20
    most = await call(client, "search", {"query": "widget", "limit": 100})
    assert most["count"] == 100


@pytest.mark.parametrize(("tool", "arguments", "cap"), [
    ("search", {"query": "widget"}, 100),
    ("recent_context", {"project": None}, 100),
    ("file_history", {"file_path": "/work/demo/widget.py"}, 50),
])
async def test_limit_above_the_cap_is_capped_not_refused(client: Client, service: Service, tool: str,
                                                         arguments: dict[str, Any], cap: int) -> None:
    """ADR-006: search/recent_context "limit … Capped at 100", file_history "Capped at 50"."""
    with service.store.transaction():
        for i in range(110):
            record(service, "PostToolUse", now=T0 + 1000 + i, session_id=f"s-bulk-{i}", cwd="/work/demo",
                   tool_name="Bash", tool_input={"command": f"make widget-{i}"}, tool_response={"exit_code": 0})
            record(service, "PostToolUse", now=T0 + 2000 + i, session_id=f"s-bulk-{i}", cwd="/work/demo",
                   tool_name="Edit", tool_input={"file_path": "/work/demo/widget.py", "old_string": f"a{i}",
                                                 "new_string": f"b{i}"})
    out = await call(client, tool, {**arguments, "limit": 1000})
    touches = [t for s in out["sessions"] for t in s["touches"]] if tool == "file_history" else out["results"]
    assert len(touches) == cap


async def test_search_no_results_is_an_empty_array(client: Client) -> None:
    out = await call(client, "search", {"query": "nonexistentword"})
    assert (out["results"], out["count"]) == ([], 0)


@pytest.mark.parametrize(("query", "sqlite_says"), [
    ('"unbalanced', "unterminated string"),
    ('login "redirect', "unterminated string"),
    ("login AND", "syntax error"),
    ("(login OR redirect", "syntax error"),
])
async def test_search_malformed_fts5_query_is_an_error_describing_the_syntax_issue(
        client: Client, query: str, sqlite_says: str) -> None:
    message = await error(client, "search", {"query": query})
    assert message.startswith("invalid search query: ")
    assert sqlite_says in message


async def test_search_bad_filter_values_are_errors_a_model_can_act_on(client: Client) -> None:
    assert "unknown obs_type 'crash'" in await error(client, "search", {"query": "x", "obs_type": "crash"})
    assert await error(client, "search", {"query": "x", "dateStart": "yesterday-ish"})
    assert "date_start is after date_end" in await error(
        client, "search", {"query": "x", "date_start": T0 + 100, "date_end": T0})
    assert "format" in await error(client, "search", {"query": "x", "format": "verbose"})


# -- get_observations ----------------------------------------------------------------------------


async def test_get_observations_in_the_order_given_with_missing_ids_omitted(client: Client, seeded: Seeded) -> None:
    out = await call(client, "get_observations", {"ids": [seeded.edit, 4242, seeded.failure]})
    assert [r["id"] for r in out["results"]] == [seeded.edit, seeded.failure]
    assert out["count"] == 2
    edit = out["results"][0]
    assert edit["file_path"] == AUTH_FILE
    assert edit["obs_type"] == "file_edit"
    assert edit["source_event"] == "PostToolUse"
    assert edit["metadata"]["head"] == "ttl = 3600"
    assert edit["urn"] == f"nmem://project:demo/observations/{seeded.edit}"


async def test_get_observations_all_ids_missing_is_an_empty_array(client: Client) -> None:
    out = await call(client, "get_observations", {"ids": [4242, 4243]})
    assert (out["results"], out["count"]) == ([], 0)


async def test_get_observations_empty_ids_array_is_an_error(client: Client) -> None:
    assert await error(client, "get_observations", {"ids": []}) == "ids array must not be empty"


async def test_get_observations_more_than_50_ids_is_an_error(client: Client) -> None:
    assert "at most 50 ids" in await error(client, "get_observations", {"ids": list(range(1, 52))})


async def test_get_observations_ids_given_as_a_string_is_a_schema_error(client: Client) -> None:
    message = await error(client, "get_observations", {"ids": "12"})
    assert message.startswith("invalid arguments for get_observations: ids: ")
    assert "is not of type 'array'" in message


# -- timeline ------------------------------------------------------------------------------------


async def test_timeline_by_anchor_stays_in_the_session_in_order(client: Client, seeded: Seeded) -> None:
    out = await call(client, "timeline", {"anchor": seeded.failure, "before": 5, "after": 5})
    assert out["anchor"]["id"] == seeded.failure
    assert out["anchor"]["content"].startswith("pytest tests/test_login.py")
    assert [o["id"] for o in out["before"]] == [seeded.start, seeded.test_run]
    assert [o["id"] for o in out["after"]] == [seeded.read, seeded.edit]  # not s-lonely's, not s2's
    narrow = await call(client, "timeline", {"anchor": seeded.failure, "before": 1, "after": 1})
    assert ([o["id"] for o in narrow["before"]], [o["id"] for o in narrow["after"]]) == (
        [seeded.test_run], [seeded.read])


async def test_timeline_by_query_anchors_on_the_best_match(client: Client, seeded: Seeded) -> None:
    out = await call(client, "timeline", {"query": "AssertionError", "before": 1, "after": 1})
    assert out["anchor"]["id"] == seeded.failure
    assert [o["id"] for o in out["before"]] == [seeded.test_run]


async def test_timeline_anchor_id_does_not_exist_is_an_error(client: Client) -> None:
    assert await error(client, "timeline", {"anchor": 999_999}) == "anchor observation not found"


async def test_timeline_anchor_without_surrounding_context_has_empty_before_and_after(
        client: Client, seeded: Seeded) -> None:
    out = await call(client, "timeline", {"anchor": seeded.lonely})
    assert out["anchor"]["id"] == seeded.lonely
    assert (out["before"], out["after"]) == ([], [])


async def test_timeline_needs_an_anchor_or_a_query(client: Client) -> None:
    assert await error(client, "timeline", {}) == "timeline needs an anchor id or a query"
    assert "no observation matches" in await error(client, "timeline", {"query": "nonexistentword"})


# -- recent_context -------------------------------------------------------------------------------


async def test_recent_context_scores_the_current_project_highest_first(client: Client, seeded: Seeded) -> None:
    out = await call(client, "recent_context", {"limit": 30})
    rows = out["results"]
    assert out["count"] == len(rows) > 0
    scores = [r["score"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert rows[0]["id"] == seeded.edit  # file_edit weighs most, same project
    paths = [r["file_path"] for r in rows if r["file_path"]]
    assert paths.count(AUTH_FILE) == 1  # read and edit of one file collapse to the best
    assert (await call(client, "recent_context", {"limit": 2}))["count"] == 2


async def test_recent_context_project_is_a_boost_not_a_filter(client: Client, seeded: Seeded) -> None:
    other = await call(client, "recent_context", {"project": "other"})
    assert other["results"][0]["id"] == seeded.other
    assert {r["project"] for r in other["results"]} == {"demo", "other"}


async def test_recent_context_no_observations_for_project_is_an_empty_array(service: Service) -> None:
    async with Client(NmemServer(service, project="nothing").server, mode="legacy") as c:
        out = structured(await c.call_tool("recent_context", {}))
        assert (out["results"], out["count"]) == ([], 0)


# -- session_trace ---------------------------------------------------------------------------------


async def test_session_trace_prompts_in_order_with_their_actions(client: Client, seeded: Seeded) -> None:
    out = await call(client, "session_trace", {"session_id": "s1"})
    assert (out["session_id"], out["project"]) == ("s1", PROJECT)
    system, prompt = out["prompts"]
    assert (system["prompt_id"], system["source"]) == (None, "system")
    assert [o["id"] for o in system["observations"]] == [seeded.start]
    assert prompt["prompt_id"] == seeded.prompt
    assert prompt["content"] == "fix the flaky login redirect test"
    assert prompt["observation_count"] == 4
    assert [o["id"] for o in prompt["observations"]] == [seeded.test_run, seeded.failure, seeded.read, seeded.edit]


async def test_session_trace_session_id_does_not_exist_is_an_error(client: Client) -> None:
    assert await error(client, "session_trace", {"session_id": "d4f8a2b1-missing"}) == \
        "session not found: d4f8a2b1-missing"


async def test_session_trace_session_exists_but_no_prompts_in_window_is_empty_prompts(client: Client) -> None:
    out = await call(client, "session_trace", {"session_id": "s1", "before": T0 - 100})
    assert (out["session_id"], out["prompts"]) == ("s1", [])


async def test_session_trace_without_session_id_traces_the_latest_session_of_the_project(
        client: Client, seeded: Seeded) -> None:
    latest = await call(client, "session_trace", {})
    assert (latest["session_id"], latest["project"]) == ("s-lonely", PROJECT)  # started after s1
    other = await call(client, "session_trace", {"project": "other"})
    assert other["session_id"] == "s2"
    assert await error(client, "session_trace", {"project": "nowhere"}) == "no session recorded for project nowhere"


async def test_session_trace_without_session_id_skips_the_session_that_just_started(
        client: Client, service: Service, seeded: Seeded) -> None:
    """The agent asking is in a session whose only row is its SessionStart: that one has no content."""
    record(service, "SessionStart", now=T0 + 500, session_id="s-now", cwd=CWD, source="startup")
    assert (await call(client, "session_trace", {}))["session_id"] == "s-lonely"
    record(service, "UserPromptSubmit", now=T0 + 510, session_id="s-now", cwd=CWD, prompt="and now the exporter")
    assert (await call(client, "session_trace", {}))["session_id"] == "s-now"


# -- file_history -----------------------------------------------------------------------------------


async def test_file_history_sessions_with_the_intent_behind_each_touch(client: Client, seeded: Seeded) -> None:
    out = await call(client, "file_history", {"file_path": AUTH_FILE})
    assert out["file_path"] == AUTH_FILE
    (session,) = out["sessions"]
    assert (session["session_id"], session["project"]) == ("s1", PROJECT)
    assert sorted(t["observation_id"] for t in session["touches"]) == [seeded.read, seeded.edit]
    assert {t["prompt_content"] for t in session["touches"]} == {"fix the flaky login redirect test"}
    limited = await call(client, "file_history", {"file_path": AUTH_FILE, "limit": 1})
    assert [t["observation_id"] for s in limited["sessions"] for t in s["touches"]] == [seeded.edit]


async def test_file_history_file_path_not_found_is_empty_sessions(client: Client) -> None:
    out = await call(client, "file_history", {"file_path": "/work/demo/never-touched.py"})
    assert out == {"file_path": "/work/demo/never-touched.py", "sessions": []}


# -- remember / recall / forget / status -----------------------------------------------------------


async def test_remember_recall_forget_round_trip(client: Client, service: Service) -> None:
    kept = await call(client, "remember", {
        "content": "The payments webhook retries 5 times with exponential backoff.",
        "summary": "Webhook retry policy", "category": "gotcha", "tags": ["payments", "webhook"]})
    assert kept["success"] is True
    assert kept["urn"] == f"nmem://project:{PROJECT}/gotchas/{kept['id']}"
    assert kept["memory"]["source"] == "mcp"
    assert kept["memory"]["tags"] == ["payments", "webhook"]

    found = await call(client, "recall", {"query": "webhook retries"})
    assert [r["urn"] for r in found["results"]] == [kept["urn"]]
    assert found["results"][0]["content"].startswith("The payments webhook")  # recall returns full memories
    assert (await call(client, "recall", {"query": "webhook", "namespace": "decisions"}))["results"] == []
    assert [r["id"] for r in (await call(client, "recall", {"tags": "payments"}))["results"]] == [kept["id"]]

    gone = await call(client, "forget", {"id": kept["urn"]})
    assert (gone["success"], gone["id"], gone["urn"]) == (True, kept["id"], kept["urn"])
    assert (await call(client, "recall", {"query": "webhook retries"}))["results"] == []
    assert service.store.get_memory(kept["id"]).deleted_at is not None  # type: ignore[union-attr]
    assert "memory not found" in await error(client, "forget", {"id": kept["id"]})


async def test_remember_in_the_user_domain_and_recall_by_domain(client: Client) -> None:
    kept = await call(client, "remember", {"content": "Use ruff, not flake8.", "namespace": "conventions",
                                           "domain": "user"})
    assert kept["urn"].startswith("nmem://user/conventions/")
    assert [r["urn"] for r in (await call(client, "recall", {"query": "ruff", "domain": "user"}))["results"]] == [
        kept["urn"]]
    assert (await call(client, "recall", {"query": "ruff", "domain": "project"}))["results"] == []


async def test_remember_errors(client: Client) -> None:
    assert await error(client, "remember", {"content": "   "}) == "content must not be empty"
    assert "'content' is a required property" in await error(client, "remember", {"summary": "x"})
    long = await error(client, "remember", {"content": "x", "summary": "s" * 101})
    assert long.startswith("invalid arguments for remember: summary: ")
    assert "invalid namespace" in await error(client, "remember", {"content": "x", "namespace": "Bad Name!"})
    assert "invalid domain" in await error(client, "remember", {"content": "x", "domain": "galaxy"})


async def test_forget_needs_an_id(client: Client) -> None:
    assert await error(client, "forget", {}) == "give the id, urn or number of the memory to forget"
    assert "memory not found" in await error(client, "forget", {"id": "01NOPE"})


async def test_recall_by_namespace_over_curated_memories_only(client: Client, seeded: Seeded) -> None:
    out = await call(client, "recall", {"query": "login"})
    assert {r["urn"] for r in out["results"]} == {seeded.memory_urn, seeded.user_memory_urn}
    assert {r["kind"] for r in out["results"]} == {"memory"}
    decisions = await call(client, "recall", {"query": "login", "category": "decisions"})
    assert [r["urn"] for r in decisions["results"]] == [seeded.memory_urn]


async def test_status_counts(client: Client) -> None:
    out = await call(client, "status")
    assert (out["sessions"], out["observations"], out["prompts"], out["memories"]) == (3, 7, 2, 2)
    assert out["by_obs_type"]["command_error"] == 1
    assert out["schema_version"] >= 1


# -- schema validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("search", {"limit": "ten"}, "invalid arguments for search: limit: 'ten' is not of type 'integer'"),
    ("search", {"scope": "everything"}, "invalid arguments for search: scope: 'everything' is not one of"),
    ("search", {"offset": -1}, "invalid arguments for search: offset: -1 is less than the minimum of 0"),
    ("get_observations", {}, "invalid arguments for get_observations: arguments: 'ids' is a required property"),
    ("get_observations", {"ids": ["a"]}, "invalid arguments for get_observations: ids/0: 'a' is not of type"),
    ("timeline", {"anchor": "forty"}, "invalid arguments for timeline: anchor: 'forty' is not of type 'integer'"),
    ("file_history", {"file_path": 12}, "invalid arguments for file_history: file_path: 12 is not of type"),
])
async def test_schema_validation_failures_are_tool_errors_naming_the_argument(
        client: Client, tool: str, arguments: dict[str, Any], expected: str) -> None:
    assert (await error(client, tool, arguments)).startswith(expected)


@pytest.mark.parametrize(("tool", "arguments"), [
    ("timeline", {"anchor": 2**64}),
    ("get_observations", {"ids": [2**64]}),
    ("search", {"query": "login", "offset": 2**64}),
    ("search", {"query": "login", "date_start": -(2**64)}),
])
async def test_integers_beyond_sqlite_range_are_tool_errors_not_protocol_errors(
        client: Client, tool: str, arguments: dict[str, Any]) -> None:
    """Schema-valid arguments must never end as the SDK's catch-all JSON-RPC error code 0."""
    try:
        result = await client.call_tool(tool, arguments)
    except MCPError as exc:
        pytest.fail(f"protocol error {exc.code}: {exc.message}")
    assert tool_error(result)


# -- the modern era (2026-07-28) -------------------------------------------------------------------


async def test_default_client_speaks_the_modern_protocol_with_the_same_results(app: NmemServer,
                                                                                seeded: Seeded) -> None:
    async with Client(app.server) as modern, Client(app.server, mode="legacy") as legacy:
        assert modern.protocol_version == "2026-07-28"
        assert [t.name for t in (await modern.list_tools()).tools] == ALL_TOOLS
        args = {"query": "login", "project": None}
        assert structured(await modern.call_tool("search", args)) == structured(await legacy.call_tool("search", args))
        got = structured(await modern.call_tool("get_observations", {"ids": [seeded.failure]}))
        assert got["results"][0]["obs_type"] == "command_error"
        assert tool_error(await modern.call_tool("get_observations", {"ids": []})) == "ids array must not be empty"
        assert tool_error(await modern.call_tool("timeline", {"anchor": 999_999})) == "anchor observation not found"
        with pytest.raises(MCPError) as err:
            await modern.call_tool("no_such_tool", {})
        assert err.value.code == -32602
