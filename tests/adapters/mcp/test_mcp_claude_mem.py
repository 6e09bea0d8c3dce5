"""The `claude-mem` tool profile through the official MCP client: claude-mem's tool names,
schemas and parameter spellings on a populated store, its markdown text beside JSON
structuredContent, and refusals as tool errors carrying -32002."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client, types

from mcp_support import AUTH_FILE, PROJECT, Seeded, check_output, child_env, nmem_argv, text_of, tool_error
from nmem.adapters.mcp.server import ERROR_META, NmemServer
from nmem.adapters.mcp.tools import TOOLS
from nmem.compat.claude_mem import OPERATIONS
from nmem.service.api import Service

pytestmark = pytest.mark.anyio

NMEM_TOOLS = [t.name for t in TOOLS]
CLAUDE_MEM_TOOLS = list(OPERATIONS)
ISSUE_13_NAMES = {"search", "timeline", "decisions", "changes", "how_it_works", "find_by_concept", "find_by_file",
                  "find_by_type", "get_recent_context", "get_context_timeline", "get_timeline_by_query",
                  "search_observations", "search_sessions", "search_user_prompts"}


@pytest.fixture
async def cm(service: Service, seeded: Seeded) -> AsyncIterator[Client]:
    async with Client(NmemServer(service, project=PROJECT, tools="claude-mem").server, mode="legacy") as c:
        yield c


async def answer(client: Client, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A successful call's structuredContent (checked against its outputSchema) and its text."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check_output(tools[name], result.structured_content)
    return result.structured_content, text_of(result)


def ids(rows: list[dict[str, Any]]) -> list[Any]:
    return [r["id"] for r in rows]


async def test_claude_mem_profile_lists_its_tools_and_keeps_nmems_memory_tools(cm: Client) -> None:
    tools = (await cm.list_tools()).tools
    names = [t.name for t in tools]
    assert names == [*CLAUDE_MEM_TOOLS, "remember", "recall", "forget", "status"]
    assert set(names) >= ISSUE_13_NAMES
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None
        if tool.name in OPERATIONS:
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
    by_name = {t.name: t for t in tools}
    search = by_name["search"].input_schema["properties"]
    assert {"query", "format", "type", "obs_type", "concepts", "files", "project", "dateStart", "dateEnd",
            "limit", "offset", "orderBy"} <= set(search)
    assert search["format"]["enum"] == ["index", "full", "json"]
    assert "scope" not in search  # claude-mem's search, not nmem's
    assert by_name["find_by_type"].input_schema["required"] == ["type"]
    assert by_name["find_by_file"].input_schema["required"] == ["files"]
    assert by_name["get_context_timeline"].input_schema["required"] == ["anchor"]
    assert {"anchor_id", "depth_before", "before"} <= set(by_name["timeline"].input_schema["properties"])


async def test_profiles_nmem_default_and_all(service: Service, seeded: Seeded, client: Client) -> None:
    assert [t.name for t in (await client.list_tools()).tools] == NMEM_TOOLS
    with pytest.raises(MCPError) as err:
        await client.call_tool("decisions", {"query": "login"})
    assert err.value.code == types.INVALID_PARAMS and err.value.message == "Unknown tool: decisions"
    async with Client(NmemServer(service, project=PROJECT, tools="all").server, mode="legacy") as both:
        names = [t.name for t in (await both.list_tools()).tools]
        assert names == NMEM_TOOLS + [n for n in CLAUDE_MEM_TOOLS if n not in NMEM_TOOLS]
        assert len(names) == len(set(names))
        nmem_search = json.loads(text_of(await both.call_tool("search", {"query": "login"})))
        assert "results" in nmem_search  # `search` stays nmem's in `all`
        decided, _ = await answer(both, "decisions", {})
        assert ids(decided["observations"]) == [seeded.memory_id]
        with pytest.raises(MCPError):
            await both.call_tool("no_such_tool", {})
    async with Client(NmemServer(service, project=PROJECT, tools="decisions,recall").server, mode="legacy") as few:
        assert [t.name for t in (await few.list_tools()).tools] == ["recall", "decisions"]


async def test_every_claude_mem_tool_answers_in_its_own_spellings(cm: Client, seeded: Seeded) -> None:
    found, text = await answer(cm, "search", {"query": "login", "type": "observations", "obs_type": "bugfix",
                                              "dateStart": "2020-01-01", "orderBy": "relevance", "limit": "5"})
    assert ids(found["observations"]) == [seeded.failure] and found["totalResults"] == 1
    assert text.startswith('Found 1 result(s) matching "login"') and f"| #{seeded.failure} |" in text

    around, text = await answer(cm, "timeline", {"anchor_id": seeded.read, "before": 1, "after": 1})
    assert ids(around["observations"]) == [seeded.failure, seeded.read, seeded.edit]
    assert f"→ #{seeded.read}" in text

    decided, text = await answer(cm, "decisions", {"query": "login", "format": "index"})
    assert ids(decided["observations"]) == [seeded.memory_id] and "JWT for login sessions" in text

    changed, _ = await answer(cm, "changes", {"project": PROJECT})
    assert seeded.edit in ids(changed["observations"]) and seeded.failure not in ids(changed["observations"])

    learned, _ = await answer(cm, "how_it_works", {"format": "full"})
    assert learned["observations"] and {r["kind"] for r in learned["observations"]} == {"memory"}

    tagged, _ = await answer(cm, "find_by_concept", {"concepts": "auth,jwt"})
    assert ids(tagged["observations"]) == [seeded.memory_id]

    touched, text = await answer(cm, "find_by_file", {"files": "src/auth.py", "orderBy": "date_asc"})
    assert ids(touched["observations"]) == [seeded.read, seeded.edit]
    assert f"| #{seeded.read} |" in text and f"| #{seeded.edit} |" in text

    typed, _ = await answer(cm, "find_by_type", {"type": "change", "dateEnd": "2099-12-31"})
    assert seeded.edit in ids(typed["observations"]) and seeded.read not in ids(typed["observations"])

    recent, text = await answer(cm, "get_recent_context", {"limit": "4", "type": "bugfix,change,command"})
    assert ids(recent["observations"]) == [seeded.lonely, seeded.edit, seeded.failure, seeded.test_run]
    assert [s["id"] for s in recent["sessions"]] == ["s-lonely", "s1"]
    assert text.startswith("# Recent Session Context") and "4 item(s)" in text
    recent_files, _ = await answer(cm, "get_recent_context", {"files": "src/auth.py", "dateEnd": "2099-01-01"})
    assert ids(recent_files["observations"]) == [seeded.edit, seeded.read]

    narrowed, _ = await answer(cm, "timeline", {"anchor_id": seeded.edit, "obs_type": "bugfix", "before": 3})
    assert ids(narrowed["observations"]) == [seeded.failure, seeded.edit]

    anchored, _ = await answer(cm, "get_context_timeline", {"anchor": f"#{seeded.edit}", "depth_before": 2,
                                                            "depth_after": 0})
    assert ids(anchored["observations"]) == [seeded.failure, seeded.read, seeded.edit]

    queried, _ = await answer(cm, "get_timeline_by_query", {"query": "AssertionError redirect", "depth_before": 0,
                                                            "depth_after": 1})
    assert ids(queried["observations"]) == [seeded.failure, seeded.read]

    old_obs, _ = await answer(cm, "search_observations", {"query": "redirect"})
    assert seeded.failure in ids(old_obs["observations"])
    old_prompts, _ = await answer(cm, "search_user_prompts", {"query": "flaky"})
    assert ids(old_prompts["prompts"]) == [seeded.prompt]
    old_sessions, _ = await answer(cm, "search_sessions", {"query": "login"})
    assert old_sessions["observations"] == [] and old_sessions["prompts"] == []

    fetched, _ = await answer(cm, "get_observations", {"ids": [seeded.failure, seeded.memory_id]})
    assert ids(fetched["observations"]) == [seeded.failure, seeded.memory_id]

    remembered = await cm.call_tool("remember", {"content": "Use claude-mem names through nmem.",
                                                 "namespace": "decisions"})
    assert not remembered.is_error
    decided_now, _ = await answer(cm, "decisions", {"query": "claude-mem names"})
    assert decided_now["observations"][0]["title"].startswith("Use claude-mem names")


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("search", {"limit": 500}, "search: limit must be at most 100"),
    ("search", {"limit": "many"}, "search: limit must be an integer"),
    ("search", {"format": "xml"}, "search: format must be one of index, full, json"),
    ("search", {"obs_type": "poem"}, "search: unknown obs_type 'poem'"),
    ("find_by_type", {}, "find_by_type: type is required"),
    ("get_context_timeline", {"anchor": "yesterday"}, "get_context_timeline: anchor must be an observation id"),
    ("decisions", {"dateStart": "not a date"}, "decisions: dateStart"),
    ("timeline", {"depth_before": -1, "anchor": 1}, "timeline: depth_before must be at least 0"),
    ("get_recent_context", {"type": "poem"}, "get_recent_context: unknown type 'poem'"),
    ("get_timeline_by_query", {"query": "login", "dateStart": "2030-01-01", "dateEnd": "2020-01-01"},
     "get_timeline_by_query: dateStart is after dateEnd"),
])
async def test_bad_parameters_are_tool_errors_with_the_validation_code(
        cm: Client, service: Service, name: str, arguments: dict[str, Any], message: str) -> None:
    before = service.status()
    result = await cm.call_tool(name, arguments)
    assert message in tool_error(result)
    assert "Traceback" not in text_of(result)
    assert result.meta is not None and result.meta[ERROR_META] == {"code": -32002, "kind": "validation"}
    assert service.status() == before


async def test_a_missing_anchor_is_not_found(cm: Client) -> None:
    result = await cm.call_tool("get_context_timeline", {"anchor": 987654})
    assert "not found" in tool_error(result)
    assert result.meta is not None and result.meta[ERROR_META]["code"] == -32001


async def test_stdio_server_takes_the_profile_from_the_setting(nmem_home: Path, seeded: Seeded,
                                                               tmp_path: Path) -> None:
    argv = nmem_argv("serve", "--project", PROJECT)
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env=child_env(nmem_home, NMEM_MCP_TOOLS="claude-mem"))
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            assert "find_by_file" in names and "session_trace" not in names
            result = await session.call_tool("find_by_file", {"filePath": AUTH_FILE, "format": "index"})
            assert not result.is_error
            assert isinstance(result.structured_content, dict)
            assert sorted(ids(result.structured_content["observations"])) == sorted([seeded.read, seeded.edit])
            block = result.content[0]
            assert isinstance(block, types.TextContent) and block.text.startswith("Found 2 result(s)")


async def test_in_the_all_profile_nmems_timeline_applies_claude_mems_filters_too(service: Service,
                                                                                 seeded: Seeded) -> None:
    async with Client(NmemServer(service, project=PROJECT, tools="all").server, mode="legacy") as both:
        plain = json.loads(text_of(await both.call_tool("timeline", {"anchor_id": seeded.edit, "before": 3})))
        assert [o["id"] for o in plain["before"]] == [seeded.test_run, seeded.failure, seeded.read]
        typed = json.loads(text_of(await both.call_tool("timeline", {"anchor_id": seeded.edit, "before": 3,
                                                                    "obs_type": "bugfix"})))
        assert typed["anchor"]["id"] == seeded.edit and [o["id"] for o in typed["before"]] == [seeded.failure]
        on_file = json.loads(text_of(await both.call_tool("timeline", {"query": "auth", "files": AUTH_FILE})))
        assert on_file["anchor"]["file_path"] == AUTH_FILE
        tagged = json.loads(text_of(await both.call_tool("timeline", {"anchor_id": seeded.edit, "concepts": "auth"})))
        assert (tagged["anchor"]["id"], tagged["before"], tagged["after"]) == (seeded.edit, [], [])
        refused = await both.call_tool("timeline", {"anchor_id": seeded.edit, "obs_type": "poem"})
        assert "unknown obs_type 'poem'" in tool_error(refused)
        assert refused.meta is not None and refused.meta[ERROR_META]["code"] == -32002
