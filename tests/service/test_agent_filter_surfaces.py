"""The agent filter on every surface: the CLI (a real `nmem` process), the MCP tools (the
official client), the REST API and claude-mem's worker routes give the same records for the
same `agent`, name each hit's agent, and refuse an unknown name the surface's way (exit 2,
a tool error, HTTP 400) with the list of known agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from agent_support import CODEX, GEMINI, seed_agents
from http_support import error_of, http_client
from mcp_support import PROJECT, child_env, structured, tool_error
from nmem.capture.agents import AGENTS
from nmem.service.api import Service

pytestmark = pytest.mark.anyio
KNOWN = "known agents: " + ", ".join(AGENTS)


@pytest.fixture
def seeded(service: Service) -> Any:  # the MCP `client` fixture's app reads this store
    return seed_agents(service)


@pytest.fixture
async def api(service: Service, seeded: Any) -> Any:
    async with http_client(service, project=PROJECT) as client:
        yield client


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    here = home.parent / PROJECT
    here.mkdir(exist_ok=True)
    store = {"NMEM_STORE_URL": os.environ["NMEM_STORE_URL"]} if "NMEM_STORE_URL" in os.environ else {}  # PostgreSQL's
    return subprocess.run([sys.executable, "-m", "nmem", *args], cwd=here, capture_output=True, text=True,
                          env=child_env(home, **store), timeout=60, check=False)


def cli_json(home: Path, *args: str) -> Any:
    done = cli(home, *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def keys(rows: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    return [(row["kind"], row["id"], row.get("agent")) for row in rows]


async def test_search_by_agent_answers_alike_everywhere(client: Client, api: httpx2.AsyncClient,
                                                        nmem_home: Path) -> None:
    by_cli = keys(cli_json(nmem_home, "search", "invoice export", "--agent", "codex", "--agent", "gemini"))
    by_mcp = keys(structured(await client.call_tool("search", {"query": "invoice export",
                                                               "agent": ["codex", "gemini"]}))["results"])
    by_rest = keys((await api.get("/api/v1/search", params={"query": "invoice export",
                                                            "agent": ["codex", "gemini"]})).json()["results"])
    assert by_cli and {agent for _, _, agent in by_cli} == {"codex", "gemini"}
    assert by_mcp == by_cli
    assert by_rest == by_cli
    everyone = keys(structured(await client.call_tool("search", {"query": "invoice export"}))["results"])
    assert {"memory", "observation"} <= {kind for kind, _, _ in everyone} and len(everyone) > len(by_cli)


async def test_claude_mem_routes_take_the_agent_filter(api: httpx2.AsyncClient) -> None:
    found = (await api.get("/api/search", params={"query": "invoice export", "format": "json",
                                                  "agent": "gemini"})).json()
    rows = [row for kind in ("observations", "sessions", "prompts") for row in found.get(kind, [])]
    assert rows and {row.get("memory_session_id") or row.get("content_session_id") for row in rows} == {GEMINI}
    assert found.get("memories", []) == []
    refused = await api.get("/api/search", params={"query": "invoice", "agent": "vim"})
    assert refused.status_code == 400 and KNOWN in refused.text


async def test_sessions_trace_and_timeline_by_agent_everywhere(client: Client, api: httpx2.AsyncClient,
                                                               nmem_home: Path) -> None:
    listed = cli_json(nmem_home, "sessions", "--agent", "codex")
    assert [(r["id"], r["agent"]) for r in listed] == [(CODEX, "codex")]
    rest = (await api.get("/api/v1/sessions", params={"agent": "codex"})).json()["results"]
    assert [(r["id"], r["agent"]) for r in rest] == [(CODEX, "codex")]
    table = cli(nmem_home, "sessions", "--format", "text")
    assert table.returncode == 0 and "codex" in table.stdout and "gemini" in table.stdout
    traced = cli_json(nmem_home, "trace", "--agent", "codex")
    assert (traced["session_id"], traced["agent"]) == (CODEX, "codex")
    by_mcp = structured(await client.call_tool("session_trace", {"agent": "codex"}))
    assert (by_mcp["session_id"], by_mcp["agent"]) == (CODEX, "codex")
    by_rest = (await api.get(f"/api/v1/sessions/{CODEX}/trace", params={"agent": "gemini"}))
    assert by_rest.status_code == 404 and "not gemini" in error_of(by_rest)["message"]
    timeline = structured(await client.call_tool("timeline", {"query": "invoice export", "agent": "gemini"}))
    assert (timeline["agent"], timeline["anchor"]["session_id"]) == ("gemini", GEMINI)
    assert cli_json(nmem_home, "timeline", "--query", "invoice export", "--agent", "gemini") == timeline


async def test_an_unknown_agent_is_refused_on_every_surface(client: Client, api: httpx2.AsyncClient,
                                                           nmem_home: Path) -> None:
    for args in (["search", "invoice", "--agent", "vim"], ["sessions", "--agent", "vim"],
                 ["trace", "--agent", "vim"], ["timeline", "--query", "invoice", "--agent", "vim"]):
        done = cli(nmem_home, *args)
        assert done.returncode == 2 and KNOWN in done.stderr, (args, done.stderr)
    for tool, args in (("search", {"query": "invoice"}), ("session_trace", {}),
                       ("timeline", {"query": "invoice"})):
        assert KNOWN in tool_error(await client.call_tool(tool, {**args, "agent": "vim"}))
    for path, asked in (("/api/v1/search", {"query": "invoice"}), ("/api/v1/sessions", {}),
                        ("/api/v1/timeline", {"query": "invoice"}), (f"/api/v1/sessions/{CODEX}/trace", {})):
        refused = await api.get(path, params={**asked, "agent": "vim"})
        assert refused.status_code == 400 and KNOWN in error_of(refused)["message"], path
