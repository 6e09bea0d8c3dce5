"""nmem:// resources, templates, pagination and prompts through the official SDK client, in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client, MCPError, types
from mcp.shared.uri_template import UriTemplate
from pydantic import AnyUrl, ValidationError

from mcp_support import PROJECT, T0, Seeded
from nmem.adapters.mcp.resources import as_uri
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service
from store_engines import both_engines

__all__ = ["both_engines"]  # every test here runs on SQLite and PostgreSQL

pytestmark = pytest.mark.anyio

RESOURCE_NOT_FOUND = -32002  # 2025-11-25


async def read_json(client: Client, uri: str) -> Any:
    result = await client.read_resource(uri)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert str(content.uri) == uri
    assert content.mime_type == "application/json"
    return json.loads(content.text)


async def all_pages(client: Client) -> list[list[types.Resource]]:
    pages: list[list[types.Resource]] = []
    cursor: str | None = None
    while True:
        page = await client.list_resources(cursor=cursor, cache_mode="bypass")
        pages.append(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 20, "pagination does not end"


# -- capabilities and templates -------------------------------------------------------------------


async def test_capabilities_advertise_subscribe_and_list_changed(client: Client) -> None:
    caps = client.server_capabilities
    assert caps.resources is not None
    assert (caps.resources.subscribe, caps.resources.list_changed) == (True, True)
    assert caps.prompts is not None
    assert caps.tools is not None


async def test_templates_are_listed(client: Client) -> None:
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [
        "nmem://{domain}/{namespace}/{id}", "nmem://{domain}/{namespace}", "nmem://{domain}"]
    for t in templates:
        assert t.name and t.description
        assert t.mime_type == "application/json"


# -- resources/list --------------------------------------------------------------------------------


async def test_list_is_paginated_with_cursors_no_repeats_no_gaps(client: Client, service: Service,
                                                                  seeded: Seeded) -> None:
    expected = {seeded.memory_urn, seeded.user_memory_urn}
    with service.store.transaction():
        for i in range(128):
            # many memories share a timestamp (a bulk import within one second): ties must not shuffle pages
            memory = service.remember(f"fact number {i}", namespace=("decisions", "learnings", "gotchas")[i % 3],
                                      project=PROJECT if i % 5 else "other", at=T0 + 100 + i // 40)
            expected.add(memory.urn)
    gone = service.remember("to be forgotten", namespace="context", project=PROJECT, at=T0 + 500)
    service.forget(gone.urn)

    pages = await all_pages(client)
    assert [len(p) for p in pages] == [50, 50, 30]
    urns = [str(r.uri) for page in pages for r in page]
    assert len(urns) == len(set(urns)), "a memory is listed twice"
    assert set(urns) == {as_uri(u) for u in expected}, "memories missing from the listing"
    assert as_uri(gone.urn) not in urns
    first = pages[0][0]
    assert first.mime_type == "application/json"
    assert first.name and first.title


async def test_list_with_few_memories_has_no_next_cursor(client: Client, seeded: Seeded) -> None:
    page = await client.list_resources()
    assert page.next_cursor is None
    assert {str(r.uri) for r in page.resources} == {as_uri(seeded.memory_urn), seeded.user_memory_urn}


@pytest.mark.parametrize("cursor", ["not-a-cursor", "-50", "1.5"])
async def test_invalid_cursor_is_invalid_params(client: Client, cursor: str) -> None:
    with pytest.raises(MCPError) as err:
        await client.list_resources(cursor=cursor)
    assert err.value.code == -32602


# -- resources/read --------------------------------------------------------------------------------


async def test_read_memory_urn(client: Client, seeded: Seeded) -> None:
    memory = await read_json(client, seeded.memory_urn)
    assert memory["id"] == seeded.memory_id
    assert memory["urn"] == seeded.memory_urn
    assert memory["content"] == "Login sessions use JWT with a one hour ttl; refresh tokens rotate."
    assert (memory["domain"], memory["namespace"], memory["tags"]) == ("project:demo", "decisions", ["auth", "jwt"])


async def test_read_namespace_urn(client: Client, seeded: Seeded) -> None:
    listing = await read_json(client, "nmem://project:demo/decisions")
    assert listing["uri"] == "nmem://project%3Ademo/decisions"
    assert [item["urn"] for item in listing["items"]] == [seeded.memory_urn]
    assert listing["items"][0]["summary"] == "JWT for login sessions"


async def test_read_domain_urn(client: Client, seeded: Seeded) -> None:
    project = await read_json(client, "nmem://project:demo")
    by_ns = {n["namespace"]: n for n in project["namespaces"]}
    assert by_ns["decisions"] == {"namespace": "decisions", "count": 1, "uri": "nmem://project%3Ademo/decisions"}
    assert {"observations", "prompts", "sessions"} <= set(by_ns)
    user = await read_json(client, "nmem://user")
    assert user["namespaces"] == [{"namespace": "learnings", "count": 1, "uri": "nmem://user/learnings"}]


async def test_read_observation_prompt_and_session_urns(client: Client, seeded: Seeded) -> None:
    obs = await read_json(client, f"nmem://project:demo/observations/{seeded.failure}")
    assert (obs["id"], obs["obs_type"], obs["session_id"]) == (seeded.failure, "command_error", "s1")
    prompt = await read_json(client, f"nmem://project:demo/prompts/{seeded.prompt}")
    assert prompt["content"] == "fix the flaky login redirect test"
    session = await read_json(client, "nmem://project:demo/sessions/s1")
    assert (session["session_id"], session["project"]) == ("s1", PROJECT)
    assert session["prompts"][1]["content"] == "fix the flaky login redirect test"
    recent = await read_json(client, "nmem://project:demo/observations")
    assert {item["id"] for item in recent["items"]} == {seeded.start, seeded.test_run, seeded.failure,
                                                        seeded.read, seeded.edit, seeded.lonely}
    assert recent["items"][0]["id"] == seeded.lonely  # newest first
    sessions = await read_json(client, "nmem://project:demo/sessions")
    assert {item["id"] for item in sessions["items"]} == {"s1", "s-lonely"}


# -- URIs strict clients accept -----------------------------------------------------------------------


async def test_listed_uris_are_rfc3986_uris_that_read_back(client: Client, service: Service, seeded: Seeded) -> None:
    service.remember("a project name with a space and an accent", namespace="decisions", project="my café")
    listed = [str(r.uri) for page in await all_pages(client) for r in page]
    for uri in listed:
        assert str(AnyUrl(uri)) == uri  # what the 1.x Python SDK validates (and re-sends) every resource URI with
        assert (await read_json(client, uri))["urn"] in {seeded.memory_urn, seeded.user_memory_urn,
                                                          *(m.urn for m in service.store.iter_memories(None, None))}
    assert "nmem://project%3Amy%20caf%C3%A9/decisions/" in " ".join(listed)
    with pytest.raises(ValidationError):  # why: a ':' in the authority is a port, and must be digits
        AnyUrl(seeded.memory_urn)


async def test_both_forms_of_a_urn_read_the_same_thing(client: Client, seeded: Seeded) -> None:
    template = UriTemplate.parse("nmem://{domain}/{namespace}/{id}")
    expanded = template.expand({"domain": "project:demo", "namespace": "decisions", "id": seeded.memory_id})
    assert expanded == as_uri(seeded.memory_urn) != seeded.memory_urn  # RFC 6570 encodes the ':'
    assert await read_json(client, expanded) == await read_json(client, seeded.memory_urn)
    trail = f"nmem://project%3Ademo/observations/{seeded.failure}"
    assert (await read_json(client, trail))["id"] == seeded.failure
    assert (await read_json(client, "nmem://project%3Ademo"))["uri"] == "nmem://project%3Ademo"


@pytest.mark.parametrize("uri", [
    "nmem://project%3Ademo/decisions%2Fx/01NOSUCHMEMORY0000000000000",   # an encoded '/' is no separator
    "nmem://project:demo/decisions/01NOSUCHMEMORY0000000000000",
    "nmem://project:demo/observations/999999",
    "nmem://project:other/observations/3",          # exists, but in project demo
    "nmem://project:demo/observations/abc",
    "nmem://project:demo/prompts/999",
    "nmem://project:demo/sessions/no-such-session",
    "nmem://project:other/sessions/s1",             # s1 belongs to demo
    "nmem://no-such-domain",
    "nmem://project:demo/observations/99999999999999999999",    # beyond SQLite's integers
    "nmem://project:demo/prompts/-1",
    "file:///etc/passwd",
    "https://example.com/x",
])
async def test_unknown_urn_is_resource_not_found(client: Client, uri: str) -> None:
    with pytest.raises(MCPError) as err:
        await client.read_resource(uri)
    assert err.value.code == RESOURCE_NOT_FOUND
    assert err.value.message == "Resource not found"
    assert err.value.data == {"uri": uri, "code": -32001, "kind": "not_found"}  # nmem's own code rides along


async def test_memory_urn_under_the_wrong_namespace_or_forgotten_is_not_found(client: Client, service: Service,
                                                                               seeded: Seeded) -> None:
    wrong = seeded.memory_urn.replace("/decisions/", "/learnings/")
    with pytest.raises(MCPError) as err:
        await client.read_resource(wrong)
    assert err.value.code == RESOURCE_NOT_FOUND
    service.forget(seeded.memory_urn)
    with pytest.raises(MCPError) as err:
        await client.read_resource(seeded.memory_urn)
    assert err.value.code == RESOURCE_NOT_FOUND


async def test_modern_client_lists_and_reads_and_gets_invalid_params_for_unknown(app: NmemServer,
                                                                                seeded: Seeded) -> None:
    async with Client(app.server) as modern:
        assert modern.protocol_version == "2026-07-28"
        page = await modern.list_resources()
        assert {str(r.uri) for r in page.resources} == {as_uri(seeded.memory_urn), seeded.user_memory_urn}
        memory = await read_json(modern, seeded.memory_urn)
        assert memory["id"] == seeded.memory_id
        with pytest.raises(MCPError) as err:
            await modern.read_resource("nmem://project:demo/observations/999999")
        assert err.value.code == -32602  # SEP-2164: resource-not-found became invalid params in 2026-07-28
        templates = (await modern.list_resource_templates()).resource_templates
        assert len(templates) == 3


# -- prompts ---------------------------------------------------------------------------------------


async def test_prompts_are_listed_with_descriptions_and_arguments(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"capture-decision", "recall-context"}
    for p in prompts.values():
        assert p.description and p.title
    capture = {a.name: a for a in prompts["capture-decision"].arguments or []}
    assert (capture["summary"].required, capture["context"].required) == (True, False)
    recall = {a.name: a for a in prompts["recall-context"].arguments or []}
    assert recall["topic"].required is True
    assert all(a.description for a in [*capture.values(), *recall.values()])


async def test_get_prompt_with_arguments(client: Client) -> None:
    got = await client.get_prompt("capture-decision", {"summary": "Use JWT for sessions",
                                                        "context": "Cookies broke the mobile app"})
    assert got.description
    (message,) = got.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert "Decision: Use JWT for sessions" in message.content.text
    assert "Context: Cookies broke the mobile app" in message.content.text
    assert "`remember`" in message.content.text
    only_summary = await client.get_prompt("capture-decision", {"summary": "Use JWT"})
    assert "Decision: Use JWT" in only_summary.messages[0].content.text  # type: ignore[union-attr]
    recall = await client.get_prompt("recall-context", {"topic": "login redirect"})
    text = recall.messages[0].content.text  # type: ignore[union-attr]
    assert '"login redirect"' in text and "`recall`" in text and "`search`" in text


@pytest.mark.parametrize(("name", "arguments", "missing"), [
    ("recall-context", {}, "topic"),
    ("recall-context", {"topic": ""}, "topic"),
    ("capture-decision", {"context": "why"}, "summary"),
])
async def test_get_prompt_missing_required_argument_is_invalid_params(
        client: Client, name: str, arguments: dict[str, str], missing: str) -> None:
    with pytest.raises(MCPError) as err:
        await client.get_prompt(name, arguments)
    assert err.value.code == -32602
    assert err.value.message == f"Missing required argument: {missing}"


async def test_get_unknown_prompt_is_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as err:
        await client.get_prompt("no-such-prompt", {})
    assert err.value.code == -32602


@pytest.mark.parametrize("project", ["acme/web", "a%20b", "50%", "my café"])
async def test_odd_project_names_list_and_read_back_in_both_forms(client: Client, service: Service,
                                                                  project: str) -> None:
    memory = service.remember(f"a decision for {project}", namespace="decisions", project=project)
    listed = [str(r.uri) for page in await all_pages(client) for r in page]
    (uri,) = [u for u in listed if u.endswith(memory.id)]
    assert str(AnyUrl(uri)) == uri
    assert (await read_json(client, uri))["urn"] == memory.urn
    if "/" not in project:  # the form nmem writes cannot hold a '/' in a project name unambiguously
        assert (await read_json(client, memory.urn))["id"] == memory.id
