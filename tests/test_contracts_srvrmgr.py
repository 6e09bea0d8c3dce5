"""srvrmgr's memory layer contracts not covered elsewhere: MCP config merging (the memory
server, a rule's MCP configs, the global default ones, in that order) and the rule a memory
comes from (`rule_name` / `source`), through real processes, the official MCP client and REST."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from conftest import run_nmem
from http_support import http_client
from mcp_support import PROJECT, child_env, structured, tool_error
from nmem.adapters.mcp.server import NmemServer
from nmem.service.api import Service

CSRF = {"X-Nmem-CSRF": "1"}


def config_file(path: Path, servers: dict[str, Any]) -> str:
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def merged(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], str]:
    done = run_nmem(["mcp-config", *args], env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["mcpServers"], done.stderr


def test_mcp_config_merges_memory_then_the_rules_then_the_global_configs(nmem_home: Path, tmp_path: Path) -> None:
    rule = config_file(tmp_path / "rule.json", {"files": {"command": "files-server"},
                                                "shared": {"command": "the-rules-shared"}})
    other = config_file(tmp_path / "rule2.json", {"nmem": {"command": "an-impostor"}})
    default = config_file(tmp_path / "global.json", {"shared": {"command": "the-global-shared"},
                                                     "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}})
    env = child_env(nmem_home, NMEM_MCP_MERGE_CONFIGS=default)
    servers, notes = merged(["--merge", rule, "--merge", other, "--rule", "organize-downloads"], env)
    assert list(servers) == ["nmem", "files", "shared", "web"]  # srvrmgr's order: memory, rule, global
    assert servers["nmem"]["args"] == ["serve", "--source", "organize-downloads"]
    assert servers["shared"] == {"command": "the-rules-shared"}  # the rule's own stands over the default
    assert "'nmem' left out, already defined by nmem" in notes  # nothing replaces the memory server
    assert f"{default}: server 'shared' left out, already defined by {rule}" in notes
    plain, _ = merged([], child_env(nmem_home))
    assert list(plain) == ["nmem"] and plain["nmem"]["args"] == ["serve"]


def test_mcp_config_leaves_memory_out_for_a_rule_or_a_user_that_turned_it_off(nmem_home: Path,
                                                                              tmp_path: Path) -> None:
    rule = config_file(tmp_path / "rule.json", {"files": {"command": "files-server"}})
    servers, _ = merged(["--merge", rule, "--no-memory"], child_env(nmem_home))
    assert list(servers) == ["files"]  # srvrmgr's `memory: false` on a rule
    servers, _ = merged(["--merge", rule], child_env(nmem_home, NMEM_ENABLED="false"))
    assert list(servers) == ["files"]  # memory.enabled = false: memory is not injected


@pytest.mark.parametrize(("content", "message"), [
    (None, "no MCP config file at"),
    ("{not json", "is not JSON"),
    ('{"servers": {}}', "is not an MCP config"),
    ('{"mcpServers": {"x": 1}}', "is not an MCP config"),
])
def test_mcp_config_refuses_what_is_not_an_mcp_config(nmem_home: Path, tmp_path: Path, content: str | None,
                                                      message: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    done = run_nmem(["mcp-config", "--merge", str(path)], env=child_env(nmem_home))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.anyio
async def test_the_merged_nmem_entry_runs_and_attributes_memories_to_the_rule(nmem_home: Path, tmp_path: Path,
                                                                              service: Service) -> None:
    servers, _ = merged(["--rule", "organize-downloads"], child_env(nmem_home))
    entry = servers["nmem"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=child_env(nmem_home),
                                   cwd=os.getcwd())
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ruled = await session.call_tool("remember", {"content": "Invoices land in ~/Downloads/inv-*.pdf",
                                                         "category": "file-patterns"})
            assert not ruled.is_error
            named = await session.call_tool("remember", {"content": "The bank API pages by cursor",
                                                         "rule_name": "reconcile-bank"})
            assert not named.is_error
    assert ruled.structured_content is not None and named.structured_content is not None
    assert service.get_memory(ruled.structured_content["id"]).source == "organize-downloads"
    assert service.get_memory(named.structured_content["id"]).source == "reconcile-bank"


@pytest.mark.anyio
async def test_remember_takes_rule_name_or_source_through_mcp_and_rest(service: Service) -> None:
    async with Client(NmemServer(service, project=PROJECT).server, mode="legacy") as client:
        default = structured(await client.call_tool("remember", {"content": "Default attribution"}))
        assert default["memory"]["source"] == "mcp"
        ruled = structured(await client.call_tool("remember", {"content": "A rule's note", "rule_name": "nightly"}))
        assert ruled["memory"]["source"] == "nightly"
        bad = await client.call_tool("remember", {"content": "x", "source": "two\nlines"})
        assert "source (rule_name) must be one printable line" in tool_error(bad)
    async with http_client(service, project=PROJECT) as api:
        created = await api.post("/api/v1/memories", headers=CSRF, json={"content": "From a script",
                                                                         "rule_name": "backup-check"})
        assert created.status_code == 201, created.text
        assert created.json()["source"] == "backup-check"
    before = service.status()["memories"]
    done = run_nmem(["remember", "Kept by a cron job", "--source", "cron:weekly", "--format", "json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == "cron:weekly"
    assert service.status()["memories"] == before + 1


@pytest.mark.anyio
async def test_srvrmgrs_four_categories_are_namespaces_recall_filters_on(service: Service) -> None:
    categories = ("file-patterns", "api-behaviors", "system-quirks", "naming-conventions")
    async with Client(NmemServer(service, project=PROJECT).server, mode="legacy") as client:
        for category in categories:
            saved = structured(await client.call_tool("remember", {"content": f"A note about {category}",
                                                                   "category": category}))
            assert saved["memory"]["namespace"] == category
        for category in categories:
            found = structured(await client.call_tool("recall", {"query": "note", "category": category}))
            assert [r["namespace"] for r in found["results"]] == [category]


def test_the_default_http_port_is_claude_mems_worker_port(nmem_home: Path) -> None:
    servers, _ = merged(["--transport", "http"], child_env(nmem_home))
    assert servers["nmem"]["url"] == "http://127.0.0.1:37777/mcp"
