"""The `subcog` tool profile (subcog §3.2, §7.1) through the official MCP client: in memory, over
stdio (`nmem serve`) and over HTTP (`nmem serve --transport http`), with subcog's `[mcp]` settings
read from config.toml, its tool names, and `subcog://` URIs as aliases of `nmem://` URNs."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_support import CWD, PROJECT, Inbox, Seeded, child_env, http_server, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

pytestmark = pytest.mark.anyio

SUBCOG_TOOLS = ["memory.capture", "memory.recall", "memory.status", "memory.sync", "memory.consolidate",
                "memory.configure"]
# subcog §7.1's `[mcp]` table, as a user would copy it into config.toml
MCP_TABLE = '[mcp]\ntools = "subcog"\nserver_name = "memory"\nsubscriptions = false\nprompts_enabled = false\n'


def subcog_uri(urn: str) -> str:
    return "subcog://" + urn.removeprefix("nmem://")


@pytest.fixture
async def client(service: Service, seeded: Seeded) -> AsyncIterator[Client]:
    async with Client(NmemServer(service, project=PROJECT, tools="subcog").server, mode="legacy") as c:
        yield c


async def test_subcog_profile_lists_subcog_s_tool_names(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == SUBCOG_TOOLS
    assert tools["memory.capture"].input_schema["required"] == ["namespace", "summary"]
    assert tools["memory.recall"].annotations is not None and tools["memory.recall"].annotations.read_only_hint


async def test_memory_capture_answers_as_subcog_s_capture_and_recall_rows_carry_uri(client: Client) -> None:
    kept = structured(await client.call_tool("memory.capture", {
        "namespace": "decisions", "summary": "Use PostgreSQL for data layer", "content": "## Context\nJSONB",
        "tags": ["database"], "spec": "feature-api"}))
    assert (kept["success"], kept["indexed"], kept["warning"]) == (True, True, None)
    assert kept["uri"] == f"nmem://project:{PROJECT}/decisions/{kept['memory_id']}"
    found = structured(await client.call_tool("memory.recall", {"query": "PostgreSQL", "spec": "feature-api"}))
    assert [(r["uri"], r["urn"]) for r in found["results"]] == [(kept["uri"], kept["uri"])]
    status = structured(await client.call_tool("memory.status", {}))
    assert status["memories"] == 3  # the seeded two and this one
    names = structured(await client.call_tool("memory.configure", {"names": ["mcp.server_name"]}))
    assert names["settings"]["mcp.server_name"]["value"] == "nmem"


async def test_memory_capture_refuses_what_subcog_requires(client: Client) -> None:
    assert tool_error(await client.call_tool("memory.capture", {"namespace": "decisions"})) == \
        "invalid arguments for memory.capture: arguments: 'summary' is a required property"
    too_long = tool_error(await client.call_tool("memory.capture", {"namespace": "decisions", "summary": "x" * 101}))
    assert too_long.startswith("invalid arguments for memory.capture: summary:")
    assert tool_error(await client.call_tool("memory.capture", {"namespace": " ", "summary": "s"})) == \
        "namespace is required (decisions, learnings, patterns, blockers, progress, ...)"
    assert structured(await client.call_tool("memory.recall", {"query": "x" * 10}))["count"] == 0


async def test_subcog_uris_read_the_same_resource(client: Client, seeded: Seeded) -> None:
    alias = subcog_uri(seeded.memory_urn)
    content = (await client.read_resource(alias)).contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == alias and json.loads(content.text)["id"] == seeded.memory_id
    with pytest.raises(MCPError):
        await client.read_resource("subcog://project:demo/decisions/01JNOSUCHMEMORY0000000000")


async def test_nmem_tools_take_subcog_uris(service: Service, seeded: Seeded) -> None:
    async with Client(NmemServer(service, project=PROJECT).server, mode="legacy") as c:
        alias = subcog_uri(seeded.memory_urn)
        opened = structured(await c.call_tool("get", {"refs": [alias]}))
        assert [r["id"] for r in opened["results"]] == [seeded.memory_id]
        gone = structured(await c.call_tool("forget", {"urn": alias}))
        assert (gone["forgotten"], gone["urn"]) == (True, seeded.memory_urn)


async def test_a_subcog_subscription_is_notified_on_its_own_uri(service: Service, seeded: Seeded) -> None:
    inbox = Inbox()
    app = NmemServer(service, project=PROJECT, tools="subcog", poll_interval=0.05)
    alias = subcog_uri(seeded.memory_urn)
    async with app.running(), Client(app.server, mode="legacy", message_handler=inbox) as c:
        with warnings.catch_warnings():  # resources/subscribe is deprecated in 2026-07-28; this is 2025-11-25
            warnings.simplefilter("ignore")
            await c.subscribe_resource(alias)
        service.update(seeded.memory_id, summary="JWT for login sessions, rotated")
        await inbox.wait_updated(alias)


def stdio_params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "nmem", "serve"],
                                 env=child_env(home, CLAUDE_PROJECT_DIR=CWD), cwd=str(home.parent))


@pytest.mark.slow
async def test_mcp_table_of_config_toml_over_stdio(nmem_home: Path, seeded: Seeded, tmp_path: Path) -> None:
    (nmem_home / "config.toml").write_text(MCP_TABLE, encoding="utf-8")
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(stdio_params(nmem_home), errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "memory"
            assert init.capabilities.prompts is None  # prompts_enabled = false
            assert init.capabilities.resources is not None and init.capabilities.resources.subscribe is False
            assert [t.name for t in (await session.list_tools()).tools] == SUBCOG_TOOLS
            kept = structured(await session.call_tool("memory.capture", {"namespace": "learnings",
                                                                         "summary": "stdio speaks subcog"}))
            found = structured(await session.call_tool("memory.recall", {"query": "stdio"}))
            assert [r["uri"] for r in found["results"]] == [kept["uri"]]
            content = (await session.read_resource(subcog_uri(kept["uri"]))).contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert json.loads(content.text)["summary"] == "stdio speaks subcog"
            with pytest.raises(MCPError), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await session.subscribe_resource(subcog_uri(kept["uri"]))


@pytest.mark.slow
async def test_subcog_profile_over_http(nmem_home: Path, seeded: Seeded) -> None:
    (nmem_home / "config.toml").write_text('[mcp]\ntools = "subcog"\nserver_name = "memory"\n', encoding="utf-8")
    with http_server(nmem_home, env={"CLAUDE_PROJECT_DIR": CWD}) as server:
        async with create_mcp_http_client() as http, \
                Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
            assert client.server_info is not None and client.server_info.name == "memory"
            assert [t.name for t in (await client.list_tools()).tools] == SUBCOG_TOOLS
            found = structured(await client.call_tool("memory.recall", {"query": "JWT"}))
            assert [r["uri"] for r in found["results"]] == [seeded.memory_urn]
            content = (await client.read_resource(subcog_uri(seeded.memory_urn))).contents[0]
            assert json.loads(content.text)["id"] == seeded.memory_id  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_seed_s_recall_pipe_prints_uris(nmem_home: Path, seeded: Seeded) -> None:
    """§2.4: `memory recall --namespace decisions --format json | jq -r '.results[].uri'`, and `-l`."""
    recall = subprocess.run([sys.executable, "-m", "nmem", "recall", "--namespace", "decisions", "-l", "5",
                             "--project", PROJECT, "--format", "json"], env=child_env(nmem_home),
                            capture_output=True, check=True)
    uris = subprocess.run(["jq", "-r", ".results[].uri"], input=recall.stdout, capture_output=True, check=True)
    assert uris.stdout.decode().splitlines() == [seeded.memory_urn]
