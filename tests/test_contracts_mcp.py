"""MCP contracts through the official SDK client: the `configure` tool (subcog), recall's
mode/min_similarity/spec/detail and the integer `number` srvrmgr's `forget(id: integer)` takes,
and ADR-006's strict search (`raw`) with its bare-array result shape."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from mcp import Client, types

from mcp_support import PROJECT, Seeded, check_output, structured, text_of, tool_error
from nmem.adapters.mcp.configure_tool import WRITABLE
from nmem.adapters.mcp.server import ERROR_META, NmemServer
from nmem.config import SETTINGS, load_settings
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
INVALID_PARAMS = -32602


async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    result = structured(await client.call_tool(name, arguments or {}))
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check_output(tools[name], result)
    return result


async def refused(client: Client, name: str, arguments: dict[str, Any]) -> tuple[str, int, str]:
    result = await client.call_tool(name, arguments)
    message = tool_error(result)
    assert result.meta is not None
    return message, result.meta[ERROR_META]["code"], result.meta[ERROR_META]["kind"]


# -- configure ----------------------------------------------------------------------------------------

async def test_configure_reads_every_setting_with_secrets_masked(service: Service, seeded: Seeded,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_MCP_TOKEN", "tok-very-secret")
    monkeypatch.setenv("NMEM_SYNC_REMOTE", "https://me:hunter2@git.example.com/sync.git")
    svc = Service(service.store, load_settings())
    async with Client(NmemServer(svc, project=PROJECT).server, mode="legacy") as client:
        out = await call(client, "configure")
        assert set(out["settings"]) == {s.name for s in SETTINGS}
        assert out["changed"] == []
        assert out["settings"]["mcp.token"] == {**out["settings"]["mcp.token"], "value": "***", "source": "env",
                                                "writable": False}
        assert out["settings"]["sync.remote"]["value"] == "https://me:***@git.example.com/sync.git"
        assert "tok-very-secret" not in text_of(await client.call_tool("configure", {}))
        assert out["settings"]["search.default_limit"] == {**out["settings"]["search.default_limit"],
                                                           "value": 20, "source": "default", "writable": True}
        some = await call(client, "configure", {"names": ["memory.enabled", "search.raw"]})
        assert set(some["settings"]) == {"memory.enabled", "search.raw"}


async def test_configure_writes_the_safe_subset_for_this_server(client: Client, app: NmemServer,
                                                               seeded: Seeded) -> None:
    assert (await call(client, "search", {"query": "pytest"}))["count"] > 1
    out = await call(client, "configure", {"set": {"search.default_limit": 1, "mcp.search_shape": "array"}})
    assert out["changed"] == ["mcp.search_shape", "search.default_limit"]
    assert out["settings"]["search.default_limit"]["value"] == 1
    assert out["settings"]["search.default_limit"]["source"] == "runtime"
    result = await client.call_tool("search", {"query": "pytest"})
    assert isinstance(json.loads(text_of(result)), list) and len(json.loads(text_of(result))) == 1
    from_text = await call(client, "configure", {"set": {"search.hybrid_weight": "0.5", "search.raw": "true"}})
    assert from_text["settings"]["search.hybrid_weight"]["value"] == 0.5
    assert from_text["settings"]["search.raw"]["value"] is True
    assert not os.path.exists(app.service.settings.config_file)  # never saved: this server only


@pytest.mark.parametrize(("changes", "message"), [
    ({"memory.enabled": True}, "memory.enabled cannot be changed through MCP"),
    ({"store.url": "sqlite:////tmp/other.db"}, "store.url cannot be changed through MCP"),
    ({"mcp.token": ""}, "mcp.token cannot be changed through MCP"),
    ({"sync.remote": "https://evil.example.com/x.git"}, "sync.remote cannot be changed through MCP"),
    ({"no.such": 1}, "unknown setting: no.such"),
    ({"search.default_limit": "ten"}, "search.default_limit (configure): expected int, got 'ten'"),
    ({"search.default_limit": 500}, "search.default_limit must be between 1 and 100, got 500"),
    ({"search.fusion": "magic"}, "search.fusion must be one of weighted, rrf, dense, got 'magic'"),
    ({"search.default_limit": 5, "search.hybrid_weight": 2}, "search.hybrid_weight must be between 0 and 1"),
])
async def test_configure_refusals_are_invalid_params_and_change_nothing(
        client: Client, app: NmemServer, changes: dict[str, Any], message: str) -> None:
    before = dict(app.service.settings.values)
    text, code, kind = await refused(client, "configure", {"set": changes})
    assert message in text
    assert (code, kind) == (INVALID_PARAMS, "invalid_argument")
    assert app.service.settings.values == before


async def test_configure_names_must_exist(client: Client) -> None:
    text, code, _ = await refused(client, "configure", {"names": ["memory.enabled", "nope"]})
    assert (text, code) == ("unknown setting(s): nope", INVALID_PARAMS)


def test_writable_settings_exist() -> None:
    assert set(WRITABLE) <= {s.name for s in SETTINGS}
    assert not {"memory.enabled", "memory.path", "store.url", "mcp.token", "mcp.host", "sync.remote",
                "capture.exclude_projects"} & set(WRITABLE)


# -- recall and forget (srvrmgr) -----------------------------------------------------------------------

async def test_forget_takes_the_integer_recall_shows(client: Client, seeded: Seeded, service: Service) -> None:
    hits = (await call(client, "recall", {"query": "login", "category": "decisions"}))["results"]
    assert [h["urn"] for h in hits] == [seeded.memory_urn]
    number = hits[0]["number"]
    assert isinstance(number, int)
    out = await call(client, "forget", {"id": number})
    assert (out["id"], out["forgotten"]) == (seeded.memory_id, True)
    assert (await call(client, "recall", {"query": "login", "category": "decisions"}))["results"] == []
    text, code, kind = await refused(client, "forget", {"id": number})
    assert (text, kind) == (f"memory not found: {number}", "not_found")
    _, code, _ = await refused(client, "forget", {"id": 0})
    assert code in (INVALID_PARAMS, -32002)


async def test_recall_detail_spec_and_modes(client: Client, seeded: Seeded, service: Service) -> None:
    service.capture("Version the API in the path", summary="API versioning", namespace="decisions",
                    spec="feature-api", project=PROJECT)
    full = (await call(client, "recall", {"query": "login"}))["results"]
    assert all("content" in r and isinstance(r["number"], int) for r in full)  # MCP default: full
    minimal = (await call(client, "recall", {"query": "login", "detail": "minimal"}))["results"]
    assert {frozenset(r) for r in minimal} == {frozenset({"kind", "id", "namespace", "summary", "urn", "uri",
                                                          "score", "number"})}
    spec = (await call(client, "recall", {"spec": "feature-api"}))["results"]
    assert [r["summary"] for r in spec] == ["API versioning"]
    assert [r["urn"] for r in (await call(client, "recall", {"query": "login", "mode": "bm25",
                                                             "category": "decisions"}))["results"]] == \
        [seeded.memory_urn]
    text, code, kind = await refused(client, "recall", {"query": "login", "mode": "vector"})
    assert text.startswith("recall mode vector needs embeddings") and kind == "config"
    _, code, _ = await refused(client, "recall", {"query": "login", "min_similarity": 2})
    assert code == -32002
    _, code, _ = await refused(client, "recall", {"query": "login", "mode": "bm25", "min_similarity": 0.2})
    assert code == INVALID_PARAMS


async def test_recall_vector_mode_with_the_builtin_embedder(service: Service, seeded: Seeded,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_EMBEDDINGS", "hashing")
    svc = Service(service.store, load_settings())
    async with Client(NmemServer(svc, project=PROJECT).server, mode="legacy") as client:
        out = (await call(client, "recall", {"query": "JWT login sessions", "mode": "vector"}))["results"]
        assert out[0]["urn"] == seeded.memory_urn and 0 < out[0]["similarity"] <= 1
        best = out[0]["similarity"]
        kept = (await call(client, "recall", {"query": "JWT login sessions", "mode": "hybrid",
                                              "min_similarity": best}))["results"]
        assert [r["urn"] for r in kept] == [seeded.memory_urn]


# -- search: ADR-006 strict mode and bare array ---------------------------------------------------------

async def test_search_raw_goes_to_fts5_as_typed(client: Client, seeded: Seeded) -> None:
    ranked = await call(client, "search", {"query": "what broke the login redirect", "scope": "prompts"})
    assert ranked["count"] >= 1
    raw = await call(client, "search", {"query": "what broke the login redirect", "scope": "prompts", "raw": True})
    assert (raw["count"], raw["match"]) == (0, "what broke the login redirect")
    typed = await call(client, "search", {"query": "login redirect", "scope": "prompts", "raw": True})
    assert [r["content_preview"] for r in typed["results"]] == ["fix the flaky login redirect test"]
    _text, code, kind = await refused(client, "search", {"query": "login?", "raw": True})
    assert (code, kind) == (INVALID_PARAMS, "query_syntax")


async def test_search_bare_array_shape(client: Client, seeded: Seeded) -> None:
    result = await client.call_tool("search", {"query": "pytest", "shape": "array"})
    assert not result.is_error
    rows = json.loads(text_of(result))
    assert isinstance(rows, list) and rows
    assert {"id", "timestamp", "obs_type", "content_preview", "file_path", "session_id"} <= set(rows[0])
    assert isinstance(result.structured_content, dict) and result.structured_content["results"] == rows
    tools = {t.name: t for t in (await client.list_tools()).tools}
    check_output(tools["search"], result.structured_content)
    default = await client.call_tool("search", {"query": "pytest"})
    assert json.loads(text_of(default)) == default.structured_content  # the object unless asked
    _text, code, _ = await refused(client, "search", {"query": "pytest", "shape": "table"})
    assert code == INVALID_PARAMS


async def test_search_shape_setting(service: Service, seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_MCP_SEARCH_SHAPE", "array")
    monkeypatch.setenv("NMEM_SEARCH_RAW", "1")
    svc = Service(service.store, load_settings())
    async with Client(NmemServer(svc, project=PROJECT).server, mode="legacy") as client:
        result = await client.call_tool("search", {"query": "what broke the login redirect"})
        assert json.loads(text_of(result)) == []
        result = await client.call_tool("search", {"query": "pytest", "shape": "object", "raw": False})
        assert isinstance(json.loads(text_of(result)), dict)


async def test_array_shape_covers_every_tool_that_lists_rows(service: Service, seeded: Seeded,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMEM_MCP_SEARCH_SHAPE", "array")
    svc = Service(service.store, load_settings())
    async with Client(NmemServer(svc, project=PROJECT).server, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        fetched = await client.call_tool("get_observations", {"ids": [seeded.edit, 999999, seeded.read]})
        rows = json.loads(text_of(fetched))
        assert [r["id"] for r in rows] == [seeded.edit, seeded.read]  # ADR-006: a bare array, input order
        assert fetched.structured_content == {"results": rows, "count": 2}
        check_output(tools["get_observations"], fetched.structured_content)
        recent = await client.call_tool("recent_context", {"limit": 3})
        rows = json.loads(text_of(recent))
        assert isinstance(rows, list) and len(rows) == 3 and all("score" in r for r in rows)
        assert recent.structured_content == {"results": rows, "count": 3}
        assert json.loads(text_of(await client.call_tool("get_observations", {"ids": [424242]}))) == []
        as_object = await client.call_tool("recent_context", {"limit": 3, "shape": "object"})
        assert json.loads(text_of(as_object)) == as_object.structured_content
        _text, code, _ = await refused(client, "get_observations", {"ids": [seeded.edit], "shape": "table"})
        assert code == INVALID_PARAMS


async def test_recent_context_of_a_project_without_observations_is_an_empty_array(
        service: Service, seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    # Other projects have observations; the rule is ADR-006's error table: no rows of its own, `[]`.
    monkeypatch.setenv("NMEM_MCP_SEARCH_SHAPE", "array")
    svc = Service(service.store, load_settings())
    async with Client(NmemServer(svc, project="nothing-here").server, mode="legacy") as client:
        assert json.loads(text_of(await client.call_tool("recent_context", {}))) == []
        named = await client.call_tool("recent_context", {"project": "also-empty"})
        assert json.loads(text_of(named)) == [] and named.structured_content == {"results": [], "count": 0}
        everywhere = json.loads(text_of(await client.call_tool("recent_context", {"project": None})))
        assert {r["project"] for r in everywhere} == {PROJECT, "other"}
        boosted = json.loads(text_of(await client.call_tool("recent_context", {"project": "other"})))
        assert boosted[0]["project"] == "other" and PROJECT in {r["project"] for r in boosted}


async def test_tool_list_advertises_the_new_parameters(client: Client) -> None:
    tools: dict[str, types.Tool] = {t.name: t for t in (await client.list_tools()).tools}
    assert {"raw", "shape"} <= set(tools["search"].input_schema["properties"])
    assert {"mode", "min_similarity", "spec", "detail"} <= set(tools["recall"].input_schema["properties"])
    assert {"names", "set"} == set(tools["configure"].input_schema["properties"])


async def test_status_domain_and_verify(client: Client, seeded: Seeded) -> None:
    everything = await call(client, "status")
    assert everything["by_domain"] == {f"project:{PROJECT}": 1, "user": 1}
    user = await call(client, "status", {"domain": "user", "verify": True})
    assert (user["domain"], user["memories"], user["by_namespace"]) == ("user", 1, {"learnings": 1})
    assert user["verify"]["ok"] is True and set(user["verify"]["fts"]) == {"observations_fts", "prompts_fts",
                                                                          "memories_fts"}
    _, code, _ = await refused(client, "status", {"domain": "galaxy"})
    assert code == -32002
